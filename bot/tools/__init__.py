"""Tools the model may call: each a small module with a JSON schema and an async function.

A tool is given a `ToolScope`, the conversation that calls it, and can reach nothing beyond it.
"""

from __future__ import annotations

from bot.tools import branches, memory_pin, now, post_message, pulse, recall, recall_thread, tasks
from bot.tools.registry import FrontEnd, ToolError, ToolScope, ToolServices, ToolSpec, definitions

# In the order the model sees them: a fixed order keeps the tool list a stable cache prefix.
REGISTRY: dict[str, ToolSpec] = {spec.name: spec for spec in (
    recall.SPEC, recall_thread.SPEC, memory_pin.SPEC, now.SPEC, post_message.POST, post_message.OPEN_THREAD,
    branches.LIST, branches.CREATE, branches.UPDATE, tasks.CREATE, tasks.GET, tasks.UPDATE_STEP, tasks.CLOSE,
    pulse.PERCEIVE, pulse.RECORD_WAIT)}

# What every reply and conversation-profile request offers, in this order (the cached tool list).
CONVERSATION_TOOLS = ("recall", "recall_thread")

__all__ = ["CONVERSATION_TOOLS", "REGISTRY", "FrontEnd", "ToolError", "ToolScope", "ToolServices", "ToolSpec",
           "definitions"]
