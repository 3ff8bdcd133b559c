"""The experience pass (issue 14): what a newcomer and a server admin meet first."""

from __future__ import annotations

import io
import logging
import re
from types import SimpleNamespace

import discord

from bot import logs
from bot.console import Console
from bot.discord_bot import make_bot, sync_commands
from bot.engine import Engine
from bot.providers.offline import OfflineLLM
from bot.report import context_bars, context_heading
from memory.records import Scope


class Tree:
    """The parts of discord.py's CommandTree that !sync uses, with what Discord holds per place."""

    def __init__(self, global_commands: int = 0):
        self.held: dict[int | None, list[str]] = {None: ["cmd"] * global_commands}  # on Discord
        self.local: dict[int, list[str]] = {}  # in the bot's tree, per server

    async def sync(self, *, guild=None):
        self.held[guild.id if guild else None] = self.local.get(guild.id, []) if guild else ["cmd"] * 3
        return self.held[guild.id if guild else None]

    async def fetch_commands(self, *, guild=None):
        return self.held.get(guild.id if guild else None, [])

    def copy_global_to(self, *, guild):
        self.local[guild.id] = ["cmd"] * 3

    def clear_commands(self, *, guild):
        self.local[guild.id] = []


async def test_sync_warns_when_a_server_would_list_every_command_twice():
    guild = SimpleNamespace(id=1)
    both = SimpleNamespace(tree=Tree(global_commands=3))
    said = await sync_commands(both, "guild", guild)
    assert said.startswith("Synced 3 command(s) to this server.") and "see each twice" in said
    assert "!sync clear-guild" in said
    said = await sync_commands(both, "global", guild)
    assert "members see each command twice" in said
    said = await sync_commands(both, "clear-guild", guild)
    assert "own copies of the commands are gone" in said and both.tree.held[1] == []
    assert "members see each command twice" not in await sync_commands(both, "global", guild)
    alone = SimpleNamespace(tree=Tree())
    assert "twice" not in await sync_commands(alone, "guild", guild)
    assert (await sync_commands(alone, "bogus", guild)).startswith("Usage: !sync guild")
    assert "only in a server" in await sync_commands(alone, "guild", None)


def test_no_voice_warning_at_start(make_config, caplog):
    discord.VoiceClient.warn_nacl = discord.VoiceClient.warn_dave = True  # as a fresh process starts
    with caplog.at_level(logging.WARNING, logger="discord.client"):
        make_bot(make_config())
    assert not [r for r in caplog.records if "voice will NOT be supported" in r.getMessage()]


def test_the_discord_bot_logs_to_its_file_and_to_the_screen(tmp_path, capsys):
    root = logging.getLogger()
    kept = list(root.handlers), root.level
    try:
        logs.configure("INFO", ["secret-token"], log_file=tmp_path / "stelis.log", screen=True)
        logging.getLogger("stelis").info("connected with secret-token")
        for handler in root.handlers:
            handler.flush()
    finally:
        root.handlers[:] = kept[0]
        root.setLevel(kept[1])
    assert "connected with ***" in (tmp_path / "stelis.log").read_text()
    assert "connected with ***" in capsys.readouterr().err


def test_context_bars_agree_with_their_heading():
    parts = {"system": 84, "memory": 0, "history": 20, "tail": 18, "output": 1024, "free": 198854}
    heading = context_heading(1, parts, 200_000, 188_604)
    assert "1146 of 200000 tokens in use" in heading and "may grow to 188604" in heading
    bars = {line.split()[0]: line for line in context_bars(parts, 200_000)}
    assert "#" in bars["system"] and "#" in bars["tail"]  # used, however small: drawn filled
    assert "#" not in bars["memory"] and "#" not in bars["free"] and "." in bars["free"]
    shown = sum(int(re.findall(r"\s(\d+)\s+[\d.]+%$", line)[0]) for line in bars.values())
    assert shown == 200_000  # the parts add up to the budget the heading names


async def test_console_double_slash_sends_a_message_and_pausing_twice_says_so(make_config):
    engine = await Engine.open(make_config(snapshots={"interval_seconds": 0}), OfflineLLM())
    script = "//etc/hosts is where the names live\n/memory pause\n/memory pause\n/memory resume\n/memory resume\n"
    out = io.StringIO()
    await Console(engine, io.StringIO(script), out, "mahe").run_loop()
    text = out.getvalue()
    root = await engine.thread_for(Scope.console())
    said = [m.content for m in await engine.store.tail(root.id, 10) if m.role == "user"]
    assert said == ["/etc/hosts is where the names live"] and "Unknown command" not in text
    assert text.count("Automatic memory updates paused here.") == 1
    assert "were already paused here; nothing changed" in text
    assert "were already running here; nothing changed" in text
    await engine.close()
