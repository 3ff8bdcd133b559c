"""The primitives every aggregate's SQL runs on: `?` placeholders; rows read, rows written, rows changed."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import Any

from memory.store_common import CommonStore

Row = Any  # sqlite3.Row or asyncpg.Record: both read by column name and by position


def marks(values: Sequence[object]) -> str:
    """One `?` per value, for `IN (...)` (an empty list matches nothing)."""
    return ", ".join("?" * len(values)) or "NULL"


class SqlStore(CommonStore):
    """A backend as the aggregates see it: statements with `?` placeholders, each in its own transaction."""

    @abstractmethod
    async def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """Every row a query gives."""

    @abstractmethod
    async def _written(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """Run a write with RETURNING; the rows it returned."""

    @abstractmethod
    async def _changed(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run a write; how many rows it changed."""

    async def _changed_for_all(self, sql: str, params: Sequence[Any] = ()) -> int:
        """`_changed` for a write other processes sharing the database hold in a cache (pins, branches, what a
        channel shares): where it changed a row, they read their caches again. No other process writes a SQLite
        database."""
        return await self._changed(sql, params)

    async def _row(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        """The first row, if any (for statements of one row)."""
        return next(iter(await self._rows(sql, params)), None)

    async def _scalar(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """The first column of a statement that always gives one row (an aggregate)."""
        row = await self._row(sql, params)
        assert row is not None, sql
        return row[0]
