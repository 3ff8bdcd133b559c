"""`recall_thread`: read a past Stelis thread (or branch session) of this conversation in detail."""

from __future__ import annotations

from typing import Any

from bot.tools.registry import ToolError, ToolScope, ToolSpec

MESSAGES = 30  # the newest messages of the thread shown with its chronicle


async def _run(where: ToolScope, args: dict[str, Any]) -> str:
    text = await where.services.thread_text(where.scope, args["thread"], MESSAGES)
    if text is None:
        raise ToolError(f"there is no Stelis thread {args['thread']} in this conversation")
    return text


SPEC = ToolSpec(
    "recall_thread",
    "Read a past Stelis working thread of this conversation in detail: its label, status, chronicle and "
    "latest messages. Thread numbers appear in anchors and recall hits.",
    {"type": "object", "properties": {"thread": {"type": "integer", "description": "the thread's number"}},
     "required": ["thread"]},
    _run,
    looks_up=True,
)
