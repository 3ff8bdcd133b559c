"""Start-up at scale: a database of 0 to 1,000 servers of 5 channels, each with a history and memory work
pending, opened as the bot opens it; then the first reply.

Ready = the engine opened (threads swept, leases a crash left freed) and the memory scheduler started (the
due-scan, the timers of the next scans): what stands before a reply can be answered. Recall's warm-up (the index
brought up to date and merged, the newest words counted, or their counts read where an earlier start saved them)
runs in the background after it; its end is reported too, and that of each database's first start. The first
reply is in a conversation with the same history at every size, so only the other servers differ. Each figure
is the median of rounds that start every size once, and its ratio to the database with no other server (the
issue's target: flat).
"""

from __future__ import annotations

import gc
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.history import assistant_message, user_message
from bot.config import validate
from bot.engine import Engine
from bot.providers.offline import OfflineLLM
from memory.backends import open_store
from memory.records import NewMessage, Scope
from memory.settings import ShortTermSettings
from memory.store import Store
from memory.tokens import count_tokens

SERVERS = (0, 10, 100, 1_000)
CHANNELS = 5
MESSAGES = 20  # each conversation's history; its last message is counted towards a memory version
SAMPLES = 5
HERE = Scope.channel(1, 1)  # the conversation answered after start-up, the same at every size


async def fill(store: Store, servers: int, rng: random.Random) -> None:
    """Every conversation with its history, as a running bot leaves them: indexed, memory work pending."""
    texts = [user_message(rng, n) if n % 2 == 0 else assistant_message(rng, n) for n in range(200)]
    tokens = [count_tokens(t.content) for t in texts]
    triggers = ShortTermSettings().triggers
    places = [HERE] + [Scope.channel(1_000 + g, 10_000 + g * CHANNELS + c)
                       for g in range(servers) for c in range(CHANNELS)]
    for n, scope in enumerate(places):
        root = await store.root_thread("Stelis", scope, 0.8)
        picked = [(n * MESSAGES + i) % len(texts) for i in range(MESSAGES)]
        await store.append_many(root.id, [NewMessage(texts[p].role, texts[p].content, author_name="ana")
                                          for p in picked[:-1]], tokens=[tokens[p] for p in picked[:-1]])
        await store.append_counted(root, NewMessage("user", texts[picked[-1]].content, author_name="ana"), triggers)
    await store.index_messages()


async def filled(folder: Path, servers: int) -> Path:
    """A data folder holding `servers` servers' conversations besides the one answered."""
    store = await open_store(folder / "stelis.sqlite3")
    await fill(store, servers, random.Random(servers))
    await store.close()
    return folder


async def sample(folder: Path) -> tuple[float, float, float]:
    """One start as the bot starts: seconds until ready, until recall's warm-up ended, and for the first reply."""
    config = validate({"data_dir": str(folder), "snapshots": {"interval_seconds": 0}, "llm": {"reply_tools": False}})
    started = time.perf_counter()
    engine = await Engine.open(config, OfflineLLM())
    await engine.start_memory()
    ready = time.perf_counter() - started
    gc.freeze()  # as the bot's setup_hook does once started: collections do not walk start-up's objects
    try:
        if engine.conversations.indexer is not None:  # in the background: replies are answered meanwhile
            await engine.conversations.indexer
        warm = time.perf_counter() - started
        started = time.perf_counter()
        heard = await engine.conversations.hear(HERE, "what did we say about the move?", author_name="ben")
        assert heard is not None
        await engine.conversations.reply(heard.thread_id)
        return ready, warm, time.perf_counter() - started
    finally:
        await engine.close()
        gc.unfreeze()  # the next sample starts from the same heap


async def run(sizes: tuple[int, ...] = SERVERS) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        folders = [await filled(Path(tmp) / str(n), n) for n in sizes]
        # warm up (the tokenizer, templates, imports) on a database of its own: each size's first start is its own
        await sample(await filled(Path(tmp) / "warm-up", sizes[0]))
        # Round after round, one start of every size: a machine slower for a while slows all sizes alike
        taken = [[await sample(folder) for folder in folders] for _ in range(SAMPLES)]
    figures = [[round(statistics.median(round_[i][k] for round_ in taken) * 1000, 1) for k in range(3)]
               for i in range(len(sizes))]
    base = figures[0]
    return [{"bench": "startup", "servers": servers, "channels": 1 + servers * CHANNELS,
             "messages": (1 + servers * CHANNELS) * MESSAGES, "ready_ms": ready, "recall_warm_ms": warm,
             # the first start of each database counted every word; later ones read the counts it saved
             "recall_warm_first_ms": round(taken[0][i][1] * 1000, 1),
             "first_reply_ms": first, "ready_ratio": round(ready / base[0], 2),
             "recall_warm_ratio": round(warm / base[1], 2), "first_reply_ratio": round(first / base[2], 2)}
            for i, (servers, (ready, warm, first)) in enumerate(zip(sizes, figures, strict=True))]
