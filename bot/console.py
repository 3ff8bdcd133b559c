"""The console front end: a terminal chat with the persona on the same engine as Discord."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TextIO

from bot.engine import Engine, ReplyFailed
from memory.records import Scope

HELP = """Commands:
  /help          this list
  /retry         ask for a reply again (after a failure)
  /quit          leave (Ctrl-D works too)
Anything else is a message to the persona."""


async def read_line(stream: TextIO) -> str | None:
    """A line from a blocking stream without blocking the loop; None at end of input.

    A daemon thread, not the default executor: on Ctrl-C the process must not wait for Enter.
    """
    loop = asyncio.get_running_loop()
    done: asyncio.Future[str] = loop.create_future()

    def read() -> None:
        try:
            line = stream.readline()
        except (OSError, ValueError):  # closed while waiting
            line = ""
        loop.call_soon_threadsafe(lambda: done.done() or done.set_result(line))

    threading.Thread(target=read, name="console-stdin", daemon=True).start()
    return (await done) or None


@dataclass
class Console:
    engine: Engine
    stdin: TextIO
    stdout: TextIO
    user_name: str
    scope: Scope = field(default_factory=Scope.console)

    @property
    def interactive(self) -> bool:
        return self.stdin.isatty()

    async def run(self) -> int:
        if self.interactive:
            await self._greet()
        while True:
            line = await self._read_line()
            if line is None:
                return 0
            line = line.strip()
            if not line:
                continue
            if line.startswith("/"):
                if not await self._command(line):
                    return 0
                continue
            await self.engine.hear(self.scope, line, author_name=self.user_name)
            await self._reply()

    async def _command(self, line: str) -> bool:
        """Run a slash command; False means leave."""
        name, _, _ = line.partition(" ")
        commands: dict[str, Callable[[], Awaitable[None]]] = {
            "/help": self._help,
            "/retry": self._reply,
        }
        if name in ("/quit", "/exit"):
            return False
        action = commands.get(name)
        if action is None:
            self._say(f"Unknown command {name}. Type /help for the list.")
        else:
            await action()
        return True

    async def _help(self) -> None:
        self._say(HELP)

    async def _reply(self) -> None:
        self.stdout.write(f"{self.engine.persona}: ")
        try:
            await self.engine.reply(self.scope, on_text=self._stream)
        except ReplyFailed as exc:
            self.stdout.write(f"(no reply: {exc.notice} Your message is kept; /retry to ask again.)")
        self.stdout.write("\n")
        self.stdout.flush()

    def _stream(self, piece: str) -> None:
        self.stdout.write(piece)
        self.stdout.flush()

    async def _greet(self) -> None:
        remembered = await self.engine.store.count_messages((await self.engine.thread_for(self.scope)).id)
        self._say(
            f"Stelis console: chatting with {self.engine.persona} on the {self.engine.llm.name} model"
            f" ({remembered} message(s) remembered). /help for commands, /quit to leave."
        )

    async def _read_line(self) -> str | None:
        if self.interactive:
            self.stdout.write(f"{self.user_name}> ")
            self.stdout.flush()
        return await read_line(self.stdin)

    def _say(self, text: str) -> None:
        self.stdout.write(text + "\n")
        self.stdout.flush()
