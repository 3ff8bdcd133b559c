"""Branches, tasks, playbook runs and the pulse's decision log: the persona's own activity (seed 001)."""

from __future__ import annotations

import json
from typing import Any

from memory import rows as row_to
from memory.records import (
    AutonomyEntry,
    AutonomyKind,
    Branch,
    BranchKind,
    BranchStatus,
    PlaybookRun,
    PlaybookStep,
    RunStatus,
    Task,
    TaskStatus,
    Thread,
)
from memory.sql.base import SqlStore, marks


class BranchesSql(SqlStore):
    # branches

    async def create_branch(self, branch_id: str, persona: str, branch_type: BranchKind, label: str, scope_key: str,
                            guild_id: int | None, channel_id: int | None, discord_thread_id: int | None,
                            task_id: str | None = None, partner_persona: str | None = None) -> Branch:
        now = self.clock()
        await self._changed_for_all(
            "INSERT INTO branches (id, persona, branch_type, label, scope_key, guild_id, channel_id,"
            " discord_thread_id, task_id, partner_persona, created_at, last_activity_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
            (branch_id, persona, branch_type, label, scope_key, guild_id, channel_id, discord_thread_id, task_id,
             partner_persona, now, now))
        self.branch_changes += 1
        found = await self.branch(branch_id)
        assert found is not None
        return found

    async def branch(self, branch_id: str) -> Branch | None:
        row = await self._row("SELECT * FROM branches WHERE id = ?", (branch_id,))
        return row_to.branch(row) if row else None

    async def branches(self, persona: str, scope_key: str, status: BranchStatus | None = None,
                       branch_type: BranchKind | None = None) -> list[Branch]:
        where, params = ["persona = ?", "scope_key = ?"], [persona, scope_key]
        for column, value in (("status", status), ("branch_type", branch_type)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        rows = await self._rows(f"SELECT * FROM branches WHERE {' AND '.join(where)} ORDER BY created_at DESC",
                                params)
        return [row_to.branch(r) for r in rows]

    async def update_branch(self, branch_id: str, *, status: BranchStatus | None = None,
                            current_thread_id: int | None = None, label: str | None = None,
                            brief_state: str | None = None, moved_to: tuple[str, int | None] | None = None) -> None:
        """Change what is given; any change is activity (the working memory orders branches by it). `moved_to`:
        the conversation (scope key, channel id) a social branch's new session is held in: it is listed there."""
        now = self.clock()
        scope_key, channel_id = moved_to if moved_to is not None else (None, None)
        await self._changed_for_all(
            "UPDATE branches SET status = COALESCE(?, status), current_thread_id = COALESCE(?, current_thread_id),"
            " label = COALESCE(?, label), brief_state = COALESCE(?, brief_state), last_activity_at = ?,"
            " scope_key = COALESCE(?, scope_key), channel_id = COALESCE(?, channel_id),"
            " suspended_at = CASE WHEN ? = 'suspended' THEN ? ELSE suspended_at END,"
            " completed_at = CASE WHEN ? = 'completed' THEN ? ELSE completed_at END WHERE id = ?",
            (status, current_thread_id, label, brief_state, now, scope_key, channel_id, status or "", now,
             status or "", now, branch_id))
        self.branch_changes += 1

    async def open_branch_scopes(self, persona: str) -> set[str]:
        rows = await self._rows("SELECT DISTINCT scope_key FROM branches WHERE persona = ? AND status != 'completed'",
                                (persona,))
        return {str(r[0]) for r in rows}

    async def recent_branches(self, persona: str, scope_keys: tuple[str, ...],
                              limit: int, *, with_completed: bool = False) -> list[Branch]:
        open_only = "" if with_completed else " AND status != 'completed'"
        rows = await self._rows(
            f"SELECT * FROM branches WHERE persona = ?{open_only} AND scope_key IN ({marks(scope_keys)})"
            " ORDER BY COALESCE(last_activity_at, created_at) DESC LIMIT ?", (persona, *scope_keys, limit))
        return [row_to.branch(r) for r in rows]

    async def branch_threads(self, branch_id: str) -> list[Thread]:
        rows = await self._rows("SELECT * FROM threads WHERE branch_id = ? ORDER BY id", (branch_id,))
        return [row_to.thread(r) for r in rows]

    async def branch_of_discord_thread(self, discord_thread_id: int) -> Branch | None:
        row = await self._row("SELECT * FROM branches WHERE discord_thread_id = ? ORDER BY created_at DESC LIMIT 1",
                              (discord_thread_id,))
        return row_to.branch(row) if row else None

    # tasks

    async def create_task(self, persona: str, scope_key: str, guild_id: int | None, title: str, goal: str,
                          steps: list[str]) -> Task:
        now = self.clock()
        [row] = await self._written(
            "INSERT INTO tasks (persona, scope_key, guild_id, title, goal, steps, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING *",
            (persona, scope_key, guild_id, title, goal,
             json.dumps([{"text": s, "done": False} for s in steps], ensure_ascii=False), now, now))
        return row_to.task(row)

    async def tasks_in(self, persona: str, scope_keys: tuple[str, ...], limit: int) -> list[Task]:
        rows = await self._rows(
            f"SELECT * FROM tasks WHERE persona = ? AND scope_key IN ({marks(scope_keys)})"
            " ORDER BY status != 'open', id DESC LIMIT ?", (persona, *scope_keys, limit))
        return [row_to.task(r) for r in rows]

    async def task(self, task_id: int) -> Task | None:
        row = await self._row("SELECT * FROM tasks WHERE id = ?", (task_id,))
        return row_to.task(row) if row else None

    async def update_task(self, task_id: int, *, branch_id: str | None = None,
                          steps: list[dict[str, Any]] | None = None, status: TaskStatus | None = None) -> Task:
        rows = await self._written(
            "UPDATE tasks SET branch_id = COALESCE(?, branch_id), steps = COALESCE(?, steps),"
            " status = COALESCE(?, status), updated_at = ? WHERE id = ? RETURNING *",
            (branch_id, None if steps is None else json.dumps(steps, ensure_ascii=False), status, self.clock(),
             task_id))
        if not rows:
            raise KeyError(f"no task {task_id}")
        return row_to.task(rows[0])

    # playbook runs: what /playbooks runs shows

    async def start_playbook_run(self, playbook: str, persona: str, scope_key: str, run_id: str,
                                 args: dict[str, Any]) -> int:
        [row] = await self._written(
            "INSERT INTO playbook_runs (playbook, persona, scope_key, run_id, args, started_at)"
            " VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
            (playbook, persona, scope_key, run_id, json.dumps(args, ensure_ascii=False, default=str), self.clock()))
        return int(row[0])

    async def log_playbook_step(self, run: int, step: PlaybookStep) -> None:
        await self._changed(
            "INSERT INTO playbook_steps (run, node, node_type, profile, tier, input_tokens, output_tokens,"
            " cache_read, cache_write, duration_ms, summary, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (run, step.node, step.node_type, step.profile, step.tier, step.input_tokens, step.output_tokens,
             step.cache_read, step.cache_write, step.duration_ms, step.summary, step.at or self.clock()))

    async def end_playbook_run(self, run: int, status: RunStatus, result: dict[str, Any] | None,
                               error: str | None) -> None:
        await self._changed(
            "UPDATE playbook_runs SET status = ?, result = ?, error = ?, ended_at = ? WHERE id = ?",
            (status, None if result is None else json.dumps(result, ensure_ascii=False, default=str), error,
             self.clock(), run))

    async def playbook_runs(self, persona: str, scope_key: str, limit: int) -> list[PlaybookRun]:
        """A conversation's newest runs, newest first."""
        rows = await self._rows("SELECT * FROM playbook_runs WHERE persona = ? AND scope_key = ?"
                                " ORDER BY id DESC LIMIT ?", (persona, scope_key, limit))
        return [row_to.playbook_run(r) for r in rows]

    async def playbook_steps(self, run: int) -> list[PlaybookStep]:
        rows = await self._rows("SELECT node, node_type, duration_ms, summary, profile, tier, input_tokens,"
                                " output_tokens, cache_read, cache_write, at FROM playbook_steps WHERE run = ?"
                                " ORDER BY id", (run,))
        return [PlaybookStep(*row) for row in rows]

    # the autonomous pulse's decision log

    async def log_autonomy(self, persona: str, place: str, kind: AutonomyKind, detail: str, *,
                           branch_id: str | None = None, calls: int = 0, tokens: int = 0) -> AutonomyEntry:
        [row] = await self._written(
            "INSERT INTO autonomy_log (persona, place, at, kind, branch_id, detail, calls, tokens)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING *",
            (persona, place, self.clock(), kind, branch_id, detail, calls, tokens))
        return AutonomyEntry(**row_to.columns(row))

    async def autonomy_log(self, persona: str, place: str, limit: int, *,
                           kind: AutonomyKind | None = None) -> list[AutonomyEntry]:
        """A server's decisions, newest first (of one kind, when given)."""
        of_kind = "" if kind is None else " AND kind = ?"
        rows = await self._rows(f"SELECT * FROM autonomy_log WHERE persona = ? AND place = ?{of_kind}"
                                " ORDER BY id DESC LIMIT ?", (persona, place, *([kind] if kind else []), limit))
        return [AutonomyEntry(**row_to.columns(r)) for r in rows]

    async def autonomy_spent(self, persona: str, place: str, since: float) -> tuple[int, int]:
        """Model calls and tokens the server's pulses spent since a moment."""
        row = await self._row("SELECT COALESCE(SUM(calls), 0), COALESCE(SUM(tokens), 0) FROM autonomy_log"
                              " WHERE persona = ? AND place = ? AND at >= ?", (persona, place, since))
        return (int(row[0]), int(row[1])) if row else (0, 0)
