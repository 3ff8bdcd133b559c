"""A dashboard on a real engine (offline model, temporary SQLite), with a gate the test controls."""

from __future__ import annotations

from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from bot.clock import Clock
from bot.dashboard.server import Dashboard
from bot.engine import Engine
from bot.providers.offline import OfflineLLM
from memory.records import Scope

GUILD, OTHER_GUILD = 1, 2
ADMIN, MEMBER = 10, 11
GENERAL, STAFF, ELSEWHERE = 100, 101, 200  # channels: one public, one the admin cannot read, one in another server


@dataclass
class FakeGate:
    """Who manages which server and reads which channel, as Discord would say; changeable mid-test."""

    admins: set[tuple[int, int]] = field(default_factory=lambda: {(GUILD, ADMIN), (OTHER_GUILD, MEMBER)})
    can_read: set[tuple[int, int, int]] = field(default_factory=lambda: {(GUILD, ADMIN, GENERAL)})
    server_members: dict[int, str] = field(default_factory=lambda: {77: "ana"})

    async def manages(self, guild_id: int, user_id: int) -> bool:
        return (guild_id, user_id) in self.admins

    async def readable(self, guild_id: int, user_id: int, channel_ids: list[int]) -> set[int]:
        return {c for c in channel_ids if (guild_id, user_id, c) in self.can_read}

    async def members(self, guild_id: int, user_ids: list[int]) -> dict[int, str]:
        return {u: self.server_members[u] for u in user_ids if u in self.server_members and guild_id == GUILD}

    def server_name(self, guild_id: int) -> str:
        return f"Server {guild_id}"

    def channel_name(self, guild_id: int, channel_id: int) -> str:
        return {GENERAL: "general", STAFF: "staff", ELSEWHERE: "elsewhere"}.get(channel_id, str(channel_id))


@asynccontextmanager
async def running_dashboard(make_config: Any, **dashboard: Any):
    """(engine, dashboard, gate, clock) with a little said in three channels, the dashboard listening."""
    clock = Clock()
    config = make_config(snapshots={"interval_seconds": 0}, dashboard={"enabled": True, "port": 0, **dashboard})
    engine = await Engine.open(config, OfflineLLM(), clock=clock)
    gate = FakeGate()
    board = Dashboard(engine, config.dashboard, gate, clock=clock)
    for channel, guild, text in ((GENERAL, GUILD, "the lighthouse tour is on Saturday at nine"),
                                 (STAFF, GUILD, "staff only: the payroll code is 4471"),
                                 (ELSEWHERE, OTHER_GUILD, "another server's plans for the harbour")):
        await engine.conversations.hear(Scope.channel(guild, channel), text, author_name="ana", author_id=77)
        await engine.admin.regenerate(Scope.channel(guild, channel))  # a first short-term version
    await engine.conversations.settle()
    await board.start()
    try:
        yield engine, board, gate, clock
    finally:
        await board.stop()
        await engine.close()
