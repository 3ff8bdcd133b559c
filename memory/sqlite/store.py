"""The SQLite backend: one aiosqlite connection, WAL, foreign keys, numbered migrations, short transactions."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from memory import rows as row_to
from memory.grouped import Grouped, answer_each, answer_future
from memory.quotes import ERASED, Erased
from memory.records import (
    MemoryChannel,
    MemoryRecord,
    Message,
    MessageMatch,
    NewMessage,
    NoteMatch,
    Opening,
    Recalled,
    Scope,
    Thread,
    Versions,
    own_memory,
    window_after,
)
from memory.settings import Triggers
from memory.sql.branches import BranchesSql
from memory.sql.claims import ClaimsSql
from memory.sql.copying import CopyingSql
from memory.sql.records import RecordsSql, answered, newest_records_sql
from memory.sql.settings import SettingsSql
from memory.sql.threads import (
    FORGET_COUNTS,
    LIVE_IN_RANGE,
    NEWEST_RECORD,
    PAGE,
    ThreadsSql,
    next_reply,
    remembered,
    window_reset_sql,
)
from memory.sql.usage import UsageSql
from memory.sqlite.batches import Batch, each_read
from memory.sqlite.batches import run as run_batch
from memory.store import Clock, OptedOut, OtherServer, StaleUpdate, StoreError, backoff, copy_keys, numbered_migrations
from memory.store_common import QUOTING, SEQ_MAX, Noted, erased_value, stale_summary
from memory.tokens import count_tokens

log = logging.getLogger(__name__)
T = TypeVar("T")


MIGRATIONS_DIR = Path(__file__).with_name("migrations")
UNKNOWN_BACKLOG = 1 << 30  # at start-up: whatever a previous run left unindexed is indexed at the first search
PENDING_KEPT = 1_000  # texts of unindexed messages kept for word counts; beyond, the next search indexes first
TIDY_PAGES = 64  # index pages one tidying step may merge: a few milliseconds, so a reply queued behind waits little
_FTS_TABLES = ("messages_fts", "records_fts", "chronicles_fts")
_WINDOWS_RESET = window_reset_sql("SELECT value FROM json_each(?)")  # a purge's threads (a JSON list)


def _due(long_term_pending: str, pending: str, last_at: str) -> str:
    """When a conversation's memory is due, as SQL over its bookkeeping (the one place this rule is written).

    A pending long-term update first (crash repair), then the threshold, then the idle deadline;
    nothing pending means not due.
    """
    return (f"CASE WHEN {long_term_pending} THEN :now WHEN {pending} >= :threshold THEN :now"
            f" WHEN {pending} > 0 THEN {last_at} + :idle ELSE NULL END")


# A new message counted: the row is created on first sight; a failed update keeps its retry time.
_NOTE_MESSAGE = (
    "INSERT INTO memory_channels (thread_id, persona, guild_id, channel_id, discord_thread_id,"
    " last_message_at, pending_count, due_at)"
    f" VALUES (:id, :persona, :guild, :channel, :dthread, :now, 1, {_due('0', '1', ':now')})"
    " ON CONFLICT (thread_id) DO UPDATE SET last_message_at = excluded.last_message_at,"
    " pending_count = pending_count + 1,"
    f" due_at = CASE WHEN failures > 0 THEN due_at ELSE {_due('long_term_pending', 'pending_count + 1', ':now')} END"
    " RETURNING due_at"
)
_INSERT_MESSAGE = ("INSERT INTO messages (thread_id, role, author_id, author_name, content, metadata, token_count,"
                   " external_id, created_at) SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9"
                   f" WHERE {remembered('?1', '?3')} ON CONFLICT (external_id) DO NOTHING RETURNING *")
_RECOMPUTE_DUE = (f"UPDATE memory_channels SET due_at = {_due('long_term_pending', 'pending_count', 'last_message_at')}"
                  " WHERE thread_id = :id")
# The next version of a memory record: the one rule, for admin edits, imports and the summariser alike.
_ADD_RECORD = (
    "INSERT INTO memory_records (persona, scope, scope_id, type, version, content, first_seq, last_seq,"
    " metadata, created_at) SELECT :persona, :scope, :scope_id, :type, COALESCE(:version, MAX(version) + 1, 1),"
    " :content, :first_seq, :last_seq, :metadata, :now"
    " FROM memory_records WHERE persona = :persona AND scope = :scope AND scope_id = :scope_id AND type = :type"
    " RETURNING *"
)


# Reads in one hop at most: their answers come back in one turn of the event loop
READS_TOGETHER = 50


class SqliteStore(ThreadsSql, RecordsSql, BranchesSql, ClaimsSql, SettingsSql, UsageSql, CopyingSql):
    """SQLite's own SQL (transactions of several statements, FTS5 recall, counting); the rest is memory/sql's."""

    def __init__(self, db: aiosqlite.Connection, clock: Clock = time.time):
        super().__init__(clock)
        self._db = db
        self._write_lock = asyncio.Lock()
        # Texts stored since recall's index was last brought up to date (None: unknown, index first).
        self._pending: list[str] | None = None
        self._changes = 1  # counts what may leave the index behind (a store, an edit; opening: unknown)
        self._covered = 0  # the count the last batch indexed up to
        self._indexing = asyncio.Lock()
        self._batch: Batch | None = None  # the writes waiting for the database's thread to commit them together
        self._alone = 0  # writes sent on their own, not back yet
        self._flushes: set[asyncio.Task[None]] = set()
        self._reads: Grouped[_Read] = Grouped(self._read_alone, self._read_together, most=READS_TOGETHER)

    @classmethod
    async def open(cls, path: Path | str, clock: Clock = time.time) -> SqliteStore:
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
            await db.execute("PRAGMA secure_delete = ON")  # a deleted or rewritten row's bytes are zeroed
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
        await asyncio.gather(*self._flushes, return_exceptions=True)  # writes on their way are committed first
        await self._reads.drain()
        await self._db.close()

    def pool_usage(self) -> tuple[int, int]:
        """Connections in use and how many there may be: one, busy while a write transaction is open."""
        return int(self._write_lock.locked()), 1

    async def schema_version(self) -> int:
        async with self._db.execute("PRAGMA user_version") as cur:
            row = await cur.fetchone()
        return int(row[0]) if row else 0

    async def migrate(self) -> int:
        """Apply pending migrations in order, each in its own transaction; return how many ran."""
        migrations = migration_files()
        latest = len(migrations)
        current = await self.schema_version()
        if current > latest:
            raise StoreError(
                f"database schema version {current} is newer than this Stelis understands "
                f"({latest}); upgrade Stelis or use another database file"
            )
        for version in range(current + 1, latest + 1):
            async with self._transaction() as db:
                for statement in _statements(migrations[version - 1].read_text()):
                    await db.execute(statement)
                await db.execute(f"PRAGMA user_version = {version}")
            log.info("applied schema migration %s", migrations[version - 1].name)
        return latest - current

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[aiosqlite.Connection]:
        """One short write transaction at a time on the shared connection; whatever ends it early (an error, a
        cancellation between two of its statements) rolls it back, so the next transaction starts clean."""
        async with self._write_lock:
            try:
                await self._db.execute("BEGIN IMMEDIATE")
                yield self._db
                await self._db.execute("COMMIT")
            except BaseException as exc:
                # Queued behind every statement this transaction sent (the thread runs them in order), and
                # shielded: a cancelled transaction left open would fail every later write, or be committed by one.
                await asyncio.shield(_in_thread(self._db, _roll_back))
                if isinstance(exc, sqlite3.OperationalError):  # disk full, read-only file, locked too long
                    raise _refused(exc) from exc
                raise

    async def _atomic(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """A short write in a transaction of its own, or, when others are on their way to the database's thread,
        committed with those that arrive meanwhile (group commit: a burst of replies had spent most of its time
        committing). Runs after any transaction of several hops (`_transaction`) open when it is sent."""
        try:
            if self._batch is None and not self._alone and not self._write_lock.locked():
                self._alone += 1  # nothing else on its way: straight to the thread, as cheap as a lone write can be
                try:
                    return await _in_thread(self._db, _whole, work)
                finally:
                    self._alone -= 1
            return await self._batched(work)
        except sqlite3.OperationalError as exc:  # disk full, read-only file, locked too long
            raise _refused(exc) from exc

    async def _batched(self, work: Callable[[sqlite3.Connection], T]) -> T:
        found = self._batch.add(work) if self._batch is not None else None
        if found is None:  # none open, or the open one is on its way: the next batch
            self._batch = batch = Batch()
            found = batch.add(work)
            assert found is not None
            flush = asyncio.ensure_future(self._flush(batch))
            self._flushes.add(flush)
            flush.add_done_callback(functools.partial(self._flushed, batch))
        result: T = await found
        return result

    async def _flush(self, batch: Batch) -> None:
        try:
            if self._write_lock.locked():
                async with self._write_lock:
                    results = await _in_thread(self._db, run_batch, batch)
            else:
                results = await _in_thread(self._db, run_batch, batch)
        except Exception as exc:
            batch.fail(exc)
            return
        batch.settle(results)

    def _flushed(self, batch: Batch, flush: asyncio.Task[None]) -> None:
        """A batch's commit is over, or was cancelled (the loop closing), even before it began: no write waits for it
        any longer, and none joins it."""
        self._flushes.discard(flush)
        if self._batch is batch:
            self._batch = None
        if flush.cancelled():
            batch.fail(asyncio.CancelledError())

    # threads

    async def opening(self, thread_id: int, after_seq: int | None, limit: int, versions: int = 0) -> Opening:
        row, page, asked, memory = await self._read(functools.partial(_opening, thread_id=thread_id,
                                                                      after_seq=after_seq, limit=limit,
                                                                      versions=versions))
        if row is None:
            raise KeyError(f"no thread {thread_id}")
        thread = self._as_noted(row_to.thread(row, leave_out=("newest_record",)))
        return Opening(thread, int(row["newest_record"]), after_seq, [row_to.message(r) for r in page], limit, asked,
                       answered(asked, memory))

    async def root_thread(self, persona: str, scope: Scope, window_ratio: float) -> Thread:
        """The root thread of a scope for a persona, created on first use."""
        lookup = "SELECT * FROM threads WHERE persona = ? AND scope_key = ? AND kind = 'root'"
        row = await self._row(lookup, (persona, scope.key))
        if row is None:
            if scope.guild_id is not None and await self._row(
                    "SELECT 1 FROM threads WHERE persona = ? AND kind = 'root' AND channel_id = ? AND guild_id != ?",
                    (persona, scope.channel_id, scope.guild_id)):
                raise OtherServer(scope.channel_id)
            async with self._transaction() as db:
                await db.execute(
                    "INSERT INTO threads (persona, kind, depth, window_ratio, scope_key, guild_id,"
                    " channel_id, discord_thread_id, created_at) VALUES (?, 'root', 0, ?, ?, ?, ?, ?, ?)"
                    " ON CONFLICT (persona, scope_key) WHERE kind = 'root' DO NOTHING",
                    (persona, window_ratio, scope.key, scope.guild_id, scope.channel_id,
                     scope.discord_thread_id, self.clock()),
                )
            row = await self._row(lookup, (persona, scope.key))
        assert row is not None  # inserted, or found inserted by another writer
        return row_to.thread(row)

    async def insert_thread(self, thread: Thread) -> Thread:
        """A thread with its id as given (snapshot import into an empty database)."""
        data = asdict(thread)
        columns = ", ".join(data)
        async with self._transaction() as db:
            await db.execute(f"INSERT INTO threads ({columns}) VALUES ({', '.join('?' * len(data))})",
                             tuple(data.values()))
        return await self.thread(thread.id)

    async def create_thread(
        self, parent: Thread, *, kind: str, label: str, window_ratio: float, chronicle_prompt: str | None,
        run_id: str | None, discord_thread_id: int | None = None, branch_id: str | None = None,
        anchor: NewMessage | None,
    ) -> tuple[Thread, Message | None]:
        """A child thread and its anchor message in the parent, in one transaction (a subagent's
        temporary thread has no anchor: nothing of it shows in the parent)."""
        now = self.clock()
        async with self._transaction() as db:
            cur = await db.execute(
                "INSERT INTO threads (persona, kind, parent_thread_id, depth, window_ratio, label, chronicle_prompt,"
                " branch_id, scope_key, guild_id, channel_id, discord_thread_id, run_id, created_at, owner)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (parent.persona, kind, parent.id, parent.depth + 1, window_ratio, label, chronicle_prompt, branch_id,
                 parent.scope_key, parent.guild_id, parent.channel_id, discord_thread_id, run_id, now, self.owner),
            )
            child_id = cur.lastrowid
            assert child_id is not None
            if anchor is None:
                return await self._thread_in(db, child_id), None
            metadata = {**anchor.metadata, "stelis_thread_id": child_id, "created_at": now}
            cur = await db.execute(
                "INSERT INTO messages (thread_id, role, content, metadata, token_count, created_at)"
                " VALUES (?, 'system', ?, ?, 0, ?)",
                (parent.id, anchor.content, json.dumps(metadata, ensure_ascii=False), now),
            )
            await db.execute("UPDATE threads SET anchor_seq = ? WHERE id = ?", (cur.lastrowid, child_id))
        self._stored(anchor.content)
        anchor_row = await self._row("SELECT * FROM messages WHERE seq = ?", (cur.lastrowid,))
        assert anchor_row is not None
        return await self.thread(child_id), row_to.message(anchor_row)

    async def _thread_in(self, db: aiosqlite.Connection, thread_id: int) -> Thread:
        """A thread read inside a write transaction."""
        rows = await db.execute_fetchall("SELECT * FROM threads WHERE id = ?", (thread_id,))
        return row_to.thread(next(iter(rows)))

    async def close_thread(self, ended: Thread, anchor_metadata: dict[str, Any] | None, anchor_tokens: int, *,
                           revision: int | None = None) -> Thread:
        """Save an ended thread's status and chronicle and fix its anchor's final form, atomically."""
        async with self._transaction() as db:
            cursor = await db.execute(
                "UPDATE threads SET status = ?, chronicle_summary = ?, completed_at = ? WHERE id = ?"
                " AND (? IS NULL OR revision = ?)",
                (ended.status, ended.chronicle_summary, ended.completed_at, ended.id, revision, revision),
            )
            if not cursor.rowcount:
                raise stale_summary(ended.id, revision)
            if anchor_metadata is not None and ended.anchor_seq is not None:
                await db.execute(
                    "UPDATE messages SET metadata = ?, token_count = ? WHERE seq = ?",
                    (json.dumps(anchor_metadata, ensure_ascii=False), anchor_tokens, ended.anchor_seq),
                )
                if ended.parent_thread_id is not None:  # the anchor is a message of the parent
                    await _revise(db, [ended.parent_thread_id])
        return await self.thread(ended.id)

    async def active_internal_threads(self, stale_before: float | None = None) -> list[Thread]:
        """Active non-root threads that are not a branch's session, whose process has not beaten since
        `stale_before` (when given): candidates for the start-up sweep."""
        rows = await self._rows(
            "SELECT t.* FROM threads t LEFT JOIN owners o ON o.owner = t.owner WHERE t.status = 'active'"
            " AND t.kind != 'root' AND t.discord_thread_id IS NULL AND t.branch_id IS NULL"
            " AND (? IS NULL OR o.heartbeat_at IS NULL OR o.heartbeat_at < ?) ORDER BY t.depth DESC, t.id DESC",
            (stale_before, stale_before),
        )
        return [row_to.thread(r) for r in rows]

    async def _set_window(self, thread_id: int, revision: int | None,
                          state: dict[str, int | float | str | None]) -> Thread:
        assignments = ", ".join(f"{k} = ?" for k in state)
        rows = await self._written(f"UPDATE threads SET {assignments} WHERE id = ? AND (? IS NULL OR revision = ?)"
                                   " RETURNING *", (*state.values(), thread_id, revision, revision))
        if not rows:
            raise stale_summary(thread_id, revision)
        return row_to.thread(rows[0])

    # messages

    async def _append(self, thread_id: int, new: NewMessage, counting: tuple[Thread, Triggers] | None,
                      noted: Noted | None) -> tuple[Message, bool, float | None]:
        tokens = count_tokens(new.content)
        now = self.clock()
        inserted = (thread_id, new.role, new.author_id, new.author_name, new.content,
                    json.dumps(new.metadata, ensure_ascii=False), tokens, new.external_id, now)
        counted = None if counting is None else {
            "id": counting[0].id, "persona": counting[0].persona, "guild": counting[0].guild_id,
            "channel": counting[0].channel_id, "dthread": counting[0].discord_thread_id, "now": now,
            "threshold": counting[1].threshold, "idle": counting[1].idle_seconds}

        def store(conn: sqlite3.Connection) -> tuple[sqlite3.Row | None, float | None]:
            if noted is not None:
                revision, state = noted
                conn.execute(f"UPDATE threads SET {', '.join(f'{k} = ?' for k in state)} WHERE id = ? AND revision = ?",
                             (*state.values(), thread_id, revision))
            row = next(iter(conn.execute(_INSERT_MESSAGE, inserted).fetchall()), None)
            if row is None or counted is None:
                return row, None
            return row, conn.execute(_NOTE_MESSAGE, counted).fetchall()[0][0]

        row, due = await self._atomic(store)  # the stored row comes back without a re-read
        if row is None:  # a known external id: the message stored before; else its author opted out
            row = await self._row("SELECT * FROM messages WHERE external_id = ?", (new.external_id,)) \
                if new.external_id is not None else None
            if row is None:
                raise OptedOut(new.author_id)
            return row_to.message(row), False, None
        self._stored(new.content)
        if counting is not None:
            self.saw_conversation(thread_id)  # its memory row may be new: recall's visibility looks again
        return row_to.message(row), True, due

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
        async with self._transaction() as db:
            await db.executemany(
                "INSERT INTO messages (seq, thread_id, role, author_id, author_name, content, metadata, token_count,"
                " external_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows,
            )
            await _index_imported(db, seqs or [])
            if seqs:  # below the newest, maybe: a window already read may miss them
                await _revise(db, [thread_id])
        self._pending = []
        return len(rows)

    async def index_messages(self) -> int:
        """Index for recall the messages stored before this call, in one batch; how many there were.

        One batch at a time: a caller that waited for one may find its messages indexed (in a burst every reply's
        recall finds the same backlog, and each sending a batch of its own put hundreds of writes in the queue).
        """
        asked = self._changes
        async with self._indexing:
            if self._pending == [] or self._covered >= asked:
                return 0
            return await self._index_batch()

    async def _index_batch(self) -> int:
        before, covered = self._pending, self._changes
        count = 0 if before is None else len(before)
        indexed = await self._atomic(_index_pending)
        self._covered = covered  # stored before the batch was sent: its statement saw them
        if before is not None and self._pending is before:
            del before[:count]  # texts stored meanwhile stay pending: this batch may not have reached them
        elif before is None and self._pending is None:
            self._pending = []
        return indexed

    async def tidy_index(self, pages: int = TIDY_PAGES) -> bool:
        """One bounded step of merging recall's index segments; True when it did work (more may remain).

        Each batch indexed is a new segment, and SQLite's own merging lags behind: left alone, a
        look-up opens two dozen segments where it could open three, and costs twice as much.
        """
        for table in _FTS_TABLES:  # the first with work left: a step is one short transaction
            async with self._transaction() as db:
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
        self._changes += 1
        if self._pending is not None:
            self._pending.append(text.lower())
            if len(self._pending) > PENDING_KEPT:
                self._pending = None

    def _unknown(self) -> None:
        """The texts waiting to be indexed are not known: the next search indexes first."""
        self._changes += 1
        self._pending = None

    async def edit_message(self, external_id: int, content: str) -> Message | None:
        async with self._transaction() as db:
            rows = await db.execute_fetchall(
                "UPDATE messages SET content = ?, token_count = ?, edited_at = ? WHERE external_id = ?"
                f" AND deleted_at IS NULL AND {remembered('messages.thread_id', 'messages.author_id')} RETURNING *",
                (content, count_tokens(content), self.clock(), external_id),
            )
            if rows:
                await _revise(db, [next(iter(rows))["thread_id"]])
        self._unknown()  # its text may be among those kept for counting: index before the next search
        return row_to.message(next(iter(rows))) if rows else None

    async def purge(self, *, author_id: int | None = None, thread_ids: list[int] | None = None,
                    external_id: int | None = None) -> dict[int, set[int]]:
        """Erase messages for good (an author's in these threads, or one message): text, name and index
        entry go; the row stays as a gap so sequence numbers are never reused. Returns thread -> seqs."""
        params: tuple[int, ...]
        if external_id is not None:
            where, params = "external_id = ?", (external_id,)
        elif author_id is not None and thread_ids:
            where = f"author_id = ? AND thread_id IN ({', '.join('?' * len(thread_ids))})"
            params = (author_id, *thread_ids)
        else:
            return {}
        async with self._transaction() as db:
            said = await db.execute_fetchall(
                f"SELECT content, created_at FROM messages WHERE {where} AND content != ''", params)
            rows: list[tuple[int, int]] = [(r[0], r[1]) for r in await db.execute_fetchall(
                "UPDATE messages SET content = '', author_name = NULL, author_id = NULL, metadata = '{}',"
                f" token_count = 0, deleted_at = COALESCE(deleted_at, ?) WHERE {where} AND content != ''"
                " RETURNING thread_id, seq",
                (self.clock(), *params),
            )]
            if rows:
                rows += await _erase_quotes(db, Erased.of(r[0] for r in said), min(s for _, s in rows),
                                            min(r[1] for r in said), self.clock())
                await _revise(db, sorted({t for t, _ in rows}))
                await db.execute(_WINDOWS_RESET, (json.dumps(sorted({t for t, _ in rows})),))
                await db.executemany("INSERT INTO erasures (seq, thread_id) VALUES (?, ?) ON CONFLICT DO NOTHING",
                                     [(seq, thread_id) for thread_id, seq in rows])
                for statement in FORGET_COUNTS:
                    await db.execute(statement)
        self.memory_changes += 1  # a pin that quoted it is gone
        self.branch_changes += 1  # and a branch's words
        self._unknown()  # an erased text must not even be counted: index before the next search
        return row_to.seqs_by_thread(rows)

    @asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        """One connection serves every statement already."""
        yield

    async def scrub(self) -> None:
        # secure_delete zeroes what rows leave behind; a full-text index keeps deleted terms in its segments until
        # they are merged, and the write-ahead log keeps every page as it was written until it is emptied.
        async with self._transaction() as db:
            for table in _FTS_TABLES:
                await db.execute(f"INSERT INTO {table} ({table}) VALUES ('optimize')")
        async with self._write_lock, self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)") as cur:
            row = await cur.fetchone()
        if row is None or row[0]:
            raise StoreError("the write-ahead log could not be emptied (another connection is reading); "
                             "erased words may remain in it until the next checkpoint")

    async def traces(self, text: str) -> list[str]:
        """Every place the database still holds a text (table.column, or an index): a forget-me audit."""
        found = []
        for table, column in (("messages", "content"), ("messages", "metadata"), ("memory_records", "content"),
                              ("threads", "chronicle_summary"), ("threads", "window_summary"),
                              ("threads", "window_bridge"),
                              *((table, column) for table, _, column, _, _ in QUOTING)):
            row = await self._row(f"SELECT COUNT(*) FROM {table} WHERE instr({column}, ?) > 0", (text,))
            if row is not None and row[0]:
                found.append(f"{table}.{column}")
        for table in _FTS_TABLES:
            row = await self._row(f"SELECT COUNT(*) FROM {table} WHERE {table} MATCH ?", (phrase(text),))
            if row is not None and row[0]:
                found.append(table)
        return found

    async def delete_records(self, ids: list[int]) -> None:
        """Remove memory versions for good (their text and index entries)."""
        if ids:
            async with self._transaction() as db:
                await db.execute(f"DELETE FROM memory_records WHERE id IN ({', '.join('?' * len(ids))})", ids)
            self.memory_changes += 1

    # branches (seed 001)

    # memory records

    async def add_record(self, persona: str, scope: str, scope_id: int, type_: str, content: str,
                         first_seq: int | None = None, last_seq: int | None = None,
                         metadata: dict[str, Any] | None = None, version: int | None = None,
                         hides: Sequence[int] = ()) -> MemoryRecord:
        async with self._transaction() as db:
            rows = await db.execute_fetchall(_ADD_RECORD, row_to.record_params(
                persona, scope, scope_id, type_, content, first_seq, last_seq, metadata, self.clock(), version))
            record = row_to.record(next(iter(rows)))
            if hides:
                await db.execute(
                    "UPDATE memory_records SET hidden_by = ? WHERE persona = ? AND scope = ? AND scope_id = ?"
                    f" AND type = ? AND version IN ({', '.join('?' * len(hides))})",
                    (record.version, persona, scope, scope_id, type_, *hides))
        if hides:
            self.memory_changes += 1
        return record

    # memory bookkeeping per conversation (seed 004): what is pending, when it is due, what is shared

    async def claim_due(self, now: float, owner: str, lease_seconds: float, limit: int,
                        thread_id: int | None = None) -> list[MemoryChannel]:
        """Take due conversations (or the one given, due or not) for `owner` until the lease runs out;
        those another worker holds are left to it. (One writer at a time: no row is taken twice.)"""
        async with self._transaction() as db:
            rows = await db.execute_fetchall(
                "UPDATE memory_channels SET lease_owner = :owner, lease_until = :until WHERE thread_id IN ("
                " SELECT thread_id FROM memory_channels WHERE (lease_until IS NULL OR lease_until < :now"
                " OR (:thread IS NOT NULL AND lease_owner = :owner))"
                " AND CASE WHEN :thread IS NULL THEN due_at IS NOT NULL AND paused = 0"
                " AND due_at <= :now ELSE thread_id = :thread END ORDER BY due_at IS NULL, due_at LIMIT :limit)"
                " RETURNING *",
                {"owner": owner, "until": now + lease_seconds, "now": now, "thread": thread_id, "limit": limit})
        return sorted((row_to.channel(r) for r in rows), key=lambda c: (c.due_at is None, c.due_at or 0.0))

    async def save_short_term(self, ch: MemoryChannel, content: str, first_seq: int, last_seq: int, counted: int,
                              now: float, triggers: Triggers, metadata: dict[str, Any], *, live: int,
                              revision: int | None = None) -> MemoryRecord:
        """The new short-term version and the bookkeeping that it was written, in one transaction.

        A channel's versions follow the one numbering rule; a Discord thread's single record is
        overwritten in place.
        """
        scope, scope_id = ch.scope
        params = row_to.record_params(ch.persona, scope, scope_id, "short_term", content, first_seq, last_seq, metadata,
                                now, None)
        async with self._transaction() as db:
            # Write transactions run one at a time: a purge committed before this one is counted, a later one
            # finds this version to rewrite.
            (now_live, now_revision), = await db.execute_fetchall(
                f"SELECT ({LIVE_IN_RANGE}), (SELECT revision FROM threads WHERE id = ?)",
                (ch.thread_id, first_seq - 1, last_seq, ch.thread_id))
            if now_live < live or (revision is not None and now_revision != revision):
                raise StaleUpdate(f"messages of thread {ch.thread_id} changed while its memory was written")
            fenced = await db.execute(
                "UPDATE memory_channels SET covered_seq = ?, pending_count = MAX(0, pending_count - ?), failures = 0,"
                " long_term_pending = ? WHERE thread_id = ? AND covered_seq IS ?",
                (last_seq, counted, int(scope == "channel"), ch.thread_id, ch.covered_seq),
            )
            if fenced.rowcount != 1:
                raise StaleUpdate(f"thread {ch.thread_id}'s memory moved on while this update ran")
            if scope == "thread":
                rows = await db.execute_fetchall(
                    "INSERT INTO memory_records (persona, scope, scope_id, type, version, content, first_seq,"
                    " last_seq, metadata, created_at) VALUES (:persona, :scope, :scope_id, :type, 1, :content,"
                    " :first_seq, :last_seq, :metadata, :now) ON CONFLICT (persona, scope, scope_id, type, version)"
                    " DO UPDATE SET content = excluded.content, first_seq = excluded.first_seq,"
                    " last_seq = excluded.last_seq, metadata = excluded.metadata, created_at = excluded.created_at"
                    " RETURNING *", params)
            else:
                rows = await db.execute_fetchall(_ADD_RECORD, params)
            await _recompute_due(db, ch.thread_id, now, triggers)
        return row_to.record(next(iter(rows)))

    async def save_long_term(self, ch: MemoryChannel, content: str, first_seq: int | None, last_seq: int | None,
                             metadata: dict[str, Any], now: float, triggers: Triggers) -> MemoryRecord:
        """The merged long-term version and the bookkeeping that it was written, in one transaction; only
        while the merge is still pending (another worker may have written it)."""
        scope, scope_id = ch.scope
        async with self._transaction() as db:
            fenced = await db.execute("UPDATE memory_channels SET long_term_pending = 0, failures = 0"
                                      " WHERE thread_id = ? AND long_term_pending != 0", (ch.thread_id,))
            if fenced.rowcount != 1:
                raise StaleUpdate(f"thread {ch.thread_id}'s long-term memory was merged by another worker")
            rows = await db.execute_fetchall(_ADD_RECORD, row_to.record_params(
                ch.persona, scope, scope_id, "long_term", content, first_seq, last_seq, metadata, now, None))
            await _recompute_due(db, ch.thread_id, now, triggers)
        return row_to.record(next(iter(rows)))

    async def long_term_saved(self, thread_id: int, now: float, triggers: Triggers) -> None:
        """The long-term update after a version is done; the conversation is due again only if messages wait."""
        async with self._transaction() as db:
            await db.execute("UPDATE memory_channels SET long_term_pending = 0, failures = 0 WHERE thread_id = ?",
                             (thread_id,))
            await _recompute_due(db, thread_id, now, triggers)

    async def nothing_new(self, thread_id: int, now: float, triggers: Triggers) -> None:
        """A due conversation with no new message (all deleted, say): clear it so no identical version is written."""
        async with self._transaction() as db:
            await db.execute("UPDATE memory_channels SET pending_count = 0, failures = 0 WHERE thread_id = ?",
                             (thread_id,))
            await _recompute_due(db, thread_id, now, triggers)

    async def memory_failed(self, thread_id: int, now: float, base_delay: float) -> float:
        """Record a failed update and push the deadline back exponentially; returns the delay."""
        async with self._transaction() as db:
            rows = await db.execute_fetchall(
                "UPDATE memory_channels SET failures = failures + 1 WHERE thread_id = ? RETURNING failures",
                (thread_id,))
            failures = int(next(iter(rows))[0]) if rows else 1
            delay = backoff(base_delay, failures)
            await db.execute("UPDATE memory_channels SET due_at = ? WHERE thread_id = ?", (now + delay, thread_id))
        return delay

    # playbook runs (issue: playbooks): what /playbooks runs shows

    # tasks (seed 001)

    # the autonomous pulse's decision log

    async def messages_since(self, persona: str, scope_keys: tuple[str, ...], since: float,
                             limit: int) -> list[Message]:
        marks = ", ".join("?" * len(scope_keys))
        rows = await self._rows(
            "SELECT * FROM (SELECT m.* FROM messages m JOIN threads t ON t.id = m.thread_id"
            f" WHERE t.persona = ? AND t.scope_key IN ({marks})"
            " AND m.created_at > ? AND m.deleted_at IS NULL AND m.role IN ('user', 'assistant')"
            f" AND {_NOT_PLACEHOLDER} ORDER BY m.seq DESC LIMIT ?) ORDER BY seq",
            (persona, *scope_keys, since, limit))
        return [row_to.message(r) for r in rows]

    # claims: work one worker does at a time, held for a lease (another backend takes row locks)

    async def clear_claims(self) -> int:
        """Drop every claim (at a start that holds the database alone: their holders are gone); how many."""
        async with self._transaction() as db:
            cur = await db.execute("DELETE FROM claims")
            leases = await db.execute("UPDATE memory_channels SET lease_owner = NULL, lease_until = NULL"
                                      " WHERE lease_owner IS NOT NULL")
            return cur.rowcount + leases.rowcount

    # recall: full-text look-ups, always filtered to what one conversation may see

    async def match_counts(self, terms: list[str], cap: int) -> tuple[int, dict[str, int]]:
        """About how many messages exist (the newest sequence), and how many indexed messages each term
        matches, counting no further than `cap`; one round trip."""
        counts = "".join(", (SELECT COUNT(*) FROM (SELECT 1 FROM messages_fts WHERE messages_fts MATCH ? LIMIT ?))"
                         for _ in terms)
        params = [p for term in terms for p in (phrase(term), cap)]
        row = await self._row(f"SELECT (SELECT COALESCE(MAX(seq), 0) FROM messages){counts}", tuple(params))
        assert row is not None  # a SELECT of scalars returns one row
        return int(row[0]), dict(zip(terms, (int(n) for n in row[1:]), strict=True))

    async def saved_counts(self, words: list[int]) -> dict[int, tuple[int, int]]:
        rows = await self._rows("SELECT word, matches, archive FROM recall_counts"
                                " WHERE word IN (SELECT value FROM json_each(?))", (json.dumps(words),))
        return {int(r[0]): (int(r[1]), int(r[2])) for r in rows}

    async def save_counts(self, counts: list[tuple[int, int, int]], stale_below: int = 0) -> int:
        if not counts:
            return 0
        async with self._transaction() as db:
            before = db.total_changes
            await db.executemany(_SAVE_COUNT, counts)
            saved = db.total_changes - before
            await db.execute("DELETE FROM recall_counts WHERE archive < ?", (stale_below,))
            return saved

    async def scan_messages(self, needle: str, persona: str, scope_keys: tuple[str, ...], window: int,
                            limit: int) -> list[MessageMatch]:
        """Messages containing a text too short for trigrams, among the newest `window` only."""
        rows = await self._rows(
            _MATCHED_MESSAGES +
            " WHERE m.seq > (SELECT COALESCE(MAX(seq), 0) FROM messages) - ? AND instr(lower(m.content), ?) > 0"
            f" AND {_seen_by(scope_keys)} ORDER BY m.seq DESC LIMIT ?",
            (window, needle, persona, *scope_keys, limit),
        )
        return [MessageMatch(*row) for row in rows]

    async def replies_to(self, seqs: list[int], persona: str, scope_keys: tuple[str, ...]) -> dict[int, MessageMatch]:
        if not seqs:
            return {}
        rows = await self._rows(
            f"SELECT p.seq, {_MATCH_COLUMNS} FROM messages p JOIN messages m ON m.seq = ({_NEXT_REPLY})"
            f" JOIN threads t ON t.id = m.thread_id WHERE p.seq IN ({', '.join('?' * len(seqs))})"
            f" AND {_seen_by(scope_keys)}", (*seqs, persona, *scope_keys))
        return {int(row[0]): MessageMatch(*row[1:]) for row in rows}

    async def recall_matches(self, terms: list[str], message_terms: list[str], persona: str,
                             scope_keys: tuple[str, ...], scopes: tuple[tuple[str, int], ...], limit: int,
                             note_limit: int, days: Sequence[tuple[float, float]] = (), day_limit: int = 0,
                             whole_from: tuple[int, int] | None = None) -> Recalled:
        queries = [_recall_messages(message_terms, persona, scope_keys, limit) if message_terms else None,
                   _recall_notes(terms, persona, scope_keys, scopes, note_limit) if terms else None,
                   *(_messages_between(persona, scope_keys, start, end, day_limit, whole_from) for start, end in days)]

        def all_of_them(conn: sqlite3.Connection) -> list[list[sqlite3.Row]]:  # one hop to the database's thread
            return [conn.execute(*query).fetchall() if query else [] for query in queries]

        found = await self._read(all_of_them)
        return Recalled([MessageMatch(*row) for row in found[0]], [NoteMatch(*row) for row in found[1]],
                        [[MessageMatch(*row) for row in rows] for rows in found[2:]])

    # copying a whole database

    async def load_rows(self, table: str, rows: list[dict[str, Any]]) -> int:
        if not rows:
            return 0
        copy_keys(table)
        columns = list(rows[0])
        async with self._transaction() as db:
            cur = await db.executemany(
                f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
                " ON CONFLICT DO NOTHING", [tuple(r[c] for c in columns) for r in rows])
            if table == "messages":
                await _index_imported(db, [r["seq"] for r in rows])
        return cur.rowcount

    # the primitives memory/sql's aggregates run on

    async def _read(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """A reply's read in the database's thread: in a hop of its own when nothing else is on its way, else in
        the next hop with the others asked meanwhile (READS_TOGETHER at most)."""
        return await self._reads.add(_Read(work))  # type: ignore[no-any-return]

    async def _read_alone(self, item: _Read) -> Any:
        return await _in_thread(self._db, item.work)

    async def _read_together(self, items: list[_Read]) -> None:
        answer_each([item.answer for item in items],
                    await _in_thread(self._db, each_read, [item.work for item in items]))

    async def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        return list(await self._db.execute_fetchall(sql, tuple(params)))  # one hop to the database thread

    async def _written(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        return await self._atomic(lambda conn: conn.execute(sql, tuple(params)).fetchall())

    async def _changed(self, sql: str, params: Sequence[Any] = ()) -> int:
        return await self._atomic(lambda conn: conn.execute(sql, tuple(params)).rowcount)


def _refused(exc: sqlite3.OperationalError) -> StoreError:
    return StoreError(f"the database refused a write ({exc}); nothing of it was saved")


def _whole(conn: sqlite3.Connection, work: Callable[[sqlite3.Connection], T]) -> T:
    """`work` in a transaction of its own, in the database's thread: committed, or rolled back if anything fails."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = work(conn)
        conn.execute("COMMIT")
    except BaseException:
        _roll_back(conn)
        raise
    return result


def _opening(conn: sqlite3.Connection, thread_id: int, after_seq: int | None, limit: int, versions: int
             ) -> tuple[sqlite3.Row | None, list[sqlite3.Row], tuple[Versions, ...], list[sqlite3.Row]]:
    """Store.opening's reads in one hop to the database's thread: the thread, its page, its own memory's places and
    their records."""
    row = conn.execute(f"SELECT {NEWEST_RECORD}, * FROM threads WHERE id = ?", (thread_id,)).fetchone()
    if row is None:
        return None, [], (), []
    after = after_seq if after_seq is not None else window_after(row["window_start_seq"])
    page = conn.execute(PAGE.format(order="DESC"), (thread_id, after, SEQ_MAX, limit)).fetchall() if limit else []
    if not versions:
        return row, page, (), []
    thread = row_to.thread(row, leave_out=("newest_record",))
    asked = own_memory(thread, thread, versions)
    return row, page, asked, conn.execute(*newest_records_sql(thread.persona, asked)).fetchall()


def _roll_back(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        conn.execute("ROLLBACK")


@dataclass
class _Read:
    """A read waiting for its hop to the database's thread, and its caller's answer."""

    work: Callable[[sqlite3.Connection], Any]
    answer: asyncio.Future[Any] = field(default_factory=answer_future)


async def _in_thread(db: aiosqlite.Connection, work: Callable[..., T], *args: Any) -> T:
    """Run plain sqlite3 work in the connection's own thread, in one hop: aiosqlite's way of running each of its
    calls (its `_execute`), with several statements in one call."""
    result: T = await db._execute(work, db._conn, *args)  # type: ignore[no-untyped-call]
    return result


async def _recompute_due(db: aiosqlite.Connection, thread_id: int, now: float, triggers: Triggers) -> None:
    await db.execute(_RECOMPUTE_DUE, {"now": now, "threshold": triggers.threshold, "idle": triggers.idle_seconds,
                                      "id": thread_id})


# A count newer than the one kept replaces it; one taken before the last purge could hold an erased word's.
_SAVE_COUNT = ("INSERT INTO recall_counts (word, matches, archive) SELECT ?1, ?2, ?3"
               " WHERE ?3 > (SELECT archive FROM recall_counts_erased) ON CONFLICT (word) DO UPDATE"
               " SET matches = excluded.matches, archive = excluded.archive WHERE excluded.archive >= archive")


def _recall_messages(terms: list[str], persona: str, scope_keys: tuple[str, ...],
                     limit: int) -> tuple[str, tuple[Any, ...]]:
    """The messages matching any of the terms in these conversations, best first (FTS5's rank)."""
    return ("SELECT " + _MATCH_COLUMNS +
            " FROM messages_fts JOIN messages m ON m.seq = messages_fts.rowid JOIN threads t ON t.id = m.thread_id"
            f" WHERE messages_fts MATCH ? AND {_seen_by(scope_keys)}"
            " ORDER BY messages_fts.rank LIMIT ?", (_any_of(terms), persona, *scope_keys, limit))


def _messages_between(persona: str, scope_keys: tuple[str, ...], start: float, end: float, limit: int,
                      whole_from: tuple[int, int] | None = None) -> tuple[str, tuple[Any, ...]]:
    """What people and the persona said in these conversations in [start, end), the newest `limit`, but for the
    messages `whole_from` (thread, seq) says the request shows."""
    # CROSS JOIN keeps the conversations outside: a day's range of each one's messages (an index), never the
    # whole day of every conversation filtered down to these
    return (f"SELECT {_MATCH_COLUMNS} FROM threads t CROSS JOIN messages m ON m.thread_id = t.id"
            " WHERE m.created_at >= ? AND m.created_at < ? AND m.role IN ('user', 'assistant')"
            " AND NOT (m.thread_id = ? AND m.seq >= ?)"
            f" AND {_seen_by(scope_keys)} ORDER BY m.created_at DESC LIMIT ?",
            (start, end, *(whole_from or (0, 0)), persona, *scope_keys, limit))


def _recall_notes(terms: list[str], persona: str, scope_keys: tuple[str, ...], scopes: tuple[tuple[str, int], ...],
                  limit: int) -> tuple[str, tuple[Any, ...]]:
    """Chronicles and short-term versions matching any of the terms, best first within each; long-term versions
    repeat the short-term ones they merged, so those are left out."""
    marks = ", ".join("?" * len(scope_keys))
    pairs = ", ".join("(?, ?)" for _ in scopes) or "(NULL, NULL)"
    query = _any_of(terms)
    return ("SELECT * FROM (SELECT 'chronicle' AS source, t.id, t.chronicle_summary AS text,"
            " COALESCE(t.completed_at, t.created_at) AS at, t.label, t.scope_key, NULL AS type, NULL AS scope,"
            " NULL AS version FROM chronicles_fts JOIN threads t ON t.id = chronicles_fts.rowid"
            f" WHERE chronicles_fts MATCH ? AND t.persona = ? AND t.scope_key IN ({marks})"
            " ORDER BY chronicles_fts.rank LIMIT ?)"
            " UNION ALL SELECT * FROM (SELECT 'record', r.id, r.content, r.created_at, NULL, NULL, r.type, r.scope,"
            " r.version FROM records_fts JOIN memory_records r ON r.id = records_fts.rowid"
            " WHERE records_fts MATCH ? AND r.persona = ? AND r.type = 'short_term' AND r.hidden_by IS NULL"
            f" AND (r.scope, r.scope_id) IN (VALUES {pairs}) ORDER BY records_fts.rank LIMIT ?)",
            (query, persona, *scope_keys, limit, query, persona, *(x for pair in scopes for x in pair), limit))


def _not_placeholder(alias: str) -> str:
    """A stand-in's words (the offline model's reply) are not the persona's: recall never brings them back."""
    return f"json_extract({alias}.metadata, '$.placeholder') IS NULL"


_NOT_PLACEHOLDER = _not_placeholder("m")


def _seen_by(scope_keys: tuple[str, ...]) -> str:
    """A live message (not a placeholder) of the persona's conversations among `scope_keys`: the rule every recall
    look-up applies; its parameters are the persona, then the keys."""
    return (f"t.persona = ? AND t.scope_key IN ({', '.join('?' * len(scope_keys))}) AND m.deleted_at IS NULL"
            f" AND {_NOT_PLACEHOLDER}")
# What recall is given of a message it found, and where it was said (MessageMatch's fields, in order).
_MATCH_COLUMNS = "m.seq, m.role, m.author_name, m.content, m.created_at, t.scope_key, t.kind, t.label"
_MATCHED_MESSAGES = f"SELECT {_MATCH_COLUMNS} FROM messages m JOIN threads t ON t.id = m.thread_id"
_NEXT_REPLY = next_reply("!=", _not_placeholder("c"))


async def _revise(db: aiosqlite.Connection, thread_ids: list[int]) -> None:
    """A message stored in these threads changed: their revision moves, in the transaction that changed it."""
    await db.execute(f"UPDATE threads SET revision = revision + 1 WHERE id IN ({', '.join('?' * len(thread_ids))})",
                     thread_ids)


async def _erase_quotes(db: aiosqlite.Connection, erased: Erased, after_seq: int, after: float,
                        now: float) -> list[tuple[int, int]]:
    """Erase what quoted the erased texts: tool results (as a gap-free notice, so each call keeps its
    result) and the free texts of QUOTING. (thread, seq) of the tool results changed."""
    if not erased:
        return []
    tools = await db.execute_fetchall(
        "SELECT seq, thread_id, content FROM messages WHERE role = 'tool' AND seq > ? AND deleted_at IS NULL",
        (after_seq,))
    quoting = [(r[1], r[0]) for r in tools if erased.quoted_in(r[2])]
    await db.executemany("UPDATE messages SET content = ?, token_count = ?, edited_at = ? WHERE seq = ?",
                         [(ERASED, count_tokens(ERASED), now, seq) for _, seq in quoting])
    for table, key, column, kind, written in QUOTING:
        since = f"{written} >= ?" if written else "? IS NOT NULL"  # no time of its own: every row
        found = await db.execute_fetchall(f"SELECT {key}, {column} FROM {table} WHERE {since}", (after,))
        keys = [(r[0],) for r in found if erased.quoted_in(r[1])]
        if kind == "row":
            await db.executemany(f"DELETE FROM {table} WHERE {key} = ?", keys)
        else:
            await db.executemany(f"UPDATE {table} SET {column} = ? WHERE {key} = ?",
                                 [(erased_value(kind), k) for (k,) in keys])
    return quoting


async def _index_imported(db: aiosqlite.Connection, seqs: list[int]) -> None:
    """Index messages that came with their own seqs, in the caller's transaction: those below what the index
    reached now (an import may fill in gaps), the rest as a batch; no first search pays for a bulk load."""
    await db.executemany(
        "INSERT INTO messages_fts (rowid, content) SELECT seq, content FROM messages WHERE seq = ?"
        " AND deleted_at IS NULL AND content != '' AND seq <= (SELECT upto FROM fts_progress WHERE name = 'messages')",
        [(s,) for s in seqs])
    await _in_thread(db, _index_pending)


def _index_pending(conn: sqlite3.Connection) -> int:
    """Index the messages stored above the index's mark, in the caller's transaction (in the database's thread);
    how many seqs that spans."""
    upto, newest = conn.execute(
        "SELECT upto, (SELECT COALESCE(MAX(seq), 0) FROM messages) FROM fts_progress WHERE name = 'messages'"
    ).fetchone()
    if newest <= upto:
        return 0
    conn.execute("INSERT INTO messages_fts (rowid, content) SELECT seq, content FROM messages"
                 " WHERE seq > ? AND seq <= ? AND deleted_at IS NULL AND content != ''", (upto, newest))
    conn.execute("UPDATE fts_progress SET upto = ? WHERE name = 'messages'", (newest,))
    return int(newest - upto)

def migration_files() -> list[Path]:
    return numbered_migrations(MIGRATIONS_DIR)


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


def _any_of(terms: list[str]) -> str:
    """An FTS5 query matching any of the terms, each as a phrase."""
    return " OR ".join(phrase(t) for t in terms)


def phrase(term: str) -> str:
    """One FTS5 phrase: quoted, inner quotes doubled."""
    return '"' + term.replace('"', '""') + '"'
