"""Playbooks in the engine: the checked library, runs in a conversation, and what they logged."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.playbooks.arguments import parse_arguments
from bot.playbooks.checker import Problem, check_file
from bot.playbooks.library import BUILTIN, load, playbook_files
from bot.playbooks.model import Playbook
from bot.playbooks.runtime import Progress, Runner, RunResult
from bot.playbooks.state import PlaybookError
from bot.services.stelis import StelisThreads
from bot.tools import ToolSpec
from memory.records import PlaybookRun, PlaybookStep, Scope
from memory.store import Store

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunView:
    """A run and its steps (/playbooks runs)."""

    run: PlaybookRun
    steps: list[PlaybookStep]


class Playbooks:
    def __init__(self, store: Store, runner: Runner, stelis: StelisThreads, tools: Mapping[str, ToolSpec],
                 folder: Path | None, max_depth: int, persona: str):
        self._store = store
        self._runner = runner
        self._stelis = stelis
        self._tools = tools
        self._folders = [BUILTIN, folder]
        self._max_depth = max_depth
        self._persona = persona
        self.problems: list[Problem] = []

    def load(self) -> list[Problem]:
        """(Re)load the library; a playbook that fails the check stays out, and its problems are logged."""
        library, self.problems = load(playbook_files(self._folders), tools=self._tools, max_depth=self._max_depth)
        self._runner.library = library
        for problem in self.problems:
            log.warning("playbook not loaded: %s", problem)
        return self.problems

    @property
    def library(self) -> Mapping[str, Playbook]:
        return self._runner.library

    def check(self, path: Path) -> list[Problem]:
        """One file against the loaded library and tools (it may replace a loaded playbook of its name)."""
        _, problems = check_file(path, tools=self._tools, library=self.library, max_depth=self._max_depth)
        return problems

    async def run(self, scope: Scope, name: str, args: dict[str, Any] | str, *, run_id: str | None = None,
                  progress: Progress | None = None) -> RunResult:
        """Run a playbook in a conversation (or in the Stelis thread a known run is inside); `args` as typed (a
        JSON object, or plain words for a playbook with one text input) or already parsed."""
        if isinstance(args, str):
            playbook = self.library.get(name)
            args = parse_arguments(playbook, args) if playbook is not None else {}
        run = await self._stelis.new_run(scope, run_id)
        return await self._runner.run(name, args, scope=scope, run=run, progress=progress)

    async def runs(self, scope: Scope, limit: int = 10) -> list[RunView]:
        found = await self._store.playbook_runs(self._persona, scope.key, limit)
        return [RunView(run, await self._store.playbook_steps(run.id)) for run in found]


__all__ = ["PlaybookError", "Playbooks", "RunView"]
