"""Every request inside the model's context: sized before it is sent, its answer's room fitted, and the
token estimate calibrated on what the server counted.

Stelis counts with cl100k; a small local model's tokenizer counts 9-31 % more (shared/findings/
real-models.md). Each answer's usage says how much more this server counts, and the largest recent
ratio is what the next request is sized with. A request that cannot fit is refused here with
RequestTooLarge, so the caller sends less (summaries in smaller parts); the server is never asked.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from bot.providers.server_facts import ServerFacts
from memory.budget import SAFETY
from memory.context import tool_tokens
from memory.llm import LLM, LLMRequest, LLMResult, RequestTooLarge, TextSink
from memory.tokens import MESSAGE_OVERHEAD, cached_tokens

if TYPE_CHECKING:
    from bot.config import Config

log = logging.getLogger(__name__)
MIN_CONTEXT = 2_048  # what llm.context_tokens allows at least
UNSAID_LOCAL_CONTEXT = 4_096  # planned for a local server that does not say its context (Ollama's default)
FIRST_RATIO = 1 / (1 - SAFETY)  # server tokens per cl100k token, until a server counts: what replies plan with
STEP = 0.05  # the planning follows the ratio in steps, upwards only: a window's cuts stay where they are
RATIOS_KEPT = 50  # the ratio is the largest of these many recent answers' ...
RATIO_SLACK = 1.03  # ... with this much to spare
MIN_OUTPUT = 64  # an answer's room is cut to what the context leaves, down to this


_TOO_LONG = ("context length", "context window", "maximum context", "too many tokens", "exceeds the context",
             "prompt is too long", "exceed_context_size")


_SERVED = (re.compile(r"(\d+) in the messages"),  # OpenAI, vLLM, llama-cpp-python
           re.compile(r"prompt is too long: (\d+) tokens"),  # Anthropic
           re.compile(r"n_prompt_tokens\W+(\d+)"))  # llama.cpp's llama-server


def served_tokens(message: str) -> int | None:
    """The server's count of a prompt it refused as too long, where its message says it."""
    for pattern in _SERVED:
        found = pattern.search(message)
        if found:
            return int(found.group(1))
    return None


def too_long(message: str) -> bool:
    """Does a server's 400 say the request did not fit the model's context (llama.cpp, vLLM, Ollama, OpenAI)?"""
    lowered = message.lower()
    return any(phrase in lowered for phrase in _TOO_LONG)


def request_tokens(request: LLMRequest) -> int:
    """A request's input in cl100k tokens, counted as the planner counts it: each block with its framing,
    the tool definitions as JSON."""
    blocks = [*request.system, *(b for t in request.turns for b in t.blocks)]
    texts = [b.text if b.kind != "tool_use" else json.dumps(b.tool_input or {}) for b in blocks]
    return sum(cached_tokens(x) for x in texts if x) + MESSAGE_OVERHEAD * len(blocks) + tool_tokens(request.tools)


class FittedLLM:
    """The model, asked only what fits its context."""

    def __init__(self, inner: LLM, context_tokens: int, on_planned: Callable[[float], None] | None = None):
        self.inner = inner
        self.name = inner.name
        self.context_tokens = context_tokens
        self.ratio = FIRST_RATIO
        self._ratios: deque[float] = deque(maxlen=RATIOS_KEPT)
        self.planned = FIRST_RATIO  # the ratio replies are planned with (a step, only ever raised)
        self.on_planned = on_planned  # told when the ratio is raised

    def __getattr__(self, name: str) -> Any:  # supports_tools and whatever else a provider declares
        return getattr(self.inner, name)

    async def complete(self, request: LLMRequest, on_text: TextSink | None = None) -> LLMResult:
        counted = request_tokens(request)
        needed = int(counted * self.ratio) + 1
        room = self.context_tokens - needed
        if room < min(MIN_OUTPUT, request.max_tokens):
            raise RequestTooLarge(f"the request needs about {needed} tokens of the model's {self.context_tokens} "
                                  "before its answer", needed)
        try:
            result = await self.inner.complete(replace(request, max_tokens=min(request.max_tokens, room)), on_text)
        except RequestTooLarge as refused:  # the server counts more than this process thought: how much more
            self.learn(refused.tokens / counted if refused.tokens and counted else self.ratio * 1.1)
            raise
        used = result.usage
        served = used.input_tokens + used.cache_read_input_tokens + used.cache_creation_input_tokens
        if served and counted and not used.estimated:
            self.learn(served / counted)
        return result

    def learn(self, ratio: float) -> None:
        """The server counted `ratio` tokens for each estimated one (an answer's usage, a /tokenize count)."""
        self._ratios.append(ratio)
        self.ratio = min(2.0, max(1.0, max(self._ratios) * RATIO_SLACK))
        if self.ratio > self.planned:
            self.planned = math.ceil(self.ratio / STEP) * STEP
            if self.on_planned is not None:
                self.on_planned(self.planned)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def fit_to_server(config: Config, llm: LLM) -> tuple[Config, float | None]:
    """Ask a provider that can what its server is: the config fitted to its context, and how many tokens it
    counts for each estimated one (None: not said)."""
    discover = getattr(llm, "discover", None)
    if discover is None:
        return config, None
    facts: ServerFacts = await discover()
    return to_server(config, facts), facts.tokens_per_estimate


def to_server(config: Config, facts: ServerFacts) -> Config:
    """The config with the server's context where it says one: taken when none was set, and when the one set is
    more than the server runs with (it would refuse what does not fit)."""
    llm = config.llm
    told = facts.context_tokens
    # config.yaml lists every key: a size is chosen when it is not the default (Anthropic's context).
    chosen = llm.context_tokens != type(llm).model_fields["context_tokens"].default
    if told is None:
        if chosen or llm.resolved_provider() != "openai":
            return config
        # A local server rarely runs with the 200,000 tokens of Anthropic's models; one that does not say is
        # planned for what small servers run with.
        told = UNSAID_LOCAL_CONTEXT if llm.openai.local() else llm.context_tokens
        log.warning("the model server does not say its context size: requests are planned for %d tokens; set "
                    "llm.context_tokens (STELIS_LLM_CONTEXT_TOKENS) to the server's", told)
    if chosen and llm.context_tokens <= told:
        return config
    if chosen:
        log.warning("llm.context_tokens is %d but the model server runs with %d: planning with %d",
                    llm.context_tokens, told, told)
    if told < MIN_CONTEXT:
        log.error("the model server runs with a %d-token context; Stelis needs %d: start it with a larger one",
                  told, MIN_CONTEXT)
    size = max(told, MIN_CONTEXT)
    output = min(llm.max_output_tokens, size // 4)
    return config.model_copy(update={"llm": llm.model_copy(update={"context_tokens": size,
                                                                   "max_output_tokens": output})})
