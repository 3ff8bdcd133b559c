"""The container's health: the Discord bot refreshes a heartbeat file while connected; `python -m bot health`
reads its age (Docker's HEALTHCHECK)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

HEARTBEAT_FILE = "heartbeat"
HEARTBEAT_SECONDS = 30.0
STALE_SECONDS = 3 * HEARTBEAT_SECONDS  # three missed beats: not connected any more


def heartbeat_path(data_dir: Path) -> Path:
    return data_dir / HEARTBEAT_FILE


async def beat(path: Path, connected: Callable[[], bool], every: float = HEARTBEAT_SECONDS) -> None:
    """Refresh the heartbeat while `connected()` says so, until cancelled."""
    while True:
        if connected():
            await asyncio.to_thread(path.write_text, f"{time.time():.0f}\n")
        await asyncio.sleep(every)


def check(path: Path, now: float | None = None) -> tuple[bool, str]:
    """Healthy when the heartbeat is fresh; a line saying why not otherwise."""
    try:
        age = (now or time.time()) - path.stat().st_mtime
    except FileNotFoundError:
        return False, f"no heartbeat at {path}: the bot has not connected to Discord yet"
    if age > STALE_SECONDS:
        return False, f"the last heartbeat is {age:.0f} s old: the bot is not connected to Discord"
    return True, f"connected (heartbeat {age:.0f} s ago)"
