"""The runtime every command runs on: uvloop where it is installed (Linux and macOS), else asyncio's own, and the
cyclic collector's pace.

uvloop does the loop's own work (callbacks, sockets, timers) in C; a bot answering hundreds of channels at
once spends much of its time there (bench concurrency: PostgreSQL at 500 channels 1.7-1.9x a bare loop on
asyncio's, 1.5-1.7x on uvloop). Nothing else changes: the same asyncio API, the same Ctrl-C and signals.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")
# Allocations between collections of the youngest objects (Python's default: 700). A burst of replies makes
# short-lived objects by the hundred thousand: at 700 the young ones are walked some 150 times a burst of 500, and
# what survives a walk is walked again in the older generations, a full walk among them (bench concurrency, SQLite:
# 0.06-0.11 s of collection in a 0.6 s burst; 0.02 at 10,000). Cycles are freed later, never kept.
YOUNG = 10_000


def run(main: Coroutine[Any, Any, T]) -> T:
    """asyncio.run(main), on uvloop when it can be imported."""
    with _paced_collector():
        try:
            import uvloop
        except ImportError:  # Windows, where uvloop does not build: asyncio's loop does the same, a little slower
            return asyncio.run(main)
        return uvloop.run(main)


@contextmanager
def _paced_collector() -> Iterator[None]:
    before = gc.get_threshold()
    gc.set_threshold(YOUNG, *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)
