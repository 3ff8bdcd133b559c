"""What is PostgreSQL's own: migrations under an advisory lock, clear errors, identities, trigram indexes."""

import asyncio

import asyncpg
import pytest

from memory.backends import open_store
from memory.database_url import safe_url
from memory.postgres.store import PostgresStore, migration_files
from memory.records import NewMessage, Opening, Scope
from memory.settings import Triggers
from memory.store import OptedOut, StoreError
from tests.recall_helpers import matched_messages


@pytest.fixture
async def url(postgres_cluster):
    """An empty database (no schema yet)."""
    name = "e_" + str(abs(hash(asyncio.current_task())))[:10]
    await postgres_cluster._admin(f"CREATE DATABASE {name}")
    yield postgres_cluster.url_for(name)
    await postgres_cluster.drop_database(name)


async def test_processes_starting_together_migrate_an_empty_database_once(url):
    stores = await asyncio.gather(*(open_store(url) for _ in range(4)))
    assert [await s.schema_version() for s in stores] == [len(migration_files())] * 4
    con = await asyncpg.connect(url)
    assert await con.fetchval("SELECT COUNT(*) FROM schema_version") == len(migration_files())
    await con.close()
    assert sum([await s.migrate() for s in stores]) == 0  # already done
    for s in stores:
        await s.close()


async def test_a_database_from_a_newer_stelis_is_refused(url):
    await (await open_store(url)).close()
    con = await asyncpg.connect(url)
    await con.execute("INSERT INTO schema_version VALUES (999, 0)")
    await con.close()
    with pytest.raises(StoreError, match="newer than this Stelis understands"):
        await open_store(url)


async def test_messages_an_older_version_never_counted_are_due_once_it_is_upgraded(url, monkeypatch):
    from memory.postgres import store as store_module

    every = migration_files()
    counting = next(i for i, m in enumerate(every) if m.name.endswith("_pending_counted_once.sql"))
    monkeypatch.setattr(store_module, "migration_files", lambda: every[:counting])  # the schema it had
    store = await open_store(url, clock=lambda: 1_000.0)
    root = await store.root_thread("Stelis", Scope.channel(10, 100), 0.8)
    await store.append_counted(root, NewMessage("user", "stored, but the count was lost in a crash"),
                               Triggers(idle_seconds=7_200, threshold=50))
    await store.close()
    con = await asyncpg.connect(url)  # what a crash of an older version left
    await con.execute("UPDATE memory_channels SET pending_count = 0, due_at = NULL WHERE thread_id = $1", root.id)
    await con.close()
    monkeypatch.undo()
    store = await open_store(url, clock=lambda: 2_000.0)
    repaired = await store.memory_channel(root.id)
    assert repaired.pending_count == 1 and repaired.due_at <= 2_000.0  # due at once
    await store.close()


async def test_an_unreachable_server_is_a_clear_error_that_hides_the_password(postgres_cluster):
    bad = postgres_cluster.url_for("postgres").replace("stelis@", "stelis:hunter2@").replace(
        f":{postgres_cluster.port}/", ":1/")
    with pytest.raises(StoreError) as refused:
        await asyncio.wait_for(open_store(bad), 30)
    assert "cannot reach the database" in str(refused.value) and "hunter2" not in str(refused.value)
    assert safe_url(bad).count("***") == 1


@pytest.fixture
async def store(postgres_cluster):
    """A migrated PostgreSQL store (this module's tests are PostgreSQL's alone)."""
    name = await postgres_cluster.fresh_database()
    s = await open_store(postgres_cluster.url_for(name))
    assert isinstance(s, PostgresStore)
    yield s
    await s.close()
    await postgres_cluster.drop_database(name)


async def test_sequences_are_never_reused_after_the_newest_row_is_deleted(store):
    root = await store.root_thread("P", Scope.console(), 0.8)
    seqs = [(await store.append(root.id, NewMessage("user", f"m{i}")))[0].seq for i in range(3)]
    await store._execute("DELETE FROM messages WHERE seq = $1", seqs[-1])
    newer, _ = await store.append(root.id, NewMessage("user", "after delete"))
    assert newer.seq > seqs[-1]


async def test_recall_reads_the_trigram_index(store):
    root = await store.root_thread("P", Scope.console(), 0.8)
    await store.append_many(root.id, [NewMessage("user", f"line {i} about 東京タワー") for i in range(200)])
    async with store._transaction() as con:
        await con.execute("SET LOCAL enable_seqscan = off")  # a tiny table: ask whether the index can answer
        plan = "\n".join(r[0] for r in await con.fetch(
            "EXPLAIN SELECT seq FROM messages WHERE content_folded LIKE '%東京タワー%'"))
    assert "idx_messages_folded_trgm" in plan


async def test_a_second_process_sweeps_only_the_threads_of_a_process_that_stopped_beating(postgres_cluster,
                                                                                          make_config):
    from bot.engine import Engine
    from bot.owner import HEARTBEAT_SECONDS
    from bot.providers.offline import OfflineLLM

    name = await postgres_cluster.fresh_database()
    config = make_config(database={"url": postgres_cluster.url_for(name)}, snapshots={"interval_seconds": 0})
    first = await Engine.open(config, OfflineLLM())  # no instance lock on a shared database: both may run
    scope = Scope.channel(1, 2)
    await first.conversations.hear(scope, "let us research kestrels", author_name="mahe")
    thread = await first.stelis.start(await first.stelis.new_run(scope), "kestrel research")
    second = await Engine.open(config, OfflineLLM())
    assert (await second.store.thread(thread.id)).status == "active"  # its process beats: left alone
    await second.close()

    await first.store._execute("UPDATE owners SET heartbeat_at = heartbeat_at - $1 WHERE owner = $2",
                               HEARTBEAT_SECONDS * 4, first.store.owner)  # as if it died a while ago
    third = await Engine.open(config, OfflineLLM())
    assert (await third.store.thread(thread.id)).status == "aborted"
    await third.close()
    await first.close()
    await postgres_cluster.drop_database(name)


async def test_a_search_pool_that_cannot_connect_closes_the_pool_already_open(postgres_cluster, monkeypatch):
    """The server refusing the second pool's connections (its limit reached meanwhile) is a StoreError, and the
    first pool's connections are closed, not left open until the process ends."""
    name = await postgres_cluster.fresh_database()
    opened: list[asyncpg.Pool] = []
    real = asyncpg.create_pool

    async def second_refused(*args, **kwargs):
        if opened:
            raise asyncpg.TooManyConnectionsError("sorry, too many clients already")
        opened.append(await real(*args, **kwargs))
        return opened[-1]

    monkeypatch.setattr(asyncpg, "create_pool", second_refused)
    with pytest.raises(StoreError, match="too many clients"):
        await PostgresStore.open(postgres_cluster.url_for(name))
    assert opened and opened[0].is_closing()
    await postgres_cluster.drop_database(name)  # refused while a connection to it is still open


async def test_every_connection_is_opened_and_warmed_at_start_so_replies_ask_the_server_nothing_about_types(
        postgres_cluster, monkeypatch):
    """A burst of replies once opened the pool's connections one by one and had each ask the server about the row
    types a window's page comes in (issue 32: 3 ms of the server's a connection, in the burst). They are opened at
    start, each learns them there, and they stay open (asyncpg closes idle connections only above the floor)."""
    from asyncpg.connection import Connection

    asked: list[str] = []
    real = Connection._introspect_types

    async def introspect(self, *args, **kwargs):
        asked.append("types")
        return await real(self, *args, **kwargs)

    name = await postgres_cluster.fresh_database()
    monkeypatch.setattr(Connection, "_introspect_types", introspect)
    opened = await PostgresStore.open(postgres_cluster.url_for(name), pool_size=4)
    for lender in (opened._pool, opened._search):
        assert lender.pool.get_size() == lender.pool.get_min_size() == lender.pool.get_max_size()
    assert len(asked) == 4  # one question per connection, at start
    thread = await opened.root_thread("Stelis", Scope.channel(1, 2), 0.8)
    await opened.append(thread.id, NewMessage("user", "the kestrel nests on the tower"))
    for _ in range(6):  # every connection of the main pool serves one of them, none asks again
        page = await asyncio.gather(*(opened.opening(thread.id, None, 10, versions=5) for _ in range(3)))
        assert all(p.messages[0].content == "the kestrel nests on the tower" for p in page)
    assert len(asked) == 4
    await opened.close()
    await postgres_cluster.drop_database(name)


async def test_the_pool_reports_its_use(store):
    in_use, size = store.pool_usage()
    assert size == 10 and 0 <= in_use <= size  # asyncpg's default size when database.pool_size is not given
    async with store._transaction():
        assert store.pool_usage()[0] >= 1


async def test_a_look_up_reads_the_trigram_index_where_the_planner_would_rather_scan(store):
    """A table of a few rows is cheaper to scan, so the planner scans it; recall's connections never do (on a
    large table its guess goes wrong: 40 ms for 2), and a look-up is one statement, no transaction around it."""
    thread = await store.root_thread("Stelis", Scope.channel(1, 2), 0.8)
    await store.append_many(thread.id, [NewMessage("user", f"the kestrel number {n}") for n in range(5)])
    look_up = "EXPLAIN SELECT seq FROM messages WHERE content_folded LIKE $1"
    assert "Seq Scan" in "\n".join(r[0] for r in await store._all(look_up, "%kestrel%"))
    assert "idx_messages_folded_trgm" in "\n".join(r[0] for r in await store._searched(look_up, "%kestrel%"))
    found = await matched_messages(store, ["kestrel"], "Stelis", (thread.scope_key,), 3)
    assert len(found) == 3 and store.pool_usage()[1] == 10  # the search pool is counted in database.pool_size
    # planned once for any pattern, and that plan still reads the index, for a word in every row as for a rare one
    run = "EXPLAIN EXECUTE look_up($1)"
    async with store._search.acquire() as con:
        await con.execute("PREPARE look_up(text) AS SELECT seq FROM messages WHERE content_folded LIKE $1")
        for word in ("%the%", "%number 3%"):
            plan = "\n".join(r[0] for r in await con.fetch(run.replace("$1", f"'{word}'")))
            assert "idx_messages_folded_trgm" in plan and "$1" in plan  # generic: the pattern is not in the plan
        await con.execute("DEALLOCATE look_up")


async def test_a_servers_shared_channels_are_read_from_an_index_of_the_shared_ones(store):
    """Issue 32 (SQLite's index had it, PostgreSQL's schema not): among 500 private channels, each reply's look-up
    for the shared ones walked every one of them."""
    from memory.settings import ShortTermSettings

    roots = [await store.root_thread("P", Scope.channel(1, 100 + i), 0.8) for i in range(4)]
    for root in roots:
        await store.append_counted(root, NewMessage("user", "hi"), ShortTermSettings().triggers)
    await store.set_channel_flags(roots[1].id, public=1, name="general")
    assert [c.channel_id for c in await store.shared_channels("P", 1, limit=3, besides=100)] == [101]
    async with store._transaction() as con:
        await con.execute("SET LOCAL enable_seqscan = off")  # a tiny table: ask which index can answer
        plan = "\n".join(r[0] for r in await con.fetch(
            "EXPLAIN SELECT * FROM memory_channels WHERE persona = 'P' AND guild_id = 1 AND discord_thread_id IS NULL"
            " AND COALESCE(shareable, public) = 1 AND (channel_id IS NULL OR channel_id != 100)"
            " ORDER BY last_message_at DESC NULLS LAST LIMIT 3"))
    assert "idx_memory_channels_shared_activity" in plan, plan


async def test_a_starts_sweep_reads_the_active_internal_threads_not_every_conversations_root(store):
    roots = [await store.root_thread("Stelis", Scope.channel(1, 100 + i), 0.8) for i in range(3)]
    inner, _ = await store.create_thread(roots[0], kind="stelis", label="look-up", window_ratio=0.5,
                                         chronicle_prompt=None, run_id="gone", anchor=None)
    assert [t.id for t in await store.active_internal_threads(store.clock() + 1)] == [inner.id]
    async with store._transaction() as con:
        await con.execute("SET LOCAL enable_seqscan = off")  # a tiny table: ask which index can answer
        plan = "\n".join(r[0] for r in await con.fetch(
            "EXPLAIN ANALYZE SELECT t.* FROM threads t WHERE t.status = 'active' AND t.kind != 'root'"
            " AND t.discord_thread_id IS NULL AND t.branch_id IS NULL ORDER BY t.depth DESC, t.id DESC"))
    # the index holds the internal threads alone: no conversation's root is read to be filtered out
    assert "idx_threads_active_internal" in plan and "Rows Removed" not in plan, plan


async def test_a_long_texts_folded_form_stays_whole_in_its_row_and_the_rest_is_compressed_with_lz4(store):
    """Recall reads a match's folded text twice: kept in the row uncompressed while the row holds it (migration 15),
    it is neither fetched nor decompressed each time; what is compressed is compressed with lz4 (migration 9)."""
    thread = await store.root_thread("Stelis", Scope.channel(1, 2), 0.8)
    long = "The kestrel hovered over the ridge while Mahe counted the hawks. " * 80  # ~5 kB
    longer = " ".join(f"kestrel {n} hovered" for n in range(2_000))  # ~34 kB: more than a page even folded
    for text in (long, longer):
        await store.append(thread.id, NewMessage("user", text))
    record = await store.add_record("Stelis", "channel", 2, "short_term", long, 1, 1)
    stored = await store._all(
        "SELECT pg_column_compression(content), pg_column_compression(content_folded),"
        " pg_column_size(content_folded) >= octet_length(content_folded) FROM messages ORDER BY seq")
    assert [tuple(row) for row in stored] == [("lz4", None, True), ("lz4", "lz4", False)]
    assert await store._value("SELECT pg_column_compression(content) FROM memory_records WHERE id = $1",
                              record.id) == "lz4"
    found = await matched_messages(store, ["kestrel"], "Stelis", (thread.scope_key,), 3)
    assert sorted(m.content for m in found) == sorted((long, longer))


@pytest.mark.parametrize(("size", "main", "search"), [(2, 1, 1), (3, 2, 1), (20, 15, 5)])
async def test_database_pool_size_bounds_both_pools(postgres_cluster, size, main, search):
    name = await postgres_cluster.fresh_database()
    opened = await PostgresStore.open(postgres_cluster.url_for(name), pool_size=size)
    assert (opened._pool.size(), opened._search.size()) == (main, search)
    await opened.close()
    await postgres_cluster.drop_database(name)


async def test_bot_processes_sharing_a_database_take_turns_to_log_in(postgres_cluster, make_config, monkeypatch):
    from discord.ext import commands

    from bot.discord_bot import make_bot
    from bot.engine import Engine
    from bot.providers.offline import OfflineLLM

    paused: list[int | None] = []

    async def discord_py_pause(self, shard_id, *, initial=False):
        paused.append(shard_id)

    monkeypatch.setattr(commands.AutoShardedBot, "before_identify_hook", discord_py_pause)
    name = await postgres_cluster.fresh_database()
    shards = {"shard_count": 4}
    shared = make_config(database={"url": postgres_cluster.url_for(name)}, snapshots={"interval_seconds": 0},
                         discord={"shards": "0-1", **shards})
    first, second = await Engine.open(shared, OfflineLLM()), await Engine.open(shared, OfflineLLM())
    one, other = make_bot(shared, first), make_bot(shared, second)
    await asyncio.wait_for(one.before_identify_hook(0, initial=True), 2)
    waiting = asyncio.create_task(other.before_identify_hook(2, initial=True))
    await asyncio.sleep(1.0)
    assert not waiting.done()  # the first login holds the next five seconds, across processes
    await first.store._execute("UPDATE claims SET until = 0 WHERE key = 'discord:identify'")  # as if they passed
    await asyncio.wait_for(waiting, 2)
    assert paused == []  # the database paced both
    await first.close()
    await second.close()

    alone = make_config(snapshots={"interval_seconds": 0}, discord={"shards": "0-1", **shards})
    engine = await Engine.open(alone, OfflineLLM())  # its own SQLite file: discord.py paces its shards
    await make_bot(alone, engine).before_identify_hook(1, initial=True)
    assert paused == [1]
    await engine.close()
    await postgres_cluster.drop_database(name)


async def test_an_opt_out_or_setting_another_process_makes_holds_here_soon(postgres_cluster, make_config):
    from bot.engine import Engine
    from bot.providers.offline import OfflineLLM
    from bot.services.effective_settings import SHARED_MAX_AGE

    name = await postgres_cluster.fresh_database()
    config = make_config(database={"url": postgres_cluster.url_for(name)}, snapshots={"interval_seconds": 0})
    here, there = await Engine.open(config, OfflineLLM()), await Engine.open(config, OfflineLLM())
    scope = Scope.channel(1, 2)
    assert await here.conversations.hear(scope, "hello", author_name="mahe", author_id=77) is not None
    assert "kestrel" not in (await here.settings.effective(1, 2)).persona.card  # read, and kept for a while
    await there.forgetting.opt_out(77)  # a DM to another process's shard
    # Before this process reads the opt-outs again, the statement that would store the message refuses it.
    assert await here.conversations.hear(scope, "said right after", author_name="mahe", author_id=77) is None
    assert [m.content for m in await here.store.tail((await here.stelis.root(scope)).id, 5)] == ["hello"]
    assert not here.forgetting.remembers(77)  # and the opt-outs are read again at once
    await there.settings.set("guild", 1, "persona.card", "You are a kestrel.")
    assert here.settings.max_age == SHARED_MAX_AGE
    here.settings.max_age = 0  # as if that while had passed
    assert await here.conversations.hear(scope, "my secret", author_name="mahe", author_id=77) is None
    assert (await here.settings.effective(1, 2)).persona.card == "You are a kestrel."
    await here.close()
    await there.close()
    await postgres_cluster.drop_database(name)

    alone = await Engine.open(make_config(snapshots={"interval_seconds": 0}), OfflineLLM())
    assert alone.settings.max_age is None  # its own SQLite file: every change is made here
    await alone.close()


async def test_an_erasure_another_process_makes_reaches_no_later_prompt_here(postgres_cluster, make_config):
    from bot.engine import Engine
    from bot.providers.offline import OfflineLLM

    name = await postgres_cluster.fresh_database()
    config = make_config(database={"url": postgres_cluster.url_for(name)}, snapshots={"interval_seconds": 0})
    here, there = await Engine.open(config, OfflineLLM()), await Engine.open(config, OfflineLLM())
    scope = Scope.channel(1, 2)
    await here.conversations.hear(scope, "my locker code is 5512-KESTREL", author_name="mahe", author_id=77,
                                  external_id=501)
    await here.conversations.hear(scope, "the meeting moved to noon", author_name="ben", author_id=78, external_id=502)
    root = await here.stelis.root(scope)
    assert "5512-KESTREL" in str((await here.conversations.context(root.id)).request)  # now in this cache
    await there.forgetting.forget_person(77, guild_id=1)  # a forget-me through another process's shard
    assert "5512-KESTREL" not in str((await here.conversations.context(root.id)).request)
    await here.conversations.hear(scope, "what about the locker?", author_name="ben", author_id=78, external_id=503)
    await there.forgetting.edit_message(502, "the meeting is cancelled")
    shown = str((await here.conversations.context(root.id)).request)
    assert "cancelled" in shown and "moved to noon" not in shown
    await here.close()
    await there.close()
    await postgres_cluster.drop_database(name)


def test_recall_ranks_its_hits_as_fts5_does_rare_words_and_short_texts_first():
    """PostgreSQL's hits are ranked in Python (BM25 as FTS5's bm25(): counting each term in SQL cost more than
    the look-up): a rarer term weighs more, a shorter text of equal counts ranks higher, ties newest first."""
    from memory.postgres.store import _ranked

    rows = [  # (key, text, the terms it matched): what _matches gives each hit
        (1, "the lighthouse and the lighthouse keeper", [0]),
        (2, "a lighthouse", [0]),
        (3, "the ferry to the lighthouse, the QUILLWORT garden", [0, 1]),
        (4, "a lighthouse", [0]),
    ]
    best = _ranked(rows, ["lighthouse", "quillwort"], text=1, key=0, limit=3)
    assert [r[0] for r in best] == [3, 4, 2]  # the rare word (matched in another case), then short texts, newest first
    twice = [(1, "lighthouse by the lighthouse", [0]), (2, "lighthouse by the old harbour", [0])]
    assert [r[0] for r in _ranked(twice, ["lighthouse"], text=1, key=0, limit=5)] == [1, 2]  # twice beats once
    assert _ranked([], ["x"], text=1, key=0, limit=5) == []


def test_named_parameters_are_numbered_in_order_of_first_use():
    from memory.postgres.store import named

    sql = "UPDATE t SET due = $now::float8 WHERE n >= $threshold AND at < $now AND id = $thread_id"
    assert named(sql, thread_id=7, now=1.5, threshold=3) == (
        "UPDATE t SET due = $1::float8 WHERE n >= $2 AND at < $1 AND id = $3", 1.5, 3, 7)
    assert named(sql, thread_id=8, now=2.5, threshold=4)[1:] == (2.5, 4, 8)  # parsed once, bound each time
    with pytest.raises(KeyError):
        named(sql, now=1.0)


async def test_assemblies_hold_one_connection_each_and_never_wait_on_each_other_for_one(postgres_cluster):
    """An assembly's reads share the connection it holds: with one connection in the main pool, many at once in a
    server whose channels share their memory all finish, and the connection goes back to the pool."""
    from tests.context_helpers import assembler, say

    name = await postgres_cluster.fresh_database()
    store = await PostgresStore.open(postgres_cluster.url_for(name), pool_size=2)  # one main, one search
    try:
        threads = [await store.root_thread("Stelis", Scope.channel(7, 700 + c), 1.0) for c in range(12)]
        for thread in threads:
            await say(store, thread.id, "what did we plan for the harbour festival?")  # noted: it may share
            await store.set_channel_flags(thread.id, public=1)
        maker = assembler(store)
        built = await asyncio.wait_for(asyncio.gather(*(maker.assemble(t.id) for t in threads)), 30)
        assert [a.thread.id for a in built] == [t.id for t in threads]
        assert store.pool_usage()[0] == 0  # every connection is back

        async with store.held():  # a statement refused inside gives the connection back too
            with pytest.raises(StoreError):
                await store._value("SELECT 1/0")
        assert store.pool_usage()[0] == 0 and await store._value("SELECT 2") == 2

        async with store.held():  # the server drops the held connection between two statements
            pid = await store._value("SELECT pg_backend_pid()")
            assert await store._value("SELECT pg_backend_pid()") == pid  # one connection for the block
            async with store._search.acquire() as other:
                assert await other.fetchval("SELECT pg_terminate_backend($1, 5000)", pid)  # waits until it is gone
            await asyncio.sleep(0.05)  # the server's notice reaches this process: a gap between two statements
            with pytest.raises(StoreError):
                await store._value("SELECT 3")
        assert await asyncio.wait_for(store._value("SELECT 4"), 10) == 4  # a new connection serves the next
        assert await store._value("SELECT pg_backend_pid()") != pid
    finally:
        await store.close()
        await postgres_cluster.drop_database(name)


async def test_a_held_block_cancelled_mid_statement_gives_its_connection_back_set_right(store):
    """A reply given up on while its reads run (a shutdown, a timeout): the statement is cancelled, its connection
    goes back through asyncpg's pool (which waits the cancellation out) and the next statements run at once."""
    started = asyncio.Event()

    async def reads() -> None:
        async with store.held():
            started.set()
            await store._value("SELECT pg_sleep(10)")

    reading = asyncio.create_task(reads())
    await started.wait()
    await asyncio.sleep(0.1)
    reading.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reading
    assert store.pool_usage()[0] == 0
    assert await asyncio.wait_for(asyncio.gather(*(store._value("SELECT $1::int", n) for n in range(8))), 10) \
        == list(range(8))
    async with store.held():
        assert not store._own().is_in_transaction() and await store._value("SELECT 9") == 9


async def test_a_pin_branch_or_sharing_another_process_changes_reaches_the_next_prompt_here(postgres_cluster):
    """Each process keeps the layers (pins among them), the working memory and what each channel shares as it
    read them last: a pin, a branch or a channel's sharing changed through another process sharing the database
    moves the shared change count, and the next request here reads them again instead of showing what was
    unpinned, or what a channel made private said."""
    from tests.context_helpers import assembler, say

    name = await postgres_cluster.fresh_database()
    here = await PostgresStore.open(postgres_cluster.url_for(name))
    there = await PostgresStore.open(postgres_cluster.url_for(name))
    try:
        root = await here.root_thread("Stelis", Scope.channel(1, 2), 0.8)
        plans = await there.root_thread("Stelis", Scope.channel(1, 3), 0.8)  # another public channel of the server
        await there.ensure_memory_channel(plans)
        await there.set_channel_flags(plans.id, public=1, name="plans")
        await there.add_record("Stelis", "channel", 3, "short_term", "In plans they booked the night ferry.", 1, 1)
        asm = assembler(here, context_tokens=20_000)
        await there.pin("Stelis", "channel", 2, "the locker code is 5512")
        await say(here, root.id, "good morning")
        shown = str((await asm.assemble(root.id)).request)
        assert "the locker code is 5512" in shown and "booked the night ferry" in shown
        await there.unpin("Stelis", "channel", 2, "the locker code is 5512")
        await there.create_branch("b-1", "Stelis", "task", "repaint the lighthouse", root.scope_key, 1, 2, None)
        await say(here, root.id, "what now")
        shown = str((await asm.assemble(root.id)).request)
        assert "5512" not in shown and "repaint the lighthouse" in shown
        await there.update_branch("b-1", label="repaint the pier")
        await there.pin("Stelis", "channel", 2, "the gate code is 7781")  # here knew of no pin left in this channel
        await say(here, root.id, "and then")
        shown = str((await asm.assemble(root.id)).request)
        assert "repaint the pier" in shown and "lighthouse" not in shown and "the gate code is 7781" in shown
        await there.set_channel_flags(plans.id, public=0)  # made private elsewhere: neither shown nor recalled
        await say(here, root.id, "which night ferry was booked")
        assert "night ferry was booked" in (shown := str((await asm.assemble(root.id)).request))
        assert "booked the night ferry" not in shown
    finally:
        await here.close()
        await there.close()
        await postgres_cluster.drop_database(name)


async def test_recalls_connections_start_no_parallel_workers(store):
    """Issue 32: priced for its generic plan, a look-up of four words or more at 10k messages gathered from two
    parallel workers, whose start took 5 of its 6 ms (1.3 ms without). Recall's connections never start any;
    the main pool's keep the server's default."""
    async with store._search.acquire() as con:
        assert await con.fetchval("SHOW max_parallel_workers_per_gather") == "0"
        assert await con.fetchval("SHOW plan_cache_mode") == "force_generic_plan"
    assert await store._value("SHOW max_parallel_workers_per_gather") == "2"


async def test_the_replies_to_recalled_messages_are_found_on_recalls_connections_planned_once(store):
    """Issue 32: on the main pool the look-up of what was said back to a question's best hits was planned anew each
    time (its parents a new array: 0.55 ms a question at 100k messages, SQLite 0.27); on recall's connections its one
    generic plan serves every call (0.32)."""
    thread = await store.root_thread("Stelis", Scope.channel(1, 2), 0.8)
    said = [(await store.append(thread.id, NewMessage("user" if n % 2 == 0 else "assistant", f"line {n}")))[0]
            for n in range(40)]
    questions = [m.seq for m in said if m.role == "user"]
    for start in range(10):
        replies = await store.replies_to(questions[start:start + 8], "Stelis", (thread.scope_key,))
        assert {parent: reply.content for parent, reply in replies.items()} == {
            m.seq: f"line {n + 1}" for n, m in enumerate(said) if m.seq in questions[start:start + 8]}
    plans = []
    searchers = [await store._search.take() for _ in range(store._search.size())]  # every one of them
    for con in searchers:
        plans += await con.fetch("SELECT generic_plans, custom_plans FROM pg_prepared_statements"
                                 " WHERE statement LIKE '%next AS MATERIALIZED%'"
                                 " AND statement NOT LIKE '%pg_prepared_statements%'")
        await store._search.release(con)
    assert sum(row["generic_plans"] for row in plans) == 10 and sum(row["custom_plans"] for row in plans) == 0


async def test_a_look_up_is_one_statement_whatever_its_number_of_terms(store, monkeypatch):
    """Issue 32: each number of terms was a statement of its own, prepared at its first use on each of recall's
    connections (half of recall's time at 1k messages went to preparing). Now the terms are arrays: one look-up and
    one count for any number of them, each term still read through the trigram index."""
    thread = await store.root_thread("Stelis", Scope.channel(1, 2), 0.8)
    birds = ["kestrel", "falcon", "osprey", "harrier"]
    await store.append_many(thread.id, [NewMessage("user", f"a {bird} {'and a ' + bird if n else ''} here")
                                        for n, bird in enumerate(birds)] + [NewMessage("user", "nothing")] * 20)
    await store.add_record("Stelis", "channel", 2, "short_term", "They watched an osprey and a falcon.", 1, 2)
    sent: list[str] = []
    searched = store._searched

    async def noted(sql, *params):
        sent.append(sql)
        return await searched(sql, *params)

    monkeypatch.setattr(store, "_searched", noted)
    for n in range(1, len(birds) + 1):
        terms = birds[:n]
        found = await store.recall_matches(terms, terms, "Stelis", (thread.scope_key,), (("channel", 2),), 10, 5)
        assert sorted(m.content.split()[1] for m in found.messages) == sorted(terms)
        assert [note.text for note in found.notes] == (["They watched an osprey and a falcon."] if n > 1 else [])
        assert (await store.match_counts(terms, 500))[1] == dict.fromkeys(terms, 1)
    assert len(set(sent)) == 2 and len(sent) == 2 * len(birds)
    look_up = next(sql for sql in sent if sql.startswith("WITH"))
    plan = "\n".join(r[0] for r in await searched(f"EXPLAIN {look_up}", "Stelis", f'{{"{thread.scope_key}": 1}}',
                                                  ["%kestrel%"], ["kestrel"], 10, ["%kestrel%"], '{"channel:2": 1}'))
    assert all(index in plan for index in ("idx_messages_folded_trgm", "idx_records_trgm", "idx_chronicles_trgm"))


def _together(store, monkeypatch, statement: str = "_STORE_TOGETHER") -> list[int]:
    """Spy: how many items (appends, unless another of the store's shared statements is named) each shared
    statement carried."""
    from memory.postgres import store as store_module

    carried: list[int] = []
    sent = store._all

    async def noted(sql, *params):
        if sql == getattr(store_module, statement):
            carried.append(len(params[0]))
        return await sent(sql, *params)

    monkeypatch.setattr(store, "_all", noted)
    return carried


async def test_messages_heard_at_once_go_in_one_statement_each_stored_and_counted_as_alone(store, monkeypatch):
    """Issue 32: each message heard was a statement of its own; at 500 channels at once the last was stored half a
    second into the burst. Those arriving while one is on its way now go together, each counted with its own
    thread's triggers as alone: a conversation one message short of its threshold is due at once, a new one at its
    idle deadline."""
    store.clock = lambda: 5_000.0
    roots = [await store.root_thread("Stelis", Scope.channel(1, 100 + i), 0.8) for i in range(30)]
    triggers = Triggers(idle_seconds=600, threshold=2)
    for root in roots[::2]:  # every other conversation has said something before
        await store.append_counted(root, NewMessage("user", "earlier", 7, "ana"), triggers)
    carried = _together(store, monkeypatch)
    results = await asyncio.gather(*(store.append_counted(r, NewMessage("user", f"hello {i}", 8, "ben"), triggers)
                                     for i, r in enumerate(roots)))
    assert sum(carried) == len(roots) - 1 and len(carried) == 1  # the first went alone; the rest waited, together
    assert [(m.thread_id, m.content, created) for m, created, _ in results] == \
        [(r.id, f"hello {i}", True) for i, r in enumerate(roots)]
    assert len({m.seq for m, _, _ in results}) == len(roots)
    for i, (root, (_, _, due)) in enumerate(zip(roots, results, strict=True)):
        channel = await store.memory_channel(root.id)
        assert channel is not None
        assert (channel.pending_count, channel.due_at, due) == ((2, 5_000.0, 5_000.0) if i % 2 == 0
                                                               else (1, 5_600.0, 5_600.0))
        assert [m.content for m in await store.tail(root.id, 50)] == (["earlier"] if i % 2 == 0 else []) + \
            [f"hello {i}"]


async def test_in_a_shared_statement_an_opted_out_author_is_refused_and_a_known_message_returned_alone(
        store, monkeypatch):
    roots = [await store.root_thread("Stelis", Scope.channel(1, 200 + i), 0.8) for i in range(6)]
    known, _ = await store.append(roots[0].id, NewMessage("user", "said once", 8, "ben", external_id=42))
    await store.set_optout("Stelis", 9, True)
    carried = _together(store, monkeypatch)
    said = [NewMessage("user", "first", 8, "ben"), NewMessage("user", "said once", 8, "ben", external_id=42),
            NewMessage("user", "leave me out", 9, "cat"), NewMessage("user", "fine", 8, "ben"),
            NewMessage("user", "also fine", 8, "ben", external_id=43), NewMessage("assistant", "an answer")]
    results = await asyncio.gather(*(store.append(r.id, m) for r, m in zip(roots, said, strict=True)),
                                   return_exceptions=True)
    assert carried == [5]
    assert isinstance(results[2], OptedOut)
    assert results[1] == (known, False)
    assert [(m.content, created) for m, created in (results[0], results[3], results[4], results[5])] == \
        [("first", True), ("fine", True), ("also fine", True), ("an answer", True)]
    assert await store.tail(roots[2].id, 50) == []


async def test_messages_of_one_thread_at_once_are_stored_in_the_order_sent_each_counted(store, monkeypatch):
    root = await store.root_thread("Stelis", Scope.channel(1, 300), 0.8)
    others = [await store.root_thread("Stelis", Scope.channel(1, 301 + i), 0.8) for i in range(3)]
    triggers = Triggers(idle_seconds=600, threshold=50)
    carried = _together(store, monkeypatch)
    threads = [others[0], root, others[1], root, root, others[2]]
    await asyncio.gather(*(store.append_counted(t, NewMessage("user", f"m{i}", 8, "ben"), triggers)
                           for i, t in enumerate(threads)))
    assert [m.content for m in await store.tail(root.id, 50)] == ["m1", "m3", "m4"]
    assert all(n <= 3 for n in carried)  # a thread's second message waits for the statement holding its first
    channel = await store.memory_channel(root.id)
    assert channel is not None and channel.pending_count == 3


async def test_an_append_the_database_refuses_in_a_shared_statement_fails_alone(store, monkeypatch):
    """A thread gone (here: never made) breaks the shared statement; each append then goes alone, so only the
    append at fault fails, with the error it would have had alone."""
    roots = [await store.root_thread("Stelis", Scope.channel(1, 400 + i), 0.8) for i in range(4)]
    carried = _together(store, monkeypatch)
    targets = [r.id for r in roots] + [987_654]
    results = await asyncio.gather(*(store.append(t, NewMessage("user", f"m{i}", 8, "ben"))
                                     for i, t in enumerate(targets)), return_exceptions=True)
    assert carried == [4]  # tried together first
    assert isinstance(results[-1], asyncpg.ForeignKeyViolationError)
    assert [m.content for m, _ in results[:-1]] == ["m0", "m1", "m2", "m3"]
    for i, r in enumerate(roots):
        assert [m.content for m in await store.tail(r.id, 50)] == [f"m{i}"]


async def test_a_shared_statement_that_loses_its_connection_fails_every_append_in_it_and_saves_none(
        store, monkeypatch):
    from memory.postgres import store as store_module

    roots = [await store.root_thread("Stelis", Scope.channel(1, 500 + i), 0.8) for i in range(4)]
    sent = store._all

    async def lost(sql, *params):
        if sql == store_module._STORE_TOGETHER:
            raise StoreError("the database refused the work") from ConnectionResetError("reset by peer")
        return await sent(sql, *params)

    monkeypatch.setattr(store, "_all", lost)
    results = await asyncio.gather(*(store.append(r.id, NewMessage("user", f"m{i}", 8, "ben"))
                                     for i, r in enumerate(roots)), return_exceptions=True)
    assert [m.content for m, _ in results[:1]] == ["m0"]  # alone, before the others
    assert all(isinstance(r, StoreError) for r in results[1:])
    for r in roots[1:]:
        assert await store.tail(r.id, 50) == []  # not tried again alone: the connection, not one append, failed


async def test_closing_stores_the_appends_and_reads_the_openings_on_their_way_first(postgres_cluster):
    name = await postgres_cluster.fresh_database()
    url = postgres_cluster.url_for(name)
    store = await open_store(url)
    roots = [await store.root_thread("Stelis", Scope.channel(1, 600 + i), 0.8) for i in range(5)]
    tasks = [asyncio.create_task(store.append(r.id, NewMessage("user", f"m{i}", 8, "ben")))
             for i, r in enumerate(roots)]
    await asyncio.sleep(0)  # each has asked; the first is on its way, the others wait for it together
    await store.close()
    assert [m.content for m, _ in await asyncio.gather(*tasks)] == [f"m{i}" for i in range(5)]
    again = await open_store(url)
    assert [[m.content for m in await again.tail(r.id, 50)] for r in roots] == [[f"m{i}"] for i in range(5)]
    reads = [asyncio.create_task(again.opening(r.id, None, 5)) for r in roots]
    await asyncio.sleep(0)  # and so are the openings: read before the connections close
    await again.close()
    assert [o.messages[0].content for o in await asyncio.gather(*reads)] == [f"m{i}" for i in range(5)]
    await postgres_cluster.drop_database(name)


async def test_openings_asked_at_once_share_a_statement_and_each_reads_what_it_would_have_read_alone(
        store, monkeypatch):
    """Issue 32: each reply's opening read was a statement of its own, holding one of the pool's connections while
    it waited its turn (a burst of 500 replies: its front 0.47 s, 0.35 s with them shared). Those asked while one
    is on its way go together: each its own thread, page (from the window's start or after a seq, its own length)
    and memory; a thread asked twice with different pages gets both; a thread that does not exist fails its caller
    alone."""
    roots = [await store.root_thread("Stelis", Scope.channel(1, 300 + i), 0.8) for i in range(5)]
    said: list[list[int]] = []
    for i, root in enumerate(roots):
        said.append([(await store.append(root.id, NewMessage("user", f"channel {i} line {n}", 8, "ben")))[0].seq
                     for n in range(i + 2)])
        for version in range(1, i + 1):  # channel i has i short-term versions
            await store.add_record("Stelis", "channel", 300 + i, "short_term", f"v{version} of {i}")
    await store.add_record("Stelis", "workspace", 1, "long_term", "the server's memory")
    asks = [(roots[0].id, None, 10, 0), (roots[1].id, None, 2, 3), (roots[2].id, said[2][1], 10, 2),
            (roots[3].id, None, 10, 5), (roots[3].id, said[3][1], 1, 0), (roots[4].id, None, 3, 1)]
    alone = [await store.opening(*ask) for ask in asks]
    carried = _together(store, monkeypatch, "_OPENING")
    together = await asyncio.gather(*(store.opening(*ask) for ask in [*asks, (10**9, None, 10, 0)]),
                                    return_exceptions=True)
    assert carried == [len(asks)]  # the first went alone, the others (the missing thread too) waited, together
    assert together[:-1] == alone
    assert isinstance(together[-1], KeyError)
    assert [[m.content for m in o.messages] for o in alone[2:5:2]] == [["channel 2 line 3", "channel 2 line 2"],
                                                                       ["channel 3 line 4"]]  # newest first
    assert [len(o.messages) for o in alone] == [2, 2, 2, 5, 1, 3]
    assert [[r.content for r in part] for part in alone[3].memory] == \
        [[], ["v1 of 3", "v2 of 3", "v3 of 3"], ["the server's memory"]]
    assert alone[0].memory == [] and alone[4].memory == []


async def test_a_shared_opening_statement_that_loses_its_connection_fails_its_callers_and_the_next_ones_read(
        store, monkeypatch):
    """Every reply whose opening it carried hears of the failure (a StoreError, which a reply shows as a notice);
    nothing is left waiting, and the openings asked after it are read as before."""
    from memory.postgres import store as store_module

    roots = [await store.root_thread("Stelis", Scope.channel(1, 600 + i), 0.8) for i in range(4)]
    for i, root in enumerate(roots):
        await store.append(root.id, NewMessage("user", f"said in {i}", 8, "ben"))
    sent = store._all
    lose = True

    async def lost(sql, *params):
        if sql == store_module._OPENING and lose:
            raise StoreError("the database refused the work") from ConnectionResetError("reset by peer")
        return await sent(sql, *params)

    monkeypatch.setattr(store, "_all", lost)
    first = await asyncio.wait_for(asyncio.gather(*(store.opening(r.id, None, 10) for r in roots),
                                                  return_exceptions=True), 5)
    assert first[0].messages[0].content == "said in 0"  # alone, before the others
    assert all(isinstance(r, StoreError) for r in first[1:])
    lose = False
    again = await asyncio.wait_for(asyncio.gather(*(store.opening(r.id, None, 10) for r in roots)), 5)
    assert [o.messages[0].content for o in again] == [f"said in {i}" for i in range(4)]


async def test_openings_inside_a_held_block_use_its_connection_so_tasks_holding_every_connection_never_wait(
        postgres_cluster):
    """A task holding a connection must not wait on a statement that needs another: with every connection held by
    tasks that each open a thread, shared openings would wait for a connection none gives back."""
    opened = await PostgresStore.open(postgres_cluster.url_for(await postgres_cluster.fresh_database()), pool_size=4)
    try:
        thread = await opened.root_thread("Stelis", Scope.channel(1, 2), 0.8)
        await opened.append(thread.id, NewMessage("user", "the kestrel nests on the tower"))
        size = opened._pool.size()
        holding, read = asyncio.Barrier(size), asyncio.Barrier(size)

        async def reads() -> Opening:
            async with opened.held():
                await holding.wait()  # every connection is held now
                page = await opened.opening(thread.id, None, 10)
                await read.wait()  # and stays held until every task has read
                return page

        pages = await asyncio.wait_for(asyncio.gather(*(reads() for _ in range(size))), 10)
        assert [p.messages[0].content for p in pages] == ["the kestrel nests on the tower"] * size
    finally:
        await opened.close()


async def test_a_shared_statement_carries_at_most_its_share_and_the_next_ones_follow_in_the_order_asked():
    """Openings: asyncpg reads a statement's rows in one turn of the event loop (500 openings at once: a 60 ms stall
    of every conversation); at most `most` go together, the others in the statements after, in order."""
    from memory.grouped import Grouped
    from memory.postgres.asked import Asked

    sent: list[list[int]] = []
    first_sent = asyncio.Event()

    async def alone(item):
        sent.append([item.thread_id])
        await first_sent.wait()
        return item.thread_id

    async def together(items):
        sent.append([item.thread_id for item in items])
        for item in items:
            item.answer.set_result(item.thread_id)

    grouped = Grouped(alone, together, most=2)
    asked = [asyncio.create_task(grouped.add(Asked(n, None, 10, 0))) for n in range(6)]
    await asyncio.sleep(0)
    first_sent.set()
    assert await asyncio.gather(*asked) == list(range(6))
    assert sent == [[0], [1, 2], [3, 4], [5]]


async def test_appends_waiting_for_a_statement_that_is_cancelled_hear_of_it_and_the_next_append_goes_on():
    """A shared statement cancelled while it waits its turn (the loop closing): its appends are told at once rather
    than waiting forever, and a later append does not join it."""
    from memory.grouped import Grouped
    from memory.postgres.asked import Pending

    release = asyncio.Event()

    async def alone(item):
        await release.wait()
        return "alone", item.thread_id

    async def together(items):
        for item in items:
            item.answer.set_result(("together", item.thread_id))

    appends = Grouped(alone, together, apart=lambda item: item.thread_id)
    first = asyncio.create_task(appends.add(Pending(1, NewMessage("user", "a"), 0.0, None)))
    await asyncio.sleep(0)  # on its way alone
    waiting = asyncio.create_task(appends.add(Pending(2, NewMessage("user", "b"), 0.0, None)))
    await asyncio.sleep(0)  # waits for it, in the next statement
    (flush,) = appends._flushes
    flush.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(waiting, 1)
    release.set()
    assert await first == ("alone", 1)
    assert await asyncio.wait_for(appends.add(Pending(3, NewMessage("user", "c"), 0.0, None)), 1) == ("alone", 3)


async def test_replies_at_once_store_each_threads_noted_window_together_at_its_revision(store, monkeypatch):
    """The replies of a burst carry their threads' window bookkeeping (which memory the window shows, where the cache
    holds it); stored together, each thread gets its own, and one whose messages changed since gets none."""
    roots = [await store.root_thread("Stelis", Scope.channel(1, 700 + i), 0.8) for i in range(5)]
    asked = [(await store.append(r.id, NewMessage("user", f"question {i}", 8, "ben", external_id=800 + i)))[0]
             for i, r in enumerate(roots)]
    for i, (root, question) in enumerate(zip(roots, asked, strict=True)):
        state = {"memory_as_of": 10 + i} if i == 3 else {"memory_as_of": 10 + i, "window_cached_after": question.seq}
        store.note_window(await store.thread(root.id), **state)
    await store.edit_message(802, "question 2, edited")  # its thread's messages changed: what was noted is void
    carried = _together(store, monkeypatch)
    replies = await asyncio.gather(*(store.append(r.id, NewMessage("assistant", f"answer {i}"))
                                     for i, r in enumerate(roots)))
    assert carried == [4]
    assert [m.content for m, _ in replies] == [f"answer {i}" for i in range(5)]
    stored = [await store.thread(r.id) for r in roots]
    assert [(t.memory_as_of, t.window_cached_after) for t in stored] == [
        (10, asked[0].seq), (11, asked[1].seq), (None, None), (13, None), (14, asked[4].seq)]
