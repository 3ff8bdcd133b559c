"""The offline model: deterministic, no network; extractive summaries and plain-spoken replies."""

from __future__ import annotations

import re
import time

from bot.providers.usage_log import log_call
from memory.identifiers import identifiers, sentences
from memory.llm import LLMRequest, LLMResult, TextSink, Turn, Usage
from memory.tokens import count_tokens

OFFLINE_TAG = "[offline model]"
TAIL_MARK = "[Now: "  # the volatile tail (templates/tail.md.j2) is context, not something anyone said

_TRANSCRIPT = re.compile(r"<transcript>\n?(.*?)\n?</transcript>", re.DOTALL)
_SUMMARY_BUDGET = 600  # tokens; the identifier list may go past it, never lose a name


def extractive_summary(text: str, budget: int = _SUMMARY_BUDGET) -> str:
    """Within `budget` tokens: quote the sentences that cover the most identifiers, then list the rest.

    Identifiers come first: quotes get only what the full list leaves, and when even the list does not
    fit, it says how many names were left out rather than dropping them silently.
    """
    parts = sentences(text)
    if not parts:
        return "(nothing to summarise)"
    names = identifiers(text)
    quote_budget = budget - count_tokens("Also mentioned: " + ", ".join(names)) - 8
    ids = [set(identifiers(s)) for s in parts]
    candidates = set(range(len(parts)))
    covered: set[str] = set()
    chosen: list[int] = []
    used = 0
    while candidates:
        best = max(candidates, key=lambda i: (len(ids[i] - covered), -i))
        candidates.discard(best)
        if not ids[best] - covered:
            break
        cost = count_tokens(parts[best])
        if used + cost <= quote_budget:
            chosen.append(best)
            covered |= ids[best]
            used += cost
    summary = "\n".join(parts[i] for i in sorted(chosen))
    present = set(identifiers(summary))  # not substring tests: "0" is not kept by "20"
    missing = [x for x in names if x not in present]
    listed: list[str] = []
    used = count_tokens(summary) + 4
    for name in missing:
        cost = count_tokens(name) + 1
        if used + cost > budget - 6:
            break
        listed.append(name)
        used += cost
    if listed:
        summary += ("\n" if summary else "") + "Also mentioned: " + ", ".join(listed)
    if len(listed) < len(missing):
        summary += f" (+{len(missing) - len(listed)} more)"
    return summary or parts[0]


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
    """Say plainly that this is the offline model, and show what the persona remembers."""
    persona = request.persona or "I"
    said = _user_lines(request.turns)
    lines = [
        f"{OFFLINE_TAG} {persona} here. No language model is configured, so this reply is assembled "
        "offline from memory rather than written by a model.",
        f"You said: \"{_clip(_unprefixed(said[-1]) if said else '', 200)}\"",
    ]
    if len(said) > 1:
        lines.append(f"I remember {len(said) - 1} earlier message(s) from people here; the latest:")
        lines.extend(f"  - {_clip(line, 120)}" for line in said[-4:-1])
    else:
        lines.append("This is the start of our conversation as far as I remember.")
    memories = [b.text for b in request.system[1:] if b.text.strip()]
    if memories:
        lines.append("What my memory holds:")
        lines.extend(f"  - {_clip(m.strip().splitlines()[0], 120)}" for m in memories)
    return "\n".join(lines)


def _user_lines(turns: tuple[Turn, ...]) -> list[str]:
    texts = [b.text for t in turns if t.role == "user" for b in t.blocks if not b.text.startswith(TAIL_MARK)]
    return [ln for text in texts for ln in text.splitlines() if ln.strip()]


def _unprefixed(line: str) -> str:
    """Drop the "[name] " speaker prefix the engine puts on user messages."""
    return re.sub(r"^\[[^\]\n]{1,80}\] ", "", line)


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
