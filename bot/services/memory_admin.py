"""What admins do to a conversation's memory: show, history, pin, edit, roll back, regenerate, pause, share."""

from __future__ import annotations

from bot.memory_scheduler import MemoryWorker
from bot.services.effective_settings import EffectiveSettings
from bot.services.stelis import StelisThreads
from bot.services.views import MemoryView
from memory.errors import Failure
from memory.records import MemoryChannel, MemoryRecord, Scope
from memory.short_term import ALL_VERSIONS, Outcome, read_from
from memory.store import Store


class MemoryAdminError(Failure):
    """An admin memory operation that cannot be done; the notice says why."""


class MemoryAdmin:
    def __init__(self, store: Store, settings: EffectiveSettings, stelis: StelisThreads, worker: MemoryWorker,
                 persona: str):
        self._store = store
        self._settings = settings
        self._stelis = stelis
        self._worker = worker
        self._persona = persona

    async def describe(self, scope: Scope, *, name: str | None = None, public: bool | None = None) -> None:
        """What the front end knows: the channel's name and whether @everyone can read it."""
        flags: dict[str, int | str | None] = {}
        if name is not None:
            flags["name"] = name
        if public is not None:
            flags["public"] = int(public)
        if flags:
            await self._flagged(await self._channel(scope), **flags)

    async def view(self, scope: Scope) -> MemoryView:
        return await self._view(await self._channel(scope))

    async def peek(self, scope: Scope) -> MemoryView | None:
        """The memory of a conversation, or None if it has none: a read creates nothing."""
        root = await self._store.find_root(self._persona, scope)
        ch = await self._store.memory_channel(root.id) if root is not None else None
        return await self._view(ch) if ch is not None else None

    async def history(self, scope: Scope, type_: str = "short_term", limit: int = 25) -> list[MemoryRecord]:
        view = await self.peek(scope)
        if view is None:
            return []
        kind, scope_id = view.channel.scope
        return await self._store.recent_records(self._persona, kind, scope_id, type_, limit, hidden=True)

    async def pin(self, scope: Scope, fact: str, pinned: bool = True) -> bool:
        if not fact.strip():
            raise MemoryAdminError("a pinned fact cannot be empty")
        kind, scope_id = (await self.view(scope)).channel.scope
        if pinned:
            return await self._store.pin(self._persona, kind, scope_id, fact)
        return await self._store.unpin(self._persona, kind, scope_id, fact)

    async def edit(self, scope: Scope, content: str, *, from_version: int | None = None) -> MemoryRecord:
        """Replace a short-term version (the newest, unless `from_version`) by a new one: prompts, recall and the
        long-term memory show the edit instead of it; history keeps it."""
        if not content.strip():
            raise MemoryAdminError("the edited memory cannot be empty")
        view = await self.view(scope)
        kind, scope_id = view.channel.scope
        base = await self._version(view, from_version) if from_version else next(reversed(view.short_term), None)
        made = {"edited_from": base.version, **read_from(base)} if base else {"edited_from": None}
        record = await self._store.add_record(
            self._persona, kind, scope_id, "short_term", content.strip(), base.first_seq if base else None,
            base.last_seq if base else None, made, hides=[base.version] if base else [],
        )
        await self._worker.rebuild_long_term(view.channel.thread_id)
        return record

    async def rollback(self, scope: Scope, version: int) -> MemoryRecord:
        """Make an earlier version current again, as a new version that hides every one after it (kept in
        history, restorable by rolling back to them); the long-term memory is written again without them."""
        view = await self.view(scope)
        kind, scope_id = view.channel.scope
        history = await self._history(view)
        old = _numbered(history, version)
        record = await self._store.add_record(
            self._persona, kind, scope_id, "short_term", old.content, old.first_seq, old.last_seq,
            {"rolled_back_to": version, **read_from(old)},
            hides=[r.version for r in history if r.version >= version and r.hidden_by is None])
        await self._worker.rebuild_long_term(view.channel.thread_id)
        return record

    async def regenerate(self, scope: Scope) -> Outcome:
        return await self._worker.run_channel((await self._channel(scope)).thread_id, force=True)

    async def pause(self, scope: Scope, paused: bool) -> bool:
        """Pause or resume automatic updates; False when they already were."""
        ch = await self._channel(scope)
        if bool(ch.paused) == paused:
            return False
        await self._store.set_channel_flags(ch.thread_id, paused=int(paused))
        return True

    async def share(self, scope: Scope, shareable: bool | None) -> None:
        """Opt a channel in or out of sharing (None: follow its visibility)."""
        if scope.private and shareable:
            raise MemoryAdminError("a private thread's memory is never shared: only its members may read it")
        await self._flagged(await self._channel(scope), shareable=None if shareable is None else int(shareable))

    async def _flagged(self, ch: MemoryChannel, **flags: int | str | None) -> None:
        """Set a channel's flags; one that stops it being shared takes its words out of the server memory too."""
        await self._store.set_channel_flags(ch.thread_id, **flags)
        now = await self._store.memory_channel(ch.thread_id)
        if ch.shared and now is not None and not now.shared and ch.guild_id is not None:
            await self._worker.unshared(ch.persona, ch.guild_id)

    async def _channel(self, scope: Scope) -> MemoryChannel:
        """The memory bookkeeping of a scope's conversation, created on first use."""
        return await self._store.ensure_memory_channel(await self._stelis.root(scope))

    async def _view(self, ch: MemoryChannel) -> MemoryView:
        kind, scope_id = ch.scope
        config = await self._settings.effective(ch.guild_id, ch.channel_id)
        short = await self._store.recent_records(self._persona, kind, scope_id, "short_term",
                                                 config.short_term_history.max_history_count)
        long = await self._store.latest_record(self._persona, kind, scope_id, "long_term")
        pins = await self._store.pins(self._persona, kind, scope_id)
        return MemoryView(ch, long, short, pins)

    async def _version(self, view: MemoryView, version: int) -> MemoryRecord:
        return _numbered(await self._history(view), version)

    async def _history(self, view: MemoryView) -> list[MemoryRecord]:
        """Every short-term version of a conversation, those an edit or a rollback hid included."""
        kind, scope_id = view.channel.scope
        return await self._store.recent_records(self._persona, kind, scope_id, "short_term", ALL_VERSIONS, hidden=True)


def _numbered(history: list[MemoryRecord], version: int) -> MemoryRecord:
    for record in history:
        if record.version == version:
            return record
    raise MemoryAdminError(f"there is no short-term memory version {version} here")
