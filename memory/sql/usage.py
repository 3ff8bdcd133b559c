"""What the model was asked to do, per day, server and model (for /usage and the dashboard)."""

from __future__ import annotations

from memory.records import ModelUsage
from memory.sql.base import SqlStore


class UsageSql(SqlStore):
    async def add_usage(self, persona: str, day: str, guild_id: int, model: str, input_tokens: int,
                        output_tokens: int, cache_read: int, cache_write: int) -> None:
        """One more call of `model` for this server (0: none) on `day`."""
        await self._changed(
            "INSERT INTO model_usage (persona, day, guild_id, model, calls, input_tokens, output_tokens, cache_read,"
            " cache_write) VALUES (?, ?, ?, ?, 1, ?, ?, ?, ?) ON CONFLICT (persona, guild_id, day, model) DO UPDATE"
            " SET calls = model_usage.calls + 1, input_tokens = model_usage.input_tokens + excluded.input_tokens,"
            " output_tokens = model_usage.output_tokens + excluded.output_tokens,"
            " cache_read = model_usage.cache_read + excluded.cache_read,"
            " cache_write = model_usage.cache_write + excluded.cache_write",
            (persona, day, guild_id, model, input_tokens, output_tokens, cache_read, cache_write))

    async def usage_since(self, persona: str, guild_id: int, first_day: str) -> list[ModelUsage]:
        """A server's days from `first_day` on, oldest first, one row per model."""
        rows = await self._rows(
            "SELECT day, model, calls, input_tokens, output_tokens, cache_read, cache_write FROM model_usage"
            " WHERE persona = ? AND guild_id = ? AND day >= ? ORDER BY day, model", (persona, guild_id, first_day))
        return [ModelUsage(str(r[0]), str(r[1]), *(int(v) for v in tuple(r)[2:])) for r in rows]
