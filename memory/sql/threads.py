"""Threads and their messages, as both backends read them (writes that span statements stay in each backend)."""

from __future__ import annotations

import json
from typing import Any

from memory import rows as row_to
from memory.records import Message, Scope, Thread
from memory.sql.base import SqlStore
from memory.store import WINDOW_RESET
from memory.store_common import SEQ_MAX

# What an assembly reads first with the thread: the newest memory record's id (what a cold cache shows memory as of).
NEWEST_RECORD = "(SELECT COALESCE(MAX(id), 0) FROM memory_records) AS newest_record"
# Live messages of a thread within (after, through]: what a count reads, and what a version's save counts again.
LIVE_IN_RANGE = "SELECT COUNT(*) FROM messages WHERE thread_id = ? AND seq > ? AND seq <= ? AND deleted_at IS NULL"
# A purge's last statements: recall's saved counts may hold the erased words (by their hashes), so none is kept,
# and none taken until now (the archive no larger than it is now) is saved later, by this process or another.
FORGET_COUNTS = ("DELETE FROM recall_counts",
                 "UPDATE recall_counts_erased SET archive = (SELECT COALESCE(MAX(seq), 0) FROM messages)")
# A page of a thread's live messages strictly between two seqs, through its (thread, seq) index.
PAGE = ("SELECT * FROM messages WHERE thread_id = ? AND seq > ? AND seq < ? AND deleted_at IS NULL"
        " ORDER BY seq {order} LIMIT ?")


def window_reset_sql(threads: str) -> str:
    """The statement that starts afresh the windows of `threads` (an SQL expression: their ids) and their
    ancestors'."""
    columns = ", ".join(f"{key} = {'NULL' if value is None else value}" for key, value in WINDOW_RESET.items())
    return (f"WITH RECURSIVE chain (id) AS (SELECT id FROM threads WHERE id IN ({threads}) UNION"
            " SELECT t.parent_thread_id FROM threads t JOIN chain c ON t.id = c.id"
            " WHERE t.parent_thread_id IS NOT NULL)"
            f" UPDATE threads SET {columns} WHERE id IN (SELECT id FROM chain)")


REPLY_WITHIN = 20  # a reply is among the next messages of its thread (Store.replies_to); later ones answer others


def remembered(thread: str, author: str) -> str:
    """The author of a message of `thread` has not opted out of that thread's persona (SQL expressions, placeholders
    or columns): what storing a message, or taking an edit, checks in the statement that writes it."""
    return (f"NOT EXISTS (SELECT 1 FROM optouts o JOIN threads t ON t.persona = o.persona WHERE t.id = {thread}"
            f" AND o.user_id = {author})")


def next_reply(differs: str, not_placeholder: str) -> str:
    """SQL for the seq of the next message someone else said after message `p` in its thread: the thread's index
    read in order for a few rows, however long the thread (`differs`: the backend's row inequality;
    `not_placeholder`: its test of a message `c`)."""
    return ("SELECT c.seq FROM (SELECT n.seq, n.role, n.author_id, n.author_name, n.deleted_at, n.metadata"
            f" FROM messages n WHERE n.thread_id = p.thread_id AND n.seq > p.seq ORDER BY n.seq LIMIT {REPLY_WITHIN})"
            " AS c WHERE c.role IN ('user', 'assistant') AND c.deleted_at IS NULL"
            " AND (c.role, COALESCE(c.author_id, 0), COALESCE(c.author_name, ''))"
            f" {differs} (p.role, COALESCE(p.author_id, 0), COALESCE(p.author_name, ''))"
            f" AND {not_placeholder} ORDER BY c.seq LIMIT 1")


class ThreadsSql(SqlStore):
    # threads

    async def find_root(self, persona: str, scope: Scope) -> Thread | None:
        """The root thread of a scope, if it exists: reading never creates one."""
        row = await self._row("SELECT * FROM threads WHERE persona = ? AND scope_key = ? AND kind = 'root'",
                              (persona, scope.key))
        return row_to.thread(row) if row else None

    async def find_thread(self, thread_id: int) -> Thread | None:
        row = await self._row("SELECT * FROM threads WHERE id = ?", (thread_id,))
        return row_to.thread(row) if row else None

    async def thread_with_count(self, thread_id: int) -> tuple[Thread, int] | None:
        """A thread and how many messages it holds, in one round trip (a live Stelis thread's status)."""
        row = await self._row("SELECT *, (SELECT COUNT(*) FROM messages WHERE thread_id = threads.id"
                              " AND deleted_at IS NULL) AS message_count FROM threads WHERE id = ?", (thread_id,))
        if row is None:
            return None
        return row_to.thread(row, leave_out=("message_count",)), int(row["message_count"])

    async def children(self, thread_id: int) -> list[Thread]:
        rows = await self._rows("SELECT * FROM threads WHERE parent_thread_id = ? ORDER BY id", (thread_id,))
        return [row_to.thread(r) for r in rows]

    async def active_threads_of_run(self, run_id: str) -> list[Thread]:
        """A run's open Stelis threads, outermost first: the stack to resume it with."""
        rows = await self._rows("SELECT * FROM threads WHERE status = 'active' AND run_id = ? ORDER BY depth",
                                (run_id,))
        return [row_to.thread(r) for r in rows]

    async def root_threads(self, persona: str) -> list[Thread]:
        rows = await self._rows("SELECT * FROM threads WHERE persona = ? AND kind = 'root' AND channel_id IS NOT NULL"
                                " ORDER BY id", (persona,))
        return [row_to.thread(r) for r in rows]

    async def conversation_threads(self, persona: str, *, guild_id: int | None = None,
                                   scope_key: str | None = None) -> list[int]:
        """Ids of every thread of a server's conversations, or of one conversation (a DM)."""
        rows = await self._rows("SELECT id FROM threads WHERE persona = ? AND (guild_id = ? OR scope_key = ?)",
                                (persona, guild_id, scope_key))
        return [int(r[0]) for r in rows]

    async def beat(self, owner: str) -> None:
        """`owner` is alive now (its open threads are not swept while it beats)."""
        await self._changed("INSERT INTO owners (owner, heartbeat_at) VALUES (?, ?) ON CONFLICT (owner)"
                            " DO UPDATE SET heartbeat_at = excluded.heartbeat_at", (owner, self.clock()))

    # messages

    async def tail(self, thread_id: int, limit: int) -> list[Message]:
        """The newest `limit` live messages of a thread, oldest first (index range scan + LIMIT)."""
        rows = await self._rows("SELECT * FROM messages WHERE thread_id = ? AND deleted_at IS NULL"
                                " ORDER BY seq DESC LIMIT ?", (thread_id, limit))
        return [row_to.message(r) for r in reversed(rows)]

    async def _page(self, thread_id: int, lower: int, upper: int, limit: int,
                    newest_first: bool) -> list[Message]:
        rows = await self._rows(PAGE.format(order="DESC" if newest_first else "ASC"), (thread_id, lower, upper, limit))
        return [row_to.message(row) for row in rows]

    async def last_exchanges(self, thread_id: int, limit: int) -> list[Message]:
        """The newest user and assistant messages, oldest first."""
        rows = await self._rows(
            "SELECT * FROM messages WHERE thread_id = ? AND role IN ('user', 'assistant') AND deleted_at IS NULL"
            " ORDER BY seq DESC LIMIT ?", (thread_id, limit))
        return [row_to.message(r) for r in reversed(rows)]

    async def count_messages(self, thread_id: int, after_seq: int = -1) -> int:
        return int(await self._scalar(LIVE_IN_RANGE, (thread_id, after_seq, SEQ_MAX)))

    async def message_by_seq(self, seq: int) -> Message | None:
        row = await self._row("SELECT * FROM messages WHERE seq = ?", (seq,))
        return row_to.message(row) if row else None

    async def message_by_external_id(self, external_id: int) -> Message | None:
        row = await self._row("SELECT * FROM messages WHERE external_id = ?", (external_id,))
        return row_to.message(row) if row else None

    async def has_spoken(self, thread_id: int) -> bool:
        return await self._row("SELECT 1 FROM messages WHERE thread_id = ? AND role = 'assistant'"
                               " AND deleted_at IS NULL LIMIT 1", (thread_id,)) is not None

    async def last_external_id(self, thread_id: int) -> int | None:
        """The newest Discord message id remembered in a thread: where a backfill after a reconnect starts."""
        found = await self._scalar("SELECT MAX(external_id) FROM messages WHERE thread_id = ?"
                                   " AND external_id IS NOT NULL", (thread_id,))  # the partial index answers
        return None if found is None else int(found)

    async def set_metadata(self, seq: int, metadata: dict[str, Any]) -> None:
        """Replace a message's metadata (its text never changes); its thread's revision moves after it (what was
        read before the change is refused where it is saved against the revision)."""
        await self._changed("UPDATE messages SET metadata = ? WHERE seq = ?",
                            (json.dumps(metadata, ensure_ascii=False), seq))
        await self._changed("UPDATE threads SET revision = revision + 1"
                            " WHERE id = (SELECT thread_id FROM messages WHERE seq = ?)", (seq,))

    async def newest_texts(self, limit: int) -> list[str]:
        """The texts of the newest live messages, newest first."""
        rows = await self._rows("SELECT content FROM messages WHERE deleted_at IS NULL ORDER BY seq DESC LIMIT ?",
                                (limit,))
        return [r[0] for r in rows]
