"""Context snapshots on disk (seed 003): each changed thread's state written now and then, and at shutdown."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from memory import snapshots
from memory.context import Assembler
from memory.errors import Failure
from memory.records import Thread
from memory.store import Store

log = logging.getLogger(__name__)


class Snapshots:
    def __init__(self, store: Store, assembler: Assembler, directory: Path):
        self._store = store
        self._assembler = assembler
        self.directory = directory
        # Threads whose snapshot is out of date, with how many changes: one made while its snapshot is written
        # (an erasure, say) keeps it due, and the next write takes it.
        self._dirty: dict[int, int] = {}
        self._writing = asyncio.Lock()  # one write at a time: a file read before an erasure never lands after

    def changed(self, *thread_ids: int) -> None:
        for thread_id in thread_ids:
            self._dirty[thread_id] = self._dirty.get(thread_id, 0) + 1

    async def export(self, thread_id: int) -> dict[str, Any]:
        return await snapshots.export(self._store, self._assembler, thread_id)

    async def restore(self, path: Path) -> Thread:
        """Import a snapshot file into a database that has none of its threads."""
        return await snapshots.restore(self._store, await asyncio.to_thread(snapshots.read, path))

    async def write_due(self) -> list[Path]:
        """Snapshot every thread that changed since its last snapshot; a failure is logged, never fatal."""
        written = []
        async with self._writing:
            for thread_id, changes in sorted(self._dirty.items()):
                path = self.directory / f"thread-{thread_id}.json"
                try:
                    snapshot = await self.export(thread_id)
                    await asyncio.to_thread(snapshots.write, path, snapshot)
                except (Failure, OSError) as exc:
                    log.warning("snapshot of thread %d not written: %s", thread_id, exc)
                    continue
                if self._dirty.get(thread_id) == changes:
                    del self._dirty[thread_id]
                written.append(path)
        return written

    async def every(self, seconds: int) -> None:
        while True:
            await asyncio.sleep(seconds)
            await self.write_due()
