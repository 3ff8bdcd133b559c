"""Task tools (seed 001): create, read, tick off steps, close."""

from __future__ import annotations

import json
from typing import Any

from bot.tools.registry import ToolError, ToolScope, ToolSpec


async def _create(where: ToolScope, args: dict[str, Any]) -> str:
    steps = args.get("steps", [])
    if not all(isinstance(s, str) for s in steps):
        raise ToolError("steps are a list of short texts")
    return await where.services.task_create(where.scope, args["title"], args["goal"], steps)


async def _get(where: ToolScope, args: dict[str, Any]) -> str:
    return await where.services.task_get(where.scope, args["task"])


async def _step(where: ToolScope, args: dict[str, Any]) -> str:
    return await where.services.task_update_step(where.scope, args["task"], args["step"], args.get("done", True))


async def _close(where: ToolScope, args: dict[str, Any]) -> str:
    status = args.get("status", "done")
    if status not in ("done", "abandoned"):
        raise ToolError(f"a task closes done or abandoned, not {status!r}")
    return await where.services.task_close(where.scope, args["task"], status)


CREATE = ToolSpec("task_create", "Create a task (a title, a goal, steps): it opens its own branch and session.",
                  {"type": "object", "properties": {"title": {"type": "string"}, "goal": {"type": "string"},
                                                    "steps": {"type": "array", "items": {"type": "string"}}},
                   "required": ["title", "goal"]}, _create)
GET = ToolSpec("task_get", "A task with its goal, steps and status.",
               {"type": "object", "properties": {"task": {"type": "integer"}}, "required": ["task"]}, _get)
UPDATE_STEP = ToolSpec("task_update_step", "Mark a task's step (numbered from 1) done, or not done.",
                       {"type": "object", "properties": {"task": {"type": "integer"}, "step": {"type": "integer"},
                                                         "done": {"type": "boolean"}},
                        "required": ["task", "step"]}, _step)
CLOSE = ToolSpec("task_close", "Close a task, done or abandoned: its session ends with a chronicle.",
                 {"type": "object", "properties": {"task": {"type": "integer"},
                                                   "status": {"type": "string", "enum": ["done", "abandoned"]}},
                  "required": ["task"]}, _close)


def describe(task: Any) -> str:
    """A task as the model reads it back."""
    return json.dumps({"task": task.id, "title": task.title, "goal": task.goal, "status": task.status,
                       "steps": task.steps, "branch": task.branch_id}, ensure_ascii=False)
