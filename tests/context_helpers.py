"""Builders shared by the context assembly tests and the snapshot tests."""

from __future__ import annotations

from bot.providers.anthropic_llm import to_params
from bot.providers.offline import OfflineLLM
from memory.budget import Budget
from memory.context import Assembler, Assembly, ModelTraits, Persona
from memory.records import NewMessage
from memory.settings import ContextSettings, StelisSettings
from memory.store import Store
from tests.fake_anthropic import flatten

FIXED_NOW = 1_800_000_000.0


def assembler(store: Store, context_tokens: int = 3_000, locked_turns: int = 3, llm=None,
              traits: ModelTraits | None = None) -> Assembler:
    return Assembler(
        store, llm or OfflineLLM(), Persona("Stelis", "You are Stelis."),
        Budget(context_tokens, 200),
        ContextSettings(low_water=0.6, locked_turns=locked_turns, summary_tokens=150, observation_max_lines=30,
                     observation_keep_lines=5),
        StelisSettings(chunk_tokens=800), clock=lambda: FIXED_NOW, traits=traits or ModelTraits(),
    )


def body(assembly: Assembly) -> dict:
    return to_params(assembly.request, "test-model")


def blocks(assembly: Assembly) -> list[tuple[str, int, str | None]]:
    return flatten(body(assembly))


def stable_prefix(assembly: Assembly) -> list[str]:
    """Canonical blocks up to and including the last breakpoint: what the next turn must repeat."""
    flat = blocks(assembly)
    last = max(i for i, (_, _, ttl) in enumerate(flat) if ttl)
    return [canonical for canonical, _, _ in flat[: last + 1]]


def all_text(assembly: Assembly) -> str:
    return "\n".join(b.text for t in assembly.request.turns for b in t.blocks)


async def say(store: Store, thread_id: int, text: str, name: str = "mahe") -> None:
    await store.append(thread_id, NewMessage("user", text, author_name=name))


async def answer(store: Store, thread_id: int, text: str) -> None:
    await store.append(thread_id, NewMessage("assistant", text))


async def tool_burst(store: Store, thread_id: int, calls: int, lines: int, tag: str, width: int = 0) -> None:
    """`calls` tool calls and their outputs of `lines` lines each, every line `width` words longer."""
    uses = [{"id": f"{tag}-{i}", "name": "run", "input": {"n": i}} for i in range(calls)]
    await store.append(thread_id, NewMessage("assistant", f"running {calls} tool(s)", metadata={"tool_use": uses}))
    for use in uses:
        output = "\n".join(f"{use['id']} output line {j}" + " out" * width for j in range(lines))
        await store.append(thread_id, NewMessage("tool", output, metadata={"tool_use_id": use["id"]}))


async def pulse_at_2k(make_config, llm, home, lines: list[str]):
    """One pulse at a 2,048-token context after `lines` said by kai in the home channel (autonomy on there)."""
    from bot.clock import Clock
    from bot.engine import Engine

    config = make_config(llm={"context_tokens": 2048, "max_output_tokens": 200}, snapshots={"interval_seconds": 0},
                         autonomy={"quiet_minutes": 0})
    engine = await Engine.open(config, llm, Clock())
    try:
        await engine.pulses.configure(home, "enabled", True)
        await engine.pulses.configure(home, "home_channel", home.channel_id)
        for line in lines:
            await engine.conversations.hear(home, line, author_name="kai", author_id=5)
        return await engine.pulses.pulse_now(home)
    finally:
        await engine.close()


def calls_of(store: Store, name: str, monkeypatch) -> list[tuple]:
    """The positional arguments of each call the store's method `name` gets from now on (it still runs)."""
    calls: list[tuple] = []
    method = getattr(store, name)

    async def spied(*args, **kwargs):
        calls.append(args)
        return await method(*args, **kwargs)
    monkeypatch.setattr(store, name, spied)
    return calls
