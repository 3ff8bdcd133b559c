"""What a piece of work costs: the model calls and tokens spent inside a `metered()` block (and, for the
process as a whole, in the operators' metrics).

The engine's model is wrapped once; a block (a pulse) counts every call made in its task and in
the tasks it starts, whichever service makes them, so a budget sees chronicles and tool rounds too.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from bot import metrics
from bot.fitting import request_tokens
from memory.llm import LLM, LLMError, LLMRequest, LLMResult, TextSink

INPUT_MARGIN = 1.3  # a server counts up to this much more than cl100k's estimate (shared/findings/real-models.md)


class BudgetSpent(LLMError):
    """A call that would pass the budget of the block it runs in: it is not made."""

    def __init__(self, notice: str):
        super().__init__(notice, retryable=False)


@dataclass
class Meter:
    """What a block spent, and, when it has a budget, what it may still spend (reserved work held back)."""

    calls: int = 0
    tokens: int = 0
    call_limit: int | None = None
    token_limit: int | None = None
    reserved_calls: int = 0  # held back for summaries a started session will need (its chronicle)
    reserved_tokens: int = 0

    def reserve(self, calls: int, tokens: int) -> bool:
        """Hold back room for work that must be done later; False (nothing held) if there is no such room."""
        if not self.fits(calls, tokens):
            return False
        self.reserved_calls += calls
        self.reserved_tokens += tokens
        return True

    def admit(self, request: LLMRequest) -> None:
        """Count a call in before it is made, or raise BudgetSpent; a summary may use what was reserved."""
        cost = estimate(request) if self.token_limit is not None else 0  # only a token budget needs it
        if request.purpose == "summary" and self.reserved_calls:
            self.reserved_calls -= 1
            self.reserved_tokens = max(0, self.reserved_tokens - cost)
        if not self.fits(1, cost):
            raise BudgetSpent(f"today's budget has no room for another model call ({self.calls} of "
                              f"{self.call_limit} calls, {self.tokens} of {self.token_limit} tokens spent"
                              + (", the rest held for a chronicle)" if self.reserved_calls else ")"))
        self.calls += 1

    def fits(self, calls: int, tokens: int) -> bool:
        """Would this much more leave what is reserved within the limits?"""
        if self.call_limit is not None and self.calls + self.reserved_calls + calls > self.call_limit:
            return False
        return self.token_limit is None or self.tokens + self.reserved_tokens + tokens <= self.token_limit


def estimate(request: LLMRequest) -> int:
    """The most a request can cost: its input (with the margin a server may count over ours) and its output."""
    return int(request_tokens(request) * INPUT_MARGIN) + request.max_tokens


_meter: ContextVar[Meter | None] = ContextVar("stelis_meter", default=None)


@contextmanager
def metered(calls: int | None = None, tokens: int | None = None) -> Iterator[Meter]:
    """Count the calls made in this block (and the tasks it starts); with limits, refuse any that would pass."""
    meter = Meter(call_limit=calls, token_limit=tokens)
    token = _meter.set(meter)
    try:
        yield meter
    finally:
        _meter.reset(token)


class MeteredLLM:
    """The model, counting each call (a failed one too: it may have cost) into the block it runs in."""

    def __init__(self, inner: LLM, on_spent: Callable[[LLMRequest, LLMResult], Awaitable[None]] | None = None):
        self.inner = inner
        self.name = inner.name
        self._on_spent = on_spent  # where each call's usage is kept (the Spending service)

    def __getattr__(self, name: str) -> Any:  # supports_tools and whatever else a provider declares
        return getattr(self.inner, name)

    async def complete(self, request: LLMRequest, on_text: TextSink | None = None) -> LLMResult:
        meter = _meter.get()
        if meter is not None:
            meter.admit(request)
        metrics.MODEL_CALLS.labels(request.tier, request.purpose).inc()
        result = await self.inner.complete(request, on_text)
        u = result.usage
        for kind, tokens in (("input", u.input_tokens), ("output", u.output_tokens),
                             ("cache_read", u.cache_read_input_tokens), ("cache_write", u.cache_creation_input_tokens)):
            metrics.MODEL_TOKENS.labels(kind).inc(tokens)
        if meter is not None:
            meter.tokens += u.input_tokens + u.output_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens
        if self._on_spent is not None:
            await self._on_spent(request, result)
        return result

    async def aclose(self) -> None:
        await self.inner.aclose()


def current() -> Meter | None:
    """The meter of the block this code runs in, if any."""
    return _meter.get()
