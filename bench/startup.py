"""Start-up at scale: a database of 0 to 1,000 servers of 5 channels, each with a history and memory work
pending, opened as the bot opens it; then the first reply.

Ready = the engine opened (threads swept, pending counts repaired) and the memory scheduler started (the
due-scan, the timers of the next scans): what stands before a reply can be answered. Recall's warm-up (the index
brought up to date and merged, the newest words counted) runs in the background after it; its end is reported
too. The first reply is in a conversation with the same history at every size, so only the other servers
differ. Each figure's ratio to the database with no other server (the issue's target: flat).
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from pathlib import Path

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
SAMPLES = 3
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


async def measure(servers: int) -> dict:
    rng = random.Random(servers)
    ready: list[float] = []
    warm: list[float] = []
    first: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        store = await open_store(Path(tmp) / "stelis.sqlite3")
        await fill(store, servers, rng)
        await store.close()
        config = validate({"data_dir": tmp, "snapshots": {"interval_seconds": 0}, "llm": {"reply_tools": False}})
        for _ in range(SAMPLES):
            started = time.perf_counter()
            engine = await Engine.open(config, OfflineLLM())
            await engine.start_memory()
            ready.append(time.perf_counter() - started)
            if engine.conversations.indexer is not None:  # in the background: replies are answered meanwhile
                await engine.conversations.indexer
            warm.append(time.perf_counter() - started)
            started = time.perf_counter()
            heard = await engine.conversations.hear(HERE, "what did we say about the move?", author_name="ben")
            assert heard is not None
            await engine.conversations.reply(heard.thread_id)
            first.append(time.perf_counter() - started)
            await engine.close()
    return {"bench": "startup", "servers": servers, "channels": 1 + servers * CHANNELS,
            "messages": (1 + servers * CHANNELS) * MESSAGES, "ready_ms": round(statistics.median(ready) * 1000, 1),
            "recall_warm_ms": round(statistics.median(warm) * 1000, 1),
            "first_reply_ms": round(statistics.median(first) * 1000, 1)}


async def run(sizes: tuple[int, ...] = SERVERS) -> list[dict]:
    await measure(0)  # warm up (the tokenizer, templates, imports), so the first size is timed like the rest
    results = [await measure(n) for n in sizes]
    base = results[0]
    for line in results:
        line["ready_ratio"] = round(line["ready_ms"] / base["ready_ms"], 2)
        line["recall_warm_ratio"] = round(line["recall_warm_ms"] / base["recall_warm_ms"], 2)
        line["first_reply_ratio"] = round(line["first_reply_ms"] / base["first_reply_ms"], 2)
    return results
