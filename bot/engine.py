"""The persona runtime front ends call: one facade composing the services in bot/services/.

Each public method is one front-end action and one line into the service that owns it; the
composition, start-up repair and shutdown order live here and nowhere else.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from bot.character_card import Character
from bot.clock import Clock
from bot.config import Config, Where
from bot.fitting import FittedLLM, fit_to_server
from bot.identify import IdentifyGate
from bot.instance_lock import AlreadyRunning, InstanceLock
from bot.memory_scheduler import MemoryScheduler, MemoryWorker
from bot.metering import MeteredLLM
from bot.owner import HEARTBEAT_SECONDS, process_owner
from bot.playbooks.checker import Problem
from bot.playbooks.model import Playbook
from bot.playbooks.runtime import Progress, Runner, RunResult
from bot.playbooks.state import PlaybookError
from bot.providers import make_llm
from bot.pulse_scheduler import PulseScheduler
from bot.services.archive import Archive
from bot.services.autonomy import Autonomy
from bot.services.branches import DiscordThreadBranches
from bot.services.conversation import Conversations, ReplyFailed, ReplyUnsaved
from bot.services.forgetting import Forgetting
from bot.services.memory_admin import MemoryAdmin, MemoryAdminError
from bot.services.playbooks import Playbooks, RunView
from bot.services.pulse import AutonomyStatus, PulseOutcome, Pulses
from bot.services.settings import SHARED_MAX_AGE, Settings
from bot.services.snapshots import Snapshots
from bot.services.social import Socials
from bot.services.stelis import StelisThreads
from bot.services.tasks import Tasks
from bot.services.toolbox import ToolBox
from bot.services.tooling import EngineTools
from bot.services.views import BranchDetail, MemoryView, SettingsView, ThreadDetail, TreeRow
from bot.tools import CONVERSATION_TOOLS, REGISTRY, FrontEnd, definitions
from memory import forget, recall, threads
from memory.backends import open_store
from memory.budget import Budget
from memory.context import Assembler, Assembly, ModelTraits, Persona
from memory.database_url import is_shared
from memory.llm import LLM, TextSink
from memory.records import (
    AutonomyEntry,
    Branch,
    BranchKind,
    BranchStatus,
    MemoryRecord,
    Message,
    Role,
    Scope,
    Task,
    TaskStatus,
    Thread,
)
from memory.short_term import Outcome
from memory.store import Store, StoreError
from memory.threads import Run

__all__ = ["AutonomyStatus", "Engine", "MemoryAdminError", "MemoryView", "PlaybookError", "PulseOutcome",
           "ReplyFailed", "ReplyUnsaved", "RunView", "ThreadDetail", "TreeRow", "Where"]

log = logging.getLogger(__name__)


def _traits(config: Config, llm: LLM) -> ModelTraits:
    """What the model's provider says it does (tools, images, a cache of its answers), and what config allows."""
    tools = config.llm.reply_tools and getattr(llm, "supports_tools", False)
    return ModelTraits(tools=definitions(REGISTRY, CONVERSATION_TOOLS) if tools else (),
                       tools_work=lambda: bool(getattr(llm, "supports_tools", False)),
                       images=bool(getattr(llm, "supports_images", False)),
                       keep_tails=bool(getattr(llm, "caches_answers", False)))


class Engine:
    def __init__(self, config: Config, store: Store, llm: LLM, clock: Clock | None = None):
        self.config = config
        self.store = store  # for tests and tools; front ends never touch it (tests/test_layering.py)
        # Every request fits the model's context (a server that counts more than our estimate: replies are
        # planned smaller, _plan_for); a pulse counts what it spends, whichever service calls.
        self.fitted = FittedLLM(llm, config.llm.context_tokens, on_planned=self._plan_for)
        self.llm = llm = MeteredLLM(self.fitted)
        self.clock = clock or Clock()  # the scheduler's view of time: the console's /idle moves it, stored times never
        persona = config.persona.name
        self.settings = Settings(config, store, SHARED_MAX_AGE if is_shared(config.database_target) else None)
        self.stelis = StelisThreads(store, llm, self.settings, persona, config.llm.context_tokens)
        self.assembler = Assembler(
            store, llm, Persona(persona, config.persona.card),
            Budget(config.llm.context_tokens, config.llm.max_output_tokens, config.context),
            config.context, config.stelis, clock=store.clock, traits=_traits(config, llm),
            recall_enabled=config.context.recall, visibilities=self.stelis.visibilities,
            conversation_for=self.settings.conversation,
        )
        self.memory = MemoryWorker(store, llm, self.settings.memory, self.clock, config.memory.concurrency,
                                   config.memory.lease_seconds)
        self.scheduler: MemoryScheduler | None = None
        self.snapshots = Snapshots(store, self.assembler, config.data_dir / "snapshots")
        self.forgetting = Forgetting(store, llm, self.settings, config.stelis, self.snapshots, persona)
        self.archive = Archive(store, self.assembler, self.stelis, self.snapshots, persona)
        self.admin = MemoryAdmin(store, self.settings, self.stelis, self.memory, persona)
        self.branches = DiscordThreadBranches(store, llm, self.stelis, persona)
        self.tasks = Tasks(store, llm, self.stelis, persona)
        self.autonomy = Autonomy(store, self.settings, self.stelis, self.tasks, persona, self.clock)
        self.tools = EngineTools(self.archive, self.stelis, self.admin, self.branches, self.tasks, self.autonomy,
                                 store.clock, persona)
        self.socials = Socials(store, self.branches, self.settings, persona)
        toolbox = ToolBox(REGISTRY, self.tools)
        self.conversations = Conversations(store, llm, self.assembler, self.settings, self.stelis, self.forgetting,
                                           self.snapshots, toolbox, persona,
                                           describes_images=self.assembler.images_enabled)
        runner = Runner(library={}, toolbox=toolbox, store=store, llm=llm, assembler=self.assembler,
                        stelis_at=self.stelis.settings_at, persona=persona,
                        max_subagent_depth=config.playbooks.subagent_depth)
        self.playbooks = Playbooks(store, runner, self.stelis, REGISTRY, config.playbooks.folder,
                                   config.stelis.max_depth, persona)
        self.playbooks.load()
        tools = self.tools
        self.pulses = Pulses(store, self.autonomy, self.stelis, self.tasks, self.branches, self.playbooks,
                             lambda: tools.front_end, persona, self.clock)
        self._snapshotter: asyncio.Task[None] | None = None
        self._chronicler: asyncio.Task[None] | None = None
        self._heart: asyncio.Task[None] | None = None
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
        shared = is_shared(config.database_target)  # PostgreSQL: other processes work on it at the same time
        lock = InstanceLock(config.database_path)
        if exclusive and not shared:
            try:
                lock.acquire()
            except (AlreadyRunning, OSError) as exc:
                raise StoreError(str(exc)) from None
        try:
            store = await open_store(config.database_target, clock=store_clock or clock,
                                     pool_size=config.database.pool_size)
        except BaseException:
            lock.release()
            raise
        try:
            store.owner = process_owner()
            llm = llm or make_llm(config)
            config, ratio = await fit_to_server(config, llm)
            engine = cls(config, store, llm, clock)
            if ratio is not None:
                engine.fitted.learn(ratio)
            engine._lock = lock
            if not exclusive:
                return engine
            # A thread is swept once its process stopped beating; alone on a file, every other process is gone.
            now = store.clock()
            stale_before = now - HEARTBEAT_SECONDS * 3 if shared else now + 1
            await store.beat(store.owner)
            # No model call before the bot is up: swept threads get their chronicles in the background.
            swept = await threads.sweep(store, None, config.stelis, live_runs=set(keep_runs),
                                        stale_before=stale_before)
            await engine.forgetting.load()
            if dropped := await store.clear_claims():  # a crash left them (shared: only those run out)
                log.info("%d memory update(s) a stopped process had claimed are free again", dropped)
            if repaired := await store.recount_pending(clock()):
                log.info("%d conversation(s) had messages no memory version counted; they are due now", repaired)
        except BaseException:
            await store.close()
            lock.release()
            raise
        if swept:
            engine._chronicler = asyncio.create_task(threads.chronicle_swept(store, engine.llm, swept, config.stelis))
        if config.context.recall:
            engine.conversations.start_recall()
        engine._heart = asyncio.create_task(engine._beat())
        if config.snapshots.interval_seconds > 0:
            engine._snapshotter = asyncio.create_task(engine.snapshots.every(config.snapshots.interval_seconds))
        return engine

    def _plan_for(self, ratio: float) -> None:
        """The server counts `ratio` tokens for each of ours: requests are planned with that much to spare."""
        self.assembler.budget = replace(self.assembler.budget, safety=1 - 1 / ratio)
        log.info("the model's server counts %.2f tokens for each estimated one: requests are planned to fit", ratio)

    def database_usage(self) -> tuple[int, int]:
        """Database connections in use and the pool's size (metrics)."""
        return self.store.pool_usage()

    async def pace_identify(self, shard_id: int) -> bool:
        """On a database other processes share, wait for this shard's turn to log in to Discord (one login per
        five seconds across them all); False when the database is this process's alone (discord.py paces)."""
        if not is_shared(self.config.database_target):
            return False
        assert self.store.owner is not None
        await IdentifyGate(self.store, self.store.owner).wait(shard_id)
        return True

    async def _beat(self) -> None:
        """Say this process is alive, so no other process sweeps the Stelis threads it has open."""
        assert self.store.owner is not None
        while True:
            await asyncio.sleep(HEARTBEAT_SECONDS)
            try:
                await self.store.beat(self.store.owner)
            except StoreError as exc:
                log.warning("heartbeat not written: %s", exc)

    async def start_memory(self) -> None:
        """Start the memory scheduler once (front ends call this; tests drive the worker directly)."""
        if self.scheduler is not None:
            return
        self.scheduler = MemoryScheduler(self.memory, self.config.memory.scan_interval_seconds)
        self.conversations.scheduler = self.scheduler
        await self.scheduler.start()

    async def start_pulses(self) -> None:
        """Start the pulse timers once; servers are armed as their front end finds them (`arm_pulse`)."""
        if self.pulses.timers is None:
            self.pulses.timers = PulseScheduler(self.pulses.pulse)
            self.pulses.timers.start()

    async def close(self) -> None:
        """Stop the scheduler, write the snapshots still due, then close the model client and the database."""
        if self._closed:
            return
        self._closed = self.conversations.closed = True
        try:
            if self.pulses.timers is not None:
                self.pulses.timers.stop()
            await self.pulses.stop()  # a running pulse ends as if interrupted: its session suspended
            if self.scheduler is not None:
                await self.scheduler.stop(self.shutdown_grace)
            await self.memory.drain(self.shutdown_grace)
            if self.forgetting.rewrites:  # erasures in progress finish: they must not be left half done
                await asyncio.wait(self.forgetting.rewrites, timeout=self.shutdown_grace)
            # Summaries prepared ahead are only a head start, and what is not indexed yet is at the next start.
            background = [t for t in (self._chronicler, self.conversations.indexer,
                                      *self.conversations.folding.values(), *self.conversations.describing,
                                      *self.conversations.saving.values())
                          if t is not None]
            if lost := self.conversations.unsaved():  # said, never stored: the log is what is left of them
                log.error("shutdown: %d reply(ies) the database refused were never stored", lost)
            for task in (self._snapshotter, self._heart, *background):
                if task is not None:
                    task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            await self.snapshots.write_due()
        except Exception:  # whatever failed, the model client and the database still close
            log.exception("shutdown: could not finish memory work or snapshots")
        finally:
            try:
                await self.llm.aclose()
            finally:
                await self.store.close()
                self._lock.release()

    @property
    def persona(self) -> str:
        return self.config.persona.name

    def attach(self, front_end: FrontEnd) -> None:
        """The front end the persona acts through on its own (post_message, open_thread, a playbook's speak)."""
        self.tools.front_end = front_end
        self.settings.strangers = front_end.strangers

    def stored_time(self) -> float:
        """Now, as stored times are stamped (the console's /idle moves only the scheduler's clock)."""
        return self.store.clock()

    @property
    def model_name(self) -> str:
        return self.llm.name

    # settings

    async def settings_for(self, guild_id: int | None, channel_id: int | None) -> Config:
        return await self.settings.effective(guild_id, channel_id)

    async def settings_shown(self, guild_id: int | None, channel_id: int) -> SettingsView:
        return await self.settings.shown(guild_id, channel_id)

    async def import_character(self, where: Where, scope_id: int, data: bytes, filename: str = "the file",
                               guild_id: int | None = None) -> Character:
        return await self.settings.import_character(where, scope_id, data, filename, guild_id)

    async def set_setting(self, where: Where, scope_id: int, key: str, value: object,
                          guild_id: int | None = None) -> object:
        """An override for a server, or a channel of `guild_id` (values naming things are checked there)."""
        return await self.settings.set(where, scope_id, key, value, guild_id)

    async def reset_setting(self, where: Where, scope_id: int, key: str) -> bool:
        return await self.settings.reset(where, scope_id, key)

    async def reply_policy(self, guild_id: int | None, channel_id: int | None) -> str:
        return (await self.settings.effective(guild_id, channel_id)).discord.reply_policy

    # conversation

    async def thread_for(self, scope: Scope) -> Thread:
        return await self.stelis.root(scope)

    async def hear(self, scope: Scope, content: str, *, author_name: str | None = None, author_id: int | None = None,
                   external_id: int | None = None, role: Role = "user", thread_id: int | None = None,
                   images: list[dict[str, Any]] | None = None) -> Message | None:
        return await self.conversations.hear(scope, content, author_name=author_name, author_id=author_id,
                                             external_id=external_id, role=role, thread_id=thread_id, images=images)

    async def reply(self, thread_id: int, on_text: TextSink | None = None) -> Message:
        return await self.conversations.reply(thread_id, on_text)

    async def settle(self) -> None:
        await self.conversations.settle()

    async def context(self, thread_id: int, *, calls: bool = True) -> Assembly:
        """The thread's next request as it stands (`calls=False`: what /context shows, with no model call)."""
        return await self.conversations.context(thread_id, calls=calls)

    async def preview(self, scope: Scope, content: str, *, author_name: str | None = None,
                      author_id: int | None = None, thread_id: int | None = None) -> Assembly:
        return await self.conversations.preview(scope, content, author_name=author_name, author_id=author_id,
                                                thread_id=thread_id)

    async def recall(self, scope: Scope, query: str, limit: int = 10) -> list[recall.Hit]:
        return await self.archive.recall(scope, query, limit)

    async def participants(self, thread_id: int) -> set[int]:
        return await self.conversations.participants(thread_id)

    async def last_seen(self, thread_id: int) -> int | None:
        return await self.conversations.last_seen(thread_id)

    async def channel_roots(self) -> list[Thread]:
        return await self.conversations.channel_roots()

    async def last_message(self, thread_id: int) -> Message | None:
        return await self.conversations.last_message(thread_id)

    async def message_count(self, thread_id: int) -> int:
        return await self.conversations.message_count(thread_id)

    # forget-me

    async def edit_message(self, external_id: int, content: str) -> Message | None:
        return await self.forgetting.edit_message(external_id, content)

    async def delete_message(self, external_id: int) -> bool:
        return await self.forgetting.delete_message(external_id)

    async def forget_person(self, user_id: int, *, guild_id: int | None = None,
                            dm: Scope | None = None) -> forget.Rewritten:
        return await self.forgetting.forget_person(user_id, guild_id=guild_id, dm=dm)

    async def opt_out(self, user_id: int, out: bool = True) -> None:
        await self.forgetting.opt_out(user_id, out)

    def remembers(self, user_id: int | None) -> bool:
        return self.forgetting.remembers(user_id)

    # memory administration

    async def describe_channel(self, scope: Scope, *, name: str | None = None, public: bool | None = None) -> None:
        await self.admin.describe(scope, name=name, public=public)

    async def memory_view(self, scope: Scope) -> MemoryView:
        return await self.admin.view(scope)

    async def peek_memory(self, scope: Scope) -> MemoryView | None:
        return await self.admin.peek(scope)

    async def memory_history(self, scope: Scope, type_: str = "short_term", limit: int = 25) -> list[MemoryRecord]:
        return await self.admin.history(scope, type_, limit)

    async def memory_pin(self, scope: Scope, fact: str, pinned: bool = True) -> bool:
        return await self.admin.pin(scope, fact, pinned)

    async def memory_edit(self, scope: Scope, content: str, *, from_version: int | None = None) -> MemoryRecord:
        return await self.admin.edit(scope, content, from_version=from_version)

    async def memory_rollback(self, scope: Scope, version: int) -> MemoryRecord:
        return await self.admin.rollback(scope, version)

    async def memory_regenerate(self, scope: Scope) -> Outcome:
        return await self.admin.regenerate(scope)

    async def memory_pause(self, scope: Scope, paused: bool) -> bool:
        return await self.admin.pause(scope, paused)

    async def memory_share(self, scope: Scope, shareable: bool | None) -> None:
        await self.admin.share(scope, shareable)

    async def run_due_memory(self) -> list[Outcome]:
        """Every conversation whose memory is due, updated now (the console's /idle)."""
        return await self.memory.run_due()

    # snapshots

    @property
    def snapshot_dir(self) -> Path:
        return self.snapshots.directory

    async def export_snapshot(self, thread_id: int) -> dict[str, Any]:
        return await self.snapshots.export(thread_id)

    async def write_snapshots(self) -> list[Path]:
        return await self.snapshots.write_due()

    async def restore_snapshot(self, path: Path) -> Thread:
        return await self.snapshots.restore(path)

    # Stelis threads and branches

    async def new_run(self, scope: Scope, run_id: str | None = None) -> Run:
        return await self.stelis.new_run(scope, run_id)

    async def start_thread(self, run: Run, label: str, chronicle_prompt: str | None = None) -> Thread:
        return await self.stelis.start(run, label, chronicle_prompt)

    async def end_thread(self, run: Run, generate_chronicle: bool = True) -> Thread:
        return await self.stelis.end(run, generate_chronicle)

    async def abort_thread(self, run: Run) -> Thread:
        return await self.stelis.abort(run)

    async def tree(self, root_id: int) -> list[TreeRow]:
        return await self.stelis.tree(root_id)

    async def thread_detail(self, scope: Scope, thread_id: int) -> ThreadDetail | None:
        return await self.stelis.detail(scope, thread_id)

    async def branch_session(self, parent: Scope, discord_thread_id: int, label: str) -> Thread:
        return await self.branches.session(parent, discord_thread_id, label)

    async def branch_current_session(self, discord_thread_id: int) -> Thread | None:
        return await self.branches.current_session(discord_thread_id)

    async def discord_threads_seen(self) -> list[tuple[int, int | None]]:
        return await self.branches.discord_threads_seen()

    async def spoke_in_discord_thread(self, discord_thread_id: int) -> bool:
        return await self.branches.spoken_in(discord_thread_id)

    async def branch_archived(self, discord_thread_id: int) -> Thread | None:
        return await self.branches.archive(discord_thread_id)

    async def branch_deleted(self, discord_thread_id: int) -> Thread | None:
        return await self.branches.delete(discord_thread_id)

    async def branch_renamed(self, discord_thread_id: int, label: str) -> None:
        await self.branches.rename(discord_thread_id, label)

    async def branches_of(self, scope: Scope, status: BranchStatus | None = None,
                          kind: BranchKind | None = None) -> list[Branch]:
        return await self.branches.of(scope, status, kind)

    async def branch_detail(self, scope: Scope, branch_id: str) -> BranchDetail | None:
        return await self.branches.detail(scope, branch_id)

    # tasks and branches of activity (seed 001)

    async def tasks_of(self, scope: Scope) -> list[Task]:
        return await self.tasks.of(scope)

    async def task(self, scope: Scope, task_id: int) -> Task:
        return await self.tasks.get(scope, task_id)

    async def create_task(self, scope: Scope, title: str, goal: str, steps: list[str]) -> Task:
        return await self.tasks.create(scope, title, goal, steps)

    async def close_task(self, scope: Scope, task_id: int, status: TaskStatus) -> Task:
        return await self.tasks.close(scope, task_id, status)

    async def create_branch(self, scope: Scope, label: str, brief_state: str | None = None) -> Branch:
        """A free branch of this conversation, suspended until a pulse (or a resume) opens its session."""
        return await self.branches.create(scope, "free", label, brief_state)

    async def set_branch_status(self, scope: Scope, branch_id: str, status: BranchStatus) -> Branch:
        """Suspend (the session ends with its chronicle), resume (a new session from the last) or complete."""
        return await self.branches.update(scope, branch_id, brief_state=None, status=status)

    # the autonomous pulse

    async def autonomy_status(self, scope: Scope) -> AutonomyStatus:
        return await self.pulses.status(scope)

    async def autonomy_log(self, scope: Scope, limit: int = 20) -> list[AutonomyEntry]:
        return await self.autonomy.log(scope, limit)

    async def set_autonomy(self, scope: Scope, key: str, value: object) -> object:
        """Change a server's autonomy setting (`enabled`, `home_channel`, `interval_minutes`, ...)."""
        typed = await self.autonomy.set(scope, key, value)
        await self.pulses.arm(scope)
        return typed

    async def arm_pulse(self, scope: Scope) -> None:
        await self.pulses.arm(scope)

    def next_pulse(self, scope: Scope) -> float | None:
        return self.pulses.next_pulse(scope)

    async def pulse_now(self, scope: Scope) -> PulseOutcome:
        """A pulse now, whatever the switch, timer and quiet say (the daily budget still holds)."""
        return await self.pulses.pulse(scope, force=True)

    async def pulse_if_due(self, scope: Scope) -> PulseOutcome | None:
        """A pulse if autonomy is on and an interval has passed (the console's /idle)."""
        return await self.pulses.pulse(scope) if await self.autonomy.due(scope) else None

    async def person_spoke(self, scope: Scope) -> bool:
        """A person spoke: the server's running pulse stops (True) and this conversation's exchanges with other
        personas end, each session suspended with a chronicle before the reply is written."""
        await self.socials.end_all(scope)
        return await self.pulses.interrupt(scope)

    # social branches: exchanges with other personas

    async def prepare_socials(self, scope: Scope, partners: dict[int, str]) -> list[Branch]:
        return await self.socials.prepare(scope, partners)

    async def social_session(self, scope: Scope, partner_id: int, partner_name: str) -> Thread:
        return await self.socials.session(scope, partner_id, partner_name)

    async def answer_turn(self, scope: Scope, partner_id: int, session_id: int,
                          answer: Callable[[], Awaitable[object]]) -> bool:
        return await self.socials.answer_turn(scope, partner_id, session_id, answer)

    async def end_social(self, scope: Scope, partner_id: int) -> Branch | None:
        return await self.socials.end(scope, partner_id)

    # playbooks

    def playbook_library(self) -> Mapping[str, Playbook]:
        return self.playbooks.library

    def playbook_problems(self, path: Path | None = None) -> list[Problem]:
        """The check of one file, or what kept playbooks out of the library at load."""
        return self.playbooks.check(path) if path is not None else list(self.playbooks.problems)

    async def run_playbook(self, scope: Scope, name: str, args: dict[str, Any] | str, *, run_id: str | None = None,
                           progress: Progress | None = None) -> RunResult:
        return await self.playbooks.run(scope, name, args, run_id=run_id, progress=progress)

    async def playbook_runs(self, scope: Scope, limit: int = 10) -> list[RunView]:
        return await self.playbooks.runs(scope, limit)
