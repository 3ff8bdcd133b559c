"""/help: every slash command with what it does, from the command tree itself (never out of date)."""

from __future__ import annotations

import difflib
from typing import Any

import discord
from discord import app_commands
from discord.ext import commands

from cogs.interactions import answer
from cogs.messages import Messages

INTRO = ("I remember what is said in the channels I can read, and answer when mentioned (or as each channel is "
         "set). Commands marked (Manage Server) change things; the rest only read. Everything here is private to "
         "you.")


Leaf = app_commands.Command[Any, ..., Any]


def commands_of(tree: app_commands.CommandTree[commands.Bot]) -> dict[str, Leaf]:
    """Every command and subcommand by its full name ("memory-admin pin"), sorted."""
    found: dict[str, Leaf] = {}

    def walk(command: Leaf | app_commands.Group, prefix: str) -> None:
        name = f"{prefix}{command.name}"
        if isinstance(command, app_commands.Group):
            for child in sorted(command.commands, key=lambda c: c.name):
                walk(child, f"{name} ")
        else:
            found[name] = command

    for command in sorted(tree.get_commands(type=discord.AppCommandType.chat_input), key=lambda c: c.name):
        if isinstance(command, app_commands.Command | app_commands.Group):
            walk(command, "")
    return found


def command_lines(tree: app_commands.CommandTree[commands.Bot]) -> list[str]:
    """One line per command and subcommand, sorted, with its description."""
    return [f"/{name}: {command.description}" for name, command in commands_of(tree).items()]


def command_help(name: str, command: Leaf) -> list[str]:
    """One command explained: what it does, each option with what it takes, who may run it."""
    lines = [f"/{name}: {command.description}"]
    for option in command.parameters:
        required = "" if option.required else " (optional)"
        lines.append(f"- {option.display_name}{required}: {option.description}")
    group = command.parent
    permissions = command.default_permissions or (group.default_permissions if group is not None else None)
    if permissions is not None and permissions.manage_guild:
        lines.append("Needs the Manage Server permission.")
    return lines


class Help(commands.Cog):
    def __init__(self, bot: commands.Bot):
        self.bot = bot

    @app_commands.command(name="help", description="Every command and what it does (or one command, explained)")
    @app_commands.describe(command="A command to explain, for example: memory-admin pin")
    async def help(self, interaction: discord.Interaction, command: str | None = None) -> None:
        if command is not None:
            await answer(interaction, self._one(command))
            return
        messages = self.bot.get_cog("Messages")
        missing = messages.missing.lines(interaction.channel) if isinstance(messages, Messages) else []
        lacking = ["", "Discord does not let me do everything here; a server admin can grant:", *missing] \
            if missing else []
        await answer(interaction, "\n".join([INTRO, *lacking, "", *command_lines(self.bot.tree)]))

    def _one(self, asked: str) -> str:
        known = commands_of(self.bot.tree)
        name = " ".join(asked.strip().lstrip("/").split())
        if name in known:
            return "\n".join(command_help(name, known[name]))
        near = difflib.get_close_matches(name, list(known), n=3)
        return f"No command /{name}." + (f" Did you mean {', '.join('/' + n for n in near)}?" if near else "") \
            + " /help lists them all."

    @help.autocomplete("command")
    async def _complete(self, interaction: discord.Interaction, current: str) -> list[app_commands.Choice[str]]:
        names = [n for n in commands_of(self.bot.tree) if current.lower() in n]
        return [app_commands.Choice(name=n, value=n) for n in names[:25]]


async def setup(bot: commands.Bot) -> None:
    await bot.add_cog(Help(bot))
