"""Synthetic conversations for the benchmarks: realistic sizes, tool pairs, anchors."""

from __future__ import annotations

import random

from memory.records import NewMessage

WORDS = ["memory", "thread", "window", "anchor", "chronicle", "persona", "channel", "summary", "cache", "token",
         "budget", "calculator_v2", "Tokyo", "2026", "deploy", "review", "coffee", "tomorrow", "meeting", "draft",
         "the", "a", "and", "we", "you", "it", "was", "is", "to", "of", "in", "for", "that", "on", "with"]


def sentence(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high)))


def user_message(rng: random.Random, n: int) -> NewMessage:
    return NewMessage("user", f"({n}) " + sentence(rng, 8, 120), author_name=rng.choice(["mahe", "eris", "kai"]))


def assistant_message(rng: random.Random, n: int) -> NewMessage:
    return NewMessage("assistant", f"({n}) " + sentence(rng, 20, 220))


def tool_pair(rng: random.Random, n: int) -> list[NewMessage]:
    call = {"id": f"call-{n}", "name": "search", "input": {"q": sentence(rng, 2, 5)}}
    output = "\n".join(sentence(rng, 4, 14) for _ in range(rng.randint(5, 200)))
    return [NewMessage("assistant", "let me check", metadata={"tool_use": [call]}),
            NewMessage("tool", output, metadata={"tool_use_id": call["id"]})]
