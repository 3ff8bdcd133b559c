"""Social branches (seed 001): one per relationship with another persona in a server, each exchange a new session.

An exchange's messages live in its session (a Stelis thread under the conversation where it happens, anchored
there), wherever in the server it happens; when a person speaks, or the persona has taken its turns, the session
ends with a chronicle and the branch waits, suspended, for the next exchange. A social branch never completes.
What a session held where some people cannot read stays there: the next session, held elsewhere, is anchored to
it only where it could be read, and the branch is listed (with where it stands) where its latest session is.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from bot.services.branches import DiscordThreadBranches, current_session
from bot.services.effective_settings import EffectiveSettings
from memory.records import Branch, Scope, Thread
from memory.store import Store

log = logging.getLogger(__name__)


def social_branch_id(guild_id: int | None, partner_id: int) -> str:
    """One branch per partner in a server (never across servers: nothing of one reaches another)."""
    return f"social-{guild_id}-{partner_id}"


class Socials:
    def __init__(self, store: Store, branches: DiscordThreadBranches, settings: EffectiveSettings, persona: str):
        self._persona = persona
        self._store = store
        self._branches = branches
        self._settings = settings

    async def prepare(self, scope: Scope, partners: dict[int, str]) -> list[Branch]:
        """Each partner's branch in this conversation, made in advance (suspended until the first exchange)."""
        made = []
        for partner_id, name in partners.items():
            branch_id = social_branch_id(scope.guild_id, partner_id)
            found = await self._store.branch(branch_id)
            made.append(found or await self._branches.create(scope, "social", f"with {name}", "no exchange yet",
                                                             branch_id=branch_id, partner=partner_id))
        return made

    async def session(self, scope: Scope, partner_id: int, partner_name: str) -> Thread:
        """The session of the exchange going on with a partner: the active one, or a new one (anchored to the
        previous exchange)."""
        branch = (await self.prepare(scope, {partner_id: partner_name}))[0]
        current = await current_session(self._store, branch)
        if current is not None and current.status == "active":
            if current.scope_key == scope.key:
                return current
            # The exchange goes on elsewhere in the server: there it ends, with its chronicle, before this one.
            branch = await self._suspend(Scope(branch.scope_key, branch.guild_id, branch.channel_id, None), branch)
        return await self._branches.resume_in(branch, scope)

    async def turns_left(self, scope: Scope, session_id: int) -> int:
        """The persona's turns left in this exchange (autonomy.session_turns, per server)."""
        config = await self._settings.effective(scope.guild_id, scope.channel_id)
        taken = sum(1 for m in await self._store.tail(session_id, 200) if m.role == "assistant")
        return max(0, config.autonomy.session_turns - taken)

    async def answer_turn(self, scope: Scope, partner_id: int, session_id: int,
                          answer: Callable[[], Awaitable[object]]) -> bool:
        """Another persona's turn, heard in the session of their exchange: answered (by `answer`, the front end's
        reply) while the exchange has turns left; once they are spent the exchange ends, its session suspended
        with a chronicle. Whether it was answered."""
        answered = await self.turns_left(scope, session_id) > 0
        if answered:
            await answer()
        if await self.turns_left(scope, session_id) <= 0:
            await self.end(scope, partner_id)
        return answered

    async def end(self, scope: Scope, partner_id: int) -> Branch | None:
        """The exchange is over: its session ends with a chronicle, the branch waits for the next one."""
        branch = await self._store.branch(social_branch_id(scope.guild_id, partner_id))
        if branch is None or branch.status != "active" or branch.scope_key != scope.key:  # not going on here
            return None
        return await self._suspend(scope, branch)

    async def end_all(self, scope: Scope) -> list[Branch]:
        """A person spoke here: every exchange going on in this conversation ends (its chronicle reaches it)."""
        active = await self._store.branches(self._persona, scope.key, "active", "social")
        return [await self._suspend(scope, branch) for branch in active]

    async def _suspend(self, scope: Scope, branch: Branch) -> Branch:
        ended = await self._branches.update(scope, branch.id, brief_state=None, status="suspended")
        session = await current_session(self._store, ended)
        said = [ln for ln in (session.chronicle_summary or "").splitlines()
                if ln.strip() and not ln.startswith(("[", "system:"))] if session is not None else []
        if said:  # where the last exchange left things: its chronicle's first line said (not a date, not an anchor)
            await self._store.update_branch(branch.id, brief_state=said[0][:200])
        found = await self._store.branch(branch.id)
        assert found is not None
        return found
