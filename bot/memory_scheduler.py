"""Runs memory updates: a due-scan over SQLite (the source of truth) and APScheduler timers per channel."""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.schedulers.base import STATE_RUNNING

from bot import logs, metrics
from bot.foreground import Foreground
from bot.owner import process_owner
from memory import short_term
from memory.errors import Failure
from memory.llm import LLM, LLMError
from memory.records import MemoryChannel, MemoryRecord
from memory.settings import MemorySettings
from memory.short_term import Outcome
from memory.store import StaleUpdate, Store

log = logging.getLogger(__name__)

DUE_BATCH = 1_000  # channels one scan updates at most; the next scan takes the rest
WORKSPACE_ROUNDS = 3  # merges of one server's workspace in a row while its channel memories keep changing

SettingsFor = Callable[[MemoryChannel | None], Awaitable[MemorySettings]]  # None: the base settings


class MemoryWorker:
    """One update at a time per channel, at most `concurrency` updates (and so LLM calls) at once."""

    def __init__(self, store: Store, llm: LLM, settings_for: SettingsFor, clock: Callable[[], float],
                 concurrency: int, lease_seconds: float):
        self.store = store
        self.llm = llm
        self.settings_for = settings_for
        self.clock = clock
        self._locks: defaultdict[int, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._slots = asyncio.Semaphore(concurrency)
        self.concurrency = concurrency
        self.lease_seconds = lease_seconds  # a crashed process's updates are taken over after this
        self._running: set[asyncio.Task[object]] = set()
        self.owner = store.owner or process_owner()  # who holds a lease
        self._merge_again: set[tuple[str, int]] = set()  # workspace merges that failed: the next scan retries
        self.foreground = Foreground()  # replies under way: an update waits for a moment without them

    async def drain(self, grace: float = 10.0) -> None:
        """At shutdown: let running updates finish for a moment, then cancel them.

        A cancelled update leaves nothing half-written (each save is one transaction); a pending
        long-term merge is repaired on the next start.
        """
        running = {t for t in self._running if t is not asyncio.current_task()}
        if not running:
            return
        _, late = await asyncio.wait(running, timeout=grace)
        for task in late:
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)
    async def run_due(self) -> list[Outcome]:
        """Update every due channel this worker can claim, then each touched guild's workspace memory once.

        `concurrency` runners each claim a channel, update it and claim the next; workers sharing a
        database never take the same one (rows held by another are skipped).
        """
        task = asyncio.current_task()
        if task is not None:
            self._running.add(task)
            task.add_done_callback(self._running.discard)
        await self.foreground.quiet()
        now = self.clock()
        metrics.MEMORY_DUE.set(len(await self.store.due_channels(now, DUE_BATCH)))
        done: list[tuple[MemoryChannel, Outcome]] = []

        async def runner() -> None:  # claims one channel at a time: leases cover only work under way
            while len(done) < DUE_BATCH:
                await self.foreground.quiet()  # replies first: each update waits for a moment without them
                claimed = await self.store.claim_due(now, self.owner, self.lease_seconds, 1)
                if not claimed:
                    return
                done.append((claimed[0], await self._claimed(claimed[0].thread_id, now, force=False)))

        await asyncio.gather(*(runner() for _ in range(self.concurrency)))
        guilds = {(ch.persona, ch.guild_id) for ch, outcome in done
                  if outcome.long_term is not None and ch.shared and ch.guild_id is not None} | self._merge_again
        self._merge_again.clear()
        for persona, guild_id in sorted(guilds):
            await self._workspace(persona, guild_id)
        return [outcome for _, outcome in done]

    async def run_channel(self, thread_id: int, force: bool = False) -> Outcome:
        """Update one channel if it is (still) due, or now when forced; a failure never escapes."""
        now = self.clock()
        claimed = await self.store.claim_due(now, self.owner, self.lease_seconds, 1, thread_id=thread_id)
        if not claimed:
            if await self.store.memory_channel(thread_id) is not None:
                metrics.LEASE_CONFLICTS.inc()  # another worker has it
            return Outcome(thread_id)
        return await self._claimed(thread_id, now, force)

    async def rebuild_long_term(self, thread_id: int) -> MemoryRecord | None:
        """Write the channel's long-term memory again from its visible versions (after an edit or a rollback),
        never while this process updates the same channel."""
        async with self._locks[thread_id]:
            ch = await self.store.memory_channel(thread_id)
            if ch is None:
                return None
            async with self._slots:
                with logs.tagged(guild=ch.guild_id, thread=thread_id):
                    return await short_term.rebuild_long_term(self.store, self.llm, ch, await self.settings_for(ch))

    async def _claimed(self, thread_id: int, now: float, force: bool) -> Outcome:
        """Run the update of a channel this worker holds the lease of (if still due), then let it go.

        Across processes the lease keeps one update per channel at a time, and the store refuses a save
        over a range another worker saved first; in this process a lock does, and the channel is read
        after it so an update queued behind another starts from where that one ended.
        """
        try:
            async with self._locks[thread_id]:
                ch = await self.store.memory_channel(thread_id)
                if ch is None or (not force and (ch.paused or ch.due_at is None or ch.due_at > now)):
                    return Outcome(thread_id)
                async with self._slots:
                    with logs.tagged(guild=ch.guild_id, thread=thread_id):  # whose model calls these are
                        settings = await self.settings_for(ch)
                        return await short_term.update(self.store, self.llm, ch, settings, now, force)
        except StaleUpdate as exc:
            metrics.LEASE_CONFLICTS.inc()
            log.info("memory update of thread %d dropped: %s", thread_id, exc)
            return Outcome(thread_id)
        except Exception as exc:  # one channel's bug must not stop the others
            log.exception("memory update of thread %d crashed", thread_id)
            ch = await self.store.memory_channel(thread_id)
            await self.store.memory_failed(thread_id, now, (await self.settings_for(ch)).work.retry_seconds)
            return Outcome(thread_id, error=f"internal error: {exc}")
        finally:
            await self.store.release_channel(thread_id, self.owner)

    async def unshared(self, persona: str, guild_id: int) -> None:
        """A channel of the server stopped being shared: the server memory, merged from it too, goes now, and is merged
        again from the channels still shared, in the background, after any merge under way (which read it too)."""
        await short_term.drop_long_term(self.store, persona, "workspace", guild_id)
        task = asyncio.create_task(self._merged_anew(persona, guild_id))
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def _merged_anew(self, persona: str, guild_id: int) -> None:
        try:
            async with short_term.workspace_held(self.store, persona, guild_id, f"{self.owner} anew",
                                                 self.lease_seconds):
                await short_term.drop_long_term(self.store, persona, "workspace", guild_id)  # a merge under way's
                async with self._slots:
                    await short_term.update_workspace(self.store, self.llm, persona, guild_id,
                                                      await self.settings_for(None))
        except LLMError as exc:
            log.warning("workspace memory of guild %d not merged again: %s (the next scan tries again)", guild_id,
                        exc.notice)
            self._merge_again.add((persona, guild_id))

    async def _workspace(self, persona: str, guild_id: int) -> None:
        """Merge a server's workspace memory, by one worker at a time across processes.

        A worker that finds the merge held leaves it to the holder, which looks at the channel memories
        again after letting go: one saved while it merged is merged in the next round.
        """
        key = short_term.workspace_key(persona, guild_id)
        for _ in range(WORKSPACE_ROUNDS):
            if not await self.store.claim(key, self.owner, self.lease_seconds):
                metrics.LEASE_CONFLICTS.inc()
                return
            try:
                async with self._slots:
                    with logs.tagged(guild=guild_id):
                        merged = await short_term.update_workspace(self.store, self.llm, persona, guild_id,
                                                                   await self.settings_for(None))
            except LLMError as exc:
                log.warning("workspace memory of guild %d not updated: %s (the next scan tries again)", guild_id,
                            exc.notice)
                self._merge_again.add((persona, guild_id))
                return
            finally:
                await self.store.release(key, self.owner)
            if merged is None:
                return  # the newest merge has read every channel memory there is
        log.warning("workspace memory of guild %d: its channel memories kept changing; the next scan merges the"
                    " rest", guild_id)
        self._merge_again.add((persona, guild_id))


class MemoryScheduler:
    """APScheduler drives the worker: a periodic due-scan, and a timer per channel pushed back by messages.

    Timers only wake the due-scan early; deadlines live in SQLite, so a restart loses nothing.
    """

    def __init__(self, worker: MemoryWorker, scan_interval: float):
        self.worker = worker
        self.scan_interval = scan_interval
        self.scheduler = AsyncIOScheduler(timezone=UTC)
        self._scanning = False
        self._again = False
        self._soon: asyncio.Task[None] | None = None  # a scan asked for by channels due already

    async def start(self) -> None:
        self.scheduler.start()
        self.scheduler.add_job(self.scan, "interval", seconds=self.scan_interval, id="memory-due-scan",
                               next_run_time=datetime.now(UTC), max_instances=1, coalesce=True)
        self.scheduler.add_job(self.arm_upcoming, "interval", seconds=self.scan_interval, id="memory-timers",
                               max_instances=1, coalesce=True)
        await self.arm_upcoming()

    async def arm_upcoming(self) -> None:
        """Timers for the deadlines of the next two scan intervals: at start-up a thousand servers' deadlines
        hours away need none yet (start-up stays flat), and each interval arms the next before they fall due."""
        try:
            upcoming = await self.worker.store.upcoming_deadlines(self.worker.clock() + self.horizon)
        except Failure as exc:  # the due-scan still finds them
            log.warning("memory timers not armed: %s", exc)
            return
        for thread_id, due_at in upcoming:
            self.arm(thread_id, due_at)

    async def scan(self) -> None:
        """What a timer or the interval runs: one due-scan at a time. A timer that fires meanwhile asks it to look
        once more when done (it claims what was due when it began); five hundred channels falling due together
        are one scan, not five hundred of them each reading every due channel."""
        if self._scanning:
            self._again = True
            return
        self._scanning = True
        try:
            self._again = True
            while self._again:
                self._again = False
                await self.worker.run_due()
        finally:
            self._scanning = False

    @property
    def horizon(self) -> float:
        """How far ahead a deadline gets its timer: two scans, so the scan before it always arms it in time."""
        return 2.0 * self.scan_interval

    @property
    def running(self) -> bool:
        return bool(self.scheduler.running)

    def arm(self, thread_id: int, due_at: float | None) -> None:
        """(Re)set a channel's timer: each message moves it to the new deadline (before start, nothing: the
        deadline is stored, and start arms what is due). A deadline beyond the horizon gets none yet: a busy
        bot would keep a timer per active channel, each message rescheduling one."""
        if self.scheduler.state != STATE_RUNNING:  # not started, or stopping: it paused, and running work drains
            return
        job_id = f"memory-{thread_id}"
        delay = None if due_at is None else max(0.0, due_at - self.worker.clock())
        if delay is None or delay == 0 or delay > self.horizon:  # none, now, or hours away (a later scan arms it)
            if self.scheduler.get_job(job_id):
                self.scheduler.remove_job(job_id)
            if delay == 0:
                self._scan_soon()
            return
        self.scheduler.add_job(self.scan, "date", id=job_id, replace_existing=True,
                               run_date=datetime.now(UTC) + timedelta(seconds=delay), misfire_grace_time=None)

    def _scan_soon(self) -> None:
        """A scan for channels due already, without a timer each: a burst of five hundred channels falling due at
        once made five hundred jobs, each waking the scheduler (0.08 s of the loop before the replies' model calls,
        bench concurrency); one scan, or one more look by the scan under way, claims them all."""
        if self._scanning:
            self._again = True
        elif self._soon is None or self._soon.done():
            self._soon = asyncio.create_task(self._scan_now())

    async def _scan_now(self) -> None:
        try:
            await self.scan()
        except Exception:  # as APScheduler logs a timer's: the interval's scan tries again
            log.exception("memory due-scan failed; the next scan tries again")

    def deadline(self, thread_id: int) -> datetime | None:
        job = self.scheduler.get_job(f"memory-{thread_id}")
        return job.next_run_time if job else None

    async def stop(self, grace: float) -> None:
        """No new runs; the running ones get `grace` seconds to finish, then the scheduler goes.

        Shutting APScheduler down first would cancel a running update at once (its executor
        cancels pending futures), so the grace period would do nothing.
        """
        if self.scheduler.running:
            self.scheduler.pause()
            await self.worker.drain(grace)
            self.scheduler.shutdown(wait=False)
