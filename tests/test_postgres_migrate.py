"""`python -m bot migrate`: a populated SQLite database copied to PostgreSQL and back, whole and once."""

import subprocess
import sys
from pathlib import Path

from bot.migrate import migrate
from bot.providers.offline import OfflineLLM
from memory import recall, threads
from memory.backends import open_store
from memory.copying import copy_store
from memory.records import ModelUsage, NewMessage, PlaybookStep, Scope
from memory.settings import StelisSettings, Triggers
from memory.store import COPIED_TABLES, Store
from memory.threads import Run
from tests.context_helpers import answer, assembler, body, say
from tests.recall_helpers import matched_messages

REPO = Path(__file__).resolve().parent.parent


async def populate(store: Store) -> int:
    """Something in every table a copy carries."""
    root = await store.root_thread("Stelis", Scope.channel(1, 2), 0.8)
    for i in range(60):
        await say(store, root.id, f"message {i} about ISSUE-{i} and 東京タワー " + "words " * 10)
        await answer(store, root.id, f"answer {i}")
    await store.append_counted(root, NewMessage("user", "counted", external_id=123_456_789_012_345_678),
                               Triggers(idle_seconds=60, threshold=50))
    done = Run(root.id)
    await threads.start(store, done, "finished task", StelisSettings())
    await threads.end(store, OfflineLLM(), done, StelisSettings())
    await store.add_record("Stelis", "channel", 2, "short_term", "short-term v1", 1, 10, {"first_at": 1.5})
    await store.add_record("Stelis", "channel", 2, "long_term", "Mahe builds calculator_v2.")
    await store.pin("Stelis", "channel", 2, "the launch is on Friday")
    await store.set_optout("Stelis", 77, True)
    await store.set_setting("guild", 1, "persona.card", "You are {name}.")
    branch = await store.create_branch("b-1", "Stelis", "task", "a task", root.scope_key, 1, 2, None)
    await store.update_branch(branch.id, status="suspended", brief_state="half way")
    task = await store.create_task("Stelis", root.scope_key, 1, "Plan", "a goal", ["one", "two"])
    await store.update_task(task.id, branch_id=branch.id)
    run = await store.start_playbook_run("research", "Stelis", root.scope_key, "run-1", {"topic": "birds"})
    await store.log_playbook_step(run, PlaybookStep("look", "tool", 12.5, "found 3"))
    await store.end_playbook_run(run, "completed", {"answer": 42}, None)
    await store.log_autonomy("Stelis", "guild:1", "pulse", "worked", calls=3, tokens=900)
    await store.add_usage("Stelis", [(1, ModelUsage("2026-11-24", "claude-sonnet-5-5", 1, 1_200, 80, 3_400, 0))])
    await store.set_window(root.id, window_start_seq=5, window_summary="before: hello")
    await store.append(root.id, NewMessage("user", "erase me", author_id=66))
    await store.purge(author_id=66, thread_ids=[root.id])  # its rewrite still pending: the copy carries that
    await say(store, root.id, "said after the erasure, so recall's counts may be saved again")
    await store.index_messages()
    counted = recall.Frequencies()
    await counted.warm(store)
    assert await counted.save(store)
    return root.id


async def everything(store: Store) -> dict[str, list[dict]]:
    rows: dict[str, list[dict]] = {}
    for table in COPIED_TABLES:
        rows[table] = await store.table_rows(table, None, 100_000)
    return rows


async def test_a_populated_sqlite_database_round_trips_through_postgresql(postgres_cluster, tmp_path):
    source_path = tmp_path / "stelis.sqlite3"
    source = await open_store(source_path)
    root_id = await populate(source)
    expected_request = body(await assembler(source).assemble(root_id))  # (an assembly may save window state)
    expected_rows = await everything(source)
    words = [recall.word_key(w) for w in ("issue", "message", "words", "answer")]
    counted = await source.saved_counts(words)
    await source.close()
    assert all(expected_rows.values())  # every table has rows to carry

    url = postgres_cluster.url_for(name := await postgres_cluster.fresh_database())
    assert await migrate(f"sqlite:///{source_path}", url) == 0
    target = await open_store(url)
    assert await everything(target) == expected_rows  # ids, versions, times, JSON text: all as they were
    assert counted and await target.saved_counts(words) == counted  # its first start need not count them again
    assert body(await assembler(target).assemble(root_id)) == expected_request  # the same next request
    assert [m.seq for m in await matched_messages(target, ["東京タワー"], "Stelis", ("guild:1:channel:2",), 3)]
    newer, _ = await target.append(root_id, NewMessage("user", "after the move"))
    assert newer.seq > max(r["seq"] for r in expected_rows["messages"])  # numbering goes on above the copy
    await target.close()

    source, again = await open_store(source_path), await open_store(url)
    copies = await copy_store(source, again)  # a second run: nothing new, all equal
    assert all(c.added == 0 for c in copies)
    # only the message written after the move tells the two apart
    assert [c.table for c in copies if not c.matches] == ["messages"]
    await source.close()
    await again.close()

    back = tmp_path / "back.sqlite3"
    assert await migrate(url, str(back)) == 0  # and back again, with recall's index rebuilt
    returned = await open_store(back)
    assert (await everything(returned))["memory_records"] == expected_rows["memory_records"]
    assert await matched_messages(returned, ["東京タワー"], "Stelis", ("guild:1:channel:2",), 3)
    await returned.close()
    await postgres_cluster.drop_database(name)


def test_the_migrate_command_refuses_a_file_that_is_not_there(tmp_path, postgres_cluster):
    missing = subprocess.run([sys.executable, "-m", "bot", "migrate", "--from", str(tmp_path / "none.sqlite3"),
                              "--to", postgres_cluster.url], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "no database file" in missing.stderr
    assert not (tmp_path / "none.sqlite3").exists()  # nothing created on the way


async def test_the_migrate_command_refuses_one_database_as_both_ends(tmp_path):
    store = await open_store(tmp_path / "a.sqlite3")
    await store.close()
    same = await migrate(str(tmp_path / "a.sqlite3"), f"sqlite:///{tmp_path / 'a.sqlite3'}")
    assert same == 2


async def test_a_target_that_held_other_rows_is_reported(tmp_path):
    a, b = tmp_path / "a.sqlite3", tmp_path / "b.sqlite3"
    for path, text in ((a, "from a"), (b, "already in b")):
        store = await open_store(path)
        root = await store.root_thread("Stelis", Scope.channel(1, 2 if path == a else 3), 0.8)
        await store.append(root.id, NewMessage("user", text))
        await store.close()
    assert await migrate(str(a), str(b)) == 1  # b's thread 1 is another channel: counts cannot match
