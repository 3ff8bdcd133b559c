"""Context profiles (seed 002): what an llm node's request carries, chosen by name.

`conversation`: the normal reply's request, byte for byte up to its last cache breakpoint, with the
node's instruction after it. `router`: the light model, the persona's system prompt, the locked recent
turns and the instruction. `worker` / `worker_light`: a neutral system prompt, no history, the state.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from bot.playbooks.model import Profile
from memory.anchors import exchange_lines
from memory.context import Assembler, Persona, Shape, system_prompt, tool_tokens
from memory.llm import Block, LLMRequest, Tier, Tool, Turn
from memory.observation import reduce_message
from memory.store import Store
from memory.threads import lineage
from memory.tokens import MESSAGE_OVERHEAD, cached_tokens

NEUTRAL_SYSTEM = ("You carry out one step of a task for a persona's workflow. Do exactly what the step asks, "
                  "from the state you are given; answer plainly, without greeting or commentary.")
TIERS: dict[Profile, Tier] = {"conversation": "standard", "router": "light", "worker": "standard",
                              "worker_light": "light"}
STATE_CHARS = 6_000  # the state a worker sees, as JSON, at most
MIN_ROOM = 200  # tokens a router's or worker's message keeps, however small the context


def with_schema(instruction: str, schema: dict[str, Any] | None) -> str:
    """The instruction, and for a structured answer the schema it must follow."""
    if schema is None:
        return instruction
    return (f"{instruction}\n\nAnswer with one JSON object and nothing else, matching this JSON schema:\n"
            f"{json.dumps(schema, ensure_ascii=False, sort_keys=True)}")


async def request_for(profile: Profile, instruction: str, *, thread_id: int, state: dict[str, Any],
                      assembler: Assembler, store: Store, tools: tuple[Tool, ...] | None,
                      response_schema: dict[str, Any] | None, max_tokens: int) -> LLMRequest:
    """The request an llm node sends under its profile."""
    if profile == "conversation":  # tools None: the conversation's own list, as every reply sends it
        # Recall looks up the node's task too: a model that cannot call tools still gets what it needs. The task
        # comes after a window planned for replies, so it takes no more than a reply's tail may.
        task = _within(instruction, assembler.budget.input // 8) if instruction else None
        shape = Shape(tier=TIERS[profile], tools=tools, instruction=task, recall_for=instruction)
        assembly = await assembler.assemble(thread_id, shape=shape)
        request = assembly.request
    elif profile == "router":
        persona = await _persona(assembler, store, thread_id)
        system = system_prompt(persona.name, persona.card)
        room = _room(assembler, system, tools)
        task = _within(instruction, room * 2 // 3)
        recent = exchange_lines(await store.last_exchanges(thread_id, 2 * assembler.policy.locked_turns))
        lines = "\n".join(_newest(recent, room - cached_tokens(task))) or "(nothing said yet)"
        request = LLMRequest(system=(Block(system),), max_tokens=max_tokens, tier=TIERS[profile], tools=tools or (),
                             turns=(Turn.text("user", f"Recent conversation:\n{lines}\n\n{task}"),))
    else:
        room = _room(assembler, NEUTRAL_SYSTEM, tools)
        task = _within(instruction, room * 2 // 3)
        shown = json.dumps({k: v for k, v in state.items() if k != "input"}, ensure_ascii=False, default=str)
        shown = _within(shown[:STATE_CHARS], room - cached_tokens(task))
        request = LLMRequest(system=(Block(NEUTRAL_SYSTEM),), max_tokens=max_tokens, tier=TIERS[profile],
                             tools=tools or (), turns=(Turn.text("user", f"{task}\n\nState:\n{shown}"),))
    return replace(request, response_schema=response_schema)


def _room(assembler: Assembler, system: str, tools: tuple[Tool, ...] | None) -> int:
    """What a router's or worker's user message may take of the model's context (replies plan the same way)."""
    used = cached_tokens(system) + tool_tokens(tools or ()) + 3 * MESSAGE_OVERHEAD
    return max(MIN_ROOM, assembler.budget.input - used)


def _within(text: str, tokens: int) -> str:
    """The text, as head and tail when it is longer than `tokens` (a pulse's view of a busy day)."""
    return reduce_message(text, cached_tokens(text), max(MIN_ROOM // 2, tokens))


def _newest(lines: list[str], tokens: int) -> list[str]:
    """The newest of the lines that fit in `tokens`, oldest first."""
    kept: list[str] = []
    for line in reversed(lines):
        tokens -= cached_tokens(line) + 1
        if tokens < 0:
            break
        kept.append(line)
    return kept[::-1]


async def _persona(assembler: Assembler, store: Store, thread_id: int) -> Persona:
    """The persona of the conversation a thread belongs to (its root's settings)."""
    chain = await lineage(store, await store.thread(thread_id))
    return (await assembler.conversation_of(chain[-1])).persona
