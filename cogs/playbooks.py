"""/playbooks: the workflows the persona can run (list, show, check, run, runs)."""

from __future__ import annotations

import asyncio
import logging

import discord
from discord import app_commands
from discord.ext import commands

from bot.engine import PlaybookError
from bot.report import playbook_lines, playbook_list_lines, problem_lines, result_lines, runs_lines
from cogs.interactions import MANAGE, ManagerGroup, answer, engine_of
from cogs.places import interaction_scope

log = logging.getLogger(__name__)

MAX_CHOICES = 25
PROGRESS_LINES = 12  # the newest steps shown while a run goes on


class PlaybookCommands(commands.Cog):
    playbooks = app_commands.Group(name="playbooks", description="Workflows the persona can run", guild_only=True)
    # Changes in a group of their own: members never see what they would be refused (still checked).
    playbooks_admin = ManagerGroup(name="playbooks-admin", description="Run and check playbooks (Manage Server)",
                                   guild_only=True, default_permissions=MANAGE,
                                   refusal="Running a playbook (model calls, maybe memory) or reading the operator's "
                                           "playbook files")

    def __init__(self, bot: commands.Bot):
        self.bot = bot
        self.engine = engine_of(bot)

    @playbooks.command(name="list", description="The playbooks the persona can run")
    async def list_(self, interaction: discord.Interaction) -> None:
        await answer(interaction, "\n".join(playbook_list_lines(self.engine.playbooks.library)))

    @playbooks.command(name="show", description="A playbook's inputs, outputs and nodes")
    async def show(self, interaction: discord.Interaction, name: str) -> None:
        found = self.engine.playbooks.library.get(name)
        await answer(interaction, "\n".join(playbook_lines(found)) if found else
                     f"There is no playbook {name!r}; see /playbooks list.")

    @show.autocomplete("name")
    async def _names(self, interaction: discord.Interaction, current: str) -> list[app_commands.Choice[str]]:
        return [app_commands.Choice(name=name, value=name) for name in sorted(self.engine.playbooks.library)
                if current.lower() in name][:MAX_CHOICES]

    @playbooks_admin.command(name="check", description="What kept playbooks from loading (Manage Server)")
    async def check(self, interaction: discord.Interaction) -> None:
        await answer(interaction, "\n".join(problem_lines(self.engine.playbooks.problems)))

    @playbooks_admin.command(name="run", description="Run a playbook here (Manage Server); progress as it goes")
    @app_commands.describe(arguments='Plain words for a playbook with one text input, or JSON: {"topic": "tea"}')
    async def run(self, interaction: discord.Interaction, name: str, arguments: str = "") -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        scope = await interaction_scope(self.engine, interaction)
        steps: list[str] = []
        updates: set[asyncio.Task[object]] = set()  # progress edits in flight

        def progress(step: str) -> None:
            steps.append(step)
            shown = "\n".join([f"Running {name}...", *steps[-PROGRESS_LINES:]])
            task: asyncio.Task[object] = asyncio.create_task(interaction.edit_original_response(content=shown))
            updates.add(task)
            task.add_done_callback(updates.discard)

        try:
            done = await self.engine.playbooks.run(scope, name, arguments, progress=progress)
        except PlaybookError as exc:
            await answer(interaction, f"{name} did not finish: {exc.notice}")
            return
        finally:
            await asyncio.gather(*updates, return_exceptions=True)  # a failed progress edit loses nothing
        await answer(interaction, "\n".join(result_lines(name, done.outputs)))

    run.autocomplete("name")(_names)

    @playbooks.command(name="runs", description="The latest playbook runs here, step by step")
    async def runs(self, interaction: discord.Interaction) -> None:
        scope = await interaction_scope(self.engine, interaction)
        await answer(interaction, "\n".join(runs_lines(await self.engine.playbooks.runs(scope), self.engine.clock())))



async def setup(bot: commands.Bot) -> None:
    await bot.add_cog(PlaybookCommands(bot))
