"""Work one holder does at a time across processes sharing a database, for a caller that must do it: it waits."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from memory.store import Store

HELD_POLL = 0.1  # seconds between looks at a claim another holds


@contextlib.asynccontextmanager
async def held(store: Store, key: str, owner: str, lease_seconds: float) -> AsyncIterator[None]:
    """Hold `key` for `owner`, waiting while another holds it (until it lets go or its lease runs out)."""
    while not await store.claim(key, owner, lease_seconds):  # noqa: ASYNC110 (held in the database, maybe elsewhere)
        await asyncio.sleep(HELD_POLL)
    try:
        yield
    finally:
        await store.release(key, owner)
