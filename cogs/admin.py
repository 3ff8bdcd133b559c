"""Slash commands: /memory, /threads, /branches, /context, /recall, /config, /persona. All answers are ephemeral.

Commands that change anything need Manage Server, checked here on the server side whatever the
guild's command permissions say (default_permissions is only a hint admins can change).
"""

from __future__ import annotations

import logging
from typing import Any, cast

import discord
from discord import app_commands
from discord.ext import commands

from bot.config import OVERRIDABLE, ConfigError
from bot.engine import MemoryAdminError, Where
from bot.report import (
    branch_detail_lines,
    branch_line,
    branch_list_lines,
    config_lines,
    context_bars,
    context_heading,
    history_line,
    memory_lines,
    not_set_text,
    outcome_lines,
    pause_text,
    pin_text,
    recall_lines,
    reset_text,
    rollback_text,
    set_text,
    tree_lines,
    written_text,
)
from cogs.interactions import MANAGE, ManagerGroup, answer, engine_of, manager
from cogs.long_text import long_text
from cogs.places import MemoryPlace, Place, locate, memory_scope, settings_channel
from memory.anchors import exchange_lines, thread_ref
from memory.errors import Failure
from memory.forget import Rewritten
from memory.records import BranchKind, BranchStatus, Scope

log = logging.getLogger(__name__)

MAX_CHOICES = 25
BRANCH_KINDS = ("task", "free", "social")  # what a branch row can be (the user conversation is the root)


class Admin(commands.Cog):
    # Not guild-only: forget-me and optout work in DMs too; the other subcommands refuse there themselves.
    memory = app_commands.Group(name="memory", description="This channel's memory")
    # Changes in a group of their own, so members never see commands they would be refused (still checked).
    memory_admin = ManagerGroup(name="memory-admin", description="Change this channel's memory (Manage Server)",
                                guild_only=True, default_permissions=MANAGE)
    stelis = app_commands.Group(name="threads", description="Stelis working threads: the tree and one thread",
                                guild_only=True)
    branches = app_commands.Group(name="branches", description="Branches of the persona's activity",
                                  guild_only=True)
    config = app_commands.Group(name="config", description="Settings per server or channel", guild_only=True,
                                default_permissions=MANAGE)
    persona = app_commands.Group(name="persona", description="The persona", guild_only=True,
                                 default_permissions=MANAGE)
    branches_admin = ManagerGroup(name="branches-admin", description="Suspend, resume, complete or create "
                                  "branches (Manage Server)", guild_only=True, default_permissions=MANAGE)

    def __init__(self, bot: commands.Bot):
        self.bot = bot
        self.engine = engine_of(bot)

    # helpers

    async def where(self, interaction: discord.Interaction) -> tuple[Scope, int]:
        """The channel's memory scope and the thread a command is about (a Discord thread's session)."""
        place = await locate(self.engine, interaction.channel)
        if place is None:  # commands are guild-only; a channel outside the cache still has a scope
            place = Place(Scope.channel(interaction.guild_id or 0, interaction.channel_id or 0), None,
                          interaction.guild_id, interaction.channel_id or 0)
        return place.scope, place.session_id or (await self.engine.thread_for(place.scope)).id

    answer = staticmethod(answer)

    async def allowed(self, interaction: discord.Interaction) -> bool:
        """The server-side Manage Server check; answers the refusal itself."""
        return await manager(interaction, "This changes the persona's memory or settings")

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
        view = await self.engine.peek_memory(scope)
        await self.answer(interaction, "\n".join(memory_lines(view, self.engine.clock(), full=full))
                          if view is not None else "No memory written yet.")

    @memory.command(name="history", description="Every short-term version of this channel's (or another's) memory")
    async def memory_history(self, interaction: discord.Interaction, channel: MemoryPlace | None = None) -> None:
        scope = await self.readable(interaction, channel)
        if scope is None:
            return
        records = await self.engine.memory_history(scope)
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
        pins = (await self.engine.memory_view(scope)).pins
        return [app_commands.Choice(name=p[:100], value=p) for p in pins if current.lower() in p.lower()][:MAX_CHOICES]

    @memory_admin.command(name="edit", description="Replace the current short-term memory (kept as a new version)")
    @app_commands.describe(text="One line; leave empty to edit the current memory in a form", file="A text file")
    async def memory_edit(self, interaction: discord.Interaction, text: app_commands.Range[str, 1, 4000] | None = None,
                          file: discord.Attachment | None = None, channel: MemoryPlace | None = None) -> None:
        scope = await self._target(interaction, channel)
        if scope is None:
            return
        view = await self.engine.peek_memory(scope)
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
        records = await self.engine.memory_history(scope, limit=MAX_CHOICES)
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
            done = await self.engine.forget_person(user, guild_id=interaction.guild_id)
        else:
            done = await self.engine.forget_person(user, dm=Scope.dm(user, interaction.channel_id or 0))
        await self.answer(interaction, forget_report(done, "of yours"))

    @memory_admin.command(name="forget", description="Erase a member's messages in this server and what was "
                                               "remembered from them")
    @app_commands.guild_only()
    async def memory_forget(self, interaction: discord.Interaction, user: discord.User) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        done = await self.engine.forget_person(user.id, guild_id=interaction.guild_id)
        await self.answer(interaction, forget_report(done, f"of {user.display_name}"))

    @memory.command(name="optout", description="Stop remembering anything you say, everywhere")
    async def memory_optout(self, interaction: discord.Interaction) -> None:
        await self.engine.opt_out(interaction.user.id)
        await self.answer(interaction, "From now on I don't keep or read anything you say. What I remember "
                                       "already stays until you run /memory forget-me; /memory optin undoes this.")

    @memory.command(name="optin", description="Let the persona remember what you say again")
    async def memory_optin(self, interaction: discord.Interaction) -> None:
        await self.engine.opt_out(interaction.user.id, out=False)
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
                changed = await engine.memory_pin(scope, arg, pinned=action == "pin")
                text = pin_text(arg, action == "pin", changed)
            elif action == "edit":
                text = written_text(await engine.memory_edit(scope, arg))
            elif action == "rollback":
                text = rollback_text(arg, await engine.memory_rollback(scope, arg))
            elif action == "regenerate":
                text = "\n".join(outcome_lines(await engine.memory_regenerate(scope)))
            else:
                changed = await engine.memory_pause(scope, action == "pause")
                text = pause_text(action == "pause", where, changed)
        except MemoryAdminError as exc:
            text = str(exc)
        await self.answer(interaction, text)

    # /threads (Stelis working threads)

    @stelis.command(name="tree", description="The Stelis threads of this channel: status, depth, window sizes")
    async def stelis_tree(self, interaction: discord.Interaction) -> None:
        scope, current = await self.where(interaction)
        root = await self.engine.thread_for(scope)
        await self.answer(interaction, "\n".join(tree_lines(await self.engine.tree(root.id), current)))

    @stelis.command(name="show", description="A Stelis thread's chronicle and last exchanges")
    @app_commands.describe(thread="The thread's number (see /threads tree)")
    async def stelis_show(self, interaction: discord.Interaction, thread: int) -> None:
        scope, _ = await self.where(interaction)
        detail = await self.engine.thread_detail(scope, thread)
        if detail is None:
            await self.answer(interaction, f"There is no Stelis thread {thread} in this channel; see /threads tree.")
            return
        found = detail.thread
        await self.answer(interaction, "\n".join([
            f"{thread_ref(found.id)} {found.label} [{found.status}], depth {found.depth}",
            "Chronicle:", found.chronicle_summary or "(none yet)", "Last exchanges:", *exchange_lines(detail.last),
        ]))

    @stelis_show.autocomplete("thread")
    async def _threads(self, interaction: discord.Interaction, current: str) -> list[app_commands.Choice[int]]:
        scope, _ = await self.where(interaction)
        root = await self.engine.thread_for(scope)
        rows = [r.thread for r in await self.engine.tree(root.id) if not r.thread.is_root]
        return [app_commands.Choice(name=f"{t.id} {t.label} [{t.status}]"[:100], value=t.id)
                for t in reversed(rows) if current.lower() in f"{t.id} {t.label}".lower()][:MAX_CHOICES]

    # /branches

    @branches.command(name="list", description="Branches of this channel: tasks, free, social")
    @app_commands.choices(status=[app_commands.Choice(name=s, value=s) for s in ("active", "suspended", "completed")])
    async def branches_list(self, interaction: discord.Interaction, status: str | None = None,
                            kind: str | None = None) -> None:
        scope, _ = await self.where(interaction)
        if kind is not None and kind not in BRANCH_KINDS:
            await self.answer(interaction, f"There is no kind {kind!r}: branches are {', '.join(BRANCH_KINDS)}.")
            return
        found = await self.engine.branches_of(scope, cast(BranchStatus | None, status), cast(BranchKind | None, kind))
        await self.answer(interaction, "\n".join(branch_list_lines(found)))

    @branches_list.autocomplete("kind")
    async def _kinds(self, interaction: discord.Interaction, current: str) -> list[app_commands.Choice[str]]:
        """Only the kinds this channel has branches of."""
        scope, _ = await self.where(interaction)
        present = {b.branch_type for b in await self.engine.branches_of(scope)}
        return [app_commands.Choice(name=k, value=k) for k in BRANCH_KINDS if k in present and k.startswith(current)]

    @branches.command(name="show", description="A branch and its sessions")
    async def branches_show(self, interaction: discord.Interaction, branch: str) -> None:
        scope, _ = await self.where(interaction)
        detail = await self.engine.branch_detail(scope, branch)
        if detail is None:
            await self.answer(interaction, f"There is no branch {branch!r} in this channel; see /branches list.")
            return
        await self.answer(interaction, "\n".join(branch_detail_lines(detail)))

    @branches_show.autocomplete("branch")
    async def _branches(self, interaction: discord.Interaction, current: str) -> list[app_commands.Choice[str]]:
        scope, _ = await self.where(interaction)
        found = await self.engine.branches_of(scope)
        return [app_commands.Choice(name=f"{b.label} [{b.status}]"[:100], value=b.id)
                for b in found if current.lower() in b.label.lower()][:MAX_CHOICES]

    async def _set_branch(self, interaction: discord.Interaction, branch: str, status: BranchStatus) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)  # a suspend writes a chronicle
        scope, _ = await self.where(interaction)
        try:
            found = await self.engine.set_branch_status(scope, branch, status)
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
            made = await self.engine.create_branch(scope, label, brief)
        except Failure as exc:
            await self.answer(interaction, exc.notice)
            return
        await self.answer(interaction, branch_line(made) + "\nIt waits, suspended: a pulse (/autonomy) or "
                                       "/branches-admin resume opens its first session.")

    # /model

    @app_commands.command(name="model", description="The model this server's replies use; an admin may choose")
    @app_commands.guild_only()
    @app_commands.describe(name="A model name your provider knows, or 'default' (Manage Server to change)")
    async def model(self, interaction: discord.Interaction,
                    name: app_commands.Range[str, 1, 100] | None = None) -> None:
        guild = interaction.guild_id or 0
        if name is not None:
            if not await self.allowed(interaction):
                return
            if name == "default":
                await self.engine.reset_setting("guild", guild, "persona.models.standard")
            else:
                await self.engine.set_setting("guild", guild, "persona.models.standard", name)
        effective = await self.engine.settings_for(guild, self._channel_id(interaction))
        chosen = effective.persona.models.standard
        default = self.engine.config.persona.models.standard
        offline = " (no model key is set, so the offline model answers for now)" \
            if self.engine.model_name == "offline" else ""
        await self.answer(interaction, f"Replies here use {chosen}{offline}"
                                       + (": this server's choice; /model default undoes it." if chosen != default
                                          else ": the default."))

    # /context

    @app_commands.command(name="context", description="How the next request's tokens are spent, by part")
    @app_commands.guild_only()
    async def context(self, interaction: discord.Interaction) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        _, thread_id = await self.where(interaction)
        assembly = await self.engine.context(thread_id, calls=False)
        total = self.engine.config.llm.context_tokens
        await self.answer(interaction, "\n".join([
            context_heading(thread_id, assembly.parts, total, assembly.window_budget), "```",
            *context_bars(assembly.parts, total), "```"]))

    # /recall

    @app_commands.command(name="recall", description="What the persona can recall about something, with dates "
                                                     "and who said it")
    @app_commands.describe(query="Words to look for, for example: calculator deadline")
    async def recall(self, interaction: discord.Interaction, query: app_commands.Range[str, 1, 300]) -> None:
        if not query.strip():
            await self.answer(interaction, "Give some words to look for, for example: calculator deadline")
            return
        scope, _ = await self.where(interaction)
        await self.answer(interaction, "\n".join(recall_lines(query, await self.engine.recall(scope, query))))

    # /config and /persona

    @config.command(name="show", description="Settings in effect in this channel, and the overrides")
    async def config_show(self, interaction: discord.Interaction) -> None:
        shown = await self.engine.settings_shown(interaction.guild_id or 0, self._channel_id(interaction))
        await self.answer(interaction, "\n".join(config_lines(shown, "channel")))

    @config.command(name="set", description="Override a setting for this server or this channel")
    @app_commands.choices(scope=[app_commands.Choice(name="server", value="guild"),
                                 app_commands.Choice(name="channel", value="channel")])
    async def config_set(self, interaction: discord.Interaction, scope: str, key: str, value: str) -> None:
        if not await self.allowed(interaction):
            return
        try:
            parsed = await self.engine.set_setting(cast(Where, scope), self._scope_id(interaction, scope), key, value,
                                                   interaction.guild_id)
        except ConfigError as exc:
            await self.answer(interaction, not_set_text(exc.problems))
            return
        where = "server" if scope == "guild" else "channel"
        await self.answer(interaction, set_text(key, parsed, f"for this {where}"))

    @config_set.autocomplete("key")
    async def _keys(self, interaction: discord.Interaction, current: str) -> list[app_commands.Choice[str]]:
        return [app_commands.Choice(name=k, value=k) for k in OVERRIDABLE if current.lower() in k][:MAX_CHOICES]

    @config.command(name="reset", description="Remove an override for this server or this channel")
    @app_commands.choices(scope=[app_commands.Choice(name="server", value="guild"),
                                 app_commands.Choice(name="channel", value="channel")])
    async def config_reset(self, interaction: discord.Interaction, scope: str, key: str) -> None:
        if not await self.allowed(interaction):
            return
        removed = await self.engine.reset_setting(cast(Where, scope), self._scope_id(interaction, scope), key)
        await self.answer(interaction, reset_text(key, removed))

    config_reset.autocomplete("key")(_keys)

    @persona.command(name="show", description="The persona in this channel")
    async def persona_show(self, interaction: discord.Interaction) -> None:
        effective = await self.engine.settings_for(interaction.guild_id or 0, self._channel_id(interaction))
        await self.answer(interaction, f"{effective.persona.name}\n{effective.persona.card}")

    @persona.command(name="set", description="Change the persona card for this server")
    @app_commands.describe(card="One line; leave empty to edit the current card in a form", file="A text file")
    async def persona_set(self, interaction: discord.Interaction, card: app_commands.Range[str, 1, 4000] | None = None,
                          file: discord.Attachment | None = None) -> None:
        if not await self.allowed(interaction):
            return
        effective = await self.engine.settings_for(interaction.guild_id or 0, self._channel_id(interaction))

        async def submit(it: discord.Interaction, new: str) -> None:
            try:
                await self.engine.set_setting("guild", it.guild_id or 0, "persona.card", new)
            except ConfigError as exc:
                await self.answer(it, not_set_text(exc.problems))
                return
            await self.answer(it, "Persona card updated for this server.")

        await long_text(interaction, card, file, title=f"{effective.persona.name}'s card",
                        label="Who the persona is", current=effective.persona.card, submit=submit)

    @staticmethod
    def _channel_id(interaction: discord.Interaction) -> int:
        return settings_channel(interaction.channel, interaction.channel_id or 0)

    def _scope_id(self, interaction: discord.Interaction, scope: str) -> int:
        return (interaction.guild_id or 0) if scope == "guild" else self._channel_id(interaction)


async def setup(bot: commands.Bot) -> None:
    await bot.add_cog(Admin(bot))


def forget_report(done: Rewritten, whose: str) -> str:
    """What a forget request erased and rewrote, in one line."""
    if not done.messages:
        return f"There were no messages {whose} to forget here."
    said = (f"Forgot {done.messages} message(s) {whose}: rewrote {done.versions} memory version(s), "
            f"{done.chronicles} chronicle(s) and {done.windows} rolling summary(ies); the old text is deleted.")
    if done.unscrubbed:
        said += f" The database's own files could not be cleaned yet ({done.unscrubbed}); the operator is told."
    return said

