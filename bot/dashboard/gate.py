"""What the front end answers for the dashboard: who manages a server, who reads a channel, what things are named."""

from __future__ import annotations

from typing import Protocol

from bot.dashboard.access import CONSOLE


class Gate(Protocol):
    """Asked on every page and every change, so a permission taken away closes the dashboard at once."""

    async def manages(self, guild_id: int, user_id: int) -> bool:
        """Does the user (still) have Manage Server there?"""
        ...

    async def readable(self, guild_id: int, user_id: int, channel_ids: list[int]) -> set[int]:
        """Which of these channels (or private threads) may the user read? Asked once for a page's channels."""
        ...

    async def members(self, guild_id: int, user_ids: list[int]) -> dict[int, str]:
        """Those of `user_ids` who are members of the server, with their names (nobody else is shown)."""
        ...

    def server_name(self, guild_id: int) -> str:
        ...

    def channel_name(self, guild_id: int, channel_id: int) -> str:
        ...


class ConsoleGate:
    """The console's own conversation, for the person at the terminal: nothing else exists here."""

    async def manages(self, guild_id: int, user_id: int) -> bool:
        return guild_id == CONSOLE

    async def readable(self, guild_id: int, user_id: int, channel_ids: list[int]) -> set[int]:
        return {0} & set(channel_ids) if guild_id == CONSOLE else set()

    async def members(self, guild_id: int, user_ids: list[int]) -> dict[int, str]:
        return {}

    def server_name(self, guild_id: int) -> str:
        return "the console"

    def channel_name(self, guild_id: int, channel_id: int) -> str:
        return "console"
