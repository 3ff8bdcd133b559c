"""LLM providers behind memory.llm.LLM, chosen by config."""

from __future__ import annotations

import contextlib
import importlib
import threading

from bot.config import Config
from memory.llm import LLM

MODULES = {"anthropic": "bot.providers.anthropic_llm", "openai": "bot.providers.openai_llm"}


def preload(config: Config) -> None:
    """Import the provider's SDK in the background while the rest starts (the Anthropic SDK alone takes most of a
    second to import); make_llm then finds it imported, or waits for the import under way."""
    module = MODULES.get(config.llm.resolved_provider())
    if module is not None:
        threading.Thread(target=_import, args=(module,), name="preload-provider", daemon=True).start()


def _import(module: str) -> None:
    with contextlib.suppress(ImportError):  # a missing extra: make_llm imports it again and says what to install
        importlib.import_module(module)


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
