"""A value read once per state of the store, however many ask for it at the same moment."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class OncePerStamp(Generic[K, V]):
    """Per key, the value read for the newest stamp (the store's change counters it depends on). Those asking while
    it is read wait for that one read (five hundred channels answering at once asked five hundred times).

    The first to ask reads in its own task: an assembly holding a database connection (Store.held) must not wait
    on another task that needs one. Should that read fail or be cancelled, nothing is kept, and each waiting reads
    for itself."""

    def __init__(self) -> None:
        self._found: dict[K, tuple[Hashable, asyncio.Future[V]]] = {}

    async def get(self, key: K, stamp: Hashable, read: Callable[[], Awaitable[V]]) -> V:
        while True:
            found = self._found.get(key)
            if found is None or found[0] != stamp or found[1].cancelled():
                reading: asyncio.Future[V] = asyncio.get_running_loop().create_future()
                self._found[key] = (stamp, reading)
                try:
                    value = await read()
                except BaseException:
                    reading.cancel()
                    raise
                reading.set_result(value)
                return value
            if not found[1].done():  # read already: no wait (the read of most who ask)
                await asyncio.wait([found[1]])
            if not found[1].cancelled():
                return found[1].result()
