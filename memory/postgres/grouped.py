"""Statements asked at once, sent together: while one is on its way, those asked meanwhile make the next.

With hundreds of channels answering at once, the pool sent each message heard, and each reply's opening read, as a
statement of its own (bench concurrency, PostgreSQL, 500 channels): the last message was stored half a second into
the burst, and every reply's first read held one of the pool's connections while it waited its turn. A statement
with nothing else on its way still goes alone, as cheap as before; those asked meanwhile wait for it and then go
together, one row each of one statement, each answered as it would have been alone.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from memory.records import NewMessage, Thread
from memory.settings import Triggers


def _future() -> asyncio.Future[Any]:
    return asyncio.get_running_loop().create_future()


@dataclass
class Pending:
    """One append waiting for its statement: what to store, when it was asked, and its caller's answer."""

    thread_id: int
    new: NewMessage
    now: float
    counting: tuple[Thread, Triggers] | None
    noted: tuple[int, dict[str, Any]] | None = None  # the thread's window bookkeeping, at the revision noted
    answer: asyncio.Future[Any] = field(default_factory=_future)


@dataclass
class Asked:
    """One opening read waiting for its statement (Store.opening's arguments) and its caller's answer."""

    thread_id: int
    after_seq: int | None
    limit: int
    versions: int
    answer: asyncio.Future[Any] = field(default_factory=_future)


class Answered(Protocol):
    answer: asyncio.Future[Any]


Item = TypeVar("Item", bound=Answered)


@dataclass
class _Batch(Generic[Item]):
    items: list[Item] = field(default_factory=list)
    keys: set[Hashable] = field(default_factory=set)
    sent: asyncio.Event = field(default_factory=asyncio.Event)


class Grouped(Generic[Item]):
    """One statement on its way at a time; those asked meanwhile make the next one together.

    `alone` runs one item's statement and returns its caller's result; `together` runs several items' statement
    and answers each item's future. With `apart`, two items of one key never share a statement: the later waits
    for the earlier's to be sent, then goes in the one after (a statement may change a row once, and a thread's
    messages are stored in the order they came). With `most`, a statement carries at most that many: the next
    ones make another, sent after it (asyncpg reads a statement's rows in one turn of the event loop)."""

    def __init__(self, alone: Callable[[Item], Awaitable[Any]], together: Callable[[list[Item]], Awaitable[None]],
                 apart: Callable[[Item], Hashable] | None = None, most: int | None = None) -> None:
        self._alone = alone
        self._together = together
        self._apart = apart
        self._most = most
        self._lane = asyncio.Lock()
        self._open: _Batch[Item] | None = None  # the batch still taking items
        self._flushes: set[asyncio.Task[None]] = set()

    async def add(self, item: Item) -> Any:
        """The item's result: from its own statement when nothing else is on its way, else from the next shared one."""
        key = self._apart(item) if self._apart is not None else None
        while True:
            if self._open is None and not self._lane.locked():
                async with self._lane:
                    return await self._alone(item)
            if self._open is not None and key is not None and key in self._open.keys:
                await self._open.sent.wait()  # the key's earlier item goes first, in its own statement
                continue
            if self._open is None or (self._most is not None and len(self._open.items) >= self._most):
                self._open = _Batch()  # a full batch's statement waits its turn on the lane as it is
                flush = asyncio.ensure_future(self._flush(self._open))
                self._flushes.add(flush)
                flush.add_done_callback(functools.partial(self._flushed, self._open))
            self._open.items.append(item)
            if key is not None:
                self._open.keys.add(key)
            return await item.answer

    async def drain(self) -> None:
        """At close: the statements on their way are run (or refused) first."""
        await asyncio.gather(*self._flushes, return_exceptions=True)

    async def _flush(self, batch: _Batch[Item]) -> None:
        async with self._lane:  # batches take it in the order they were made
            if self._open is batch:
                self._open = None  # later items make the next batch
            try:
                await self._together(batch.items)
            except Exception as exc:  # each caller not answered yet hears of it
                for item in batch.items:
                    if not item.answer.done():
                        item.answer.set_exception(exc)

    def _flushed(self, batch: _Batch[Item], flush: asyncio.Task[None]) -> None:
        """The batch's statement is over, or was cancelled (the loop closing), even before its turn: no item waits
        for it any longer, and none joins it."""
        self._flushes.discard(flush)
        if self._open is batch:
            self._open = None
        for item in batch.items:
            if not item.answer.done():
                item.answer.cancel()
        batch.sent.set()
