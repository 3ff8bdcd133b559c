"""Growth: the first reply after a bulk history (a backfill, an import) and the reconnect look-up, 1k to 1M messages.

The history lands in one thread with no window yet, as after an import; then someone speaks, and
the first assembly must cut the history and recall over all of it. What is older than the window
is the short-term memory's job, so that cut makes at most one summarisation call, of bounded size,
whatever the history's length. The model here answers at once and counts what it was asked: the
bench times our work, not the model's.
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from pathlib import Path

from bench.history import assistant_message, user_message
from memory.backends import open_store
from memory.context import Assembler, Budget, Persona
from memory.llm import LLMRequest, LLMResult
from memory.records import NewMessage, Scope
from memory.settings import ContextSettings, StelisSettings
from memory.tokens import count_tokens

SIZES = (1_000, 100_000, 1_000_000)
BATCH = 10_000
CONTEXT_TOKENS = 200_000  # the default model's window: the largest first cut


class CountingModel:
    name = "counting"

    def __init__(self) -> None:
        self.calls = 0
        self.tokens = 0

    async def complete(self, request: LLMRequest, on_text=None) -> LLMResult:
        self.calls += 1
        self.tokens += sum(count_tokens(b.text) for turn in request.turns for b in turn.blocks)
        return LLMResult(text="Earlier: they talked about deploys, Tokyo and coffee.")

    async def aclose(self) -> None:
        return None


async def measure(size: int) -> dict:
    rng = random.Random(size)
    texts = [user_message(rng, n) if n % 2 == 0 else assistant_message(rng, n) for n in range(2_000)]
    counts = [count_tokens(t.content) for t in texts]  # counted once: the bench times the first reply, not the load
    with tempfile.TemporaryDirectory() as tmp:
        store = await open_store(Path(tmp) / "bench.sqlite3")
        root = await store.root_thread("Stelis", Scope.channel(1, 1), 0.8)
        started = time.perf_counter()
        for first in range(0, size, BATCH):
            batch = range(first, min(size, first + BATCH))
            await store.append_many(root.id, [
                NewMessage(texts[n % len(texts)].role, texts[n % len(texts)].content, author_name="u",
                           external_id=10_000 + n) for n in batch], tokens=[counts[n % len(counts)] for n in batch])
        bulk = time.perf_counter() - started
        await store.append(root.id, user_message(rng, size))  # someone speaks: the reply recalls, too
        model = CountingModel()
        assembler = Assembler(store, model, Persona("Stelis", "You are Stelis."), Budget(CONTEXT_TOKENS, 1_024),
                              ContextSettings(), StelisSettings())
        started = time.perf_counter()
        await assembler.assemble(root.id)
        first_reply = (time.perf_counter() - started) * 1000
        lookups = []
        for _ in range(25):
            started = time.perf_counter()
            await store.last_external_id(root.id)
            lookups.append((time.perf_counter() - started) * 1000)
        await store.close()
    return {"bench": "growth", "messages": size, "bulk_per_second": round(size / bulk),
            "first_reply_ms": round(first_reply, 1), "summary_calls": model.calls,
            "summarised_tokens": model.tokens, "reconnect_lookup_ms": round(statistics.median(lookups), 3)}


async def run() -> list[dict]:
    await measure(200)  # warm up (the tokenizer, templates, the first connection), so 1k is timed like 1M
    results = [await measure(size) for size in SIZES]
    flat = results[-1]["reconnect_lookup_ms"] / max(0.001, results[0]["reconnect_lookup_ms"])
    return [*results, {"bench": "growth", "reconnect_ratio_1m_1k": round(flat, 2)}]
