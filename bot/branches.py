"""Branches (seed 001) backed by Discord threads: each active stretch of a thread is one Stelis session.

Created → a task branch and a Stelis thread under the channel's root (anchored there). Archived → the
session ends with a chronicle and the branch is suspended. Spoken in again → a new session in the same
branch, opened by an anchor to the previous one. Deleted → the session is aborted, the branch completed.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from memory import threads
from memory.anchors import resume_anchor
from memory.llm import LLMError
from memory.records import Scope, Thread
from memory.threads import Run

if TYPE_CHECKING:
    from bot.engine import Engine

log = logging.getLogger(__name__)


def branch_id_for(discord_thread_id: int) -> str:
    return f"discord-{discord_thread_id}"


class Branches:
    def __init__(self, engine: Engine):
        self.engine = engine
        self.store = engine.store

    async def session(self, parent: Scope, discord_thread_id: int, label: str) -> Thread:
        """The active session of a Discord thread: opened on first sight, resumed after an archive."""
        branch_id = branch_id_for(discord_thread_id)
        root = await self.engine.thread_for(parent)
        branch = await self.store.branch(branch_id)
        if branch is None:
            await self.store.create_branch(branch_id, root.persona, "task", label, root.scope_key, root.guild_id,
                                           root.channel_id, discord_thread_id)
            return await self._open(root, branch_id, label, discord_thread_id, previous=None)
        current = await self.store.find_thread(branch["current_thread_id"]) if branch["current_thread_id"] else None
        if current is not None and current.status == "active":
            return current
        return await self._open(root, branch_id, branch["label"], discord_thread_id, previous=current)

    async def archive(self, discord_thread_id: int) -> Thread | None:
        """End the active session with a chronicle; the branch waits, suspended."""
        return await self._close(discord_thread_id, "completed", "suspended")

    async def delete(self, discord_thread_id: int) -> Thread | None:
        """Abort the active session (a partial chronicle when possible); the branch is over."""
        return await self._close(discord_thread_id, "aborted", "completed")

    async def rename(self, discord_thread_id: int, label: str) -> None:
        if await self.store.branch(branch_id_for(discord_thread_id)) is not None:
            await self.store.update_branch(branch_id_for(discord_thread_id), label=label)

    async def _open(self, root: Thread, branch_id: str, label: str, discord_thread_id: int,
                    previous: Thread | None) -> Thread:
        thread = await threads.start(self.store, Run(root.id), label, self.engine.stelis,
                                     discord_thread_id=discord_thread_id, branch_id=branch_id)
        if previous is not None and previous.anchor_seq is not None:
            anchor = await self.store.message_by_seq(previous.anchor_seq)
            if anchor is not None:
                await self.store.append(thread.id, resume_anchor(anchor))
        await self.store.update_branch(branch_id, status="active", current_thread_id=thread.id)
        log.info("branch %s: session %d opened%s", branch_id, thread.id,
                 f" (resuming {previous.id})" if previous else "")
        return thread

    async def _close(self, discord_thread_id: int, status: str, branch_status: str) -> Thread | None:
        branch = await self.store.branch(branch_id_for(discord_thread_id))
        if branch is None:
            return None
        current = await self.store.find_thread(branch["current_thread_id"]) if branch["current_thread_id"] else None
        closed = current
        if current is not None and current.status == "active":
            try:
                closed = await threads.finish(self.store, self.engine.llm, current, self.engine.stelis,
                                              status=status, chronicle=True)  # type: ignore[arg-type]
            except LLMError as exc:  # the session is saved as aborted; say why in the log, keep going
                log.warning("chronicle of Discord thread %d failed: %s", discord_thread_id, exc.notice)
                closed = await self.store.thread(current.id)
        await self.store.update_branch(branch["id"], status=branch_status)
        return closed
