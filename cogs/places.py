"""Where a Discord channel sits in memory: its scope, a Discord thread's Stelis session, its settings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import discord

from memory.records import Scope

if TYPE_CHECKING:
    from bot.engine import Engine


@dataclass(frozen=True)
class Place:
    scope: Scope
    session_id: int | None  # the Discord thread's active Stelis session; None for a channel or DM
    guild_id: int | None
    settings_channel: int  # a thread inherits its parent channel's settings and persona


def settings_channel(channel: Any, channel_id: int) -> int:
    """The channel whose settings apply: a thread's parent, else the channel itself."""
    if isinstance(channel, discord.Thread) and channel.parent_id is not None:
        return channel.parent_id
    return channel_id


def own_scope(channel: discord.abc.GuildChannel | discord.Thread) -> Scope:
    """The conversation a server channel or private thread is (a public thread is a session of its parent's)."""
    if isinstance(channel, discord.Thread) and channel.is_private():
        return Scope.private_thread(channel.guild.id, channel.id)
    return Scope.channel(channel.guild.id, channel.id)


MemoryPlace = discord.TextChannel | discord.ForumChannel | discord.Thread  # a channel option memory commands take


def memory_scope(channel: MemoryPlace) -> Scope:
    """Whose memory a channel option names: a public thread's is its parent channel's (it is a branch there)."""
    if isinstance(channel, discord.Thread) and not channel.is_private() and channel.parent_id is not None:
        return Scope.channel(channel.guild.id, channel.parent_id)
    return own_scope(channel)


async def interaction_scope(engine: Engine, interaction: discord.Interaction) -> Scope:
    """The conversation a slash command is about (a channel outside the cache still has a scope)."""
    place = await locate(engine, interaction.channel)
    return place.scope if place else Scope.channel(interaction.guild_id or 0, interaction.channel_id or 0)


async def locate(engine: Engine, channel: Any) -> Place | None:
    """The place of a channel, opening (or resuming) a Discord thread's session; None if unreadable."""
    if isinstance(channel, discord.DMChannel):
        recipient = channel.recipient.id if channel.recipient else 0
        return Place(Scope.dm(recipient, channel.id), None, None, channel.id)
    guild = getattr(channel, "guild", None)
    if guild is None:
        return None
    if isinstance(channel, discord.Thread):
        if channel.parent_id is None:
            return None
        if channel.is_private():
            return Place(Scope.private_thread(guild.id, channel.id), None, guild.id, channel.parent_id)
        scope = Scope.channel(guild.id, channel.parent_id)
        session = await engine.branches.session(scope, channel.id, channel.name)
        return Place(scope, session.id, guild.id, channel.parent_id)
    return Place(Scope.channel(guild.id, channel.id), None, guild.id, channel.id)
