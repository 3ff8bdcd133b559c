"""Discord logins (IDENTIFY) paced across processes: one per five seconds for the whole bot, through the
database they share, as discord.py paces the shards of one process."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable

from memory.store import Store

IDENTIFY_SECONDS = 5.0  # Discord allows one IDENTIFY per five seconds (per bucket; one bucket assumed)
POLL_SECONDS = 0.5


class IdentifyGate:
    """Whoever takes the `identify` claim logs in; the claim's lease is the pause before the next login."""

    def __init__(self, store: Store, owner: str, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep):
        self.store = store
        self.owner = owner
        self.sleep = sleep
        self._turns = itertools.count()

    async def wait(self, shard_id: int) -> None:
        # A fresh name each time: a holder may renew its own claim, and a login must never skip the pause.
        holder = f"{self.owner}:shard-{shard_id}:{next(self._turns)}"
        while not await self.store.claim("discord:identify", holder, IDENTIFY_SECONDS):
            await self.sleep(POLL_SECONDS)
