"""What every cog shares: the engine the bot carries, ephemeral answers, the Manage Server check."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import discord
from discord import app_commands
from discord.ext import commands

from bot.discord_bot import StelisBot
from bot.engine import Engine
from bot.splitting import split_message
from cogs.pages import PAGE_CHARS, Pager

T = TypeVar("T")

MANAGE = discord.Permissions(manage_guild=True)  # default_permissions of the groups that change things


def engine_of(bot: commands.Bot) -> Engine:
    """The engine StelisBot carries (the cogs load only into it, after its setup_hook opened the engine)."""
    if not isinstance(bot, StelisBot) or bot.engine is None:
        raise TypeError("Stelis's cogs load into a StelisBot whose engine is open (bot/discord_bot.py)")
    return bot.engine


async def answer(interaction: discord.Interaction, text: str) -> None:
    """Ephemeral; a long answer as pages of one message with buttons; a follow-up when the response was deferred."""
    pages = split_message(text, PAGE_CHARS) or ["(nothing to show)"]
    more: dict[str, Any] = {"view": Pager(pages, interaction.user.id)} if len(pages) > 1 else {}
    if not interaction.response.is_done():
        await interaction.response.send_message(pages[0], ephemeral=True, **more)
    else:
        await interaction.followup.send(pages[0], ephemeral=True, **more)


async def manager(interaction: discord.Interaction, what: str) -> bool:
    """The server-side Manage Server check (default_permissions only hides a command); answers a refusal."""
    permissions = getattr(interaction.user, "guild_permissions", None)
    if permissions is not None and permissions.manage_guild:
        return True
    await answer(interaction, f"{what}: it needs the Manage Server permission.")
    return False


def manager_only(what: str) -> Callable[[T], T]:
    """A command that changes things in a group that also reads: Manage Server, checked on the server side
    before it runs (the refusal, saying `what` it changes, answered here; the tree ignores the failure)."""

    async def predicate(interaction: discord.Interaction) -> bool:
        return await manager(interaction, what)

    return app_commands.check(predicate)


def manager_command(name: str, description: str, what: str) -> Callable[[Callable[..., Any]], Any]:
    """A command of its own (in no group) for server managers: only in servers, hidden from members
    (default_permissions), and Manage Server checked on the server side before it runs (manager_only)."""

    def command(func: Callable[..., Any]) -> Any:
        checked = app_commands.default_permissions(manage_guild=True)(manager_only(what)(func))
        return app_commands.command(name=name, description=description)(app_commands.guild_only()(checked))

    return command


class ManagerGroup(app_commands.Group):
    """A group whose every command changes things: Manage Server, checked on the server side before any of them
    runs (default_permissions only hides them); the refusal, saying what the group does, is answered here and
    the tree ignores the failure."""

    def __init__(self, *, refusal: str = "This changes the persona's memory or activity", **kwargs: Any):
        super().__init__(**kwargs)
        self.refusal = refusal

    async def interaction_check(self, interaction: discord.Interaction) -> bool:
        return await manager(interaction, self.refusal)
