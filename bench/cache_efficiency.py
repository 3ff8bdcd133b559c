"""Prompt-cache efficiency and cost over one scripted conversation, through the fake Anthropic server and the real SDK.

Every strategy answers the same scripted turns (user messages, tool pairs, and the replies the
"model" gives), at context budgets of 8k, 16k and 32k tokens:

- `stelis`: the full engine (hear, reply, and the memory worker writing short-term versions as it
  would in production, so memory layers change during the run);
- `stelis_server`: the same, in a server where two public channels talk in turn between its turns
  (their memory is shown in its prompt, most recently active first: the order flips every turn);
- `stelis_research`: the full engine where every fifth turn runs the `research` playbook instead of a
  plain reply (a Stelis thread, conversation-profile nodes with recall, a chronicle); its share counts
  every request that opens with the persona's system prompt, the playbook's included;
- `stelis_window`: the assembler alone (window, rolling summary, recall; no memory versions);
- `letta`: a Letta-style manager (bench/letta_style.py);
- `naive`: the newest messages that fit, recomputed every turn (what the Discord peers do).

`cache_read_share` is cache_read / (input + cache_creation + cache_read) over the reply requests;
`limit` is the best share any layout could reach given each turn's new tokens (what was said since the
last request); `cost_per_turn` prices every call (summaries included) in input-token units of the
reply model: cache writes 1.25, reads 0.1, output 5, the light model a third of that.
"""

from __future__ import annotations

import random
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import Report
from bench.history import RARE_SHARE, asking, sentence, tool_pair, user_message
from bench.letta_style import LettaStyle
from bot.config import AnthropicConfig, ModelTiers, validate
from bot.engine import Engine
from bot.providers.anthropic_llm import AnthropicLLM
from memory.backends import open_store
from memory.budget import Budget
from memory.context import Assembler, Persona, Shape
from memory.recall import RECALL_HEADER
from memory.records import NewMessage, Scope
from memory.settings import ContextSettings, StelisSettings
from memory.templates import render
from memory.tokens import count_tokens
from tests.fake_anthropic import FakeAnthropic

TURNS = 2_000
SEED = 600  # the script's; `--seed` runs another conversation of the same kind
RESEARCH_EVERY = 5  # stelis_research: one turn in five goes through the research playbook
BUDGETS = (8_000, 16_000, 32_000)
OUTPUT = 1_024
CARD = ("You are Stelis, a warm and curious companion in a Discord server. You remember conversations "
        "across days, speak naturally and briefly, and keep track of people's projects. ") * 4
SYSTEM = render("system.md.j2", persona_name="Stelis", persona_card=CARD.strip())
TIERS = ModelTiers()
PRICE = {"input": 1.0, "creation": 1.25, "read": 0.1, "output": 5.0}
LIGHT = 1 / 3
VOCABULARIES = {"plain": 0.0, "zipf": RARE_SHARE}


@dataclass(frozen=True)
class Step:
    """One scripted turn: what is said before the reply (tool pairs, the user message), and the reply."""

    said: list[NewMessage]
    reply: str

    @property
    def new_tokens(self) -> int:
        return sum(count_tokens(m.content) for m in self.said)


def script(turns: int, rare: float, seed: int = SEED, ask_every: int = 0, tools: bool = True) -> list[Step]:
    """The turns; with `ask_every`, every such user message is a question (recall is given more room for one);
    without `tools`, chat alone (no tool call and its output of up to 200 lines every fifteenth turn)."""
    rng = random.Random(seed)
    steps = []
    for turn in range(turns):
        said = tool_pair(rng, turn, rare) if tools and turn % 15 == 7 else []
        message = user_message(rng, turn, rare)
        if ask_every and turn % ask_every == 0:
            message = asking(message)
        said.append(message)
        steps.append(Step(said, sentence(rng, 30, 260, rare)))
    return steps


class Scripted:
    """The fake model's answers: the scripted reply for replies, a seeded summary for the light model."""

    def __init__(self) -> None:
        self.reply = ""
        self.rng = random.Random(1)

    def __call__(self, body: dict[str, Any]) -> str:
        if body["model"] == TIERS.light:
            return sentence(self.rng, 40, max(41, min(300, body["max_tokens"] // 2)), 0.3)
        return self.reply


Reply = Callable[[Step], Awaitable[None]]


async def simulate(strategy: str, budget: int, turns: int = TURNS, vocabulary: str = "zipf",
                   ask_every: int = 0, seed: int = SEED, tools: bool = True) -> dict:
    steps = script(turns, VOCABULARIES[vocabulary], seed, ask_every, tools)
    scripted = Scripted()
    server = await FakeAnthropic(responder=scripted).start()
    llm = AnthropicLLM(AnthropicConfig(api_key="bench", base_url=server.base_url, max_retries=0, stream=False),
                       TIERS)
    with tempfile.TemporaryDirectory() as tmp:
        runner = {"stelis": _engine, "stelis_server": _server, "stelis_research": _research,
                  "stelis_window": _assembler, "naive": _assembler, "letta": _letta}[strategy]
        async with runner(strategy, budget, llm, Path(tmp)) as turn:
            for step in steps:
                scripted.reply = step.reply
                await turn(step)
    await server.stop()
    return {**_report(strategy, budget, turns, vocabulary, server, steps), "seed": seed, "tools": tools}


def _report(strategy: str, budget: int, turns: int, vocabulary: str, server: FakeAnthropic,
            steps: list[Step]) -> dict:
    answered = [c for c in server.calls if c.usage and _is_reply(c.body)]
    replies = [c.usage for c in answered]
    recalled = sum(_recall_tokens(c.body) for c in answered)
    outputs = {m.metadata["tool_use_id"]: count_tokens(m.content) for s in steps for m in s.said if m.role == "tool"}
    reduced = sum(_reduced_tokens(c.body, outputs) for c in answered)
    other = [c for c in server.calls if c.usage and not _is_reply(c.body)]
    prompt = [u["input_tokens"] + u["cache_creation_input_tokens"] + u["cache_read_input_tokens"] for u in replies]
    read = sum(u["cache_read_input_tokens"] for u in replies)
    new = sum(s.new_tokens for s in steps)
    previous_replies = sum(count_tokens(s.reply) for s in steps[:-1])
    cost = sum(_cost(u) for u in replies) + sum(
        _cost(c.usage) * (LIGHT if c.body["model"] == TIERS.light else 1) for c in other)
    return {"bench": "cache_efficiency", "strategy": strategy, "budget": budget, "vocabulary": vocabulary,
            "turns": turns, "cache_read_share": round(read / max(1, sum(prompt)), 3),
            "limit": round(1 - (new + previous_replies) / max(1, sum(prompt)), 3),
            "avg_prompt": round(sum(prompt) / max(1, len(prompt))),
            "avg_prompt_share": round(sum(prompt) / max(1, len(prompt)) / Budget(budget, OUTPUT).input, 3),
            "cost_per_turn": round(cost / turns, 1), "summary_calls": len(other),
            # recall's hits: new text by design, each token paid in full (within cost_per_turn)
            "recall_tokens_per_turn": round(recalled / turns, 1),
            # tool output a request showed as its head and tail alone (observation reduction, the stored result
            # whole): context the request stands for beyond avg_prompt
            "reduced_tokens_per_request": round(reduced / max(1, len(prompt)), 1)}


def _reduced_tokens(body: dict[str, Any], outputs: dict[str, int]) -> int:
    """How many tokens of the scripted tool outputs a request left out of its tool results."""
    left_out = 0
    for message in body["messages"]:
        for block in message["content"] if isinstance(message["content"], list) else ():
            if block.get("type") == "tool_result" and block["tool_use_id"] in outputs:
                shown = block.get("content") or ""
                text = shown if isinstance(shown, str) else "".join(b.get("text", "") for b in shown)
                left_out += max(0, outputs[block["tool_use_id"]] - count_tokens(text))
    return left_out


def _recall_tokens(body: dict[str, Any]) -> int:
    """The tokens of a reply request's recall block (after the last cache breakpoint, so never cached)."""
    return sum(count_tokens(b["text"]) for b in body["messages"][-1]["content"]
               if b.get("text", "").startswith(RECALL_HEADER))


def _is_reply(body: dict[str, Any]) -> bool:
    """A reply request opens with the persona's system prompt; summaries and memory updates do not."""
    return bool(body.get("system")) and body["system"][0].get("text") == SYSTEM


def _cost(usage: dict[str, int]) -> float:
    return (PRICE["input"] * usage["input_tokens"] + PRICE["creation"] * usage["cache_creation_input_tokens"]
            + PRICE["read"] * usage["cache_read_input_tokens"] + PRICE["output"] * usage["output_tokens"])


class _engine:
    """The whole engine, its memory worker run after every turn (as the scheduler would when due)."""

    def __init__(self, strategy: str, budget: int, llm: AnthropicLLM, tmp: Path):
        self.config = validate({"data_dir": str(tmp), "llm": {"context_tokens": budget, "max_output_tokens": OUTPUT},
                                "persona": {"card": CARD}, "snapshots": {"interval_seconds": 0}})
        self.llm = llm
        self.scope = Scope.channel(1, 1)

    async def __aenter__(self) -> Reply:
        self.engine = await Engine.open(self.config, self.llm)
        root = await self.engine.stelis.root(self.scope)

        async def turn(step: Step) -> None:
            tools, user = step.said[:-1], step.said[-1]
            if tools:
                await self.engine.store.append_many(root.id, tools)
            await self.engine.conversations.hear(self.scope, user.content, author_name=user.author_name)
            await self.engine.conversations.reply(root.id)
            await self.engine.conversations.settle()  # the pause before the next message: the next cut summarised
            await self.engine.memory.run_due()

        return turn

    async def __aexit__(self, *exc: object) -> None:
        await self.engine.close()  # closes the model client too


class _server(_engine):
    """The whole engine in a busy server: a neighbour channel speaks before each of its turns."""

    async def __aenter__(self) -> Reply:
        turn = await super().__aenter__()
        for channel_id, name in ((1, "home"), (2, "left"), (3, "right")):
            await self.engine.admin.describe(Scope.channel(1, channel_id), name=name, public=True)
        said = 0

        async def busy_turn(step: Step) -> None:
            nonlocal said
            said += 1
            await self.engine.conversations.hear(Scope.channel(1, 2 + said % 2),
                                                 f"neighbour chatter {said} about plans",
                                   author_name="kai")
            await turn(step)

        return busy_turn


class _research(_engine):
    """The whole engine, every fifth turn answered by the research playbook (issue: playbooks)."""

    async def __aenter__(self) -> Reply:
        turn = await super().__aenter__()
        root = await self.engine.stelis.root(self.scope)
        said = 0

        async def research_turn(step: Step) -> None:
            nonlocal said
            said += 1
            if said % RESEARCH_EVERY:
                await turn(step)
                return
            tools, user = step.said[:-1], step.said[-1]
            if tools:
                await self.engine.store.append_many(root.id, tools)
            await self.engine.conversations.hear(self.scope, user.content, author_name=user.author_name)
            await self.engine.playbooks.run(self.scope, "research", {"topic": " ".join(user.content.split()[:6])})
            await self.engine.conversations.settle()
            await self.engine.memory.run_due()

        return research_turn


class _assembler:
    """The assembler alone on a store: the window (or the naive slide), no memory versions."""

    def __init__(self, strategy: str, budget: int, llm: AnthropicLLM, tmp: Path):
        self.naive = strategy == "naive"
        self.budget = budget
        self.llm = llm
        self.path = tmp / "bench.sqlite3"

    async def __aenter__(self) -> Reply:
        self.store = await open_store(self.path)
        root = await self.store.root_thread("Stelis", Scope.channel(1, 1), 0.8)
        assembler = Assembler(self.store, self.llm, Persona("Stelis", CARD), Budget(self.budget, OUTPUT),
                              ContextSettings(), StelisSettings())

        async def turn(step: Step) -> None:
            await self.store.append_many(root.id, step.said)
            assembly = await assembler.assemble(root.id, shape=Shape(naive=self.naive))
            result = await self.llm.complete(assembly.request)
            await self.store.append(root.id, NewMessage("assistant", result.text))

        return turn

    async def __aexit__(self, *exc: object) -> None:
        await self.store.close()
        await self.llm.aclose()


class _letta:
    def __init__(self, strategy: str, budget: int, llm: AnthropicLLM, tmp: Path):
        self.manager = LettaStyle(llm, SYSTEM, Budget(budget, OUTPUT).input, budget, OUTPUT)
        self.llm = llm

    async def __aenter__(self) -> Reply:
        async def turn(step: Step) -> None:
            for message in step.said:
                self.manager.add(message)
            result = await self.llm.complete(await self.manager.request())
            self.manager.add(NewMessage("assistant", result.text))

        return turn

    async def __aexit__(self, *exc: object) -> None:
        await self.llm.aclose()


STRATEGIES = ("stelis", "stelis_server", "stelis_research", "stelis_window", "letta", "naive")
QUICK_TURNS = 400  # --quick: enough turns for several cuts at 8k, in about a minute


async def run(turns: int = TURNS, budgets: tuple[int, ...] = BUDGETS, report: Report | None = None,
              seed: int = SEED, strategies: tuple[str, ...] = STRATEGIES, tools: bool = True) -> list[dict]:
    """Each of `strategies` at every budget; each line goes to `report` as soon as it is measured."""
    results = []
    for budget in budgets:
        base = 0.0
        # the full engine first (as STRATEGIES lists it): the others' costs are given relative to it
        for strategy in sorted(strategies, key=STRATEGIES.index):
            row = await simulate(strategy, budget, turns, seed=seed, tools=tools)
            if strategy == "stelis":
                base = row["cost_per_turn"]
            if base:
                row["cost_vs_stelis"] = round(row["cost_per_turn"] / base, 2)
            results.append(row)
            if report is not None:
                report(row)
    return results
