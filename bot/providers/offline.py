"""The offline model: deterministic, no network; extractive summaries and plain-spoken replies."""

from __future__ import annotations

import re
import time

from bot.providers.extractive import OFFLINE_TAG, extractive_summary
from bot.providers.usage_log import log_call
from memory.llm import LLMRequest, LLMResult, TextSink, Turn, Usage
from memory.tokens import count_tokens

VOLATILE_MARKS = ("[Now: ", "[Recall", "[Memory Summary]")  # context around the conversation, not messages

_TRANSCRIPT = re.compile(r"<transcript>\n?(.*?)\n?</transcript>", re.DOTALL)


class OfflineLLM:
    name = "offline"

    async def complete(self, request: LLMRequest, on_text: TextSink | None = None) -> LLMResult:
        started = time.monotonic()
        if request.purpose == "summary":
            text = extractive_summary(_material(request.turns), request.max_tokens)
        else:
            text = _reply(request)
        if on_text:
            on_text(text)
        usage = Usage(
            input_tokens=sum(count_tokens(b.text) for b in request.system)
            + count_tokens(_material(request.turns)),
            output_tokens=count_tokens(text),
        )
        log_call(self.name, "offline", request, usage, time.monotonic() - started)
        return LLMResult(text=text, usage=usage, model="offline", stop_reason="end_turn")

    async def aclose(self) -> None:
        return None


def _material(turns: tuple[Turn, ...]) -> str:
    """What a summary request asks about: the transcript inside its tags, else all user text."""
    text = "\n".join(b.text for t in turns if t.role == "user" for b in t.blocks if b.text)
    inside = _TRANSCRIPT.search(text)
    return inside.group(1) if inside else text


def _reply(request: LLMRequest) -> str:
    """Say plainly, in one short line, that no model wrote this; quote nothing, so memory stays clean."""
    persona = request.persona or "I"
    earlier = _history_blocks(request.turns) - 1
    remembered = f"I remember {earlier} earlier message(s) here" if earlier > 0 else "this is our first exchange"
    memory = " and what my memory holds" if any(b.text.strip() for b in request.system[1:]) else ""
    return (f"{OFFLINE_TAG} {persona} here: no language model is configured, so I can listen and remember "
            f"but not answer ({remembered}{memory}; /context shows what a model would see).")


def _history_blocks(turns: tuple[Turn, ...]) -> int:
    """Messages the request carries: text blocks that are not the tail, recall or a summary."""
    return sum(1 for t in turns for b in t.blocks
               if b.kind == "text" and b.text and not b.text.startswith(VOLATILE_MARKS))
