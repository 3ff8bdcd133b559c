"""The Discord permissions each feature uses, and those found missing in a channel: said once, never swallowed."""

from __future__ import annotations

import logging

import discord

log = logging.getLogger(__name__)

# What each permission the bot uses is for; the invite asks for exactly these.
USES = {
    "view_channel": "seeing the channel",
    "read_message_history": "replying to a message and catching up after a reconnect",
    "send_messages": "answering",
    "send_messages_in_threads": "answering in threads",
    "create_public_threads": "opening a task's thread",
    "add_reactions": "marking a message that waits for the cooldown (⏳)",
    "change_nickname": "taking the name the persona has in this server (/persona name) as its nickname",
}
NEEDED = discord.Permissions(**dict.fromkeys(USES, True))


def invite_url(application_id: int) -> str:
    """The invite link with the scopes and the permissions the bot uses."""
    return discord.utils.oauth_url(application_id, permissions=NEEDED, scopes=("bot", "applications.commands"))


def label(permission: str) -> str:
    return permission.replace("_", " ").title().replace("In ", "in ")


class MissingPermissions:
    """Permissions the bot found it lacks, per channel; each is logged the first time it is found."""

    def __init__(self) -> None:
        self._found: dict[int, set[str]] = {}

    def has(self, channel: discord.abc.Messageable, permission: str) -> bool:
        """Whether the bot holds `permission` in `channel` (a DM: always); a lack is noted and logged once."""
        guild = getattr(channel, "guild", None)
        if guild is None or not isinstance(channel, discord.abc.GuildChannel | discord.Thread):
            return True
        if getattr(channel.permissions_for(guild.me), permission):
            self._found.get(channel.id, set()).discard(permission)  # granted since: said again if lost again
            return True
        self.note(channel.id, permission)
        return False

    def note(self, channel_id: int, permission: str) -> None:
        """Discord refused something for want of `permission` (or the bot saw it lacks it)."""
        found = self._found.setdefault(channel_id, set())
        if permission not in found:
            found.add(permission)
            log.warning("missing Discord permission %s in channel %d: no %s there until it is granted",
                        label(permission), channel_id, USES.get(permission, permission))

    def lines(self, channel: object) -> list[str]:
        """What /help says of a channel: each permission found missing there and still missing, and what it
        stops."""
        if not isinstance(channel, discord.abc.Messageable):
            return []
        found = sorted(self._found.get(getattr(channel, "id", 0), ()))
        return [f"- {label(p)}: no {USES.get(p, p)}" for p in found if not self.has(channel, p)]
