"""`perceive` and `record_wait`: what the autonomous pulse sees, and its decision to do nothing (seed 001)."""

from __future__ import annotations

from typing import Any

from bot.tools.registry import ToolError, ToolScope, ToolSpec


async def _perceive(where: ToolScope, args: dict[str, Any]) -> str:
    return await where.services.perceive(where.scope)


async def _wait(where: ToolScope, args: dict[str, Any]) -> str:
    reason = str(args["reason"]).strip()
    if not reason:
        raise ToolError("say why you wait (one line)")
    return await where.services.record_wait(where.scope, reason[:300])


PERCEIVE = ToolSpec(
    "perceive", "What happened in this server since your last pulse: messages, and your open tasks.",
    {"type": "object", "properties": {}}, _perceive)
RECORD_WAIT = ToolSpec(
    "record_wait", "Decide to do nothing for now, and note why (the decision log shows it).",
    {"type": "object", "properties": {"reason": {"type": "string"}}, "required": ["reason"]}, _wait)
