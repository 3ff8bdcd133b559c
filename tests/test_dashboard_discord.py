"""/dashboard in Discord, and the gate Discord answers for the dashboard on every page (dpytest)."""

import re
from unittest.mock import AsyncMock, MagicMock, patch

import discord
import discord.ext.test as dpytest

from bot.engine import Engine
from bot.providers.offline import OfflineLLM
from tests.discord_helpers import channel, member, start_bot
from tests.test_discord import channel_payload
from tests.test_slash import interaction, run, said


async def test_dashboard_gives_a_manager_a_link_and_discord_decides_who_sees_what(make_config):
    config = make_config(snapshots={"interval_seconds": 0}, dashboard={"enabled": True, "port": 0})
    engine = await Engine.open(config, OfflineLLM())
    bot = await start_bot(engine, config)
    cog = bot.get_cog("Dashboard")
    try:
        it = interaction()
        it.user.id = member().id
        text = said(await run(cog.open, cog, it=it))
        link = re.search(r"<(http://127\.0\.0\.1:\d+/signin\?token=[^>]+)>", text)
        assert link and "works once, for 10 minutes" in text
        grant = cog.dashboard.access.redeem(link.group(1).split("token=")[1])
        assert (grant.guild_id, grant.user_id) == (channel().guild.id, member().id)
        assert "Manage Server" in said(await run(cog.open, cog, as_admin=False))

        gate, guild, here = cog.dashboard.gate, channel().guild, channel()
        assert not await gate.manages(guild.id, member().id)  # a plain member
        guild.default_role._permissions |= discord.Permissions(manage_guild=True).value
        assert await gate.manages(guild.id, member().id)
        assert not await gate.manages(guild.id + 1, member().id)  # a server the bot is not in
        assert await gate.readable(guild.id, member().id, [here.id, 424242]) == {here.id}  # no such channel: none
        dpytest.backend.get_state().parse_channel_update(channel_payload(here, hidden=True))
        assert await gate.readable(guild.id, member().id, [here.id]) == set()  # hidden from them now: not shown
        gone = discord.NotFound(MagicMock(status=404, reason="Not Found"), "Unknown Member")
        with patch.object(discord.Guild, "fetch_member", AsyncMock(side_effect=gone)):  # Discord's answer for one
            shown = await gate.members(guild.id, [member().id, 987654321])        # who is not (dpytest has none)
        assert shown == {member().id: member().display_name}
        assert gate.channel_name(guild.id, here.id) == here.name and gate.server_name(guild.id) == guild.name
    finally:
        await dpytest.empty_queue()
        await cog.dashboard.stop()
        await engine.close()


async def test_without_the_setting_there_is_no_dashboard_and_the_console_says_how(make_config):
    import io

    from bot.console import Console

    config = make_config(snapshots={"interval_seconds": 0})
    engine = await Engine.open(config, OfflineLLM())
    bot = await start_bot(engine, config)
    assert bot.get_cog("Dashboard") is None
    out = io.StringIO()
    console = Console(engine, io.StringIO(), out, "ana")
    await console.command("/dashboard")
    assert "The dashboard is off: set dashboard.enabled: true" in out.getvalue()
    await dpytest.empty_queue()
    await engine.close()
