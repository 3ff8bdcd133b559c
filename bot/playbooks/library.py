"""The playbooks a persona can run: the built-in ones and an operator's folder, each checked before it loads."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from pathlib import Path

from bot.playbooks.checker import Problem, check, read
from bot.playbooks.model import Playbook

BUILTIN = Path(__file__).with_name("builtin")


def playbook_files(folders: Iterable[Path | None]) -> list[Path]:
    return [path for folder in folders if folder is not None and folder.is_dir()
            for path in sorted(folder.glob("*.json"))]


def load(files: Iterable[Path], *, tools: Collection[str], max_depth: int) -> tuple[dict[str, Playbook], list[Problem]]:
    """Every playbook that passes the check, by name, and the problems of those that do not load.

    A playbook calling one that failed fails too (its callee is unknown), until nothing changes.
    """
    parsed: dict[str, tuple[Playbook, str]] = {}
    problems: list[Problem] = []
    for path in files:
        playbook, found = read(path)
        problems += found
        if playbook is None:
            continue
        if playbook.name in parsed:
            problems.append(Problem(str(path), None, "name", f"another playbook is named {playbook.name!r} "
                                    f"({parsed[playbook.name][1]})"))
            continue
        parsed[playbook.name] = (playbook, str(path))
    library = {name: playbook for name, (playbook, _) in parsed.items()}
    while True:
        failing = {name: check(playbook, parsed[name][1], tools=tools, library=library, max_depth=max_depth)
                   for name, playbook in library.items()}
        failing = {name: found for name, found in failing.items() if found}
        if not failing:
            return library, problems
        for name, found in failing.items():
            problems += found
            del library[name]
