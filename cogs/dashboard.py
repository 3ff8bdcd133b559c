"""Dashboard cog: `/dashboard` gives a Manage Server admin a one-time sign-in link; Discord answers who may see what."""

from __future__ import annotations

import logging

import discord
from discord.ext import commands

from bot.dashboard.server import Dashboard
from cogs.interactions import answer, engine_of, manager_command

log = logging.getLogger(__name__)


class DiscordGate:
    """The dashboard's questions, answered from Discord as it is now (a member who lost a role loses the page)."""

    def __init__(self, bot: commands.Bot):
        self.bot = bot

    async def _member(self, guild_id: int, user_id: int) -> discord.Member | None:
        guild = self.bot.get_guild(guild_id)
        if guild is None:
            return None
        member = guild.get_member(user_id)
        if member is None:
            try:
                member = await guild.fetch_member(user_id)
            except discord.HTTPException:  # gone, or Discord cannot say: no page either way
                return None
        return member

    async def manages(self, guild_id: int, user_id: int) -> bool:
        member = await self._member(guild_id, user_id)
        return member is not None and member.guild_permissions.manage_guild

    async def readable(self, guild_id: int, user_id: int, channel_ids: list[int]) -> set[int]:
        # The member once for all of them: without the members intent each look-up is a call to Discord.
        member = await self._member(guild_id, user_id)
        guild = self.bot.get_guild(guild_id)
        if member is None or guild is None:
            return set()
        channels = [guild.get_channel_or_thread(i) for i in channel_ids]
        return {c.id for c in channels if c is not None and c.permissions_for(member).read_messages}

    async def members(self, guild_id: int, user_ids: list[int]) -> dict[int, str]:
        guild = self.bot.get_guild(guild_id)
        found = {}
        for user_id in user_ids:
            member = await self._member(guild_id, user_id) if guild is not None else None
            if member is not None:
                found[user_id] = member.display_name
        return found

    def server_name(self, guild_id: int) -> str:
        guild = self.bot.get_guild(guild_id)
        return guild.name if guild is not None else f"server {guild_id}"

    def channel_name(self, guild_id: int, channel_id: int) -> str:
        guild = self.bot.get_guild(guild_id)
        channel = guild.get_channel_or_thread(channel_id) if guild is not None else None
        return channel.name if channel is not None else str(channel_id)


class DashboardCog(commands.Cog, name="Dashboard"):
    def __init__(self, bot: commands.Bot):
        self.bot = bot
        engine = engine_of(bot)
        self.dashboard = Dashboard(engine, engine.config.dashboard, DiscordGate(bot))

    async def cog_load(self) -> None:
        await self.dashboard.start()

    async def cog_unload(self) -> None:
        await self.dashboard.stop()

    @manager_command("dashboard", "A one-time link to this server's memory dashboard (Manage Server)",
                     "The dashboard")
    async def open(self, interaction: discord.Interaction) -> None:
        assert interaction.guild_id is not None
        link = self.dashboard.sign_in_link(interaction.guild_id, interaction.user.id)
        minutes = self.dashboard.config.sign_in_minutes
        await answer(interaction, f"Your sign-in link (yours alone; it works once, for {minutes} minutes):\n<{link}>")


async def setup(bot: commands.Bot) -> None:
    engine = engine_of(bot)
    if engine.config.dashboard.enabled:
        await bot.add_cog(DashboardCog(bot))

