"""Who the persona answers: per-server allow and deny lists of users and roles, and a per-person cooldown.

Everyone's messages are remembered as before (opting out is /memory optout); these decide only answers.
"""

from __future__ import annotations

import time
from collections import defaultdict

import discord
from discord import app_commands
from discord.ext import commands

from bot.config import DiscordConfig
from cogs.interactions import MANAGE, answer, engine_of, manager_only
from memory.errors import Failure

LISTS = {"allow": ("allow_users", "allow_roles"), "deny": ("deny_users", "deny_roles")}
CHANGE = "Changing who the persona answers"


def permitted(config: DiscordConfig, author: discord.abc.User) -> bool:
    """May this person be answered here? Deny wins; a non-empty allow list admits only who is on it."""
    roles = {r.id for r in getattr(author, "roles", [])}
    if author.id in config.deny_users or roles & set(config.deny_roles):
        return False
    if config.allow_users or config.allow_roles:
        return author.id in config.allow_users or bool(roles & set(config.allow_roles))
    return True


class Cooldowns:
    """When each person was last answered in each channel."""

    def __init__(self) -> None:
        self._last: defaultdict[tuple[int, int], float] = defaultdict(float)

    def waiting(self, channel_id: int, user_id: int, seconds: int) -> bool:
        return seconds > 0 and time.monotonic() - self._last[(channel_id, user_id)] < seconds

    def answered(self, channel_id: int, user_id: int) -> None:
        self._last[(channel_id, user_id)] = time.monotonic()


class Access(commands.Cog):
    access = app_commands.Group(name="access", description="Who the persona answers here (Manage Server)",
                                guild_only=True, default_permissions=MANAGE)

    def __init__(self, bot: commands.Bot):
        self.bot = bot
        self.engine = engine_of(bot)

    @access.command(name="show", description="The allow and deny lists and the cooldown")
    async def show(self, interaction: discord.Interaction) -> None:
        config = (await self.engine.settings.effective(interaction.guild_id, interaction.channel_id)).discord

        def names(ids: list[int], mark: str) -> str:
            return ", ".join(f"<{mark}{i}>" for i in ids) or "nobody"

        await answer(interaction, "\n".join([
            f"Allowed: {names(config.allow_users, '@')}; roles {names(config.allow_roles, '@&')}"
            + (" (empty: everyone)" if not (config.allow_users or config.allow_roles) else ""),
            f"Denied: {names(config.deny_users, '@')}; roles {names(config.deny_roles, '@&')}",
            f"Cooldown: {config.cooldown_seconds} s between a person's answered messages in a channel."]))

    @access.command(name="allow", description="Answer only these people and roles (Manage Server)")
    @manager_only(CHANGE)
    async def allow(self, interaction: discord.Interaction, user: discord.Member | None = None,
                    role: discord.Role | None = None) -> None:
        await self._change(interaction, user, role, add_to="allow")

    @access.command(name="deny", description="Never answer this person or role (Manage Server)")
    @manager_only(CHANGE)
    async def deny(self, interaction: discord.Interaction, user: discord.Member | None = None,
                   role: discord.Role | None = None) -> None:
        await self._change(interaction, user, role, add_to="deny")

    @access.command(name="remove", description="Take a person or role off both lists (Manage Server)")
    @manager_only(CHANGE)
    async def remove(self, interaction: discord.Interaction, user: discord.Member | None = None,
                     role: discord.Role | None = None) -> None:
        await self._change(interaction, user, role, add_to=None)

    @access.command(name="cooldown", description="Seconds between a person's answered messages (Manage Server)")
    @manager_only(CHANGE)
    async def cooldown(self, interaction: discord.Interaction, seconds: app_commands.Range[int, 0, 3600]) -> None:
        await self.engine.settings.set("guild", interaction.guild_id or 0, "discord.cooldown_seconds", seconds)
        await answer(interaction, f"Cooldown: {seconds} s." if seconds else "No cooldown.")

    async def _change(self, interaction: discord.Interaction, user: discord.Member | None, role: discord.Role | None,
                      *, add_to: str | None) -> None:
        """Take the user and role off every list, then (unless removing) put them on `add_to`'s."""
        if user is None and role is None:
            await answer(interaction, "Name a user or a role.")
            return
        config = (await self.engine.settings.effective(interaction.guild_id, None)).discord
        try:
            for which, (users_key, roles_key) in LISTS.items():
                for key, item in ((users_key, user), (roles_key, role)):
                    if item is not None:
                        kept = [i for i in getattr(config, key) if i != item.id]
                        await self.engine.settings.set("guild", interaction.guild_id or 0, f"discord.{key}",
                                                      [*kept, item.id] if which == add_to else kept)
        except Failure as exc:
            await answer(interaction, exc.notice)
            return
        who = " and ".join(x.mention for x in (user, role) if x is not None)
        await answer(interaction, f"{who}: on the {add_to} list." if add_to else f"{who}: off both lists.")


async def setup(bot: commands.Bot) -> None:
    await bot.add_cog(Access(bot))
