import asyncio
import dataclasses
import sqlite3

import pytest

import memory.sqlite.store as store_module
from memory.backends import open_store
from memory.records import NewMessage, Scope
from memory.settings import Triggers
from memory.store import Store, StoreError
from tests.recall_helpers import said_between

TABLES = {"threads", "messages", "memory_records", "branches", "settings"}

MIGRATIONS = store_module.migration_files()
LATEST_VERSION = len(MIGRATIONS)


@pytest.fixture
def store(sqlite_store: Store) -> Store:
    """This module tests what is SQLite's own (pragmas, FTS5, query plans); the shared contract is
    tests/test_store_contract.py."""
    return sqlite_store


def table_names(path) -> set[str]:
    with sqlite3.connect(path) as db:
        return {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


async def test_migrations_on_an_empty_file(tmp_path):
    path = tmp_path / "fresh.sqlite3"
    s = await open_store(path)
    assert await s.schema_version() == LATEST_VERSION
    async with s._db.execute("PRAGMA journal_mode") as cur:
        assert (await cur.fetchone())[0] == "wal"
    async with s._db.execute("PRAGMA foreign_keys") as cur:
        assert (await cur.fetchone())[0] == 1
    await s.close()
    assert table_names(path) >= TABLES


async def test_migrations_on_an_already_migrated_file_keep_the_data(tmp_path):
    path = tmp_path / "db.sqlite3"
    s = await open_store(path)
    root = await s.root_thread("P", Scope.console(), 0.8)
    await s.append(root.id, NewMessage("user", "keep me"))
    await s.close()
    s = await open_store(path)
    assert await s.migrate() == 0
    assert [m.content for m in await s.tail(root.id, 10)] == ["keep me"]
    await s.close()


async def test_a_failing_migration_leaves_nothing_half_done(tmp_path, monkeypatch):
    path = tmp_path / "db.sqlite3"
    await (await open_store(path)).close()
    broken = tmp_path / f"{LATEST_VERSION + 1:04d}_broken.sql"
    broken.write_text("CREATE TABLE extra (x INTEGER); CREATE TABLE extra (x INTEGER)")
    monkeypatch.setattr(store_module, "migration_files", lambda: [*MIGRATIONS, broken])
    with pytest.raises(StoreError, match="already exists"):
        await open_store(path)
    assert "extra" not in table_names(path)
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == LATEST_VERSION


@pytest.mark.parametrize("damage", ["garbage", "truncated", "directory_is_a_file"])
async def test_an_unusable_database_is_a_clear_error_not_a_hang(tmp_path, damage):
    path = tmp_path / "db.sqlite3"
    if damage == "garbage":
        path.write_bytes(b"this is not a database at all" * 200)
    elif damage == "truncated":
        store = await open_store(path)
        await store.close()
        path.write_bytes(path.read_bytes()[:100])
    else:
        (tmp_path / "data").write_text("a file where the data directory should be")
        path = tmp_path / "data" / "db.sqlite3"
    with pytest.raises(StoreError, match="database"):
        await asyncio.wait_for(open_store(path), 10)


async def test_a_database_from_a_newer_stelis_is_refused(tmp_path):
    path = tmp_path / "future.sqlite3"
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version = {LATEST_VERSION + 5}")
    with pytest.raises(StoreError, match="newer than this Stelis understands"):
        await open_store(path)


async def test_sequences_are_monotonic_and_never_reused(store):
    root = await store.root_thread("P", Scope.console(), 0.8)
    seqs = [(await store.append(root.id, NewMessage("user", f"m{i}", external_id=i)))[0].seq for i in range(5)]
    assert seqs == sorted(seqs) and len(set(seqs)) == 5
    await store._db.execute("DELETE FROM messages WHERE seq = ?", (seqs[-1],))
    newer, _ = await store.append(root.id, NewMessage("user", "after delete"))
    assert newer.seq > seqs[-1]


async def test_tail_returns_the_newest_oldest_first_through_the_index(store):
    root = await store.root_thread("P", Scope.console(), 0.8)
    other = await store.root_thread("P", Scope.console("other"), 0.8)
    for i in range(10):
        await store.append(root.id, NewMessage("user", f"m{i}"))
        await store.append(other.id, NewMessage("user", f"x{i}"))
    assert [m.content for m in await store.tail(root.id, 3)] == ["m7", "m8", "m9"]
    async with store._db.execute(
        "EXPLAIN QUERY PLAN SELECT * FROM messages WHERE thread_id = ? AND deleted_at IS NULL"
        " ORDER BY seq DESC LIMIT ?", (root.id, 3)
    ) as cur:
        plan = " ".join(r[3] for r in await cur.fetchall())
    assert "idx_messages_thread_seq" in plan and "TEMP B-TREE" not in plan


async def test_schema_rejects_invalid_rows(store):
    root = await store.root_thread("P", Scope.console(), 0.8)
    with pytest.raises(sqlite3.IntegrityError):
        await store.append(root.id, NewMessage("narrator", "x"))  # type: ignore[arg-type]
    with pytest.raises(sqlite3.IntegrityError):
        await store.append(999_999, NewMessage("user", "orphan"))  # foreign keys are on
    assert await store.count_messages(root.id) == 0


async def test_a_refused_write_is_a_store_error_and_leaves_the_connection_usable(store):
    await store._db.execute("PRAGMA query_only = ON")  # as a read-only file or a full disk would refuse
    with pytest.raises(StoreError, match="refused a write"):
        await store.root_thread("P", Scope.channel(1, 2), 0.8)
    await store._db.execute("PRAGMA query_only = OFF")
    assert (await store.root_thread("P", Scope.channel(1, 2), 0.8)).kind == "root"


async def test_a_write_run_whole_in_the_database_thread_is_kept_whole_or_not_at_all(store):
    """Issue 32: a message and its count are written in one hop; the count failing leaves no message, and a refused
    write is a StoreError with the connection still usable."""
    from memory.settings import ShortTermSettings

    root = await store.root_thread("P", Scope.channel(1, 2), 0.8)
    await store._db.execute("CREATE TEMP TRIGGER no_count BEFORE INSERT ON memory_channels"
                            " BEGIN SELECT RAISE(ABORT, 'counting refused'); END")
    with pytest.raises(sqlite3.IntegrityError, match="counting refused"):
        await store.append_counted(root, NewMessage("user", "half a write"), ShortTermSettings().triggers)
    assert await store.count_messages(root.id) == 0 and not store._db.in_transaction
    await store._db.execute("DROP TRIGGER no_count")
    message, created, due = await store.append_counted(root, NewMessage("user", "whole"), ShortTermSettings().triggers)
    assert created and due is not None and await store.count_messages(root.id) == 1
    await store._db.execute("PRAGMA query_only = ON")
    with pytest.raises(StoreError, match="refused a write"):
        await store.append(root.id, NewMessage("user", "on a full disk"))
    with pytest.raises(StoreError, match="refused a write"):
        await store.set_window(root.id, window_start_seq=message.seq)
    await store._db.execute("PRAGMA query_only = OFF")
    assert (await store.set_window(root.id, window_start_seq=message.seq)).window_start_seq == message.seq


async def test_writes_at_once_share_a_commit_and_wait_for_a_transaction_of_several_hops(store):
    """Issue 32: writes arriving while one waits for the database's thread join its transaction (group commit):
    twenty messages stored at once take a hop or two, not twenty, and none waits on the lock; while a transaction
    of several hops is open a write waits, so it never lands inside that one."""
    from memory.settings import ShortTermSettings

    root = await store.root_thread("P", Scope.channel(1, 2), 0.8)
    locked: list[bool] = []  # whether each hop held the lock
    real = store_module._in_thread

    async def counted(*args):
        locked.append(store._write_lock.locked())
        return await real(*args)

    store_module._in_thread = counted
    try:
        stored = await asyncio.gather(*(store.append(root.id, NewMessage("user", f"at once {n}")) for n in range(20)))
        assert 1 <= len(locked) <= 2 and not any(locked)
        assert sorted(m.content for m, _ in stored) == sorted(f"at once {n}" for n in range(20))
        assert len({m.seq for m, _ in stored}) == 20
        async with store._transaction() as db:  # several hops: a one-hop write must not run between them
            await db.execute("INSERT INTO settings (scope, scope_id, key, value, updated_at)"
                             " VALUES ('guild', 1, 'k', '1', 0)")
            waiting = asyncio.create_task(store.append_counted(root, NewMessage("user", "after it"),
                                                               ShortTermSettings().triggers))
            await asyncio.sleep(0.05)
            assert not waiting.done()  # held back until the open transaction commits
            await db.execute("UPDATE settings SET value = '2' WHERE key = 'k'")
        await waiting
    finally:
        store_module._in_thread = real
    assert await store.count_messages(root.id) == 21


def _setting(key: str, fail: bool = False):
    """A one-hop write of a guild setting that returns its key, or fails halfway (after its insert)."""
    def work(conn):
        conn.execute("INSERT INTO settings (scope, scope_id, key, value, updated_at) VALUES ('guild', 1, ?, '1', 0)",
                     (key,))
        if fail:
            raise ValueError("halfway")
        return key
    return work


async def _guild_keys(store) -> list[str]:
    return [r[0] for r in await store._rows("SELECT key FROM settings WHERE scope = 'guild' ORDER BY key")]


async def test_writes_waiting_for_a_commit_that_is_cancelled_before_its_turn_hear_of_it_and_the_next_goes_on(store):
    """A shared commit cancelled before it began (the loop closing): its writes are told at once rather than waiting
    forever, and a later write does not join it."""
    first = asyncio.create_task(store._atomic(_setting("first")))
    await asyncio.sleep(0)  # on its way alone
    waiting = asyncio.create_task(store._atomic(_setting("waiting")))
    await asyncio.sleep(0)  # in the next batch, whose commit has not begun
    (flush,) = store._flushes
    flush.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(waiting, 1)
    assert await first == "first"
    assert await asyncio.wait_for(store._atomic(_setting("later")), 1) == "later"
    assert await _guild_keys(store) == ["first", "later"]


async def test_a_write_that_fails_in_a_shared_commit_is_undone_alone(store, tmp_path):
    """Issue 32: in a group commit each write runs in a savepoint of its own: one that fails halfway leaves nothing
    behind and only its caller hears of it; the others are committed."""
    batches = 0
    real = store_module.run_batch

    def counted(conn, batch):
        nonlocal batches
        batches += 1
        return real(conn, batch)

    store_module.run_batch = counted
    try:  # the first goes alone; the three arriving while it is out share a commit
        done = await asyncio.gather(store._atomic(_setting("lone")), store._atomic(_setting("a")),
                                    store._atomic(_setting("half", fail=True)), store._atomic(_setting("b")),
                                    return_exceptions=True)
    finally:
        store_module.run_batch = real
    assert batches == 1
    assert done[:2] == ["lone", "a"] and done[3] == "b"
    assert isinstance(done[2], ValueError)
    assert await _guild_keys(store) == ["a", "b", "lone"]
    await store.close()
    reopened = await open_store(tmp_path / "test.sqlite3")  # committed: on disk, not only in this connection
    try:
        assert await _guild_keys(reopened) == ["a", "b", "lone"]
    finally:
        await reopened.close()


async def test_a_days_messages_are_read_conversation_by_conversation_not_the_whole_day(store):
    """Issue 32: "what is on today?" in one of 500 busy channels read that day's messages of all 500 (2.4 ms)."""
    import time as _time

    roots = [await store.root_thread("P", Scope.channel(1, 100 + i), 0.8) for i in range(3)]
    for root in roots:
        await store.append_many(root.id, [NewMessage("user", f"note {i}") for i in range(5)])
    now, keys = _time.time(), (roots[1].scope_key,)
    found = await said_between(store, "P", keys, now - 3600, now + 60, 20)
    sql, params = store_module._messages_between("P", keys, now - 3600, now + 60, 20)  # what recall_matches sends
    plan = " ".join(str(tuple(r)) for r in await store._rows(f"EXPLAIN QUERY PLAN {sql}", params))
    assert len(found) == 5 and {m.content for m in found} == {f"note {i}" for i in range(5)}
    assert "idx_threads_scope" in plan and "idx_messages_thread_created" in plan, plan  # never the whole day


async def test_a_servers_shared_channels_are_read_from_an_index_of_the_shared_ones(store, monkeypatch):
    """Issue 32: among 500 private channels, the look-up for the shared ones walked every one of them."""
    from memory.settings import ShortTermSettings

    roots = [await store.root_thread("P", Scope.channel(1, 100 + i), 0.8) for i in range(4)]
    for root in roots:
        await store.append_counted(root, NewMessage("user", "hi"), ShortTermSettings().triggers)
    await store.set_channel_flags(roots[1].id, public=1, name="general")
    found, plan = await _planned(store, monkeypatch, store.shared_channels("P", 1, limit=3, besides=100))
    assert [c.channel_id for c in found] == [101]
    assert "idx_memory_channels_shared_activity" in plan, plan


async def _planned(store, monkeypatch, call):
    """What a store call returns, and SQLite's query plan for the last statement it read with."""
    asked = []
    read = store._rows

    async def capture(sql, params=()):
        asked.append((sql, params))
        return await read(sql, params)

    monkeypatch.setattr(store, "_rows", capture)
    result = await call
    sql, params = asked[-1]
    return result, " ".join(str(tuple(r)) for r in await read(f"EXPLAIN QUERY PLAN {sql}", params))


async def test_the_reconnect_look_up_reads_an_index_not_the_thread(store):
    root = await store.root_thread("P", Scope.channel(1, 2), 0.8)
    await store.append_many(root.id, [NewMessage("user", f"m{i}", external_id=1000 + i) for i in range(50)])
    assert await store.last_external_id(root.id) == 1049
    plan = " ".join(str(tuple(r)) for r in await store._rows(
        "EXPLAIN QUERY PLAN SELECT MAX(external_id) FROM messages WHERE thread_id = ? AND external_id IS NOT NULL",
        (root.id,)))
    assert "idx_messages_thread_external" in plan


async def _indexed(store: Store, text: str) -> set[int]:
    rows = await store._rows("SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?", (f'"{text}"',))
    return {r[0] for r in rows}


async def test_messages_are_indexed_for_recall_in_one_batch_and_edits_and_erasures_stay_in_step(store):
    root = await store.root_thread("Stelis", Scope.channel(1, 2), 0.8)
    first, _ = await store.append(root.id, NewMessage("user", "the kestrel nests on the tower", external_id=1))
    assert await _indexed(store, "kestrel") == set()  # storing writes no index entry...
    assert await store.index_messages() == 1  # ... the next search indexes everything new at once
    assert await store.index_messages() == 0 and await _indexed(store, "kestrel") == {first.seq}

    # an indexed message edited or erased; then ones edited or erased before they were indexed
    await store.edit_message(1, "the falcon nests on the tower")
    await store.append(root.id, NewMessage("user", "the heron fishes at dawn", external_id=2))
    await store.edit_message(2, "the egret fishes at dawn")
    await store.append(root.id, NewMessage("user", "the osprey dives", external_id=3))
    await store.delete_message(3)
    await store.append_many(root.id, [NewMessage("user", "an imported swift note")], seqs=[500])
    await store.index_messages()
    assert await _indexed(store, "kestrel") == set() and await _indexed(store, "falcon") == {first.seq}
    assert await _indexed(store, "heron") == set() and len(await _indexed(store, "egret")) == 1
    assert await _indexed(store, "osprey") == set() and await _indexed(store, "swift") == {500}
    await store.append_many(root.id, [NewMessage("user", "an imported swallow note")], seqs=[400])
    assert await _indexed(store, "swallow") == {400}  # below what the index reached: indexed as it lands
    await store._db.execute("INSERT INTO messages_fts (messages_fts) VALUES ('integrity-check')")  # raises if not


async def _segments(store: Store) -> int:
    return (await store._row("SELECT COUNT(DISTINCT segid) FROM messages_fts_idx", ()))[0]


async def test_tidying_merges_the_segments_each_batch_left_and_keeps_every_match(store):
    root = await store.root_thread("Stelis", Scope.channel(1, 2), 0.8)
    for i in range(40):  # as the bot indexes: a small batch a second after each message
        await store.append(root.id, NewMessage("user", f"batch {i} of the kestrel watch, token k{i:03d}x"))
        await store.index_messages()
    scattered = await _segments(store)
    assert scattered >= 6  # SQLite's own merging leaves segments behind
    assert await store.tidy_index(pages=2) is True  # a short step, its own transaction: more may remain
    while await store.tidy_index(pages=2):
        pass
    assert await _segments(store) <= 3 < scattered
    assert await store.tidy_index() is False  # nothing left to merge
    assert len(await _indexed(store, "kestrel")) == 40 and len(await _indexed(store, "k017x")) == 1
    await store._db.execute("INSERT INTO messages_fts (messages_fts) VALUES ('integrity-check')")


async def test_a_database_from_before_batched_indexing_keeps_its_index_in_step(tmp_path, monkeypatch):
    path = tmp_path / "db.sqlite3"
    monkeypatch.setattr(store_module, "migration_files", lambda: MIGRATIONS[:7])
    old = await open_store(path)  # version 7 indexed every message as it was stored
    root = await old.root_thread("Stelis", Scope.channel(1, 2), 0.8)
    kept, _ = await old.append(root.id, NewMessage("user", "the kestrel nests on the tower", external_id=1))
    await old.close()
    monkeypatch.undo()

    s = await open_store(path)
    assert await s.schema_version() == LATEST_VERSION
    assert await _indexed(s, "kestrel") == {kept.seq}  # what was indexed stays, and is not indexed twice
    await s.edit_message(1, "the falcon nests on the tower")
    newer, _ = await s.append(root.id, NewMessage("user", "a heron fishes at dawn"))
    await s.index_messages()
    assert await _indexed(s, "kestrel") == set() and await _indexed(s, "falcon") == {kept.seq}
    assert await _indexed(s, "heron") == {newer.seq}
    await s._db.execute("INSERT INTO messages_fts (messages_fts) VALUES ('integrity-check')")
    await s.close()


async def test_the_due_scan_is_an_indexed_range_query(store):
    async with store._db.execute(
        "EXPLAIN QUERY PLAN SELECT * FROM memory_channels WHERE due_at IS NOT NULL AND paused = 0 AND due_at <= ?"
        " ORDER BY due_at LIMIT ?", (0, 10),
    ) as cur:
        plan = " ".join(r[3] for r in await cur.fetchall())
    assert plan.startswith("SEARCH memory_channels USING INDEX idx_memory_channels_due (due_at>")


async def test_a_starts_sweep_reads_the_active_internal_threads_not_every_conversations_root(store):
    roots = [await store.root_thread("Stelis", Scope.channel(1, 100 + i), 0.8) for i in range(3)]
    inner, _ = await store.create_thread(roots[0], kind="stelis", label="look-up", window_ratio=0.5,
                                         chronicle_prompt=None, run_id="gone", anchor=None)
    assert [t.id for t in await store.active_internal_threads(store.clock() + 1)] == [inner.id]
    async with store._db.execute(
        "EXPLAIN QUERY PLAN SELECT t.* FROM threads t LEFT JOIN owners o ON o.owner = t.owner WHERE t.status = 'active'"
        " AND t.kind != 'root' AND t.discord_thread_id IS NULL AND t.branch_id IS NULL"
        " AND (? IS NULL OR o.heartbeat_at IS NULL OR o.heartbeat_at < ?) ORDER BY t.depth DESC, t.id DESC", (1, 1),
    ) as cur:
        plan = " ".join(r[3] for r in await cur.fetchall())
    assert plan.startswith("SEARCH t USING INDEX idx_threads_active_internal") and "TEMP B-TREE" not in plan


async def test_a_start_frees_the_leases_a_crash_left_through_an_index_of_the_leased(store):
    async with store._db.execute("EXPLAIN QUERY PLAN UPDATE memory_channels SET lease_owner = NULL"
                                 " WHERE lease_owner IS NOT NULL") as cur:
        plan = " ".join(r[3] for r in await cur.fetchall())
    assert plan.startswith("SEARCH memory_channels USING INDEX idx_memory_channels_leased")
    root = await store.root_thread("Stelis", Scope.channel(10, 100), 0.8)
    await store.append_counted(root, NewMessage("user", "hello"), Triggers(idle_seconds=0, threshold=1))
    assert [c.thread_id for c in await store.claim_due(store.clock() + 1, "gone", 600, 5)] == [root.id]
    assert await store.clear_claims() == 1 and (await store.memory_channel(root.id)).lease_owner is None


async def test_messages_an_older_version_never_counted_are_due_once_it_is_upgraded(tmp_path, monkeypatch):
    path = tmp_path / "db.sqlite3"
    counting = next(i for i, m in enumerate(MIGRATIONS) if m.name.endswith("_pending_counted_once.sql"))
    monkeypatch.setattr(store_module, "migration_files", lambda: MIGRATIONS[:counting])  # the schema it had
    store = await open_store(path, clock=lambda: 1_000.0)
    lost = await store.root_thread("Stelis", Scope.channel(10, 100), 0.8)
    counted = await store.root_thread("Stelis", Scope.channel(10, 101), 0.8)
    for root in (lost, counted):
        await store.append_counted(root, NewMessage("user", "stored, but the count was lost in a crash"),
                                   Triggers(idle_seconds=7_200, threshold=50))
    async with store._transaction() as db:  # what a crash of an older version between two transactions left
        await db.execute("UPDATE memory_channels SET pending_count = 0, due_at = NULL WHERE thread_id = ?",
                         (lost.id,))
    await store.close()
    monkeypatch.undo()
    store = await open_store(path, clock=lambda: 2_000.0)
    repaired, untouched = await store.memory_channel(lost.id), await store.memory_channel(counted.id)
    assert repaired.pending_count == 1 and repaired.due_at <= 2_000.0  # due at once
    assert untouched.pending_count == 1 and untouched.due_at == 1_000.0 + 7_200
    async with store._transaction() as db:  # the next start reads no conversation again
        await db.execute("UPDATE memory_channels SET pending_count = 0, due_at = NULL WHERE thread_id = ?",
                         (lost.id,))
    await store.close()
    store = await open_store(path, clock=lambda: 3_000.0)
    assert (await store.memory_channel(lost.id)).pending_count == 0
    await store.close()


async def test_the_background_indexer_keeps_recalls_index_in_few_segments(make_config, monkeypatch):
    from bot.engine import Engine
    from bot.providers.offline import OfflineLLM

    engine = await Engine.open(make_config(), OfflineLLM())
    monkeypatch.setattr("bot.services.conversation.INDEX_DELAY_SECONDS", 0.001)
    scope = Scope.channel(1, 10)

    async def segments() -> int:
        return (await engine.store._row("SELECT COUNT(DISTINCT segid) FROM messages_fts_idx", ()))[0]

    for i in range(30):  # a quiet channel: each message indexed on its own, a new segment each time
        await engine.conversations.hear(scope, f"the quokka count is {i}", author_name="mahe")
        for _ in range(200):
            await asyncio.sleep(0.005)
            if engine.store.unindexed == 0:
                break
    for _ in range(200):  # ... and merged in the background, a moment later
        if await segments() <= 3:
            break
        await asyncio.sleep(0.01)
    assert await segments() <= 3
    assert (await engine.store.match_counts(["quokka"], 100))[1] == {"quokka": 30}
    await engine.close()


def test_a_record_built_from_a_row_is_the_one_its_constructor_makes_and_a_strange_column_is_named():
    """Threads and messages are read on every reply without their generated __init__; the result is the same
    record, and a row that is not exactly their columns still fails by name."""
    from memory import rows as row_to
    from memory.records import Message, Thread

    class Row(dict):
        def keys(self):
            return list(super().keys())

        def __iter__(self):
            return iter(self.values())

    message = Message(seq=3, thread_id=1, role="user", content="hi", token_count=1, metadata={"a": 1})
    row = Row({**vars(message), "metadata": '{"a": 1}', "content_folded": "hi"})
    built = row_to.message(row)
    assert built == message and vars(built) == vars(message)
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.content = "changed"  # type: ignore[misc]
    with pytest.raises(TypeError, match="colour"):
        row_to.message(Row({**row, "colour": "blue"}))
    thread = Thread(**{f.name: None for f in dataclasses.fields(Thread)} | {"id": 7, "persona": "P", "revision": 2})
    assert row_to.thread(Row(vars(thread))) == thread
    assert row_to.thread(Row({k: v for k, v in vars(thread).items() if k != "revision"})).revision == 0  # its default
    with pytest.raises(TypeError, match="persona"):
        row_to.thread(Row({k: v for k, v in vars(thread).items() if k != "persona"}))


async def test_a_shared_commit_that_fails_saves_none_of_its_writes_and_the_next_write_starts_clean(store):
    """Issue 32: when the commit itself fails (here a foreign key checked only at commit), every write of the batch
    hears of it and none is saved; the connection is left outside any transaction for the writes after."""
    def dangling(conn):  # a message of no thread, found out only when the batch commits
        conn.execute("PRAGMA defer_foreign_keys = ON")
        return conn.execute("INSERT INTO messages (thread_id, role, content, metadata, token_count, created_at)"
                            " VALUES (999999, 'user', 'x', '{}', 1, 0)").rowcount

    # the first goes alone (nothing else on its way); the three arriving while it is out share a commit
    lone, *done = await asyncio.gather(store._atomic(_setting("lone")), store._atomic(_setting("a")),
                                       store._atomic(dangling), store._atomic(_setting("b")), return_exceptions=True)
    assert lone == "lone"
    assert all(isinstance(d, sqlite3.IntegrityError) for d in done), done
    assert await _guild_keys(store) == ["lone"]
    assert await store._atomic(_setting("c")) == "c"
    assert await _guild_keys(store) == ["c", "lone"]


async def test_a_disk_filling_up_during_a_burst_refuses_the_writes_that_do_not_fit_and_keeps_the_others(store):
    """Issue 32: in a shared commit a write the full disk refuses is undone alone: the messages stored before it stay,
    each refused one is a StoreError that says why, and once there is room again the next write is stored."""
    root = await store.root_thread("P", Scope.channel(1, 2), 0.8)
    (pages,), = await store._rows("PRAGMA page_count")
    await store._db.execute(f"PRAGMA max_page_count = {pages + 3}")  # a disk with room for two or three messages
    done = await asyncio.gather(*(store.append(root.id, NewMessage("user", f"{n} " + "x" * 3000)) for n in range(12)),
                                return_exceptions=True)
    stored = [d for d in done if not isinstance(d, BaseException)]
    refused = [d for d in done if isinstance(d, BaseException)]
    assert stored and refused
    assert all(isinstance(e, StoreError) and "full" in str(e) for e in refused), refused
    assert await store.count_messages(root.id) == len(stored) and not store._db.in_transaction
    await store._db.execute("PRAGMA max_page_count = 1000000")
    await store.append(root.id, NewMessage("user", "after space was freed"))
    assert await store.count_messages(root.id) == len(stored) + 1


async def test_recall_indexes_one_batch_at_a_time_and_those_waiting_find_their_messages_in_it(store):
    """Issue 32: five hundred replies at once each found the same backlog and each sent a batch to index it; now
    those asking while a batch runs wait for it and find their messages indexed; a message stored later is indexed
    by the next call, and a call with nothing new sends nothing."""
    root = await store.root_thread("P", Scope.channel(1, 2), 0.8)
    batches = 0
    real = store_module._index_pending

    def counted(conn):
        nonlocal batches
        batches += 1
        return real(conn)

    async def indexed(word: str) -> bool:
        return bool(await store._rows("SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?", (f'"{word}"',)))

    store_module._index_pending = counted
    try:
        await store.append(root.id, NewMessage("user", "a zebra at the gate"))
        await asyncio.gather(*(store.index_messages() for _ in range(50)))
        assert batches == 1 and await indexed("zebra")
        await store.append(root.id, NewMessage("user", "a quokka arrives late"))
        assert await store.index_messages() == 1 and await indexed("quokka")
        assert await store.index_messages() == 0 and batches == 2
    finally:
        store_module._index_pending = real


async def test_reads_asked_at_once_share_a_hop_to_the_database_thread_each_answered_as_alone(store, monkeypatch):
    """Issue 32: each reply's reads were a hop of their own to the database's thread and back (a burst of 500
    replies: 1,256 hops; its front 0.39 s, 0.32 with the reads sharing hops). Those asked while one hop is on its way
    go together, at most READS_TOGETHER a hop, each answered with what it would have read alone; one that fails, fails
    its own caller alone."""
    roots = [await store.root_thread("Stelis", Scope.channel(1, 400 + i), 0.8) for i in range(5)]
    for i, root in enumerate(roots):
        for n in range(i + 2):
            await store.append(root.id, NewMessage("user", f"the kestrel of channel {i} line {n}", 8, "ben"))
    await store.index_messages()
    asks = [(root.id, None, 3, i % 3) for i, root in enumerate(roots)]
    alone = [await store.opening(*ask) for ask in asks]
    looked_up = await store.recall_matches(["kestrel"], ["kestrel"], "Stelis", tuple(r.scope_key for r in roots), (),
                                           10, 10)
    hops: list[int] = []
    real = store_module._in_thread

    async def counted(db, work, *args):
        hops.append(len(args[0]) if args else 1)
        return await real(db, work, *args)

    monkeypatch.setattr(store_module, "_in_thread", counted)
    store._reads._most = 4  # the store was opened with the default
    together = await asyncio.gather(
        *(store.opening(*ask) for ask in asks),
        store.recall_matches(["kestrel"], ["kestrel"], "Stelis", tuple(r.scope_key for r in roots), (), 10, 10),
        store._read(lambda conn: conn.execute("SELECT * FROM no_such_table").fetchall()),
        store.opening(10**9, None, 3),
        # a conversation that sees its own channel alone, asked in the same hop as one that sees them all
        store.recall_matches(["kestrel"], ["kestrel"], "Stelis", (roots[1].scope_key,), (), 10, 10),
        return_exceptions=True)
    assert hops == [1, 4, 4]  # the first alone; the rest four to a hop, in the order asked
    assert together[:5] == alone and together[5] == looked_up and len(looked_up.messages) == 10  # of 20 kestrels
    assert isinstance(together[6], sqlite3.OperationalError) and isinstance(together[7], KeyError)
    assert sorted(m.content for m in together[8].messages) == ["the kestrel of channel 1 line 0",
                                                               "the kestrel of channel 1 line 1",
                                                               "the kestrel of channel 1 line 2"]


async def test_closing_answers_the_reads_on_their_way_first(tmp_path):
    """Reads waiting for their shared hop when the store closes are read, not lost to a closed connection."""
    opened = await open_store(tmp_path / "closing.sqlite3")
    roots = [await opened.root_thread("Stelis", Scope.channel(1, 700 + i), 0.8) for i in range(6)]
    for i, root in enumerate(roots):
        await opened.append(root.id, NewMessage("user", f"said in {i}", 8, "ben"))
    reads = [asyncio.create_task(opened.opening(root.id, None, 5)) for root in roots]
    await asyncio.sleep(0)  # each has asked: the first is on its way, the others wait to go together
    await opened.close()
    assert [o.messages[0].content for o in await asyncio.gather(*reads)] == [f"said in {i}" for i in range(6)]
