"""Operators' metrics (issue 15, point 6): what a process did, scraped at /metrics."""

from __future__ import annotations

import aiohttp
import discord.ext.test as dpytest

from bot.engine import Engine
from bot.metrics import REGISTRY
from bot.metrics_server import MetricsServer
from bot.providers.offline import OfflineLLM
from memory.records import Scope
from tests.discord_helpers import start_bot


def value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def test_replies_model_calls_and_memory_work_are_counted_and_served(make_config):
    engine = await Engine.open(make_config(snapshots={"interval_seconds": 0}), OfflineLLM())
    replies, calls = value("stelis_replies_total", outcome="ok"), value("stelis_model_calls_total", tier="standard",
                                                                        purpose="reply")
    tokens = value("stelis_model_tokens_total", kind="input")
    here = Scope.console()
    await engine.conversations.hear(here, "hello", author_name="mahe")
    await engine.conversations.reply((await engine.stelis.root(here)).id)
    assert value("stelis_replies_total", outcome="ok") == replies + 1
    assert value("stelis_model_calls_total", tier="standard", purpose="reply") == calls + 1
    assert value("stelis_model_tokens_total", kind="input") > tokens
    assert value("stelis_reply_seconds_count") >= 1
    await engine.memory.run_due()
    assert value("stelis_memory_due_conversations") == 0  # nothing due right after a message

    scraped: list[bool] = []
    server = MetricsServer("127.0.0.1", 0, lambda: scraped.append(True))
    port = await server.start()
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}/metrics") as response:
        body = await response.text()
        assert response.status == 200 and response.headers["Content-Type"].startswith("text/plain")
    await server.stop()
    assert scraped == [True] and 'stelis_replies_total{outcome="ok"}' in body
    await engine.close()


async def test_the_discord_bot_reports_each_shards_gateway(make_config):
    config = make_config(snapshots={"interval_seconds": 0})
    engine = await Engine.open(config, OfflineLLM())
    bot = await start_bot(engine, config)
    bot.gateway_metrics()
    assert REGISTRY.get_sample_value("stelis_gateway_connected", {"shard": "0"}) == (1.0 if bot.is_ready() else 0.0)
    assert REGISTRY.get_sample_value("stelis_database_connections", {"state": "size"}) == 1.0  # one SQLite file
    await dpytest.empty_queue()
    await engine.close()


def test_a_process_runs_its_share_of_the_shards(make_config, tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    import pytest
    from discord.ext import commands

    from bot.config import ConfigError, shard_ids
    from bot.discord_bot import make_bot

    assert shard_ids("0-3") == [0, 1, 2, 3] and shard_ids("0,2, 5") == [0, 2, 5] and shard_ids("3-1") is None
    bot = make_bot(make_config(discord={"shards": "4-7", "shard_count": 16}))
    assert isinstance(bot, commands.AutoShardedBot) and bot.shard_ids == [4, 5, 6, 7] and bot.shard_count == 16
    assert not isinstance(make_bot(make_config()), commands.AutoShardedBot)
    with pytest.raises(ConfigError, match=r"discord\.shards needs discord\.shard_count"):
        make_config(discord={"shards": "0-3"})
    with pytest.raises(ConfigError, match="goes past shard_count 4"):
        make_config(discord={"shards": "2-5", "shard_count": 4})
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STELIS_", "ANTHROPIC_", "DISCORD_"))}
    env["STELIS_DATA_DIR"] = str(tmp_path)
    shown = subprocess.run([sys.executable, "-m", "bot", "--shards", "0-3", "--shard-count", "16", "check-config"],
                           capture_output=True, text=True, env=env, timeout=60,
                           cwd=Path(__file__).resolve().parent.parent)
    assert shown.returncode == 0 and '"shards": "0-3"' in shown.stdout and '"shard_count": 16' in shown.stdout


def test_json_log_lines_carry_the_ids_they_were_written_under(tmp_path):
    import json
    import logging

    from bot import logs

    root = logging.getLogger()
    kept = list(root.handlers), root.level
    try:
        logs.configure("INFO", ["sk-secret-key"], log_file=tmp_path / "stelis.log", json_lines=True)
        with logs.tagged(guild=1, channel=10), logs.tagged(thread=7):
            logging.getLogger("stelis.test").warning("model failed with sk-secret-key\nsecond line")
        logging.getLogger("stelis.test").info("untagged")
        for handler in root.handlers:
            handler.flush()
    finally:
        root.handlers[:] = kept[0]
        root.setLevel(kept[1])
    first, second = (json.loads(line) for line in (tmp_path / "stelis.log").read_text().splitlines())
    assert first["guild"] == 1 and first["channel"] == 10 and first["thread"] == 7 and first["level"] == "WARNING"
    assert first["message"] == "model failed with ***\nsecond line" and "sk-secret" not in json.dumps(first)
    assert "guild" not in second and second["message"] == "untagged"
