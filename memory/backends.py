"""Which backend serves a database: a SQLite file, or a PostgreSQL URL."""

from __future__ import annotations

import time
from pathlib import Path

from memory.database_url import is_shared
from memory.sqlite.store import SqliteStore
from memory.store import Clock, Store


async def open_store(target: Path | str, clock: Clock = time.time, pool_size: int | None = None) -> Store:
    """Open (creating and migrating) the store at `target`; anything unusable is a StoreError."""
    if is_shared(target):
        from memory.postgres.store import PostgresStore  # asyncpg is loaded only for a PostgreSQL database

        return await PostgresStore.open(str(target), clock, pool_size)
    return await SqliteStore.open(target, clock)
