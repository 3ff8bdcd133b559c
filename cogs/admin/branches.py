"""/branches and /branches-admin: the persona's lines of activity."""

from __future__ import annotations

from typing import cast

import discord
from discord import app_commands

from bot.report import (
    branch_detail_lines,
    branch_line,
    branch_list_lines,
)
from cogs.admin.base import MAX_CHOICES, AdminBase
from cogs.interactions import MANAGE, ManagerGroup
from memory.errors import Failure
from memory.records import BRANCH_KINDS, BranchStatus


class BranchCommands(AdminBase):
    branches = app_commands.Group(name="branches", description="Branches of the persona's activity",
                                  guild_only=True)
    branches_admin = ManagerGroup(name="branches-admin", description="Suspend, resume, complete or create "
                                  "branches (Manage Server)", guild_only=True, default_permissions=MANAGE)

    # /branches

    @branches.command(name="list", description="Branches of this channel: tasks, free, social")
    @app_commands.choices(status=[app_commands.Choice(name=s, value=s) for s in ("active", "suspended", "completed")])
    async def branches_list(self, interaction: discord.Interaction, status: str | None = None,
                            kind: str | None = None) -> None:
        scope, _ = await self.where(interaction)
        if kind is not None and kind not in BRANCH_KINDS:
            await self.answer(interaction, f"There is no kind {kind!r}: branches are {', '.join(BRANCH_KINDS)}.")
            return
        found = await self.engine.branches.of(scope, cast(BranchStatus | None, status), kind)
        await self.answer(interaction, "\n".join(branch_list_lines(found)))

    @branches_list.autocomplete("kind")
    async def _kinds(self, interaction: discord.Interaction, current: str) -> list[app_commands.Choice[str]]:
        """Only the kinds this channel has branches of."""
        scope, _ = await self.where(interaction)
        present = {b.branch_type for b in await self.engine.branches.of(scope)}
        return [app_commands.Choice(name=k, value=k) for k in BRANCH_KINDS if k in present and k.startswith(current)]

    @branches.command(name="show", description="A branch and its sessions")
    async def branches_show(self, interaction: discord.Interaction, branch: str) -> None:
        scope, _ = await self.where(interaction)
        detail = await self.engine.branches.detail(scope, branch)
        if detail is None:
            await self.answer(interaction, f"There is no branch {branch!r} in this channel; see /branches list.")
            return
        await self.answer(interaction, "\n".join(branch_detail_lines(detail)))

    @branches_show.autocomplete("branch")
    async def _branches(self, interaction: discord.Interaction, current: str) -> list[app_commands.Choice[str]]:
        scope, _ = await self.where(interaction)
        found = await self.engine.branches.of(scope)
        return [app_commands.Choice(name=f"{b.label} [{b.status}]"[:100], value=b.id)
                for b in found if current.lower() in b.label.lower()][:MAX_CHOICES]

    async def _set_branch(self, interaction: discord.Interaction, branch: str, status: BranchStatus) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)  # a suspend writes a chronicle
        scope, _ = await self.where(interaction)
        try:
            found = await self.engine.branches.update(scope, branch, status=status)
        except Failure as exc:
            await self.answer(interaction, exc.notice)
            return
        await self.answer(interaction, branch_line(found))

    @branches_admin.command(name="suspend", description="End a branch's session with a chronicle; it waits "
                                                        "(Manage Server)")
    async def branches_suspend(self, interaction: discord.Interaction, branch: str) -> None:
        await self._set_branch(interaction, branch, "suspended")

    @branches_admin.command(name="resume", description="Open a new session of a branch, from its last (Manage Server)")
    async def branches_resume(self, interaction: discord.Interaction, branch: str) -> None:
        await self._set_branch(interaction, branch, "active")

    @branches_admin.command(name="complete", description="A branch is over: its session ends (Manage Server)")
    async def branches_complete(self, interaction: discord.Interaction, branch: str) -> None:
        await self._set_branch(interaction, branch, "completed")

    branches_suspend.autocomplete("branch")(_branches)
    branches_resume.autocomplete("branch")(_branches)
    branches_complete.autocomplete("branch")(_branches)

    @branches_admin.command(name="create", description="A free branch for the persona to work on in its own time "
                                                 "(Manage Server)")
    @app_commands.describe(label="What it is about", brief="Where it stands, in one line")
    async def branches_create(self, interaction: discord.Interaction, label: app_commands.Range[str, 1, 100],
                              brief: app_commands.Range[str, 1, 200] | None = None) -> None:
        scope, _ = await self.where(interaction)
        try:
            made = await self.engine.branches.create(scope, "free", label, brief)
        except Failure as exc:
            await self.answer(interaction, exc.notice)
            return
        await self.answer(interaction, branch_line(made) + "\nIt waits, suspended: a pulse (/autonomy) or "
                                       "/branches-admin resume opens its first session.")
