"""A value read once per state of the store, however many ask at once."""

import asyncio

import pytest

from memory.stamped import OncePerStamp
from memory.store import StoreError


async def test_those_asking_together_share_one_read_and_a_new_stamp_reads_again():
    cache: OncePerStamp[str, int] = OncePerStamp()
    reads = []

    async def read():
        reads.append(1)
        await asyncio.sleep(0.01)
        return len(reads)

    assert await asyncio.gather(*(cache.get("P", 1, read) for _ in range(20))) == [1] * 20
    assert await cache.get("P", 1, read) == 1 and len(reads) == 1  # kept for its stamp
    assert await cache.get("P", 2, read) == 2  # the store changed: read again
    assert await cache.get("Q", 2, read) == 3  # another key is its own


async def test_a_failed_or_cancelled_read_is_not_kept_and_those_waiting_read_for_themselves():
    cache: OncePerStamp[str, str] = OncePerStamp()
    gate = asyncio.Event()

    async def failing():
        await gate.wait()
        raise StoreError("the database went away")

    async def read():
        return "read again"

    first = asyncio.ensure_future(cache.get("P", 1, failing))
    await asyncio.sleep(0)
    waiting = asyncio.ensure_future(cache.get("P", 1, read))
    await asyncio.sleep(0)
    gate.set()
    with pytest.raises(StoreError):
        await first
    assert await waiting == "read again"  # the failure was the first reader's alone

    gate.clear()
    first = asyncio.ensure_future(cache.get("Q", 1, failing))
    await asyncio.sleep(0)
    waiting = asyncio.ensure_future(cache.get("Q", 1, read))
    await asyncio.sleep(0)
    first.cancel()  # the reader's task is cancelled: the one waiting is not
    assert await waiting == "read again"
    assert await cache.get("Q", 1, failing) == "read again"  # and what it read is kept
