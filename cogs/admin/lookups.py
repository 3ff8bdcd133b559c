"""/context and /recall: what the next request spends, and what the persona can recall."""

from __future__ import annotations

import discord
from discord import app_commands

from bot.report import (
    context_bars,
    context_heading,
    recall_lines,
    usage_lines,
)
from cogs.admin.base import AdminBase
from cogs.interactions import manager_command


class LookupCommands(AdminBase):


    # /context

    @app_commands.command(name="context", description="How the next request's tokens are spent, by part")
    @app_commands.guild_only()
    async def context(self, interaction: discord.Interaction) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        _, thread_id = await self.where(interaction)
        assembly = await self.engine.conversations.context(thread_id, calls=False)
        total = self.engine.config.llm.context_tokens
        await self.answer(interaction, "\n".join([
            context_heading(thread_id, assembly.parts, total, assembly.window_budget), "```",
            *context_bars(assembly.parts, total), "```"]))

    # /usage

    @manager_command("usage", "Model calls, tokens and estimated cost in this server, today and this month "
                              "(Manage Server)", "Usage and cost")
    async def usage(self, interaction: discord.Interaction) -> None:
        assert interaction.guild_id is not None
        spending = self.engine.spending
        spent = await spending.of(interaction.guild_id, days=31)
        await self.answer(interaction, "\n".join(usage_lines(spent, spending.today(), spending.month_start())))

    # /recall

    @app_commands.command(name="recall", description="What the persona can recall about something, with dates "
                                                     "and who said it")
    @app_commands.describe(query="Words to look for, for example: calculator deadline")
    async def recall(self, interaction: discord.Interaction, query: app_commands.Range[str, 1, 300]) -> None:
        if not query.strip():
            await self.answer(interaction, "Give some words to look for, for example: calculator deadline")
            return
        scope, _ = await self.where(interaction)
        await self.answer(interaction, "\n".join(recall_lines(query, await self.engine.archive.recall(scope, query))))
