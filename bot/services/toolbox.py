"""Running the model's tool calls for a conversation (replies and playbooks alike)."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any

from bot.tools import ToolError, ToolScope, ToolServices, ToolSpec
from memory.errors import Failure
from memory.llm import ToolCall
from memory.records import Scope, Thread


class ToolBox:
    """Runs the model's tool calls for a conversation: each result as text, a failure told to the model."""

    def __init__(self, registry: Mapping[str, ToolSpec], services: ToolServices):
        self.registry = registry
        self.services = services

    async def run(self, call: ToolCall, scope: Scope, thread_id: int, allowed: Collection[str]) -> Any:
        """A tool's value; a ToolError when the tool is not offered here or refuses."""
        spec = self.registry.get(call.name) if call.name in allowed else None
        if spec is None:
            raise ToolError(f"no tool {call.name!r} is offered here")
        return await spec.call(ToolScope(scope, thread_id, self.services), call.input)

    def looks_up(self, name: str) -> bool:
        spec = self.registry.get(name)
        return spec is not None and spec.looks_up

    async def answer(self, call: ToolCall, scope: Scope, thread_id: int, allowed: Collection[str]) -> str:
        """The result the model reads back: the value as text, or what went wrong."""
        try:
            value = await self.run(call, scope, thread_id, allowed)
        except Failure as exc:
            return f"error: {exc.notice}"
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def scope_of(thread: Thread) -> Scope:
    """The conversation a thread belongs to, as tools and recall name it."""
    return Scope(thread.scope_key, thread.guild_id, thread.channel_id, thread.discord_thread_id)
