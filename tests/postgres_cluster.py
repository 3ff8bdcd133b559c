"""A throwaway PostgreSQL cluster for the tests: initdb in a temporary folder, 127.0.0.1 only, fsync off.

The server refuses to run as root, so as root it runs as the `postgres` user. `find_binaries()` says whether
PostgreSQL is installed at all (`.ci/run` installs it; `make test` on a machine without it says so).
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

VERSIONS = ("17", "16", "15")


def find_binaries() -> Path | None:
    for version in VERSIONS:
        folder = Path(f"/usr/lib/postgresql/{version}/bin")
        if (folder / "initdb").exists():
            return folder
    found = shutil.which("initdb")
    return Path(found).parent if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Cluster:
    def __init__(self, binaries: Path, durable: bool = False):
        self.binaries = binaries
        self.folder = Path(tempfile.mkdtemp(prefix="stelis-pg-"))
        self.data = self.folder / "data"
        self.port = _free_port()
        self._as = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []

        self._template_ready = False
        # Tests: nothing is ever flushed. Benchmarks: flushed as SQLite's WAL with synchronous=NORMAL is (at
        # checkpoints, not at each commit), so the two backends are timed on the same terms.
        self.flush = "-c synchronous_commit=off" if durable else \
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"

    @property
    def url(self) -> str:
        return self.url_for("postgres")

    def url_for(self, database: str) -> str:
        return f"postgresql://stelis@127.0.0.1:{self.port}/{database}"

    async def fresh_database(self) -> str:
        """A new database with the schema in place, copied from a template migrated once (~50 ms)."""
        from memory.postgres.store import PostgresStore

        if not self._template_ready:
            await self._admin("CREATE DATABASE stelis_template")
            await (await PostgresStore.open(self.url_for("stelis_template"))).close()
            self._template_ready = True
        name = f"t_{secrets.token_hex(6)}"
        await self._admin(f"CREATE DATABASE {name} TEMPLATE stelis_template")
        return name

    async def drop_database(self, name: str) -> None:
        await self._admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    async def _admin(self, statement: str) -> None:
        import asyncpg

        con = await asyncpg.connect(self.url)
        try:
            await con.execute(statement)
        finally:
            await con.close()

    def start(self) -> Cluster:
        if self._as:
            shutil.chown(self.folder, "postgres")
            self.folder.chmod(0o700)
        # C.UTF-8, not C: pg_trgm splits Japanese into trigrams only when the character type knows it.
        self._run("initdb", "-D", str(self.data), "-U", "stelis", "--auth=trust", "--encoding=UTF8",
                  "--locale=C.UTF-8")
        options = f"-p {self.port} -h 127.0.0.1 -k {self.folder} {self.flush}"
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.folder / "log"), "-w", "start")
        return self

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)

    def _run(self, program: str, *args: str) -> None:
        subprocess.run([*self._as, str(self.binaries / program), *args], check=True, capture_output=True,
                       timeout=60)
