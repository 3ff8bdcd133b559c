"""`branch_list`, `branch_create` and `branch_update`: the persona's branches of activity in this server (seed 001:
create, list, resume, complete)."""

from __future__ import annotations

from typing import Any

from bot.tools.registry import ToolError, ToolScope, ToolSpec
from memory.records import BRANCH_KINDS

STATUSES = ("active", "suspended", "completed")


async def _list(where: ToolScope, args: dict[str, Any]) -> str:
    lines = await where.services.branch_lines(where.scope, tuple(args.get("kinds") or BRANCH_KINDS))
    return "\n".join(lines) if lines else "No branches here yet."


async def _create(where: ToolScope, args: dict[str, Any]) -> str:
    return await where.services.create_branch(where.scope, args["label"], args.get("brief_state"))


async def _update(where: ToolScope, args: dict[str, Any]) -> str:
    status = args.get("status")  # one of STATUSES: the schema's enum is checked before the call
    brief = args.get("brief_state")
    if brief is None and status is None:
        raise ToolError("give a brief_state, a status, or both")
    return await where.services.update_branch(where.scope, args["branch"], brief, status)


LIST = ToolSpec(
    "branch_list", "Every branch of your activity in this server (all statuses), newest activity first, with its id.",
    {"type": "object", "properties": {
        "kinds": {"type": "array", "items": {"type": "string", "enum": list(BRANCH_KINDS)},
                  "description": "only these kinds (default: all)"},
    }}, _list)
CREATE = ToolSpec(
    "branch_create", "Begin a free branch of your own: something you want to do in your own time (it waits, "
    "suspended, until you resume it or a pulse takes it up; complete it with branch_update when you are done).",
    {"type": "object", "properties": {
        "label": {"type": "string", "maxLength": 100, "description": "what it is about, a few words"},
        "brief_state": {"type": "string", "maxLength": 200, "description": "where it starts, one line"},
    }, "required": ["label"]}, _create)
UPDATE = ToolSpec(
    "branch_update", "Note where a branch stands (brief_state, one line) or change its status.",
    {"type": "object", "properties": {
        "branch": {"type": "string", "description": "the branch id (see branch_list)"},
        "brief_state": {"type": "string"},
        "status": {"type": "string", "enum": list(STATUSES)},
    }, "required": ["branch"]}, _update)
