"""What the model costs: every call recorded for the server it worked for, read back by day with estimated prices."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from bot import logs
from bot.config import ModelPrice
from memory.llm import LLMRequest, LLMResult
from memory.records import ModelUsage
from memory.store import Store, StoreError

log = logging.getLogger(__name__)

NO_SERVER = 0  # the console, a DM, background work for no server


@dataclass(frozen=True)
class Spent:
    """A server's model use over some days: each day and model, with its estimated cost (None: no price known)."""

    rows: list[tuple[ModelUsage, float | None]]

    def days(self) -> list[tuple[str, int, int, float, float]]:
        """(day, calls, tokens, cache-read share of input, estimated cost), oldest first."""
        out: dict[str, list[float]] = {}
        for usage, cost in self.rows:
            day = out.setdefault(usage.day, [0, 0, 0, 0, 0.0])
            day[0] += usage.calls
            day[1] += usage.tokens
            day[2] += usage.cache_read
            day[3] += usage.input_tokens + usage.cache_read + usage.cache_write
            day[4] += cost or 0.0
        return [(d, int(v[0]), int(v[1]), v[2] / v[3] if v[3] else 0.0, v[4]) for d, v in sorted(out.items())]

    def by_model(self, since: str) -> list[tuple[str, int, int, float, float | None]]:
        """(model, calls, tokens, cache-read share, estimated cost) from `since` on."""
        out: dict[str, tuple[int, int, int, int, float | None]] = {}
        for usage, cost in self.rows:
            if usage.day < since:
                continue
            calls, tokens, read, inputs, total = out.get(usage.model, (0, 0, 0, 0, 0.0))
            out[usage.model] = (calls + usage.calls, tokens + usage.tokens, read + usage.cache_read,
                                inputs + usage.input_tokens + usage.cache_read + usage.cache_write,
                                None if cost is None or total is None else total + cost)
        return [(m, c, t, r / i if i else 0.0, cost) for m, (c, t, r, i, cost) in sorted(out.items())]


class Spending:
    def __init__(self, store: Store, persona: str, prices: Mapping[str, ModelPrice], clock: Callable[[], float]):
        self._store = store
        self._persona = persona
        self._prices = dict(prices)
        self._clock = clock
        # Calls not written yet, added up per (server, day, model), and the write that will take them. One write at a
        # time: what calls end while one is under way go together in the next, so a burst of five hundred replies
        # makes a few statements, not five hundred, and each call still waits until its usage is stored.
        self._due: dict[tuple[int, str, str], list[int]] = {}
        self._next: asyncio.Future[None] | None = None
        self._writer: asyncio.Task[None] | None = None

    async def record(self, request: LLMRequest, result: LLMResult) -> None:
        """One call, for the server the work runs for (the log tags say which), stored before this returns; a
        refusal is logged, not raised: the reply it paid for matters more than its bookkeeping."""
        guild = logs.tag("guild")
        key = (guild if isinstance(guild, int) else NO_SERVER, _day(self._clock()),
               result.model or request.model or "unknown")
        u = result.usage
        counts = self._due.setdefault(key, [0] * 5)
        for i, n in enumerate((1, u.input_tokens, u.output_tokens, u.cache_read_input_tokens,
                               u.cache_creation_input_tokens)):
            counts[i] += n
        if self._next is None:
            self._next = asyncio.get_running_loop().create_future()
        written = self._next
        if self._writer is None:
            self._writer = asyncio.create_task(self._write())
        await asyncio.shield(written)  # a caller cancelled leaves the write to the others

    async def drain(self) -> None:
        """Wait for what is recorded to be written (at shutdown)."""
        if self._writer is not None:
            await self._writer

    async def _write(self) -> None:
        written: asyncio.Future[None] | None = None
        try:
            while self._next is not None:
                due, self._due = self._due, {}
                written, self._next = self._next, None
                try:
                    await self._store.add_usage(self._persona, [
                        (guild, ModelUsage(day, model, *counts)) for (guild, day, model), counts in due.items()])
                except StoreError as exc:
                    log.warning("model usage of %d call(s) not recorded: %s",
                                sum(counts[0] for counts in due.values()), exc.notice)
                except Exception as exc:  # not the database's refusal: each call waiting on it gets the error
                    written.set_exception(exc)
                    continue
                written.set_result(None)
        finally:
            self._writer = None
            for waiting in (written, self._next):  # cancelled mid-write (the loop is closing): no one waits forever
                if waiting is not None and not waiting.done():
                    waiting.cancel()

    async def of(self, guild_id: int | None, days: int = 30) -> Spent:
        """A server's (None: no server's: the console, DMs) last `days` days, today included."""
        first = _day(self._clock() - (days - 1) * 86_400)
        rows = await self._store.usage_since(self._persona, guild_id or NO_SERVER, first)
        return Spent([(row, self.cost(row)) for row in rows])

    def cost(self, usage: ModelUsage) -> float | None:
        """Estimated US dollars, by the longest configured model name that begins this one's."""
        fitting = [name for name in self._prices if usage.model.startswith(name)]
        if not fitting:
            return None
        p = self._prices[max(fitting, key=len)]
        return (usage.input_tokens * p.input + usage.output_tokens * p.output + usage.cache_read * p.cache_read
                + usage.cache_write * p.cache_write) / 1_000_000

    def today(self) -> str:
        return _day(self._clock())

    def month_start(self) -> str:
        return datetime.fromtimestamp(self._clock(), UTC).replace(day=1).strftime("%Y-%m-%d")


def _day(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d")
