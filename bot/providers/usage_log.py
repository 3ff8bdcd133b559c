"""One log line per LLM call, with the cache figures that tell whether the prefix cache holds."""

from __future__ import annotations

import logging

from memory.llm import LLMRequest, Usage

log = logging.getLogger("stelis.llm")


def log_call(provider: str, model: str, request: LLMRequest, usage: Usage, elapsed: float) -> None:
    log.info(
        "llm call provider=%s model=%s tier=%s purpose=%s input=%d output=%d cache_read=%d"
        " cache_creation=%d ms=%d",
        provider, model, request.tier, request.purpose, usage.input_tokens, usage.output_tokens,
        usage.cache_read_input_tokens, usage.cache_creation_input_tokens, elapsed * 1000,
    )
