"""Ingest throughput: messages stored per second across many channels, token counting and recall's index included.

Measured against a bare loop in the same run: the same texts tokenized and inserted one per
transaction into a plain table of the same database kind, with nothing else (no memory bookkeeping,
no search index). The ratio says what the engine's bookkeeping costs on this machine.
"""

from __future__ import annotations

import random
import tempfile
import time
from pathlib import Path

from bench.backends import bare_ingest, place
from bot.config import validate
from bot.engine import Engine
from bot.providers.offline import OfflineLLM
from memory.records import Scope

WORDS = ["memory", "thread", "window", "anchor", "chronicle", "persona", "channel", "summary", "cache", "token",
         "budget", "calculator_v2", "Tokyo", "2026", "deploy", "review", "coffee", "tomorrow", "meeting", "draft"]


def _message(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 80)))


async def run(backend: str = "sqlite", channels: int = 200, per_channel: int = 25) -> list[dict]:
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        where = await place(backend, Path(tmp))
        database = {"url": where} if backend == "postgresql" else {}
        engine = await Engine.open(validate({"data_dir": tmp, "database": database}), OfflineLLM())
        scopes = [Scope.channel(1, 1000 + c) for c in range(channels)]
        texts = [_message(rng) for _ in range(channels * per_channel)]
        started = time.perf_counter()
        for i, text in enumerate(texts):
            await engine.conversations.hear(scopes[i % channels], text, author_name="u", external_id=10_000 + i)
        await engine.store.index_messages()  # recall's index, filled in one batch before the next search
        elapsed = time.perf_counter() - started
        await engine.close()
        bare = await bare_ingest(backend, where if backend == "postgresql" else Path(tmp) / "bare.sqlite3", texts,
                                 channels)
    per_second = len(texts) / elapsed
    return [{"bench": "ingest", "backend": backend, "channels": channels, "messages": len(texts),
             "per_second": round(per_second, 1),
             "bare_per_second": round(bare, 1), "ratio_to_bare": round(per_second / bare, 2)}]
