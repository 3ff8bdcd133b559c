"""Four memory-worker processes share one PostgreSQL: 1,000 due conversations, one worker killed mid-way."""

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import asyncpg
import yaml

from memory.backends import open_store
from memory.records import NewMessage, Scope
from memory.settings import Triggers

REPO = Path(__file__).resolve().parent.parent
CHANNELS = 1_000
WORKERS = 4
LEASE = 5


async def seed(url: str) -> None:
    store = await open_store(url)
    due_now = Triggers(idle_seconds=0, threshold=1)
    for i in range(CHANNELS):
        root = await store.root_thread("Stelis", Scope.channel(1, 10_000 + i), 0.8)
        await store.append_counted(root, NewMessage("user", f"channel {i}: remember the number {i * 7}",
                                                    author_name="mahe"), due_now)
    await store.close()


def worker(config: Path, log: Path, until_idle: bool = True) -> subprocess.Popen:
    """A worker process; its log goes to a file (a pipe nobody reads would fill and stop it)."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.startswith("STELIS_")}
    flags = ["--until-idle"] if until_idle else []
    with log.open("wb") as out:
        return subprocess.Popen([sys.executable, "-m", "bot", "--config", str(config), "memory-worker", *flags],
                                cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)


async def count(con: asyncpg.Connection, sql: str) -> int:
    return int(await con.fetchval(sql))


async def test_workers_share_the_memory_work_and_a_killed_ones_leases_are_taken_over(postgres_cluster, tmp_path):
    name = await postgres_cluster.fresh_database()
    url = postgres_cluster.url_for(name)
    await seed(url)
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({
        "data_dir": str(tmp_path / "data"), "database": {"url": url, "pool_size": 5},
        "memory": {"lease_seconds": LEASE, "concurrency": 4}, "snapshots": {"interval_seconds": 0},
        "context": {"recall": False}}))
    con = await asyncpg.connect(url)
    started = time.monotonic()
    logs = [tmp_path / f"worker-{i}.log" for i in range(WORKERS)]
    workers = [worker(config, log) for log in logs]
    try:
        while await count(con, "SELECT COUNT(*) FROM memory_records WHERE type = 'short_term'") < CHANNELS // 5:
            assert time.monotonic() - started < 60, "the workers never got going"
            assert all(w.poll() is None for w in workers), logs[0].read_text()[-2000:]
            await asyncio.sleep(0.05)
        held = await count(con, "SELECT COUNT(*) FROM memory_channels WHERE lease_owner LIKE"
                                f" '%:{workers[0].pid}:%'")
        workers[0].send_signal(signal.SIGKILL)  # mid-way, holding leases: no chance to release them
        codes = [w.wait(timeout=120) for w in workers[1:]]
        outputs = [log.read_text() for log in logs[1:]]
        assert codes == [0] * (WORKERS - 1), outputs
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
    short = await con.fetch("SELECT scope_id, COUNT(*) AS n, MAX(version) AS v FROM memory_records"
                            " WHERE type = 'short_term' GROUP BY scope_id")
    long = await con.fetch("SELECT scope_id, COUNT(*) AS n, MAX(version) AS v FROM memory_records"
                           " WHERE type = 'long_term' AND scope = 'channel' GROUP BY scope_id")
    assert len(short) == CHANNELS and {(r["n"], r["v"]) for r in short} == {(1, 1)}  # each once, none missing
    assert len(long) == CHANNELS and {(r["n"], r["v"]) for r in long} == {(1, 1)}
    assert await count(con, "SELECT COUNT(*) FROM memory_channels WHERE due_at IS NOT NULL"
                            " OR pending_count > 0 OR long_term_pending > 0") == 0
    written = [int(re.search(r"nothing due: (\d+)", out).group(1)) for out in outputs]
    assert held > 0  # the killed worker held work when it died ...
    assert all(written) and sum(written) < CHANNELS  # ... had written some: the survivors wrote the rest, once
    await con.close()
    await postgres_cluster.drop_database(name)


def test_a_memory_worker_serves_its_metrics_and_stops_cleanly_on_sigterm(postgres_cluster, tmp_path):
    import urllib.request

    from tests.postgres_cluster import _free_port

    name = asyncio.run(postgres_cluster.fresh_database())
    port = _free_port()
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({
        "data_dir": str(tmp_path / "data"), "database": {"url": postgres_cluster.url_for(name), "pool_size": 3},
        "metrics": {"port": port}, "snapshots": {"interval_seconds": 0}}))
    log = tmp_path / "worker.log"
    process = worker(config, log, until_idle=False)
    try:
        deadline = time.monotonic() + 60
        while "running; SIGTERM stops it" not in log.read_text():
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.05)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            body = response.read().decode()
        assert 'stelis_database_connections{state="size"} 3.0' in body
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
    asyncio.run(postgres_cluster.drop_database(name))
