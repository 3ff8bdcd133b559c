"""/tasks: the persona's tasks in this server (seed 001)."""

from __future__ import annotations

from typing import cast

import discord
from discord import app_commands
from discord.ext import commands

from bot.report import task_detail_lines, task_lines
from cogs.interactions import MANAGE, ManagerGroup, answer, engine_of
from cogs.places import interaction_scope
from memory.errors import Failure
from memory.records import TaskStatus


class TaskCommands(commands.Cog):
    tasks = app_commands.Group(name="tasks", description="The persona's tasks here", guild_only=True)
    # Changes in a group of their own: members never see what they would be refused (still checked).
    tasks_admin = ManagerGroup(name="tasks-admin", description="Create and close tasks (Manage Server)",
                               guild_only=True, default_permissions=MANAGE,
                               refusal="Creating or closing a task (a branch of the persona's work)")

    def __init__(self, bot: commands.Bot):
        self.bot = bot
        self.engine = engine_of(bot)

    @tasks.command(name="list", description="Tasks in this server, open ones first")
    async def list_(self, interaction: discord.Interaction) -> None:
        scope = await interaction_scope(self.engine, interaction)
        await answer(interaction, "\n".join(task_lines(await self.engine.tasks.of(scope))))

    @tasks.command(name="show", description="A task's goal and steps")
    async def show(self, interaction: discord.Interaction, task: int) -> None:
        try:
            found = await self.engine.tasks.get(await interaction_scope(self.engine, interaction), task)
        except Failure as exc:
            await answer(interaction, exc.notice)
            return
        await answer(interaction, "\n".join(task_detail_lines(found)))

    @tasks_admin.command(name="create", description="Create a task with its own branch and session (Manage Server)")
    @app_commands.describe(steps="Steps separated by ';'")
    async def create(self, interaction: discord.Interaction, title: app_commands.Range[str, 1, 100],
                     goal: app_commands.Range[str, 1, 500], steps: str = "") -> None:
        try:
            made = await self.engine.tasks.create(await interaction_scope(self.engine, interaction), title, goal,
                                                 [s for s in steps.split(";") if s.strip()])
        except Failure as exc:
            await answer(interaction, exc.notice)
            return
        await answer(interaction, f"Task #{made.id} created, with its branch {made.branch_id} and a session.")

    @tasks_admin.command(name="close", description="Close a task, done or abandoned (Manage Server)")
    @app_commands.choices(status=[app_commands.Choice(name=s, value=s) for s in ("done", "abandoned")])
    async def close(self, interaction: discord.Interaction, task: int, status: str = "done") -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)  # its chronicle is written first
        try:
            scope = await interaction_scope(self.engine, interaction)
            closed = await self.engine.tasks.close(scope, task, cast(TaskStatus, status))
        except Failure as exc:
            await answer(interaction, exc.notice)
            return
        await answer(interaction, f"Task #{closed.id} is {closed.status}; its session ended with a chronicle.")


async def setup(bot: commands.Bot) -> None:
    await bot.add_cog(TaskCommands(bot))
