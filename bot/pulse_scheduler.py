"""Timers for the autonomous pulse: one APScheduler interval job per server, with jitter."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from memory.records import Scope

log = logging.getLogger(__name__)

Pulse = Callable[[Scope], Awaitable[object]]


class PulseScheduler:
    """A job per server whose autonomy is on; the pulse itself checks quiet, quiet hours and budget."""

    def __init__(self, pulse: Pulse):
        self._pulse = pulse
        self.scheduler = AsyncIOScheduler(timezone=UTC)

    @property
    def running(self) -> bool:
        return bool(self.scheduler.running)

    def start(self) -> None:
        if not self.running:
            self.scheduler.start()

    def arm(self, place: str, scope: Scope, *, enabled: bool, minutes: int, jitter_minutes: int) -> None:
        """(Re)set a server's timer; off removes it (before start, nothing: front ends arm servers as they find
        them, once the pulses run)."""
        if not self.running:
            return
        job_id = f"pulse-{place}"
        if not enabled:
            if self.scheduler.get_job(job_id):
                self.scheduler.remove_job(job_id)
            return
        self.scheduler.add_job(self._pulse, "interval", minutes=minutes, jitter=jitter_minutes * 60 or None,
                               args=[scope], id=job_id, replace_existing=True, max_instances=1, coalesce=True)

    def next_pulse(self, place: str) -> datetime | None:
        job = self.scheduler.get_job(f"pulse-{place}")
        return job.next_run_time if job else None

    def stop(self) -> None:
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)
