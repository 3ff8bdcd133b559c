"""Short-term memory bookkeeping per conversation: what is pending, when it is due, what is shared.

SQLite is the source of truth for due work: `due_at` holds the one deadline that matters (the idle
deadline, now once the message threshold is reached, or a retry after a failure), so a due-scan
is a single indexed range query however many channels there are.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass

import aiosqlite

from memory.records import MemoryChannel, MemoryRecord, Thread
from memory.store import Store, record_from_row

MAX_BACKOFF = 3_600.0
# The one deadline that matters, from the bookkeeping: a pending long-term update first (crash repair),
# then the threshold, then the idle deadline; nothing pending means not due.
_DUE = ("CASE WHEN long_term_pending THEN :now WHEN pending_count >= :threshold THEN :now"
        " WHEN pending_count > 0 THEN last_message_at + :idle ELSE NULL END")


@dataclass(frozen=True)
class Triggers:
    idle_seconds: float = 7_200
    threshold: int = 50


async def noting(db: aiosqlite.Connection, thread: Thread, at: float, triggers: Triggers) -> float | None:
    """Count a new message and push the idle deadline back (sooner when the threshold is reached).

    Runs in the transaction that stores the message; returns the conversation's new deadline.
    """
    rows = await db.execute_fetchall(
        "INSERT INTO memory_channels (thread_id, persona, guild_id, channel_id, discord_thread_id,"
        " last_message_at, pending_count, due_at) VALUES (?, ?, ?, ?, ?, ?, 1, ?)"
        " ON CONFLICT (thread_id) DO UPDATE SET last_message_at = excluded.last_message_at,"
        " pending_count = pending_count + 1,"
        " due_at = CASE WHEN failures > 0 THEN due_at"
        "   WHEN pending_count + 1 >= ? THEN ?"
        "   ELSE ? END"
        " RETURNING due_at",
        (thread.id, thread.persona, thread.guild_id, thread.channel_id, thread.discord_thread_id, at,
         at + triggers.idle_seconds, triggers.threshold, at, at + triggers.idle_seconds),
    )
    return next(iter(rows))[0]


async def recount(store: Store, now: float) -> int:
    """Conversations with messages past their last version but nothing pending (a crash of an older
    version between storing and counting): count them again and make them due now. Returns how many."""
    async with store.transaction() as db:
        cur = await db.execute(
            "UPDATE memory_channels SET pending_count = missed.n, due_at = ? FROM ("
            " SELECT c.thread_id, COUNT(m.seq) AS n FROM memory_channels c JOIN messages m"
            " ON m.thread_id = c.thread_id AND m.seq > COALESCE(c.covered_seq, 0) AND m.deleted_at IS NULL"
            " AND m.role IN ('user', 'assistant') AND NOT (m.role = 'assistant' AND m.author_name = c.persona)"
            " WHERE c.pending_count = 0 AND c.paused = 0 GROUP BY c.thread_id) AS missed"
            " WHERE memory_channels.thread_id = missed.thread_id",
            (now,),
        )
        return cur.rowcount


async def channel(store: Store, thread_id: int) -> MemoryChannel | None:
    row = await store.fetch_one("SELECT * FROM memory_channels WHERE thread_id = ?", (thread_id,))
    return _channel(row) if row else None


async def ensure_channel(store: Store, thread: Thread) -> MemoryChannel:
    async with store.transaction() as db:
        await db.execute(
            "INSERT INTO memory_channels (thread_id, persona, guild_id, channel_id, discord_thread_id)"
            " VALUES (?, ?, ?, ?, ?) ON CONFLICT (thread_id) DO NOTHING",
            (thread.id, thread.persona, thread.guild_id, thread.channel_id, thread.discord_thread_id),
        )
    store.saw_conversation(thread.id)
    return await channel(store, thread.id)  # type: ignore[return-value]


async def due(store: Store, now: float, limit: int = 1_000) -> list[MemoryChannel]:
    """Channels whose deadline has passed, earliest first (an index range scan)."""
    rows = await store.fetch_all(
        "SELECT * FROM memory_channels WHERE due_at IS NOT NULL AND paused = 0 AND due_at <= ?"
        " ORDER BY due_at LIMIT ?", (now, limit),
    )
    return [_channel(r) for r in rows]


async def upcoming(store: Store, limit: int = 10_000) -> list[tuple[int, float]]:
    """(thread id, deadline) of every channel with work pending, to re-arm timers after a restart."""
    rows = await store.fetch_all(
        "SELECT thread_id, due_at FROM memory_channels WHERE due_at IS NOT NULL AND paused = 0"
        " ORDER BY due_at LIMIT ?", (limit,),
    )
    return [(r[0], r[1]) for r in rows]


async def save_short_term(store: Store, ch: MemoryChannel, content: str, first_seq: int, last_seq: int,
                          counted: int, now: float, triggers: Triggers, metadata: dict) -> MemoryRecord:
    """The new short-term version and the bookkeeping that it was written, in one transaction.

    A channel's versions are allocated from MAX(version) + 1 inside the write lock, so two writers
    never collide or skip; a Discord thread's single record is overwritten in place.
    """
    scope, scope_id = ch.scope
    async with store.transaction() as db:
        if scope == "thread":
            cur = await db.execute(
                "INSERT INTO memory_records (persona, scope, scope_id, type, version, content, first_seq, last_seq,"
                " metadata, created_at) VALUES (?, 'thread', ?, 'short_term', 1, ?, ?, ?, ?, ?)"
                " ON CONFLICT (persona, scope, scope_id, type, version) DO UPDATE SET content = excluded.content,"
                " first_seq = excluded.first_seq, last_seq = excluded.last_seq, metadata = excluded.metadata,"
                " created_at = excluded.created_at RETURNING id",
                (ch.persona, scope_id, content, first_seq, last_seq, json.dumps(metadata), now),
            )
        else:
            cur = await db.execute(
                "INSERT INTO memory_records (persona, scope, scope_id, type, version, content, first_seq, last_seq,"
                " metadata, created_at) SELECT ?, ?, ?, 'short_term', COALESCE(MAX(version), 0) + 1, ?, ?, ?, ?, ?"
                " FROM memory_records WHERE persona = ? AND scope = ? AND scope_id = ? AND type = 'short_term'"
                " RETURNING id",
                (ch.persona, scope, scope_id, content, first_seq, last_seq, json.dumps(metadata), now,
                 ch.persona, scope, scope_id),
            )
        record_id = (await cur.fetchone())[0]
        await cur.close()
        await db.execute(
            "UPDATE memory_channels SET covered_seq = ?, pending_count = MAX(0, pending_count - ?), failures = 0,"
            " long_term_pending = ? WHERE thread_id = ?",
            (last_seq, counted, int(scope == "channel"), ch.thread_id),
        )
        await _recompute_due(db, ch.thread_id, now, triggers)
    row = await store.fetch_one("SELECT * FROM memory_records WHERE id = ?", (record_id,))
    return record_from_row(row)


async def long_term_saved(store: Store, thread_id: int, now: float, triggers: Triggers) -> None:
    """The long-term update after a version is done; the channel is due again only if messages wait."""
    async with store.transaction() as db:
        await db.execute("UPDATE memory_channels SET long_term_pending = 0, failures = 0 WHERE thread_id = ?",
                         (thread_id,))
        await _recompute_due(db, thread_id, now, triggers)


async def nothing_new(store: Store, thread_id: int, now: float, triggers: Triggers) -> None:
    """A due channel with no new message (all deleted, say): clear it so no identical version is written."""
    async with store.transaction() as db:
        await db.execute("UPDATE memory_channels SET pending_count = 0, failures = 0 WHERE thread_id = ?",
                         (thread_id,))
        await _recompute_due(db, thread_id, now, triggers)


async def _recompute_due(db, thread_id: int, now: float, triggers: Triggers) -> None:
    await db.execute(f"UPDATE memory_channels SET due_at = {_DUE} WHERE thread_id = :id",
                     {"now": now, "threshold": triggers.threshold, "idle": triggers.idle_seconds, "id": thread_id})


async def failed(store: Store, thread_id: int, now: float, base_delay: float) -> float:
    """Record a failure and push the channel's deadline back exponentially; returns the delay."""
    ch = await channel(store, thread_id)
    failures = (ch.failures if ch else 0) + 1
    delay = min(MAX_BACKOFF, base_delay * 2 ** (failures - 1))
    async with store.transaction() as db:
        await db.execute("UPDATE memory_channels SET failures = ?, due_at = ? WHERE thread_id = ?",
                         (failures, now + delay, thread_id))
    return delay


async def set_flags(store: Store, thread_id: int, **flags: int | str | None) -> None:
    """Pause/resume, visibility, sharing and display name, as reported by a front end or an admin."""
    allowed = {"paused", "public", "shareable", "name"}
    if not flags or set(flags) - allowed:
        raise ValueError(f"flags must be among {sorted(allowed)}")
    assignments = ", ".join(f"{k} = ?" for k in flags)
    async with store.transaction() as db:
        await db.execute(f"UPDATE memory_channels SET {assignments} WHERE thread_id = ?", (*flags.values(), thread_id))
    store.sharing_version += 1


async def visible_conversations(store: Store, persona: str, guild_id: int) -> list[tuple[int, int | None, str | None]]:
    """(channel id, Discord thread id, name) of the guild's shared channels and of all its public threads.

    The sharing rule (MemoryChannel.shared) is applied in the query and only three columns come back:
    recall asks on every turn, and a server may have thousands of channels.
    """
    rows = await store.fetch_all(
        "SELECT channel_id, discord_thread_id, name FROM memory_channels WHERE persona = ? AND guild_id = ?"
        " AND (discord_thread_id IS NOT NULL OR COALESCE(shareable, public) = 1)", (persona, guild_id))
    return [(row[0] or 0, row[1], row[2]) for row in rows]


async def shared_channels(store: Store, persona: str, guild_id: int, limit: int | None = None,
                          besides: int | None = None) -> list[MemoryChannel]:
    """The guild's channels whose memory may travel (other than `besides`), most recently active first.

    The sharing rule (MemoryChannel.shared) is applied in the query, so a build reads `limit` rows
    however many channels the server has.
    """
    rows = await store.fetch_all(
        "SELECT * FROM memory_channels WHERE persona = ? AND guild_id = ? AND discord_thread_id IS NULL"
        " AND COALESCE(shareable, public) = 1 AND channel_id IS NOT ? ORDER BY last_message_at DESC LIMIT ?",
        (persona, guild_id, besides, -1 if limit is None else limit),
    )
    return [_channel(r) for r in rows]


# pinned facts


async def pins(store: Store, persona: str, scope: str, scope_id: int) -> list[str]:
    rows = await store.fetch_all(
        "SELECT fact FROM memory_pins WHERE persona = ? AND scope = ? AND scope_id = ? ORDER BY id",
        (persona, scope, scope_id),
    )
    return [r[0] for r in rows]


async def pin(store: Store, persona: str, scope: str, scope_id: int, fact: str) -> bool:
    async with store.transaction() as db:
        cur = await db.execute(
            "INSERT INTO memory_pins (persona, scope, scope_id, fact, created_at) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT DO NOTHING", (persona, scope, scope_id, fact.strip(), store.clock()),
        )
    changed = cur.rowcount == 1
    store.memory_changes += changed  # a kept prompt's layers are read again only when a pin really changed
    return changed


async def unpin(store: Store, persona: str, scope: str, scope_id: int, fact: str) -> bool:
    async with store.transaction() as db:
        cur = await db.execute(
            "DELETE FROM memory_pins WHERE persona = ? AND scope = ? AND scope_id = ? AND fact = ?",
            (persona, scope, scope_id, fact.strip()),
        )
    changed = cur.rowcount == 1
    store.memory_changes += changed
    return changed


def _channel(row: sqlite3.Row) -> MemoryChannel:
    return MemoryChannel(**{k: row[k] for k in row.keys()})  # noqa: SIM118
