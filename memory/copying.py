"""Copy every row of one store into another (`python -m bot migrate`): ids, versions and times kept, page by
page, rows already there skipped, so a copy that stopped half way is finished by running it again. Each page
is read back from the target and compared, and the counts of both sides at the end."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from memory.store import COPIED_TABLES, Store

PAGE = 2_000  # rows per page: one read and one write transaction each


@dataclass(frozen=True)
class TableCopy:
    table: str
    source: int  # rows in the source
    target: int  # rows in the target after the copy
    added: int  # rows this copy wrote (the rest were there already)
    differ: bool = False  # some row read back from the target was not the source's

    @property
    def matches(self) -> bool:
        return self.source == self.target and not self.differ


async def copy_store(source: Store, target: Store,
                     progress: Callable[[str, int], None] = lambda table, rows: None) -> list[TableCopy]:
    """Copy each table in an order that keeps every reference valid; count both sides after each."""
    copies = []
    for table, keys in COPIED_TABLES.items():
        after, added, read = None, 0, 0
        differ = False
        while rows := await source.table_rows(table, after, PAGE):
            added += await target.load_rows(table, rows)
            # read back: a row the target had already must be the same row, not another under the same key
            differ = differ or await target.table_rows(table, after, len(rows)) != rows
            read += len(rows)
            after = tuple(rows[-1][k] for k in keys)
            progress(table, read)
        copies.append(TableCopy(table, await source.count_rows(table), await target.count_rows(table), added,
                                differ))
    await target.index_messages()
    return copies
