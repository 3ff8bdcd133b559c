"""The pool's connections kept between statements and lent one task at a time, asyncpg's pool behind them.

asyncpg's pool lends a connection through a shielded task, a timeout scope and a proxy, and resets it at each
return: several loop turns and some 100 µs of this process's CPU for each statement (`SELECT 1` 150-180 µs through
it, 52-63 on the connection). With hundreds of replies at once (bench concurrency, PostgreSQL at 500 channels) the
last request was sent 0.46-0.66 s into the burst, 0.40-0.53 s lent from here. A connection that served a
statement without a fault is lent again as it is; one that failed, was cancelled or closed goes back to asyncpg's
pool, which waits out its cancellation, rolls back what it left open (`reset`) or connects anew at its next lending.
"""

from __future__ import annotations

import asyncio
import collections
from types import TracebackType
from typing import TYPE_CHECKING, Any

import asyncpg

if TYPE_CHECKING:
    from asyncpg.pool import PoolConnectionProxy

    Connection = PoolConnectionProxy[asyncpg.Record]


class Lender:
    """Connections taken from `pool` as they are needed (never more than it holds), each lent to one task."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool
        self._idle: collections.deque[Connection] = collections.deque()
        self._waiting: collections.deque[asyncio.Future[Connection | None]] = collections.deque()
        self._taken = 0  # connections out of the pool: idle here or lent
        self._closing = False

    def lent(self) -> int:
        """Connections in use now (the metrics' figure)."""
        return self._taken - len(self._idle)

    def size(self) -> int:
        return int(self.pool.get_max_size())

    def acquire(self) -> _Lending:
        """`async with lender.acquire() as con` (else `take`, given back with `release`)."""
        return _Lending(self)

    # asyncpg's pool's own shortcuts: one statement on a connection lent for it

    async def fetch(self, sql: str, *params: Any) -> list[asyncpg.Record]:
        async with self.acquire() as con:
            return await con.fetch(sql, *params)

    async def fetchrow(self, sql: str, *params: Any) -> asyncpg.Record | None:
        async with self.acquire() as con:
            return await con.fetchrow(sql, *params)

    async def fetchval(self, sql: str, *params: Any) -> Any:
        async with self.acquire() as con:
            return await con.fetchval(sql, *params)

    async def execute(self, sql: str, *params: Any) -> str:
        async with self.acquire() as con:
            return await con.execute(sql, *params)

    async def take(self) -> Connection:
        """A connection for this task alone, waiting while every one is lent."""
        while True:
            while self._idle:
                con = self._idle.pop()  # the last given back: its server process is the warmest
                if _usable(con):
                    return con
                await self._return(con)  # the server dropped it while idle: asyncpg connects anew
            if self._taken < self.size():
                self._taken += 1
                try:
                    return await self.pool.acquire()
                except BaseException:
                    self._taken -= 1
                    self._pass_on(None)  # the slot is free again: the next one waiting tries for itself
                    raise
            waiter: asyncio.Future[Connection | None] = asyncio.get_running_loop().create_future()
            self._waiting.append(waiter)
            try:
                handed = await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():  # handed over as this task was cancelled
                    self._pass_on(waiter.result())
                raise
            if handed is not None:
                return handed

    async def release(self, con: Connection, *, failed: bool = False) -> None:
        """Back from a task: lent again at once, or, after a fault, returned to asyncpg's pool to be set right (a
        transaction left open with it is rolled back there: no task's writes ride on another's)."""
        if failed or self._closing or not _usable(con) or con.is_in_transaction():
            await self._return(con)
        else:
            self._pass_on(con)

    async def close(self) -> None:
        self._closing = True
        idle, self._idle = list(self._idle), collections.deque()
        for con in idle:
            await self._return(con)
        await self.pool.close()

    async def _return(self, con: Connection) -> None:
        self._taken -= 1
        try:
            await self.pool.release(con)
        finally:
            self._pass_on(None)

    def _pass_on(self, con: Connection | None) -> None:
        """To the first task still waiting (None: a slot of the pool to take for itself), else kept idle."""
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(con)
                return
        if con is not None:
            self._idle.append(con)


def _usable(con: Connection) -> bool:
    try:
        return not con.is_closed()
    except asyncpg.InterfaceError:  # closed under it, and so handed back to the pool by asyncpg already
        return False


class _Lending:
    def __init__(self, lender: Lender) -> None:
        self._lender = lender
        self._con: Connection | None = None

    async def __aenter__(self) -> Connection:
        self._con = await self._lender.take()
        return self._con

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        trace: TracebackType | None) -> None:
        assert self._con is not None
        await self._lender.release(self._con, failed=kind is not None)
