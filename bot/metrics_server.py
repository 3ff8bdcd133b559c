"""/metrics over HTTP (aiohttp, already a dependency of discord.py): Prometheus scrapes each process."""

from __future__ import annotations

import logging
from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from bot.metrics import REGISTRY

log = logging.getLogger(__name__)


class MetricsServer:
    """Serves the registry; `on_scrape` refreshes what is read rather than counted (gateway state)."""

    def __init__(self, host: str, port: int, on_scrape: Callable[[], None] = lambda: None):
        self.host, self.port = host, port
        self._on_scrape = on_scrape
        self._runner: web.AppRunner | None = None

    async def start(self) -> int:
        """Listen; the port actually bound (0 in config asks the system for a free one)."""
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        bound = self._runner.addresses[0][1]
        log.info("metrics at http://%s:%d/metrics", self.host, bound)
        return int(bound)

    async def _metrics(self, request: web.Request) -> web.Response:
        try:
            self._on_scrape()
        except Exception:  # a scrape must never take the bot down
            log.exception("refreshing metrics failed")
        return web.Response(body=generate_latest(REGISTRY), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
