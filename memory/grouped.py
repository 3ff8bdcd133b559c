"""Work asked at once, sent together: while one statement is on its way, those asked meanwhile make the next.

With hundreds of channels answering at once, each message heard and each reply's opening read went to the database
on its own (bench concurrency, 500 channels): on PostgreSQL the last message was stored half a second into the
burst, and every reply's first read held one of the pool's connections while it waited its turn; on SQLite every
read was a hop to the database's thread and back, a thousand hops a burst. Work with nothing else on its way still
goes alone, as cheap as before; what is asked meanwhile waits for it and then goes together (one statement, or one
hop), each answered as it would have been alone.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar


def answer_future() -> asyncio.Future[Any]:
    """Where an item's caller waits for its answer."""
    return asyncio.get_running_loop().create_future()


class Answered(Protocol):
    answer: asyncio.Future[Any]


def answer_each(answers: Sequence[asyncio.Future[Any]], results: Sequence[tuple[bool, Any]]) -> None:
    """Each caller gets its work's result or error (one that stopped waiting, nothing)."""
    for answer, (ok, value) in zip(answers, results, strict=True):
        if not answer.done():
            answer.set_result(value) if ok else answer.set_exception(value)


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
    ones make another, sent after it (a statement's answers all come back in one turn of the event loop)."""

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
                answer_each([item.answer for item in batch.items], [(False, exc)] * len(batch.items))

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
