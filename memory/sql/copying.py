"""Reading a whole database table by table, in pages (python -m bot migrate copies one into another)."""

from __future__ import annotations

from typing import Any

from memory import rows as row_to
from memory.sql.base import SqlStore, marks
from memory.store import copy_keys


class CopyingSql(SqlStore):
    async def table_rows(self, table: str, after: tuple[Any, ...] | None, limit: int) -> list[dict[str, Any]]:
        """A page of a table's rows in key order, after the last key of the page before."""
        keys = ", ".join(copy_keys(table))
        since = "" if after is None else f" WHERE ({keys}) > ({marks(after)})"
        rows = await self._rows(f"SELECT * FROM {table}{since} ORDER BY {keys} LIMIT ?", (*(after or ()), limit))
        return [row_to.columns(r) for r in rows]

    async def count_rows(self, table: str) -> int:
        copy_keys(table)
        return int(await self._scalar(f"SELECT COUNT(*) FROM {table}"))
