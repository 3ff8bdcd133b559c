"""A loopback aiohttp server for a test, on a free port: what an OpenAI-compatible endpoint answers."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.Response]]


@asynccontextmanager
async def serving(routes: dict[tuple[str, str], Handler]) -> AsyncIterator[str]:
    """Serve (method, path) -> handler on 127.0.0.1; yields the base URL (`http://127.0.0.1:PORT/v1`)."""
    app = web.Application()
    for (method, path), handler in routes.items():
        app.router.add_route(method, path, handler)
    runner = web.AppRunner(app)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        host, port = runner.addresses[0][:2]
        yield f"http://{host}:{port}/v1"
    finally:
        await runner.cleanup()
