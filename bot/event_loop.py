"""The event loop every command runs on: uvloop where it is installed (Linux and macOS), else asyncio's own.

uvloop does the loop's own work (callbacks, sockets, timers) in C; a bot answering hundreds of channels at
once spends much of its time there (bench concurrency: PostgreSQL at 500 channels 1.7-1.9x a bare loop on
asyncio's, 1.5-1.7x on uvloop). Nothing else changes: the same asyncio API, the same Ctrl-C and signals.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run(main: Coroutine[Any, Any, T]) -> T:
    """asyncio.run(main), on uvloop when it can be imported."""
    try:
        import uvloop
    except ImportError:  # Windows, where uvloop does not build: asyncio's loop does the same, a little slower
        return asyncio.run(main)
    return uvloop.run(main)
