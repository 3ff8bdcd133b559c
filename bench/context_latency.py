"""Context assembly latency at 1k, 10k and 100k stored messages in one thread (anchors and tool pairs mixed in; the
size is the history's at the middle of the turns),
with recall on, what recall itself adds, and the ratio to a bare select of the rows the window holds
(timed in the same run: the floor any design that reads its window from SQLite pays)."""

from __future__ import annotations

import gc
import random
import statistics
import tempfile
import time
from pathlib import Path

from bench.backends import bare_window_select, place
from bench.history import asking, assistant_message, tool_pair, user_message
from memory import threads
from memory.backends import open_store
from memory.context import Assembler, Budget, Persona
from memory.llm import LLMResult
from memory.records import NewMessage, Scope
from memory.settings import ContextSettings, StelisSettings
from memory.store import Store
from memory.threads import Run

SIZES = (1_000, 10_000, 100_000)
CONTEXT_TOKENS = 200_000  # the default model's window, as configured out of the box
# Turns of each kind (remark, no recall, question). A turn costs milliseconds where building 100k messages takes a
# minute: at 60, PostgreSQL's recall over SQLite's moved from 0.90 to 1.54 from run to run; at 150, 1.15-1.31.
SAMPLES = 150
HALF_OF_TURNS = 3 * SAMPLES  # the messages the turns add (two a turn) before the middle turn
SERVER_CHANNELS = 1_000


class InstantSummary:
    """The fold's summariser replaced by a constant: this bench times assembly, not the model."""

    name = "instant"

    async def complete(self, request, on_text=None):
        return LLMResult(text="Earlier: the team discussed calculator_v2, deploys and coffee.")

    async def aclose(self):
        return None


async def build(store: Store, size: int, rng: random.Random) -> int:
    root = await store.root_thread("Stelis", Scope.channel(1, 1), 0.8)
    settings = StelisSettings()
    batch: list[NewMessage] = []
    n = 0
    while n < size:
        if n % 500 == 250:  # a finished Stelis thread anchored here
            await store.append_many(root.id, batch)
            batch = []
            run = Run(root.id)
            child = await threads.start(store, run, f"task {n}", settings)
            await store.append_many(child.id, [user_message(rng, n), assistant_message(rng, n)])
            await threads.finish(store, None, child, settings, status="completed", chronicle=False)
            n += 1
            continue
        if n % 40 == 20:
            batch.extend(tool_pair(rng, n))
            n += 2
            continue
        batch.append(user_message(rng, n) if n % 2 == 0 else assistant_message(rng, n))
        n += 1
    await store.append_many(root.id, batch)
    await threads.start(store, Run(root.id), "still running", settings)  # one live anchor for the tail
    return root.id


async def settle_index(store: Store) -> None:
    """What the bot's background indexer does a second after a message: index it, merge the segments."""
    await store.index_messages()
    await store.merge_index()


async def measure(size: int, backend: str = "sqlite") -> dict:
    """Turns alternate recall on and off on the same history, so the two are timed under the same load."""
    rng = random.Random(size)
    with tempfile.TemporaryDirectory() as tmp:
        store = await open_store(await place(backend, Path(tmp)))
        thread_id = await build(store, size - HALF_OF_TURNS, rng)  # `size` messages at the middle turn
        assembler = Assembler(store, InstantSummary(), Persona("Stelis", "You are Stelis."),
                              Budget(CONTEXT_TOKENS, 1_024), ContextSettings(), StelisSettings())
        await assembler.assemble(thread_id)  # the first call makes the one cut a long history needs
        await settle_index(store)
        await assembler.frequencies.warm(store)  # as the bot does at start-up
        gc.collect()
        gc.freeze()  # as the bot does after start-up
        timings: dict[str, list[float]] = {"remark": [], "off": [], "question": []}
        bare: list[float] = []
        for i in range(3 * SAMPLES):
            mode = ("remark", "off", "question")[i % 3]
            assembler.recall_enabled = mode != "off"
            said = user_message(rng, size + i)
            if mode == "question":  # a question reaches further in recall (recall.QUESTION)
                said = asking(said)
            await store.append(thread_id, said)
            started = time.perf_counter()
            await assembler.assemble(thread_id)
            timings[mode].append((time.perf_counter() - started) * 1000)
            bare.append(await _bare_select(store, thread_id))
            await store.append(thread_id, assistant_message(rng, size + i))
            await settle_index(store)
        await store.close()
    on, off = sorted(timings["remark"]), sorted(timings["off"])
    floor = statistics.median(bare)
    return {"bench": "context_latency", "backend": backend, "messages": size, "p50_ms": round(statistics.median(on), 2),
            "p95_ms": round(on[int(len(on) * 0.95) - 1], 2), "p50_ms_without_recall": round(statistics.median(off), 2),
            "p50_ms_question": round(statistics.median(timings["question"]), 2),
            "recall_p50_ms": round(statistics.median(on) - statistics.median(off), 2),
            "bare_select_p50_ms": round(floor, 2), "ratio_to_bare": round(statistics.median(on) / floor, 1)}


async def _bare_select(store: Store, thread_id: int) -> float:
    """Milliseconds to read the rows the window holds, and nothing else."""
    return await bare_window_select(store, thread_id, (await store.thread(thread_id)).window_start_seq or 0)


async def crowd(store: Store, channels_: int, rng: random.Random) -> None:
    """Other public channels in the same server, each with a little history and a memory version."""
    for c in range(channels_):
        scope = Scope.channel(1, 100 + c)
        root = await store.root_thread("Stelis", scope, 0.8)
        ch = await store.ensure_memory_channel(root)
        await store.set_channel_flags(ch.thread_id, public=1, name=f"room-{c}")
        await store.append_many(root.id, [user_message(rng, c), assistant_message(rng, c)])
        await store.add_record("Stelis", "channel", 100 + c, "short_term", f"In room-{c} they planned trip {c}.", 1, 2)


async def server_cost(size: int = 10_000, crowded: int = SERVER_CHANNELS, backend: str = "sqlite") -> dict:
    """One channel's assembly alone in its server, and the same channel among `crowded` others."""
    p50 = []
    for others in (0, crowded):
        rng = random.Random(size)
        with tempfile.TemporaryDirectory() as tmp:
            store = await open_store(await place(backend, Path(tmp)))
            await crowd(store, others, rng)
            thread_id = await build(store, size, rng)
            assembler = Assembler(store, InstantSummary(), Persona("Stelis", "You are Stelis."),
                                  Budget(CONTEXT_TOKENS, 1_024), ContextSettings(), StelisSettings())
            await assembler.assemble(thread_id)
            await settle_index(store)
            await assembler.frequencies.warm(store)
            timings = []
            for i in range(SAMPLES):
                await store.append(thread_id, user_message(rng, size + i))
                started = time.perf_counter()
                await assembler.assemble(thread_id)
                timings.append((time.perf_counter() - started) * 1000)
                await store.append(thread_id, assistant_message(rng, size + i))
                await settle_index(store)
            await store.close()
        p50.append(statistics.median(timings))
    return {"bench": "context_latency", "backend": backend, "server_channels": crowded, "messages": size,
            "lone_p50_ms": round(p50[0], 2),
            "crowded_p50_ms": round(p50[1], 2), "ratio_crowded_to_lone": round(p50[1] / p50[0], 2)}


async def run(backend: str = "sqlite") -> list[dict]:
    results = [await measure(size, backend) for size in SIZES]
    ratio = results[-1]["p50_ms"] / results[0]["p50_ms"]
    return [*results, {"bench": "context_latency", "backend": backend, "ratio_p50_100k_1k": round(ratio, 2),
                       "recall": True}, await server_cost(backend=backend)]
