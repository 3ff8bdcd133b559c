"""Settings in effect per server and channel: config.yaml, then the server's, then the channel's overrides."""

from __future__ import annotations

import time
from typing import Any, Literal

from bot.config import OVERRIDABLE, Config, ConfigError, apply_overrides, dotted_value
from bot.services.views import SettingsView
from memory.context import Conversation, Persona
from memory.records import MemoryChannel, Thread
from memory.settings import MemorySettings, Triggers
from memory.store import Store

Where = Literal["guild", "channel"]

# On a database other processes share, what this process read of settings and opt-outs is read again after
# this long: a change made by another process (a server's /config, a DM's opt-out) holds everywhere soon.
SHARED_MAX_AGE = 10.0


class Settings:
    def __init__(self, config: Config, store: Store, max_age: float | None = None):
        self.config = config
        self._store = store
        self.max_age = max_age  # None: this process makes every change, so what it read stays true
        self._cache: dict[tuple[int | None, int | None], tuple[float, Config]] = {}

    async def effective(self, guild_id: int | None, channel_id: int | None) -> Config:
        """The config with the guild's, then the channel's, overrides applied (validated, cached)."""
        key = (guild_id, channel_id)
        found = self._cache.get(key)
        if found is None or (self.max_age is not None and time.monotonic() - found[0] > self.max_age):
            overrides: dict[str, Any] = {}
            if guild_id is not None:
                overrides.update(await self._store.settings("guild", guild_id))
            if channel_id is not None:
                overrides.update(await self._store.settings("channel", channel_id))
            found = self._cache[key] = (time.monotonic(),
                                        apply_overrides(self.config, overrides) if overrides else self.config)
        return found[1]

    async def shown(self, guild_id: int | None, channel_id: int) -> SettingsView:
        """What /config show lists: the effective settings and each level's overrides."""
        server = await self._store.settings("guild", guild_id) if guild_id is not None else {}
        return SettingsView(await self.effective(guild_id, channel_id), server,
                            await self._store.settings("channel", channel_id))

    async def set(self, where: Where, scope_id: int, key: str, value: object) -> object:
        """Store an override after validating it; raises ConfigError naming what is wrong.

        Only OVERRIDABLE keys may be set. A text value is read as the key's declared type ("off"
        stays a word, "12" becomes a number), never as YAML. Returns the value as stored.
        """
        if key not in OVERRIDABLE:
            raise ConfigError([f"{key}: cannot be set here; per server or channel only these can: "
                               f"{', '.join(OVERRIDABLE)}"])
        base = await self.effective(scope_id if where == "guild" else None, None)
        typed = dotted_value(apply_overrides(base, {key: value}), key)
        await self._store.set_setting(where, scope_id, key, typed)
        self._cache.clear()
        return typed

    async def reset(self, where: Where, scope_id: int, key: str) -> bool:
        removed = await self._store.delete_setting(where, scope_id, key)
        self._cache.clear()
        return removed

    async def conversation(self, root: Thread) -> Conversation:
        """What a conversation's settings change in its prompt (the assembler asks before each build)."""
        config = await self.effective(root.guild_id, root.channel_id)
        chosen = config.persona.models.standard
        return Conversation.of(Persona(config.persona.name, config.persona.card), config.short_term_history,
                               config.memory, chosen if chosen != self.config.persona.models.standard else None)

    async def memory(self, ch: MemoryChannel | None) -> MemorySettings:
        """How one conversation's memory is written (None: the base settings, for server-wide work)."""
        config = await self.effective(ch.guild_id, ch.channel_id) if ch else self.config
        return MemorySettings(config.short_term_history, config.memory, config.stelis)

    async def counted(self, thread: Thread) -> Triggers | None:
        """The triggers a message in this thread counts towards; None when it does not count."""
        if not (thread.is_root or thread.discord_thread_id is not None):
            return None  # internal Stelis threads are remembered through their chronicles
        config = await self.effective(thread.guild_id, thread.channel_id)
        return config.short_term_history.triggers if config.short_term_history.enabled else None
