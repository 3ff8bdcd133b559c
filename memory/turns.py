"""Rendered messages to Messages-API turns: alternating roles, user first, tool calls answered, no empty text.

Tool calls are stored as an assistant message with metadata `tool_use` (a list of {id, name, input})
followed by `tool` messages with metadata `tool_use_id`. A call whose result is not stored right
after it, or a result without its call, is shown as plain text so the request stays valid.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from memory.llm import Block, CacheTTL, LLMResult, ToolCall, Turn
from memory.records import Message, NewMessage

CONTINUATION = "[The conversation continues from before this point.]"


@dataclass(frozen=True)
class Piece:
    """One block on its way into a turn."""

    role: Literal["user", "assistant"]
    block: Block


def to_pieces(messages: Sequence[Message], texts: Sequence[str]) -> list[Piece]:
    """Blocks for messages whose rendered texts are given (same order)."""
    pieces: list[Piece] = []
    answered: set[str] = set()
    for i, (message, text) in enumerate(zip(messages, texts, strict=True)):
        if message.role == "assistant":
            calls = list(message.metadata.get("tool_use") or [])
            results = _following_results(messages, i)
            answered = {c["id"] for c in calls} if calls and {c["id"] for c in calls} <= results else set()
            if text.strip():
                pieces.append(Piece("assistant", Block(text)))
            for call in calls:
                if answered:
                    pieces.append(Piece("assistant", Block(kind="tool_use", tool_id=call["id"], tool_name=call["name"],
                                                           tool_input=dict(call.get("input") or {}))))
                else:
                    pieces.append(Piece("assistant", Block(f"[called tool {call['name']}; no result was recorded]")))
        elif message.role == "tool":
            tool_id = message.metadata.get("tool_use_id")
            if tool_id in answered:
                pieces.append(Piece("user", Block(text or "(empty result)", kind="tool_result", tool_id=tool_id)))
            elif text.strip():
                pieces.append(Piece("user", Block(f"[tool result]\n{text}")))
        elif text.strip():
            answered = set()
            pieces.append(Piece("user", Block(text)))
    return pieces


def mark(pieces: list[Piece], index: int, ttl: CacheTTL = "5m") -> None:
    """Put a cache breakpoint on one piece's block."""
    pieces[index] = replace(pieces[index], block=replace(pieces[index].block, cache=ttl))


def to_turns(pieces: Sequence[Piece]) -> list[Turn]:
    """Merge consecutive same-role pieces into turns; open with a user turn."""
    turns: list[Turn] = []
    if pieces and pieces[0].role == "assistant":
        turns.append(Turn("user", (Block(CONTINUATION),)))
    for piece in pieces:
        if turns and turns[-1].role == piece.role:
            turns[-1] = Turn(piece.role, (*turns[-1].blocks, piece.block))
        else:
            turns.append(Turn(piece.role, (piece.block,)))
    return turns


def _following_results(messages: Sequence[Message], i: int) -> set[str]:
    ids = set()
    for j in range(i + 1, len(messages)):  # not a slice: that would copy the rest of the window per reply
        if messages[j].role != "tool":
            break
        ids.add(str(messages[j].metadata.get("tool_use_id")))
    return ids


def tool_call_message(result: LLMResult, author_name: str | None = None) -> NewMessage:
    """A model's answer that calls tools, stored as the assistant message the renderer above reads back."""
    calls = [{"id": c.id, "name": c.name, "input": c.input} for c in result.tool_calls]
    return NewMessage("assistant", result.text, author_name=author_name, metadata={"tool_use": calls})


def tool_result_message(call: ToolCall, output: str, *, lookup: bool = False) -> NewMessage:
    """One tool's result, stored right after the call it answers; a look-up's is left out of summaries."""
    metadata: dict[str, object] = {"tool_use_id": call.id, "tool_name": call.name}
    if lookup:
        metadata["lookup"] = True
    return NewMessage("tool", output, metadata=metadata)
