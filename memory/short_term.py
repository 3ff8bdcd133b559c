"""Versioned short-term memory and long-term consolidation (seed 004).

A due conversation gets one new short-term version summarising only the messages since the last
one (as many as one request reads: the rest wait for the next version), with the previous versions as
context; then its channel's long-term memory is merged with it.
The workspace (guild) long-term memory is merged from the shareable channels once per run.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from typing import Any

from memory import claims, provenance
from memory.extractive import extractive_summary
from memory.llm import LLM, Block, LLMError, LLMRequest, RequestTooLarge, Turn
from memory.records import MemoryChannel, MemoryRecord, Message, Thread
from memory.settings import MemorySettings
from memory.store import Store
from memory.summarise import Line, summarise
from memory.templates import render
from memory.transcript import bridge_summary, dated_transcript, rolling_summary
from memory.vetting import vetted

log = logging.getLogger(__name__)
ALL_VERSIONS = 10_000  # a rebuild reads the history this far back
EVERY_RECORD = 1_000_000  # every version a conversation's memory has: a deletion or a rewrite reaches this far


@dataclass(frozen=True)
class Outcome:
    thread_id: int
    short_term: MemoryRecord | None = None
    long_term: MemoryRecord | None = None
    error: str | None = None


async def update(store: Store, llm: LLM, ch: MemoryChannel, settings: MemorySettings, now: float,
                 force: bool = False) -> Outcome:
    """Bring one conversation's memory up to date; an LLM failure writes nothing and schedules a retry."""
    scope, scope_id = ch.scope
    try:
        if ch.long_term_pending:  # a crash between the short-term save and the long-term update
            await _long_term(store, llm, ch, settings, now)
        # Read before its messages: a change to any of them from now on (an erasure, an anchor's chronicle written
        # again) moves the thread's revision, and the save below refuses then.
        as_read = await store.thread(ch.thread_id)
        messages = [m async for m in store.span(ch.thread_id, (ch.covered_seq or 0) + 1, None)]
        previous = await store.recent_records(ch.persona, scope, scope_id, "short_term",
                                              settings.short_term.max_history_count)
        redone = None
        if not messages and force and previous:  # regenerate the latest version over its own range
            redone = previous.pop()
            messages = [m async for m in store.span(ch.thread_id, redone.first_seq, (redone.last_seq or 0) + 1)]
        if not messages:
            await store.nothing_new(ch.thread_id, now, settings.triggers)
            return Outcome(ch.thread_id)
        pins = await store.pins(ch.persona, scope, scope_id)
        thread = as_read if redone is None else None  # a regenerated version reads its own messages alone
        counted = ch.pending_count  # what the version takes off the count of messages heard since the last one
        if redone is None:  # a regenerated version keeps its range, however long
            covered, text = await _first_version(llm, messages, ch.thread_id, thread, previous, pins, settings)
            counted -= min(counted, sum(m.role == "user" for m in messages[len(covered):]))  # the rest wait
            messages = covered
        else:
            text = await _summary(llm, _lines(messages, ch.thread_id, thread), previous, pins, settings)
        content = keep_pins(text, pins)
        if redone is not None and content == redone.content:  # the same text again: no copy as a new version
            await store.nothing_new(ch.thread_id, now, settings.triggers)
            return Outcome(ch.thread_id)
        # Someone erased while this was written: their words (the range's live count falls), or words an anchor's
        # chronicle or a window's summary or bridge read here held (the thread's revision moved: a purge starts the
        # window afresh in its own transaction): the save refuses (StaleUpdate), forget-me rewrites what covered
        # them (the version's range, or where its reading began: read_from), and the next scan writes it anew.
        record = await store.save_short_term(
            ch, content, messages[0].seq, messages[-1].seq, counted, now, settings.triggers,
            {"messages": len(messages), "pins": pins, "first_at": messages[0].created_at,
             "last_at": messages[-1].created_at, **_read_from(messages, thread)}, live=len(messages),
            revision=as_read.revision,
        )
        log.info("short-term memory v%d for thread %d covers messages %d-%d", record.version, ch.thread_id,
                 record.first_seq, record.last_seq)
        saved = await store.memory_channel(ch.thread_id)
        long_term = await _long_term(store, llm, saved, settings, now) if scope == "channel" and saved else None
        return Outcome(ch.thread_id, record, long_term)
    except LLMError as exc:
        delay = await store.memory_failed(ch.thread_id, now, settings.work.retry_seconds)
        log.warning("memory update of thread %d failed (%s); retry in %.0f s", ch.thread_id, exc.notice, delay)
        return Outcome(ch.thread_id, error=exc.notice)


async def _first_version(llm: LLM, messages: list[Message], thread_id: int, thread: Thread | None,
                         previous: list[MemoryRecord], pins: list[str],
                         settings: MemorySettings) -> tuple[list[Message], str]:
    """The messages a version covers, and its text: a backlog longer than one request (stelis.chunk_tokens) that
    the model reads that much of in one request gets a version of its oldest messages, and the rest wait for the
    next one, instead of parts summarised and combined (a backlog just over the ceiling cost two more requests
    for a remainder the next version reads anyway). Where the model's context holds less, all go in parts: a
    remainder would save a part there but leave memory further behind the window (bench cache_efficiency at 16k)."""
    limit = settings.stelis.chunk_tokens
    lines = _lines(messages, thread_id, thread)
    if _size(lines) > limit and (fitting := _fitting(messages, thread_id, thread, limit)):
        covered = messages[:fitting]
        with contextlib.suppress(RequestTooLarge):  # refused before anything was written
            return covered, await _summary(llm, _lines(covered, thread_id, thread), previous, pins, settings,
                                           in_parts=False)
    return messages, await _summary(llm, lines, previous, pins, settings)


def _fitting(messages: list[Message], thread_id: int, thread: Thread | None, limit: int) -> int:
    """How many of the oldest messages, whose whole transcript is over `limit` tokens, a transcript of `limit` holds
    (0: not the first alone)."""
    low, high = 0, len(messages) - 1  # all of them are known not to fit: never built again
    while low < high:
        middle = (low + high + 1) // 2
        if _size(_lines(messages[:middle], thread_id, thread)) <= limit:
            low = middle
        else:
            high = middle - 1
    return low


def _size(lines: list[Line]) -> int:
    return sum(line.tokens for line in lines)


def _lines(messages: list[Message], thread_id: int, thread: Thread | None) -> list[Line]:
    """The transcript to summarise, where what the window shows in place of some messages (a cut's rolling summary,
    a trim's bridge) stands for them, as the prompt showed it: the memory work reads each message once, not when it
    leaves the window and again for the version."""
    lines: list[Line] = []
    rest = messages
    for stand_in in _stand_ins(messages, thread):
        lines += _said([m for m in rest if m.seq < stand_in.first], thread_id)
        lines.append(Line.of(stand_in.text))
        rest = [m for m in rest if m.seq > stand_in.last]
    return lines + _said(rest, thread_id)


def _said(messages: list[Message], thread_id: int) -> list[Line]:
    return [Line(*line) for line in dated_transcript(messages, {thread_id})]


@dataclass(frozen=True)
class _StandIn:
    first: int  # the messages it stands for, from this sequence ...
    last: int  # ... to this one
    text: str  # as a prompt shows it
    reach: int  # the first message whose words it holds (a bridge may hold a memory version's, from before `first`)


def _stand_ins(messages: list[Message], thread: Thread | None) -> list[_StandIn]:
    """What a thread's window shows in place of some of `messages`, oldest first: the rolling summary of those said
    before the window, and a trimmed window's bridge over its gap. A bridge holds every message of its gap (one
    written before bridges did, without window_bridge_from, stands for none); its gap usually began before the
    version's messages (a window trims for longer than a version takes), so it holds older words too: read for the
    gap's messages, bench cache_efficiency at 16k 3,709 -> 3,613 a turn, memory_quality at 16k 0.966 -> 0.961."""
    if thread is None or not messages:
        return []
    found = []
    if thread.window_summary and thread.window_summary_from is not None and thread.window_summary_to is not None:
        found.append(_StandIn(thread.window_summary_from, thread.window_summary_to, rolling_summary(thread),
                              thread.window_summary_from))
    if thread.window_bridge and thread.window_bridge_from is not None and thread.window_gap_from is not None \
            and thread.window_gap_to is not None:
        found.append(_StandIn(thread.window_gap_from, thread.window_gap_to - 1, bridge_summary(thread),
                              thread.window_bridge_from))
    return [s for s in found if s.last >= messages[0].seq and s.first <= messages[-1].seq]


def read_from(record: MemoryRecord) -> dict[str, int]:
    """A version's reading beyond its range, as a copy of its text (an edit, a rollback) must carry it."""
    return {"read_from": int(record.metadata["read_from"])} if "read_from" in record.metadata else {}


def _read_from(messages: list[Message], thread: Thread | None) -> dict[str, int]:
    """Where a version's reading began, if a summary it read holds words of messages before its range (metadata):
    an erasure there reaches it too (forget.py)."""
    first = min((s.reach for s in _stand_ins(messages, thread)), default=messages[0].seq)
    return {"read_from": first} if first < messages[0].seq else {}


async def _summary(llm: LLM, lines: list[Line], previous: list[MemoryRecord], pins: list[str],
                   settings: MemorySettings, in_parts: bool = True) -> str:
    """The next short-term version, with the earlier ones as context: as many of them, newest kept longest, as
    leave the model's context room for the rest of the request that writes it."""
    told = [render("short_term_context.md.j2", previous=previous[k:], pins=pins) for k in range(len(previous) + 1)]
    return await summarise(llm, render("short_term_request.md.j2"), lines, context=told,
                           chunk_tokens=settings.stelis.chunk_tokens, max_tokens=settings.work.short_term_tokens,
                           tier=settings.work.tier, in_parts=in_parts)


async def _long_term(store: Store, llm: LLM, ch: MemoryChannel, settings: MemorySettings,
                     now: float) -> MemoryRecord | None:
    """Merge the channel's latest short-term version into its long-term memory (a new long-term version)."""
    scope, scope_id = ch.scope
    new = await store.latest_record(ch.persona, scope, scope_id, "short_term")
    if new is None:
        await store.long_term_saved(ch.thread_id, now, settings.triggers)
        return None
    existing = await store.latest_record(ch.persona, scope, scope_id, "long_term")
    pins = await store.pins(ch.persona, scope, scope_id)
    merged = await merge(llm, f"channel {ch.name or ch.channel_id}", existing,
                         [(f"v{new.version}", new.content)], pins, settings)
    return await store.save_long_term(ch, merged, (existing or new).first_seq, new.last_seq,
                                      _covering(existing or new, new), now, settings.triggers)


async def rebuild_long_term(store: Store, llm: LLM, ch: MemoryChannel, settings: MemorySettings) -> MemoryRecord | None:
    """The channel's long-term memory written again from its visible versions alone: after an edit replaced a
    version, a rollback hid some, or forget-me rewrote them, what they said must not live on in it. None for a
    conversation without one (a Discord thread's) or when no version is left."""
    scope, scope_id = ch.scope
    versions = await store.recent_records(ch.persona, scope, scope_id, "short_term", ALL_VERSIONS) \
        if scope == "channel" else []
    if not versions:
        return None
    pins = await store.pins(ch.persona, scope, scope_id)
    merged = await merge(llm, f"channel {ch.name or ch.channel_id}", None,
                         [(f"v{r.version}", r.content) for r in versions], pins, settings)
    first, newest = versions[0], versions[-1]
    return await store.add_record(ch.persona, scope, scope_id, "long_term", merged, first.first_seq, newest.last_seq,
                                  {**_covering(first, newest), "rebuilt_from": [r.version for r in versions]})


def _covering(first: MemoryRecord, newest: MemoryRecord) -> dict[str, Any]:
    """A long-term version's bookkeeping: the short-term version it merged last, and the days it covers."""
    return {"from_short_term": newest.version, "first_at": first.metadata.get("first_at", first.created_at),
            "last_at": newest.metadata.get("last_at", newest.created_at)}


async def drop_long_term(store: Store, persona: str, scope: str, scope_id: int) -> None:
    """Delete every version of a long-term memory (a channel's, or with "workspace" the server's): each may hold what
    must no longer be shown (erased words, or a channel no longer shared)."""
    old = await store.recent_records(persona, scope, scope_id, "long_term", EVERY_RECORD)
    await store.delete_records([r.id for r in old])


def workspace_key(persona: str, guild_id: int) -> str:
    """The claim one merge of a server's memory holds at a time, across processes."""
    return f"workspace:{persona}:{guild_id}"


def workspace_held(store: Store, persona: str, guild_id: int, owner: str,
                   lease_seconds: float) -> contextlib.AbstractAsyncContextManager[None]:
    """Hold the server's memory merge, waiting while another holds it: a merge under way saves first (a forget-me
    then deletes what it saved), never after."""
    return claims.held(store, workspace_key(persona, guild_id), owner, lease_seconds)


async def update_workspace(store: Store, llm: LLM, persona: str, guild_id: int,
                           settings: MemorySettings) -> MemoryRecord | None:
    """Merge the guild's shareable channels' long-term memories into the workspace memory.

    Nothing (None) when there is none, or when the last merge already read these very versions.
    """
    sources = []
    for ch in await store.shared_channels(persona, guild_id):
        found = await store.latest_record(persona, "channel", ch.channel_id or 0, "long_term")
        if found:
            sources.append((f"#{ch.name or ch.channel_id} lt-v{found.version}", found.content))
    existing = await store.latest_record(persona, "workspace", guild_id, "long_term")
    if not sources or (existing and existing.metadata.get("sources") == [name for name, _ in sources]):
        return None
    pins = await store.pins(persona, "workspace", guild_id)
    merged = await merge(llm, "this server", existing, sources, pins, settings)
    return await store.add_record(persona, "workspace", guild_id, "long_term", merged,
                                  metadata={"sources": [name for name, _ in sources]})


async def merge(llm: LLM, subject: str, existing: MemoryRecord | None, sources: list[tuple[str, str]],
                pins: list[str], settings: MemorySettings) -> str:
    """One neutral merge request; what the model drops is put back or counted, with provenance."""
    parts = []
    if existing:
        parts.append(f"[existing long-term memory v{existing.version}]\n{existing.content}")
    parts.extend(f"[{name}]\n{content}" for name, content in sources)
    material = "\n\n".join(parts)
    request = LLMRequest(
        system=(Block(render("summarise_system.md.j2")),),
        turns=(Turn.text("user", render("long_term_request.md.j2", subject=subject, pins=pins)
                         + "\n\n<transcript>\n" + material + "\n</transcript>"),),
        max_tokens=settings.long_term_tokens, tier=settings.work.tier, purpose="summary",
    )
    try:
        merged = await vetted(llm, request, material, f"long-term merge of {subject}")
    except RequestTooLarge:  # more than the model's context holds: merged without it, within the same budget
        log.warning("the long-term merge of %s does not fit the model's context: merged extractively", subject)
        merged = extractive_summary(material, request.max_tokens)
    checked = [(f"long-term v{existing.version}", existing.content)] if existing else []
    return keep_pins(provenance.account(merged, checked + sources), pins)


def keep_pins(text: str, pins: list[str]) -> str:
    """Pinned facts survive every summary: any the model left out are appended word for word."""
    missing = [p for p in pins if p not in text]
    if missing:
        text += "\nPinned: " + "; ".join(missing)
    return text
