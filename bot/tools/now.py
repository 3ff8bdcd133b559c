"""`now`: the current date and time, as the persona's prompts write it."""

from __future__ import annotations

from typing import Any

from bot.tools.registry import ToolScope, ToolSpec


async def _run(where: ToolScope, args: dict[str, Any]) -> str:
    return where.services.now_text()


SPEC = ToolSpec("now", "The current date and time.", {"type": "object", "properties": {}}, _run)
