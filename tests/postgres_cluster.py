"""A throwaway PostgreSQL cluster for the tests: initdb in a temporary folder, 127.0.0.1 only, fsync off.

The server refuses to run as root, so as root it runs as the `postgres` user. `find_binaries()` says whether
PostgreSQL is installed at all (`.ci/run` installs it; `make test` on a machine without it says so).
"""

from __future__ import annotations

import os
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
    def __init__(self, binaries: Path):
        self.binaries = binaries
        self.folder = Path(tempfile.mkdtemp(prefix="stelis-pg-"))
        self.data = self.folder / "data"
        self.port = _free_port()
        self._as = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []

    @property
    def url(self) -> str:
        return f"postgresql://stelis@127.0.0.1:{self.port}/postgres"

    def start(self) -> Cluster:
        if self._as:
            shutil.chown(self.folder, "postgres")
            self.folder.chmod(0o700)
        # C.UTF-8, not C: pg_trgm splits Japanese into trigrams only when the character type knows it.
        self._run("initdb", "-D", str(self.data), "-U", "stelis", "--auth=trust", "--encoding=UTF8",
                  "--locale=C.UTF-8")
        options = (f"-p {self.port} -h 127.0.0.1 -k {self.folder} -c fsync=off -c synchronous_commit=off "
                   "-c full_page_writes=off")
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
