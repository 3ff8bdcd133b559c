"""The one door to persistence: the `Store` protocol every backend implements.

Callers get records (memory/records.py), never rows or connections; each backend keeps its SQL,
its migrations and its locking to itself (memory/sqlite/ is the one backend today). memory/backends.py
opens one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, Protocol

from memory.errors import Failure
from memory.records import (
    AutonomyEntry,
    AutonomyKind,
    Branch,
    BranchKind,
    BranchStatus,
    MemoryChannel,
    MemoryRecord,
    Message,
    MessageMatch,
    ModelUsage,
    NewMessage,
    Opening,
    PlaybookRun,
    PlaybookStep,
    Recalled,
    RunStatus,
    Scope,
    Task,
    TaskStatus,
    Thread,
    Versions,
)
from memory.settings import Triggers

Clock = Callable[[], float]

# A trimmed window's state, cleared when it restarts (a cut) or when what it summarises is erased.
WINDOW_GAP: dict[str, Any] = {
    "window_gap_from": None, "window_gap_to": None, "window_bridge": None, "window_bridge_first_at": None,
    "window_bridge_last_at": None, "window_bridge_from": None, "window_trims": 0, "window_cached_after": None,
}
# A window started afresh: what stands in for its older messages (rolling summary, bridge) goes with the memory it
# showed. An erasure does this to the erased messages' threads and their ancestors in the purge's own transaction.
WINDOW_RESET: dict[str, Any] = {
    "window_start_seq": None, "window_summary": None, "window_summary_from": None, "window_summary_to": None,
    "window_summary_first_at": None, "window_summary_last_at": None, "memory_as_of": None, **WINDOW_GAP,
}


MAX_BACKOFF = 3_600.0  # the longest wait before a failed memory update is tried again


# What a copy between databases carries, in an order that keeps every reference valid, each table with the
# columns that order its rows (a page starts after the last key of the one before).
COPIED_TABLES: dict[str, tuple[str, ...]] = {
    "branches": ("id",), "threads": ("id",), "messages": ("seq",), "memory_records": ("id",),
    "memory_channels": ("thread_id",), "memory_pins": ("id",), "settings": ("scope", "scope_id", "key"),
    "optouts": ("persona", "user_id"), "playbook_runs": ("id",), "playbook_steps": ("id",), "tasks": ("id",),
    "autonomy_log": ("id",), "model_usage": ("persona", "guild_id", "day", "model"), "erasures": ("seq",),
    "recall_counts": ("word",),  # recall's saved word counts: the copy's first start need not count every word
}


def copy_keys(table: str) -> tuple[str, ...]:
    """The key columns of a table a copy carries; any other name is refused before it reaches SQL."""
    if table not in COPIED_TABLES:
        raise ValueError(f"{table!r} is not a table a copy carries ({', '.join(COPIED_TABLES)})")
    return COPIED_TABLES[table]


class StoreError(Failure):
    """The database cannot be used as it is (for example, written by a newer Stelis, or a full disk)."""


class OtherServer(Failure):
    """A channel id already known as another server's conversation: channel ids name one server's channel."""

    def __init__(self, channel_id: int | None):
        super().__init__(f"channel {channel_id} belongs to another server: nothing of it is read or said from here")


class OptedOut(Failure):
    """The message's author asked the persona not to remember them: it is not stored (the opt-out may have been
    made a moment ago, in another process sharing the database)."""

    def __init__(self, author_id: int | None):
        super().__init__(f"user {author_id} asked not to be remembered: their message is not stored")


class StaleUpdate(StoreError):
    """Another worker wrote this memory update first (its lease ran out while this one worked): nothing saved."""


class StaleSummary(StoreError):
    """A summary of a thread's messages (a window's, a chronicle) read them before one changed (was erased): not
    saved, or the erasure would live on in it."""


STALE_RETRIES = 2  # a summary an erasure voided is written again this many times before StaleSummary goes through


def backoff(base_delay: float, failures: int) -> float:
    """How long a memory update waits after its n-th failure in a row: doubling, at most an hour."""
    return float(min(MAX_BACKOFF, base_delay * 2 ** (failures - 1)))


def numbered_migrations(folder: Path) -> list[Path]:
    """A backend's numbered migration scripts, in order; a gap in the numbering is a packaging error."""
    files = sorted(folder.glob("[0-9][0-9][0-9][0-9]_*.sql"))
    numbers = [int(f.name[:4]) for f in files]
    if numbers != list(range(1, len(files) + 1)):
        raise StoreError(f"migrations in {folder} are not numbered 1..n: {numbers}")
    return files

class Database(Protocol):
    """The database itself: opening, migrating, what other processes changed, and copying it whole."""

    async def close(self) -> None:
        ...

    def pool_usage(self) -> tuple[int, int]:
        """Connections in use and how many there may be (for the metrics)."""
        ...

    async def schema_version(self) -> int:
        ...

    async def migrate(self) -> int:
        """Apply pending migrations in order, each in its own transaction; return how many ran."""
        ...

    async def opening(self, thread_id: int, after_seq: int | None, limit: int, versions: int = 0) -> Opening:
        """What an assembly reads first, in one round trip: a thread as noted (KeyError if none) and the newest
        memory record's id (what a request whose cache went cold shows memory as of), the counters caches key on
        first moved past what other processes sharing the database erased or edited; with at most `limit` of the
        thread's live messages newest first, those after `after_seq` (None: from its window's start); with
        `versions`, its own memory too (records.own_memory with its own places, as of its newest record)."""
        ...

    def held(self) -> AbstractAsyncContextManager[None]:
        """Within the block, this task's statements share one connection (while it holds one, it must not wait
        on another task that needs a connection: run no model call and start no look-up inside)."""
        ...

    async def table_rows(self, table: str, after: tuple[Any, ...] | None, limit: int) -> list[dict[str, Any]]:
        """A page of a table's rows as column -> value, in key order, after the key `after` (None: from the
        start)."""
        ...

    async def load_rows(self, table: str, rows: list[dict[str, Any]]) -> int:
        """Insert rows as they are (ids and revisions included), skipping those already present; how many were new.
        A copy goes into a database no process has read yet: no cache to tell."""
        ...

    async def count_rows(self, table: str) -> int:
        ...


class ThreadsAndMessages(Protocol):
    """Conversations, their Stelis threads and the messages in them, erasures included."""

    async def find_root(self, persona: str, scope: Scope) -> Thread | None:
        """The root thread of a scope, if it exists: reading never creates one."""
        ...

    async def root_thread(self, persona: str, scope: Scope, window_ratio: float) -> Thread:
        """A scope's root thread, created on first use; OtherServer if its channel is another server's."""
        ...

    async def thread(self, thread_id: int) -> Thread:
        ...

    async def find_thread(self, thread_id: int) -> Thread | None:
        ...

    async def thread_with_count(self, thread_id: int) -> tuple[Thread, int] | None:
        """A thread and how many messages it holds, in one round trip (a live Stelis thread's status)."""
        ...

    def saw_conversation(self, thread_id: int) -> None:
        """A conversation's memory is kept: the first time this process sees it, it may be new to its server."""
        ...

    async def insert_thread(self, thread: Thread) -> Thread:
        """A thread with its id as given (snapshot import into an empty database)."""
        ...

    async def create_thread(
        self, parent: Thread, *, kind: str, label: str, window_ratio: float, chronicle_prompt: str | None,
        run_id: str | None, discord_thread_id: int | None = None, branch_id: str | None = None,
        anchor: NewMessage | None,
    ) -> tuple[Thread, Message | None]:
        """A child thread and its anchor message in the parent, in one transaction (a subagent's
        temporary thread has no anchor: nothing of it shows in the parent)."""
        ...

    async def close_thread(self, ended: Thread, anchor_metadata: dict[str, Any] | None, anchor_tokens: int, *,
                           revision: int | None = None) -> Thread:
        """Save an ended thread's status and chronicle and fix its anchor's final form, atomically; with `revision`
        (the thread's when they were read from its messages), StaleSummary and nothing saved if one changed since."""
        ...

    async def children(self, thread_id: int) -> list[Thread]:
        ...

    async def active_internal_threads(self, stale_before: float | None = None) -> list[Thread]:
        """Active non-root threads that are not a branch's session (a Discord thread's, a task's: those live by
        their branch, suspended and resumed) whose process has not beaten since `stale_before` (when given):
        candidates for the start-up sweep."""
        ...

    async def active_threads_of_run(self, run_id: str) -> list[Thread]:
        """A run's open Stelis threads, outermost first: the stack to resume it with."""
        ...

    async def set_window(self, thread_id: int, *, revision: int | None = None,
                         **state: int | float | str | None) -> Thread:
        """A window cut or trim: its start or gap, summaries (ranges, dates) and memory snapshot, in one write. With
        `revision` (the thread's when its summary was read), StaleSummary and nothing written if a message changed
        since: an erasure meanwhile must not be undone by a summary written from what it erased."""
        ...

    def note_window(self, thread: Thread, **state: int | None) -> Thread:
        """Which memory a thread's window shows (`memory_as_of`) and where the cache holds its prefix
        (`window_cached_after`): stored with the thread's next message, shown by `opening` until then; voided
        by a change of the thread's messages. The thread as noted."""
        ...

    async def append(self, thread_id: int, new: NewMessage) -> tuple[Message, bool]:
        """Store a message; a known external id returns the stored one and False instead. OptedOut, and nothing
        stored, when its author opted out of this thread's persona (checked in the statement that stores it)."""
        ...

    async def append_counted(self, thread: Thread, new: NewMessage,
                             triggers: Triggers) -> tuple[Message, bool, float | None]:
        """Store a message and count it towards its conversation's next memory version, in one transaction
        (so a crash never loses the count); also returns the conversation's new deadline."""
        ...

    async def append_many(self, thread_id: int, messages: list[NewMessage], seqs: list[int] | None = None,
                          created: list[float] | None = None, tokens: list[int] | None = None) -> int:
        """Store many messages in one transaction (imports, benchmarks); an export's seqs and counts are kept."""
        ...

    async def tail(self, thread_id: int, limit: int) -> list[Message]:
        """The newest `limit` live messages of a thread, oldest first (index range scan + LIMIT)."""
        ...

    def newest_first(self, thread_id: int, *, before_seq: int | None = None, after_seq: int | None = None,
                     page: int = ...) -> AsyncIterator[Message]:
        """Live messages newest first, read in indexed pages so callers stop as soon as they have enough."""
        ...

    def span(self, thread_id: int, first_seq: int | None, before_seq: int | None,
             page: int = ...) -> AsyncIterator[Message]:
        """Live messages oldest first from first_seq (inclusive) up to before_seq (exclusive)."""
        ...

    async def last_exchanges(self, thread_id: int, limit: int) -> list[Message]:
        """The newest user and assistant messages, oldest first."""
        ...

    async def count_messages(self, thread_id: int, after_seq: int = -1) -> int:
        """Live messages of a thread after `after_seq`."""
        ...

    async def message_by_seq(self, seq: int) -> Message | None:
        ...

    async def message_by_external_id(self, external_id: int) -> Message | None:
        ...

    async def edit_message(self, external_id: int, content: str) -> Message | None:
        """Replace a live message's content (a Discord edit; an erased one stays erased); its token count is
        recomputed once here."""
        ...

    async def conversation_threads(self, persona: str, *, guild_id: int | None = None,
                                   scope_key: str | None = None) -> list[int]:
        """Ids of every thread of a server's conversations, or of one conversation (a DM)."""
        ...

    async def purge(self, *, author_id: int | None = None, thread_ids: list[int] | None = None,
                    external_id: int | None = None) -> dict[int, set[int]]:
        """Erase messages for good (an author's in these threads, or one message): text, name and index
        entry go; the row stays as a gap so sequence numbers are never reused. Returns thread -> seqs."""
        ...

    async def erasures(self) -> dict[int, set[int]]:
        """Messages erased whose memory is not rewritten yet (thread -> seqs): purge records them in its own
        transaction, so a rewrite cut short is done again."""
        ...

    async def rewritten(self, erased: dict[int, set[int]]) -> None:
        """The memory written from these erased messages is rewritten: they are no longer pending."""
        ...

    async def scrub(self) -> None:
        """After a forget-me: nothing of the erased rows stays in the database's own files (freed pages, old
        index segments, the write-ahead log), only in what the live rows hold."""
        ...

    async def traces(self, text: str) -> list[str]:
        """Every place the database still holds a text (table.column, or an index): a forget-me audit."""
        ...

    async def set_metadata(self, seq: int, metadata: dict[str, Any]) -> None:
        """Replace a message's metadata (its text never changes)."""
        ...

    async def delete_message(self, external_id: int) -> bool:
        """Erase one message (see purge); False when there was nothing left to erase."""
        ...

    async def root_threads(self, persona: str) -> list[Thread]:
        ...

    async def has_spoken(self, thread_id: int) -> bool:
        ...

    async def last_external_id(self, thread_id: int) -> int | None:
        """The newest Discord message id remembered in a thread: where a backfill after a reconnect starts."""
        ...

    async def messages_since(self, persona: str, scope_keys: tuple[str, ...], since: float,
                             limit: int) -> list[Message]:
        """What was said in these conversations (what one may see: recall's visibility) after a moment,
        oldest first, at most the newest `limit`."""
        ...


class MemoryRecords(Protocol):
    """Memory versions, each conversation's bookkeeping of what they cover and when the next is due, and pins."""

    async def delete_records(self, ids: list[int]) -> None:
        """Remove memory versions for good (their text and index entries)."""
        ...

    async def recent_records(self, persona: str, scope: str, scope_id: int, type_: str,
                             limit: int, as_of: int | None = None, hidden: bool = False) -> list[MemoryRecord]:
        """The newest `limit` versions (written no later than record `as_of`, when given), oldest first; those an
        edit or a rollback hid only with `hidden` (a history)."""
        ...

    async def latest_record(self, persona: str, scope: str, scope_id: int, type_: str,
                            as_of: int | None = None) -> MemoryRecord | None:
        ...

    async def newest_records(self, persona: str, asked: Sequence[Versions],
                             as_of: int | None = None) -> list[list[MemoryRecord]]:
        """recent_records for each of `asked`, in one statement (a prompt's memory layers read at once)."""
        ...

    async def add_record(self, persona: str, scope: str, scope_id: int, type_: str, content: str,
                         first_seq: int | None = None, last_seq: int | None = None,
                         metadata: dict[str, Any] | None = None, version: int | None = None,
                         hides: Sequence[int] = ()) -> MemoryRecord:
        """A new version, allocated inside the write transaction so concurrent writers never collide
        (or the given version, for an import); in the same transaction it hides the versions `hides` names."""
        ...

    async def memory_channel(self, thread_id: int) -> MemoryChannel | None:
        ...

    async def ensure_memory_channel(self, thread: Thread) -> MemoryChannel:
        """The bookkeeping of a conversation, created on first use."""
        ...

    async def due_channels(self, now: float, limit: int = ...) -> list[MemoryChannel]:
        """Conversations whose deadline has passed, earliest first (an index range scan)."""
        ...

    async def upcoming_deadlines(self, before: float, limit: int = ...) -> list[tuple[int, float]]:
        """(thread id, deadline) of the conversations whose memory work falls due before `before`, earliest first:
        the timers to arm."""
        ...

    async def save_short_term(self, ch: MemoryChannel, content: str, first_seq: int, last_seq: int, counted: int,
                              now: float, triggers: Triggers, metadata: dict[str, Any], *, live: int,
                              revision: int | None = None) -> MemoryRecord:
        """The new short-term version and the bookkeeping that it was written, in one transaction, only if no
        other worker saved over `ch.covered_seq` meanwhile and its range still holds the `live` messages it was
        written from (none erased meanwhile, whose forget-me would miss it), and, given the thread's `revision` as it
        was read before its messages, no message of it changed since (an erasure reaches words a window's summary or
        an anchor's chronicle held): otherwise StaleUpdate and nothing is written."""
        ...

    async def save_long_term(self, ch: MemoryChannel, content: str, first_seq: int | None, last_seq: int | None,
                             metadata: dict[str, Any], now: float, triggers: Triggers) -> MemoryRecord:
        """The merged long-term version and the bookkeeping that it was written, in one transaction, only while
        the merge is pending: otherwise StaleUpdate (another worker wrote it)."""
        ...

    async def long_term_saved(self, thread_id: int, now: float, triggers: Triggers) -> None:
        """The long-term update after a version is done; the conversation is due again only if messages wait."""
        ...

    async def nothing_new(self, thread_id: int, now: float, triggers: Triggers) -> None:
        """A due conversation with no new message (all deleted, say): clear it so no identical version is written."""
        ...

    async def memory_failed(self, thread_id: int, now: float, base_delay: float) -> float:
        """Record a failed update and push the deadline back exponentially; returns the delay."""
        ...

    async def set_channel_flags(self, thread_id: int, **flags: int | str | None) -> None:
        """Pause/resume, visibility, sharing and display name, as reported by a front end or an admin."""
        ...

    async def visible_conversations(self, persona: str, guild_id: int) -> list[tuple[int, int | None, str | None]]:
        """(channel id, Discord thread id, name) of the guild's shared channels and of all its public threads."""
        ...

    async def shared_channels(self, persona: str, guild_id: int, limit: int | None = None,
                              besides: int | None = None) -> list[MemoryChannel]:
        """The guild's channels whose memory may travel (other than `besides`), most recently active first."""
        ...

    async def pins(self, persona: str, scope: str, scope_id: int) -> list[str]:
        ...

    async def pinned_scopes(self, persona: str) -> set[tuple[str, int]]:
        """Every (scope, scope id) with a pin of the persona's: whose pins a prompt need not read."""
        ...

    async def pin(self, persona: str, scope: str, scope_id: int, fact: str) -> bool:
        ...

    async def unpin(self, persona: str, scope: str, scope_id: int, fact: str) -> bool:
        ...


class BranchesAndTasks(Protocol):
    """The persona's own activity (seed 001): branches, tasks, playbook runs and the pulse's decision log."""

    async def create_branch(self, branch_id: str, persona: str, branch_type: BranchKind, label: str, scope_key: str,
                            guild_id: int | None, channel_id: int | None, discord_thread_id: int | None,
                            task_id: str | None = None, partner_persona: str | None = None) -> Branch:
        ...

    async def branch(self, branch_id: str) -> Branch | None:
        ...

    async def branches(self, persona: str, scope_key: str, status: BranchStatus | None = None,
                       branch_type: BranchKind | None = None) -> list[Branch]:
        ...

    async def update_branch(self, branch_id: str, *, status: BranchStatus | None = None,
                            current_thread_id: int | None = None, label: str | None = None,
                            brief_state: str | None = None, moved_to: tuple[str, int | None] | None = None) -> None:
        """Change what is given; any change is activity (the working memory orders branches by it)."""
        ...

    async def recent_branches(self, persona: str, scope_keys: tuple[str, ...],
                              limit: int, *, with_completed: bool = False) -> list[Branch]:
        """The persona's open branches of these conversations (what one may see: recall's visibility), latest
        activity first: what its working memory shows."""
        ...

    async def open_branch_scopes(self, persona: str) -> set[str]:
        """The conversations (scope keys) an open branch of the persona's is listed in."""
        ...

    async def branch_threads(self, branch_id: str) -> list[Thread]:
        ...

    async def start_playbook_run(self, playbook: str, persona: str, scope_key: str, run_id: str,
                                 args: dict[str, Any]) -> int:
        ...

    async def log_playbook_step(self, run: int, step: PlaybookStep) -> None:
        ...

    async def end_playbook_run(self, run: int, status: RunStatus, result: dict[str, Any] | None,
                               error: str | None) -> None:
        ...

    async def playbook_runs(self, persona: str, scope_key: str, limit: int) -> list[PlaybookRun]:
        """A conversation's newest runs, newest first."""
        ...

    async def playbook_steps(self, run: int) -> list[PlaybookStep]:
        ...

    async def create_task(self, persona: str, scope_key: str, guild_id: int | None, title: str, goal: str,
                          steps: list[str]) -> Task:
        ...

    async def tasks_in(self, persona: str, scope_keys: tuple[str, ...], limit: int) -> list[Task]:
        """The tasks of these conversations (what one may see), open ones first, newest first."""
        ...

    async def task(self, task_id: int) -> Task | None:
        ...

    async def update_task(self, task_id: int, *, branch_id: str | None = None,
                          steps: list[dict[str, Any]] | None = None, status: TaskStatus | None = None) -> Task:
        ...

    async def log_autonomy(self, persona: str, place: str, kind: AutonomyKind, detail: str, *,
                           branch_id: str | None = None, calls: int = 0, tokens: int = 0) -> AutonomyEntry:
        ...

    async def autonomy_log(self, persona: str, place: str, limit: int, *,
                           kind: AutonomyKind | None = None) -> list[AutonomyEntry]:
        """A server's decisions, newest first (of one kind, when given)."""
        ...

    async def autonomy_spent(self, persona: str, place: str, since: float) -> tuple[int, int]:
        """Model calls and tokens the server's pulses spent since a moment."""
        ...

    async def branch_of_discord_thread(self, discord_thread_id: int) -> Branch | None:
        ...


class ClaimsAndLeases(Protocol):
    """Work one process does at a time: claims held for a lease, memory updates taken by lease, heartbeats."""

    async def beat(self, owner: str) -> None:
        """`owner` is alive now: the threads it opened are not swept while it beats."""
        ...

    async def claim_due(self, now: float, owner: str, lease_seconds: float, limit: int,
                        thread_id: int | None = None) -> list[MemoryChannel]:
        """Take due conversations (or the one given, due or not) for `owner` until the lease runs out, earliest
        first; those another worker holds are skipped, never waited for or taken twice (a conversation asked
        for by name may be taken again by its holder: its in-process lock keeps the order)."""
        ...

    async def release_channel(self, thread_id: int, owner: str) -> None:
        ...

    async def claim(self, key: str, owner: str, lease_seconds: float) -> bool:
        """Take `key` for `owner` until the lease runs out; False if someone else holds it."""
        ...

    async def release(self, key: str, owner: str) -> None:
        ...

    async def clear_claims(self) -> int:
        """Drop every claim (at a start that holds the database alone: their holders are gone); how many."""
        ...


class RecallIndex(Protocol):
    """Recall's full-text index and its look-ups, always within what one conversation may see."""

    async def index_messages(self) -> int:
        """Index for recall the messages stored since the last call, in one batch; how many there were."""
        ...

    async def tidy_index(self, pages: int = ...) -> bool:
        """One bounded step of merging recall's index segments; True when it did work (more may remain)."""
        ...

    async def merge_index(self) -> None:
        """Merge recall's index step by step until it is done or new messages wait to be indexed."""
        ...

    @property
    def unindexed(self) -> int:
        """Messages stored since the index was brought up to date (a large number when unknown)."""
        ...

    def unindexed_texts(self) -> list[str] | None:
        """Their texts, for counting words the index does not hold yet; None when unknown."""
        ...

    async def newest_texts(self, limit: int) -> list[str]:
        """The texts of the newest live messages, newest first."""
        ...

    async def match_counts(self, terms: list[str], cap: int) -> tuple[int, dict[str, int]]:
        """About how many messages exist (the newest sequence), and how many indexed messages each term
        matches, counting no further than `cap`; one round trip."""
        ...

    async def saved_counts(self, words: list[int]) -> dict[int, tuple[int, int]]:
        """Match counts recall saved, by word key (a hash): key -> (matches, the archive's size then)."""
        ...

    async def save_counts(self, counts: list[tuple[int, int, int]], stale_below: int = 0) -> int:
        """Keep recall's (word key, matches, archive size) for the next start, newer over older; a count taken
        before the last purge (its archive no larger than the archive then) is left out, and those kept of an
        archive smaller than `stale_below` (counted again before use) go. How many were kept."""
        ...

    async def scan_messages(self, needle: str, persona: str, scope_keys: tuple[str, ...], window: int,
                            limit: int) -> list[MessageMatch]:
        """Messages containing a text too short for trigrams, among the newest `window` only."""
        ...

    async def replies_to(self, seqs: list[int], persona: str, scope_keys: tuple[str, ...]) -> dict[int, MessageMatch]:
        """For each of these messages, the next one someone else said in its thread among the next REPLY_WITHIN
        (tool results, placeholders and deleted messages passed over), where these conversations may see it:
        message seq -> that reply."""
        ...

    async def recall_matches(self, terms: list[str], message_terms: list[str], persona: str,
                             scope_keys: tuple[str, ...], scopes: tuple[tuple[str, int], ...], limit: int,
                             note_limit: int, days: Sequence[tuple[float, float]] = (), day_limit: int = 0,
                             whole_from: tuple[int, int] | None = None) -> Recalled:
        """What recall may show from these conversations (`scope_keys`) and memory places (`scopes`), in one round
        trip where the database allows: the best `limit` messages matching any of `message_terms`; the best
        `note_limit` chronicles and the best `note_limit` short-term versions matching any of `terms` (long-term
        ones repeat the short-term ones they merged); for each of `days` (start, end) what people and the persona
        said then, the newest `day_limit` the request does not show (`whole_from`: (thread, seq), that thread's
        messages from there on are in it). A look-up not asked for (no terms, no days) finds nothing."""
        ...


class SettingsAndOptOuts(Protocol):
    """Per-server and per-channel setting overrides, and who opted out of being remembered."""

    async def set_optout(self, persona: str, user_id: int, out: bool) -> None:
        ...

    async def opted_out(self, persona: str) -> set[int]:
        ...

    async def settings(self, scope: str, scope_id: int) -> dict[str, Any]:
        ...

    async def set_setting(self, scope: str, scope_id: int, key: str, value: Any) -> None:
        ...

    async def delete_setting(self, scope: str, scope_id: int, key: str) -> bool:
        ...


class ModelUsageLog(Protocol):
    """What the model was asked to do, per day, server and model."""

    async def add_usage(self, persona: str, spent: Sequence[tuple[int, ModelUsage]]) -> None:
        """Add each server's (0: none) calls of a model on a day to what is recorded, in one statement (a server,
        day and model at most once)."""
        ...

    async def usage_since(self, persona: str, guild_id: int, first_day: str) -> list[ModelUsage]:
        """A server's days from `first_day` on, oldest first, one row per model."""
        ...


class Store(Database, ThreadsAndMessages, MemoryRecords, BranchesAndTasks, ClaimsAndLeases, RecallIndex,
            SettingsAndOptOuts, ModelUsageLog, Protocol):
    """Every aggregate a backend stores, behind one door (a service may ask for only the aggregates it uses).

    Counters that caches key on are bumped by every write that invalidates them.
    """

    clock: Clock
    owner: str | None  # the process writing (recorded on the Stelis threads it opens); set by whoever opens it
    sharing_version: int  # a conversation's visibility or sharing changed
    memory_changes: int  # a memory version was removed or a pin changed
    conversations: int  # a conversation may have joined its server (recall's visibility)
    branch_changes: int  # a branch was created or changed (the working memory)
    newest_seq: int  # the newest message this process stored
