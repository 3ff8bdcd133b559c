"""/memory and /memory-admin: a channel's memory, read by members and changed by managers."""

from __future__ import annotations

from typing import Any

import discord
from discord import app_commands

from bot.engine import MemoryAdminError
from bot.report import (
    history_line,
    memory_lines,
    outcome_lines,
    pause_text,
    pin_text,
    rollback_text,
    written_text,
)
from cogs.admin.base import MAX_CHOICES, AdminBase
from cogs.interactions import MANAGE, ManagerGroup
from cogs.long_text import long_text
from cogs.places import MemoryPlace, memory_scope
from memory.forget import Rewritten
from memory.records import Scope


class MemoryCommands(AdminBase):
    # Not guild-only: forget-me and optout work in DMs too; the other subcommands refuse there themselves.
    memory = app_commands.Group(name="memory", description="This channel's memory")
    # Changes in a group of their own, so members never see commands they would be refused (still checked).
    memory_admin = ManagerGroup(name="memory-admin", description="Change this channel's memory (Manage Server)",
                                guild_only=True, default_permissions=MANAGE)

    # /memory

    async def readable(self, interaction: discord.Interaction, other: MemoryPlace | None) -> Scope | None:
        """The scope to read: this channel, or another one of this server the user may see (admins: any)."""
        if other is not None and other.id == self._channel_id(interaction):
            other = None
        if other is not None and other.guild.id == interaction.guild_id and not self._sees(interaction, other):
            await self.answer(interaction, f"You cannot see #{other.name}, so you cannot read its memory.")
            return None
        return await self._target(interaction, other)  # records are keyed by channel: never across servers

    @staticmethod
    def _sees(interaction: discord.Interaction, channel: MemoryPlace) -> bool:
        permissions = getattr(interaction.user, "guild_permissions", None)
        member = interaction.user if isinstance(interaction.user, discord.Member) else None
        return (permissions is not None and permissions.manage_guild) or (
            member is not None and channel.permissions_for(member).view_channel)

    @memory.command(name="show", description="Current memory of this channel (or another): versions, ranges, pins")
    @app_commands.describe(full="Every version's whole text instead of one line each")
    async def memory_show(self, interaction: discord.Interaction, channel: MemoryPlace | None = None,
                          full: bool = False) -> None:
        scope = await self.readable(interaction, channel)
        if scope is None:
            return
        view = await self.engine.admin.peek(scope)
        await self.answer(interaction, "\n".join(memory_lines(view, self.engine.clock(), full=full))
                          if view is not None else "No memory written yet.")

    @memory.command(name="history", description="Every short-term version of this channel's (or another's) memory")
    async def memory_history(self, interaction: discord.Interaction, channel: MemoryPlace | None = None) -> None:
        scope = await self.readable(interaction, channel)
        if scope is None:
            return
        records = await self.engine.admin.history(scope)
        await self.answer(interaction, "\n".join(history_line(r) for r in records) or "No memory written yet.")

    @memory_admin.command(name="pin", description="A fact every summary of this channel must keep")
    @app_commands.describe(fact="The fact, in a sentence")
    async def memory_pin(self, interaction: discord.Interaction, fact: app_commands.Range[str, 1, 500],
                         channel: MemoryPlace | None = None) -> None:
        await self._memory_change(interaction, "pin", fact, channel)

    @memory_admin.command(name="unpin", description="Stop keeping a pinned fact")
    async def memory_unpin(self, interaction: discord.Interaction, fact: str,
                           channel: MemoryPlace | None = None) -> None:
        await self._memory_change(interaction, "unpin", fact, channel)

    @memory_unpin.autocomplete("fact")
    async def _pinned(self, interaction: discord.Interaction, current: str) -> list[app_commands.Choice[str]]:
        scope, _ = await self.where(interaction)
        pins = (await self.engine.admin.view(scope)).pins
        return [app_commands.Choice(name=p[:100], value=p) for p in pins if current.lower() in p.lower()][:MAX_CHOICES]

    @memory_admin.command(name="edit", description="Replace the current short-term memory (kept as a new version)")
    @app_commands.describe(text="One line; leave empty to edit the current memory in a form", file="A text file")
    async def memory_edit(self, interaction: discord.Interaction, text: app_commands.Range[str, 1, 4000] | None = None,
                          file: discord.Attachment | None = None, channel: MemoryPlace | None = None) -> None:
        scope = await self._target(interaction, channel)
        if scope is None:
            return
        view = await self.engine.admin.peek(scope)
        current = view.short_term[-1].content if view is not None and view.short_term else ""

        async def submit(it: discord.Interaction, new: str) -> None:
            await self._memory_change(it, "edit", new, channel)

        await long_text(interaction, text, file, title="Edit this channel's memory", label="Short-term memory",
                        current=current, submit=submit)

    @memory_admin.command(name="rollback", description="Make an earlier version current again (as a new version)")
    async def memory_rollback(self, interaction: discord.Interaction, version: app_commands.Range[int, 1],
                              channel: MemoryPlace | None = None) -> None:
        await self._memory_change(interaction, "rollback", version, channel)

    @memory_rollback.autocomplete("version")
    async def _versions(self, interaction: discord.Interaction, current: str) -> list[app_commands.Choice[int]]:
        scope, _ = await self.where(interaction)
        records = await self.engine.admin.history(scope, limit=MAX_CHOICES)
        return [app_commands.Choice(name=f"v{r.version}: {r.content[:80]}", value=r.version)
                for r in reversed(records) if str(r.version).startswith(current)][:MAX_CHOICES]

    @memory_admin.command(name="regenerate", description="Write a new short-term version now")
    async def memory_regenerate(self, interaction: discord.Interaction, channel: MemoryPlace | None = None) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        await self._memory_change(interaction, "regenerate", None, channel)

    @memory.command(name="forget-me", description="Erase your messages here (this server, or this DM) and "
                                                  "everything remembered from them")
    async def memory_forget_me(self, interaction: discord.Interaction) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        user = interaction.user.id
        if interaction.guild_id is not None:
            done = await self.engine.forgetting.forget_person(user, guild_id=interaction.guild_id)
        else:
            done = await self.engine.forgetting.forget_person(user, dm=Scope.dm(user, interaction.channel_id or 0))
        await self.answer(interaction, forget_report(done, "of yours"))

    @memory_admin.command(name="forget", description="Erase a member's messages in this server and what was "
                                               "remembered from them")
    @app_commands.guild_only()
    async def memory_forget(self, interaction: discord.Interaction, user: discord.User) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        done = await self.engine.forgetting.forget_person(user.id, guild_id=interaction.guild_id)
        await self.answer(interaction, forget_report(done, f"of {user.display_name}"))

    @memory.command(name="optout", description="Stop remembering anything you say, everywhere")
    async def memory_optout(self, interaction: discord.Interaction) -> None:
        await self.engine.forgetting.opt_out(interaction.user.id)
        await self.answer(interaction, "From now on I don't keep or read anything you say. What I remember "
                                       "already stays until you run /memory forget-me; /memory optin undoes this.")

    @memory.command(name="optin", description="Let the persona remember what you say again")
    async def memory_optin(self, interaction: discord.Interaction) -> None:
        await self.engine.forgetting.opt_out(interaction.user.id, out=False)
        await self.answer(interaction, "I remember what you say again, from now on.")

    @memory_admin.command(name="pause", description="Stop automatic memory updates in this channel")
    async def memory_pause(self, interaction: discord.Interaction, channel: MemoryPlace | None = None) -> None:
        await self._memory_change(interaction, "pause", None, channel)

    @memory_admin.command(name="resume", description="Restart automatic memory updates in this channel")
    async def memory_resume(self, interaction: discord.Interaction, channel: MemoryPlace | None = None) -> None:
        await self._memory_change(interaction, "resume", None, channel)

    async def _target(self, interaction: discord.Interaction, channel: MemoryPlace | None) -> Scope | None:
        """The memory a change is about: this channel's, or another one's of this server."""
        if channel is None:
            return (await self.where(interaction))[0]
        if channel.guild.id != interaction.guild_id:
            await self.answer(interaction, f"#{channel.name} is not in this server.")
            return None
        return memory_scope(channel)

    async def _memory_change(self, interaction: discord.Interaction, action: str, arg: Any,
                             channel: MemoryPlace | None = None) -> None:
        scope = await self._target(interaction, channel)
        if scope is None:
            return
        engine = self.engine
        where = f"in #{channel.name}" if channel is not None else "in this channel"
        try:
            if action in ("pin", "unpin"):
                changed = await engine.admin.pin(scope, arg, pinned=action == "pin")
                text = pin_text(arg, action == "pin", changed)
            elif action == "edit":
                text = written_text(await engine.admin.edit(scope, arg))
            elif action == "rollback":
                text = rollback_text(arg, await engine.admin.rollback(scope, arg))
            elif action == "regenerate":
                text = "\n".join(outcome_lines(await engine.admin.regenerate(scope)))
            else:
                changed = await engine.admin.pause(scope, action == "pause")
                text = pause_text(action == "pause", where, changed)
        except MemoryAdminError as exc:
            text = str(exc)
        await self.answer(interaction, text)


def forget_report(done: Rewritten, whose: str) -> str:
    """What a forget request erased and rewrote, in one line."""
    if not done.messages:
        return f"There were no messages {whose} to forget here."
    if done.unfinished:
        return (f"Forgot {done.messages} message(s) {whose}. What I remembered from them could not be rewritten yet "
                f"({done.unfinished}); it is rewritten on its own as soon as it can be, even after a restart.")
    said = (f"Forgot {done.messages} message(s) {whose}: rewrote {done.versions} memory version(s), "
            f"{done.chronicles} chronicle(s) and {done.windows} rolling summary(ies); the old text is deleted.")
    if done.unscrubbed:
        said += f" The database's own files could not be cleaned yet ({done.unscrubbed}); the operator is told."
    return said
