"""What every part of the Admin cog shares: the engine, where a command is about, ephemeral answers."""

from __future__ import annotations

import discord
from discord.ext import commands

from cogs.interactions import answer, engine_of, manager
from cogs.places import Place, locate, settings_channel
from memory.records import Scope

MAX_CHOICES = 25  # what Discord shows of an autocompletion


class AdminBase(commands.Cog):
    """The Admin cog's common ground; each command group is a part of it, and Admin all of them together."""

    def __init__(self, bot: commands.Bot):
        self.bot = bot
        self.engine = engine_of(bot)

    # helpers

    async def where(self, interaction: discord.Interaction) -> tuple[Scope, int]:
        """The channel's memory scope and the thread a command is about (a Discord thread's session)."""
        place = await locate(self.engine, interaction.channel)
        if place is None:  # commands are guild-only; a channel outside the cache still has a scope
            place = Place(Scope.channel(interaction.guild_id or 0, interaction.channel_id or 0), None,
                          interaction.guild_id, interaction.channel_id or 0)
        return place.scope, place.session_id or (await self.engine.stelis.root(place.scope)).id

    answer = staticmethod(answer)

    async def allowed(self, interaction: discord.Interaction) -> bool:
        """The server-side Manage Server check; answers the refusal itself."""
        return await manager(interaction, "This changes the persona's memory or settings")

    @staticmethod
    def _channel_id(interaction: discord.Interaction) -> int:
        return settings_channel(interaction.channel, interaction.channel_id or 0)

    def _scope_id(self, interaction: discord.Interaction, scope: str) -> int:
        return (interaction.guild_id or 0) if scope == "guild" else self._channel_id(interaction)
