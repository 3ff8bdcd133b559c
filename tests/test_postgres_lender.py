"""The pool's connections lent one task at a time: kept between statements, set right by asyncpg after a fault."""

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest

from memory.postgres.lender import Lender


@pytest.fixture
async def lender(postgres_cluster) -> AsyncIterator[Lender]:
    name = await postgres_cluster.fresh_database()
    pool = await asyncpg.create_pool(postgres_cluster.url_for(name), min_size=2, max_size=2,
                                     max_inactive_connection_lifetime=0)
    lending = Lender(pool)
    yield lending
    await asyncio.wait_for(lending.close(), 10)  # a test failing with a connection still lent fails, never hangs
    await postgres_cluster.drop_database(name)


async def test_many_tasks_share_the_pools_connections_one_task_at_a_time(lender):
    """Sixty statements at once on two connections: asyncpg refuses a second operation on a busy connection, so
    any connection lent twice at once would fail one of them."""
    async def backend() -> int:
        async with lender.acquire() as con:
            pid = await con.fetchval("SELECT pg_backend_pid()")
            await con.execute("SELECT pg_sleep(0.002)")
            return int(pid)

    pids = await asyncio.wait_for(asyncio.gather(*(backend() for _ in range(60))), 30)
    assert len(set(pids)) == 2 and lender.lent() == 0
    assert await lender.fetchval("SELECT 7") == 7


async def test_a_refused_statement_costs_nothing_but_itself(lender):
    with pytest.raises(asyncpg.DivisionByZeroError):
        await lender.fetchval("SELECT 1 / 0")
    async with lender.acquire() as con:
        with pytest.raises(asyncpg.UniqueViolationError):
            async with con.transaction():
                await con.execute("CREATE TABLE t (id int PRIMARY KEY)")
                await con.execute("INSERT INTO t VALUES (1), (1)")
    assert lender.lent() == 0
    assert await lender.fetchval("SELECT to_regclass('t') IS NULL")  # rolled back, and the connections serve on
    assert await asyncio.gather(*(lender.fetchval("SELECT $1::int", n) for n in range(5))) == list(range(5))


async def test_a_statement_cancelled_halfway_leaves_no_connection_busy_nor_a_transaction_open(lender):
    async def long_write() -> None:
        async with lender.acquire() as con:
            await con.execute("BEGIN")  # as a cancelled `transaction()` block could leave it
            await con.execute("SELECT pg_sleep(10)")

    writing = asyncio.create_task(long_write())
    await asyncio.sleep(0.2)
    writing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await writing
    for _ in range(4):  # whichever connection comes next: idle, not in a transaction
        async with lender.acquire() as con:
            assert not con.is_in_transaction() and await con.fetchval("SELECT 1") == 1
    assert lender.lent() == 0


async def test_a_transaction_left_open_without_a_fault_is_rolled_back_before_the_connection_serves_again(lender):
    """Nothing of one task's unfinished transaction reaches the next task's statements (nor is committed by them)."""
    async with lender.acquire() as con:
        await con.execute("CREATE TABLE notes (said text)")
    async with lender.acquire() as con:
        await con.execute("BEGIN")
        await con.execute("INSERT INTO notes VALUES ('whispered in a private channel')")
    for _ in range(4):
        async with lender.acquire() as con:
            assert not con.is_in_transaction() and await con.fetchval("SELECT count(*) FROM notes") == 0
    assert lender.lent() == 0


async def test_a_task_cancelled_as_a_connection_is_handed_to_it_loses_no_connection(lender):
    holders = [await lender.take() for _ in range(2)]  # every connection lent: the next ones wait
    waiting = [asyncio.create_task(lender.take()) for _ in range(2)]
    await asyncio.sleep(0.01)
    await lender.release(holders[0])  # handed to the first waiting task ...
    waiting[0].cancel()  # ... cancelled before it ran again
    with pytest.raises(asyncio.CancelledError):
        await waiting[0]
    con = await asyncio.wait_for(waiting[1], 5)  # the connection went on to the next one
    await lender.release(con)
    await lender.release(holders[1])
    assert lender.lent() == 0 and len(set(await asyncio.gather(*(
        lender.fetchval("SELECT pg_backend_pid() FROM pg_sleep(0.05)") for _ in range(2))))) == 2


async def test_a_connection_the_server_dropped_while_idle_is_replaced_before_it_is_lent(lender, postgres_cluster):
    pids = set(await asyncio.gather(*(lender.fetchval("SELECT pg_backend_pid() FROM pg_sleep(0.05)")
                                      for _ in range(2))))
    admin = await asyncpg.connect(postgres_cluster.url_for("postgres"))
    try:
        for pid in pids:
            assert await admin.fetchval("SELECT pg_terminate_backend($1, 5000)", pid)
    finally:
        await admin.close()
    await asyncio.sleep(0.1)  # the server's notice reaches this process
    fresh = await asyncio.gather(*(lender.fetchval("SELECT pg_backend_pid() FROM pg_sleep(0.05)") for _ in range(2)))
    assert not pids & set(fresh) and lender.lent() == 0


async def test_a_pool_that_cannot_connect_fails_the_task_asking_and_not_those_waiting(lender, monkeypatch):
    """The database unreachable at a lending: that task hears of it; one waiting for the same slot tries for
    itself instead of waiting for a connection that will never be given back."""
    held = await lender.take()
    real = asyncpg.Pool.acquire
    failures = [OSError("connection refused")]

    async def acquire(pool, **options):
        if failures:
            await asyncio.sleep(0.05)
            raise failures.pop()
        return await real(pool, **options)

    monkeypatch.setattr(asyncpg.Pool, "acquire", acquire)
    first = asyncio.create_task(lender.take())  # takes the second slot, and fails
    await asyncio.sleep(0.01)
    second = asyncio.create_task(lender.take())  # waits: both slots are taken
    with pytest.raises(OSError, match="refused"):
        await first
    con = await asyncio.wait_for(second, 5)
    assert await con.fetchval("SELECT 1") == 1
    await lender.release(con)
    await lender.release(held)
    assert lender.lent() == 0


async def test_closing_returns_every_connection_and_one_given_back_later_goes_to_the_pool(postgres_cluster):
    name = await postgres_cluster.fresh_database()
    pool = await asyncpg.create_pool(postgres_cluster.url_for(name), min_size=2, max_size=2)
    lender = Lender(pool)
    await lender.fetchval("SELECT 1")  # one idle
    late = await lender.take()
    closing = asyncio.create_task(lender.close())  # asyncpg's close waits for the lent one
    await asyncio.sleep(0.05)
    assert not closing.done()
    await lender.release(late)
    await asyncio.wait_for(closing, 10)
    assert pool.is_closing()
    await postgres_cluster.drop_database(name)
