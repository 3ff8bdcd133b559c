"""The tool registry and the scope a tool runs in."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from memory.errors import Failure
from memory.llm import Tool
from memory.records import BRANCH_KINDS, Scope

_JSON_TYPES: dict[str, type | tuple[type, ...]] = {
    "string": str, "integer": int, "number": (int, float), "boolean": bool, "object": dict, "array": list,
}


class ToolError(Failure):
    """A tool that cannot do what was asked; the notice goes back to the model as the tool's result."""


class ToolServices(Protocol):
    """What tools may use of the engine, always for one conversation."""

    async def recall_text(self, scope: Scope, query: str, limit: int) -> list[str]: ...
    async def thread_text(self, scope: Scope, thread_id: int, messages: int) -> str | None: ...
    async def pin(self, scope: Scope, fact: str) -> bool: ...
    def now_text(self) -> str: ...
    async def post(self, scope: Scope, text: str) -> str: ...
    async def branch_lines(self, scope: Scope, kinds: tuple[str, ...] = BRANCH_KINDS) -> list[str]: ...
    async def create_branch(self, scope: Scope, label: str, brief_state: str | None) -> str: ...
    async def task_create(self, scope: Scope, title: str, goal: str, steps: list[str]) -> str: ...
    async def task_get(self, scope: Scope, task_id: int) -> str: ...
    async def task_update_step(self, scope: Scope, task_id: int, step: int, done: bool) -> str: ...
    async def task_close(self, scope: Scope, task_id: int, status: str) -> str: ...
    async def update_branch(self, scope: Scope, branch_id: str, brief_state: str | None,
                            status: str | None) -> str: ...
    async def open_thread(self, scope: Scope, name: str) -> str: ...
    async def perceive(self, scope: Scope) -> str: ...
    async def record_wait(self, scope: Scope, reason: str) -> str: ...


class FrontEnd(Protocol):
    """What a front end (the Discord cogs, the console) lets the persona do on its own initiative."""

    async def post(self, scope: Scope, text: str) -> None:
        """Say `text` in the conversation `scope` names (raise ToolError if it cannot)."""
        ...

    async def open_thread(self, scope: Scope, name: str) -> str:
        """Open a thread for a new piece of work beside the conversation; a line saying where it is."""
        ...

    async def open_work_thread(self, scope: Scope, name: str) -> int | None:
        """A thread the persona owns for a task's work beside the conversation: its id (None: no threads here)."""
        ...

    async def strangers(self, guild_id: int, kind: str, ids: list[int]) -> list[int]:
        """Which of these ids are not a channel, role or member (`kind`: channel, role, user) of the server."""
        ...


@dataclass(frozen=True)
class ToolScope:
    """The conversation a tool call belongs to: tools act on it and nothing else."""

    scope: Scope
    thread_id: int
    services: ToolServices


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    input_schema: dict[str, Any]
    run: Callable[[ToolScope, dict[str, Any]], Awaitable[Any]]
    # A look-up's result repeats what memory already holds: summaries leave it out, so memory does not
    # write old facts again as new ones.
    looks_up: bool = False

    def definition(self) -> Tool:
        return Tool(self.name, self.description, self.input_schema)

    async def call(self, where: ToolScope, args: dict[str, Any]) -> Any:
        """Run the tool after checking its arguments against the schema; a ToolError says what was wrong."""
        problems = argument_problems(self.input_schema, args)
        if problems:
            raise ToolError(f"{self.name}: {'; '.join(problems)}")
        return await self.run(where, args)


def argument_problems(schema: dict[str, Any], args: dict[str, Any], *, unknown_ok: bool = False) -> list[str]:
    """Missing, unknown, mistyped or unlisted values (the subset of JSON Schema tool inputs and answers use)."""
    properties: dict[str, Any] = schema.get("properties") or {}
    problems = [f"missing {name!r}" for name in schema.get("required", []) if name not in args]
    for name, value in args.items():
        spec = properties.get(name)
        if spec is None:
            if not unknown_ok:
                problems.append(f"unknown argument {name!r}")
            continue
        expected = _JSON_TYPES.get(spec.get("type", ""))
        if expected is not None and (not isinstance(value, expected) or (isinstance(value, bool)
                                                                        and spec.get("type") != "boolean")):
            problems.append(f"{name!r} must be {spec['type']}")
        elif "enum" in spec and value not in spec["enum"]:
            problems.append(f"{name!r} is one of {', '.join(map(json.dumps, spec['enum']))}, not {json.dumps(value)}")
    return problems


def definitions(registry: Mapping[str, ToolSpec], names: Collection[str]) -> tuple[Tool, ...]:
    """Tool definitions in the registry's order, whatever order the names come in (a stable cache prefix)."""
    return tuple(spec.definition() for name, spec in registry.items() if name in names)
