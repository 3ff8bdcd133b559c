"""Forget-me (DESIGN.md section 6): erasures, opt-outs, and the rewriting of every memory written from them."""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import time

from bot.services.effective_settings import EffectiveSettings
from bot.services.snapshots import Snapshots
from memory import claims, forget
from memory.errors import Failure
from memory.llm import LLM
from memory.records import Message, Scope
from memory.settings import StelisSettings
from memory.store import Store, StoreError, backoff

log = logging.getLogger(__name__)
RETRY_SECONDS = 30.0  # the first wait before a failed rewrite of erased memory is tried again


class Forgetting:
    def __init__(self, store: Store, llm: LLM, settings: EffectiveSettings, stelis: StelisSettings,
                 snapshots: Snapshots, persona: str, owner: str):
        self._store = store
        self._owner = f"{owner} forget"  # its own claims: it waits for this process's merges too
        self._llm = llm
        self._settings = settings
        self._stelis = stelis
        self._snapshots = snapshots
        self._persona = persona
        self._opted_out: set[int] = set()
        self._loaded_at = -math.inf
        self._lock = asyncio.Lock()  # one rewrite at a time: they touch the same versions
        self.rewrites: set[asyncio.Task[None]] = set()  # erasures being rewritten in the background

    async def load(self) -> None:
        self._opted_out = await self._store.opted_out(self._persona)
        self._loaded_at = time.monotonic()

    async def refresh(self) -> None:
        """Read the opt-outs again when another process may have changed them since."""
        max_age = self._settings.max_age
        if max_age is not None and time.monotonic() - self._loaded_at > max_age:
            await self.load()

    def opted_out(self) -> frozenset[int]:
        """Everyone who asked not to be remembered (a front end shows only those of its server)."""
        return frozenset(self._opted_out)

    def remembers(self, user_id: int | None) -> bool:
        return user_id is None or user_id not in self._opted_out

    async def opt_out(self, user_id: int, out: bool = True) -> None:
        """From now on, this person's messages are (not) remembered at all."""
        await self._store.set_optout(self._persona, user_id, out)
        await self.load()

    async def edit_message(self, external_id: int, content: str) -> Message | None:
        """A message edited in Discord: the next context shows the new text. An erased message stays erased,
        and someone who opted out is not remembered, in an edit either: None."""
        await self.refresh()
        stored = await self._store.message_by_external_id(external_id)
        if stored is None or stored.deleted_at is not None or not self.remembers(stored.author_id):
            return None
        message = await self._store.edit_message(external_id, content)
        if message is not None:
            self._snapshots.changed(message.thread_id)
        return message

    async def delete_message(self, external_id: int) -> bool:
        """A message deleted in Discord is erased, and what was written from it is rewritten in the background."""
        purged = await self._store.purge(external_id=external_id)
        if purged:
            self._snapshots.changed(*purged)
            self._in_background(purged)
        return bool(purged)

    def resume(self, erased: dict[int, set[int]]) -> None:
        """At start-up: rewrite the memory of messages erased before a rewrite was cut short (a crash, the database
        gone, a shutdown), in the background (it asks the model)."""
        log.warning("%d erased message(s) whose memory was not rewritten yet: rewriting it now",
                    sum(len(seqs) for seqs in erased.values()))
        self._snapshots.changed(*erased)
        self._in_background(erased)

    def _in_background(self, purged: dict[int, set[int]], scrub: bool = False) -> None:
        task = asyncio.create_task(self._until_rewritten(purged, scrub))
        self.rewrites.add(task)
        task.add_done_callback(self.rewrites.discard)

    async def _until_rewritten(self, purged: dict[int, set[int]], scrub: bool) -> None:
        """Rewrite (then, for a forget-me, clean the database's files); after a failure (the database away a moment),
        again and again later, doubling the wait. Meanwhile the erasure is pending in the database, so a shutdown
        leaves it to the next start."""
        for failures in itertools.count(1):
            try:
                await self._rewrite(purged)
                if scrub:
                    await self._scrub()
                return
            except Exception:  # any failure: nothing erased may outlive it, so it is tried until it works
                delay = backoff(RETRY_SECONDS, failures)
                log.exception("the memory of %d erased message(s) is not rewritten yet; trying again in %.0f s",
                              sum(len(seqs) for seqs in purged.values()), delay)
                await asyncio.sleep(delay)

    async def forget_person(self, user_id: int, *, guild_id: int | None = None,
                            dm: Scope | None = None) -> forget.Rewritten:
        """Erase someone's messages in a server (or their DM) and rewrite all memory written from them."""
        thread_ids = await self._store.conversation_threads(self._persona, guild_id=guild_id,
                                                            scope_key=dm.key if dm else None)
        purged = await self._store.purge(author_id=user_id, thread_ids=thread_ids)
        self._snapshots.changed(*purged)
        try:
            done = await self._rewrite(purged)
        except Exception as exc:  # the words are erased; what was written from them is finished in the background
            log.exception("forget-me of %d: the memory written from the erased messages is rewritten later", user_id)
            self._in_background(purged, scrub=True)
            return forget.Rewritten(messages=sum(len(seqs) for seqs in purged.values()),
                                    unfinished=exc.notice if isinstance(exc, Failure) else type(exc).__name__)
        done.unscrubbed = await self._scrub()
        return done

    async def _scrub(self) -> str | None:
        """The database's files cleaned too (old pages, index segments, the log); why not, if they could not be."""
        try:
            await self._store.scrub()
        except StoreError as exc:  # erased from every row all the same; say what is left, and where
            log.error("forget-me: the database's files were not cleaned: %s", exc.notice)
            return exc.notice
        return None

    async def _rewrite(self, purged: dict[int, set[int]]) -> forget.Rewritten:
        settings = await self._settings.memory(None)
        # One rewrite at a time, in this process and across those sharing the database (one starting up finishes
        # what another's rewrite left: after it, never beside it).
        async with self._lock, claims.held(self._store, f"forget:{self._persona}", self._owner,
                                           settings.work.lease_seconds):
            done = await forget.rewrite(self._store, self._llm, purged, settings, self._stelis, self._owner)
            await self._store.rewritten(purged)  # until here a restart does it again
        self._snapshots.changed(*done.threads)
        await self._snapshots.write_due()  # snapshots on disk hold messages too
        return done
