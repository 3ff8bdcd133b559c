import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.engine import Engine
from bot.providers.offline import OfflineLLM
from memory import snapshots, threads
from memory.backends import open_store
from memory.records import Scope
from memory.settings import StelisSettings
from memory.threads import Run
from tests.context_helpers import answer, assembler, body, say, stable_prefix, tool_burst

REPO = Path(__file__).resolve().parent.parent


async def busy_history(store):
    r = await store.root_thread("Stelis", Scope.channel(1, 2), 0.8)
    await store.add_record("Stelis", "channel", 2, "long_term", "Mahe builds calculator_v2.")
    for v in range(3):
        await store.add_record("Stelis", "channel", 2, "short_term", f"short-term version {v + 1}")
    for i in range(70):
        await say(store, r.id, f"message {i} about ISSUE-{i} " + "words " * 12)
        await answer(store, r.id, f"answer {i}")
    done = Run(r.id)
    await threads.start(store, done, "finished task", StelisSettings())
    await threads.end(store, OfflineLLM(), done, StelisSettings())
    await tool_burst(store, r.id, 2, 80, "snap")
    await say(store, r.id, "what now?")
    return r


async def test_export_wipe_import_gives_the_same_next_request(tmp_path):
    first = await open_store(tmp_path / "a.sqlite3")
    r = await busy_history(first)
    asm = assembler(first)
    exported = await snapshots.export(first, asm, r.id)
    expected = body(await asm.assemble(r.id))
    await first.close()
    assert exported["version"] == "1.0" and exported["summary"]  # the window was cut and summarised
    assert {"timestamp", "tokenCount", "messages", "summary"} <= exported.keys()

    path = tmp_path / "snap.json"
    snapshots.write(path, exported)
    (tmp_path / "a.sqlite3").unlink()  # wipe
    fresh = await open_store(tmp_path / "b.sqlite3")
    restored = await snapshots.restore(fresh, snapshots.read(path))
    assert restored.id == r.id and restored.window_start_seq == exported["thread"]["window_start_seq"]
    assert body(await assembler(fresh).assemble(r.id)) == expected
    await fresh.close()


async def test_a_child_threads_snapshot_restores_its_parents_protected_region(tmp_path):
    first = await open_store(tmp_path / "a.sqlite3")
    r = await first.root_thread("Stelis", Scope.channel(1, 2), 0.8)
    for i in range(10):
        await say(first, r.id, f"parent {i}")
        await answer(first, r.id, f"parent answer {i}")
    child = await threads.start(first, Run(r.id), "work", StelisSettings())
    await say(first, child.id, "child work")
    asm = assembler(first)
    exported = await snapshots.export(first, asm, child.id)
    expected = stable_prefix(await asm.assemble(child.id))
    await first.close()
    fresh = await open_store(tmp_path / "b.sqlite3")
    await snapshots.restore(fresh, json.loads(json.dumps(exported)))
    assert stable_prefix(await assembler(fresh).assemble(child.id)) == expected
    await fresh.close()


async def test_import_refuses_a_database_that_already_has_the_thread(tmp_path, store):
    r = await store.root_thread("Stelis", Scope.channel(1, 2), 0.8)
    await say(store, r.id, "hi")
    exported = await snapshots.export(store, assembler(store), r.id)
    with pytest.raises(snapshots.SnapshotError, match="already exists; import snapshots into an empty database"):
        await snapshots.restore(store, exported)
    with pytest.raises(snapshots.SnapshotError, match="version '9' is not supported"):
        await snapshots.restore(store, {**exported, "version": "9"})
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(snapshots.SnapshotError, match="is not a JSON snapshot"):
        snapshots.read(bad)


async def test_engine_writes_snapshots_of_changed_threads_at_shutdown(make_config):
    config = make_config(snapshots={"interval_seconds": 0})
    engine = await Engine.open(config, OfflineLLM())
    root = await engine.stelis.root(Scope.console())
    await engine.conversations.hear(Scope.console(), "remember me", author_name="m")
    await engine.conversations.reply(root.id)
    await engine.close()
    written = json.loads((config.data_dir / "snapshots" / f"thread-{root.id}.json").read_text())
    assert written["messages"][0]["content"] == "remember me"


def test_snapshot_cli_export_and_import(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STELIS_", "ANTHROPIC_", "DISCORD_"))}

    def bot(*args, data, stdin=""):
        return subprocess.run([sys.executable, "-m", "bot", *args], input=stdin, capture_output=True, text=True,
                              cwd=REPO, env={**env, "STELIS_DATA_DIR": str(data)}, timeout=60)

    chat = bot("console", data=tmp_path / "one", stdin="hello from before, about calculator_v2\n")
    assert chat.returncode == 0, chat.stderr
    out = tmp_path / "thread.json"
    export = bot("snapshot", "export", "1", "--out", str(out), data=tmp_path / "one")
    assert export.returncode == 0, export.stderr
    assert "wrote" in export.stdout and json.loads(out.read_text())["version"] == "1.0"
    restore = bot("snapshot", "import", str(out), data=tmp_path / "two")
    assert restore.returncode == 0, restore.stderr
    again = bot("snapshot", "import", str(out), data=tmp_path / "two")
    assert again.returncode == 2 and "already exists" in again.stderr
    missing = bot("snapshot", "export", "99", data=tmp_path / "two")
    assert missing.returncode == 2 and "no thread 99" in missing.stderr
    chat = bot("console", data=tmp_path / "two", stdin="what did I say?\n/recall calculator_v2\n")
    assert "(1 earlier message(s) from people here and 1 of mine" in chat.stdout
    assert "(this conversation): hello from before, about calculator_v2" in chat.stdout
