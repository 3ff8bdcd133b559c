"""Records read from and written to the store."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["user", "assistant", "system", "tool"]
ThreadKind = Literal["root", "stelis", "subagent"]
ThreadStatus = Literal["active", "completed", "aborted"]


@dataclass(frozen=True)
class Scope:
    """Where a conversation lives; `key` identifies its root thread for one persona."""

    key: str
    guild_id: int | None = None
    channel_id: int | None = None
    discord_thread_id: int | None = None

    @classmethod
    def console(cls, name: str = "default") -> Scope:
        # Channel 0 with no guild: the console remembers like a DM, and never reaches a guild.
        return cls(key=f"console:{name}", channel_id=0)

    @classmethod
    def channel(cls, guild_id: int, channel_id: int) -> Scope:
        return cls(key=f"guild:{guild_id}:channel:{channel_id}", guild_id=guild_id, channel_id=channel_id)

    @classmethod
    def private_thread(cls, guild_id: int, thread_id: int) -> Scope:
        # Its own conversation, never a session of its parent: only its members may read it.
        return cls(key=f"guild:{guild_id}:private:{thread_id}", guild_id=guild_id, channel_id=thread_id)

    @property
    def private(self) -> bool:
        """A private Discord thread: its memory is never shared, whatever a setting says."""
        return ":private:" in self.key

    @classmethod
    def dm(cls, user_id: int, channel_id: int) -> Scope:
        return cls(key=f"dm:{user_id}", channel_id=channel_id)


@dataclass(frozen=True)
class Thread:
    id: int
    persona: str
    kind: ThreadKind
    parent_thread_id: int | None
    depth: int
    window_ratio: float
    status: ThreadStatus
    label: str | None
    chronicle_summary: str | None
    chronicle_prompt: str | None
    branch_id: str | None
    scope_key: str
    guild_id: int | None
    channel_id: int | None
    discord_thread_id: int | None
    run_id: str | None
    created_at: float
    completed_at: float | None
    anchor_seq: int | None = None
    window_start_seq: int | None = None
    window_summary: str | None = None
    window_summary_from: int | None = None
    window_summary_to: int | None = None
    memory_as_of: int | None = None  # the newest memory record the window shows until its next cut
    window_summary_first_at: float | None = None  # when the rolling summary's first and last messages were said
    window_summary_last_at: float | None = None
    window_gap_from: int | None = None  # a trimmed window: its head ends before this message ...
    window_gap_to: int | None = None  # ... and its recent part starts at this one; the bridge stands between
    window_bridge: str | None = None
    window_bridge_first_at: float | None = None
    window_bridge_last_at: float | None = None
    window_bridge_from: int | None = None  # the first message whose words the bridge holds (None: an old bridge)
    window_trims: int = 0  # trims since the window last restarted
    window_cached_after: int | None = None  # the newest message of the last request that rewrote the prefix
    owner: str | None = None  # the process that opened it (a sweep aborts it only once that process is gone)
    revision: int = 0  # bumped with any change to a message stored in it: caches of its window key on it

    @property
    def is_root(self) -> bool:
        return self.parent_thread_id is None

    @property
    def memory_scope(self) -> tuple[str, int] | None:
        """Whose short-term versions summarise this thread's messages: a Discord thread's own, a conversation root's
        channel; None for an internal Stelis thread (remembered through its chronicle)."""
        if self.discord_thread_id is not None:
            return "thread", self.discord_thread_id
        return ("channel", self.channel_id or 0) if self.is_root else None


@dataclass(frozen=True)
class Message:
    seq: int
    thread_id: int
    role: Role
    content: str
    token_count: int
    author_id: int | None = None
    author_name: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    external_id: int | None = None
    created_at: float = 0.0
    edited_at: float | None = None
    deleted_at: float | None = None


# What newest_records is asked for: a scope, its id, a type, and how many of its newest versions.
Versions = tuple[str, int, str, int]


def own_memory(root: Thread, thread: Thread, versions: int) -> tuple[Versions, ...]:
    """The memory of its own a conversation's prompt shows, as newest_records is asked for it: its channel's
    long-term memory and `versions` newest short-term versions, its Discord thread's version, its server's long-term
    memory (`root`: the conversation's root; a thread carries its root's persona, server and channel)."""
    asked = list(channel_versions(root.channel_id or 0, versions))
    if thread.discord_thread_id is not None:
        asked.append(("thread", thread.discord_thread_id, "short_term", 1))
    if root.guild_id is not None:
        asked.append(("workspace", root.guild_id, "long_term", 1))
    return tuple(asked)


def channel_versions(channel_id: int, versions: int) -> tuple[Versions, Versions]:
    """What a channel shows: its long-term memory, then its newest versions."""
    return ("channel", channel_id, "long_term", 1), ("channel", channel_id, "short_term", versions)


def window_after(window_start_seq: int | None) -> int:
    """The seq a window's messages come after (a window with no start holds the whole thread)."""
    return -1 if window_start_seq is None else window_start_seq - 1


@dataclass(frozen=True)
class Opening:
    """What an assembly reads first, in one round trip (Store.opening): its thread, the newest memory record's id,
    and a page of the thread's live messages, newest first: those after `after_seq`, or (None) from the window's
    start."""

    thread: Thread
    newest_record: int
    after_seq: int | None
    messages: list[Message]
    limit: int
    # With versions asked for: the thread's own memory (own_memory) as of its newest record, each part oldest first
    memory_asked: tuple[Versions, ...] = ()
    memory: list[list[MemoryRecord]] = field(default_factory=list)

    @property
    def after(self) -> int:
        """The seq its messages come after."""
        return self.after_seq if self.after_seq is not None else window_after(self.thread.window_start_seq)

    @property
    def whole(self) -> bool:
        """The page holds every message it was asked for."""
        return len(self.messages) < self.limit


@dataclass(frozen=True)
class NewMessage:
    """A message to store; the store assigns its sequence and token count."""

    role: Role
    content: str
    author_id: int | None = None
    author_name: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    external_id: int | None = None


@dataclass(frozen=True)
class MemoryChannel:
    """Bookkeeping of one remembered conversation (a channel's root thread, a DM, a Discord thread)."""

    thread_id: int
    persona: str
    guild_id: int | None
    channel_id: int | None
    discord_thread_id: int | None
    name: str | None
    public: int
    shareable: int | None
    paused: int
    last_message_at: float | None
    pending_count: int
    covered_seq: int | None
    due_at: float | None
    failures: int
    long_term_pending: int
    lease_owner: str | None = None  # the worker updating its memory now, until the lease runs out
    lease_until: float | None = None

    @property
    def shared(self) -> bool:
        """May this conversation's memory reach other channels and the workspace memory?"""
        if self.guild_id is None:
            return False  # DMs and the console never reach a guild
        return bool(self.public if self.shareable is None else self.shareable)

    @property
    def scope(self) -> tuple[str, int]:
        """The memory-record scope: a Discord thread's own, else its channel's."""
        if self.discord_thread_id is not None:
            return "thread", self.discord_thread_id
        return "channel", self.channel_id if self.channel_id is not None else 0


@dataclass(frozen=True)
class MemoryRecord:
    id: int
    persona: str
    scope: Literal["workspace", "channel", "thread"]
    scope_id: int
    type: Literal["short_term", "long_term"]
    version: int
    content: str
    first_seq: int | None
    last_seq: int | None
    metadata: dict[str, Any]
    created_at: float
    hidden_by: int | None = None  # the version that replaced it (an edit) or rolled back past it: history only

    @property
    def reach(self) -> int | None:
        """The first message whose words its text may hold: its range's, or earlier where a window's summary it
        read stood for messages before it (metadata read_from)."""
        if self.first_seq is None:
            return None
        return min(self.first_seq, int(self.metadata.get("read_from", self.first_seq)))


BranchKind = Literal["user", "task", "social", "free"]
BRANCH_KINDS: tuple[BranchKind, ...] = ("task", "free", "social")  # what a branch row can be (the root is "user")
BranchStatus = Literal["active", "suspended", "completed"]


@dataclass(frozen=True)
class Branch:
    """A line of the persona's activity made of chained Stelis sessions (seed 001)."""

    id: str
    persona: str
    branch_type: BranchKind
    label: str
    status: BranchStatus
    task_id: str | None
    partner_persona: str | None
    current_thread_id: int | None
    scope_key: str
    guild_id: int | None
    channel_id: int | None
    discord_thread_id: int | None
    created_at: float
    suspended_at: float | None
    completed_at: float | None
    brief_state: str | None = None  # where it stands, in a line (the working memory shows it)
    last_activity_at: float | None = None

    @property
    def active_at(self) -> float:
        return self.last_activity_at or self.created_at


@dataclass(frozen=True)
class MessageMatch:
    """A stored message recall found, with where it was said."""

    seq: int
    role: Role
    author_name: str | None
    content: str
    created_at: float
    scope_key: str
    kind: ThreadKind
    label: str | None


@dataclass(frozen=True)
class NoteMatch:
    """A chronicle or memory version recall found."""

    source: Literal["chronicle", "record"]
    id: int
    text: str
    at: float
    label: str | None
    scope_key: str | None
    type: str | None
    scope: Literal["workspace", "channel", "thread"] | None
    version: int | None


@dataclass(frozen=True)
class Recalled:
    """What recall's look-ups found together (Store.recall_matches): messages best first, notes best first within
    each kind, and each asked day's messages newest first."""

    messages: list[MessageMatch]
    notes: list[NoteMatch]
    days: list[list[MessageMatch]]


RunStatus = Literal["running", "completed", "failed", "cancelled"]


@dataclass(frozen=True)
class PlaybookRun:
    """One run of a playbook in a conversation (/playbooks runs)."""

    id: int
    playbook: str
    persona: str
    scope_key: str
    run_id: str
    status: RunStatus
    args: dict[str, Any]
    result: dict[str, Any] | None
    error: str | None
    started_at: float
    ended_at: float | None


@dataclass(frozen=True)
class PlaybookStep:
    """One node of a run as it went: what it cost and what it gave."""

    node: str
    node_type: str
    duration_ms: float
    summary: str = ""
    profile: str | None = None
    tier: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read: int = 0
    cache_write: int = 0
    at: float = 0.0


TaskStatus = Literal["open", "done", "abandoned"]


AutonomyKind = Literal["pulse", "skip", "react", "wait", "create", "resume", "work", "suspend", "interrupt",
                      "error", "social"]


@dataclass(frozen=True)
class AutonomyEntry:
    """One line of the pulse's decision log: what it did or why it did nothing, and what that cost."""

    id: int
    persona: str
    place: str  # the server ("guild:<id>"), or outside one the conversation's scope key
    at: float
    kind: AutonomyKind
    branch_id: str | None
    detail: str
    calls: int = 0
    tokens: int = 0


@dataclass(frozen=True)
class Task:
    """A piece of work with a goal and steps (seed 001); its branch holds the sessions it is worked in."""

    id: int
    persona: str
    scope_key: str
    guild_id: int | None
    branch_id: str | None
    title: str
    goal: str
    steps: list[dict[str, Any]]  # {"text": ..., "done": bool}
    status: TaskStatus
    created_at: float
    updated_at: float


@dataclass(frozen=True)
class ModelUsage:
    """What one model was asked to do for one server on one day (UTC)."""

    day: str  # YYYY-MM-DD
    model: str
    calls: int
    input_tokens: int  # not read from the cache
    output_tokens: int
    cache_read: int
    cache_write: int

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens + self.cache_read + self.cache_write
