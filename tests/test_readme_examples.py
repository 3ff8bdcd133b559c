"""The README's example sessions are what the program prints: each is run again here (offline model, a fixed
day) and compared. `STELIS_README=write` (`make readme`) writes the runs into the README instead."""

from __future__ import annotations

import io
import os
import re
import time
from datetime import UTC, datetime
from pathlib import Path

from bot.clock import Clock
from bot.config import load_config
from bot.console import Console, console_run_id
from bot.duet import duet
from bot.engine import Engine
from bot.providers.offline import OfflineLLM
from memory.records import Scope

README = Path(__file__).resolve().parent.parent / "README.md"
DAY = datetime(2026, 11, 23, 10, 0, tzinfo=UTC).timestamp()  # the day the examples were written on
USER = "mahe"


def _block(text: str, command: str) -> re.Match[str]:
    """The text block that starts with `$ command`: the run it shows follows that line."""
    found = re.search(r"```text\n\$ " + re.escape(command) + r"\n(.*?)```", text, re.DOTALL)
    assert found, f"the README has no example that starts with $ {command}"
    return found


def _check(command: str, shown: str) -> None:
    text = README.read_text(encoding="utf-8")
    found = _block(text, command)
    if os.environ.get("STELIS_README") == "write":
        README.write_text(text[:found.start(1)] + shown + text[found.end(1):], encoding="utf-8")
        return
    assert found.group(1) == shown, f"the README's `$ {command}` example is not what it prints: make readme"


class Typed(io.StringIO):
    """Lines typed at the prompt: each shows in the transcript after the prompt, as on a terminal."""

    def __init__(self, lines: list[str], screen: io.StringIO):
        super().__init__("".join(f"{line}\n" for line in lines))
        self.screen = screen

    def readline(self, size: int | None = -1) -> str:
        line = super().readline()
        if line:
            self.screen.write(f"{USER}> {line}")
        return line


def _config(data: Path, **env: str):
    return load_config(None, {"STELIS_DATA_DIR": str(data), **env}).config


async def test_the_day_in_the_life_is_what_the_console_prints(tmp_path):
    typed = [line.removeprefix(f"{USER}> ") for line in _block(README.read_text(), "make run").group(1).splitlines()
             if line.startswith(f"{USER}> ")]
    assert len(typed) >= 8  # the walk-through: talk, a task, autonomy, time passing, memory, recall, context
    engine = await Engine.open(_config(tmp_path / "data"), OfflineLLM(), Clock(DAY - time.time()),
                               keep_runs=frozenset({console_run_id(Scope.console())}))
    await engine.start_memory()
    screen = io.StringIO()
    try:
        await Console(engine, Typed(typed, screen), screen, USER).run_loop()
    finally:
        await engine.close()
    _check("make run", screen.getvalue())


async def test_the_duet_is_what_it_prints(tmp_path):
    opening = "Shall we read the new star atlas together?"
    command = f'.venv/bin/python -m bot duet eris.yaml --turns 2 --exchanges 2 --opening "{opening}"'
    screen = io.StringIO()
    await duet(_config(tmp_path / "stelis"), _config(tmp_path / "eris", STELIS_PERSONA_NAME="Eris"), screen,
               turns=2, exchanges=2, opening=opening, clock=Clock(DAY - time.time()))
    _check(command, screen.getvalue())
