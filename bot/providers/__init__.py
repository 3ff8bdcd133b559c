"""LLM providers behind memory.llm.LLM, chosen by config."""

from __future__ import annotations

from bot.config import Config
from memory.llm import LLM


def make_llm(config: Config) -> LLM:
    """The provider config asks for; `auto` falls back to the offline model when no key is set."""
    provider = config.llm.resolved_provider()
    tiers = config.persona.models
    if provider == "anthropic":
        from bot.providers.anthropic_llm import AnthropicLLM

        return AnthropicLLM(config.llm.anthropic, tiers)
    if provider == "openai":
        from bot.providers.openai_llm import OpenAILLM

        return OpenAILLM(config.llm.openai, tiers)
    from bot.providers.offline import OfflineLLM

    return OfflineLLM()
