"""What the model was asked to do, per day, server and model (for /usage and the dashboard)."""

from __future__ import annotations

from collections.abc import Sequence

from memory.records import ModelUsage
from memory.sql.base import SqlStore


class UsageSql(SqlStore):
    async def add_usage(self, persona: str, spent: Sequence[tuple[int, ModelUsage]]) -> None:
        """Add each server's (0: none) calls of a model on a day to what is recorded, in one statement (a server,
        day and model at most once)."""
        if not spent:
            return
        await self._changed(
            "INSERT INTO model_usage (persona, day, guild_id, model, calls, input_tokens, output_tokens, cache_read,"
            f" cache_write) VALUES {', '.join(['(?, ?, ?, ?, ?, ?, ?, ?, ?)'] * len(spent))}"
            " ON CONFLICT (persona, guild_id, day, model) DO UPDATE"
            " SET calls = model_usage.calls + excluded.calls,"
            " input_tokens = model_usage.input_tokens + excluded.input_tokens,"
            " output_tokens = model_usage.output_tokens + excluded.output_tokens,"
            " cache_read = model_usage.cache_read + excluded.cache_read,"
            " cache_write = model_usage.cache_write + excluded.cache_write",
            [value for guild_id, u in spent for value in (persona, u.day, guild_id, u.model, u.calls, u.input_tokens,
                                                         u.output_tokens, u.cache_read, u.cache_write)])

    async def usage_since(self, persona: str, guild_id: int, first_day: str) -> list[ModelUsage]:
        """A server's days from `first_day` on, oldest first, one row per model."""
        rows = await self._rows(
            "SELECT day, model, calls, input_tokens, output_tokens, cache_read, cache_write FROM model_usage"
            " WHERE persona = ? AND guild_id = ? AND day >= ? ORDER BY day, model", (persona, guild_id, first_day))
        return [ModelUsage(str(r[0]), str(r[1]), *(int(v) for v in tuple(r)[2:])) for r in rows]
