"""Neutral summarisation in chunks: a record too long for one request is summarised part by part,
and the part summaries are combined, never truncated."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

from memory.llm import LLM, Block, LLMRequest, RequestTooLarge, Tier, Turn
from memory.templates import render
from memory.tokens import count_tokens
from memory.vetting import vetted

COMBINE_INSTRUCTION = (
    "These are summaries of consecutive parts of one record, oldest first, each under a [part N of M] "
    "line. Combine them into one summary that keeps every fact they hold, with who said it and when."
)
MAX_COMBINE_ROUNDS = 4
MIN_CHUNK_TOKENS = 200  # parts are halved while a request does not fit the model's context, down to this
MIN_PART_TOKENS = 64  # the least a part's summary may take


@dataclass(frozen=True)
class Line:
    text: str
    tokens: int

    @classmethod
    def of(cls, text: str) -> Line:
        return cls(text, count_tokens(text))


async def summarise(llm: LLM, instruction: str, lines: list[Line], *, chunk_tokens: int, max_tokens: int,
                    tier: Tier = "standard", context: Sequence[str] = (), in_parts: bool = True) -> str:
    """One summary of all lines (each answer checked: memory/vetting.py); raises LLMError if the model fails.

    The request that writes the whole summary (not each part) is told the first of `context` that fits the model's
    context (the most first: earlier versions, pins). A part too large for it is summarised in smaller parts
    instead, down to MIN_CHUNK_TOKENS; not `in_parts`, the lines go in one request or RequestTooLarge is raised.
    """
    if not in_parts:
        return await _whole(llm, instruction, lines, context, max_tokens, tier)
    while True:
        try:
            return await _summarise(llm, instruction, lines, chunk_tokens, max_tokens, tier, context)
        except RequestTooLarge:
            if chunk_tokens <= MIN_CHUNK_TOKENS:
                raise
            chunk_tokens = max(MIN_CHUNK_TOKENS, chunk_tokens // 2)


async def _summarise(llm: LLM, instruction: str, lines: list[Line], chunk_tokens: int, max_tokens: int,
                     tier: Tier, context: Sequence[str]) -> str:
    parts: list[str] = []
    for _ in range(MAX_COMBINE_ROUNDS):
        chunks = chunk(lines, chunk_tokens)
        if len(chunks) == 1:
            return await _whole(llm, instruction, chunks[0], context, max_tokens, tier)
        # A part's summary is at most half its part, so each round halves what is combined (a summary cut
        # off at a larger max_tokens is refused and replaced by an extractive one just as large: no progress).
        part_tokens = max(MIN_PART_TOKENS, min(max_tokens, chunk_tokens // 2))
        parts = [
            await _request(llm, instruction, part, (i + 1, len(chunks)), part_tokens, tier)
            for i, part in enumerate(chunks)
        ]
        lines = [Line.of(f"[part {i + 1} of {len(parts)}]\n{text}") for i, text in enumerate(parts)]
        instruction = COMBINE_INSTRUCTION
    return "\n\n".join(parts)  # the model keeps writing long parts: keep them all, without the request's headers


async def _whole(llm: LLM, instruction: str, lines: list[Line], context: Sequence[str], max_tokens: int,
                 tier: Tier) -> str:
    """The request that writes the whole summary, with as much context as the model's context leaves room for
    (the parts summarised already are not summarised again for it)."""
    told = [f"{instruction}\n\n{extra}" if extra else instruction for extra in context] or [instruction]
    for asked in told[:-1]:
        with contextlib.suppress(RequestTooLarge):
            return await _request(llm, asked, lines, None, max_tokens, tier)
    return await _request(llm, told[-1], lines, None, max_tokens, tier)


def chunk(lines: list[Line], chunk_tokens: int) -> list[list[Line]]:
    """Consecutive groups of lines within the token size; a line longer than that is split by characters."""
    chunks: list[list[Line]] = [[]]
    used = 0
    for line in _split_long(lines, chunk_tokens):
        if chunks[-1] and used + line.tokens > chunk_tokens:
            chunks.append([])
            used = 0
        chunks[-1].append(line)
        used += line.tokens
    return chunks


def _split_long(lines: list[Line], chunk_tokens: int) -> list[Line]:
    out = []
    for line in lines:
        if line.tokens <= chunk_tokens:
            out.append(line)
            continue
        pieces = -(-line.tokens // chunk_tokens)
        size = -(-len(line.text) // pieces)
        out.extend(Line.of(line.text[i:i + size]) for i in range(0, len(line.text), size))
    return out


async def _request(llm: LLM, instruction: str, lines: list[Line], part: tuple[int, int] | None,
                   max_tokens: int, tier: Tier) -> str:
    transcript = "\n".join(x.text for x in lines)
    text = render("summarise_request.md.j2", instruction=instruction, transcript=transcript,
                  part=part[0] if part else None, parts=part[1] if part else None)
    request = LLMRequest(
        system=(Block(render("summarise_system.md.j2")),), turns=(Turn.text("user", text),),
        max_tokens=max_tokens, tier=tier, purpose="summary",
    )
    return await vetted(llm, request, transcript, "summary")
