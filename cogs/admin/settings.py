"""/config, /persona and /model: settings per server or channel."""

from __future__ import annotations

import io
from typing import cast

import discord
from discord import app_commands

from bot.character_card import CardError, card_file
from bot.config import OVERRIDABLE, ConfigError
from bot.engine import Where
from bot.report import (
    config_lines,
    not_set_text,
    reset_text,
    set_text,
)
from cogs.admin.base import MAX_CHOICES, AdminBase
from cogs.interactions import MANAGE, manager_only
from cogs.long_text import long_text

MAX_NICKNAME = 32  # Discord's limit; a persona's name may be longer
WHERE = [app_commands.Choice(name="this server", value="guild"),
         app_commands.Choice(name="this channel", value="channel")]


def _named(where: str) -> str:
    return "this server" if where == "guild" else "this channel alone"


class SettingsCommands(AdminBase):
    config = app_commands.Group(name="config", description="Settings per server or channel", guild_only=True,
                                default_permissions=MANAGE)
    persona = app_commands.Group(name="persona", description="The persona", guild_only=True,
                                 default_permissions=MANAGE)

    # /model

    @app_commands.command(name="model", description="The model replies use here; an admin may choose it for the "
                                                    "server or for a channel")
    @app_commands.guild_only()
    @app_commands.describe(name="A model name your provider knows, or 'default' (Manage Server to change)",
                           where="This server (default) or this channel alone")
    @app_commands.choices(where=WHERE)
    async def model(self, interaction: discord.Interaction,
                    name: app_commands.Range[str, 1, 100] | None = None, where: str = "guild") -> None:
        guild = interaction.guild_id or 0
        if name is not None:
            if not await self.allowed(interaction):
                return
            level, scope_id = cast(Where, where), self._scope_id(interaction, where)
            if name == "default":
                await self.engine.settings.reset(level, scope_id, "persona.models.standard")
            else:
                await self.engine.settings.set(level, scope_id, "persona.models.standard", name, guild)
        effective = await self.engine.settings.effective(guild, self._channel_id(interaction))
        chosen = effective.persona.models.standard
        default = self.engine.config.persona.models.standard
        offline = " (no model key is set, so the offline model answers for now)" \
            if self.engine.model_name == "offline" else ""
        await self.answer(interaction, f"Replies here use {chosen}{offline}"
                                       + (": chosen for this server or channel; /model default undoes it."
                                          if chosen != default
                                          else ": the default."))

    # /config and /persona

    @config.command(name="show", description="Settings in effect in this channel, and the overrides")
    async def config_show(self, interaction: discord.Interaction) -> None:
        shown = await self.engine.settings.shown(interaction.guild_id or 0, self._channel_id(interaction))
        await self.answer(interaction, "\n".join(config_lines(shown, "channel")))

    @config.command(name="set", description="Override a setting for this server or this channel")
    @app_commands.choices(scope=[app_commands.Choice(name="server", value="guild"),
                                 app_commands.Choice(name="channel", value="channel")])
    @manager_only("Changing the settings")
    async def config_set(self, interaction: discord.Interaction, scope: str, key: str, value: str) -> None:
        try:
            parsed = await self.engine.settings.set(cast(Where, scope), self._scope_id(interaction, scope), key, value,
                                                   interaction.guild_id)
        except ConfigError as exc:
            await self.answer(interaction, not_set_text(exc.problems))
            return
        where = "server" if scope == "guild" else "channel"
        renamed = await self._nickname(interaction, scope) if key == "persona.name" else ""
        await self.answer(interaction, set_text(key, parsed, f"for this {where}") + renamed)

    @config_set.autocomplete("key")
    async def _keys(self, interaction: discord.Interaction, current: str) -> list[app_commands.Choice[str]]:
        return [app_commands.Choice(name=k, value=k) for k in OVERRIDABLE if current.lower() in k][:MAX_CHOICES]

    @config.command(name="reset", description="Remove an override for this server or this channel")
    @app_commands.choices(scope=[app_commands.Choice(name="server", value="guild"),
                                 app_commands.Choice(name="channel", value="channel")])
    @manager_only("Changing the settings")
    async def config_reset(self, interaction: discord.Interaction, scope: str, key: str) -> None:
        removed = await self.engine.settings.reset(cast(Where, scope), self._scope_id(interaction, scope), key)
        renamed = await self._nickname(interaction, scope) if key == "persona.name" and removed else ""
        await self.answer(interaction, reset_text(key, removed) + renamed)

    config_reset.autocomplete("key")(_keys)

    @persona.command(name="show", description="The persona in this channel")
    async def persona_show(self, interaction: discord.Interaction) -> None:
        effective = await self.engine.settings.effective(interaction.guild_id or 0, self._channel_id(interaction))
        await self.answer(interaction, f"{effective.persona.name}\n{effective.persona.card}")

    @persona.command(name="set", description="Change the persona card for this server, or for this channel alone")
    @app_commands.describe(card="One line; leave empty to edit the current card in a form", file="A text file",
                           where="This server (default) or this channel alone (a persona of its own here)")
    @app_commands.choices(where=WHERE)
    @manager_only("Changing the persona card")
    async def persona_set(self, interaction: discord.Interaction, card: app_commands.Range[str, 1, 4000] | None = None,
                          file: discord.Attachment | None = None, where: str = "guild") -> None:
        effective = await self.engine.settings.effective(interaction.guild_id or 0, self._channel_id(interaction))
        scope_id, named = self._scope_id(interaction, where), _named(where)

        async def submit(it: discord.Interaction, new: str) -> None:
            try:
                await self.engine.settings.set(cast(Where, where), scope_id, "persona.card", new, it.guild_id)
            except ConfigError as exc:
                await self.answer(it, not_set_text(exc.problems))
                return
            await self.answer(it, f"Persona card updated for {named}.")

        await long_text(interaction, card, file, title=f"{effective.persona.name}'s card",
                        label="Who the persona is", current=effective.persona.card, submit=submit)

    @persona.command(name="import", description="Make a character card (SillyTavern / chub: JSON or PNG) the "
                     "persona card of this server or this channel")
    @app_commands.describe(card="The card's .json or .png file", where="This server (default) or this channel alone")
    @app_commands.choices(where=WHERE)
    @manager_only("Changing the persona card")
    async def persona_import(self, interaction: discord.Interaction, card: discord.Attachment,
                             where: str = "guild") -> None:
        try:
            character = await self.engine.settings.import_character(
                cast(Where, where), self._scope_id(interaction, where), await card.read(), card.filename,
                interaction.guild_id)
        except CardError as exc:
            await self.answer(interaction, f"Not changed: {exc.notice}.")
            return
        except ConfigError as exc:
            await self.answer(interaction, not_set_text(exc.problems))
            return
        await self.answer(interaction, f"The persona is {character.name} in {_named(where)}, from the character card "
                                       f"({len(character.card())} characters; /persona show prints it)."
                                       f"{await self._nickname(interaction, where)}")

    @persona.command(name="name", description="The persona's name in this server, or in this channel alone")
    @app_commands.describe(name="The name it goes by here, or 'default'",
                           where="This server (default: its nickname too) or this channel alone")
    @app_commands.choices(where=WHERE)
    @manager_only("Renaming the persona")
    async def persona_name(self, interaction: discord.Interaction, name: app_commands.Range[str, 1, 80],
                           where: str = "guild") -> None:
        scope_id = self._scope_id(interaction, where)
        try:
            if name == "default":
                await self.engine.settings.reset(cast(Where, where), scope_id, "persona.name")
            else:
                await self.engine.settings.set(cast(Where, where), scope_id, "persona.name", name, interaction.guild_id)
        except ConfigError as exc:
            await self.answer(interaction, not_set_text(exc.problems))
            return
        now = (await self.engine.settings.effective(interaction.guild_id or 0, self._channel_id(interaction))).persona
        said = (f"{_named(where).capitalize()} gives the persona no name of its own: it is {now.name} here."
                if name == "default" else f"The persona is {now.name} in {_named(where)}; its memory stays the same.")
        await self.answer(interaction, said + await self._nickname(interaction, where))

    async def _nickname(self, interaction: discord.Interaction, where: str) -> str:
        """A server's name for the persona is the bot's nickname there; a channel's shows in its words only
        (Discord has no per-channel nickname)."""
        guild = interaction.guild
        if guild is None:
            return ""
        if where != "guild":
            here = (await self.engine.settings.effective(guild.id, self._channel_id(interaction))).persona.name
            shown = guild.me.display_name
            return f" Discord still shows the bot as {shown} here." if here != shown else ""
        name = (await self.engine.settings.effective(guild.id, None)).persona.name
        wanted = None if name == guild.me.name else name
        if guild.me.nick == wanted:
            return ""
        if wanted is not None and len(wanted) > MAX_NICKNAME:
            return f" Discord allows nicknames of {MAX_NICKNAME} characters at most, so the bot's stays as it is."
        try:
            await guild.me.edit(nick=wanted)
        except discord.HTTPException:  # Forbidden included: no Change Nickname permission
            return f" Discord could not rename the bot: give it Change Nickname, or set its nickname to {name}."
        return f" Its nickname here is now {name}."

    @persona.command(name="export", description="This channel's persona as a character card (V2 JSON)")
    async def persona_export(self, interaction: discord.Interaction) -> None:
        effective = await self.engine.settings.effective(interaction.guild_id or 0, self._channel_id(interaction))
        data = card_file(effective.persona.name, effective.persona.card).encode()
        await interaction.response.send_message(
            f"{effective.persona.name}'s card, for SillyTavern or another Stelis:", ephemeral=True,
            file=discord.File(io.BytesIO(data), filename=f"{effective.persona.name}.json"))
