"""The console's line editor (prompt_toolkit): editing keys, history across runs (Ctrl-R searches it), completion
of commands and what follows them, a pasted block as one message (bracketed paste keeps its newlines), Alt-Enter
for a newline, and Ctrl-C as other REPLs have it: it clears a line, and leaves only when pressed twice."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory
from prompt_toolkit.input import Input
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.output import Output

LEAVE_HINT = "(Ctrl-C again, Ctrl-D or /quit to leave)"


class Commands(Completer):
    """Each word from what the words before it allow (a nested mapping; None ends a branch). prompt_toolkit's own
    NestedCompleter reads "/memory" as the word "memory", so a command never completes."""

    def __init__(self, tree: Mapping[str, Any]):
        self.tree = tree

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterator[Completion]:
        text = document.text_before_cursor.lstrip()
        words = text.split() + ([""] if not text or text[-1].isspace() else [])
        node: Any = self.tree
        for word in words[:-1]:
            if not isinstance(node, Mapping) or word not in node:
                return
            node = node[word]
        if isinstance(node, Mapping):
            typed = words[-1]
            for option, more in node.items():  # a word with words after it comes with its space, as readline's
                if option.startswith(typed):
                    yield Completion(option + (" " if isinstance(more, Mapping) else ""), -len(typed), option)


def _bindings() -> KeyBindings:
    keys = KeyBindings()

    @keys.add("escape", "enter")
    def _newline(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    return keys


class LineEditor:
    def __init__(self, history_file: Path, commands: Mapping[str, Any], *, input: Input | None = None,
                 output: Output | None = None):
        history_file.parent.mkdir(parents=True, exist_ok=True)
        self._session: PromptSession[str] = PromptSession(
            history=FileHistory(str(history_file)), completer=Commands(commands),
            complete_while_typing=False, key_bindings=_bindings(), input=input, output=output)
        self._interrupted = False  # the last Ctrl-C came on an empty line
        self.hint: str | None = None  # what to tell the person after a Ctrl-C, for the console to print

    def complete(self, commands: Mapping[str, Any]) -> None:
        """What Tab completes from now on (commands, their words, names that change: playbooks, branches)."""
        self._session.completer = Commands(commands)

    async def read(self, prompt: str) -> str | None:
        """A line as typed or pasted; "" after a Ctrl-C that cleared it; None at end of input (Ctrl-D) or at a
        second Ctrl-C in a row on an empty line."""
        self.hint = None
        try:
            line = await self._session.prompt_async(prompt)
        except EOFError:
            return None
        except KeyboardInterrupt:
            cleared = bool(self._session.default_buffer.text.strip())
            if not cleared and self._interrupted:
                return None
            self._interrupted = not cleared
            self.hint = None if cleared else LEAVE_HINT
            return ""
        self._interrupted = False
        return line
