"""`recall`: search what this conversation may remember (messages, chronicles, memory versions)."""

from __future__ import annotations

from typing import Any

from bot.tools.registry import ToolScope, ToolSpec

MOST_HITS = 10


async def _run(where: ToolScope, args: dict[str, Any]) -> str:
    lines = await where.services.recall_text(where.scope, args["query"], min(MOST_HITS, args.get("limit", 5)))
    return "\n".join(lines) if lines else f"Nothing found for {args['query']!r}."


SPEC = ToolSpec(
    "recall",
    "Search older messages, Stelis thread chronicles and memory versions this conversation may see; each hit "
    "comes with its date, speaker and place.",
    {"type": "object", "properties": {
        "query": {"type": "string", "description": "words to look for"},
        "limit": {"type": "integer", "description": f"how many hits, at most {MOST_HITS}"},
    }, "required": ["query"]},
    _run,
    looks_up=True,
)
