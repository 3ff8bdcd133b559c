"""The PostgreSQL backend: an asyncpg pool, numbered migrations under an advisory lock, pg_trgm recall.

Several processes share one database: memory work is claimed row by row with `FOR UPDATE SKIP LOCKED`
and a lease, versions are numbered inside their write transaction, and nothing relies on being alone.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import math
import re
import time
from collections.abc import AsyncIterator, Awaitable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import asyncpg

from memory import rows as row_to
from memory.database_url import safe_url
from memory.grouped import Grouped, answer_each
from memory.postgres.asked import Asked, Pending
from memory.postgres.lender import Lender
from memory.quotes import ERASED, Erased
from memory.records import (
    MemoryChannel,
    MemoryRecord,
    Message,
    MessageMatch,
    NewMessage,
    NoteMatch,
    Opening,
    Recalled,
    Scope,
    Thread,
    own_memory,
)
from memory.settings import Triggers
from memory.sql.branches import BranchesSql
from memory.sql.claims import ClaimsSql
from memory.sql.copying import CopyingSql
from memory.sql.records import RecordsSql, by_place
from memory.sql.settings import SettingsSql
from memory.sql.threads import (
    FORGET_COUNTS,
    LIVE_IN_RANGE,
    NEWEST_RECORD,
    ThreadsSql,
    next_reply,
    remembered,
    window_reset_sql,
)
from memory.sql.usage import UsageSql
from memory.store import Clock, OptedOut, OtherServer, StaleUpdate, StoreError, backoff, copy_keys, numbered_migrations
from memory.store_common import QUOTING, Noted, erased_value, stale_summary
from memory.tokens import count_tokens

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from memory.postgres.lender import Connection

# The connection a task holds for a run of its statements (PostgresStore.held): the task, the pool it came from.
_HELD: ContextVar[tuple[asyncio.Task[Any] | None, Lender, Connection] | None] = ContextVar("held", default=None)
MIGRATIONS_DIR = Path(__file__).with_name("migrations")
MIGRATION_LOCK = 0x5374656C6973  # "Stelis": one process migrates, the others wait for it
MIGRATION_SECONDS = 6 * 3600.0
DEFAULT_POOL = 10  # connections in all when database.pool_size is not given (asyncpg's default)
SEARCH_SHARE = 4  # one connection in four serves recall's look-ups
# The planner prices a trigram ILIKE as cheap and would rather read every row (40 ms at 10k messages) than the
# index (2 ms). Set per session, a look-up is one round trip: SET LOCAL in a transaction made it four. A look-up's
# plan is the same whatever its pattern (the index, then each hit's thread), so it is planned once per connection,
# not at each call (0.74 -> 0.54 ms for a three-term message look-up at 10k messages). A generic plan of four terms
# or more is priced for parallel workers, whose start costs more than the whole look-up (6.2 -> 1.3 ms at 10k).
SEARCH_SETTINGS = {"enable_seqscan": "off", "plan_cache_mode": "force_generic_plan",
                   "max_parallel_workers_per_gather": "0"}
# Openings in one statement at most: 500 at once were read back in one turn of the event loop (60 ms)
OPENINGS_TOGETHER = 50
TRIGRAM_INDEXES = ("idx_messages_folded_trgm", "idx_records_trgm", "idx_chronicles_trgm")
# Tables whose key the database numbers: after rows arrive with their own, numbering goes on above them.
IDENTITIES = {"threads": "id", "messages": "seq", "memory_records": "id", "memory_pins": "id", "playbook_runs": "id",
              "playbook_steps": "id", "tasks": "id", "autonomy_log": "id"}

# When a conversation's memory is due, over its bookkeeping (the SQLite backend writes the same rule):
# a pending long-term update first, then the threshold, then the idle deadline; nothing pending: not due.
def _due(ltp: str, pending: str, last_at: str, now: str = "$now::float8", threshold: str = "$threshold::int",
         idle: str = "$idle::float8") -> str:
    return (f"CASE WHEN {ltp} <> 0 THEN {now} WHEN {pending} >= {threshold} THEN {now}"
            f" WHEN {pending} > 0 THEN {last_at} + {idle} ELSE NULL END")


# A message stored, as a statement other statements may build on (RETURNING the row).
_STORE_MESSAGE = (
    "INSERT INTO messages (thread_id, role, author_id, author_name, content, metadata, token_count, external_id,"
    " created_at) SELECT $thread, $role, $author_id, $author_name, $content, $metadata, $tokens, $external_id,"
    " $now WHERE {} ON CONFLICT (external_id) DO NOTHING RETURNING *"
)
_MESSAGE_PARAMS = ("thread", "role", "author_id", "author_name", "content", "metadata", "tokens", "external_id", "now")
_STORE_AUTHORED = _STORE_MESSAGE.format(remembered("$thread", "$author_id"))
# A message without an author (the persona's reply) has no one who could have opted out. With the check, each reply
# was planned anew: the plan for a NULL author folds it away, so PostgreSQL never settled on the shared one.
_STORE_UNAUTHORED = _STORE_MESSAGE.format("TRUE")
# ... and counted towards its conversation's next memory version, if it was stored (a row in `stored`).
_NOTE_MESSAGE = (
    "INSERT INTO memory_channels AS c (thread_id, persona, guild_id, channel_id, discord_thread_id,"
    " last_message_at, pending_count, due_at)"
    " SELECT $id, $persona, $guild, $channel, $dthread, $now, 1, "
    + _due(ltp="0", pending="1", last_at="$now::float8")
    + " FROM stored ON CONFLICT (thread_id) DO UPDATE SET last_message_at = excluded.last_message_at,"
    " pending_count = c.pending_count + 1, due_at = CASE WHEN c.failures > 0 THEN c.due_at ELSE "
    + _due(ltp="c.long_term_pending", pending="c.pending_count + 1", last_at="$now::float8")
    + " END RETURNING due_at"
)
# Several appends in one statement (memory/grouped.py), one per thread: each row stored as _STORE_AUTHORED
# would store it alone (at its own time), counted as _NOTE_MESSAGE would count it, with its own thread's triggers
# (looked up in `v` where the count already exists: an update sees only the existing row and `excluded`), and its
# thread's noted window written as `_append_alone`'s `noted` writes it (at the revision it was noted at).
_EACH = "(SELECT v.{} FROM v WHERE v.thread_id = c.thread_id)"
_NOTED_TOGETHER = frozenset({"memory_as_of", "window_cached_after"})  # what _STORE_TOGETHER writes of a noted window
_STORE_TOGETHER = (
    "WITH v AS (SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[],"
    " $7::int[], $8::bigint[], $9::float8[], $10::bool[], $11::text[], $12::bigint[], $13::bigint[], $14::bigint[],"
    " $15::int[], $16::float8[], $17::bigint[], $18::bool[], $19::bigint[], $20::bool[], $21::bigint[])"
    " AS v (thread_id, role, author_id, author_name, content, metadata, token_count, external_id, created_at, counts,"
    " persona, guild_id, channel_id, discord_thread_id, threshold, idle, revision, notes_memory, memory_as_of,"
    " notes_cache, cached_after)),"
    " noted AS (UPDATE threads t SET"
    " memory_as_of = CASE WHEN v.notes_memory THEN v.memory_as_of ELSE t.memory_as_of END,"
    " window_cached_after = CASE WHEN v.notes_cache THEN v.cached_after ELSE t.window_cached_after END"
    " FROM v WHERE t.id = v.thread_id AND t.revision = v.revision),"
    " stored AS (INSERT INTO messages (thread_id, role, author_id, author_name, content, metadata, token_count,"
    " external_id, created_at) SELECT thread_id, role, author_id, author_name, content, metadata, token_count,"
    f" external_id, created_at FROM v WHERE {remembered('v.thread_id', 'v.author_id')}"
    " ON CONFLICT (external_id) DO NOTHING RETURNING *),"
    " counted AS (INSERT INTO memory_channels AS c (thread_id, persona, guild_id, channel_id, discord_thread_id,"
    " last_message_at, pending_count, due_at) SELECT v.thread_id, v.persona, v.guild_id, v.channel_id,"
    " v.discord_thread_id, v.created_at, 1, "
    + _due(ltp="0", pending="1", last_at="v.created_at", now="v.created_at", threshold="v.threshold", idle="v.idle")
    + " FROM v JOIN stored USING (thread_id) WHERE v.counts ON CONFLICT (thread_id) DO UPDATE SET"
    " last_message_at = excluded.last_message_at, pending_count = c.pending_count + 1, due_at = CASE WHEN"
    " c.failures > 0 THEN c.due_at ELSE "
    + _due(ltp="c.long_term_pending", pending="c.pending_count + 1", last_at="excluded.last_message_at",
           now="excluded.last_message_at", threshold=_EACH.format("threshold"), idle=_EACH.format("idle"))
    + " END RETURNING thread_id, due_at)"
    " SELECT stored.*, counted.due_at AS next_due FROM stored LEFT JOIN counted USING (thread_id)"
)
_RECOMPUTE_DUE = ("UPDATE memory_channels SET due_at = "
                  + _due(ltp="long_term_pending", pending="pending_count", last_at="last_message_at")
                  + " WHERE thread_id = $id")
_ADD_RECORD = (
    "INSERT INTO memory_records (persona, scope, scope_id, type, version, content, first_seq, last_seq,"
    " metadata, created_at) SELECT $persona, $scope, $scope_id, $type,"
    " COALESCE($version::int, MAX(version) + 1, 1), $content, $first_seq, $last_seq, $metadata, $now"
    " FROM memory_records WHERE persona = $persona AND scope = $scope AND scope_id = $scope_id AND type = $type"
    " RETURNING *"
)
_SHARED_CHANGE = "SELECT nextval('shared_changes')"


def _not_placeholder(alias: str) -> str:
    """A stand-in's words (the offline model's reply) are not the persona's: recall never brings them back."""
    return f"({alias}.metadata::jsonb -> 'placeholder') IS NULL"


_NOT_PLACEHOLDER = _not_placeholder("m")
# What recall is given of a message it found, and where it was said (MessageMatch's fields, in order).
_MATCH_COLUMNS = "m.seq, m.role, m.author_name, m.content, m.created_at, t.scope_key, t.kind, t.label"
_MATCHED_MESSAGES = f"SELECT {_MATCH_COLUMNS} FROM messages m JOIN threads t ON t.id = m.thread_id"
_RECORD_SCOPE = "(scope || ':' || scope_id)"  # a memory version's place as one key (`_key_set`): "channel:12"
_NEXT_REPLY = next_reply("IS DISTINCT FROM", _not_placeholder("c"))


@functools.lru_cache(maxsize=1024)
def numbered(sql: str) -> str:
    """memory/sql's `?` placeholders as asyncpg's `$1`, `$2`, ... (its SQL holds no `?` of its own)."""
    first, *rest = sql.split("?")
    return first + "".join(f"${n}{part}" for n, part in enumerate(rest, 1))


def named(sql: str, **params: Any) -> tuple[Any, ...]:
    """`$name` placeholders to asyncpg's `$n`, in order of first use: the arguments of fetch(...)."""
    text, order = _numbered_names(sql)
    return (text, *(params[n] for n in order))


@functools.lru_cache(maxsize=256)
def _numbered_names(sql: str) -> tuple[str, tuple[str, ...]]:
    """A statement's `$name`s numbered, and the names in their order (each statement parsed once: a burst of
    replies parsed the same few thousand times)."""
    order: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match[1] not in order:
            order.append(match[1])
        return f"${order.index(match[1]) + 1}"

    return _NAME.sub(number, sql), tuple(order)


_NAME = re.compile(r"\$([A-Za-z_]\w*)")


def _count(status: str) -> int:
    """Rows an INSERT/UPDATE/DELETE touched, from asyncpg's status line ("UPDATE 3")."""
    return int(status.rsplit(" ", 1)[-1])


def _like(term: str) -> str:
    """A case-insensitive substring pattern (what an FTS5 trigram phrase matches): for ILIKE, and for LIKE on a
    text folded to lower case."""
    return "%" + term.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _ranked(rows: Sequence[Any], terms: list[str], text: int, key: int, limit: int) -> list[Any]:
    """The best `limit` of the rows a look-up found, by BM25 over substring hits as FTS5 ranks its trigram matches:
    each term's occurrences, saturating, weigh more when the term is rare among the hits and the text is short.

    For chronicles and memory versions, a handful of hits (messages are ranked in SQL: `_message_ranking`). A row
    (asyncpg's, or a tuple) ends with the terms it matched."""
    if not rows:
        return []
    lowered = [t.lower() for t in terms]
    matched = []  # each row's (term, occurrences) for the terms it matched
    found_in = [0] * len(terms)  # how many rows each term matched
    lengths = []
    for row in rows:
        folded = row[text].lower()  # each text once, whatever the number of terms
        counts = [(k, max(1, folded.count(lowered[k]))) for k in sorted(row[-1])]
        for k, _ in counts:
            found_in[k] += 1
        matched.append(counts)
        lengths.append(len(row[text]))
    average = max(sum(lengths) / len(rows), 1.0)
    weights = [math.log(1.0 + (len(rows) + 0.5) / (n + 0.5)) for n in found_in]
    scores = [sum(weights[k] * tf * (BM25_K1 + 1) / (tf + norm) for k, tf in counts)
              for counts, norm in zip(matched, (BM25_K1 * (1 - BM25_B + BM25_B * n / average) for n in lengths),
                                      strict=True)]
    order = sorted(range(len(rows)), key=lambda n: (scores[n], rows[n][key]), reverse=True)
    return [rows[n] for n in order[:limit]]


BM25_K1, BM25_B = 1.2, 0.75  # as FTS5's bm25()


@functools.lru_cache(maxsize=8)
def _message_ranking(first: int, limit: int) -> str:
    """Recall's message look-up, ranked in the database as `_ranked` ranks, as CTEs ending in
    `best` (seq, score and where it was said: the best $`limit`): only the best come back with their texts,
    where shipping every match (up to CANDIDATE_ROWS) and ranking it here cost the loop 0.56 ms a look-up against
    0.12 (bench context_latency at 10k, PostgreSQL).

    Each term's matches through the trigram index (`_terms`: the patterns $first, the words $first + 1), with its
    occurrences counted by splitting the folded text on its word (replace() cost twice as much) and the text's
    length in tokens (stored: counting characters would read every text again); then what the conversation may
    see ($1 persona, $2 its keys), scored per message over the terms it matched."""
    norm = f"{BM25_K1}::float8 * ({1 - BM25_B}::float8 + {BM25_B}::float8 * s.len / (SELECT average FROM total))"
    hits = _each_term("m.seq, m.thread_id, m.token_count AS len,"
                      " array_length(string_to_array(m.content_folded, q.word), 1) - 1 AS tf", "messages m",
                      f"m.{MESSAGES_MATCH}", _terms(first, first + 1),
                      f"m.deleted_at IS NULL AND {_NOT_PLACEHOLDER}")
    return (
        f"hits AS MATERIALIZED ({hits}),"
        # each hit's thread by its key (OFFSET 0 keeps the planner from scanning every thread of a large server's
        # visible conversations for each hit instead)
        " seen AS MATERIALIZED (SELECT h.seq, h.len::float8 AS len, GREATEST(h.tf, 1)::float8 AS tf, h.k,"
        " t.scope_key, t.kind, t.label FROM hits h CROSS JOIN LATERAL (SELECT persona, scope_key, kind, label"
        " FROM threads WHERE threads.id = h.thread_id OFFSET 0) AS t"
        f" WHERE t.persona = $1 AND {_among('t.scope_key', 2)}),"
        " total AS (SELECT count(*)::float8 AS n, GREATEST(avg(len), 1.0::float8) AS average"
        " FROM (SELECT DISTINCT ON (seq) len FROM seen) AS texts),"
        " weights AS MATERIALIZED (SELECT k, ln(1.0::float8 + ((SELECT n FROM total) + 0.5::float8) / (count(*)::float8"
        " + 0.5::float8)) AS weight FROM seen GROUP BY k),"
        # each best with where it was said (one thread's, so min() is that): no join back to the matches for it
        f" best AS (SELECT s.seq, sum(w.weight * s.tf * {BM25_K1 + 1}::float8 / (s.tf + {norm})) AS score,"
        " min(s.label) AS label, min(s.scope_key) AS scope_key, min(s.kind) AS kind"
        f" FROM seen s JOIN weights w USING (k) GROUP BY s.seq ORDER BY score DESC, s.seq DESC LIMIT ${limit})")


# The best messages of `_message_ranking` with their texts, as rows of `_notes`'s shape: their rank in k and their
# speaker last (recall_matches splits them apart again).
_BEST_AS_NOTES = ("SELECT 'message', m.seq, m.content, m.created_at, best.label, best.scope_key, best.kind, NULL,"
                  " NULL, (row_number() OVER (ORDER BY best.score DESC, best.seq DESC))::int, m.role, m.author_name"
                  " FROM best JOIN messages m ON m.seq = best.seq")


@functools.lru_cache(maxsize=16)
def _day_messages(start: int, end: int, limit: int, shown: int) -> str:
    """What was said in [$`start`, $`end`) in the conversations recall may see ($1 persona, $2 their keys), the newest
    $`limit` (MessageMatch's fields) but for what the request shows (thread $`shown`, from seq $`shown` + 1 on).
    Each conversation's newest of the day first (its index by thread and time, read backwards up to the limit),
    then the newest of those: a busy day of a large server is not sorted whole (11,770 rows for 24: 8 -> 3 ms)."""
    return (f"SELECT {_MATCH_COLUMNS} FROM threads t CROSS JOIN LATERAL (SELECT * FROM messages m"
            f" WHERE m.thread_id = t.id AND m.created_at >= ${start} AND m.created_at < ${end}"
            f" AND NOT (m.thread_id = ${shown} AND m.seq >= ${shown + 1})"
            f" AND m.role IN ('user', 'assistant') AND m.deleted_at IS NULL AND {_NOT_PLACEHOLDER}"
            f" ORDER BY m.created_at DESC LIMIT ${limit}) AS m WHERE t.persona = $1 AND {_among('t.scope_key', 2)}"
            f" ORDER BY m.created_at DESC LIMIT ${limit}")


def _day_as_notes(day: int, start: int, end: int, limit: int, shown: int) -> str:
    """`_day_messages` as rows of `_notes`'s shape for recall_matches: which day in `version`, the order in k."""
    return ("SELECT 'day', d.seq, d.content, d.created_at, d.label, d.scope_key, d.kind, NULL, "
            f"{day}, (row_number() OVER (ORDER BY d.created_at DESC))::int, d.role, d.author_name"
            f" FROM ({_day_messages(start, end, limit, shown)}) AS d")


def _matched_message(row: Sequence[Any]) -> MessageMatch:
    """A message of recall_matches' rows (`_BEST_AS_NOTES`, `_day_as_notes`)."""
    return MessageMatch(row[1], row[10], row[11], row[2], row[3], row[5], row[6], row[4])


@functools.lru_cache(maxsize=8)
def _note_matches(first: int) -> str:
    """CTEs `chronicles` and `records`: those matching each term (the patterns $first), through the trigram indexes
    alone, before what may be seen of them is picked (`_notes`)."""
    chronicles = _each_term(
        "'chronicle' AS source, id, chronicle_summary AS text, COALESCE(completed_at, created_at) AS at, label,"
        " scope_key, NULL::text AS type, NULL::text AS scope, NULL::int AS version, persona", "threads",
        CHRONICLES_MATCH, _terms(first))
    records = _each_term(
        "'record' AS source, id, content AS text, created_at AS at, NULL::text AS label, NULL::text AS scope_key,"
        " type, scope, version, persona, scope_id, hidden_by", "memory_records", RECORDS_MATCH, _terms(first))
    return f"chronicles AS MATERIALIZED ({chronicles}), records AS MATERIALIZED ({records})"


@functools.lru_cache(maxsize=4)
def _notes(keys: int) -> str:
    """What the conversation may see of `_note_matches` ($1 persona, $2 its keys, $`keys` the places of its memory),
    as NoteMatch's fields and the term each matched (k), then two NULLs where recall_matches puts a speaker."""
    return ("SELECT source, id, text, at, label, scope_key, type, scope, version, k, NULL, NULL FROM chronicles"
            f" WHERE persona = $1 AND {_among('scope_key', 2)} UNION ALL SELECT source, id, text, at, label, scope_key,"
            " type, scope, version, k, NULL, NULL FROM records WHERE persona = $1 AND type = 'short_term'"
            f" AND hidden_by IS NULL AND {_among(_RECORD_SCOPE, keys)}")


def _best_notes(rows: Sequence[Any], terms: list[str], limit: int) -> list[NoteMatch]:
    """The best `limit` chronicles, then the best `limit` versions, of the notes' rows (one per term matched)."""
    merged = _merged([tuple(row)[:10] for row in rows], slice(0, 2))
    found = [_ranked([r for r in merged if r[0] == source], terms, text=2, key=1, limit=limit)
             for source in ("chronicle", "record")]
    return [NoteMatch(*row[:9]) for row in found[0] + found[1]]


def _patterns(terms: list[str]) -> list[str]:
    """Each term's pattern (what `_terms` and the counts read, the terms' parameter)."""
    return [_like(t) for t in terms]


def _terms(patterns: int, words: int | None = None) -> str:
    """The terms as rows `q` (pattern, word if its parameter is given, n from 1), each column one array parameter: a
    statement's text is then the same for any number of terms and is prepared once per connection, where one text
    per number of terms was prepared at its first use on each (half of recall's time at 1k messages)."""
    if words is None:
        return f"unnest(${patterns}::text[]) WITH ORDINALITY AS q (pattern, n)"
    return f"unnest(${patterns}::text[], ${words}::text[]) WITH ORDINALITY AS q (pattern, word, n)"


# How each searched text is matched against a term's pattern: messages keep theirs folded to lower case
# (content_folded), so LIKE needs no folding per row; the rest fold as ILIKE does.
MESSAGES_MATCH = "content_folded LIKE"
CHRONICLES_MATCH = "chronicle_summary ILIKE"
RECORDS_MATCH = "content ILIKE"


_WINDOWS_RESET = window_reset_sql("SELECT unnest($1::bigint[])")  # a purge's threads


# The archive's size, and how many live messages match each term ($2), each count stopping at $1.
_MATCH_COUNTS = ("SELECT (SELECT COALESCE(MAX(seq), 0) FROM messages), ARRAY(SELECT (SELECT count(*) FROM (SELECT 1"
                 f" FROM messages WHERE {MESSAGES_MATCH} q.pattern AND deleted_at IS NULL LIMIT $1) AS hits)"
                 f" FROM {_terms(2)} ORDER BY q.n)")


def _each_term(columns: str, table: str, test: str, terms: str, where: str = "TRUE") -> str:
    """The rows matching each term through the trigram index (`test`: the column and its operator), with `columns`
    and the term's number `k`: a row matching several terms comes once for each (`_merged`).

    One index scan per term (`terms`: `_terms`), its pattern the join's key: a candidate is rechecked for that term
    alone, where one scan for all the terms would test each candidate against every term until one matched. The
    row's columns come with it, so nothing is looked up again by key."""
    return f"SELECT {columns}, (q.n - 1)::int AS k FROM {terms} JOIN {table} ON {test} q.pattern WHERE {where}"


def _merged(rows: Sequence[Sequence[Any]], key: slice) -> list[tuple[Any, ...]]:
    """One row per match whatever the number of terms it matched, those terms' numbers last (what `_ranked`
    reads)."""
    merged: dict[tuple[Any, ...], tuple[Any, ...]] = {}
    for row in rows:
        found = merged.get(tuple(row[key]))
        if found is None:
            merged[tuple(row[key])] = (*row[:-1], [row[-1]])
        else:
            found[-1].append(row[-1])
    return list(merged.values())


class PostgresStore(ThreadsSql, RecordsSql, BranchesSql, ClaimsSql, SettingsSql, UsageSql, CopyingSql):
    """PostgreSQL's own SQL (leases, trigram recall, shared changes); the rest is memory/sql's, numbered here."""

    def __init__(self, pool: asyncpg.Pool, search: asyncpg.Pool, clock: Clock = time.time):
        super().__init__(clock)
        self._pool = Lender(pool)
        self._search = Lender(search)  # recall's look-ups: its connections never plan a scan of a whole table
        self._shared_seen: int | None = None  # shared_changes as this process last read it
        # messages heard at once go in one statement, and so do replies' opening reads
        self._appends = Grouped(self._alone, self._together, apart=lambda item: item.thread_id)
        self._openings = Grouped(self._opening_alone, self._openings_together, most=OPENINGS_TOGETHER)

    @classmethod
    async def open(cls, url: str, clock: Clock = time.time, pool_size: int | None = None) -> PostgresStore:
        """Migrate, then connect (`pool_size` connections in all, else asyncpg's ten); anything unusable is a
        StoreError. Every connection is opened and warmed here (`_warm`) and kept, so the first burst of replies
        neither connects nor waits for a new server process to learn its tables (bench concurrency)."""
        size = pool_size or DEFAULT_POOL
        searchers = max(1, size // SEARCH_SHARE)
        try:
            con = await asyncpg.connect(url, command_timeout=60)
        except (OSError, asyncpg.PostgresError, ValueError) as exc:
            raise StoreError(f"cannot reach the database {safe_url(url)}: {exc}") from None
        try:
            await _migrate(con)
        except asyncpg.PostgresError as exc:
            raise StoreError(f"the database {safe_url(url)} cannot be used ({exc})") from None
        finally:
            await con.close()
        pools: list[asyncpg.Pool] = []
        try:
            for most, settings, warm in ((max(1, size - searchers), {}, _warm),
                                         (searchers, SEARCH_SETTINGS, _warm_rows)):
                # every connection is kept (and warm): none closed for idling, no timer armed at each return
                pools.append(await asyncpg.create_pool(url, command_timeout=60, min_size=most, max_size=most,
                                                       max_inactive_connection_lifetime=0, init=warm,
                                                       reset=_keep_session, server_settings=settings))
        except (OSError, asyncpg.PostgresError, ValueError) as exc:
            await asyncio.gather(*(pool.close() for pool in pools))
            raise StoreError(f"cannot reach the database {safe_url(url)}: {exc}") from None
        return cls(pools[0], pools[1], clock)

    async def close(self) -> None:
        await asyncio.gather(self._appends.drain(), self._openings.drain())
        await asyncio.gather(self._pool.close(), self._search.close())

    def pool_usage(self) -> tuple[int, int]:
        """Connections in use and the most this process may open, for the metrics."""
        lenders = (self._pool, self._search)
        return sum(lender.lent() for lender in lenders), sum(lender.size() for lender in lenders)

    async def schema_version(self) -> int:
        exists = await self._value("SELECT to_regclass('schema_version') IS NOT NULL")
        if not exists:
            return 0
        return int(await self._value("SELECT COALESCE(MAX(version), 0) FROM schema_version"))

    async def migrate(self) -> int:
        """Apply pending migrations in order, each in its own transaction, while holding the migration lock."""
        async with self._pool.acquire() as con:
            return await _migrate(con)

    @asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        """This task's statements share one connection until the block ends: one lending for its reads."""
        if self._own() is not None:
            yield
            return
        with _refusals():
            con = await self._pool.take()
        token = _HELD.set((asyncio.current_task(), self._pool, con))
        failed = True
        try:
            yield
            failed = False
        finally:
            _HELD.reset(token)
            await self._pool.release(con, failed=failed)

    def _own(self) -> Connection | None:
        """The connection this task holds (a task it started does not share it: one statement at a time)."""
        held = _HELD.get()
        return held[2] if held is not None and held[0] is asyncio.current_task() and held[1] is self._pool else None

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[Connection]:
        """One short transaction on a connection of the pool; a refusal is a StoreError, nothing saved."""
        con = self._own()
        with _refusals():
            if con is not None:
                async with con.transaction():
                    yield con
                return
            async with self._pool.acquire() as con, con.transaction():
                yield con

    # threads

    async def root_thread(self, persona: str, scope: Scope, window_ratio: float) -> Thread:
        found = await self.find_root(persona, scope)
        if found is None:
            if scope.guild_id is not None and await self._value(
                    "SELECT EXISTS (SELECT 1 FROM threads WHERE persona = $1 AND kind = 'root' AND channel_id = $2"
                    " AND guild_id != $3)", persona, scope.channel_id, scope.guild_id):
                raise OtherServer(scope.channel_id)
            await self._execute(
                "INSERT INTO threads (persona, kind, depth, window_ratio, scope_key, guild_id, channel_id,"
                " discord_thread_id, created_at) VALUES ($1, 'root', 0, $2, $3, $4, $5, $6, $7)"
                " ON CONFLICT (persona, scope_key) WHERE kind = 'root' DO NOTHING",
                persona, window_ratio, scope.key, scope.guild_id, scope.channel_id, scope.discord_thread_id,
                self.clock())
            found = await self.find_root(persona, scope)
        assert found is not None  # inserted, or found inserted by another writer
        return found

    async def insert_thread(self, thread: Thread) -> Thread:
        data = asdict(thread)
        marks = ", ".join(f"${i}" for i in range(1, len(data) + 1))
        async with self._transaction() as con:
            await con.execute(f"INSERT INTO threads ({', '.join(data)}) VALUES ({marks})", *data.values())
            await _follow_identity(con, "threads", "id")
        return await self.thread(thread.id)

    async def create_thread(
        self, parent: Thread, *, kind: str, label: str, window_ratio: float, chronicle_prompt: str | None,
        run_id: str | None, discord_thread_id: int | None = None, branch_id: str | None = None,
        anchor: NewMessage | None,
    ) -> tuple[Thread, Message | None]:
        now = self.clock()
        async with self._transaction() as con:
            child = _found(await con.fetchrow(
                "INSERT INTO threads (persona, kind, parent_thread_id, depth, window_ratio, label, chronicle_prompt,"
                " branch_id, scope_key, guild_id, channel_id, discord_thread_id, run_id, created_at, owner)"
                " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) RETURNING *",
                parent.persona, kind, parent.id, parent.depth + 1, window_ratio, label, chronicle_prompt, branch_id,
                parent.scope_key, parent.guild_id, parent.channel_id, discord_thread_id, run_id, now, self.owner))
            if anchor is None:
                return row_to.thread(child), None
            metadata = {**anchor.metadata, "stelis_thread_id": child["id"], "created_at": now}
            anchor_row = _found(await con.fetchrow(
                "INSERT INTO messages (thread_id, role, content, metadata, token_count, created_at)"
                " VALUES ($1, 'system', $2, $3, 0, $4) RETURNING *",
                parent.id, anchor.content, json.dumps(metadata, ensure_ascii=False), now))
            child = _found(await con.fetchrow("UPDATE threads SET anchor_seq = $1 WHERE id = $2 RETURNING *",
                                              anchor_row["seq"], child["id"]))
        return row_to.thread(child), row_to.message(anchor_row)

    async def close_thread(self, ended: Thread, anchor_metadata: dict[str, Any] | None, anchor_tokens: int, *,
                           revision: int | None = None) -> Thread:
        async with self._transaction() as con:
            row = await con.fetchrow(
                "UPDATE threads SET status = $1, chronicle_summary = $2, completed_at = $3 WHERE id = $4"
                " AND ($5::int IS NULL OR revision = $5) RETURNING *",
                ended.status, ended.chronicle_summary, ended.completed_at, ended.id, revision)
            if row is None:
                raise stale_summary(ended.id, revision)
            if anchor_metadata is not None and ended.anchor_seq is not None:
                await con.execute("UPDATE messages SET metadata = $1, token_count = $2 WHERE seq = $3",
                                  json.dumps(anchor_metadata, ensure_ascii=False), anchor_tokens, ended.anchor_seq)
                if ended.parent_thread_id is not None:  # the anchor is a message of the parent
                    await _revise(con, [ended.parent_thread_id])
        return row_to.thread(row)

    async def active_internal_threads(self, stale_before: float | None = None) -> list[Thread]:
        rows = await self._all(
            "SELECT t.* FROM threads t LEFT JOIN owners o ON o.owner = t.owner WHERE t.status = 'active'"
            " AND t.kind != 'root' AND t.discord_thread_id IS NULL AND t.branch_id IS NULL"
            " AND ($1::float8 IS NULL OR o.heartbeat_at IS NULL OR o.heartbeat_at < $1)"
            " ORDER BY t.depth DESC, t.id DESC", stale_before)
        return [row_to.thread(r) for r in rows]

    async def _set_window(self, thread_id: int, revision: int | None,
                          state: dict[str, int | float | str | None]) -> Thread:
        assignments = ", ".join(f"{k} = ${i}" for i, k in enumerate(state, start=3))
        row = await self._one(f"UPDATE threads SET {assignments} WHERE id = $1 AND ($2::int IS NULL OR revision = $2)"
                              " RETURNING *", thread_id, revision, *state.values())
        if row is None:
            raise stale_summary(thread_id, revision)
        return row_to.thread(row)

    # messages

    async def _append(self, thread_id: int, new: NewMessage, counting: tuple[Thread, Triggers] | None,
                      noted: Noted | None) -> tuple[Message, bool, float | None]:
        # a transaction's own statement, or window bookkeeping the shared statement does not write, goes alone
        if self._own() is not None or (noted is not None and not noted[1].keys() <= _NOTED_TOGETHER):
            return await self._append_alone(thread_id, new, counting, noted, self.clock())
        return await self._appends.add(Pending(thread_id, new, self.clock(), counting, noted))  # type: ignore[no-any-return]

    async def _append_alone(self, thread_id: int, new: NewMessage, counting: tuple[Thread, Triggers] | None,
                            noted: Noted | None, now: float) -> tuple[Message, bool, float | None]:
        """One statement, so one round trip: the message, its count and its thread's bookkeeping are stored
        together or not at all."""
        params = dict(zip(_MESSAGE_PARAMS, _message_row(thread_id, new, now), strict=True))
        store = _STORE_AUTHORED if new.author_id is not None else _STORE_UNAUTHORED
        noting = ""
        if noted is not None:
            revision, state = noted
            sets = ", ".join(f"{k} = $noted_{k}" for k in sorted(state))
            noting = f"noted AS (UPDATE threads SET {sets} WHERE id = $thread AND revision = $noted_revision)"
            params.update({f"noted_{k}": v for k, v in state.items()}, noted_revision=revision)
        if counting is None:
            row = await self._one(*named(f"WITH {noting} {store}" if noting else store, **params))
        else:
            thread, triggers = counting
            row = await self._one(*named(
                f"WITH stored AS ({store}), counted AS ({_NOTE_MESSAGE}){', ' + noting if noting else ''}"
                " SELECT stored.*, (SELECT due_at FROM counted) AS next_due FROM stored", **params,
                id=thread.id, persona=thread.persona, guild=thread.guild_id, channel=thread.channel_id,
                dthread=thread.discord_thread_id, threshold=triggers.threshold, idle=float(triggers.idle_seconds)))
        return await self._stored(thread_id, new, counting is not None, row)

    async def _stored(self, thread_id: int, new: NewMessage, counted: bool,
                      row: asyncpg.Record | None) -> tuple[Message, bool, float | None]:
        """What an append returns for the row its statement stored, or for none."""
        if row is None:  # a known external id: the message stored before; else its author opted out
            row = await self._one("SELECT * FROM messages WHERE external_id = $1", new.external_id) \
                if new.external_id is not None else None
            if row is None:
                raise OptedOut(new.author_id)
            return row_to.message(row), False, None
        if not counted:
            return row_to.message(row, leave_out=("next_due",)), True, None
        self.saw_conversation(thread_id)
        return row_to.message(row, leave_out=("next_due",)), True, row["next_due"]

    async def _alone(self, item: Pending) -> tuple[Message, bool, float | None]:
        return await self._append_alone(item.thread_id, item.new, item.counting, item.noted, item.now)

    async def _together(self, items: list[Pending]) -> None:
        """Appends waiting for one another, in one statement; where the database refuses it (a thread gone, a value
        the schema refuses), each goes alone, so only the append at fault fails."""
        try:
            rows = await self._all(_STORE_TOGETHER, *_columns_of(items))
        except (StoreError, asyncpg.IntegrityConstraintViolationError) as exc:
            refused = isinstance(exc, asyncpg.PostgresError) or isinstance(exc.__cause__, asyncpg.PostgresError)
            if not refused:  # the connection, not one append: each caller hears of it, none is sent again
                raise
            for item in items:
                await _answer(item, self._alone(item))
            return
        found = {row["thread_id"]: row for row in rows}
        for item in items:
            await _answer(item, self._stored(item.thread_id, item.new, item.counting is not None,
                                             found.get(item.thread_id)))

    async def append_many(self, thread_id: int, messages: list[NewMessage], seqs: list[int] | None = None,
                          created: list[float] | None = None, tokens: list[int] | None = None) -> int:
        now = self.clock()
        records = [_message_row(thread_id, m, created[i] if created else now, tokens[i] if tokens else None)
                   for i, m in enumerate(messages)]
        columns = ["thread_id", "role", "author_id", "author_name", "content", "metadata", "token_count",
                   "external_id", "created_at"]
        async with self._transaction() as con:
            if seqs:
                await con.copy_records_to_table("messages", records=[(s, *r) for s, r in zip(seqs, records,
                                                                                               strict=True)],
                                                columns=["seq", *columns])
                await _follow_identity(con, "messages", "seq")
                await _revise(con, [thread_id])  # a window already read may miss them
            else:
                await con.copy_records_to_table("messages", records=records, columns=columns)
        return len(records)

    # PostgreSQL indexes rows as they land: nothing waits to be indexed. New entries do wait in each trigram
    # index's pending list, which every search reads through (2 ms a look-up with 500 pages pending, 0.5 ms
    # without): tidying moves them into the index proper, as the bot's indexer does for SQLite when quiet.

    async def index_messages(self) -> int:
        return 0

    async def tidy_index(self, pages: int = 0) -> bool:
        for index in TRIGRAM_INDEXES:
            if await self._value("SELECT gin_clean_pending_list($1::regclass)", index):
                return True
        return False

    async def merge_index(self) -> None:
        while await self.tidy_index():
            pass

    @property
    def unindexed(self) -> int:
        return 0

    def unindexed_texts(self) -> list[str] | None:
        return []

    async def edit_message(self, external_id: int, content: str) -> Message | None:
        async with self._transaction() as con:
            row = await con.fetchrow("UPDATE messages SET content = $1, token_count = $2, edited_at = $3"
                                     " WHERE external_id = $4 AND deleted_at IS NULL"
                                     f" AND {remembered('messages.thread_id', 'messages.author_id')} RETURNING *",
                                     content, count_tokens(content), self.clock(), external_id)
            if row is not None:
                await _revise(con, [row["thread_id"]])
        return row_to.message(row) if row else None

    async def purge(self, *, author_id: int | None = None, thread_ids: list[int] | None = None,
                    external_id: int | None = None) -> dict[int, set[int]]:
        params: list[Any]
        if external_id is not None:
            where, params = "external_id = $2", [external_id]
        elif author_id is not None and thread_ids:
            where, params = "author_id = $2 AND thread_id = ANY($3::bigint[])", [author_id, thread_ids]
        else:
            return {}
        async with self._transaction() as con:
            said = await con.fetch(
                f"WITH old AS (SELECT seq, content, created_at FROM messages WHERE {where} AND content != ''"
                " FOR UPDATE) UPDATE messages m SET content = '', author_name = NULL, author_id = NULL,"
                " metadata = '{}', token_count = 0, deleted_at = COALESCE(m.deleted_at, $1) FROM old"
                " WHERE m.seq = old.seq RETURNING m.thread_id, m.seq, old.content, old.created_at",
                self.clock(), *params)
            rows = [(r[0], r[1]) for r in said]
            if rows:
                rows += await _erase_quotes(con, Erased.of(r[2] for r in said), min(s for _, s in rows),
                                            min(r[3] for r in said), self.clock())
                await _revise(con, sorted({t for t, _ in rows}))
                await con.execute(_WINDOWS_RESET, sorted({t for t, _ in rows}))
                await con.execute("INSERT INTO erasures (seq, thread_id) SELECT * FROM unnest($1::bigint[],"
                                  " $2::bigint[]) ON CONFLICT DO NOTHING", [s for _, s in rows], [t for t, _ in rows])
                for statement in FORGET_COUNTS:
                    await con.execute(statement)
            await con.execute(_SHARED_CHANGE)  # what memory and branches quoted (other processes read them again)
        self.memory_changes += 1  # a pin that quoted it is gone
        self.branch_changes += 1  # and a branch's words
        return row_to.seqs_by_thread(rows)

    async def scrub(self) -> None:
        # An update leaves the old row version in its page until a vacuum, and a plain vacuum leaves its bytes in
        # the page's free space: only a full vacuum writes the tables (and their indexes) anew without them. It
        # locks each table while it runs: a forget-me is rare, and what it erases must not stay readable.
        with _refusals():
            await self._pool.execute("VACUUM (FULL) messages, memory_records, threads, memory_pins, branches, tasks,"
                                     " playbook_steps, playbook_runs, autonomy_log")

    async def traces(self, text: str) -> list[str]:
        """Every place the database still holds a text (the trigram indexes live on these columns)."""
        found = []
        for table, column in (("messages", "content"), ("messages", "metadata"), ("memory_records", "content"),
                              ("threads", "chronicle_summary"), ("threads", "window_summary"),
                              ("threads", "window_bridge"),
                              *((table, column) for table, _, column, _, _ in QUOTING)):
            if await self._value(f"SELECT EXISTS (SELECT 1 FROM {table} WHERE strpos({column}, $1) > 0)",
                                         text):
                found.append(f"{table}.{column}")
        return found

    async def delete_records(self, ids: list[int]) -> None:
        if ids:
            async with self._transaction() as con:
                await con.execute("DELETE FROM memory_records WHERE id = ANY($1::bigint[])", ids)
                await con.execute(_SHARED_CHANGE)
            self.memory_changes += 1

    async def _changed_for_all(self, sql: str, params: Sequence[Any] = ()) -> int:
        """The write and, where it changed a row, the shared change count moved, in one statement."""
        row = await self._one(f"WITH changed AS ({numbered(sql)} RETURNING 1) SELECT COUNT(*),"
                              " CASE WHEN COUNT(*) > 0 THEN nextval('shared_changes') END FROM changed", *params)
        assert row is not None  # an aggregate's one row
        return int(row[0])

    async def opening(self, thread_id: int, after_seq: int | None, limit: int, versions: int = 0) -> Opening:
        """Where another process changed memory versions, pins, branches or what a channel shares, which this one
        may hold in a cache, they are read again: the shared change count comes with the thread. The page and the
        thread's own memory come as arrays of rows in the same statement; openings asked at once share one."""
        asked = Asked(thread_id, after_seq, limit, versions)
        row = await (self._opening_alone(asked) if self._own() is not None else self._openings.add(asked))
        if row is None:
            raise KeyError(f"no thread {thread_id}")
        seen = row["shared_seen"]
        if seen != self._shared_seen:
            self._shared_seen = seen
            self.memory_changes += 1
            self.branch_changes += 1
            self.sharing_version += 1
        thread = row_to.thread(row, leave_out=("i", "shared_seen", "newest_record", "page", "memory"))
        own = own_memory(thread, thread, versions) if versions else ()
        return Opening(self._as_noted(thread), int(row["newest_record"]), after_seq,
                       [row_to.message(m) for m in row["page"]], limit, own,
                       by_place(own, (row_to.record(r) for r in row["memory"])) if versions else [])

    async def _opening_alone(self, asked: Asked) -> asyncpg.Record | None:
        return await self._one(_OPENING, [asked.thread_id], [asked.after_seq], [asked.limit], [asked.versions])

    async def _openings_together(self, items: list[Asked]) -> None:
        rows = await self._all(_OPENING, [a.thread_id for a in items], [a.after_seq for a in items],
                               [a.limit for a in items], [a.versions for a in items])
        found = {row["i"]: row for row in rows}
        answer_each([item.answer for item in items], [(True, found.get(i)) for i in range(1, len(items) + 1)])

    # branches (seed 001)

    # memory records

    async def add_record(self, persona: str, scope: str, scope_id: int, type_: str, content: str,
                         first_seq: int | None = None, last_seq: int | None = None,
                         metadata: dict[str, Any] | None = None, version: int | None = None,
                         hides: Sequence[int] = ()) -> MemoryRecord:
        async with self._transaction() as con:
            record = await _add_record(con, row_to.record_params(persona, scope, scope_id, type_, content, first_seq,
                                                                 last_seq, metadata, self.clock(), version))
            if hides:
                await con.execute(
                    "UPDATE memory_records SET hidden_by = $1 WHERE persona = $2 AND scope = $3 AND scope_id = $4"
                    " AND type = $5 AND version = ANY($6::int[])", record.version, persona, scope, scope_id, type_,
                    list(hides))
                await con.execute(_SHARED_CHANGE)  # other processes' caches of the layers read them again
        if hides:
            self.memory_changes += 1
        return record

    async def claim_due(self, now: float, owner: str, lease_seconds: float, limit: int,
                        thread_id: int | None = None) -> list[MemoryChannel]:
        """Take due conversations (or the one given, due or not) for `owner`; rows another worker holds are
        skipped, not waited for."""
        rows = await self._all(
            "UPDATE memory_channels SET lease_owner = $1, lease_until = $2 WHERE thread_id IN ("
            " SELECT thread_id FROM memory_channels WHERE (lease_until IS NULL OR lease_until < $3"
            " OR ($4::bigint IS NOT NULL AND lease_owner = $1))"
            " AND CASE WHEN $4::bigint IS NULL THEN due_at IS NOT NULL AND paused = 0"
            " AND due_at <= $3 ELSE thread_id = $4 END ORDER BY due_at NULLS LAST LIMIT $5"
            " FOR UPDATE SKIP LOCKED) RETURNING *", owner, now + lease_seconds, now, thread_id, limit)
        return sorted((row_to.channel(r) for r in rows), key=lambda c: (c.due_at is None, c.due_at or 0.0))

    async def save_short_term(self, ch: MemoryChannel, content: str, first_seq: int, last_seq: int, counted: int,
                              now: float, triggers: Triggers, metadata: dict[str, Any], *, live: int,
                              revision: int | None = None) -> MemoryRecord:
        scope, scope_id = ch.scope
        params = row_to.record_params(ch.persona, scope, scope_id, "short_term", content, first_seq, last_seq, metadata,
                                now, None)
        async with self._transaction() as con:
            # A purge marks its threads (_revise) before it commits: holding the thread's row here, the count below
            # sees an erasure that committed first, and one that commits later finds this version to rewrite.
            now_revision = await con.fetchval("SELECT revision FROM threads WHERE id = $1 FOR SHARE", ch.thread_id)
            if await con.fetchval(numbered(LIVE_IN_RANGE), ch.thread_id, first_seq - 1, last_seq) < live \
                    or (revision is not None and now_revision != revision):
                raise StaleUpdate(f"messages of thread {ch.thread_id} changed while its memory was written")
            fenced = await con.execute(
                "UPDATE memory_channels SET covered_seq = $1, pending_count = GREATEST(0, pending_count - $2),"
                " failures = 0, long_term_pending = $3 WHERE thread_id = $4 AND covered_seq IS NOT DISTINCT FROM $5",
                last_seq, counted, int(scope == "channel"), ch.thread_id, ch.covered_seq)
            if not _count(fenced):
                raise StaleUpdate(f"thread {ch.thread_id}'s memory moved on while this update ran")
            if scope == "thread":
                row = await con.fetchrow(*named(
                    "INSERT INTO memory_records (persona, scope, scope_id, type, version, content, first_seq,"
                    " last_seq, metadata, created_at) VALUES ($persona, $scope, $scope_id, $type, 1, $content,"
                    " $first_seq, $last_seq, $metadata, $now) ON CONFLICT (persona, scope, scope_id, type, version)"
                    " DO UPDATE SET content = excluded.content, first_seq = excluded.first_seq,"
                    " last_seq = excluded.last_seq, metadata = excluded.metadata, created_at = excluded.created_at"
                    " RETURNING *", **{k: v for k, v in params.items() if k != "version"}))
                record = row_to.record(_found(row))
            else:
                record = await _add_record(con, params)
            await _recompute_due(con, ch.thread_id, now, triggers)
        return record

    async def save_long_term(self, ch: MemoryChannel, content: str, first_seq: int | None, last_seq: int | None,
                             metadata: dict[str, Any], now: float, triggers: Triggers) -> MemoryRecord:
        scope, scope_id = ch.scope
        async with self._transaction() as con:
            fenced = await con.execute("UPDATE memory_channels SET long_term_pending = 0, failures = 0"
                                       " WHERE thread_id = $1 AND long_term_pending <> 0", ch.thread_id)
            if not _count(fenced):
                raise StaleUpdate(f"thread {ch.thread_id}'s long-term memory was merged by another worker")
            record = await _add_record(con, row_to.record_params(ch.persona, scope, scope_id, "long_term", content,
                                                           first_seq, last_seq, metadata, now, None))
            await _recompute_due(con, ch.thread_id, now, triggers)
        return record

    async def long_term_saved(self, thread_id: int, now: float, triggers: Triggers) -> None:
        async with self._transaction() as con:
            await con.execute("UPDATE memory_channels SET long_term_pending = 0, failures = 0 WHERE thread_id = $1",
                              thread_id)
            await _recompute_due(con, thread_id, now, triggers)

    async def nothing_new(self, thread_id: int, now: float, triggers: Triggers) -> None:
        async with self._transaction() as con:
            await con.execute("UPDATE memory_channels SET pending_count = 0, failures = 0 WHERE thread_id = $1",
                              thread_id)
            await _recompute_due(con, thread_id, now, triggers)

    async def memory_failed(self, thread_id: int, now: float, base_delay: float) -> float:
        async with self._transaction() as con:
            failures = await con.fetchval("UPDATE memory_channels SET failures = failures + 1 WHERE thread_id = $1"
                                          " RETURNING failures", thread_id)
            delay = backoff(base_delay, int(failures or 1))
            await con.execute("UPDATE memory_channels SET due_at = $1 WHERE thread_id = $2", now + delay, thread_id)
        return delay

    # playbook runs

    # tasks (seed 001)

    # the autonomous pulse's decision log

    async def messages_since(self, persona: str, scope_keys: tuple[str, ...], since: float,
                             limit: int) -> list[Message]:
        rows = await self._all(
            "SELECT * FROM (SELECT m.* FROM messages m JOIN threads t ON t.id = m.thread_id"
            f" WHERE t.persona = $1 AND {_among('t.scope_key', 2)}"
            " AND m.created_at > $3 AND m.deleted_at IS NULL AND m.role IN ('user', 'assistant')"
            f" AND {_NOT_PLACEHOLDER} ORDER BY m.seq DESC LIMIT $4) AS newest ORDER BY seq",
            persona, _key_set(scope_keys), since, limit)
        return [row_to.message(r) for r in rows]

    # claims

    async def clear_claims(self) -> int:
        """Drop the claims whose lease ran out (a shared database: the others may be held by live processes)."""
        return _count(await self._execute("DELETE FROM claims WHERE until < $1", self.clock()))

    # recall: substring look-ups through pg_trgm, always filtered to what one conversation may see

    async def match_counts(self, terms: list[str], cap: int) -> tuple[int, dict[str, int]]:
        (row,) = await self._searched(_MATCH_COUNTS, cap, _patterns(terms))
        return int(row[0]), dict(zip(terms, row[1], strict=True))

    async def saved_counts(self, words: list[int]) -> dict[int, tuple[int, int]]:
        rows = await self._all("SELECT word, matches, archive FROM recall_counts WHERE word = ANY($1::bigint[])",
                               words)
        return {int(r[0]): (int(r[1]), int(r[2])) for r in rows}

    async def save_counts(self, counts: list[tuple[int, int, int]], stale_below: int = 0) -> int:
        if not counts:
            return 0
        async with self._transaction() as con:
            # A newer count replaces the one kept; one taken before the last purge could hold an erased word's
            saved = _count(await con.execute(
                "INSERT INTO recall_counts (word, matches, archive) SELECT * FROM unnest($1::bigint[], $2::int[],"
                " $3::bigint[]) AS c (word, matches, archive) WHERE c.archive > (SELECT archive FROM"
                " recall_counts_erased) ON CONFLICT (word) DO UPDATE SET matches = excluded.matches,"
                " archive = excluded.archive WHERE excluded.archive >= recall_counts.archive",
                *map(list, zip(*counts, strict=True))))
            await con.execute("DELETE FROM recall_counts WHERE archive < $1", stale_below)
        return saved

    async def scan_messages(self, needle: str, persona: str, scope_keys: tuple[str, ...], window: int,
                            limit: int) -> list[MessageMatch]:
        rows = await self._all(
            _MATCHED_MESSAGES +
            " WHERE m.seq > (SELECT COALESCE(MAX(seq), 0) FROM messages) - $1 AND strpos(m.content_folded, $2) > 0"
            f" AND {_seen_by(3)} ORDER BY m.seq DESC LIMIT $5", window, needle, persona, _key_set(scope_keys), limit)
        return [MessageMatch(*row) for row in rows]

    async def replies_to(self, seqs: list[int], persona: str, scope_keys: tuple[str, ...]) -> dict[int, MessageMatch]:
        if not seqs:
            return {}
        # Each reply by its key, then its thread by its key (as recall's look-ups: OFFSET 0 keeps the planner from
        # walking every thread of the persona for each); on recall's connections, whose one plan serves any parents
        # (the main pool's planned each new array anew).
        rows = await self._searched(
            f"WITH next AS MATERIALIZED (SELECT p.seq AS parent, ({_NEXT_REPLY}) AS seq FROM messages p"
            f" WHERE p.seq = ANY($1::bigint[])) SELECT next.parent, {_MATCH_COLUMNS} FROM next"
            " JOIN messages m ON m.seq = next.seq CROSS JOIN LATERAL (SELECT persona, scope_key, kind, label"
            f" FROM threads WHERE threads.id = m.thread_id OFFSET 0) AS t WHERE {_seen_by(2)}",
            seqs, persona, _key_set(scope_keys))
        return {int(row[0]): MessageMatch(*row[1:]) for row in rows}

    async def recall_matches(self, terms: list[str], message_terms: list[str], persona: str,
                             scope_keys: tuple[str, ...], scopes: tuple[tuple[str, int], ...], limit: int,
                             note_limit: int, days: Sequence[tuple[float, float]] = (), day_limit: int = 0,
                             whole_from: tuple[int, int] | None = None) -> Recalled:
        """All the look-ups in one statement: one round trip and one pooled connection, where several at once on a
        machine of two cores only made each wait for the others (bench context_latency at 10k: recall's share of
        an assembly 3.15 ms with two at once, 2.95 one after the other, 2.5 in one statement)."""
        params: list[Any] = [persona, _key_set(scope_keys)]

        def number(*values: Any) -> int:  # the first of the values' parameter numbers
            params.extend(values)
            return len(params) - len(values) + 1

        ctes, selects = [], []
        if message_terms:
            ranking = _message_ranking(number(_patterns(message_terms), [t.lower() for t in message_terms]),
                                       number(limit))
            ctes.append(ranking)
            selects.append(_BEST_AS_NOTES)
        if terms:
            ctes.append(_note_matches(number(_patterns(terms))))
            selects.append(_notes(number(_record_keys(scopes))))
        shown = number(*(whole_from or (0, 0))) if days else 0
        for i, (start, end) in enumerate(days):
            selects.append(_day_as_notes(i, number(start), number(end), number(day_limit), shown))
        if not selects:
            return Recalled([], [], [])
        rows = await self._searched(("WITH " + ", ".join(ctes) + " " if ctes else "") + " UNION ALL ".join(selects),
                                    *params)
        found: dict[str, list[Any]] = {}
        for row in rows:
            found.setdefault(row[0], []).append(row)
        messages = [_matched_message(row) for row in sorted(found.get("message", []), key=lambda row: row[9])]
        notes = [row for source in ("chronicle", "record") for row in found.get(source, [])]
        each_day = [sorted((row for row in found.get("day", []) if row[8] == i), key=lambda row: row[9])
                    for i in range(len(days))]
        return Recalled(messages, _best_notes(notes, terms, note_limit),
                        [[_matched_message(row) for row in rows] for rows in each_day])

    # settings

    # copying a whole database

    async def load_rows(self, table: str, rows: list[dict[str, Any]]) -> int:
        """Through COPY into a scratch table, then one INSERT that skips what is there."""
        if not rows:
            return 0
        copy_keys(table)
        columns = list(rows[0])
        async with self._transaction() as con:
            await con.execute(f"CREATE TEMP TABLE incoming (LIKE {table}) ON COMMIT DROP")
            await con.copy_records_to_table("incoming", columns=columns,
                                            records=[tuple(r[c] for c in columns) for r in rows])
            listed = ", ".join(columns)
            added = _count(await con.execute(f"INSERT INTO {table} ({listed}) SELECT {listed} FROM incoming"
                                             " ON CONFLICT DO NOTHING"))
            if table in IDENTITIES:
                await _follow_identity(con, table, IDENTITIES[table])
        return added

    # plumbing

    async def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[asyncpg.Record]:
        return await self._all(numbered(sql), *params)

    async def _written(self, sql: str, params: Sequence[Any] = ()) -> list[asyncpg.Record]:
        return await self._all(numbered(sql), *params)

    async def _changed(self, sql: str, params: Sequence[Any] = ()) -> int:
        return _count(await self._execute(numbered(sql), *params))

    async def _one(self, sql: str, *params: Any) -> asyncpg.Record | None:
        with _refusals():
            return await (self._own() or self._pool).fetchrow(sql, *params)

    async def _all(self, sql: str, *params: Any) -> list[asyncpg.Record]:
        with _refusals():
            return list(await (self._own() or self._pool).fetch(sql, *params))

    async def _searched(self, sql: str, *params: Any) -> list[asyncpg.Record]:
        """A look-up through the trigram indexes, on a connection of the search pool (SEARCH_SETTINGS)."""
        with _refusals():
            return list(await self._search.fetch(sql, *params))

    async def _value(self, sql: str, *params: Any) -> Any:
        with _refusals():
            return await (self._own() or self._pool).fetchval(sql, *params)

    async def _execute(self, sql: str, *params: Any) -> str:
        """One statement in its own transaction; asyncpg's status line ("UPDATE 3") comes back."""
        with _refusals():
            return await (self._own() or self._pool).execute(sql, *params)



# What an assembly reads first (Store.opening), for each thread asked (q): a page of its live messages newest first,
# after q.after_seq or from its window's start; and, with q.versions, its memory: records.own_memory of thread t (its
# channel's long-term memory and q.versions newest versions, its Discord thread's version, its server's long-term
# memory), the places taken from its row (a NULL place matches nothing).
_OWN_MEMORY = "SELECT m FROM (" + " UNION ALL ".join(
    f"(SELECT r AS m FROM memory_records r WHERE r.persona = t.persona AND r.scope = '{scope}' AND r.scope_id = {place}"
    f" AND r.type = '{type_}' AND r.hidden_by IS NULL ORDER BY r.version DESC LIMIT {most})"
    for scope, place, type_, most in (("channel", "COALESCE(t.channel_id, 0)", "long_term", "1"),
                                      ("channel", "COALESCE(t.channel_id, 0)", "short_term", "q.versions"),
                                      ("thread", "t.discord_thread_id", "short_term", "1"),
                                      ("workspace", "t.guild_id", "long_term", "1"))) + ") AS own"
_OPENING = (
    "SELECT q.i, (SELECT last_value * is_called::int FROM shared_changes) AS shared_seen,"
    f" {NEWEST_RECORD}, t.*, ARRAY(SELECT m FROM messages m WHERE m.thread_id = t.id AND m.seq > COALESCE(q.after_seq,"
    " t.window_start_seq - 1, -1) AND m.deleted_at IS NULL ORDER BY m.seq DESC LIMIT q.lim) AS page,"
    f" CASE WHEN q.versions > 0 THEN ARRAY({_OWN_MEMORY}) END AS memory"
    " FROM unnest($1::bigint[], $2::bigint[], $3::int[], $4::int[]) WITH ORDINALITY"
    " AS q (id, after_seq, lim, versions, i) JOIN threads t ON t.id = q.id"
)


async def _revise(con: Connection, thread_ids: list[int]) -> None:
    """A message stored in these threads changed: their revision moves, in the transaction that changed it."""
    await con.execute("UPDATE threads SET revision = revision + 1 WHERE id = ANY($1::bigint[])", thread_ids)


async def _erase_quotes(con: Connection, erased: Erased, after_seq: int, after: float,
                        now: float) -> list[tuple[int, int]]:
    """Erase what quoted the erased texts (as on SQLite): tool results, and the free texts of QUOTING."""
    if not erased:
        return []
    tools = await con.fetch("SELECT seq, thread_id, content FROM messages WHERE role = 'tool' AND seq > $1"
                            " AND deleted_at IS NULL", after_seq)
    quoting = [(r[1], r[0]) for r in tools if erased.quoted_in(r[2])]
    await con.executemany("UPDATE messages SET content = $1, token_count = $2, edited_at = $3 WHERE seq = $4",
                          [(ERASED, count_tokens(ERASED), now, seq) for _, seq in quoting])
    for table, key, column, kind, written in QUOTING:
        since = f"{written} >= $1" if written else "$1::float8 IS NOT NULL"  # no time of its own: every row
        found = await con.fetch(f"SELECT {key}, {column} FROM {table} WHERE {since}", after)
        keys = [(r[0],) for r in found if erased.quoted_in(r[1])]
        if kind == "row":
            await con.executemany(f"DELETE FROM {table} WHERE {key} = $1", keys)
        else:
            await con.executemany(f"UPDATE {table} SET {column} = $1 WHERE {key} = $2",
                                  [(erased_value(kind), k) for (k,) in keys])
    return quoting


def _message_row(thread_id: int, new: NewMessage, created: float, tokens: int | None = None) -> tuple[Any, ...]:
    """A message's columns, in the order of `messages` and of _STORE_MESSAGE's `_MESSAGE_PARAMS` (its metadata as JSON
    text, its tokens counted here)."""
    return (thread_id, new.role, new.author_id, new.author_name, new.content,
            json.dumps(new.metadata, ensure_ascii=False), count_tokens(new.content) if tokens is None else tokens,
            new.external_id, created)


def _columns_of(items: list[Pending]) -> list[list[Any]]:
    """_STORE_TOGETHER's arrays: one element per append, in the order of its columns."""
    rows = []
    for p in items:
        counted: tuple[Any, ...] = (None,) * 6
        if p.counting is not None:
            thread, triggers = p.counting
            counted = (thread.persona, thread.guild_id, thread.channel_id, thread.discord_thread_id,
                       triggers.threshold, float(triggers.idle_seconds))
        revision, state = p.noted if p.noted is not None else (None, {})
        rows.append((*_message_row(p.thread_id, p.new, p.now), p.counting is not None, *counted, revision,
                     "memory_as_of" in state, state.get("memory_as_of"), "window_cached_after" in state,
                     state.get("window_cached_after")))
    return [list(column) for column in zip(*rows, strict=True)]


async def _answer(item: Pending, work: Awaitable[Any]) -> None:
    """An append's caller gets what its work returns or raises (one that stopped waiting, nothing)."""
    try:
        result = await work
    except Exception as exc:
        if not item.answer.done():
            item.answer.set_exception(exc)
        return
    if not item.answer.done():
        item.answer.set_result(result)


@contextmanager
def _refusals() -> Iterator[None]:
    """The server refused or was lost (a full disk, a lost connection, a broken statement): a StoreError.
    A broken rule of the schema stays what it is: the caller's bug, not the database's."""
    try:
        yield
    except asyncpg.IntegrityConstraintViolationError:
        raise
    except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as exc:
        raise StoreError(f"the database refused the work ({type(exc).__name__}: {exc}); nothing of it was saved") \
            from exc


async def _add_record(con: Connection, params: dict[str, Any]) -> MemoryRecord:
    return row_to.record(_found(await con.fetchrow(*named(_ADD_RECORD, **params))))


async def _migrate(con: asyncpg.Connection | Connection) -> int:
    """Apply pending migrations in order, each in its own transaction, while holding the migration lock."""
    migrations = migration_files()
    latest = len(migrations)
    await con.execute("SELECT pg_advisory_lock($1)", MIGRATION_LOCK)
    try:
        await con.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY,"
                          " applied_at DOUBLE PRECISION NOT NULL)")
        current = int(await con.fetchval("SELECT COALESCE(MAX(version), 0) FROM schema_version"))
        if current > latest:
            raise StoreError(f"database schema version {current} is newer than this Stelis understands "
                             f"({latest}); upgrade Stelis or use another database")
        for version in range(current + 1, latest + 1):
            log.info("applying schema migration %s", migrations[version - 1].name)
            async with con.transaction():
                # a migration may rewrite a large table: it is not held to a query's usual timeout
                await con.execute(migrations[version - 1].read_text(), timeout=MIGRATION_SECONDS)
                await con.execute("INSERT INTO schema_version VALUES ($1, $2)", version, time.time())
            log.info("applied schema migration %s", migrations[version - 1].name)
    finally:
        await con.execute("SELECT pg_advisory_unlock($1)", MIGRATION_LOCK)
    return latest - current


async def _warm(con: asyncpg.Connection) -> None:
    """A new connection learns the types a reply's opening statement takes and reads (asyncpg asks the server, once
    per connection), and its server process reads those tables' catalog entries: here, not in a reply."""
    await con.fetch(_OPENING, [], [], [], [])


async def _warm_rows(con: asyncpg.Connection) -> None:
    """A search connection learns the row types alone: planned with its settings, the opening statement would cost
    enough for the server to compile it (JIT), a tenth of a second a connection."""
    await con.fetch("SELECT ARRAY(SELECT m FROM messages m WHERE FALSE), ARRAY(SELECT r FROM memory_records r"
                    " WHERE FALSE)")


async def _keep_session(con: asyncpg.Connection) -> None:
    """A connection goes back to the pool as it is: the store leaves no session state behind (no session
    locks held, no settings, no listeners), so asyncpg's reset would be a round trip per query for nothing.
    Only a transaction a cancellation left open is rolled back."""
    if con.is_in_transaction():
        await con.execute("ROLLBACK")


def _seen_by(first: int) -> str:
    """A live message (not a placeholder) of the persona's conversations among the scope keys: the rule every
    recall look-up applies; its parameters are the persona ($first), then the keys (`_key_set`)."""
    return (f"t.persona = ${first} AND {_among('t.scope_key', first + 1)} AND m.deleted_at IS NULL"
            f" AND {_NOT_PLACEHOLDER}")


def _among(column: str, param: int) -> str:
    """`column` is one of the keys parameter `param` holds (`_key_set`)."""
    return f"${param}::jsonb ? {column}"


@functools.lru_cache(maxsize=1_024)  # a conversation each: a busy server's burst of 500 went round 256
def _key_set(keys: tuple[str, ...]) -> str:
    """Keys as one parameter that finds a key by binary search: a JSON object's keys. `= ANY(array)` compares each
    row with every key in turn (a generic plan does not hash a parameter's array): among a server's 1,001 visible
    conversations, 6.3 ms to pick its threads where this takes 0.5. Kept: a conversation asks with the same keys
    turn after turn, and writing a thousand of them takes 0.2 ms."""
    return json.dumps(dict.fromkeys(keys, 1), ensure_ascii=False)


@functools.lru_cache(maxsize=1_024)
def _record_keys(scopes: tuple[tuple[str, int], ...]) -> str:
    """The places of visible memory versions as one key set (`_RECORD_SCOPE`)."""
    return _key_set(tuple(f"{scope}:{scope_id}" for scope, scope_id in scopes))


def _found(row: asyncpg.Record | None) -> asyncpg.Record:
    """A row a statement always returns (an INSERT ... RETURNING, an UPDATE of a row known to exist)."""
    assert row is not None
    return row


async def _recompute_due(con: Connection, thread_id: int, now: float, triggers: Triggers) -> None:
    await con.execute(*named(_RECOMPUTE_DUE, now=now, threshold=triggers.threshold,
                             idle=float(triggers.idle_seconds), id=thread_id))


async def _follow_identity(con: Connection, table: str, column: str) -> None:
    """After rows came with their own ids (an import), new rows continue above them."""
    await con.execute(f"SELECT setval(pg_get_serial_sequence('{table}', '{column}'),"
                      f" GREATEST((SELECT MAX({column}) FROM {table}), 1))")


def migration_files() -> list[Path]:
    return numbered_migrations(MIGRATIONS_DIR)



