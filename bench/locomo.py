"""Conversations in the LoCoMo format (long multi-session chats with questions), for `bench memory_quality --data`.

The data set is not shipped (its licence does not allow it here): point `--data` at its JSON, one file of
samples or a directory of one file per conversation. Each sample's sessions are replayed at their dates, a
photo as its caption in text, and its questions asked with their evidence turns; adversarial questions
(no answer in the conversation) are left out. A turn counts as kept when its longest sentence reaches the
request, which a summary holding the fact keeps and a paraphrase of it does not.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.conversations import Conversation, Question, Turn

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}  # 5, adversarial: left out
TURN_SECONDS = 60  # a session's turns, a minute apart from its start
_WHEN = re.compile(r"(\d{1,2}):(\d{2})\s*(am|pm) on (\d{1,2}) (\w+),? (\d{4})", re.IGNORECASE)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def load(path: Path) -> list[Conversation]:
    """Every conversation in a LoCoMo file (a list of samples) or directory (one sample per file)."""
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    samples: list[dict[str, Any]] = []
    for file in files:
        data = json.loads(file.read_text(encoding="utf-8"))
        samples += data if isinstance(data, list) else [data]
    return [conversation(n, sample) for n, sample in enumerate(samples)]


def conversation(seed: int, sample: dict[str, Any]) -> Conversation:
    talk = sample.get("conversation", sample)
    conv = Conversation(seed, [talk["speaker_a"], talk["speaker_b"]])
    index: dict[str, int] = {}
    sessions = sorted((int(k.split("_")[1]), k) for k in talk if re.fullmatch(r"session_\d+", k))
    for _, key in sessions:
        start = _when(talk[f"{key}_date_time"])
        for n, turn in enumerate(talk[key]):
            index[turn["dia_id"]] = len(conv.turns)
            conv.turns.append(Turn(turn["speaker"], _text(turn), start + n * TURN_SECONDS))
    for qa in sample.get("qa", []):
        kind = CATEGORIES.get(qa.get("category", 0))
        evidence = [index[e] for e in qa.get("evidence", []) if e in index]
        if kind is None or "answer" not in qa or not evidence:
            continue
        conv.questions.append(Question(qa["question"], str(qa["answer"]), evidence,
                                       [_key(conv.turns[i].text) for i in evidence], kind))
    return conv


def _when(text: str) -> float:
    found = _WHEN.search(text)
    if found is None:
        raise ValueError(f"a session date the LoCoMo format does not use: {text!r}")
    hour, minute, half, day, month, year = found.groups()
    hour_24 = int(hour) % 12 + (12 if half.lower() == "pm" else 0)
    when = datetime.strptime(f"{day} {month} {year}", "%d %B %Y").replace(hour=hour_24, minute=int(minute),
                                                                          tzinfo=UTC)
    return when.timestamp()


def _text(turn: dict[str, Any]) -> str:
    caption = turn.get("blip_caption")
    return f"{turn['text']} [shares {caption}]" if caption else turn["text"]


def _key(text: str) -> str:
    return max(_SENTENCE.split(text), key=len)
