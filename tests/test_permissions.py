"""Discord permissions (issue 26, point 11): the invite asks for what the features use; a missing one is said
once (the log and /help in that channel), and what it stops is skipped, never failed silently (dpytest)."""

from __future__ import annotations

import asyncio
import logging
import re
from pathlib import Path

import discord
import discord.ext.test as dpytest
import pytest

from bot.engine import Engine
from bot.providers.offline import OfflineLLM
from cogs.permissions import NEEDED, USES, invite_url
from memory.records import Scope
from tests.discord_helpers import channel, member, mention, post, start_bot
from tests.test_slash import run, said

README = Path(__file__).resolve().parent.parent / "README.md"


def test_the_invite_asks_for_every_permission_a_feature_uses():
    link = re.search(r"permissions=(\d+)", README.read_text(encoding="utf-8"))
    assert link is not None and int(link.group(1)) == NEEDED.value
    granted = discord.Permissions(NEEDED.value)
    for used in ("view_channel", "send_messages", "send_messages_in_threads", "read_message_history",
                 "create_public_threads", "add_reactions"):
        assert getattr(granted, used) and used in USES
    assert f"permissions={NEEDED.value}" in invite_url(1234) and "applications.commands" in invite_url(1234)


@pytest.fixture
async def lacking(make_config, monkeypatch):
    """The bot on the offline model, in a channel where it lacks the permissions named in `denied`."""
    denied: set[str] = set()
    real = discord.TextChannel.permissions_for

    def permissions_for(self, obj):
        granted = real(self, obj)
        if obj == self.guild.me:
            granted = discord.Permissions(NEEDED.value)
            for name in denied:
                setattr(granted, name, False)
        return granted

    monkeypatch.setattr(discord.TextChannel, "permissions_for", permissions_for)
    config = make_config(snapshots={"interval_seconds": 0}, short_term_history={"enabled": False},
                         autonomy={"quiet_minutes": 0})
    engine = await Engine.open(config, OfflineLLM())
    bot = await start_bot(engine, config)
    yield bot, engine, denied
    await dpytest.empty_queue()
    await engine.close()


async def test_a_missing_reaction_permission_is_said_once_and_the_cooldown_still_holds(lacking, monkeypatch,
                                                                                       caplog):
    bot, engine, denied = lacking
    denied.add("add_reactions")
    tried: list[str] = []

    async def add_reaction(self, emoji):
        tried.append(str(emoji))
        raise AssertionError("a reaction the bot may not add is never tried")

    monkeypatch.setattr(discord.Message, "add_reaction", add_reaction)
    await engine.settings.set("guild", channel().guild.id, "discord.cooldown_seconds", 60)
    caplog.set_level(logging.WARNING, logger="cogs.permissions")
    for text in ("first", "too soon", "again too soon"):
        post(f"{mention(bot)} {text}", author=member())
        await dpytest.run_all_events()
        await asyncio.sleep(0.05)
    answers = []
    while not dpytest.verify().message().nothing():
        answers.append(dpytest.get_message())
    assert len(answers) == 1 and not tried  # answered once; the waits are not answered, and not marked
    warned = [r.getMessage() for r in caplog.records if "Add Reactions" in r.getMessage()]
    assert len(warned) == 1 and str(channel().id) in warned[0]  # once, naming the channel
    help_cog = bot.get_cog("Help")
    assert "Add Reactions: no marking a message that waits" in said(await run(help_cog.help, help_cog))


async def test_a_missing_thread_permission_keeps_the_task_in_its_session_and_is_said(lacking, caplog):
    bot, _, denied = lacking
    denied.add("create_public_threads")
    caplog.set_level(logging.WARNING)
    home = Scope.channel(channel().guild.id, channel().id)
    talk = bot.get_cog("Messages")
    assert await talk.open_work_thread(home, "Star map") is None  # the work goes on in its session, unseen
    assert any("Create Public Threads" in r.getMessage() for r in caplog.records)
    help_cog = bot.get_cog("Help")
    assert "Create Public Threads: no opening a task's thread" in said(await run(help_cog.help, help_cog))
    denied.clear()
    assert "Create Public Threads" not in said(await run(help_cog.help, help_cog))  # granted since: not listed


async def test_without_send_messages_nothing_is_tried_and_the_message_is_still_remembered(lacking, caplog):
    bot, engine, denied = lacking
    denied.add("send_messages")
    caplog.set_level(logging.WARNING, logger="cogs.permissions")
    post(f"{mention(bot)} are you there?", author=member())
    await dpytest.run_all_events()
    await asyncio.sleep(0.05)
    assert dpytest.verify().message().nothing()
    root = await engine.stelis.root(Scope.channel(channel().guild.id, channel().id))
    assert any("are you there?" in m.content for m in await engine.store.tail(root.id, 5))
    assert any("Send Messages" in r.getMessage() for r in caplog.records)
