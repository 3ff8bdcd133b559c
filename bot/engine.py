"""The persona runtime shared by the console and the Discord cogs: hear, reply, Stelis threads, context."""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import aiosqlite

from bot.branches import Branches
from bot.clock import Clock
from bot.config import Config, apply_overrides, dotted_value
from bot.instance_lock import AlreadyRunning, InstanceLock
from bot.memory_scheduler import MemoryScheduler, MemoryWorker
from bot.providers import make_llm
from memory import channels, forget, recall, snapshots, threads
from memory.budget import Budget, ContextError, Shares
from memory.channels import Triggers
from memory.context import Assembler, Assembly, Persona
from memory.llm import LLM, LLMError, TextSink
from memory.records import MemoryChannel, MemoryRecord, Message, NewMessage, Role, Scope, Thread
from memory.short_term import MemorySettings, Outcome
from memory.store import Store, StoreError
from memory.threads import Run, StelisSettings
from memory.window import LockedBufferTooLarge, WindowPolicy, protected_size, window_size

log = logging.getLogger(__name__)

INDEX_DELAY_SECONDS = 1.0  # what is heard is indexed for recall this long after, in one batch


class ReplyFailed(Exception):
    """The model could not answer; the user's message is stored, `notice` is fit to show."""

    def __init__(self, notice: str):
        super().__init__(notice)
        self.notice = notice


@dataclass(frozen=True)
class TreeRow:
    thread: Thread
    window: int  # the seed's window size at the model's full context
    protected: int  # what the thread keeps of its parent (0 for a root)


@dataclass(frozen=True)
class MemoryView:
    """What /memory shows: the bookkeeping, the current versions and the pins."""

    channel: MemoryChannel
    long_term: MemoryRecord | None
    short_term: list[MemoryRecord]
    pins: list[str]


class MemoryAdminError(Exception):
    """An admin memory operation that cannot be done; the message says why."""


class Engine:
    def __init__(self, config: Config, store: Store, llm: LLM, clock: Clock | None = None):
        self.config = config
        self.store = store
        self.llm = llm
        self.clock = clock or Clock()
        self.stelis = StelisSettings(
            max_depth=config.stelis.max_depth, default_window_ratio=config.stelis.default_window_ratio,
            chunk_tokens=config.stelis.chunk_tokens, chronicle_tokens=config.stelis.chronicle_tokens,
        )
        c = config.context
        self.assembler = Assembler(
            store, llm, Persona(config.persona.name, config.persona.card),
            Budget(config.llm.context_tokens, config.llm.max_output_tokens,
                   Shares(memory=c.memory_share, recall=c.recall_share, tail=c.tail_share, summary=c.summary_share)),
            WindowPolicy(low_water=c.low_water, high_water=c.high_water, turns_per_cut=c.turns_per_cut,
                         locked_turns=c.locked_turns, trims=c.trims, summary_tokens=c.summary_tokens,
                         observation_max_lines=c.observation_max_lines,
                         observation_keep_lines=c.observation_keep_lines),
            self.stelis, clock=store.clock,
        )
        self.assembler.memory_versions = config.short_term_history.max_history_count
        self.assembler.shared_channels = config.memory.shared_channels
        self.assembler.recall_enabled = c.recall
        self.assembler.persona_for = self._persona_for
        # The scheduler's view of time: the console's /idle moves it, stored times never.
        self.memory = MemoryWorker(store, llm, self.memory_settings, self.clock, config.memory.concurrency)
        self.scheduler: MemoryScheduler | None = None
        self.branches = Branches(self)
        self._settings_cache: dict[tuple[int | None, int | None], Config] = {}
        self._reply_locks: defaultdict[int, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._dirty: set[int] = set()  # threads whose snapshot is out of date
        self._snapshotter: asyncio.Task[None] | None = None
        self._chronicler: asyncio.Task[None] | None = None
        self._rewrites: set[asyncio.Task] = set()
        self._folding: dict[int, asyncio.Task[None]] = {}  # thread -> its next cut being summarised ahead
        self._indexer: asyncio.Task[None] | None = None
        self._forgetting = asyncio.Lock()
        self._opted_out: set[int] = set()
        self._roots: dict[str, Thread] = {}  # scope key -> root thread, for hear (ids and places only)
        self._lock = InstanceLock(config.database_path)  # held only when opened exclusive
        self._closed = False
        self.shutdown_grace = 10.0  # seconds running memory updates get to finish at shutdown

    @classmethod
    async def open(cls, config: Config, llm: LLM | None = None, clock: Clock | None = None, *,
                   exclusive: bool = True, keep_runs: frozenset[str] = frozenset(),
                   store_clock: Callable[[], float] | None = None) -> Engine:
        """Open the store, choose the model, and sweep Stelis threads left active by a run that is gone.

        `exclusive` (the bot and the console): refuse a second process on the same database and
        repair what a crash left. Without it (snapshot commands) nothing is swept or repaired.
        `store_clock` stamps what is stored (default: `clock`); the console's demo clock moves
        only the scheduler's view, so /idle never writes made-up times.
        """
        clock = clock or Clock()
        lock = InstanceLock(config.database_path)
        if exclusive:
            try:
                lock.acquire()
            except (AlreadyRunning, OSError) as exc:
                raise StoreError(str(exc)) from None
        try:
            store = await Store.open(config.database_path, clock=store_clock or clock)
        except BaseException:
            lock.release()
            raise
        try:
            engine = cls(config, store, llm or make_llm(config), clock)
            engine._lock = lock
            if not exclusive:
                return engine
            # No model call before the bot is up: swept threads get their chronicles in the background.
            swept = await threads.sweep(store, None, engine.stelis, live_runs=set(keep_runs))
            engine._opted_out = await store.opted_out(engine.persona)
            if repaired := await channels.recount(store, clock()):
                log.info("%d conversation(s) had messages no memory version counted; they are due now", repaired)
        except BaseException:
            await store.close()
            lock.release()
            raise
        if swept:
            engine._chronicler = asyncio.create_task(threads.chronicle_swept(store, engine.llm, swept, engine.stelis))
        if config.context.recall:
            engine._indexer = asyncio.create_task(engine._start_recall())
        if config.snapshots.interval_seconds > 0:
            engine._snapshotter = asyncio.create_task(engine._snapshot_every(config.snapshots.interval_seconds))
        return engine

    async def start_memory(self) -> None:
        """Start the memory scheduler (front ends call this; tests drive the worker directly)."""
        self.scheduler = MemoryScheduler(self.memory, self.config.memory.scan_interval_seconds)
        await self.scheduler.start()

    async def close(self) -> None:
        """Stop the scheduler, write the snapshots still due, then close the model client and the database."""
        if self._closed:
            return
        self._closed = True
        try:
            if self.scheduler is not None:
                await self.scheduler.stop(self.shutdown_grace)
            await self.memory.drain(self.shutdown_grace)
            if self._rewrites:  # erasures in progress finish: they must not be left half done
                await asyncio.wait(self._rewrites, timeout=self.shutdown_grace)
            # Summaries prepared ahead are only a head start, and what is not indexed yet is at the next start.
            background = [t for t in (self._chronicler, self._indexer, *self._folding.values()) if t is not None]
            for task in (self._snapshotter, *background):
                if task is not None:
                    task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            await self.write_snapshots()
        except Exception:  # whatever failed, the model client and the database still close
            log.exception("shutdown: could not finish memory work or snapshots")
        finally:
            try:
                await self.llm.aclose()
            finally:
                await self.store.close()
                self._lock.release()

    # settings and memory

    async def settings_for(self, guild_id: int | None, channel_id: int | None) -> Config:
        """The config with the guild's, then the channel's, overrides applied (validated, cached)."""
        key = (guild_id, channel_id)
        if key not in self._settings_cache:
            overrides = {}
            if guild_id is not None:
                overrides.update(await self.store.settings("guild", guild_id))
            if channel_id is not None:
                overrides.update(await self.store.settings("channel", channel_id))
            self._settings_cache[key] = apply_overrides(self.config, overrides) if overrides else self.config
        return self._settings_cache[key]

    async def set_setting(self, scope: str, scope_id: int, key: str, value: object) -> object:
        """Store a per-guild or per-channel override after validating it; raises ConfigError.

        A text value is read as the key's declared type ("off" stays a word, "12" becomes a number),
        never as YAML. Returns the value as stored.
        """
        base = await self.settings_for(scope_id if scope == "guild" else None, None)
        typed = dotted_value(apply_overrides(base, {key: value}), key)
        await self.store.set_setting(scope, scope_id, key, typed)
        self._settings_cache.clear()
        return typed

    async def reset_setting(self, scope: str, scope_id: int, key: str) -> bool:
        removed = await self.store.delete_setting(scope, scope_id, key)
        self._settings_cache.clear()
        return removed

    async def _persona_for(self, root: Thread) -> Persona:
        persona = (await self.settings_for(root.guild_id, root.channel_id)).persona
        return Persona(persona.name, persona.card)

    async def memory_settings(self, ch: MemoryChannel | None) -> MemorySettings:
        config = await self.settings_for(ch.guild_id, ch.channel_id) if ch else self.config
        m = config.memory
        return MemorySettings(
            triggers=_triggers(config), history_count=config.short_term_history.max_history_count,
            short_term_tokens=m.short_term_tokens, long_term_tokens=m.long_term_tokens,
            chunk_tokens=config.stelis.chunk_tokens, retry_seconds=m.retry_seconds, tier=m.tier,
        )

    async def describe_channel(self, scope: Scope, *, name: str | None = None, public: bool | None = None) -> None:
        """What the front end knows: the channel's name and whether @everyone can read it."""
        ch = await self._memory_channel(scope)
        flags: dict = {}
        if name is not None:
            flags["name"] = name
        if public is not None:
            flags["public"] = int(public)
        if flags:
            await channels.set_flags(self.store, ch.thread_id, **flags)

    async def _memory_channel(self, scope: Scope) -> MemoryChannel:
        """The memory bookkeeping of a scope's conversation, created on first use."""
        return await channels.ensure_channel(self.store, await self.thread_for(scope))

    async def memory_view(self, scope: Scope) -> MemoryView:
        return await self._view(await self._memory_channel(scope))

    async def peek_memory(self, scope: Scope) -> MemoryView | None:
        """The memory of a conversation, or None if it has none: a read creates nothing."""
        root = await self.store.find_root(self.persona, scope)
        ch = await channels.channel(self.store, root.id) if root is not None else None
        return await self._view(ch) if ch is not None else None

    async def _view(self, ch: MemoryChannel) -> MemoryView:
        kind, scope_id = ch.scope
        config = await self.settings_for(ch.guild_id, ch.channel_id)
        short = await self.store.recent_records(self.persona, kind, scope_id, "short_term",
                                                config.short_term_history.max_history_count)
        long = await self.store.latest_record(self.persona, kind, scope_id, "long_term")
        pins = await channels.pins(self.store, self.persona, kind, scope_id)
        return MemoryView(ch, long, short, pins)

    async def memory_history(self, scope: Scope, type_: str = "short_term", limit: int = 25) -> list[MemoryRecord]:
        view = await self.peek_memory(scope)
        if view is None:
            return []
        kind, scope_id = view.channel.scope
        return await self.store.recent_records(self.persona, kind, scope_id, type_, limit)

    async def memory_pin(self, scope: Scope, fact: str, pinned: bool = True) -> bool:
        if not fact.strip():
            raise MemoryAdminError("a pinned fact cannot be empty")
        kind, scope_id = (await self.memory_view(scope)).channel.scope
        if pinned:
            return await channels.pin(self.store, self.persona, kind, scope_id, fact)
        return await channels.unpin(self.store, self.persona, kind, scope_id, fact)

    async def memory_edit(self, scope: Scope, content: str, *, from_version: int | None = None) -> MemoryRecord:
        """Replace the current short-term memory by a new version (history keeps the old one)."""
        if not content.strip():
            raise MemoryAdminError("the edited memory cannot be empty")
        view = await self.memory_view(scope)
        kind, scope_id = view.channel.scope
        base = await self._version(view, from_version) if from_version else (view.short_term or [None])[-1]
        return await self.store.add_record(
            self.persona, kind, scope_id, "short_term", content.strip(), base.first_seq if base else None,
            base.last_seq if base else None, {"edited_from": base.version if base else None},
        )

    async def memory_rollback(self, scope: Scope, version: int) -> MemoryRecord:
        """Make an earlier version current again, as a new version (nothing is deleted)."""
        view = await self.memory_view(scope)
        kind, scope_id = view.channel.scope
        old = await self._version(view, version)
        return await self.store.add_record(self.persona, kind, scope_id, "short_term", old.content, old.first_seq,
                                           old.last_seq, {"rolled_back_to": version})

    async def memory_regenerate(self, scope: Scope) -> Outcome:
        return await self.memory.run_channel((await self._memory_channel(scope)).thread_id, force=True)

    async def memory_pause(self, scope: Scope, paused: bool) -> None:
        await channels.set_flags(self.store, (await self._memory_channel(scope)).thread_id, paused=int(paused))

    async def memory_share(self, scope: Scope, shareable: bool | None) -> None:
        """Opt a channel in or out of sharing (None: follow its visibility)."""
        if scope.private and shareable:
            raise MemoryAdminError("a private thread's memory is never shared: only its members may read it")
        ch = await self._memory_channel(scope)
        await channels.set_flags(self.store, ch.thread_id, shareable=None if shareable is None else int(shareable))

    async def _version(self, view: MemoryView, version: int) -> MemoryRecord:
        kind, scope_id = view.channel.scope
        for record in await self.store.recent_records(self.persona, kind, scope_id, "short_term", 10_000):
            if record.version == version:
                return record
        raise MemoryAdminError(f"there is no short-term memory version {version} here")

    # snapshots

    @property
    def snapshot_dir(self) -> Path:
        return self.config.data_dir / "snapshots"

    async def export_snapshot(self, thread_id: int) -> dict:
        return await snapshots.export(self.store, self.assembler, thread_id)

    async def write_snapshots(self) -> list[Path]:
        """Snapshot every thread that changed since its last snapshot; a failure is logged, never fatal."""
        written = []
        for thread_id in sorted(self._dirty):
            path = self.snapshot_dir / f"thread-{thread_id}.json"
            try:
                snapshot = await self.export_snapshot(thread_id)
                await asyncio.to_thread(snapshots.write, path, snapshot)
            except (LLMError, LockedBufferTooLarge, ContextError, OSError) as exc:
                log.warning("snapshot of thread %d not written: %s", thread_id, exc)
                continue
            self._dirty.discard(thread_id)
            written.append(path)
        return written

    async def _snapshot_every(self, seconds: int) -> None:
        while True:
            await asyncio.sleep(seconds)
            await self.write_snapshots()

    @property
    def persona(self) -> str:
        return self.config.persona.name

    async def participants(self, thread_id: int, recent: int = 200) -> set[int]:
        """Who spoke among a thread's recent messages: the only people a reply may ping."""
        return {m.author_id for m in await self.store.tail(thread_id, recent)
                if m.author_id is not None and m.role == "user"}

    async def _root(self, scope: Scope) -> Thread:
        """A scope's root for hearing: its identity never changes, so it is looked up once per process."""
        found = self._roots.get(scope.key)
        if found is None:
            found = self._roots[scope.key] = await self.thread_for(scope)
        return found

    async def thread_for(self, scope: Scope) -> Thread:
        return await self.store.root_thread(self.persona, scope, self.config.stelis.default_window_ratio)

    async def new_run(self, scope: Scope, run_id: str | None = None) -> Run:
        """A run of the persona; a known `run_id` resumes the Stelis threads it left open."""
        root = (await self.thread_for(scope)).id
        if run_id is None:
            return Run(root_id=root)
        return Run(root_id=root, id=run_id, stack=[t.id for t in await self.store.active_threads_of_run(run_id)])

    async def hear(
        self, scope: Scope, content: str, *, author_name: str | None = None, author_id: int | None = None,
        external_id: int | None = None, role: Role = "user", thread_id: int | None = None,
    ) -> Message | None:
        """Remember a message in the scope's root thread, or in the given thread; duplicates stored once.

        Someone who opted out is not remembered at all: None.
        """
        if not self.remembers(author_id):
            return None
        thread = await (self.store.thread(thread_id) if thread_id is not None else self._root(scope))
        triggers = await self._counted(thread)
        due: list[float | None] = []

        async def note(db: aiosqlite.Connection, at: float) -> None:  # in the message's own transaction
            due.append(await channels.noting(db, thread, at, triggers))
            self.store.saw_conversation(thread.id)  # its memory row may be new: recall's visibility looks again

        message, created = await self.store.append(
            thread.id, NewMessage(role, content, author_id, author_name, external_id=external_id),
            then=note if triggers is not None else None,
        )
        self._dirty.add(thread.id)
        self._index_soon()
        if not created:
            log.debug("duplicate message %s ignored", external_id)
        elif due and self.scheduler is not None:
            self.scheduler.arm(thread.id, due[0])
        return message

    def _index_soon(self) -> None:
        """Index what was heard for recall shortly, in one batch with whatever else arrives meanwhile."""
        if (self._indexer is None or self._indexer.done()) and not self._closed:
            self._indexer = asyncio.create_task(self._index_after(INDEX_DELAY_SECONDS))

    async def _start_recall(self) -> None:
        """At start-up, in the background: index what the last run left, merge, count the newest words."""
        try:
            await self.store.index_messages()
            await self.store.merge_index()
            await self.assembler.frequencies.warm(self.store)
        except StoreError as exc:  # a search indexes and counts for itself
            log.warning("recall not prepared at start-up: %s", exc)
        if self.store.unindexed:  # heard meanwhile: this task was the indexer
            await self._index_after(INDEX_DELAY_SECONDS)

    async def _index_after(self, delay: float) -> None:
        try:
            while True:
                await asyncio.sleep(delay)
                await self.store.index_messages()
                await self.store.merge_index()  # in short steps: replies slip in between
                if not self.store.unindexed:
                    return
        except StoreError as exc:  # the next search tries again
            log.warning("recall's index not brought up to date: %s", exc)

    async def edit_message(self, external_id: int, content: str) -> Message | None:
        """A message edited in Discord: the next context shows the new text."""
        message = await self.store.edit_message(external_id, content)
        if message is not None:
            self._dirty.add(message.thread_id)
        return message

    async def delete_message(self, external_id: int) -> bool:
        """A message deleted in Discord is erased, and what was written from it is rewritten in the background."""
        purged = await self.store.purge(external_id=external_id)
        if purged:
            self._dirty.update(purged)
            task = asyncio.create_task(self._rewrite(purged))
            self._rewrites.add(task)
            task.add_done_callback(self._rewrites.discard)
        return bool(purged)

    async def forget_person(self, user_id: int, *, guild_id: int | None = None,
                            dm: Scope | None = None) -> forget.Rewritten:
        """Erase someone's messages in a server (or their DM) and rewrite all memory written from them."""
        thread_ids = await self.store.conversation_threads(self.persona, guild_id=guild_id,
                                                           scope_key=dm.key if dm else None)
        purged = await self.store.purge(author_id=user_id, thread_ids=thread_ids)
        self._dirty.update(purged)
        return await self._rewrite(purged)

    async def opt_out(self, user_id: int, out: bool = True) -> None:
        """From now on, this person's messages are (not) remembered at all."""
        await self.store.set_optout(self.persona, user_id, out)
        self._opted_out = await self.store.opted_out(self.persona)

    def remembers(self, user_id: int | None) -> bool:
        return user_id is None or user_id not in self._opted_out

    async def _rewrite(self, purged: dict[int, set[int]]) -> forget.Rewritten:
        async with self._forgetting:  # one rewrite at a time: they touch the same versions
            done = await forget.rewrite(self.store, self.llm, purged, await self.memory_settings(None), self.stelis)
        await self.write_snapshots()  # snapshots on disk hold messages too
        return done

    async def last_seen(self, thread_id: int) -> int | None:
        """The newest remembered Discord message id in a thread (backfill starts after it)."""
        return await self.store.last_external_id(thread_id)

    async def reply_policy(self, guild_id: int | None, channel_id: int | None) -> str:
        return (await self.settings_for(guild_id, channel_id)).discord.reply_policy

    async def _counted(self, thread: Thread) -> Triggers | None:
        """The triggers a message in this thread counts towards; None when it does not count."""
        if not (thread.is_root or thread.discord_thread_id is not None):
            return None  # internal Stelis threads are remembered through their chronicles
        config = await self.settings_for(thread.guild_id, thread.channel_id)
        return _triggers(config) if config.short_term_history.enabled else None

    async def reply(self, thread_id: int, on_text: TextSink | None = None) -> Message:
        """Answer what the thread holds now; store and return the reply. Raises ReplyFailed."""
        async with self._reply_locks[thread_id]:
            try:
                assembly = await self.assembler.assemble(thread_id)
                if not assembly.request.turns:
                    raise ReplyFailed("There is nothing to reply to yet.")
                result = await self.llm.complete(assembly.request, on_text)
            except LLMError as exc:
                log.warning("reply failed in thread %d: %s", thread_id, exc.notice)
                raise ReplyFailed(exc.notice) from exc
            except (LockedBufferTooLarge, ContextError) as exc:
                raise ReplyFailed(f"The conversation does not fit the model's context: {exc}") from exc
            if not result.text.strip():
                raise ReplyFailed("The model returned an empty reply.")
            message, _ = await self.store.append(
                thread_id, NewMessage("assistant", result.text, author_name=self.persona)
            )
            self._dirty.add(thread_id)
        if assembly.fold_soon:
            self._fold_ahead(thread_id)
        return message

    def _fold_ahead(self, thread_id: int) -> None:
        """Summarise the window's next cut in the background, so the reply that cuts waits on no model call."""
        if thread_id in self._folding or self._closed:
            return
        task = asyncio.create_task(self._prepare_fold(thread_id))
        self._folding[thread_id] = task
        task.add_done_callback(lambda _: self._folding.pop(thread_id, None))

    async def _prepare_fold(self, thread_id: int) -> None:
        try:
            await self.assembler.prepare_fold(thread_id)
        except LLMError as exc:  # the cut will summarise inline instead, and retry the model then
            log.warning("could not summarise ahead in thread %d: %s", thread_id, exc.notice)
        except (StoreError, LockedBufferTooLarge, ContextError) as exc:
            log.warning("could not plan the next cut of thread %d: %s", thread_id, exc)

    async def settle(self) -> None:
        """Do the background work a pause in the talk allows: summaries prepared ahead, recall's index."""
        if self._indexer is not None and not self._indexer.done():
            self._indexer.cancel()
            await asyncio.gather(self._indexer, return_exceptions=True)
            await self.store.index_messages()
            await self.store.merge_index()
        await asyncio.gather(*self._folding.values(), return_exceptions=True)

    async def context(self, thread_id: int) -> Assembly:
        """The next request for a thread as it stands (what /context shows); nothing is stored or cut."""
        return await self.assembler.assemble(thread_id, persist=False)

    async def preview(self, scope: Scope, content: str, *, author_name: str | None = None,
                      author_id: int | None = None, thread_id: int | None = None) -> Assembly:
        """The request a message would produce, without storing it or persisting a window cut."""
        thread = await (self.store.thread(thread_id) if thread_id is not None else self.thread_for(scope))
        return await self.assembler.assemble(thread.id, incoming=NewMessage("user", content, author_id, author_name),
                                             persist=False)

    async def recall(self, scope: Scope, query: str, limit: int = 10) -> list[recall.Hit]:
        """What recall finds for a query in a conversation, under the same visibility rules as replies."""
        root = await self.thread_for(scope)
        seen = await self.assembler.visibilities.of(self.store, root)
        return await recall.search(self.store, seen, query, recall.Shown(), limit=limit,
                                   frequencies=self.assembler.frequencies)

    # Stelis threads

    async def start_thread(self, run: Run, label: str, chronicle_prompt: str | None = None) -> Thread:
        return await threads.start(self.store, run, label, self.stelis, chronicle_prompt=chronicle_prompt)

    async def end_thread(self, run: Run, generate_chronicle: bool = True) -> Thread:
        return await threads.end(self.store, self.llm, run, self.stelis, generate_chronicle=generate_chronicle)

    async def abort_thread(self, run: Run) -> Thread:
        return await threads.abort(self.store, self.llm, run, self.stelis)

    async def tree(self, root_id: int) -> list[TreeRow]:
        """The Stelis tree under a root, depth first, with each thread's window at the full context."""
        rows: list[TreeRow] = []

        async def visit(thread: Thread, ratios: list[float]) -> None:
            size = window_size(self.config.llm.context_tokens, ratios)
            parent = window_size(self.config.llm.context_tokens, ratios[:-1]) if ratios else 0
            rows.append(TreeRow(thread, size, protected_size(parent, thread.window_ratio) if ratios else 0))
            for child in await self.store.children(thread.id):
                await visit(child, [*ratios, child.window_ratio])

        await visit(await self.store.thread(root_id), [])
        return rows


def _triggers(config: Config) -> Triggers:
    history = config.short_term_history
    return Triggers(idle_seconds=history.conversation_idle_seconds, threshold=history.message_threshold)
