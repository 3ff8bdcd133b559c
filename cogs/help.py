"""/help: every slash command with what it does, from the command tree itself (never out of date)."""

from __future__ import annotations

from typing import Any

import discord
from discord import app_commands
from discord.ext import commands

from cogs.interactions import answer
from cogs.messages import Messages

INTRO = ("I remember what is said in the channels I can read, and answer when mentioned (or as each channel is "
         "set). Commands marked (Manage Server) change things; the rest only read. Everything here is private to "
         "you.")


def command_lines(tree: app_commands.CommandTree[commands.Bot]) -> list[str]:
    """One line per command and subcommand, sorted, with its description."""
    lines: list[str] = []

    def walk(command: app_commands.Command[Any, ..., Any] | app_commands.Group, prefix: str) -> None:
        name = f"{prefix}{command.name}"
        if isinstance(command, app_commands.Group):
            for child in sorted(command.commands, key=lambda c: c.name):
                walk(child, f"{name} ")
        else:
            lines.append(f"/{name}: {command.description}")

    for command in sorted(tree.get_commands(type=discord.AppCommandType.chat_input), key=lambda c: c.name):
        if isinstance(command, app_commands.Command | app_commands.Group):
            walk(command, "")
    return lines


class Help(commands.Cog):
    def __init__(self, bot: commands.Bot):
        self.bot = bot

    @app_commands.command(name="help", description="Every command and what it does")
    async def help(self, interaction: discord.Interaction) -> None:
        messages = self.bot.get_cog("Messages")
        missing = messages.missing.lines(interaction.channel) if isinstance(messages, Messages) else []
        lacking = ["", "Discord does not let me do everything here; a server admin can grant:", *missing] \
            if missing else []
        await answer(interaction, "\n".join([INTRO, *lacking, "", *command_lines(self.bot.tree)]))


async def setup(bot: commands.Bot) -> None:
    await bot.add_cog(Help(bot))
