"""The scheduler's due-scan over many channels: an indexed range query, not a loop over channels."""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from pathlib import Path

from memory.backends import open_store
from memory.sqlite.baseline import seed_channels
from memory.store import Store

SIZES = (1_000, 100_000)
DUE_SHARE = 0.01  # about one channel in a hundred is due at any scan
SAMPLES = 30


async def fill(store: Store, count: int, now: float, rng: random.Random) -> None:
    rows = []
    for i in range(1, count + 1):
        due = now - rng.random() * 60 if rng.random() < DUE_SHARE else now + rng.random() * 7_200
        rows.append((i, now - 10, rng.randint(1, 40), i * 10, due))
    await seed_channels(store, rows, now)


async def measure(count: int) -> dict:
    rng = random.Random(count)
    with tempfile.TemporaryDirectory() as tmp:
        store = await open_store(Path(tmp) / "bench.sqlite3")
        now = store.clock()
        await fill(store, count, now, rng)
        timings = []
        for _ in range(SAMPLES):
            started = time.perf_counter()
            due = await store.due_channels(now, limit=50)
            timings.append((time.perf_counter() - started) * 1000)
        assert due, "the bench must find due channels"
        await store.close()
    return {"bench": "due_scan", "channels": count, "scan_ms": round(statistics.median(timings), 3)}


async def run() -> list[dict]:
    results = [await measure(n) for n in SIZES]
    return [*results, {"bench": "due_scan", "ratio_100k_1k": round(results[1]["scan_ms"] / results[0]["scan_ms"], 2)}]
