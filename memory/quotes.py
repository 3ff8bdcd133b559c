"""Where erased words were quoted: a tool's result, a playbook step, a pulse's note may carry them.

Recall and the other tools show excerpts (whitespace folded, clipped at both ends), so a quote is
found by any stretch of FRAGMENT characters of the erased text, not by the whole text.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

FRAGMENT = 24  # characters of an erased text that, found elsewhere, mark a quote of it
STRIDE = 8  # any quote at least FRAGMENT + STRIDE characters long holds one of the fragments
SHORTEST = 4  # shorter texts ("ok", "yes") are everywhere: they mark nothing
ERASED = "[erased: this quoted words that have since been forgotten]"


def _folded(text: str) -> str:
    return " ".join(text.split())


@dataclass(frozen=True)
class Erased:
    """The erased texts, ready to be looked for."""

    fragments: frozenset[str]  # FRAGMENT-long stretches of the longer texts
    whole: tuple[str, ...]  # the shorter texts, looked for whole

    @classmethod
    def of(cls, texts: Iterable[str]) -> Erased:
        fragments: set[str] = set()
        whole: list[str] = []
        for text in map(_folded, texts):
            if len(text) < SHORTEST:
                continue
            if len(text) <= FRAGMENT + STRIDE:
                whole.append(text)
                continue
            fragments.update(text[i:i + FRAGMENT] for i in range(0, len(text) - FRAGMENT + 1, STRIDE))
            fragments.add(text[-FRAGMENT:])
        return cls(frozenset(fragments), tuple(dict.fromkeys(whole)))

    def __bool__(self) -> bool:
        return bool(self.fragments or self.whole)

    def quoted_in(self, text: str | None) -> bool:
        """Does this text carry any of the erased words?"""
        if not text:
            return False
        folded = _folded(text)
        if any(short in folded for short in self.whole):
            return True
        if self.fragments and len(folded) >= FRAGMENT:
            return any(folded[i:i + FRAGMENT] in self.fragments for i in range(len(folded) - FRAGMENT + 1))
        return False
