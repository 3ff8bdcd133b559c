"""Per-server and per-channel setting overrides, and who opted out of being remembered."""

from __future__ import annotations

import json
from typing import Any

from memory.sql.base import SqlStore


class SettingsSql(SqlStore):
    async def settings(self, scope: str, scope_id: int) -> dict[str, Any]:
        rows = await self._rows("SELECT key, value FROM settings WHERE scope = ? AND scope_id = ?", (scope, scope_id))
        return {r[0]: json.loads(r[1]) for r in rows}

    async def set_setting(self, scope: str, scope_id: int, key: str, value: Any) -> None:
        await self._changed(
            "INSERT INTO settings (scope, scope_id, key, value, updated_at) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT (scope, scope_id, key) DO UPDATE SET value = excluded.value,"
            " updated_at = excluded.updated_at", (scope, scope_id, key, json.dumps(value), self.clock()))

    async def delete_setting(self, scope: str, scope_id: int, key: str) -> bool:
        return await self._changed("DELETE FROM settings WHERE scope = ? AND scope_id = ? AND key = ?",
                                   (scope, scope_id, key)) == 1

    async def set_optout(self, persona: str, user_id: int, out: bool) -> None:
        if out:
            await self._changed("INSERT INTO optouts (persona, user_id, created_at) VALUES (?, ?, ?)"
                                " ON CONFLICT DO NOTHING", (persona, user_id, self.clock()))
        else:
            await self._changed("DELETE FROM optouts WHERE persona = ? AND user_id = ?", (persona, user_id))

    async def opted_out(self, persona: str) -> set[int]:
        return {int(r[0]) for r in await self._rows("SELECT user_id FROM optouts WHERE persona = ?", (persona,))}
