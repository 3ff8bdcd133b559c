"""Slash commands: /memory, /threads, /branches, /context, /recall, /config, /persona. All answers are ephemeral.

Commands that change anything need Manage Server, checked here on the server side whatever the
guild's command permissions say (default_permissions is only a hint admins can change). One cog, composed
of a mixin per command group (Red's composite cogs), so each group lives in its own module.
"""

from __future__ import annotations

from discord.ext import commands

from cogs.admin.branches import BranchCommands
from cogs.admin.lookups import LookupCommands
from cogs.admin.memory import MemoryCommands, forget_report
from cogs.admin.settings import SettingsCommands
from cogs.admin.threads import ThreadCommands

__all__ = ["Admin", "forget_report", "setup"]


class Admin(MemoryCommands, ThreadCommands, BranchCommands, SettingsCommands, LookupCommands, name="Admin"):
    """Every group's commands, as one cog."""


async def setup(bot: commands.Bot) -> None:
    await bot.add_cog(Admin(bot))
