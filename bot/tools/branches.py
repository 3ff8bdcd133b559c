"""`branch_list` and `branch_update`: the persona's branches of activity in this server (seed 001)."""

from __future__ import annotations

from typing import Any

from bot.tools.registry import ToolError, ToolScope, ToolSpec

STATUSES = ("active", "suspended", "completed")


async def _list(where: ToolScope, args: dict[str, Any]) -> str:
    lines = await where.services.branch_lines(where.scope)
    return "\n".join(lines) if lines else "No branches here yet."


async def _update(where: ToolScope, args: dict[str, Any]) -> str:
    status = args.get("status")  # one of STATUSES: the schema's enum is checked before the call
    brief = args.get("brief_state")
    if brief is None and status is None:
        raise ToolError("give a brief_state, a status, or both")
    return await where.services.update_branch(where.scope, args["branch"], brief, status)


LIST = ToolSpec(
    "branch_list", "Every branch of your activity in this server (all statuses), newest activity first, with its id.",
    {"type": "object", "properties": {}}, _list)
UPDATE = ToolSpec(
    "branch_update", "Note where a branch stands (brief_state, one line) or change its status.",
    {"type": "object", "properties": {
        "branch": {"type": "string", "description": "the branch id (see branch_list)"},
        "brief_state": {"type": "string"},
        "status": {"type": "string", "enum": list(STATUSES)},
    }, "required": ["branch"]}, _update)
