"""Group commit: the short writes waiting for the database's thread, run in one transaction when it gets to them;
and the reads asked at once, run in one hop (memory/grouped.py).

Each write (a message stored, a window noted) was a transaction of its own, and a commit costs several times the
insert: with hundreds of channels answering at once, the database's thread spent most of a burst committing.
Writes that arrive while one batch waits its turn join it; each runs inside a savepoint of its own, so one that
fails is undone alone and only its caller hears of it. A failed commit fails them all: none of them is saved.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from typing import Any

from memory.grouped import answer_each

Work = Callable[[sqlite3.Connection], Any]


class Batch:
    """Writes queued for one transaction, each with the future its caller awaits; the database's thread takes them
    all at once, and later ones start the next batch."""

    def __init__(self) -> None:
        self._works: list[tuple[Work, asyncio.Future[Any]]] = []
        self._taken = False
        self._lock = threading.Lock()  # the event loop adds while the database's thread may be taking

    def add(self, work: Work) -> asyncio.Future[Any] | None:
        """What the work's result will be, or None once the batch is on its way (start another)."""
        future = asyncio.get_running_loop().create_future()
        with self._lock:
            if self._taken:
                return None
            self._works.append((work, future))
        return future

    def take(self) -> list[Work]:
        with self._lock:
            self._taken = True
            return [work for work, _ in self._works]

    def settle(self, results: list[tuple[bool, Any]]) -> None:
        """In the event loop: each caller gets its work's result or error (one that stopped waiting, nothing)."""
        answer_each([future for _, future in self._works], results)

    def fail(self, exc: BaseException) -> None:
        """In the event loop: the batch as a whole failed (its commit, or the connection): none of it was saved."""
        with self._lock:
            self._taken = True
        for _, future in self._works:
            if not future.done():
                future.cancel() if isinstance(exc, asyncio.CancelledError) else future.set_exception(exc)


def run(conn: sqlite3.Connection, batch: Batch) -> list[tuple[bool, Any]]:
    """In the database's thread: every work of the batch in one transaction, each (ok, its result or its error)."""
    works = batch.take()
    results: list[tuple[bool, Any]] = []
    conn.execute("BEGIN IMMEDIATE")
    try:
        for work in works:
            conn.execute("SAVEPOINT work")
            try:
                results.append((True, work(conn)))
            except Exception as exc:  # this work's alone: what it wrote is undone, the others' stays
                if not conn.in_transaction:  # the database ended the whole transaction (an I/O error): all failed
                    raise
                conn.execute("ROLLBACK TO work")
                results.append((False, exc))
            conn.execute("RELEASE work")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return results


def each_read(conn: sqlite3.Connection, works: list[Work]) -> list[tuple[bool, Any]]:
    """In the database's thread: reads asked at once, each (ok, its result or its error): one that fails, alone."""
    results: list[tuple[bool, Any]] = []
    for work in works:
        try:
            results.append((True, work(conn)))
        except Exception as exc:
            results.append((False, exc))
    return results
