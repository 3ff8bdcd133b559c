"""Where a benchmark's database lives: a SQLite file, or a fresh database on a throwaway PostgreSQL server
(started once per run, flushed as SQLite's WAL is: see tests/postgres_cluster.py)."""

from __future__ import annotations

import asyncio
import atexit
import time
from pathlib import Path

from memory.postgres.baseline import bare_ingest as postgres_ingest
from memory.postgres.baseline import bare_window_select as postgres_select
from memory.postgres.baseline import burst_table as postgres_burst_table
from memory.sqlite.baseline import bare_ingest as sqlite_ingest
from memory.sqlite.baseline import bare_window_select as sqlite_select
from memory.sqlite.baseline import burst_table as sqlite_burst_table
from memory.store import Store
from tests.postgres_cluster import Cluster, find_binaries

BACKENDS = ("sqlite", "postgresql")
_cluster: Cluster | None = None


def _server() -> Cluster:
    global _cluster
    if _cluster is None:
        binaries = find_binaries()
        if binaries is None:
            raise SystemExit("bench: PostgreSQL is not installed (apt-get install postgresql-15)")
        _cluster = Cluster(binaries, durable=True).start()
        atexit.register(_cluster.stop)
    return _cluster


async def place(backend: str, folder: Path) -> Path | str:
    """A new, empty database of this backend."""
    if backend == "sqlite":
        return folder / "bench.sqlite3"
    server = _server()
    return server.url_for(await server.fresh_database())


async def bare_window_select(store: Store, thread_id: int, start_seq: int) -> float:
    if type(store).__name__ == "PostgresStore":
        return await postgres_select(store, thread_id, start_seq)
    return await sqlite_select(store, thread_id, start_seq)


async def bare_ingest(backend: str, where: Path | str, texts: list[str], channels: int) -> float:
    if backend == "postgresql":
        return await postgres_ingest(str(where), texts, channels)
    return await sqlite_ingest(Path(where), texts, channels)


async def bare_burst(backend: str, where: Path | str, channels: int, delay: float) -> tuple[float, list[float]]:
    """N channels answered at once by a bare loop: store the message, read its channel's last rows, wait for the
    model (`delay`), store the reply. Wall time and each reply's time, in seconds."""
    table = postgres_burst_table(str(where)) if backend == "postgresql" else sqlite_burst_table(Path(where))
    async with table as (write, read):

        async def one(channel: int) -> float:
            started = time.perf_counter()
            await write(channel, f"hello from channel {channel}, what is on today?")
            await read(channel)
            await asyncio.sleep(delay)
            await write(channel, "the model's answer")
            return time.perf_counter() - started

        started = time.perf_counter()
        replies = await asyncio.gather(*(one(c) for c in range(channels)))
        return time.perf_counter() - started, list(replies)
