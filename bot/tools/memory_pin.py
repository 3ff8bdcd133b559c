"""`memory_pin`: keep a fact that this conversation's summaries may never drop."""

from __future__ import annotations

from typing import Any

from bot.tools.registry import ToolError, ToolScope, ToolSpec


async def _run(where: ToolScope, args: dict[str, Any]) -> str:
    fact = args["fact"].strip()
    if not fact:
        raise ToolError("a pinned fact cannot be empty")
    return "pinned" if await where.services.pin(where.scope, fact) else "already pinned"


SPEC = ToolSpec(
    "memory_pin",
    "Pin a fact to this conversation's memory: every later summary keeps it.",
    {"type": "object", "properties": {"fact": {"type": "string"}}, "required": ["fact"]},
    _run,
)
