"""Stored messages to Messages-API turns: alternating roles, user first, no empty text."""

from __future__ import annotations

from memory.llm import Block, Turn
from memory.records import Message


def speaker_text(message: Message) -> str:
    """A user message as the model sees it: the display name first, so many people can talk."""
    if message.role == "user" and message.author_name:
        return f"[{message.author_name}] {message.content}"
    return message.content


def to_turns(messages: list[Message]) -> list[Turn]:
    """Merge consecutive same-role messages, fold system notes into user turns, drop a leading reply."""
    turns: list[Turn] = []
    for message in messages:
        text = speaker_text(message).strip()
        if not text:
            continue
        role = "assistant" if message.role == "assistant" else "user"
        if message.role == "system":
            text = f"(note: {text})"
        if turns and turns[-1].role == role:
            turns[-1] = Turn(role, (*turns[-1].blocks, Block(text)))
        elif turns or role == "user":
            turns.append(Turn(role, (Block(text),)))
    return turns


def fit_budget(messages: list[Message], budget: int, overhead: int) -> list[Message]:
    """The newest messages whose stored token counts fit the budget (never re-tokenised)."""
    kept: list[Message] = []
    used = 0
    for message in reversed(messages):
        used += message.token_count + overhead
        if used > budget and kept:
            break
        kept.append(message)
    return kept[::-1]
