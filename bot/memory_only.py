"""A process that only writes memory (`python -m bot memory-worker`): no chat, the due-scan and its timers.

Several of them (and the bots) may share one PostgreSQL database: each claims different conversations.
"""

from __future__ import annotations

import asyncio
import logging
import signal

from bot import metrics
from bot.config import Config
from bot.engine import Engine
from bot.metrics_server import MetricsServer

log = logging.getLogger(__name__)

IDLE_POLL_SECONDS = 0.5  # --until-idle: how often to look again while other processes hold the last work


async def run_memory_worker(config: Config, *, until_idle: bool) -> int:
    engine = await Engine.open(config)
    try:
        if until_idle:
            updated = await drain(engine)
            log.info("nothing due: %d memory update(s) written by this process", updated)
            return 0
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await engine.start_memory()
        server = None
        if config.metrics.port is not None:  # the memory work's own figures: backlog, lease conflicts, pool
            server = MetricsServer(config.metrics.host, config.metrics.port,
                                   lambda: metrics.read_pool(engine.database_usage()))
            await server.start()
        log.info("memory worker %s running; SIGTERM stops it", engine.store.owner)
        await stop.wait()
        if server is not None:
            await server.stop()
        return 0
    finally:
        await engine.close()


async def drain(engine: Engine) -> int:
    """Run due-scans until nothing is due anywhere (work other processes hold is waited for: their leases
    run out if they crash); how many updates this process wrote."""
    written = 0
    while True:
        outcomes = await engine.memory.run_due()
        written += sum(o.short_term is not None for o in outcomes)
        if not outcomes:
            if not await engine.store.due_channels(engine.clock(), 1):
                return written
            await asyncio.sleep(IDLE_POLL_SECONDS)
