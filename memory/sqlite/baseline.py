"""Bare SQLite loops the benchmarks compare the store against, and bulk seeding for them.

They live in the backend because they are SQL; nothing in the bot uses them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import aiosqlite

from memory.sqlite.store import SqliteStore
from memory.store import Store
from memory.tokens import count_tokens

Write = Callable[[int, str], Awaitable[None]]
Read = Callable[[int], Awaitable[None]]


def _sqlite(store: Store) -> SqliteStore:
    if not isinstance(store, SqliteStore):
        raise TypeError(f"the SQLite baselines need the SQLite store, not {type(store).__name__}")
    return store


async def bare_ingest(path: Path, texts: list[str], channels: int) -> float:
    """Messages per second of a bare tokenize-and-insert loop, one transaction each (WAL, as the store)."""
    async with aiosqlite.connect(path, isolation_level=None) as db:
        await db.execute("PRAGMA journal_mode = WAL")
        await db.execute("PRAGMA synchronous = NORMAL")
        await db.execute("CREATE TABLE m (seq INTEGER PRIMARY KEY, channel INTEGER, content TEXT, tokens INTEGER,"
                         " external_id INTEGER UNIQUE, created_at REAL)")
        started = time.perf_counter()
        for i, text in enumerate(texts):
            await db.execute("BEGIN IMMEDIATE")
            await db.execute("INSERT INTO m (channel, content, tokens, external_id, created_at) VALUES (?, ?, ?, ?, ?)",
                             (i % channels, text, count_tokens(text), 10_000 + i, time.time()))
            await db.execute("COMMIT")
        return len(texts) / (time.perf_counter() - started)


async def bare_window_select(store: Store, thread_id: int, start_seq: int) -> float:
    """Milliseconds to read a window's rows from `start_seq` on, and nothing else."""
    started = time.perf_counter()
    await _sqlite(store)._rows("SELECT * FROM messages WHERE thread_id = ? AND seq >= ? AND deleted_at IS NULL"
                              " ORDER BY seq", (thread_id, start_seq))
    return (time.perf_counter() - started) * 1000


async def seed_channels(store: Store, channels: list[tuple[int, float, int, int, float]], now: float) -> None:
    """Root threads of one server with their memory bookkeeping: (channel id, last message at, pending,
    covered seq, due at) each, in one transaction."""
    async with _sqlite(store)._transaction() as db:
        await db.executemany(
            "INSERT INTO threads (id, persona, kind, depth, window_ratio, scope_key, guild_id, channel_id, created_at)"
            " VALUES (?, 'Stelis', 'root', 0, 0.8, ?, 1, ?, ?)",
            [(c[0], f"guild:1:channel:{c[0]}", c[0], now) for c in channels],
        )
        await db.executemany(
            "INSERT INTO memory_channels (thread_id, persona, guild_id, channel_id, last_message_at, pending_count,"
            " covered_seq, due_at) VALUES (?, 'Stelis', 1, ?, ?, ?, ?, ?)",
            [(c[0], c[0], *c[1:]) for c in channels],
        )


@asynccontextmanager
async def burst_table(path: Path) -> AsyncIterator[tuple[Write, Read]]:
    """A plain table for bench concurrency's bare loop: a message written (one writer at a time, on one connection,
    as the store), a channel's last rows read."""
    async with aiosqlite.connect(path, isolation_level=None) as db:
        await db.execute("PRAGMA journal_mode = WAL")
        await db.execute("PRAGMA synchronous = NORMAL")
        await db.execute("CREATE TABLE m (seq INTEGER PRIMARY KEY, channel INTEGER, content TEXT, tokens INTEGER,"
                         " created_at REAL)")
        await db.execute("CREATE INDEX m_channel ON m (channel, seq)")
        writing = asyncio.Lock()

        async def write(channel: int, text: str) -> None:
            async with writing:
                await db.execute("BEGIN IMMEDIATE")
                await db.execute("INSERT INTO m (channel, content, tokens, created_at) VALUES (?, ?, ?, ?)",
                                 (channel, text, count_tokens(text), time.time()))
                await db.execute("COMMIT")

        async def read(channel: int) -> None:
            await db.execute_fetchall("SELECT * FROM m WHERE channel = ? ORDER BY seq DESC LIMIT 20", (channel,))

        yield write, read
