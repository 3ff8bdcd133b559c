"""A provider's SDK imported without its optional aiohttp transport, which no provider here uses.

The Anthropic and OpenAI SDKs import their vendored aiohttp transport (their `aiohttp` extra) whenever aiohttp is
installed, as it is for discord.py; each provider talks through its SDK's default HTTP client instead. In the
console, which never imports Discord, that was aiohttp's whole import: 0.13-0.27 s of the first reply with the
Anthropic SDK (bench first_reply). While the SDK imports, the transport's module is marked missing, so the SDK makes
the stand-in it has for an installation without the extra; an SDK that cannot do without the module is imported
again as it is.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType


def import_sdk(name: str) -> ModuleType:
    """The SDK `name`, its aiohttp transport left unimported where the SDK allows; ImportError if it is missing."""
    transport = f"{name}._vendor.httpx_aiohttp"
    if name in sys.modules or transport in sys.modules:
        return importlib.import_module(name)
    sys.modules[transport] = None  # type: ignore[assignment]  # the import system's mark of a missing module
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        if exc.name == name:  # the SDK itself is not installed
            raise
    finally:
        if sys.modules.get(transport, ...) is None:
            del sys.modules[transport]
    return importlib.import_module(name)
