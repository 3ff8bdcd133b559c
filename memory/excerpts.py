"""The part of a long text that a query is about: the span where its weighted words cluster.

Recall shows an excerpt, so it judges a hit by the excerpt too: a long text that mentions a few
query words pages apart is not about the query, and its excerpt would not carry them anyway.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from memory.words import CJK

MARGIN = 60  # characters shown before the first match, so it is read in its sentence


@dataclass(frozen=True)
class Excerpt:
    text: str
    score: float  # the summed weights of the distinct words it contains


def word_starts(term: str, text: str) -> list[int]:
    """Where the term occurs at a word's start ("eat" in "eating", not in "weather"); CJK has no word starts."""
    found, at = [], text.find(term)
    anywhere = _unsegmented(term)
    while at >= 0:
        if anywhere or at == 0 or not text[at - 1].isalnum():
            found.append(at)
        at = text.find(term, at + 1)
    return found


@lru_cache(maxsize=4_096)
def _unsegmented(term: str) -> bool:
    return bool(CJK.search(term))


def contains(term: str, text: str) -> bool:
    return bool(word_starts(term, text))


def best(text: str, weights: dict[str, float], width: int) -> Excerpt:
    """The at most `width` characters of `text` (on one line) whose distinct query words weigh the most."""
    text = " ".join(text.split())
    lowered = text.lower()
    if len(text) <= width:
        return Excerpt(text, sum(w for t, w in weights.items() if contains(t, lowered)))
    hits = sorted((at, term) for term in weights for at in word_starts(term, lowered))
    score, start = _densest(hits, weights, width - MARGIN)
    begin = max(0, start - MARGIN)
    clipped = text[begin:begin + width]
    return Excerpt(("…" if begin else "") + clipped + ("…" if begin + width < len(text) else ""), score)


def _densest(hits: list[tuple[int, str]], weights: dict[str, float], span: int) -> tuple[float, int]:
    """(weight, start) of the span of at most `span` characters holding the heaviest set of distinct words."""
    counts: dict[str, int] = {}
    score, best_score, best_start, left = 0.0, 0.0, 0, 0
    for i, (at, term) in enumerate(hits):
        counts[term] = counts.get(term, 0) + 1
        if counts[term] == 1:
            score += weights[term]
        while left < i and at + len(term) - hits[left][0] > span:
            gone = hits[left][1]
            counts[gone] -= 1
            if not counts[gone]:
                score -= weights[gone]
            left += 1
        if score > best_score:
            best_score, best_start = score, hits[left][0]
    return best_score, best_start
