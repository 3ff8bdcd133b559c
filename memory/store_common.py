"""What every storage backend does the same way, written once over each backend's own queries."""

from __future__ import annotations

import json
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable
from typing import Any

from memory import rows as row_to
from memory.quotes import ERASED
from memory.records import MemoryRecord, Message, NewMessage, Thread
from memory.settings import Triggers
from memory.store import WINDOW_GAP, StaleSummary

WINDOW_STATE = frozenset({"window_start_seq", "window_summary", "window_summary_from", "window_summary_to",
                          "window_summary_first_at", "window_summary_last_at", "memory_as_of", *WINDOW_GAP})
# A window's cache bookkeeping, stored with its thread's next message (CommonStore.note_window)
NOTED_WINDOW = frozenset({"memory_as_of", "window_cached_after"})
NOTED_MOST = 10_000  # threads whose bookkeeping waits for their next message; beyond, the oldest is let go
Noted = tuple[int, dict[str, Any]]  # (the thread's revision when noted, the bookkeeping)
CHANNEL_FLAGS = frozenset({"paused", "public", "shareable", "name"})
# Free texts that may quote a message (a tool's result aside: a playbook's step and run, a pulse's note, a
# branch's or task's words, a thread's name, a pin): (table, key, column, what the column holds, the time it
# was last written, if any). A column holds text, a JSON object or list, or is a row to delete (a pin).
QUOTING = (("playbook_steps", "id", "summary", "text", "at"), ("autonomy_log", "id", "detail", "text", "at"),
           ("playbook_runs", "id", "args", "json", "COALESCE(ended_at, started_at)"),
           ("playbook_runs", "id", "result", "json", "COALESCE(ended_at, started_at)"),
           ("playbook_runs", "id", "error", "text", "COALESCE(ended_at, started_at)"),
           ("branches", "id", "label", "text", None), ("branches", "id", "brief_state", "text", None),
           ("tasks", "id", "title", "text", None), ("tasks", "id", "goal", "text", None),
           ("tasks", "id", "steps", "list", None), ("threads", "id", "label", "text", None),
           ("memory_pins", "id", "fact", "row", None))

SEQ_MAX = 2**63 - 1  # above every message's sequence (a BIGINT)


def erased_value(kind: str) -> str:
    """What a quoting column holds once what it quoted is erased."""
    return {"json": json.dumps({"erased": ERASED}), "list": "[]"}.get(kind, ERASED)


def checked(given: dict[str, Any], allowed: frozenset[str], what: str) -> dict[str, Any]:
    """Column names a caller passes, refused before they reach SQL unless they are among `allowed`."""
    if not given or set(given) - allowed:
        raise ValueError(f"{what} must be among {sorted(allowed)}")
    return given


def stale_summary(thread_id: int, revision: int | None) -> Exception:
    """Why a thread's row was not written: no such thread, or (with a revision) a message of it changed since."""
    if revision is None:
        return KeyError(f"no thread {thread_id}")
    return StaleSummary(f"a message of thread {thread_id} changed while a summary of it was written")


class CommonStore(ABC):
    """The counters caches key on, and the calls that are the same on every backend."""

    def __init__(self, clock: Callable[[], float] = time.time):
        self.clock = clock
        self.owner: str | None = None  # the process writing: recorded on the Stelis threads it opens
        self.sharing_version = 0  # bumped when a conversation's visibility or sharing changes (caches key on it)
        self.memory_changes = 0  # bumped when a memory version is removed or a pin changes (caches key on it)
        self.branch_changes = 0  # bumped when a branch is created or changes (the working memory keys on it)
        self.conversations = 0  # bumped when a conversation may have joined its server (recall's visibility)
        self.newest_seq = 0  # the newest message this process stored (how far the archive has grown, for recall)
        self._conversations: set[int] = set()
        self._noted: dict[int, Noted] = {}  # thread -> window bookkeeping to store with its next message

    @abstractmethod
    async def find_thread(self, thread_id: int) -> Thread | None: ...

    @abstractmethod
    async def recent_records(self, persona: str, scope: str, scope_id: int, type_: str,
                             limit: int, as_of: int | None = None, hidden: bool = False) -> list[MemoryRecord]: ...

    @abstractmethod
    async def purge(self, *, author_id: int | None = None, thread_ids: list[int] | None = None,
                    external_id: int | None = None) -> dict[int, set[int]]: ...

    @abstractmethod
    async def _append(self, thread_id: int, new: NewMessage, counting: tuple[Thread, Triggers] | None,
                      noted: Noted | None) -> tuple[Message, bool, float | None]:
        """Store a message, in one transaction with its count (`counting`) and its thread's bookkeeping (`noted`,
        written only while the thread is at that revision)."""

    @abstractmethod
    async def _set_window(self, thread_id: int, revision: int | None,
                          state: dict[str, int | float | str | None]) -> Thread: ...

    @abstractmethod
    async def _page(self, thread_id: int, lower: int, upper: int, limit: int,
                    newest_first: bool) -> list[Message]:
        """Live messages strictly between two seqs, through the (thread, seq) index, at most `limit`."""

    def saw_conversation(self, thread_id: int) -> None:
        """A conversation's memory is kept: the first time this process sees it, it may be new to its server."""
        if thread_id not in self._conversations:
            self._conversations.add(thread_id)
            self.conversations += 1

    async def thread(self, thread_id: int) -> Thread:
        found = await self.find_thread(thread_id)
        if found is None:
            raise KeyError(f"no thread {thread_id}")
        return found

    async def append(self, thread_id: int, new: NewMessage) -> tuple[Message, bool]:
        """Store a message; a known external id returns the stored one and False instead."""
        message, created, _ = await self._appended(thread_id, new, None)
        return message, created

    async def append_counted(self, thread: Thread, new: NewMessage,
                             triggers: Triggers) -> tuple[Message, bool, float | None]:
        """Store a message and count it towards its conversation's next memory version, in one transaction
        (so a crash never loses the count); also returns the conversation's new deadline."""
        return await self._appended(thread.id, new, (thread, triggers))

    async def _appended(self, thread_id: int, new: NewMessage,
                        counting: tuple[Thread, Triggers] | None) -> tuple[Message, bool, float | None]:
        noted = self._noted.pop(thread_id, None)
        try:
            stored = await self._append(thread_id, new, counting, noted)
        except BaseException:
            if noted is not None:  # not stored: it waits for the next message (unless noted again since)
                self._noted.setdefault(thread_id, noted)
            raise
        self.newest_seq = max(self.newest_seq, stored[0].seq)
        return stored

    def note_window(self, thread: Thread, **state: Any) -> Thread:
        """Which memory a thread's window shows and where the cache holds its prefix: kept here and stored with
        the thread's next message (a reply's own write), not in a write of its own before the model is asked.
        Until then `opening` shows it. A change of the thread's messages since (its revision) voids it, and
        a crash loses it: the next request works it out again, as after any cold cache."""
        checked(state, NOTED_WINDOW, "noted window state")
        revision, before = self._noted.pop(thread.id, (thread.revision, {}))
        self._noted[thread.id] = (thread.revision, {**(before if revision == thread.revision else {}), **state})
        if len(self._noted) > NOTED_MOST:
            del self._noted[next(iter(self._noted))]
        return row_to.copied(thread, **state)

    def _as_noted(self, thread: Thread) -> Thread:
        """The thread with the bookkeeping noted for it, if its messages did not change since."""
        found = self._noted.get(thread.id)
        if found is None:
            return thread
        if found[0] != thread.revision:
            del self._noted[thread.id]
            return thread
        return row_to.copied(thread, **found[1])

    async def set_window(self, thread_id: int, *, revision: int | None = None,
                         **state: int | float | str | None) -> Thread:
        """A window cut or trim, in one write; what was noted for the thread at this revision goes with it."""
        noted = self._noted.pop(thread_id, None)
        carried = noted[1] if noted is not None and revision is not None and noted[0] == revision else {}
        return await self._set_window(thread_id, revision, {**carried, **checked(state, WINDOW_STATE, "window state")})

    async def latest_record(self, persona: str, scope: str, scope_id: int, type_: str,
                            as_of: int | None = None) -> MemoryRecord | None:
        found = await self.recent_records(persona, scope, scope_id, type_, 1, as_of)
        return found[-1] if found else None

    async def delete_message(self, external_id: int) -> bool:
        """Erase one message (see purge); False when there was nothing left to erase."""
        return bool(await self.purge(external_id=external_id))

    def newest_first(self, thread_id: int, *, before_seq: int | None = None, after_seq: int | None = None,
                     page: int = 256) -> AsyncIterator[Message]:
        """Live messages newest first, read in indexed pages so callers stop as soon as they have enough."""
        return self._pages(thread_id, after_seq, before_seq, page, newest_first=True)

    def span(self, thread_id: int, first_seq: int | None, before_seq: int | None,
             page: int = 512) -> AsyncIterator[Message]:
        """Live messages oldest first from first_seq (inclusive) up to before_seq (exclusive)."""
        return self._pages(thread_id, None if first_seq is None else first_seq - 1, before_seq, page,
                           newest_first=False)

    async def _pages(self, thread_id: int, lower: int | None, upper: int | None, page: int,
                     newest_first: bool) -> AsyncIterator[Message]:
        low = -1 if lower is None else lower
        high = SEQ_MAX if upper is None else upper
        while True:
            messages = await self._page(thread_id, low, high, page, newest_first)
            for message in messages:
                yield message
            if len(messages) < page:
                return
            if newest_first:
                high = messages[-1].seq
            else:
                low = messages[-1].seq
