"""Messages heard at once, stored together: the appends that arrive while one is on its way go as one statement.

Each message heard was a statement of its own, and with hundreds of channels answering at once the pool sent them
one by one: at 500 channels the last was stored half a second into the burst (bench concurrency, PostgreSQL), and
every reply waited for its own. An append with nothing else on its way still goes alone, as cheap as before; those
that arrive meanwhile wait for it and then go together, one row each of one statement, each stored or refused as it
would have been alone. One append per thread in a statement: a conversation's count is one row, and a statement
may change a row once.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from memory.records import NewMessage, Thread
from memory.settings import Triggers


@dataclass
class Pending:
    """One append waiting for its statement: what to store, when it was asked, and its caller's answer."""

    thread_id: int
    new: NewMessage
    now: float
    counting: tuple[Thread, Triggers] | None
    noted: tuple[int, dict[str, Any]] | None = None  # the thread's window bookkeeping, at the revision noted
    answer: asyncio.Future[Any] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


@dataclass
class _Batch:
    items: list[Pending] = field(default_factory=list)
    threads: set[int] = field(default_factory=set)
    sent: asyncio.Event = field(default_factory=asyncio.Event)

    def add(self, item: Pending) -> None:
        self.items.append(item)
        self.threads.add(item.thread_id)


class Appends:
    """One append statement on its way at a time; those waiting for it make the next one together."""

    def __init__(self, alone: Callable[[Pending], Awaitable[Any]],
                 together: Callable[[list[Pending]], Awaitable[None]]) -> None:
        self._alone = alone  # one append's statement; its result is the caller's
        self._together = together  # several appends' statement; it answers each Pending
        self._lane = asyncio.Lock()
        self._open: _Batch | None = None  # the batch still taking appends
        self._flushes: set[asyncio.Task[None]] = set()

    async def add(self, item: Pending) -> Any:
        """The append's result, stored alone when nothing else is on its way, else with the others waiting."""
        while True:
            if self._open is None and not self._lane.locked():
                async with self._lane:
                    return await self._alone(item)
            if self._open is not None and item.thread_id in self._open.threads:
                await self._open.sent.wait()  # the thread's earlier append goes first, in its own statement
                continue
            if self._open is None:
                self._open = _Batch()
                flush = asyncio.ensure_future(self._flush(self._open))
                self._flushes.add(flush)
                flush.add_done_callback(functools.partial(self._flushed, self._open))
            self._open.add(item)
            return await item.answer

    async def drain(self) -> None:
        """At close: the appends on their way are stored (or refused) first."""
        await asyncio.gather(*self._flushes, return_exceptions=True)

    async def _flush(self, batch: _Batch) -> None:
        async with self._lane:
            self._open = None  # later appends make the next batch
            try:
                await self._together(batch.items)
            except Exception as exc:  # each caller not answered yet hears of it
                for item in batch.items:
                    if not item.answer.done():
                        item.answer.set_exception(exc)

    def _flushed(self, batch: _Batch, flush: asyncio.Task[None]) -> None:
        """The batch's statement is over, or was cancelled (the loop closing), even before its turn: no append
        waits for it any longer, and none joins it."""
        self._flushes.discard(flush)
        if self._open is batch:
            self._open = None
        for item in batch.items:
            if not item.answer.done():
                item.answer.cancel()
        batch.sent.set()
