"""Forgetting: after messages are erased, nothing written from them may live on.

Every place a message's words can reach is rewritten from what is left: the short-term versions
whose range held it (re-summarised over the same range, the old text deleted), the conversation's
long-term memory (merged again from the remaining versions), the server memory built from it,
chronicles of closed Stelis threads (and their anchors' final form), and rolling summaries.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from memory import threads
from memory.llm import LLM
from memory.records import MemoryChannel, MemoryRecord, Thread
from memory.settings import MemorySettings, StelisSettings
from memory.short_term import (
    EVERY_RECORD,
    drop_long_term,
    keep_pins,
    rebuild_long_term,
    update_workspace,
    workspace_held,
)
from memory.store import WINDOW_RESET, Store
from memory.summarise import Line, summarise
from memory.templates import render
from memory.transcript import dated_transcript
from memory.vetting import finishing

log = logging.getLogger(__name__)


@dataclass
class Rewritten:
    messages: int = 0
    versions: int = 0
    chronicles: int = 0
    windows: int = 0
    guilds: set[int] = field(default_factory=set)
    threads: set[int] = field(default_factory=set)  # whose stored messages changed: their snapshots are stale
    unscrubbed: str | None = None  # why the database's files may still hold the old bytes (None: they do not)
    unfinished: str | None = None  # why what was written from them is still being rewritten (in the background)


async def rewrite(store: Store, llm: LLM, purged: dict[int, set[int]], settings: MemorySettings,
                  stelis: StelisSettings, owner: str) -> Rewritten:
    """Rewrite everything that covered the purged messages (thread id -> seqs). A model that fails meanwhile leaves
    extractive summaries of what is left (vetting.finishing): nothing erased outlives a rewrite it could not do."""
    with finishing():
        return await _rewrite(store, llm, purged, settings, stelis, owner)


async def _rewrite(store: Store, llm: LLM, purged: dict[int, set[int]], settings: MemorySettings,
                   stelis: StelisSettings, owner: str) -> Rewritten:
    done = Rewritten(messages=sum(len(s) for s in purged.values()))
    covering = {tid: set(seqs) for tid, seqs in purged.items()}  # grows by the anchors of rewritten chronicles
    chains = {tid: await threads.lineage(store, await store.thread(tid)) for tid in purged}
    ended: dict[int, Thread] = {}  # closed Stelis threads whose chronicle and anchor are written again
    for chain in chains.values():
        for thread in chain:  # rolling summaries and memory snapshots above the erased messages
            await _reset_window(store, thread.id)
            done.windows += 1
        for thread in chain[:-1]:  # the erased one's and its ancestors'
            if thread.anchor_seq is not None and thread.parent_thread_id is not None:
                covering.setdefault(thread.parent_thread_id, set()).add(thread.anchor_seq)
            if thread.status != "active":
                ended[thread.id] = thread
    while ended:
        thread = ended.pop(min(ended))
        text = thread.chronicle_summary and await threads.write_chronicle(store, llm, thread, stelis,
                                                                        partial=thread.status == "aborted")
        closed = await threads.reclose(store, await store.thread(thread.id), text or None)
        done.chronicles += bool(thread.chronicle_summary)
        for session in await _copies_rewritten(store, closed, covering):  # resumed sessions opened with it
            done.windows += 1
            if session.status != "active":
                ended[session.id] = session
    done.threads = set(covering) | {t.id for chain in chains.values() for t in chain}
    for tid, seqs in covering.items():
        ch = await store.memory_channel(tid)
        if ch is not None:
            done.versions += await _rewrite_versions(store, llm, ch, seqs, settings)
            if ch.shared and ch.guild_id is not None:
                done.guilds.add(ch.guild_id)
    persona = next(iter(chains.values()))[-1].persona if chains else ""
    for guild_id in sorted(done.guilds):  # after a merge under way (`owner`: this rewrite's claim on it)
        async with workspace_held(store, persona, guild_id, owner, settings.work.lease_seconds):
            await drop_long_term(store, persona, "workspace", guild_id)
            await update_workspace(store, llm, persona, guild_id, settings)
    return done


async def _reset_window(store: Store, thread_id: int) -> None:
    await store.set_window(thread_id, **WINDOW_RESET)


async def _copies_rewritten(store: Store, closed: Thread, covering: dict[int, set[int]]) -> list[Thread]:
    """A resumed branch session opens with a copy of the previous one's anchor (chronicle, last exchanges):
    each copy takes the anchor's new form; the sessions whose copy changed."""
    anchor = await store.message_by_seq(closed.anchor_seq) if closed.anchor_seq is not None else None
    if anchor is None or closed.branch_id is None:
        return []
    changed = []
    for session in await store.branch_threads(closed.branch_id):
        first = await anext(aiter(store.span(session.id, None, None)), None)
        if session.id == closed.id or first is None or first.metadata.get("stelis_thread_id") != closed.id \
                or first.metadata == anchor.metadata:
            continue
        await store.set_metadata(first.seq, dict(anchor.metadata))
        covering.setdefault(session.id, set()).add(first.seq)
        await _reset_window(store, session.id)
        changed.append(session)
    return changed


async def _rewrite_versions(store: Store, llm: LLM, ch: MemoryChannel, seqs: set[int],
                            settings: MemorySettings) -> int:
    """Re-summarise each short-term version that covered an erased message, then rebuild long-term."""
    scope, scope_id = ch.scope
    versions = await store.recent_records(ch.persona, scope, scope_id, "short_term", EVERY_RECORD, hidden=True)
    hit = [r for r in versions if _covers(r, seqs)]
    if not hit:
        return 0
    pins = await store.pins(ch.persona, scope, scope_id)
    for record in hit:
        await store.delete_records([record.id])
        if record.hidden_by is not None:  # an edit replaced it, or a rollback went past it: shown nowhere, so it
            continue  # goes whole (a rewrite is a new version, shown again), and no rollback brings its words back
        messages = [m async for m in store.span(ch.thread_id, record.first_seq or 0, (record.last_seq or 0) + 1)]
        if not messages:
            continue
        lines = [Line(*line) for line in dated_transcript(messages, {ch.thread_id})]
        content = keep_pins(await summarise(llm, render("short_term_request.md.j2"), lines,
                                            chunk_tokens=settings.stelis.chunk_tokens,
                                            max_tokens=settings.work.short_term_tokens, tier=settings.work.tier,
                                            context=[render("short_term_context.md.j2", previous=[], pins=pins)]),
                            pins)
        metadata = {**_without(record.metadata, "read_from"), "rewritten_from": record.version}
        await store.add_record(ch.persona, scope, scope_id, "short_term", content, record.first_seq,
                               record.last_seq, metadata, version=1 if scope == "thread" else None)
    await _rebuild_long_term(store, llm, ch, settings)
    log.info("forget: rewrote %d memory version(s) of thread %d", len(hit), ch.thread_id)
    return len(hit)


async def _rebuild_long_term(store: Store, llm: LLM, ch: MemoryChannel, settings: MemorySettings) -> None:
    """Every long-term version goes (each may quote what was erased); one is written again from the versions left.
    A merge under way (of a version read before the erasure) is refused when it saves: the rebuild reads every
    version, so none is pending."""
    await store.long_term_saved(ch.thread_id, store.clock(), settings.triggers)
    await drop_long_term(store, ch.persona, *ch.scope)
    await rebuild_long_term(store, llm, ch, settings)


def _without(metadata: dict[str, Any], key: str) -> dict[str, Any]:
    """A rewrite reads its own range only."""
    return {k: v for k, v in metadata.items() if k != key}


def _covers(record: MemoryRecord, seqs: set[int]) -> bool:
    """Whether a version was written from one of `seqs`: its range, or a window's summary it read for it."""
    if record.reach is None or record.last_seq is None:
        return False
    return any(record.reach <= s <= record.last_seq for s in seqs)
