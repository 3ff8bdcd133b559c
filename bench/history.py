"""Synthetic conversations for the benchmarks: realistic sizes, tool pairs, anchors."""

from __future__ import annotations

import random
from dataclasses import replace

from memory.records import NewMessage

WORDS = ["memory", "thread", "window", "anchor", "chronicle", "persona", "channel", "summary", "cache", "token",
         "budget", "calculator_v2", "Tokyo", "2026", "deploy", "review", "coffee", "tomorrow", "meeting", "draft",
         "the", "a", "and", "we", "you", "it", "was", "is", "to", "of", "in", "for", "that", "on", "with"]


# Real conversations also carry a long tail of rarer words (names, places, things): a Zipf vocabulary
# of made-up words, so recall's look-ups see realistic match counts rather than 35 words found in
# every message. Letters are drawn at random, as in real rare words, whose letter triples vary.
_LETTERS = random.Random(7)
RARE = ["".join(_LETTERS.choices("abcdefghijklmnopqrstuvwxyz", k=_LETTERS.randint(5, 9))) for _ in range(4_096)]
_RARE_WEIGHTS = [1 / (rank + 1) for rank in range(len(RARE))]
RARE_SHARE = 0.2


def sentence(rng: random.Random, low: int, high: int, rare_share: float = RARE_SHARE) -> str:
    count = rng.randint(low, high)
    rare = iter(rng.choices(RARE, _RARE_WEIGHTS, k=count))
    return " ".join(next(rare) if rng.random() < rare_share else rng.choice(WORDS) for _ in range(count))


def user_message(rng: random.Random, n: int, rare_share: float = RARE_SHARE) -> NewMessage:
    return NewMessage("user", f"({n}) " + sentence(rng, 8, 120, rare_share),
                      author_name=rng.choice(["mahe", "eris", "kai"]))


def asking(message: NewMessage) -> NewMessage:
    """The same message as a question (recall reaches further for one)."""
    return replace(message, content=f"what about {message.content}?")


def assistant_message(rng: random.Random, n: int) -> NewMessage:
    return NewMessage("assistant", f"({n}) " + sentence(rng, 20, 220))


def tool_pair(rng: random.Random, n: int, rare_share: float = RARE_SHARE) -> list[NewMessage]:
    call = {"id": f"call-{n}", "name": "search", "input": {"q": sentence(rng, 2, 5, rare_share)}}
    output = "\n".join(sentence(rng, 4, 14, rare_share) for _ in range(rng.randint(5, 200)))
    return [NewMessage("assistant", "let me check", metadata={"tool_use": [call]}),
            NewMessage("tool", output, metadata={"tool_use_id": call["id"]})]
