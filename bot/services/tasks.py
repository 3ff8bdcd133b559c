"""Tasks (seed 001): a title, a goal and steps; creating one opens its task branch and first session."""

from __future__ import annotations

import logging

from bot.services.branches import current_session
from bot.services.stelis import StelisThreads
from bot.tools import ToolError
from memory import threads
from memory.llm import LLM, LLMError
from memory.records import Scope, Task, TaskStatus
from memory.store import Store
from memory.threads import Run

log = logging.getLogger(__name__)

MAX_STEPS = 30


def branch_of(task_id: int) -> str:
    return f"task-{task_id}"


class Tasks:
    def __init__(self, store: Store, llm: LLM, stelis: StelisThreads, persona: str):
        self._store = store
        self._llm = llm
        self._stelis = stelis
        self._persona = persona

    async def create(self, scope: Scope, title: str, goal: str, steps: list[str], *,
                     discord_thread_id: int | None = None) -> Task:
        """The task, its branch, and the first session (a Stelis thread under the conversation, anchored);
        with a Discord thread, the work happens there."""
        title, goal = title.strip(), goal.strip()
        if not title or not goal:
            raise ToolError("a task needs a title and a goal")
        if len(steps) > MAX_STEPS:
            raise ToolError(f"a task has at most {MAX_STEPS} steps")
        root = await self._stelis.root(scope)
        task = await self._store.create_task(self._persona, root.scope_key, root.guild_id, title, goal,
                                             [s.strip() for s in steps if s.strip()])
        branch = branch_of(task.id)
        await self._store.create_branch(branch, self._persona, "task", title, root.scope_key, root.guild_id,
                                        root.channel_id, discord_thread_id, task_id=str(task.id))
        session = await threads.start(self._store, Run(root.id), title, await self._stelis.settings_at(root.id),
                                      branch_id=branch,
                                      discord_thread_id=discord_thread_id)
        await self._store.update_branch(branch, status="active", current_thread_id=session.id,
                                        brief_state=f"started: {goal}"[:200])
        return await self._store.update_task(task.id, branch_id=branch)

    async def of(self, scope: Scope, limit: int = 50) -> list[Task]:
        """The tasks this conversation may see (its own, its server's shared channels')."""
        seen = await self._stelis.seen_from(scope)
        return await self._store.tasks_in(self._persona, seen.scope_keys, limit)

    async def get(self, scope: Scope, task_id: int) -> Task:
        task = await self._store.task(task_id)
        if task is None or task.scope_key not in (await self._stelis.seen_from(scope)).scope_keys:
            raise ToolError(f"there is no task {task_id} here")
        return task

    async def update_step(self, scope: Scope, task_id: int, step: int, done: bool) -> Task:
        task = await self.get(scope, task_id)
        if not 1 <= step <= len(task.steps):
            raise ToolError(f"task {task_id} has steps 1 to {len(task.steps)}, not {step}")
        steps = [dict(s) for s in task.steps]
        steps[step - 1]["done"] = done
        updated = await self._store.update_task(task_id, steps=steps)
        if task.branch_id:
            await self._store.update_branch(task.branch_id, brief_state=f"step {step} {'done' if done else 'reopened'}"
                                            f": {steps[step - 1]['text']}"[:200])
        return updated

    async def close(self, scope: Scope, task_id: int, status: TaskStatus) -> Task:
        """Done or abandoned: its session ends with a chronicle, its branch is completed."""
        task = await self.get(scope, task_id)
        if task.status != "open":
            raise ToolError(f"task {task_id} is already {task.status}")
        branch = await self._store.branch(task.branch_id) if task.branch_id else None
        session = await current_session(self._store, branch)
        if session is not None and session.status == "active":
            try:
                await threads.finish(self._store, self._llm, session, self._stelis.settings,
                                     status="completed" if status == "done" else "aborted", chronicle=True)
            except LLMError as exc:  # saved as aborted; the task closes all the same
                log.warning("chronicle of task %d failed: %s", task_id, exc.notice)
        if branch is not None:
            await self._store.update_branch(branch.id, status="completed", brief_state=status)
        return await self._store.update_task(task_id, status=status)
