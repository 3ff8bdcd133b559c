"""Many conversations at once: N channels of one server each get a message at the same moment, and the model
answers each after DELAY seconds.

Against a bare loop in the same run (store the message, read the channel's last rows, wait for the model, store
the reply: bench/backends.bare_burst). Reported: wall time and its ratio to bare, p95 reply time, and the event
loop's worst stall (a 10 ms ticker's largest lateness). `memory work`: every channel's message also makes a
short-term version due, so versions are written during the burst; its p95 is compared with the burst without.
Each size is run ROUNDS times, bare and Stelis alternated: a ratio is each round's (both measured within seconds of
each other), the median reported with them all (on this shared machine one burst of 500 took 1.16 to 1.36 times
bare's from one run to the next, the code unchanged).
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from bench.backends import bare_burst, place
from bot.config import validate
from bot.engine import Engine
from bot.providers.offline import OfflineLLM
from memory.llm import LLMRequest, LLMResult, TextSink, Usage
from memory.records import Scope
from memory.tokens import count_tokens

DELAY = 1.0
SIZES = (1, 10, 100, 500)
ROUNDS = 3
THRESHOLD = 2  # messages before a version is due: the burst's message is each channel's second
REPLY = "Standup at ten, then the release review after lunch; the deploy window opens at four."
REPLY_TOKENS = count_tokens(REPLY)  # as the API would report it


@dataclass(frozen=True)
class Burst:
    """One burst of Stelis: its wall time, each reply's time, the loop's worst stall, the versions written."""

    wall: float
    replies: list[float]
    stall: float
    versions: int


class SlowModel(OfflineLLM):
    """A remote model: a reply comes after DELAY seconds and costs this process nothing but the wait, as the bare
    loop's does (the offline model would write it here, counting the whole prompt's tokens for its usage: CPU a
    model behind an API spends elsewhere). Summaries are the offline model's, at once."""

    async def complete(self, request: LLMRequest, on_text: TextSink | None = None) -> LLMResult:
        if request.purpose != "reply":
            return await super().complete(request, on_text)
        await asyncio.sleep(DELAY)
        if on_text:
            on_text(REPLY)
        return LLMResult(text=REPLY, usage=Usage(input_tokens=1_000, output_tokens=REPLY_TOKENS), model="remote")


async def run(backend: str = "sqlite", sizes: tuple[int, ...] = SIZES, rounds: int = ROUNDS) -> list[dict]:
    lines = []
    for channels in sizes:
        bare: list[tuple[float, list[float]]] = []
        runs: dict[str, list[Burst]] = {"none": [], "versions": []}
        for _ in range(rounds):
            bare.append(await _bare(backend, channels))
            runs["none"].append(await _stelis(backend, channels, memory_work=False))
            runs["versions"].append(await _stelis(backend, channels, memory_work=True))
        for work, bursts in runs.items():
            ratios = [b.wall / w for b, (w, _) in zip(bursts, bare, strict=True)]
            lines.append({"bench": "concurrency", "backend": backend, "channels": channels, "memory_work": work,
                          "wall_s": _median(b.wall for b in bursts), "bare_wall_s": _median(w for w, _ in bare),
                          "ratio_to_bare": _median(ratios), "ratios": [round(r, 2) for r in ratios],
                          "p95_reply_s": _median(_p95(b.replies) for b in bursts),
                          "bare_p95_reply_s": _median(_p95(r) for _, r in bare),
                          "worst_stall_ms": round(max(b.stall for b in bursts) * 1000),
                          "memory_versions": round(statistics.median(b.versions for b in bursts))})
        over = [_p95(busy.replies) / _p95(plain.replies) for plain, busy in zip(runs["none"], runs["versions"],
                                                                                 strict=True)]
        lines.append({"bench": "concurrency", "backend": backend, "channels": channels,
                      "memory_work_p95_over_none": _median(over), "each_round": [round(r, 2) for r in over]})
    return lines


def _median(values: Iterable[float]) -> float:
    return round(statistics.median(values), 3)


def _p95(values: list[float]) -> float:
    return round(statistics.quantiles(values, n=20)[-1] if len(values) > 1 else values[0], 3)


async def _bare(backend: str, channels: int) -> tuple[float, list[float]]:
    with tempfile.TemporaryDirectory() as tmp:
        return await bare_burst(backend, await place(backend, Path(tmp)), channels, DELAY)


async def _stelis(backend: str, channels: int, *, memory_work: bool) -> Burst:
    with tempfile.TemporaryDirectory() as tmp:
        where = await place(backend, Path(tmp))
        config = validate({"data_dir": tmp, "database": {"url": where} if backend == "postgresql" else {},
                           "snapshots": {"interval_seconds": 0}, "llm": {"reply_tools": False},
                           "short_term_history": {"message_threshold": THRESHOLD if memory_work else 10_000}})
        engine = await Engine.open(config, SlowModel())
        gc.collect()
        gc.freeze()  # as the bot does after start-up (bot/__main__.py): full collections skip what start-up made
        scopes = [Scope.channel(1, 1_000 + c) for c in range(channels)]
        for scope in scopes:  # each conversation exists and has said something before
            await engine.conversations.hear(scope, "good morning", author_name="ana")
        await engine.conversations.settle()
        if memory_work:
            await engine.start_memory()
        stalls: list[float] = []
        ticking = asyncio.Event()
        ticker = asyncio.create_task(_tick(stalls, ticking))

        async def one(scope: Scope) -> float:
            started = time.perf_counter()
            # each channel's own words, as the bare loop's (no cache here answers five hundred at once)
            heard = await engine.conversations.hear(scope, f"hello from channel {scope.channel_id}, what is on today?",
                                                    author_name="ben")
            assert heard is not None
            await engine.conversations.reply(heard.thread_id)
            return time.perf_counter() - started

        started = time.perf_counter()
        replies = await asyncio.gather(*(one(s) for s in scopes))
        wall = time.perf_counter() - started
        ticking.set()
        await ticker
        versions = await engine.store.count_rows("memory_records")  # written during the burst (and its tail)
        await engine.close()
        gc.unfreeze()  # the next run's start-up is its own
        return Burst(wall, list(replies), max(stalls, default=0.0), versions)


async def _tick(stalls: list[float], done: asyncio.Event) -> None:
    """How late a 10 ms sleep wakes: the loop's stalls while the burst runs."""
    while not done.is_set():
        before = time.perf_counter()
        await asyncio.sleep(0.01)
        stalls.append(time.perf_counter() - before - 0.01)
