"""The SQLite store: one aiosqlite connection, WAL, foreign keys, versioned schema, short transactions."""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

import aiosqlite

from memory.migrations import LATEST_VERSION, MIGRATIONS
from memory.records import MemoryRecord, Message, NewMessage, Scope, Thread
from memory.tokens import count_tokens

log = logging.getLogger(__name__)

Clock = Callable[[], float]


UNKNOWN_BACKLOG = 1 << 30  # at start-up: whatever a previous run left unindexed is indexed at the first search
# A trimmed window's state, cleared when it restarts (a cut) or when what it summarises is erased.
WINDOW_GAP = {"window_gap_from": None, "window_gap_to": None, "window_bridge": None,
              "window_bridge_first_at": None, "window_bridge_last_at": None, "window_trims": 0,
              "window_cached_after": None}
PENDING_KEPT = 1_000  # texts of unindexed messages kept for word counts; beyond, the next search indexes first
TIDY_PAGES = 64  # index pages one tidying step may merge: a few milliseconds, so a reply queued behind waits little
_FTS_TABLES = ("messages_fts", "records_fts", "chronicles_fts")


class StoreError(Exception):
    """The database cannot be used as it is (for example, written by a newer Stelis)."""


class Store:
    """All SQL lives here and in its sibling modules; callers get records, never rows."""

    def __init__(self, db: aiosqlite.Connection, clock: Clock = time.time):
        self.db = db
        self.clock = clock
        self._write_lock = asyncio.Lock()
        self.sharing_version = 0  # bumped when a conversation's visibility or sharing changes (caches key on it)
        self.rewrites = 0  # bumped when a stored message changes (an edit, an erasure, an anchor's final form)
        self.memory_changes = 0  # bumped when a memory version is removed or a pin changes (caches key on it)
        self.conversations = 0  # bumped when a conversation may have joined its server (recall's visibility keys on it)
        self._conversations: set[int] = set()
        # Texts stored since recall's index was last brought up to date (None: unknown, index first).
        self._pending: list[str] | None = None

    @classmethod
    async def open(cls, path: Path | str, clock: Clock = time.time) -> Store:
        """Open (creating) the database; anything unusable is a StoreError naming the file and why."""
        try:
            if str(path) != ":memory:":
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            db = await aiosqlite.connect(str(path), isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot open the database {path}: {exc}") from None
        try:
            db.row_factory = sqlite3.Row
            await db.execute("PRAGMA journal_mode = WAL")
            await db.execute("PRAGMA foreign_keys = ON")
            await db.execute("PRAGMA synchronous = NORMAL")
            await db.execute("PRAGMA busy_timeout = 5000")
            store = cls(db, clock)
            await store.migrate()
        except BaseException as exc:
            await db.close()  # an open connection's thread would keep the process alive
            if isinstance(exc, sqlite3.Error):
                raise StoreError(f"the database {path} cannot be used ({exc}); restore it from a backup or "
                                 "a snapshot, or point data_dir elsewhere") from None
            raise
        return store

    async def close(self) -> None:
        await self.db.close()

    async def schema_version(self) -> int:
        async with self.db.execute("PRAGMA user_version") as cur:
            row = await cur.fetchone()
        return int(row[0])

    async def migrate(self) -> int:
        """Apply pending migrations in order, each in its own transaction; return how many ran."""
        current = await self.schema_version()
        if current > LATEST_VERSION:
            raise StoreError(
                f"database schema version {current} is newer than this Stelis understands "
                f"({LATEST_VERSION}); upgrade Stelis or use another database file"
            )
        for version in range(current + 1, LATEST_VERSION + 1):
            async with self.transaction() as db:
                for statement in _statements(MIGRATIONS[version - 1]):
                    await db.execute(statement)
                await db.execute(f"PRAGMA user_version = {version}")
            log.info("applied schema migration %d", version)
        return LATEST_VERSION - current

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[aiosqlite.Connection]:
        """One short write transaction at a time on the shared connection."""
        async with self._write_lock:
            try:
                await self.db.execute("BEGIN IMMEDIATE")
                try:
                    yield self.db
                except BaseException:
                    await self.db.execute("ROLLBACK")
                    raise
                await self.db.execute("COMMIT")
            except sqlite3.OperationalError as exc:  # disk full, read-only file, locked too long
                if self.db.in_transaction:
                    await self.db.execute("ROLLBACK")
                raise StoreError(f"the database refused a write ({exc}); nothing of it was saved") from exc

    # threads

    async def find_root(self, persona: str, scope: Scope) -> Thread | None:
        """The root thread of a scope, if it exists: reading never creates one."""
        row = await self.fetch_one("SELECT * FROM threads WHERE persona = ? AND scope_key = ? AND kind = 'root'",
                                   (persona, scope.key))
        return _thread(row) if row else None

    async def root_thread(self, persona: str, scope: Scope, window_ratio: float) -> Thread:
        """The root thread of a scope for a persona, created on first use."""
        lookup = "SELECT * FROM threads WHERE persona = ? AND scope_key = ? AND kind = 'root'"
        row = await self.fetch_one(lookup, (persona, scope.key))
        if row is None:
            async with self.transaction() as db:
                await db.execute(
                    "INSERT INTO threads (persona, kind, depth, window_ratio, scope_key, guild_id,"
                    " channel_id, discord_thread_id, created_at) VALUES (?, 'root', 0, ?, ?, ?, ?, ?, ?)"
                    " ON CONFLICT (persona, scope_key) WHERE kind = 'root' DO NOTHING",
                    (persona, window_ratio, scope.key, scope.guild_id, scope.channel_id,
                     scope.discord_thread_id, self.clock()),
                )
            row = await self.fetch_one(lookup, (persona, scope.key))
        return _thread(row)

    async def thread(self, thread_id: int) -> Thread:
        found = await self.find_thread(thread_id)
        if found is None:
            raise KeyError(f"no thread {thread_id}")
        return found

    async def find_thread(self, thread_id: int) -> Thread | None:
        row = await self.fetch_one("SELECT * FROM threads WHERE id = ?", (thread_id,))
        return _thread(row) if row else None

    async def thread_with_count(self, thread_id: int) -> tuple[Thread, int] | None:
        """A thread and how many messages it holds, in one round trip (a live Stelis thread's status)."""
        row = await self.fetch_one("SELECT *, (SELECT COUNT(*) FROM messages WHERE thread_id = threads.id"
                                   " AND deleted_at IS NULL) AS message_count FROM threads WHERE id = ?", (thread_id,))
        if row is None:
            return None
        return _thread(row, leave_out="message_count"), row["message_count"]

    def saw_conversation(self, thread_id: int) -> None:
        """A conversation's memory is kept: the first time this process sees it, it may be new to its server."""
        if thread_id not in self._conversations:
            self._conversations.add(thread_id)
            self.conversations += 1

    async def insert_thread(self, thread: Thread) -> Thread:
        """A thread with its id as given (snapshot import into an empty database)."""
        data = asdict(thread)
        columns = ", ".join(data)
        async with self.transaction() as db:
            await db.execute(f"INSERT INTO threads ({columns}) VALUES ({', '.join('?' * len(data))})",
                             tuple(data.values()))
        return await self.thread(thread.id)

    async def create_thread(
        self, parent: Thread, *, kind: str, label: str, window_ratio: float, chronicle_prompt: str | None,
        run_id: str | None, discord_thread_id: int | None = None, branch_id: str | None = None,
        anchor: NewMessage,
    ) -> tuple[Thread, Message]:
        """A child thread and its anchor message in the parent, in one transaction."""
        now = self.clock()
        async with self.transaction() as db:
            cur = await db.execute(
                "INSERT INTO threads (persona, kind, parent_thread_id, depth, window_ratio, label, chronicle_prompt,"
                " branch_id, scope_key, guild_id, channel_id, discord_thread_id, run_id, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (parent.persona, kind, parent.id, parent.depth + 1, window_ratio, label, chronicle_prompt, branch_id,
                 parent.scope_key, parent.guild_id, parent.channel_id, discord_thread_id, run_id, now),
            )
            child_id = cur.lastrowid
            metadata = {**anchor.metadata, "stelis_thread_id": child_id, "created_at": now}
            cur = await db.execute(
                "INSERT INTO messages (thread_id, role, content, metadata, token_count, created_at)"
                " VALUES (?, 'system', ?, ?, 0, ?)",
                (parent.id, anchor.content, json.dumps(metadata, ensure_ascii=False), now),
            )
            await db.execute("UPDATE threads SET anchor_seq = ? WHERE id = ?", (cur.lastrowid, child_id))
        self._stored(anchor.content)
        anchor_row = await self.fetch_one("SELECT * FROM messages WHERE seq = ?", (cur.lastrowid,))
        return await self.thread(child_id), _message(anchor_row)

    async def close_thread(self, ended: Thread, anchor_metadata: dict | None, anchor_tokens: int) -> Thread:
        """Save an ended thread's status and chronicle and fix its anchor's final form, atomically."""
        async with self.transaction() as db:
            await db.execute(
                "UPDATE threads SET status = ?, chronicle_summary = ?, completed_at = ? WHERE id = ?",
                (ended.status, ended.chronicle_summary, ended.completed_at, ended.id),
            )
            if anchor_metadata is not None and ended.anchor_seq is not None:
                await db.execute(
                    "UPDATE messages SET metadata = ?, token_count = ? WHERE seq = ?",
                    (json.dumps(anchor_metadata, ensure_ascii=False), anchor_tokens, ended.anchor_seq),
                )
                self.rewrites += 1
        return await self.thread(ended.id)

    async def children(self, thread_id: int) -> list[Thread]:
        rows = await self.fetch_all("SELECT * FROM threads WHERE parent_thread_id = ? ORDER BY id", (thread_id,))
        return [_thread(r) for r in rows]

    async def active_internal_threads(self) -> list[Thread]:
        """Active non-root threads not backed by a Discord thread: candidates for the start-up sweep."""
        rows = await self.fetch_all(
            "SELECT * FROM threads WHERE status = 'active' AND kind != 'root' AND discord_thread_id IS NULL"
            " ORDER BY depth DESC, id DESC", (),
        )
        return [_thread(r) for r in rows]

    async def active_threads_of_run(self, run_id: str) -> list[Thread]:
        """A run's open Stelis threads, outermost first: the stack to resume it with."""
        rows = await self.fetch_all("SELECT * FROM threads WHERE status = 'active' AND run_id = ? ORDER BY depth",
                                    (run_id,))
        return [_thread(r) for r in rows]

    async def set_window(self, thread_id: int, **state: int | float | str | None) -> Thread:
        """A window cut or trim: its start or gap, summaries (ranges, dates) and memory snapshot, in one write."""
        allowed = {"window_start_seq", "window_summary", "window_summary_from", "window_summary_to",
                   "window_summary_first_at", "window_summary_last_at", "memory_as_of", *WINDOW_GAP}
        if not state or set(state) - allowed:
            raise ValueError(f"window state is among {sorted(allowed)}")
        assignments = ", ".join(f"{k} = ?" for k in state)
        async with self.transaction() as db:
            await db.execute(f"UPDATE threads SET {assignments} WHERE id = ?", (*state.values(), thread_id))
        return await self.thread(thread_id)

    # messages

    async def append(self, thread_id: int, new: NewMessage,
                     then: Callable[[aiosqlite.Connection, float], Awaitable[Any]] | None = None,
                     ) -> tuple[Message, bool]:
        """Store a message; a known external id returns the stored one and False instead.

        `then(db, created_at)` runs in the same transaction when the message is new, so what it
        records (memory bookkeeping) is never lost to a crash between the two.
        """
        tokens = count_tokens(new.content)
        now = self.clock()
        async with self.transaction() as db:
            rows = await db.execute_fetchall(  # one round trip; the stored row comes back without a re-read
                "INSERT INTO messages (thread_id, role, author_id, author_name, content, metadata,"
                " token_count, external_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (external_id) DO NOTHING RETURNING *",
                (thread_id, new.role, new.author_id, new.author_name, new.content,
                 json.dumps(new.metadata, ensure_ascii=False), tokens, new.external_id, now),
            )
            row = next(iter(rows), None)
            if row is not None and then is not None:
                await then(db, now)
        if row is not None:
            self._stored(new.content)
        if row is None:  # a known external id: the message stored before
            row = await self.fetch_one("SELECT * FROM messages WHERE external_id = ?", (new.external_id,))
            return _message(row), False
        return _message(row), True

    async def append_many(self, thread_id: int, messages: list[NewMessage], seqs: list[int] | None = None,
                          created: list[float] | None = None, tokens: list[int] | None = None) -> int:
        """Store many messages in one transaction (imports, benchmarks); an export's seqs and counts are kept."""
        now = self.clock()
        rows = [
            (seqs[i] if seqs else None, thread_id, m.role, m.author_id, m.author_name, m.content,
             json.dumps(m.metadata, ensure_ascii=False), tokens[i] if tokens else count_tokens(m.content),
             m.external_id, created[i] if created else now)
            for i, m in enumerate(messages)
        ]
        async with self.transaction() as db:
            await db.executemany(
                "INSERT INTO messages (seq, thread_id, role, author_id, author_name, content, metadata, token_count,"
                " external_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows,
            )
            if seqs:  # an import may fill in below what the index has reached: those rows are indexed now
                await db.executemany(
                    "INSERT INTO messages_fts (rowid, content) SELECT seq, content FROM messages WHERE seq = ?"
                    " AND deleted_at IS NULL AND content != ''"
                    " AND seq <= (SELECT upto FROM fts_progress WHERE name = 'messages')", [(s,) for s in seqs])
            await _index_pending(db)  # a bulk load is indexed as it lands: no first search pays for it
        self._pending = []
        if seqs:  # ... and any window already read may miss them
            self.rewrites += 1
        return len(rows)

    async def index_messages(self) -> int:
        """Index for recall the messages stored since the last call, in one batch; how many there were."""
        if self._pending == []:
            return 0
        async with self.transaction() as db:
            indexed = await _index_pending(db)
        self._pending = []
        return indexed

    async def tidy_index(self, pages: int = TIDY_PAGES) -> bool:
        """One bounded step of merging recall's index segments; True when it did work (more may remain).

        Each batch indexed is a new segment, and SQLite's own merging lags behind: left alone, a
        look-up opens two dozen segments where it could open three, and costs twice as much.
        """
        for table in _FTS_TABLES:  # the first with work left: a step is one short transaction
            async with self.transaction() as db:
                before = db.total_changes
                await db.execute(f"INSERT INTO {table} ({table}, rank) VALUES ('merge', ?)", (pages,))
                if db.total_changes - before > 1:  # the command itself counts one change
                    return True
        return False

    async def merge_index(self) -> None:
        """Merge recall's index step by step until it is done or new messages wait to be indexed."""
        while not self.unindexed and await self.tidy_index():
            pass

    @property
    def unindexed(self) -> int:
        """Messages stored since the index was brought up to date (a large number when unknown)."""
        return UNKNOWN_BACKLOG if self._pending is None else len(self._pending)

    def unindexed_texts(self) -> list[str] | None:
        """Their texts, for counting words the index does not hold yet; None when unknown."""
        return self._pending

    def _stored(self, text: str) -> None:
        if self._pending is not None:
            self._pending.append(text.lower())
            if len(self._pending) > PENDING_KEPT:
                self._pending = None

    async def tail(self, thread_id: int, limit: int) -> list[Message]:
        """The newest `limit` live messages of a thread, oldest first (index range scan + LIMIT)."""
        rows = await self.fetch_all(
            "SELECT * FROM messages WHERE thread_id = ? AND deleted_at IS NULL"
            " ORDER BY seq DESC LIMIT ?",
            (thread_id, limit),
        )
        return [_message(r) for r in reversed(rows)]

    def newest_first(self, thread_id: int, *, before_seq: int | None = None, after_seq: int | None = None,
                     page: int = 256) -> AsyncIterator[Message]:
        """Live messages newest first, read in indexed pages so callers stop as soon as they have enough."""
        return self._pages(thread_id, after_seq, before_seq, page, newest_first=True)

    def span(self, thread_id: int, first_seq: int | None, before_seq: int | None,
             page: int = 512) -> AsyncIterator[Message]:
        """Live messages oldest first from first_seq (inclusive) up to before_seq (exclusive)."""
        return self._pages(thread_id, None if first_seq is None else first_seq - 1, before_seq, page,
                           newest_first=False)

    async def _pages(self, thread_id: int, lower: int | None, upper: int | None, page: int,
                     newest_first: bool) -> AsyncIterator[Message]:
        """Messages strictly between lower and upper seqs, page by page through the (thread, seq) index."""
        lower = -1 if lower is None else lower
        upper = 2**63 - 1 if upper is None else upper
        order = "DESC" if newest_first else "ASC"
        while True:
            rows = await self.fetch_all(
                "SELECT * FROM messages WHERE thread_id = ? AND seq > ? AND seq < ? AND deleted_at IS NULL"
                f" ORDER BY seq {order} LIMIT ?", (thread_id, lower, upper, page),
            )
            for row in rows:
                yield _message(row)
            if len(rows) < page:
                return
            if newest_first:
                upper = rows[-1]["seq"]
            else:
                lower = rows[-1]["seq"]

    async def last_exchanges(self, thread_id: int, limit: int) -> list[Message]:
        """The newest user and assistant messages, oldest first."""
        rows = await self.fetch_all(
            "SELECT * FROM messages WHERE thread_id = ? AND role IN ('user', 'assistant') AND deleted_at IS NULL"
            " ORDER BY seq DESC LIMIT ?", (thread_id, limit),
        )
        return [_message(r) for r in reversed(rows)]

    async def count_messages(self, thread_id: int, after_seq: int = -1) -> int:
        row = await self.fetch_one(
            "SELECT COUNT(*) FROM messages WHERE thread_id = ? AND seq > ? AND deleted_at IS NULL",
            (thread_id, after_seq),
        )
        return int(row[0])

    async def message_by_seq(self, seq: int) -> Message | None:
        row = await self.fetch_one("SELECT * FROM messages WHERE seq = ?", (seq,))
        return _message(row) if row else None

    async def message_by_external_id(self, external_id: int) -> Message | None:
        row = await self.fetch_one("SELECT * FROM messages WHERE external_id = ?", (external_id,))
        return _message(row) if row else None

    async def edit_message(self, external_id: int, content: str) -> Message | None:
        """Replace a message's content (a Discord edit); its token count is recomputed once here."""
        async with self.transaction() as db:
            await db.execute(
                "UPDATE messages SET content = ?, token_count = ?, edited_at = ? WHERE external_id = ?",
                (content, count_tokens(content), self.clock(), external_id),
            )
        self.rewrites += 1
        self._pending = None  # its text may be among those kept for counting: index before the next search
        return await self.message_by_external_id(external_id)

    async def conversation_threads(self, persona: str, *, guild_id: int | None = None,
                                   scope_key: str | None = None) -> list[int]:
        """Ids of every thread of a server's conversations, or of one conversation (a DM)."""
        rows = await self.fetch_all(
            "SELECT id FROM threads WHERE persona = ? AND ((? IS NOT NULL AND guild_id = ?) OR scope_key = ?)",
            (persona, guild_id, guild_id, scope_key),
        )
        return [r["id"] for r in rows]

    async def purge(self, *, author_id: int | None = None, thread_ids: list[int] | None = None,
                    external_id: int | None = None) -> dict[int, set[int]]:
        """Erase messages for good (an author's in these threads, or one message): text, name and index
        entry go; the row stays as a gap so sequence numbers are never reused. Returns thread -> seqs."""
        if external_id is not None:
            where, params = "external_id = ?", (external_id,)
        elif author_id is not None and thread_ids:
            where = f"author_id = ? AND thread_id IN ({', '.join('?' * len(thread_ids))})"
            params = (author_id, *thread_ids)
        else:
            return {}
        async with self.transaction() as db:
            rows = await db.execute_fetchall(
                "UPDATE messages SET content = '', author_name = NULL, author_id = NULL, metadata = '{}',"
                f" token_count = 0, deleted_at = COALESCE(deleted_at, ?) WHERE {where} AND content != ''"
                " RETURNING thread_id, seq",
                (self.clock(), *params),
            )
        self.rewrites += 1
        self._pending = None  # an erased text must not even be counted: index before the next search
        purged: dict[int, set[int]] = {}
        for row in rows:
            purged.setdefault(row[0], set()).add(row[1])
        return purged

    async def delete_records(self, ids: list[int]) -> None:
        """Remove memory versions for good (their text and index entries)."""
        if ids:
            async with self.transaction() as db:
                await db.execute(f"DELETE FROM memory_records WHERE id IN ({', '.join('?' * len(ids))})", ids)
            self.memory_changes += 1

    async def set_optout(self, persona: str, user_id: int, out: bool) -> None:
        async with self.transaction() as db:
            if out:
                await db.execute("INSERT INTO optouts (persona, user_id, created_at) VALUES (?, ?, ?)"
                                 " ON CONFLICT DO NOTHING", (persona, user_id, self.clock()))
            else:
                await db.execute("DELETE FROM optouts WHERE persona = ? AND user_id = ?", (persona, user_id))

    async def opted_out(self, persona: str) -> set[int]:
        rows = await self.fetch_all("SELECT user_id FROM optouts WHERE persona = ?", (persona,))
        return {r["user_id"] for r in rows}

    async def delete_message(self, external_id: int) -> bool:
        """Erase one message (see purge); False when there was nothing left to erase."""
        return bool(await self.purge(external_id=external_id))

    # branches (seed 001)

    async def create_branch(self, branch_id: str, persona: str, branch_type: str, label: str, scope_key: str,
                            guild_id: int | None, channel_id: int | None, discord_thread_id: int | None) -> dict:
        async with self.transaction() as db:
            await db.execute(
                "INSERT INTO branches (id, persona, branch_type, label, scope_key, guild_id, channel_id,"
                " discord_thread_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
                (branch_id, persona, branch_type, label, scope_key, guild_id, channel_id, discord_thread_id,
                 self.clock()),
            )
        return await self.branch(branch_id)  # type: ignore[return-value]

    async def branch(self, branch_id: str) -> dict | None:
        row = await self.fetch_one("SELECT * FROM branches WHERE id = ?", (branch_id,))
        return dict(row) if row else None

    async def branches(self, persona: str, scope_key: str, status: str | None = None,
                       branch_type: str | None = None) -> list[dict]:
        rows = await self.fetch_all(
            "SELECT * FROM branches WHERE persona = ? AND scope_key = ? AND (? IS NULL OR status = ?)"
            " AND (? IS NULL OR branch_type = ?) ORDER BY created_at DESC",
            (persona, scope_key, status, status, branch_type, branch_type),
        )
        return [dict(r) for r in rows]

    async def update_branch(self, branch_id: str, *, status: str | None = None, current_thread_id: int | None = None,
                            label: str | None = None) -> None:
        now = self.clock()
        async with self.transaction() as db:
            await db.execute(
                "UPDATE branches SET status = COALESCE(?, status), current_thread_id = COALESCE(?, current_thread_id),"
                " label = COALESCE(?, label),"
                " suspended_at = CASE WHEN ? = 'suspended' THEN ? ELSE suspended_at END,"
                " completed_at = CASE WHEN ? = 'completed' THEN ? ELSE completed_at END WHERE id = ?",
                (status, current_thread_id, label, status, now, status, now, branch_id),
            )

    async def branch_threads(self, branch_id: str) -> list[Thread]:
        rows = await self.fetch_all("SELECT * FROM threads WHERE branch_id = ? ORDER BY id", (branch_id,))
        return [_thread(r) for r in rows]

    async def root_threads(self, persona: str) -> list[Thread]:
        rows = await self.fetch_all(
            "SELECT * FROM threads WHERE persona = ? AND kind = 'root' AND channel_id IS NOT NULL ORDER BY id",
            (persona,),
        )
        return [_thread(r) for r in rows]

    async def has_spoken(self, thread_id: int) -> bool:
        row = await self.fetch_one(
            "SELECT 1 FROM messages WHERE thread_id = ? AND role = 'assistant' AND deleted_at IS NULL LIMIT 1",
            (thread_id,),
        )
        return row is not None

    async def last_external_id(self, thread_id: int) -> int | None:
        """The newest Discord message id remembered in a thread: where a backfill after a reconnect starts."""
        row = await self.fetch_one("SELECT MAX(external_id) FROM messages WHERE thread_id = ?"
                                   " AND external_id IS NOT NULL", (thread_id,))  # the partial index answers
        return row[0]

    # memory records

    async def recent_records(self, persona: str, scope: str, scope_id: int, type_: str,
                             limit: int, as_of: int | None = None) -> list[MemoryRecord]:
        """The newest `limit` versions (written no later than record `as_of`, when given), oldest first."""
        rows = await self.fetch_all(
            "SELECT * FROM memory_records WHERE persona = ? AND scope = ? AND scope_id = ? AND type = ?"
            " AND (? IS NULL OR id <= ?) ORDER BY version DESC LIMIT ?",
            (persona, scope, scope_id, type_, as_of, as_of, limit),
        )
        return [record_from_row(r) for r in reversed(rows)]

    async def latest_record(self, persona: str, scope: str, scope_id: int, type_: str,
                            as_of: int | None = None) -> MemoryRecord | None:
        found = await self.recent_records(persona, scope, scope_id, type_, 1, as_of)
        return found[-1] if found else None

    async def add_record(self, persona: str, scope: str, scope_id: int, type_: str, content: str,
                         first_seq: int | None = None, last_seq: int | None = None,
                         metadata: dict | None = None, version: int | None = None) -> MemoryRecord:
        """A new version, allocated inside the write transaction so concurrent writers never collide
        (or the given version, for an import)."""
        async with self.transaction() as db:
            cur = await db.execute(
                "INSERT INTO memory_records (persona, scope, scope_id, type, version, content, first_seq, last_seq,"
                " metadata, created_at) SELECT ?, ?, ?, ?, COALESCE(?, MAX(version) + 1, 1), ?, ?, ?, ?, ?"
                " FROM memory_records WHERE persona = ? AND scope = ? AND scope_id = ? AND type = ?",
                (persona, scope, scope_id, type_, version, content, first_seq, last_seq, json.dumps(metadata or {}),
                 self.clock(), persona, scope, scope_id, type_),
            )
        row = await self.fetch_one("SELECT * FROM memory_records WHERE id = ?", (cur.lastrowid,))
        return record_from_row(row)

    # recall: full-text look-ups, always filtered to what one conversation may see

    async def newest_texts(self, limit: int) -> list[str]:
        """The texts of the newest live messages, newest first."""
        rows = await self.fetch_all("SELECT content FROM messages WHERE deleted_at IS NULL ORDER BY seq DESC LIMIT ?",
                                    (limit,))
        return [r[0] for r in rows]

    async def match_counts(self, table: str, terms: list[str], cap: int) -> tuple[int, dict[str, int]]:
        """About how many messages exist (the newest sequence), and how many rows of an index each term
        matches, counting no further than `cap`; one round trip."""
        if table not in _FTS_TABLES:
            raise ValueError(f"no full-text index {table!r}")
        counts = "".join(f", (SELECT COUNT(*) FROM (SELECT 1 FROM {table} WHERE {table} MATCH ? LIMIT ?))"
                         for _ in terms)
        params = [p for term in terms for p in (phrase(term), cap)]
        row = await self.fetch_one(f"SELECT (SELECT COALESCE(MAX(seq), 0) FROM messages){counts}", tuple(params))
        return int(row[0]), dict(zip(terms, (int(n) for n in row[1:]), strict=True))

    async def recall_messages(self, query: str, persona: str, scope_keys: tuple[str, ...],
                              limit: int) -> list[sqlite3.Row]:
        marks = ", ".join("?" * len(scope_keys))
        return await self.fetch_all(
            "SELECT m.seq, m.role, m.author_name, m.content, m.created_at, t.scope_key, t.kind, t.label"
            " FROM messages_fts JOIN messages m ON m.seq = messages_fts.rowid JOIN threads t ON t.id = m.thread_id"
            f" WHERE messages_fts MATCH ? AND t.persona = ? AND t.scope_key IN ({marks}) AND m.deleted_at IS NULL"
            " ORDER BY messages_fts.rank LIMIT ?", (query, persona, *scope_keys, limit),
        )

    async def scan_messages(self, needle: str, persona: str, scope_keys: tuple[str, ...], window: int,
                            limit: int) -> list[sqlite3.Row]:
        """Messages containing a text too short for trigrams, among the newest `window` only."""
        marks = ", ".join("?" * len(scope_keys))
        return await self.fetch_all(
            "SELECT m.seq, m.role, m.author_name, m.content, m.created_at, t.scope_key, t.kind, t.label"
            " FROM messages m JOIN threads t ON t.id = m.thread_id"
            " WHERE m.seq > (SELECT COALESCE(MAX(seq), 0) FROM messages) - ? AND instr(lower(m.content), ?) > 0"
            f" AND t.persona = ? AND t.scope_key IN ({marks}) AND m.deleted_at IS NULL ORDER BY m.seq DESC LIMIT ?",
            (window, needle, persona, *scope_keys, limit),
        )

    async def recall_notes(self, query: str, persona: str, scope_keys: tuple[str, ...],
                           scopes: tuple[tuple[str, int], ...], limit: int) -> list[sqlite3.Row]:
        """Chronicles and short-term memory versions matching a query, best first within each (one round trip).

        Long-term versions repeat the short-term ones they merged, so those are left out.
        """
        marks = ", ".join("?" * len(scope_keys))
        pairs = ", ".join("(?, ?)" for _ in scopes) or "(NULL, NULL)"
        return await self.fetch_all(
            "SELECT * FROM (SELECT 'chronicle' AS source, t.id, t.chronicle_summary AS text,"
            " COALESCE(t.completed_at, t.created_at) AS at, t.label, t.scope_key, NULL AS type, NULL AS scope,"
            " NULL AS version FROM chronicles_fts JOIN threads t ON t.id = chronicles_fts.rowid"
            f" WHERE chronicles_fts MATCH ? AND t.persona = ? AND t.scope_key IN ({marks})"
            " ORDER BY chronicles_fts.rank LIMIT ?)"
            " UNION ALL SELECT * FROM (SELECT 'record', r.id, r.content, r.created_at, NULL, NULL, r.type, r.scope,"
            " r.version FROM records_fts JOIN memory_records r ON r.id = records_fts.rowid"
            " WHERE records_fts MATCH ? AND r.persona = ? AND r.type = 'short_term'"
            f" AND (r.scope, r.scope_id) IN (VALUES {pairs}) ORDER BY records_fts.rank LIMIT ?)",
            (query, persona, *scope_keys, limit, query, persona, *(x for pair in scopes for x in pair), limit),
        )

    async def newest_record_id(self) -> int:
        row = await self.fetch_one("SELECT COALESCE(MAX(id), 0) FROM memory_records", ())
        return int(row[0])

    # settings

    async def settings(self, scope: str, scope_id: int) -> dict[str, Any]:
        rows = await self.fetch_all(
            "SELECT key, value FROM settings WHERE scope = ? AND scope_id = ?", (scope, scope_id)
        )
        return {r["key"]: json.loads(r["value"]) for r in rows}

    async def set_setting(self, scope: str, scope_id: int, key: str, value: Any) -> None:
        async with self.transaction() as db:
            await db.execute(
                "INSERT INTO settings (scope, scope_id, key, value, updated_at) VALUES (?, ?, ?, ?, ?)"
                " ON CONFLICT (scope, scope_id, key) DO UPDATE SET value = excluded.value,"
                " updated_at = excluded.updated_at",
                (scope, scope_id, key, json.dumps(value), self.clock()),
            )

    async def delete_setting(self, scope: str, scope_id: int, key: str) -> bool:
        async with self.transaction() as db:
            cur = await db.execute(
                "DELETE FROM settings WHERE scope = ? AND scope_id = ? AND key = ?", (scope, scope_id, key)
            )
        return cur.rowcount == 1

    # plumbing

    async def fetch_one(self, sql: str, params: tuple[Any, ...]) -> sqlite3.Row | None:
        """The first row: for queries of one row (more are read and dropped, so keep them small)."""
        rows = await self.db.execute_fetchall(sql, params)  # one hop to the database thread, not three
        return next(iter(rows), None)

    async def fetch_all(self, sql: str, params: tuple[Any, ...]) -> list[sqlite3.Row]:
        return list(await self.db.execute_fetchall(sql, params))


async def _index_pending(db: aiosqlite.Connection) -> int:
    """Index the messages stored above the index's mark, in the caller's transaction; how many seqs that spans."""
    rows = await db.execute_fetchall(
        "SELECT upto, (SELECT COALESCE(MAX(seq), 0) FROM messages) FROM fts_progress WHERE name = 'messages'")
    upto, newest = next(iter(rows))
    if newest <= upto:
        return 0
    await db.execute("INSERT INTO messages_fts (rowid, content) SELECT seq, content FROM messages"
                     " WHERE seq > ? AND seq <= ? AND deleted_at IS NULL AND content != ''", (upto, newest))
    await db.execute("UPDATE fts_progress SET upto = ? WHERE name = 'messages'", (newest,))
    return newest - upto

def _statements(script: str) -> list[str]:
    """Split a migration script into whole statements (a trigger's body keeps its inner ';')."""
    text = "\n".join(ln for ln in script.splitlines() if not ln.strip().startswith("--"))
    statements, current = [], ""
    for piece in text.split(";"):
        current += piece + ";"
        if sqlite3.complete_statement(current):
            if current.strip(" \n;"):
                statements.append(current.strip())
            current = ""
    if current.strip(" \n;"):
        raise StoreError(f"incomplete statement in a migration: {current.strip()[:80]}")
    return statements


def phrase(term: str) -> str:
    """One FTS5 phrase: quoted, inner quotes doubled."""
    return '"' + term.replace('"', '""') + '"'


def _thread(row: sqlite3.Row, leave_out: str = "") -> Thread:
    return Thread(**{k: row[k] for k in row.keys() if k != leave_out})  # noqa: SIM118 - sqlite3.Row is not a mapping


def record_from_row(row: sqlite3.Row) -> MemoryRecord:
    data = {k: row[k] for k in row.keys()}  # noqa: SIM118
    data["metadata"] = json.loads(data["metadata"])
    return MemoryRecord(**data)


def _message(row: sqlite3.Row) -> Message:
    data = {k: row[k] for k in row.keys()}  # noqa: SIM118
    data["metadata"] = json.loads(data["metadata"])
    return Message(**data)
