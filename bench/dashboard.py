"""The dashboard's pages over real HTTP: a channel's memory page with 1,000 versions against one with 50.

Each version holds a few hundred words, as a real one does. The memory page shows fifty versions a page, so
the ratio of the two says whether a long history costs anything; the absolute time is the target's (under a
second on this machine).
"""

from __future__ import annotations

import statistics
import tempfile
import time

import aiohttp

from bot.config import validate
from bot.dashboard.gate import ConsoleGate
from bot.dashboard.server import PAGE_SIZE, Dashboard
from bot.engine import Engine
from bot.providers.offline import OfflineLLM
from memory.records import Scope

VERSIONS = (50, 1_000)
RUNS = 7
TEXT = "\n".join(f"- ana said the lighthouse tour number {i} meets at the north pier at nine, with tea" for i in
                 range(30))


async def run() -> list[dict]:
    lines, by_size = [], {}
    for versions in VERSIONS:
        by_size[versions], oldest = await _page_ms(versions)
        lines.append({"bench": "dashboard", "versions": versions, "memory_page_p50_ms": by_size[versions],
                      "oldest_page_p50_ms": oldest})
    small, large = by_size[VERSIONS[0]], by_size[VERSIONS[-1]]
    lines.append({"bench": "dashboard", "ratio_p50_1000_50": round(large / small, 2)})
    return lines


async def _page_ms(versions: int) -> tuple[float, float]:
    """The p50 of the newest page and of the oldest, in milliseconds."""
    with tempfile.TemporaryDirectory() as tmp:
        config = validate({"data_dir": tmp, "snapshots": {"interval_seconds": 0},
                           "dashboard": {"enabled": True, "port": 0}})
        engine = await Engine.open(config, OfflineLLM())
        console = Scope.console()
        await engine.conversations.hear(console, "hello", author_name="ana")
        root = await engine.stelis.root(console)
        await engine.store.ensure_memory_channel(root)
        for _ in range(versions):
            await engine.store.add_record(engine.persona, "channel", 0, "short_term", TEXT, 1, 1)
        board = Dashboard(engine, config.dashboard, ConsoleGate(), console=console)
        await board.start()
        try:
            async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
                async with http.get(board.sign_in_link(0, 0)) as response:
                    assert response.status == 200
                newest = [await _get(http, f"{board.url}/g/0/c/0", min(versions, PAGE_SIZE)) for _ in range(RUNS)]
                last = f"{board.url}/g/0/c/0?page={(versions - 1) // PAGE_SIZE}"
                oldest = [await _get(http, last, versions - (versions - 1) // PAGE_SIZE * PAGE_SIZE)
                          for _ in range(RUNS)]
        finally:
            await board.stop()
            await engine.close()
    return round(statistics.median(newest), 1), round(statistics.median(oldest), 1)


async def _get(http: aiohttp.ClientSession, url: str, shown: int) -> float:
    started = time.perf_counter()
    async with http.get(url) as response:
        assert response.status == 200
        page = await response.text()
    assert page.count('class="version') == shown, "the versions are shown"
    return (time.perf_counter() - started) * 1000
