"""Settings in effect per server and channel: config.yaml, then the server's, then the channel's overrides."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from bot.character_card import Character, read_card
from bot.config import MAX_NAME, NAMES, OVERRIDABLE, Config, ConfigError, Where, apply_overrides, dotted_value, settable
from bot.services.views import SettingsView
from memory.budget import Budget
from memory.context import Persona, PromptSettings
from memory.records import MemoryChannel, Thread
from memory.settings import MemorySettings, Triggers
from memory.store import Store

# (server, "channel" | "role" | "user", ids) -> the ids that are not that server's: what a front end knows
Strangers = Callable[[int, str, list[int]], Awaitable[list[int]]]

# On a database other processes share, what this process read of settings and opt-outs is read again after
# this long: a change made by another process (a server's /config, a DM's opt-out) holds everywhere soon.
SHARED_MAX_AGE = 10.0


class EffectiveSettings:
    def __init__(self, config: Config, store: Store, max_age: float | None = None):
        self.config = config
        self._store = store
        self.max_age = max_age  # None: this process makes every change, so what it read stays true
        self._cache: dict[tuple[int | None, int | None], tuple[float, Config]] = {}
        # what the config in effect changes in a place's prompts, asked several times for every reply
        self._prompts: dict[tuple[int | None, int | None], tuple[Config, PromptSettings]] = {}
        self.strangers: Strangers | None = None  # set by the front end that knows the servers (Discord)

    async def effective(self, guild_id: int | None, channel_id: int | None) -> Config:
        """The config with the guild's, then the channel's, overrides applied (validated, cached)."""
        key = (guild_id, channel_id)
        found = self._cache.get(key)
        if found is None or (self.max_age is not None and time.monotonic() - found[0] > self.max_age):
            overrides: dict[str, Any] = {}
            if guild_id is not None:
                overrides.update(await self._store.settings("guild", guild_id))
            if channel_id is not None:
                overrides.update(_used(await self._store.settings("channel", channel_id), guild_id))
            found = self._cache[key] = (time.monotonic(),
                                        apply_overrides(self.config, overrides) if overrides else self.config)
        return found[1]

    async def reply_policy(self, guild_id: int | None, channel_id: int | None) -> str:
        return (await self.effective(guild_id, channel_id)).discord.reply_policy

    async def shown(self, guild_id: int | None, channel_id: int) -> SettingsView:
        """What /config show lists: the effective settings and each level's overrides (a channel's that do
        not apply listed as such)."""
        server = await self._store.settings("guild", guild_id) if guild_id is not None else {}
        stored = await self._store.settings("channel", channel_id)
        used = _used(stored, guild_id)
        return SettingsView(await self.effective(guild_id, channel_id), server, used,
                            {k: v for k, v in stored.items() if k not in used})

    async def import_character(self, where: Where, scope_id: int, data: bytes, filename: str = "the file",
                               guild_id: int | None = None) -> Character:
        """A character card (JSON, or the PNG that carries it) made the persona here, its name with it; CardError
        says why a file is not one. Memory stays kept under the configured name."""
        character = read_card(data, filename)
        await self.set(where, scope_id, "persona.name", character.name[:MAX_NAME].strip() or self.config.persona.name,
                       guild_id)
        await self.set(where, scope_id, "persona.card", character.card(), guild_id)
        return character

    async def set(self, where: Where, scope_id: int, key: str, value: object, guild_id: int | None = None) -> object:
        """Store an override after validating it; raises ConfigError naming what is wrong.

        Only OVERRIDABLE keys may be set. A text value is read as the key's declared type ("off"
        stays a word, "12" becomes a number), never as YAML. A value naming a channel, role or user
        must name one of the server it is set in (`guild_id`; a server's own setting: its id).
        Returns the value as stored.
        """
        if key not in OVERRIDABLE:
            raise ConfigError([f"{key}: cannot be set here; per server or channel only these can: "
                               f"{', '.join(OVERRIDABLE)}"])
        guild_id = scope_id if where == "guild" else guild_id
        if not settable(key, where, guild_id):
            raise ConfigError([f"{key}: one value for the whole server; set it for the server, not a channel"])
        base = await self.effective(guild_id, None)
        typed = dotted_value(apply_overrides(base, {key: value}), key)
        if key in NAMES:  # only what it adds: one who left the server may still be taken off a list
            before = dotted_value(base, key)
            added = [v for v in (typed if isinstance(typed, list) else [typed])
                     if v not in (before if isinstance(before, list) else [before])]
            await self._check_names(key, added, guild_id)
        await self._store.set_setting(where, scope_id, key, typed)
        self._cache.clear()
        return typed

    async def _check_names(self, key: str, values: list[object], guild_id: int | None) -> None:
        """A channel, role or user id must be this server's: another server's would carry words across."""
        ids = [v for v in values if isinstance(v, int)]
        if not ids:
            return
        kind = NAMES[key]
        if guild_id is None:
            raise ConfigError([f"{key}: names a {kind} of a server; set it in that server"])
        strangers = await self.strangers(guild_id, kind, ids) if self.strangers is not None else []
        if strangers:
            raise ConfigError([f"{key}: {', '.join(map(str, strangers))} is not a {kind} of this server"])

    async def reset(self, where: Where, scope_id: int, key: str) -> bool:
        removed = await self._store.delete_setting(where, scope_id, key)
        self._cache.clear()
        return removed

    async def conversation(self, root: Thread) -> PromptSettings:
        """What a conversation's settings change in its prompt (the assembler asks before each build)."""
        config = await self.effective(root.guild_id, root.channel_id)
        found = self._prompts.get((root.guild_id, root.channel_id))
        if found is None or found[0] is not config:
            chosen = config.persona.models.standard
            found = self._prompts[root.guild_id, root.channel_id] = (config, PromptSettings.of(
                Persona(config.persona.name, config.persona.card), config.short_term_history, config.memory,
                chosen if chosen != self.config.persona.models.standard else None))
        return found[1]

    async def memory(self, ch: MemoryChannel | None) -> MemorySettings:
        """How one conversation's memory is written (None: the base settings, for server-wide work)."""
        config = await self.effective(ch.guild_id, ch.channel_id) if ch else self.config
        budget = Budget(config.llm.context_tokens, config.llm.max_output_tokens, config.context)
        return MemorySettings(config.short_term_history, config.memory, config.stelis, budget.memory)

    async def counted(self, thread: Thread) -> Triggers | None:
        """The triggers a message in this thread counts towards; None when it does not count."""
        if thread.memory_scope is None:
            return None  # internal Stelis threads are remembered through their chronicles
        config = await self.effective(thread.guild_id, thread.channel_id)
        return config.short_term_history.triggers if config.short_term_history.enabled else None


def _used(stored: dict[str, Any], guild_id: int | None) -> dict[str, Any]:
    """A channel's overrides that apply: a server-wide setting stored on a channel (before settings knew their
    levels) is not one of them."""
    return {k: v for k, v in stored.items() if settable(k, "channel", guild_id)}
