"""Trust (issue 26, point 3): one server's admin cannot point the persona at another server (dpytest, two servers)."""

from __future__ import annotations

from unittest.mock import MagicMock

import discord
import discord.ext.test as dpytest
import pytest

from bot.engine import Engine
from bot.tools import ToolError
from memory.records import Scope
from memory.store import OtherServer
from tests.discord_helpers import start_bot
from tests.test_autonomy_discord import ScriptedPersona
from tests.test_slash import interaction, run, said


@pytest.fixture
async def two_servers(make_config, monkeypatch):
    async def fetch_member(self, user_id):  # dpytest's own fails on a stranger; Discord answers 404
        found = self.get_member(user_id)
        if found is None:
            raise discord.NotFound(MagicMock(status=404, reason="Unknown Member"), "Unknown Member")
        return found

    monkeypatch.setattr(discord.Guild, "fetch_member", fetch_member)
    config = make_config(snapshots={"interval_seconds": 0}, short_term_history={"enabled": False},
                         autonomy={"quiet_minutes": 0})
    llm = ScriptedPersona()
    engine = await Engine.open(config, llm)
    bot = await start_bot(engine, config, guilds=2)
    alpha, beta = dpytest.get_config().guilds
    yield bot, engine, llm, alpha, beta
    await dpytest.empty_queue()
    await engine.close()


async def test_a_setting_naming_a_channel_role_or_user_must_name_one_of_its_own_server(two_servers):
    bot, engine, _, alpha, beta = two_servers
    admin, autonomy, access = bot.get_cog("Admin"), bot.get_cog("AutonomyCommands"), bot.get_cog("Access")
    at_alpha = alpha.text_channels[0]
    beta_general = beta.text_channels[0]

    refused = said(await run(admin.config_set, admin, "guild", "autonomy.home_channel", str(beta_general.id),
                             it=interaction(at_alpha)))
    assert f"{beta_general.id} is not a channel of this server" in refused
    refused = said(await run(autonomy.home, autonomy, beta_general, it=interaction(at_alpha)))
    assert "is not a channel of this server" in refused
    assert (await engine.pulses.status(Scope.channel(alpha.id, 0))).config.home_channel is None
    assert f"<#{at_alpha.id}>" in said(await run(autonomy.home, autonomy, it=interaction(at_alpha)))

    beta_member = next(m for m in beta.members if m.id != bot.user.id and alpha.get_member(m.id) is None)
    refused = said(await run(access.deny, access, beta_member, it=interaction(at_alpha)))
    assert "is not a user of this server" in refused
    refused = said(await run(access.allow, access, None, beta.default_role, it=interaction(at_alpha)))
    assert "is not a role of this server" in refused
    alpha_member = next(m for m in alpha.members if m.id != bot.user.id)
    said(await run(access.deny, access, alpha_member, it=interaction(at_alpha)))
    assert (await engine.settings.effective(alpha.id, at_alpha.id)).discord.deny_users == [alpha_member.id]
    # One who has left since can still be taken off the list (and another added beside them).
    await engine.store.set_setting("guild", alpha.id, "discord.deny_users", [alpha_member.id, beta_member.id])
    engine.settings._cache.clear()
    said(await run(access.remove, access, alpha_member, it=interaction(at_alpha)))
    assert (await engine.settings.effective(alpha.id, at_alpha.id)).discord.deny_users == [beta_member.id]


async def test_a_pulse_pointed_at_another_server_reads_nothing_of_it_and_says_nothing_there(two_servers):
    _, engine, _, alpha, beta = two_servers
    beta_general = beta.text_channels[0]
    beta_scope = Scope.channel(beta.id, beta_general.id)
    await engine.conversations.hear(beta_scope, "beta's launch code is 9931", author_name="bea", author_id=11)
    await engine.admin.pin(beta_scope, "beta's vault opens with 7720")
    # A value stored before settings were checked (or by hand): the pulse still refuses it.
    await engine.store.set_setting("guild", alpha.id, "autonomy.home_channel", beta_general.id)
    await engine.store.set_setting("guild", alpha.id, "autonomy.enabled", True)
    engine.settings._cache.clear()

    outcome = await engine.pulses.pulse_now(Scope.channel(alpha.id, 0))
    assert outcome.action == "skip" and "not a channel of this server" in outcome.detail and outcome.calls == 0
    assert dpytest.verify().message().nothing()
    with pytest.raises(ToolError, match="not in this conversation's server"):
        await engine.tools.post(Scope.channel(alpha.id, beta_general.id), "hello beta")
    assert dpytest.verify().message().nothing()
    with pytest.raises(OtherServer):  # nor does a conversation of alpha's ever take beta's channel id
        await engine.conversations.hear(Scope.channel(alpha.id, beta_general.id), "hi", author_name="al", author_id=12)
