"""Ingest throughput: messages stored per second across many channels, token counting included."""

from __future__ import annotations

import random
import tempfile
import time

from bot.config import validate
from bot.engine import Engine
from bot.providers.offline import OfflineLLM
from memory.records import Scope

WORDS = ["memory", "thread", "window", "anchor", "chronicle", "persona", "channel", "summary", "cache", "token",
         "budget", "calculator_v2", "Tokyo", "2026", "deploy", "review", "coffee", "tomorrow", "meeting", "draft"]


def _message(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 80)))


async def run(channels: int = 200, per_channel: int = 25) -> list[dict]:
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        engine = await Engine.open(validate({"data_dir": tmp}), OfflineLLM())
        scopes = [Scope.channel(1, 1000 + c) for c in range(channels)]
        texts = [_message(rng) for _ in range(channels * per_channel)]
        started = time.perf_counter()
        for i, text in enumerate(texts):
            await engine.hear(scopes[i % channels], text, author_name="u", external_id=10_000 + i)
        elapsed = time.perf_counter() - started
        await engine.close()
    return [{"bench": "ingest", "channels": channels, "messages": len(texts),
             "per_second": round(len(texts) / elapsed, 1)}]
