"""The console's line editor (prompt_toolkit): editing keys, history across runs, completion of commands,
and a pasted block as one message (bracketed paste keeps its newlines in the line)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import WordCompleter
from prompt_toolkit.history import FileHistory


class LineEditor:
    def __init__(self, history_file: Path, commands: Iterable[str]):
        history_file.parent.mkdir(parents=True, exist_ok=True)
        self._session: PromptSession[str] = PromptSession(
            history=FileHistory(str(history_file)),
            completer=WordCompleter(sorted(set(commands)), sentence=True),
            complete_while_typing=False,
        )

    async def read(self, prompt: str) -> str | None:
        """A line as typed or pasted; None at end of input (Ctrl-D)."""
        try:
            return await self._session.prompt_async(prompt)
        except EOFError:
            return None
