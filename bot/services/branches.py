"""Branches (seed 001) backed by Discord threads: each active stretch of a thread is one Stelis session.

Created → a task branch and a Stelis thread under the channel's root (anchored there). Archived → the
session ends with a chronicle and the branch is suspended. Spoken in again → a new session in the same
branch, opened by an anchor to the previous one. Deleted → the session is aborted, the branch completed.
"""

from __future__ import annotations

import logging
import uuid
from typing import Literal

from bot.services.stelis import StelisThreads
from bot.services.views import BranchDetail
from bot.tools import ToolError
from memory import threads
from memory.anchors import resume_anchor
from memory.llm import LLM, LLMError
from memory.records import Branch, BranchKind, BranchStatus, Scope, Thread
from memory.store import Store
from memory.threads import Run

log = logging.getLogger(__name__)


ALL_BRANCHES = 200  # what a branch list shows at most


async def current_session(store: Store, branch: Branch | None) -> Thread | None:
    """A branch's latest session (active or ended), if it has one."""
    return await store.find_thread(branch.current_thread_id) if branch and branch.current_thread_id else None


def branch_id_for(discord_thread_id: int) -> str:
    return f"discord-{discord_thread_id}"


class DiscordThreadBranches:
    def __init__(self, store: Store, llm: LLM, stelis: StelisThreads, persona: str):
        self._store = store
        self._llm = llm
        self._stelis = stelis
        self._persona = persona

    async def session(self, parent: Scope, discord_thread_id: int, label: str) -> Thread:
        """The active session of a Discord thread: opened on first sight, resumed after an archive."""
        branch_id = branch_id_for(discord_thread_id)
        root = await self._stelis.root(parent)
        branch = await self._store.branch_of_discord_thread(discord_thread_id)  # a task's thread, or its own
        if branch is None:
            await self._store.create_branch(branch_id, root.persona, "task", label, root.scope_key, root.guild_id,
                                            root.channel_id, discord_thread_id)
            return await self._open(root, branch_id, label, discord_thread_id, previous=None)
        current = await self._current(branch)
        if current is not None and current.status == "active":
            return current
        return await self._open(root, branch.id, branch.label, discord_thread_id, previous=current)

    async def current_session(self, discord_thread_id: int) -> Thread | None:
        """The Discord thread's latest session (active or not), if it has a branch."""
        branch = await self._store.branch_of_discord_thread(discord_thread_id)
        return await self._current(branch) if branch is not None else None

    async def spoken_in(self, discord_thread_id: int) -> bool:
        """Has the persona spoken in this Discord thread, in any of its sessions (a resumed one included)?"""
        branch = await self._store.branch_of_discord_thread(discord_thread_id)
        if branch is None:
            return False
        for session in reversed(await self._store.branch_threads(branch.id)):
            if await self._store.has_spoken(session.id):
                return True
        return False

    async def in_server(self, scope: Scope, limit: int = ALL_BRANCHES) -> list[Branch]:
        """Every branch of the persona this conversation may see (its own, its server's shared channels'), all
        statuses."""
        seen = await self._stelis.seen_from(scope)
        return await self._store.recent_branches(self._persona, seen.scope_keys, limit, with_completed=True)

    async def visible(self, scope: Scope, branch_id: str) -> Branch:
        """A branch this conversation may see and change; any other is unknown here."""
        branch = await self._store.branch(branch_id)
        if branch is None or branch.scope_key not in (await self._stelis.seen_from(scope)).scope_keys:
            raise ToolError(f"there is no branch {branch_id!r} here")
        return branch

    async def update(self, scope: Scope, branch_id: str, *, brief_state: str | None = None,
                     status: BranchStatus | None = None) -> Branch:
        """Change a branch of this server (never another's): suspend (the session ends with its chronicle),
        resume (a new session from the last) or complete."""
        branch = await self.visible(scope, branch_id)
        if status in ("suspended", "completed") and branch.status != status:
            if branch.branch_type == "social" and status == "completed":
                raise ToolError("a social branch never completes: suspend it until the next exchange")
            await self._end(branch, "completed", status)  # suspend = end the session with its chronicle
        elif status == "active" and branch.status != "active":
            await self.resume(branch)
        if brief_state is not None:
            await self._store.update_branch(branch_id, brief_state=brief_state)
        found = await self._store.branch(branch_id)
        assert found is not None
        return found

    async def create(self, scope: Scope, kind: BranchKind, label: str, brief_state: str | None = None, *,
                     branch_id: str | None = None, partner: int | None = None) -> Branch:
        """A branch of this conversation that waits, suspended, for its first session (a pulse or a resume)."""
        label = label.strip()
        if not label:
            raise ToolError("a branch needs a label")
        root = await self._stelis.root(scope)
        branch_id = branch_id or f"{kind}-{uuid.uuid4().hex[:8]}"
        partner_persona = None if partner is None else str(partner)  # the other persona's user id (social)
        await self._store.create_branch(branch_id, root.persona, kind, label[:100], root.scope_key, root.guild_id,
                                        root.channel_id, None, partner_persona=partner_persona)
        await self._store.update_branch(branch_id, status="suspended", brief_state=(brief_state or "not started")[:200])
        found = await self._store.branch(branch_id)
        assert found is not None
        return found

    async def discord_threads_seen(self) -> list[tuple[int, int | None]]:
        """(Discord thread id, newest remembered message id) of every thread whose branch is still open:
        where a backfill after a reconnect starts, across all of a thread's sessions."""
        seen: list[tuple[int, int | None]] = []
        for root in await self._store.root_threads(self._persona):
            for branch in await self._store.branches(self._persona, root.scope_key):
                if branch.discord_thread_id is None or branch.status == "completed":
                    continue
                ids = [await self._store.last_external_id(s.id) for s in await self._store.branch_threads(branch.id)]
                seen.append((branch.discord_thread_id, max((i for i in ids if i is not None), default=None)))
        return seen

    async def archive(self, discord_thread_id: int) -> Thread | None:
        """End the active session with a chronicle; the branch waits, suspended."""
        return await self._close(discord_thread_id, "completed", "suspended")

    async def delete(self, discord_thread_id: int) -> Thread | None:
        """Abort the active session (a partial chronicle when possible); the branch is over."""
        return await self._close(discord_thread_id, "aborted", "completed")

    async def rename(self, discord_thread_id: int, label: str) -> None:
        branch = await self._store.branch_of_discord_thread(discord_thread_id)
        if branch is not None:
            await self._store.update_branch(branch.id, label=label)

    async def of(self, scope: Scope, status: BranchStatus | None = None,
                 kind: BranchKind | None = None) -> list[Branch]:
        """The branches of a conversation, newest first."""
        return await self._store.branches(self._persona, scope.key, status, kind)

    async def detail(self, scope: Scope, branch_id: str) -> BranchDetail | None:
        """A branch of this conversation and its sessions; None if it is not one of them."""
        found = await self._store.branch(branch_id)
        if found is None or found.scope_key != scope.key:
            return None
        return BranchDetail(found, await self._store.branch_threads(branch_id))

    async def _current(self, branch: Branch) -> Thread | None:
        return await current_session(self._store, branch)

    async def _open(self, root: Thread, branch_id: str, label: str, discord_thread_id: int | None,
                    previous: Thread | None) -> Thread:
        thread = await threads.start(self._store, Run(root.id), label, await self._stelis.settings_at(root.id),
                                     discord_thread_id=discord_thread_id, branch_id=branch_id)
        if previous is not None and previous.anchor_seq is not None:
            anchor = await self._store.message_by_seq(previous.anchor_seq)
            if anchor is not None:
                await self._store.append(thread.id, resume_anchor(anchor))
        await self._store.update_branch(branch_id, status="active", current_thread_id=thread.id)
        log.info("branch %s: session %d opened%s", branch_id, thread.id,
                 f" (resuming {previous.id})" if previous else "")
        return thread

    async def resume(self, branch: Branch) -> Thread:
        """A new session of the branch where it is, opened by an anchor to the previous one (seed 001)."""
        return await self.resume_in(branch, Scope(branch.scope_key, branch.guild_id, branch.channel_id, None))

    async def resume_in(self, branch: Branch, scope: Scope) -> Thread:
        """A new session of the branch held in `scope`'s conversation (a social branch talks wherever the other
        persona does): anchored to the previous session only if this conversation may read where that was held;
        otherwise nothing of it comes here, and where the branch stood is not said here either."""
        root = await self._stelis.root(scope)
        previous = await self._current(branch)
        if root.scope_key != branch.scope_key:
            readable = previous is not None and previous.scope_key in (await self._stelis.seen_from(scope)).scope_keys
            if not readable:
                previous = None
            await self._store.update_branch(branch.id, moved_to=(root.scope_key, root.channel_id),
                                            brief_state=None if readable else "a new exchange here")
        return await self._open(root, branch.id, branch.label, branch.discord_thread_id, previous=previous)

    async def _close(self, discord_thread_id: int, status: Literal["completed", "aborted"],
                     branch_status: BranchStatus) -> Thread | None:
        branch = await self._store.branch_of_discord_thread(discord_thread_id)
        if branch is None:
            return None
        return await self._end(branch, status, branch_status)

    async def _end(self, branch: Branch, status: Literal["completed", "aborted"],
                   branch_status: BranchStatus) -> Thread | None:
        """The branch's active session ends (with a chronicle when one can be written); the branch waits or is over."""
        current = await self._current(branch)
        closed = current
        if current is not None and current.status == "active":
            try:
                closed = await threads.finish(self._store, self._llm, current, self._stelis.settings,
                                              status=status, chronicle=True)
            except LLMError as exc:  # the session is saved as aborted; say why in the log, keep going
                log.warning("chronicle of branch %s failed: %s", branch.id, exc.notice)
                closed = await self._store.thread(current.id)
        await self._store.update_branch(branch.id, status=branch_status)
        return closed
