"""The persona runtime shared by the console and the Discord cogs: hear, reply, Stelis threads, context."""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from bot.config import Config
from bot.providers import make_llm
from memory import snapshots, threads
from memory.context import Assembler, Assembly, Budget, ContextError, Persona
from memory.llm import LLM, LLMError, TextSink
from memory.records import Message, NewMessage, Role, Scope, Thread
from memory.store import Store
from memory.threads import Run, StelisSettings
from memory.window import LockedBufferTooLarge, WindowPolicy, protected_size, window_size

log = logging.getLogger(__name__)


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


class Engine:
    def __init__(self, config: Config, store: Store, llm: LLM):
        self.config = config
        self.store = store
        self.llm = llm
        self.stelis = StelisSettings(
            max_depth=config.stelis.max_depth, default_window_ratio=config.stelis.default_window_ratio,
            chunk_tokens=config.stelis.chunk_tokens, chronicle_tokens=config.stelis.chronicle_tokens,
        )
        c = config.context
        self.assembler = Assembler(
            store, llm, Persona(config.persona.name, config.persona.card),
            Budget(config.llm.context_tokens, config.llm.max_output_tokens, tail_reserve=c.tail_reserve_tokens),
            WindowPolicy(low_water=c.low_water, locked_turns=c.locked_turns, summary_tokens=c.summary_tokens,
                         observation_max_lines=c.observation_max_lines,
                         observation_keep_lines=c.observation_keep_lines),
            self.stelis, clock=store.clock,
        )
        self._reply_locks: defaultdict[int, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._dirty: set[int] = set()  # threads whose snapshot is out of date
        self._snapshotter: asyncio.Task[None] | None = None

    @classmethod
    async def open(cls, config: Config, llm: LLM | None = None) -> Engine:
        """Open the store, choose the model, and sweep Stelis threads left active by a run that is gone."""
        store = await Store.open(config.database_path)
        engine = cls(config, store, llm or make_llm(config))
        await threads.sweep(store, engine.llm, engine.stelis, live_runs=set())
        if config.snapshots.interval_seconds > 0:
            engine._snapshotter = asyncio.create_task(engine._snapshot_every(config.snapshots.interval_seconds))
        return engine

    async def close(self) -> None:
        """Write the snapshots still due, then close the model client and the database."""
        if self._snapshotter is not None:
            self._snapshotter.cancel()
        await self.write_snapshots()
        await self.llm.aclose()
        await self.store.close()

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

    async def thread_for(self, scope: Scope) -> Thread:
        return await self.store.root_thread(self.persona, scope, self.config.stelis.default_window_ratio)

    async def new_run(self, scope: Scope) -> Run:
        return Run(root_id=(await self.thread_for(scope)).id)

    async def hear(
        self, scope: Scope, content: str, *, author_name: str | None = None, author_id: int | None = None,
        external_id: int | None = None, role: Role = "user", thread_id: int | None = None,
    ) -> Message:
        """Remember a message in the scope's root thread, or in the given thread; duplicates stored once."""
        target = thread_id if thread_id is not None else (await self.thread_for(scope)).id
        message, created = await self.store.append(
            target, NewMessage(role, content, author_id, author_name, external_id=external_id)
        )
        self._dirty.add(target)
        if not created:
            log.debug("duplicate message %s ignored", external_id)
        return message

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
            return message

    async def context(self, thread_id: int) -> Assembly:
        """The next request for a thread (what /context shows)."""
        return await self.assembler.assemble(thread_id)

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

