"""The model's tool calls, run for one conversation: ToolBox runs a call, EngineTools is what a tool may use
of the engine (bot/tools/registry.ToolServices). The tools themselves are bot/tools/."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping
from typing import Any, cast

from bot.services.archive import Archive
from bot.services.autonomy import Autonomy
from bot.services.branches import DiscordThreadBranches
from bot.services.memory_admin import MemoryAdmin
from bot.services.stelis import StelisThreads
from bot.services.tasks import Tasks
from bot.tools import FrontEnd, ToolError, ToolScope, ToolServices, ToolSpec
from bot.tools.tasks import describe
from memory import dates, recall
from memory.anchors import exchange_lines, thread_ref
from memory.errors import Failure
from memory.llm import ToolCall
from memory.records import BRANCH_KINDS, BranchStatus, Scope, Thread

RECALL_TOKENS = 800  # what one recall tool result may hold


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


class EngineTools:
    def __init__(self, archive: Archive, stelis: StelisThreads, admin: MemoryAdmin,
                 branches: DiscordThreadBranches, tasks: Tasks, autonomy: Autonomy, clock: Callable[[], float],
                 persona: str):
        self.autonomy = autonomy
        self._branches = branches
        self._tasks = tasks
        self._persona = persona
        self.front_end: FrontEnd | None = None  # set by the front end that runs the engine
        self._archive = archive
        self._stelis = stelis
        self._admin = admin
        self._clock = clock

    async def recall_text(self, scope: Scope, query: str, limit: int) -> list[str]:
        hits = await self._archive.recall(scope, query, limit, replies=True)  # the model looks up: answers too
        text, _ = recall.render(hits, RECALL_TOKENS)
        return text.splitlines() if hits else []

    async def thread_text(self, scope: Scope, thread_id: int, messages: int) -> str | None:
        detail = await self._stelis.detail(scope, thread_id, exchanges=messages)
        if detail is None:
            return None
        t = detail.thread
        return "\n".join([f"{thread_ref(t.id)} {t.label} [{t.status}], depth {t.depth}",
                          f"Chronicle: {t.chronicle_summary or '(none yet)'}", "Latest messages:",
                          *exchange_lines(detail.last)])

    async def pin(self, scope: Scope, fact: str) -> bool:
        return await self._admin.pin(scope, fact)

    def now_text(self) -> str:
        return dates.now_text(self._clock())

    async def post(self, scope: Scope, text: str) -> str:
        """Said through the front end, and remembered as the persona's own message."""
        if self.front_end is None:
            raise ToolError("there is no front end to post through here")
        await self.front_end.post(scope, text)
        await self._archive.said(scope, text)
        return "posted"

    async def branch_lines(self, scope: Scope, kinds: tuple[str, ...] = BRANCH_KINDS) -> list[str]:
        return [f"{b.id} [{b.branch_type}, {b.status}] {b.label}" + (f": {b.brief_state}" if b.brief_state else "")
                for b in await self._branches.in_server(scope) if b.branch_type in kinds]

    async def create_branch(self, scope: Scope, label: str, brief_state: str | None) -> str:
        branch = await self._branches.create(scope, "free", label, brief_state)
        return f"{branch.id} is a new free branch, {branch.status}: {branch.label}"

    async def update_branch(self, scope: Scope, branch_id: str, brief_state: str | None, status: str | None) -> str:
        branch = await self._branches.update(scope, branch_id, brief_state=brief_state,
                                             status=cast(BranchStatus | None, status))  # branch_update checked it
        return f"{branch.id} is {branch.status}" + (f": {branch.brief_state}" if branch.brief_state else "")

    async def task_create(self, scope: Scope, title: str, goal: str, steps: list[str]) -> str:
        return describe(await self._tasks.create(scope, title, goal, steps))

    async def task_get(self, scope: Scope, task_id: int) -> str:
        return describe(await self._tasks.get(scope, task_id))

    async def task_update_step(self, scope: Scope, task_id: int, step: int, done: bool) -> str:
        return describe(await self._tasks.update_step(scope, task_id, step, done))

    async def task_close(self, scope: Scope, task_id: int, status: str) -> str:
        return describe(await self._tasks.close(scope, task_id, "done" if status == "done" else "abandoned"))

    async def open_thread(self, scope: Scope, name: str) -> str:
        if self.front_end is None:
            raise ToolError("there is no front end to open a thread through here")
        return await self.front_end.open_thread(scope, name)

    async def perceive(self, scope: Scope) -> str:
        return await self.autonomy.perceive(scope)

    async def record_wait(self, scope: Scope, reason: str) -> str:
        return await self.autonomy.record_wait(scope, reason)
