"""Visibility cog: tells memory each channel's name and whether @everyone can read it (DESIGN.md section 6).

Server memory and shared channels rest on this: a channel is shared only while it is public, so it
is described on first sight, again whenever its permissions or the @everyone role change, and for
every remembered channel when the bot connects.
"""

from __future__ import annotations

import logging

import discord
from discord.ext import commands

from cogs.interactions import engine_of
from cogs.places import own_scope

log = logging.getLogger(__name__)


def is_public(channel: discord.abc.GuildChannel | discord.Thread) -> bool:
    """Whether everyone in the server can read it (@everyone's permissions, overwrites included).

    A private thread never is, whatever its parent's permissions say.
    """
    if isinstance(channel, discord.Thread) and channel.is_private():
        return False
    return channel.permissions_for(channel.guild.default_role).view_channel


def described(channel: object) -> discord.abc.GuildChannel | discord.Thread | None:
    """The conversation whose visibility memory keeps: a public thread's parent, a private thread or a
    server channel itself; None for a DM."""
    if isinstance(channel, discord.Thread) and not channel.is_private():
        channel = channel.parent
    return channel if isinstance(channel, discord.abc.GuildChannel | discord.Thread) else None


class Visibility(commands.Cog):
    def __init__(self, bot: commands.Bot):
        self.bot = bot
        self.engine = engine_of(bot)
        self._known: dict[int, tuple[str, bool]] = {}  # what memory was last told, so a message costs no write

    async def describe(self, channel: discord.abc.GuildChannel | discord.Thread) -> None:
        state = (channel.name, is_public(channel))
        if self._known.get(channel.id) == state:
            return
        await self.engine.admin.describe(own_scope(channel), name=state[0], public=state[1])
        if self._known.get(channel.id, state)[1] != state[1]:
            log.info("channel #%s (%d) is now %s", state[0], channel.id, "public" if state[1] else "private")
        self._known[channel.id] = state

    @commands.Cog.listener()
    async def on_message(self, message: discord.Message) -> None:
        if (channel := described(message.channel)) is not None and channel.id not in self._known:
            await self.describe(channel)

    @commands.Cog.listener()
    async def on_guild_channel_update(self, before: discord.abc.GuildChannel,
                                      after: discord.abc.GuildChannel) -> None:
        if after.id in self._known:  # every remembered channel is known once connected (on_ready)
            await self.describe(after)

    @commands.Cog.listener()
    async def on_guild_role_update(self, before: discord.Role, after: discord.Role) -> None:
        if after.is_default():  # @everyone's permissions decide what is public in the whole server
            for channel in after.guild.channels:
                if channel.id in self._known:
                    await self.describe(channel)

    @commands.Cog.listener()
    async def on_ready(self) -> None:
        for root in await self.engine.conversations.channel_roots():
            if root.guild_id is None or root.channel_id is None:
                continue
            channel = self.bot.get_channel(root.channel_id)
            if isinstance(channel, discord.abc.GuildChannel):
                await self.describe(channel)


async def setup(bot: commands.Bot) -> None:
    await bot.add_cog(Visibility(bot))
