"""What a piece of work costs: the model calls and tokens spent inside a `metered()` block (and, for the
process as a whole, in the operators' metrics).

The engine's model is wrapped once; a block (a pulse) counts every call made in its task and in
the tasks it starts, whichever service makes them, so a budget sees chronicles and tool rounds too.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from bot import metrics
from memory.llm import LLM, LLMRequest, LLMResult, TextSink


@dataclass
class Meter:
    calls: int = 0
    tokens: int = 0


_meter: ContextVar[Meter | None] = ContextVar("stelis_meter", default=None)


@contextmanager
def metered() -> Iterator[Meter]:
    meter = Meter()
    token = _meter.set(meter)
    try:
        yield meter
    finally:
        _meter.reset(token)


class MeteredLLM:
    """The model, counting each call (a failed one too: it may have cost) into the block it runs in."""

    def __init__(self, inner: LLM):
        self.inner = inner
        self.name = inner.name

    def __getattr__(self, name: str) -> Any:  # supports_tools and whatever else a provider declares
        return getattr(self.inner, name)

    async def complete(self, request: LLMRequest, on_text: TextSink | None = None) -> LLMResult:
        meter = _meter.get()
        if meter is not None:
            meter.calls += 1
        metrics.MODEL_CALLS.labels(request.tier, request.purpose).inc()
        result = await self.inner.complete(request, on_text)
        u = result.usage
        for kind, tokens in (("input", u.input_tokens), ("output", u.output_tokens),
                             ("cache_read", u.cache_read_input_tokens), ("cache_write", u.cache_creation_input_tokens)):
            metrics.MODEL_TOKENS.labels(kind).inc(tokens)
        if meter is not None:
            meter.tokens += u.input_tokens + u.output_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens
        return result

    async def aclose(self) -> None:
        await self.inner.aclose()
