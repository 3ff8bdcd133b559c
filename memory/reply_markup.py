"""A reply cleaned of a leading echo of the request's markup (DESIGN.md section 7).

Small models open a reply with what the request showed them: the tail's `[Now: ...]` line, a
speaker tag such as `[Rin]` or `Rin:`, a `[Recall: ...]` header. None of it is what the persona
says: it is taken off the start before the reply is shown or stored, while it streams too.
"""

from __future__ import annotations

import re

from memory.llm import LLMRequest, TextSink

_HEADER = re.compile(r"\[(?:Now|Meanwhile in|Current situation|Recall|Memory Summary|Earlier)\b[^\]\n]*\][ \t]*\n?")
_SPEAKER = re.compile(r"^\[([^\]\n]{1,80})\] ", re.MULTILINE)  # how the request names who said a message
UNDECIDED_CHARS = 200  # held back at most while the start could still be markup


def speakers(request: LLMRequest, persona: str) -> set[str]:
    """The names the request tags messages with, and the persona's: what a reply must not open with."""
    named = {m.group(1) for t in request.turns if t.role == "user" for b in t.blocks for m in _SPEAKER.finditer(b.text)}
    return {persona, *named} - {""}


def clean_reply(text: str, names: set[str]) -> str:
    """The reply without the markup it opens with (only at its start; the rest is untouched): the request's
    headers, and a speaker's tag (`[Rin]`, `Rin:`) for any of `names`."""
    alternatives = "|".join(sorted(map(re.escape, names), key=len, reverse=True))
    patterns = [_HEADER, *([re.compile(rf"(?:\[(?:{alternatives})\]:?|(?:{alternatives}):)[ \t]*")]
                           if names else [])]
    rest = text
    while True:
        stripped = rest.lstrip()
        found = next((m for p in patterns if (m := p.match(stripped))), None)
        if found is None:
            return text if rest is text else stripped
        rest = stripped[found.end():]


class CleanStart:
    """A text sink that holds a reply's first characters back until it is clear they are not markup,
    then passes the cleaned start and everything after it through."""

    def __init__(self, sink: TextSink, names: set[str]):
        self._sink = sink
        self._names = names
        self._held = ""
        self._open = False

    def __call__(self, piece: str) -> None:
        if self._open:
            self._sink(piece)
            return
        self._held += piece
        cleaned = clean_reply(self._held, self._names).lstrip()
        if self._undecided(cleaned):
            return
        self._open = True
        if cleaned:
            self._sink(cleaned)

    def close(self) -> None:
        """The reply ended: what is still held (a short reply) goes out, cleaned."""
        if not self._open:
            self._open = True
            cleaned = clean_reply(self._held, self._names).lstrip()
            if cleaned:
                self._sink(cleaned)

    def _undecided(self, start: str) -> bool:
        if len(self._held) >= UNDECIDED_CHARS:
            return False
        if not start:
            return True
        if start.startswith("[") and "]" not in start:
            return True
        return any(f"{name}:".startswith(start) for name in self._names)
