"""Shared fixtures: real temporary SQLite stores, the fake Anthropic server, and a network guard."""

from __future__ import annotations

import ipaddress
import os
import shutil
import socket
import sys
import tempfile
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.config import Config, validate
from memory.backends import open_store
from memory.store import Store
from tests.fake_anthropic import FakeAnthropic

# The tokenizer's table is cached in the user's cache folder (memory/tokens.py): the suite keeps its own.
CACHE_HOME = os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="stelis-tests-cache-")

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex
_real_getaddrinfo = socket.getaddrinfo


def _is_local(address: object) -> bool:
    if isinstance(address, str | bytes):  # AF_UNIX path
        return True
    host = address[0] if isinstance(address, tuple) else None
    try:
        return host is not None and ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


class NetworkBlocked(RuntimeError):
    pass


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any connection to a non-loopback address fails the test that made it."""

    def guarded(real):
        def connect(self: socket.socket, address: object):
            if not _is_local(address):
                raise NetworkBlocked(f"test tried to reach the network: {address!r}")
            return real(self, address)

        return connect

    monkeypatch.setattr(socket.socket, "connect", guarded(_real_connect))
    monkeypatch.setattr(socket.socket, "connect_ex", guarded(_real_connect_ex))

    def lookup(host, *args, **kwargs):
        if host not in (None, "localhost") and not _is_local((host, 0)):
            raise NetworkBlocked(f"test tried to resolve a network name: {host!r}")
        return _real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", lookup)


@pytest.fixture(params=["sqlite", "postgresql"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Path | str]:
    """Where a store lives, once per backend: a SQLite file, or a fresh database on the test PostgreSQL."""
    if request.param == "sqlite":
        yield tmp_path / "test.sqlite3"
        return
    cluster = request.getfixturevalue("postgres_cluster")
    name = await cluster.fresh_database()
    yield cluster.url_for(name)
    await cluster.drop_database(name)


@pytest.fixture
def database(backend: Path | str) -> dict:
    """The `database` config section of each backend, for tests of the whole engine on both."""
    return {"url": backend} if isinstance(backend, str) else {}


@pytest.fixture
async def store(backend: Path | str) -> AsyncIterator[Store]:
    """A store of each backend: the tests that take it are the contract every backend keeps."""
    s = await open_store(backend)
    yield s
    await s.close()


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[Store]:
    s = await open_store(tmp_path / "test.sqlite3")
    yield s
    await s.close()


@pytest.fixture
async def fake_anthropic() -> AsyncIterator[FakeAnthropic]:
    server = await FakeAnthropic().start()
    yield server
    await server.stop()


@pytest.fixture
def make_config(tmp_path: Path):
    """A validated config with its data under tmp_path; keyword overrides by section."""

    def make(**sections: dict) -> Config:
        raw: dict = {"data_dir": str(tmp_path / "data"), **sections}
        return validate(raw)

    return make


BACKENDS_RUN: set[str] = set()  # the summary line says which storage backends the tests ran against


@pytest.fixture(scope="session")
def postgres_cluster():
    """A throwaway PostgreSQL server for the session; the tests that need it are skipped, visibly, without one."""
    from tests.postgres_cluster import Cluster, find_binaries

    binaries = find_binaries()
    if binaries is None:
        pytest.skip("PostgreSQL is not installed (.ci/run installs it): the PostgreSQL backend tests did not run")
    cluster = Cluster(binaries).start()
    BACKENDS_RUN.add("postgresql")
    yield cluster
    cluster.stop()


def pytest_terminal_summary(terminalreporter) -> None:
    ran = ", ".join(["sqlite", *sorted(BACKENDS_RUN)])
    terminalreporter.write_line(f"storage backends tested: {ran}")
    reports = terminalreporter.getreports("passed") + terminalreporter.getreports("skipped")
    browser = [r for r in reports if "test_dashboard_browser" in r.nodeid and (r.when == "call" or r.skipped)]
    if browser:
        terminalreporter.write_line("dashboard browser tests: " + (
            "skipped, Chromium is not installed (apt-get install chromium chromium-driver)"
            if any(r.skipped for r in browser) else "ran in headless Chromium"))


def pytest_unconfigure(config: pytest.Config) -> None:
    """A thread left running (a store never closed) would hold the exit until CI's time limit: fail at once."""
    shutil.rmtree(CACHE_HOME, ignore_errors=True)
    left = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
    for thread in left:
        thread.join(timeout=5)
    if still := [t.name for t in left if t.is_alive()]:
        sys.stderr.write(f"the tests left threads running (a store never closed?): {', '.join(still)}\n")
        sys.stderr.flush()
        os._exit(1)
