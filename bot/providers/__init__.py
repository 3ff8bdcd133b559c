"""LLM providers behind memory.llm.LLM, chosen by config."""

from __future__ import annotations

import contextlib

from bot.config import Config
from bot.providers.sdk_import import import_sdk
from memory.llm import LLM


def make_llm(config: Config) -> LLM:
    """The provider config asks for; `auto` falls back to the offline model when no key is set.

    Its SDK is imported here, in the one thread, without the aiohttp transport it would import for nothing
    (bot/providers/sdk_import.py): imported in a thread of its own while the engine started, the Anthropic SDK made
    the first reply later (1.49-1.54 s against 1.33-1.38): each of start-up's database hops handed it the
    interpreter lock and waited up to a switch interval to get it back."""
    provider = config.llm.resolved_provider()
    tiers = config.persona.models
    if provider == "anthropic":
        import_sdk("anthropic")
        from bot.providers.anthropic_llm import AnthropicLLM

        return AnthropicLLM(config.llm.anthropic, tiers)
    if provider == "openai":
        with contextlib.suppress(ImportError):  # not installed: OpenAILLM says how to install it
            import_sdk("openai")
        from bot.providers.openai_llm import OpenAILLM

        return OpenAILLM(config.llm.openai, tiers)
    from bot.providers.offline import OfflineLLM

    return OfflineLLM()
