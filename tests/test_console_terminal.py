"""The console at a real (pseudo-)terminal: line editing, a paste as one message, completion, history."""

from __future__ import annotations

import asyncio
import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

from bot.config import validate
from bot.engine import Engine
from bot.providers.offline import OfflineLLM
from memory.records import Scope

REPO = Path(__file__).resolve().parent.parent
PROMPT = b"mahe>"  # drawn with cursor moves, so no literal space after it
REPLY = b"[offline model]"
LEFT, UP, TAB = b"\x1b[D", b"\x1b[A", b"\t"
PASTE_START, PASTE_END = b"\x1b[200~", b"\x1b[201~"


class Terminal:
    """`python -m bot console` on a pseudo-terminal: keys in, screen bytes out."""

    def __init__(self, data_dir: Path):
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("STELIS_", "ANTHROPIC_", "DISCORD_"))}
        env.update(TERM="xterm", STELIS_DATA_DIR=str(data_dir), STELIS_CONSOLE_USER_NAME="mahe")
        self.process = subprocess.Popen([sys.executable, "-m", "bot", "console"], stdin=slave, stdout=slave,
                                        stderr=slave, cwd=REPO, env=env, start_new_session=True)
        os.close(slave)
        self.screen = b""

    def wait_for(self, text: bytes, count: int = 1, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while self.screen.count(text) < count:
            assert time.monotonic() < deadline, f"waited for {text!r} x{count}; screen: {self.screen[-800:]!r}"
            ready, _, _ = select.select([self.master], [], [], 0.1)
            if not ready:
                continue
            try:
                chunk = os.read(self.master, 65536)
            except OSError:  # the process closed the terminal
                return
            if b"\x1b[6n" in chunk:  # the editor asks where the cursor is: answer like a terminal
                os.write(self.master, b"\x1b[1;1R")
            self.screen += chunk

    def type(self, *keys: bytes) -> None:
        for key in keys:
            os.write(self.master, key)
            time.sleep(0.02)

    def line(self, *keys: bytes, shows: bytes = REPLY) -> None:
        """Type, press Enter, and wait until the screen shows what the line brings (one more of it)."""
        seen = self.screen.count(shows)
        self.type(*keys, b"\r")
        self.wait_for(shows, seen + 1)

    def close(self) -> int:
        code = self.process.wait(timeout=30)
        os.close(self.master)
        return code


async def _said(data_dir: Path) -> list[str]:
    engine = await Engine.open(validate({"data_dir": str(data_dir)}), OfflineLLM())
    root = await engine.stelis.root(Scope.console())
    said = [m.content for m in await engine.store.tail(root.id, 20) if m.role == "user"]
    await engine.close()
    return said


def test_line_editing_a_paste_completion_and_history_across_runs(tmp_path):
    term = Terminal(tmp_path)
    term.wait_for(PROMPT)
    time.sleep(0.3)  # the editor's first draw settles
    term.line(b"hello wrld", LEFT, LEFT, LEFT, b"o")  # the arrows move the cursor: no ^[[D in the text
    term.line(PASTE_START, b"first line\nsecond line", PASTE_END)  # one message, not two
    term.line(b"/idl", TAB, b" 60", shows=b"(time passes: 60 s)")  # Tab completes the command
    term.type(b"/quit\r")
    assert term.close() == 0
    assert b"(time passes: 60 s)" in term.screen and b"^[[D" not in term.screen
    assert asyncio.run(_said(tmp_path)) == ["hello world", "first line\nsecond line"]

    again = Terminal(tmp_path)
    again.wait_for(PROMPT)
    time.sleep(0.3)
    again.type(UP, b"\r")  # the last line of the last run: /quit
    assert again.close() == 0
    assert b"/quit" in again.screen
