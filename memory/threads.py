"""The Stelis thread tree (seed 000): start under a parent, end with a chronicle, abort, sweep."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field, replace
from typing import Literal
from uuid import uuid4

from memory import anchors
from memory.errors import Failure
from memory.llm import LLM, LLMError
from memory.records import NewMessage, Thread, ThreadStatus
from memory.settings import StelisSettings
from memory.store import STALE_RETRIES, StaleSummary, Store
from memory.summarise import Line, summarise
from memory.tokens import cached_tokens
from memory.transcript import transcript_lines

log = logging.getLogger(__name__)

DEFAULT_CHRONICLE_PROMPT = (
    "Summarise this working session for the persona who worked in it: the goal, what was done, the "
    "results, and anything left open."
)
PARTIAL_NOTE = "(partial: the session ended before it was finished)"
COMPLETION_NOTE = "[A Stelis thread started earlier in this conversation has ended.]"


class StelisError(Failure):
    """A Stelis operation that cannot be done; the message says why and what to do instead."""


@dataclass
class Run:
    """One run of the persona (a console session, a playbook): its stack of active Stelis threads."""

    root_id: int
    id: str = field(default_factory=lambda: uuid4().hex)
    stack: list[int] = field(default_factory=list)

    @property
    def current(self) -> int:
        return self.stack[-1] if self.stack else self.root_id


async def lineage(store: Store, thread: Thread) -> list[Thread]:
    """The thread, then its parent, up to the root."""
    chain = [thread]
    while chain[-1].parent_thread_id is not None:
        chain.append(await store.thread(chain[-1].parent_thread_id))
    return chain


async def start(
    store: Store, run: Run, label: str, settings: StelisSettings, *, window_ratio: float | None = None,
    chronicle_prompt: str | None = None, kind: Literal["stelis", "subagent"] = "stelis",
    discord_thread_id: int | None = None, branch_id: str | None = None,
) -> Thread:
    """Open a Stelis thread under the run's current thread and anchor it there."""
    parent = await store.thread(run.current)
    label = label.strip()
    ratio = settings.default_window_ratio if window_ratio is None else window_ratio
    if not label:
        raise StelisError("a Stelis thread needs a label")
    if not 0 < ratio < 1:
        raise StelisError(f"window_ratio must be between 0 and 1 (exclusive), not {ratio}")
    if parent.status != "active":
        raise StelisError(f"{anchors.thread_ref(parent.id)} is {parent.status}; start threads under an active one")
    if parent.depth >= settings.max_depth:
        raise StelisError(
            f"cannot start a Stelis thread under {anchors.thread_ref(parent.id)} at depth {parent.depth}: "
            f"the maximum depth is {settings.max_depth} (stelis.max_depth)"
        )
    child, _ = await store.create_thread(
        parent, kind=kind, label=label, window_ratio=ratio, chronicle_prompt=chronicle_prompt, run_id=run.id,
        discord_thread_id=discord_thread_id, branch_id=branch_id,
        anchor=anchors.new_anchor(label) if kind == "stelis" else None,  # a subagent leaves no trace in its parent
    )
    run.stack.append(child.id)
    log.info("stelis start %s label=%r depth=%d parent=%d", anchors.thread_ref(child.id), label, child.depth,
             parent.id)
    return child


async def end(store: Store, llm: LLM, run: Run, settings: StelisSettings, *, generate_chronicle: bool = True) -> Thread:
    """End the run's innermost thread with a chronicle and return to its parent.

    If the chronicle cannot be written the thread ends aborted (with what could be made) and the
    LLMError is raised after the state is saved.
    """
    if not run.stack:
        raise StelisError("no Stelis thread is active in this run")
    thread = await store.thread(run.stack[-1])
    try:
        return await finish(store, llm, thread, settings, status="completed", chronicle=generate_chronicle)
    finally:
        run.stack.pop()


async def abort(store: Store, llm: LLM | None, run: Run, settings: StelisSettings) -> Thread:
    """Abort the run's innermost thread, with a partial chronicle when one can be made."""
    if not run.stack:
        raise StelisError("no Stelis thread is active in this run")
    thread = await store.thread(run.stack.pop())
    return await finish(store, llm, thread, settings, status="aborted", chronicle=llm is not None)


async def finish(store: Store, llm: LLM | None, thread: Thread, settings: StelisSettings, *,
                 status: Literal["completed", "aborted"], chronicle: bool) -> Thread:
    """Close a thread (aborting its active descendants first) and fix its anchor's full form.

    A completion whose chronicle fails still closes the thread, as aborted, then raises the LLMError.
    """
    if thread.status != "active":
        raise StelisError(f"{anchors.thread_ref(thread.id)} has already {thread.status}")
    active = [child for child in await store.children(thread.id) if child.status == "active"]
    for child in active:
        await finish(store, llm, child, settings, status="aborted", chronicle=chronicle)
    if active:  # their anchors in it changed: closed as it is now
        thread = await store.thread(thread.id)
    closed, failure = await _chronicled(store, llm if chronicle else None, thread, settings, status)
    await _announce(store, closed)
    log.info("stelis %s %s", closed.status, anchors.thread_ref(thread.id))
    if failure is not None and status == "completed":
        raise failure
    return closed


async def _chronicled(store: Store, llm: LLM | None, thread: Thread, settings: StelisSettings,
                      status: Literal["completed", "aborted"]) -> tuple[Thread, LLMError | None]:
    """The thread closed with its chronicle (none without `llm`); aborted, with the error, when the chronicle fails.
    An erasure while it was written voids it: written again from what is left."""
    for attempt in range(STALE_RETRIES + 1):
        if attempt:
            thread = await store.thread(thread.id)
        text, failure, final_status = None, None, status
        try:
            if llm is not None:
                text = await write_chronicle(store, llm, thread, settings, partial=status == "aborted")
        except LLMError as exc:
            failure, final_status = exc, "aborted"
            log.warning("chronicle of %s failed: %s", anchors.thread_ref(thread.id), exc.notice)
        except asyncio.CancelledError:
            await asyncio.shield(_close(store, thread, "aborted", None))
            raise
        try:
            return await _close(store, thread, final_status, text, revision=thread.revision), failure
        except StaleSummary:
            if attempt == STALE_RETRIES:
                raise
    raise AssertionError("the last attempt returns or raises")


async def _announce(store: Store, ended: Thread) -> None:
    """The seed's completion message in the parent, when the parent no longer shows the anchor's final form.

    The anchor may have left the parent's window (folded into its rolling summary or a trim's bridge
    "in progress"), or a memory version may already have summarised it in progress: either way the
    chronicle would survive only on the thread. The message is new in the parent, so the window shows
    it and the next memory version summarises it.
    """
    if ended.parent_thread_id is None or ended.anchor_seq is None:
        return  # a root, or a subagent's temporary thread (it leaves no trace in its parent)
    parent = await store.thread(ended.parent_thread_id)
    seq = ended.anchor_seq
    cut = parent.window_start_seq is not None and seq < parent.window_start_seq
    gapped = parent.window_gap_from is not None and parent.window_gap_to is not None and \
        parent.window_gap_from <= seq < parent.window_gap_to
    bookkeeping = await store.memory_channel(parent.id)
    summarised = bookkeeping is not None and bookkeeping.covered_seq is not None and seq <= bookkeeping.covered_seq
    if not (cut or gapped or summarised):
        return  # the anchor is in view: its final form says it all
    anchor = await store.message_by_seq(seq)
    final = str(anchor.metadata.get("final", "")) if anchor is not None else ""
    await store.append(parent.id, NewMessage("system", f"{COMPLETION_NOTE}\n{final}".strip(), metadata={
        "type": "stelis_completion", "stelis_thread_id": ended.id}))


async def reclose(store: Store, thread: Thread, chronicle: str | None) -> Thread:
    """A closed thread's chronicle written again (after a start-up sweep, or after forgetting)."""
    return await _close(store, thread, thread.status, chronicle)


async def chronicle_swept(store: Store, llm: LLM, swept: list[Thread], settings: StelisSettings) -> None:
    """Chronicles for threads swept at start-up, written once the bot is up; a failure leaves them without."""
    for thread in swept:
        try:
            text = await write_chronicle(store, llm, thread, settings, partial=True)
        except LLMError as exc:
            log.warning("chronicle of swept %s not written: %s", anchors.thread_ref(thread.id), exc.notice)
            continue
        if text:
            await reclose(store, await store.thread(thread.id), text)


async def _close(store: Store, thread: Thread, status: ThreadStatus, chronicle: str | None,
                 revision: int | None = None) -> Thread:
    """One write: the thread's status and chronicle, and its anchor's final full form (read from its messages: with
    `revision`, StaleSummary and nothing written if one changed since)."""
    ended = replace(thread, status=status, chronicle_summary=chronicle, completed_at=store.clock())
    count = await store.count_messages(thread.id)
    final = anchors.render_final(ended, count, await store.last_exchanges(thread.id, anchors.LAST_EXCHANGES))
    anchor = await store.message_by_seq(thread.anchor_seq) if thread.anchor_seq else None
    meta = anchors.final_metadata(anchor.metadata, ended, final) if anchor else None
    return await store.close_thread(ended, meta, cached_tokens(final), revision=revision)


async def write_chronicle(store: Store, llm: LLM, thread: Thread, settings: StelisSettings, *,
                          partial: bool = False) -> str | None:
    """Summarise every message of the thread with its chronicle prompt; None for an empty thread."""
    chain = await lineage(store, thread)
    lines = [Line(text, tokens) for text, tokens in await transcript_lines(store, thread, {t.id for t in chain})]
    if not lines:
        return None
    text = await summarise(llm, thread.chronicle_prompt or DEFAULT_CHRONICLE_PROMPT, lines,
                           chunk_tokens=settings.chunk_tokens, max_tokens=settings.chronicle_tokens)
    return f"{PARTIAL_NOTE}\n{text}" if partial else text


async def sweep(store: Store, llm: LLM | None, settings: StelisSettings, live_runs: set[str],
                stale_before: float | None = None) -> list[Thread]:
    """At start-up: abort active internal threads whose run is gone, that is whose process has not beaten since
    `stale_before` (a branch's session stays: its branch decides)."""
    swept = []
    for thread in await store.active_internal_threads(stale_before):
        if thread.run_id in live_runs:
            continue
        current = await store.thread(thread.id)
        if current.status != "active":  # closed already as a descendant of an earlier one
            continue
        try:
            swept.append(await finish(store, llm, current, settings, status="aborted", chronicle=llm is not None))
        except LLMError:
            swept.append(await store.thread(thread.id))
    if swept:
        log.warning("swept %d Stelis thread(s) whose run was gone to aborted", len(swept))
    return swept
