"""Memory versions' bookkeeping per conversation (seed 004) and pins, as both backends read and change them."""

from __future__ import annotations

from memory import rows as row_to
from memory.records import MemoryChannel
from memory.sql.base import SqlStore


class RecordsSql(SqlStore):
    async def memory_channel(self, thread_id: int) -> MemoryChannel | None:
        row = await self._row("SELECT * FROM memory_channels WHERE thread_id = ?", (thread_id,))
        return row_to.channel(row) if row else None

    async def due_channels(self, now: float, limit: int = 1_000) -> list[MemoryChannel]:
        """Conversations whose deadline has passed, earliest first (an index range scan)."""
        rows = await self._rows("SELECT * FROM memory_channels WHERE due_at IS NOT NULL AND paused = 0"
                                " AND due_at <= ? ORDER BY due_at LIMIT ?", (now, limit))
        return [row_to.channel(r) for r in rows]

    async def upcoming_deadlines(self, limit: int = 10_000) -> list[tuple[int, float]]:
        """(thread id, deadline) of every conversation with work pending, to re-arm timers after a restart."""
        rows = await self._rows("SELECT thread_id, due_at FROM memory_channels WHERE due_at IS NOT NULL"
                                " AND paused = 0 ORDER BY due_at LIMIT ?", (limit,))
        return [(int(r[0]), float(r[1])) for r in rows]

    async def release_channel(self, thread_id: int, owner: str) -> None:
        await self._changed("UPDATE memory_channels SET lease_owner = NULL, lease_until = NULL"
                            " WHERE thread_id = ? AND lease_owner = ?", (thread_id, owner))

    async def newest_record_id(self) -> int:
        return int(await self._scalar("SELECT COALESCE(MAX(id), 0) FROM memory_records"))

    # pins: facts kept word for word in every version

    async def pins(self, persona: str, scope: str, scope_id: int) -> list[str]:
        rows = await self._rows("SELECT fact FROM memory_pins WHERE persona = ? AND scope = ? AND scope_id = ?"
                                " ORDER BY id", (persona, scope, scope_id))
        return [r[0] for r in rows]

    async def pin(self, persona: str, scope: str, scope_id: int, fact: str) -> bool:
        changed = await self._changed(
            "INSERT INTO memory_pins (persona, scope, scope_id, fact, created_at) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT DO NOTHING", (persona, scope, scope_id, fact.strip(), self.clock())) == 1
        self.memory_changes += changed  # a kept prompt's layers are read again only when a pin really changed
        return changed

    async def unpin(self, persona: str, scope: str, scope_id: int, fact: str) -> bool:
        changed = await self._changed(
            "DELETE FROM memory_pins WHERE persona = ? AND scope = ? AND scope_id = ? AND fact = ?",
            (persona, scope, scope_id, fact.strip())) == 1
        self.memory_changes += changed
        return changed
