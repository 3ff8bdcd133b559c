"""Which backend serves a database: SQLite today (PostgreSQL joins here)."""

from __future__ import annotations

import time
from pathlib import Path

from memory.sqlite.store import SqliteStore
from memory.store import Clock, Store


async def open_store(path: Path | str, clock: Clock = time.time) -> Store:
    """Open (creating and migrating) the store at `path`; anything unusable is a StoreError."""
    return await SqliteStore.open(path, clock)
