"""Stelis working threads: runs, start / end / abort, and the tree under a conversation."""

from __future__ import annotations

from bot.services.effective_settings import EffectiveSettings
from bot.services.views import ThreadDetail, TreeRow
from memory import recall, threads
from memory.llm import LLM
from memory.records import Scope, Thread
from memory.settings import StelisSettings
from memory.store import Store
from memory.threads import Run
from memory.window import protected_size, window_size


class StelisThreads:
    def __init__(self, store: Store, llm: LLM, settings: EffectiveSettings, persona: str, context_tokens: int):
        self._store = store
        self._llm = llm
        self._settings = settings
        self.settings = settings.config.stelis  # config.yaml's: what no server may change (chunk and chronicle sizes)
        self._persona = persona
        self._context_tokens = context_tokens
        self.visibilities = recall.Visibilities()  # shared with the assembler: one view of who may see what

    async def seen_from(self, scope: Scope) -> recall.Visibility:
        """What a conversation may see of the rest (recall's rules, DESIGN.md section 6): whatever reads
        another conversation's words or branches for it goes through this."""
        return await self.visibilities.of(self._store, await self.root(scope))

    async def root(self, scope: Scope) -> Thread:
        """A scope's conversation (its root thread), created on first use."""
        ratio = (await self._settings.effective(scope.guild_id, scope.channel_id)).stelis.default_window_ratio
        return await self._store.root_thread(self._persona, scope, ratio)

    async def settings_at(self, root_id: int) -> StelisSettings:
        """The Stelis settings in effect in a conversation now: its server's and channel's overrides applied."""
        root = await self._store.thread(root_id)
        return (await self._settings.effective(root.guild_id, root.channel_id)).stelis

    async def new_run(self, scope: Scope, run_id: str | None = None) -> Run:
        """A run of the persona; a known `run_id` resumes the Stelis threads it left open."""
        root = (await self.root(scope)).id
        if run_id is None:
            return Run(root_id=root)
        return Run(root_id=root, id=run_id, stack=[t.id for t in await self._store.active_threads_of_run(run_id)])

    async def start(self, run: Run, label: str, chronicle_prompt: str | None = None) -> Thread:
        return await threads.start(self._store, run, label, await self.settings_at(run.root_id),
                                   chronicle_prompt=chronicle_prompt)

    async def end(self, run: Run, generate_chronicle: bool = True) -> Thread:
        return await threads.end(self._store, self._llm, run, self.settings, generate_chronicle=generate_chronicle)

    async def abort(self, run: Run) -> Thread:
        return await threads.abort(self._store, self._llm, run, self.settings)

    async def tree(self, root_id: int) -> list[TreeRow]:
        """The Stelis tree under a root, depth first, with each thread's window at the full context."""
        rows: list[TreeRow] = []

        async def visit(thread: Thread, ratios: list[float]) -> None:
            size = window_size(self._context_tokens, ratios)
            parent = window_size(self._context_tokens, ratios[:-1]) if ratios else 0
            sees_parent = bool(ratios) and thread.kind != "subagent"  # a subagent sees its own history alone
            rows.append(TreeRow(thread, size, protected_size(parent, thread.window_ratio) if sees_parent else 0))
            for child in await self._store.children(thread.id):
                await visit(child, [*ratios, child.window_ratio])

        await visit(await self._store.thread(root_id), [])
        return rows

    async def detail(self, scope: Scope, thread_id: int, exchanges: int = 3) -> ThreadDetail | None:
        """A Stelis thread of this conversation with its last exchanges; None if it is not one of them."""
        root = await self.root(scope)
        found = next((row.thread for row in await self.tree(root.id) if row.thread.id == thread_id), None)
        if found is None or found.is_root:
            return None
        return ThreadDetail(found, await self._store.last_exchanges(found.id, exchanges))
