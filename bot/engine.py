"""The persona runtime: the services of bot/services/ built once, by constructor injection, and held as attributes.

Front ends call the services directly (`engine.conversations.hear`, `engine.admin.edit`, ...); the store, the
assembler and the model stay inside. The composition, start-up repair and shutdown order live here alone.
"""

from __future__ import annotations

import asyncio
import logging

from bot.clock import Clock
from bot.config import Config, Where
from bot.fitting import FittedLLM, fit_to_server
from bot.identify import IdentifyGate
from bot.instance_lock import AlreadyRunning, InstanceLock
from bot.memory_scheduler import MemoryScheduler, MemoryWorker
from bot.metering import MeteredLLM
from bot.owner import HEARTBEAT_SECONDS, process_owner
from bot.playbooks.runtime import Runner
from bot.playbooks.state import PlaybookError
from bot.providers import make_llm
from bot.services.archive import Archive
from bot.services.arrivals import Arrival, Arrivals
from bot.services.autonomy import Autonomy
from bot.services.branches import DiscordThreadBranches
from bot.services.conversation import Conversations, ReplyFailed, ReplyUnsaved
from bot.services.effective_settings import SHARED_MAX_AGE, EffectiveSettings
from bot.services.forgetting import Forgetting
from bot.services.memory_admin import MemoryAdmin, MemoryAdminError
from bot.services.playbooks import Playbooks, RunView
from bot.services.pulse import AutonomyStatus, PulseOutcome, Pulses
from bot.services.snapshots import Snapshots
from bot.services.social import Socials
from bot.services.spending import Spending
from bot.services.stelis import StelisThreads
from bot.services.tasks import Tasks
from bot.services.tool_calls import EngineTools, ToolBox
from bot.services.views import MemoryView, ThreadDetail, TreeRow
from bot.tools import CONVERSATION_TOOLS, REGISTRY, FrontEnd, definitions
from memory import threads
from memory.backends import open_store
from memory.budget import Budget
from memory.context import Assembler, ModelTraits, Persona
from memory.database_url import is_shared
from memory.llm import LLM
from memory.store import Store, StoreError

__all__ = ["Arrival", "AutonomyStatus", "Engine", "MemoryAdminError", "MemoryView", "PlaybookError", "PulseOutcome",
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
        self.spending = Spending(store, config.persona.name, config.llm.prices, store.clock)
        self.llm = llm = MeteredLLM(self.fitted, on_spent=self.spending.record)
        self.clock = clock or Clock()  # what is stored and every schedule read it (the console's /idle moves it)
        persona = config.persona.name
        self.settings = EffectiveSettings(config, store, SHARED_MAX_AGE if is_shared(config.database_target) else None)
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
        self.scheduler = MemoryScheduler(self.memory, config.memory.scan_interval_seconds)
        self.snapshots = Snapshots(store, self.assembler, config.data_dir / "snapshots")
        self.forgetting = Forgetting(store, llm, self.settings, config.stelis, self.snapshots, persona,
                                     self.memory.owner)
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
                                           self.snapshots, toolbox, self.scheduler, persona,
                                           describes_images=self.assembler.images_enabled)
        runner = Runner(library={}, toolbox=toolbox, store=store, llm=llm, assembler=self.assembler,
                        stelis_at=self.stelis.settings_at, persona=persona,
                        max_subagent_depth=config.playbooks.subagent_depth)
        self.playbooks = Playbooks(store, runner, self.stelis, REGISTRY, config.playbooks.folder,
                                   config.stelis.max_depth, persona)
        self.playbooks.load()
        tools = self.tools
        self.pulses = Pulses(store, self.autonomy, self.stelis, self.tasks, self.branches, self.socials, self.playbooks,
                             lambda: tools.front_end, persona, self.clock)
        self.arrivals = Arrivals(self.conversations, self.socials, self.pulses)
        self._snapshotter: asyncio.Task[None] | None = None
        self._chronicler: asyncio.Task[None] | None = None
        self._calibrator: asyncio.Task[None] | None = None
        self._heart: asyncio.Task[None] | None = None
        self._lock = InstanceLock(config.database_path)  # held only when opened exclusive
        self._closed = False
        self.shutdown_grace = 10.0  # seconds running memory updates get to finish at shutdown

    @classmethod
    async def open(cls, config: Config, llm: LLM | None = None, clock: Clock | None = None, *,
                   exclusive: bool = True, keep_runs: frozenset[str] = frozenset()) -> Engine:
        """Open the store, choose the model, and sweep Stelis threads left active by a run that is gone.

        `exclusive` (the bot and the console): refuse a second process on the same database and
        repair what a crash left. Without it (snapshot commands) nothing is swept or repaired.
        `clock` stamps what is stored and drives every schedule (the console's /idle moves it).
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
            store = await open_store(config.database_target, clock=clock,
                                     pool_size=config.database.pool_size)
        except BaseException:
            lock.release()
            raise
        try:
            store.owner = process_owner()
            llm = llm or make_llm(config)
            # A server that says its context is asked before anything is planned; one that says only how it counts
            # tokens is asked meanwhile (the first request is planned with room to spare, and its answer counts too).
            waits = getattr(llm, "discovery_sets_context", True)
            config, ratio = await fit_to_server(config, llm) if waits else (config, None)
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
            erased = await store.erasures()  # a forget-me whose rewrite was cut short: done again below
            if dropped := await store.clear_claims():  # a crash left them (shared: only those run out)
                log.info("%d memory update(s) a stopped process had claimed are free again", dropped)
        except BaseException:
            await store.close()
            lock.release()
            raise
        if not waits:
            engine._calibrator = asyncio.create_task(engine._calibrate(llm))
        if swept:
            engine._chronicler = asyncio.create_task(threads.chronicle_swept(store, engine.llm, swept, config.stelis))
        if erased:
            engine.forgetting.resume(erased)
        if config.context.recall:
            engine.conversations.start_recall()
        engine._heart = asyncio.create_task(engine._beat())
        if config.snapshots.interval_seconds > 0:
            engine._snapshotter = asyncio.create_task(engine.snapshots.every(config.snapshots.interval_seconds))
        return engine

    async def _calibrate(self, llm: LLM) -> None:
        """How the model's server counts tokens against our estimate, asked after start-up."""
        try:
            _, ratio = await fit_to_server(self.config, llm)
        except Exception:  # the first answers' usage counts as well: replies go on planned with room to spare
            log.exception("the model's server could not be asked how it counts tokens")
            return
        if ratio is not None:
            self.fitted.learn(ratio)

    def _plan_for(self, ratio: float) -> None:
        """The server counts `ratio` tokens for each of ours: requests are planned with that much to spare."""
        self.assembler.keep_spare(1 - 1 / ratio)
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
        if not self.scheduler.running:
            await self.scheduler.start()

    async def start_pulses(self) -> None:
        """Start the pulse timers once; servers are armed as their front end finds them (`pulses.arm`)."""
        self.pulses.timers.start()

    async def close(self) -> None:
        """Stop the scheduler, write the snapshots still due, then close the model client and the database."""
        if self._closed:
            return
        self._closed = True
        background = self.conversations.stop()
        try:
            self.pulses.timers.stop()
            await self.pulses.stop()  # a running pulse ends as if interrupted: its session suspended
            await self.scheduler.stop(self.shutdown_grace)
            await self.memory.drain(self.shutdown_grace)
            if self.forgetting.rewrites:  # erasures in progress finish: they must not be left half done
                await asyncio.wait(self.forgetting.rewrites, timeout=self.shutdown_grace)
                background += list(self.forgetting.rewrites)  # still failing: pending, finished at the next start
            # Summaries prepared ahead are only a head start, and what is not indexed yet is at the next start.
            background += [self._chronicler] if self._chronicler is not None else []
            if lost := self.conversations.unsaved():  # said, never stored: the log is what is left of them
                log.error("shutdown: %d reply(ies) the database refused were never stored", lost)
            for task in (self._snapshotter, self._heart, self._calibrator, *background):
                if task is not None:
                    task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            await self.spending.drain()  # usage a cancelled caller left to the write under way
            await self.conversations.save_counts()
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

    @property
    def model_name(self) -> str:
        return self.llm.name
