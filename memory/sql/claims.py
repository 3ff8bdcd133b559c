"""Claims: work one worker does at a time, held for a lease (the pulse of a server, a shard's login turn)."""

from __future__ import annotations

from memory.sql.base import SqlStore


class ClaimsSql(SqlStore):
    async def claim(self, key: str, owner: str, lease_seconds: float) -> bool:
        """Take `key` for `owner` until the lease runs out; False if someone else holds it."""
        now = self.clock()
        return bool(await self._written(
            "INSERT INTO claims (key, owner, until) VALUES (?, ?, ?) ON CONFLICT (key) DO UPDATE"
            " SET owner = excluded.owner, until = excluded.until WHERE claims.until < ? OR claims.owner = ?"
            " RETURNING owner", (key, owner, now + lease_seconds, now, owner)))

    async def release(self, key: str, owner: str) -> None:
        await self._changed("DELETE FROM claims WHERE key = ? AND owner = ?", (key, owner))
