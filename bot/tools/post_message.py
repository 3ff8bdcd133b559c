"""`post_message` and `open_thread`: act in the conversation through the front end it lives in."""

from __future__ import annotations

from typing import Any

from bot.tools.registry import ToolError, ToolScope, ToolSpec

MAX_CHARS = 4_000


async def _post(where: ToolScope, args: dict[str, Any]) -> str:
    text = args["text"].strip()
    if not text:
        raise ToolError("there is nothing to post")
    if len(text) > MAX_CHARS:
        raise ToolError(f"a post holds at most {MAX_CHARS} characters; this one has {len(text)}")
    return await where.services.post(where.scope, text)


async def _open(where: ToolScope, args: dict[str, Any]) -> str:
    name = args["name"].strip()
    if not name:
        raise ToolError("a thread needs a name")
    return await where.services.open_thread(where.scope, name[:100])


POST = ToolSpec(
    "post_message", "Say something in this conversation now (it is remembered as the persona's own message).",
    {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}, _post)
OPEN_THREAD = ToolSpec(
    "open_thread", "Open a thread beside this conversation for a separate piece of work (a Discord thread).",
    {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}, _open)
