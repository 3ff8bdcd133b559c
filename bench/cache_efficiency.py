"""Prompt-cache efficiency over a long conversation, through the fake Anthropic server and the real SDK.

Our window (persisted start, one cut to a low-water mark) against a naive window that slides one
message per turn; the share is cache_read / (input + cache_creation + cache_read), summed over turns.

Two conversations: "plain", whose words every message shares (recall finds nothing new, so this
measures the window), and "zipf", with a long tail of rarer words as real talk has, where recall
adds a few hundred uncached tokens to most turns; `recall_share` says how much of the input that is.
"""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

from bench.history import RARE_SHARE, sentence, tool_pair, user_message
from bot.config import AnthropicConfig, ModelTiers
from bot.providers.anthropic_llm import AnthropicLLM
from bot.providers.offline import OfflineLLM
from memory.context import Assembler, Budget, Persona
from memory.records import NewMessage, Scope
from memory.store import Store
from memory.threads import StelisSettings
from memory.window import WindowPolicy
from tests.fake_anthropic import FakeAnthropic

TURNS = 600
BUDGET = 16_000
CARD = ("You are Stelis, a warm and curious companion in a Discord server. You remember conversations "
        "across days, speak naturally and briefly, and keep track of people's projects. ") * 4


VOCABULARIES = {"plain": 0.0, "zipf": RARE_SHARE}


async def simulate(strategy: str, turns: int = TURNS, vocabulary: str = "plain") -> dict:
    rng = random.Random(600)
    rare = VOCABULARIES[vocabulary]
    server = await FakeAnthropic(responder=lambda body: sentence(rng, 30, 260, rare)).start()
    llm = AnthropicLLM(AnthropicConfig(api_key="bench", base_url=server.base_url, max_retries=0, stream=False),
                       ModelTiers())
    totals = {"input": 0, "creation": 0, "read": 0}
    recalled = 0
    with tempfile.TemporaryDirectory() as tmp:
        store = await Store.open(Path(tmp) / "bench.sqlite3")
        root = await store.root_thread("Stelis", Scope.channel(1, 1), 0.8)
        # Rolling summaries come from the offline model: this bench measures the conversation's requests.
        assembler = Assembler(store, OfflineLLM(), Persona("Stelis", CARD), Budget(BUDGET, 1_024),
                              WindowPolicy(), StelisSettings())
        for turn in range(turns):
            if turn % 15 == 7:
                await store.append_many(root.id, tool_pair(rng, turn, rare))
            await store.append(root.id, user_message(rng, turn, rare))
            assembly = await assembler.assemble(root.id, naive=strategy == "naive")
            recalled += assembly.parts.get("recall", 0)
            result = await llm.complete(assembly.request)
            await store.append(root.id, NewMessage("assistant", result.text))
            totals["input"] += result.usage.input_tokens
            totals["creation"] += result.usage.cache_creation_input_tokens
            totals["read"] += result.usage.cache_read_input_tokens
        await store.close()
    await llm.aclose()
    await server.stop()
    sent = max(1, sum(totals.values()))
    return {"bench": "cache_efficiency", "strategy": strategy, "vocabulary": vocabulary, "turns": turns,
            "budget": BUDGET, "cache_read_share": round(totals["read"] / sent, 3),
            "recall_share": round(recalled / sent, 3)}


async def run() -> list[dict]:
    return [await simulate("stelis"), await simulate("naive"), await simulate("stelis", vocabulary="zipf")]
