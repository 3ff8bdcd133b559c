"""Memory versions' bookkeeping per conversation (seed 004) and pins, as both backends read and change them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from memory import rows as row_to
from memory.records import MemoryChannel, MemoryRecord, Thread, Versions
from memory.sql.base import Row, SqlStore, marks
from memory.store_common import CHANNEL_FLAGS, checked


def newest_records_sql(persona: str, asked: Sequence[Versions], as_of: int | None = None,
                       hidden: bool = False) -> tuple[str, list[Any]]:
    """Store.newest_records as one statement and its parameters (`answered` reads its rows)."""
    where = ("" if as_of is None else " AND id <= ?") + ("" if hidden else " AND hidden_by IS NULL")
    one = ("SELECT * FROM (SELECT {n} AS asked, * FROM memory_records WHERE persona = ? AND scope = ?"
           f" AND scope_id = ? AND type = ?{where} ORDER BY version DESC LIMIT ?) AS a{{n}}")
    return " UNION ALL ".join(one.format(n=n) for n in range(len(asked))), [
        value for scope, scope_id, type_, limit in asked
        for value in (persona, scope, scope_id, type_, *(() if as_of is None else (as_of,)), limit)]


def answered(asked: Sequence[Versions], rows: Iterable[Row]) -> list[list[MemoryRecord]]:
    """newest_records_sql's rows as the records for each of `asked`, oldest first."""
    return _oldest_first(asked, ((row["asked"], row_to.record(row, leave_out=("asked",))) for row in rows))


def by_place(asked: Sequence[Versions], records: Iterable[MemoryRecord]) -> list[list[MemoryRecord]]:
    """Records as the answer to `asked`, whose places are all different: each under its own, oldest first."""
    places = {ask[:3]: n for n, ask in enumerate(asked)}
    return _oldest_first(asked, ((places[(r.scope, r.scope_id, r.type)], r) for r in records))


def _oldest_first(asked: Sequence[Versions], found: Iterable[tuple[int, MemoryRecord]]) -> list[list[MemoryRecord]]:
    parts: list[list[MemoryRecord]] = [[] for _ in asked]
    for n, record in found:
        parts[n].append(record)
    for records in parts:  # in whatever order the database put the parts together
        records.sort(key=lambda r: r.version)
    return parts


class RecordsSql(SqlStore):
    async def recent_records(self, persona: str, scope: str, scope_id: int, type_: str,
                             limit: int, as_of: int | None = None, hidden: bool = False) -> list[MemoryRecord]:
        """The newest `limit` versions, oldest first (as the database stood at record `as_of`; those an edit or a
        rollback hid only when `hidden`)."""
        return (await self.newest_records(persona, [(scope, scope_id, type_, limit)], as_of, hidden))[0]

    async def newest_records(self, persona: str, asked: Sequence[Versions], as_of: int | None = None,
                             hidden: bool = False) -> list[list[MemoryRecord]]:
        """recent_records for each of `asked`, in one statement: one round trip for a prompt's memory layers."""
        if not asked:
            return []
        return answered(asked, await self._rows(*newest_records_sql(persona, asked, as_of, hidden)))

    async def ensure_memory_channel(self, thread: Thread) -> MemoryChannel:
        """The bookkeeping of a conversation, created on first use."""
        await self._changed(
            "INSERT INTO memory_channels (thread_id, persona, guild_id, channel_id, discord_thread_id)"
            " VALUES (?, ?, ?, ?, ?) ON CONFLICT (thread_id) DO NOTHING",
            (thread.id, thread.persona, thread.guild_id, thread.channel_id, thread.discord_thread_id))
        self.saw_conversation(thread.id)
        found = await self.memory_channel(thread.id)
        assert found is not None
        return found

    async def set_channel_flags(self, thread_id: int, **flags: int | str | None) -> None:
        """Pause/resume, visibility, sharing and display name, as reported by a front end or an admin."""
        assignments = ", ".join(f"{k} = ?" for k in checked(flags, CHANNEL_FLAGS, "flags"))
        await self._changed_for_all(f"UPDATE memory_channels SET {assignments} WHERE thread_id = ?",
                                    (*flags.values(), thread_id))
        self.sharing_version += 1

    async def visible_conversations(self, persona: str, guild_id: int) -> list[tuple[int, int | None, str | None]]:
        """(channel id, Discord thread id, name) of the guild's shared channels and of all its public threads.

        The sharing rule (MemoryChannel.shared) is applied in the query and only three columns come back:
        recall asks on every turn, and a server may have thousands of channels.
        """
        rows = await self._rows(
            "SELECT channel_id, discord_thread_id, name FROM memory_channels WHERE persona = ? AND guild_id = ?"
            " AND (discord_thread_id IS NOT NULL OR COALESCE(shareable, public) = 1)", (persona, guild_id))
        return [(row[0] or 0, row[1], row[2]) for row in rows]

    async def shared_channels(self, persona: str, guild_id: int, limit: int | None = None,
                              besides: int | None = None) -> list[MemoryChannel]:
        """The guild's channels whose memory may travel (other than `besides`), most recently active first.

        The sharing rule (MemoryChannel.shared) is applied in the query, so a build reads `limit` rows
        however many channels the server has.
        """
        other = " AND channel_id IS NOT NULL" if besides is None else " AND (channel_id IS NULL OR channel_id != ?)"
        most = "" if limit is None else " LIMIT ?"
        rows = await self._rows(
            "SELECT * FROM memory_channels WHERE persona = ? AND guild_id = ? AND discord_thread_id IS NULL"
            f" AND COALESCE(shareable, public) = 1{other} ORDER BY last_message_at DESC NULLS LAST{most}",
            (persona, guild_id, *(() if besides is None else (besides,)), *(() if limit is None else (limit,))))
        return [row_to.channel(r) for r in rows]

    async def memory_channel(self, thread_id: int) -> MemoryChannel | None:
        row = await self._row("SELECT * FROM memory_channels WHERE thread_id = ?", (thread_id,))
        return row_to.channel(row) if row else None

    async def due_channels(self, now: float, limit: int = 1_000) -> list[MemoryChannel]:
        """Conversations whose deadline has passed, earliest first (an index range scan)."""
        rows = await self._rows("SELECT * FROM memory_channels WHERE due_at IS NOT NULL AND paused = 0"
                                " AND due_at <= ? ORDER BY due_at LIMIT ?", (now, limit))
        return [row_to.channel(r) for r in rows]

    async def upcoming_deadlines(self, before: float, limit: int = 10_000) -> list[tuple[int, float]]:
        """(thread id, deadline) of the conversations whose memory work falls due before `before`, earliest
        first (an index range scan): the timers to arm."""
        rows = await self._rows("SELECT thread_id, due_at FROM memory_channels WHERE due_at IS NOT NULL"
                                " AND due_at <= ? AND paused = 0 ORDER BY due_at LIMIT ?", (before, limit))
        return [(int(r[0]), float(r[1])) for r in rows]

    async def release_channel(self, thread_id: int, owner: str) -> None:
        await self._changed("UPDATE memory_channels SET lease_owner = NULL, lease_until = NULL"
                            " WHERE thread_id = ? AND lease_owner = ?", (thread_id, owner))

    # pins: facts kept word for word in every version

    async def pins(self, persona: str, scope: str, scope_id: int) -> list[str]:
        rows = await self._rows("SELECT fact FROM memory_pins WHERE persona = ? AND scope = ? AND scope_id = ?"
                                " ORDER BY id", (persona, scope, scope_id))
        return [r[0] for r in rows]

    async def erasures(self) -> dict[int, set[int]]:
        rows = await self._rows("SELECT thread_id, seq FROM erasures ORDER BY seq")
        return row_to.seqs_by_thread([(r[0], r[1]) for r in rows])

    async def rewritten(self, erased: dict[int, set[int]]) -> None:
        seqs = sorted(seq for seqs in erased.values() for seq in seqs)
        if seqs:
            await self._changed(f"DELETE FROM erasures WHERE seq IN ({marks(seqs)})", seqs)

    async def pinned_scopes(self, persona: str) -> set[tuple[str, int]]:
        rows = await self._rows("SELECT DISTINCT scope, scope_id FROM memory_pins WHERE persona = ?", (persona,))
        return {(str(r[0]), int(r[1])) for r in rows}

    async def pin(self, persona: str, scope: str, scope_id: int, fact: str) -> bool:
        changed = await self._changed_for_all(
            "INSERT INTO memory_pins (persona, scope, scope_id, fact, created_at) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT DO NOTHING", (persona, scope, scope_id, fact.strip(), self.clock())) == 1
        self.memory_changes += changed  # a kept prompt's layers are read again only when a pin really changed
        return changed

    async def unpin(self, persona: str, scope: str, scope_id: int, fact: str) -> bool:
        changed = await self._changed_for_all(
            "DELETE FROM memory_pins WHERE persona = ? AND scope = ? AND scope_id = ? AND fact = ?",
            (persona, scope, scope_id, fact.strip())) == 1
        self.memory_changes += changed
        return changed
