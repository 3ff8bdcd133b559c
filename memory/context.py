"""Context assembly (DESIGN.md section 5): system, memory layers, history, volatile tail.

Most stable first, so Anthropic's prefix cache holds: appending a message leaves every block
before the tail byte-identical, except when the window overflows. A trim keeps the window's head
(it ends at a breakpoint) and re-sends only the bridge summary and the locked turns after it; a
cut restarts the window, and is also when the newest memory versions come in (or when the cache
has gone cold anyway). Everything is planned inside one budget (memory/budget.py); recall sits in
the tail after the last breakpoint so it never disturbs the cache, and keeps to its share, since
the tail is paid in full on every turn. On a server whose cache holds what the model wrote (a local
llama.cpp, vLLM or Ollama), a reply's tail stays where it was in later requests (KeptTail), so the
next turn reads the reply from that cache instead of evaluating it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Iterable
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any, TypeGuard

from memory import anchors, dates, recall
from memory.budget import MIN_TAIL, Budget, ContextError, Plan, plan, summary_room
from memory.errors import Failure
from memory.layers import Layers, covered_days, memory_layers
from memory.llm import LLM, Block, LLMRequest, Tier, Tool
from memory.records import MemoryRecord, Message, NewMessage, Opening, Thread, window_after
from memory.settings import ContextSettings, MemoryWorkSettings, ShortTermSettings, StelisSettings
from memory.stamped import OncePerStamp
from memory.store import STALE_RETRIES, WINDOW_GAP, StaleSummary, Store
from memory.summarise import Line, summarise
from memory.templates import render
from memory.threads import lineage
from memory.tokens import cached_tokens
from memory.transcript import bridge_summary, dated_transcript, message_text, message_tokens, rolling_summary
from memory.turns import Piece, mark, to_pieces, to_turns
from memory.window import (
    MESSAGE_SHARE,
    Item,
    head_end,
    plan_cut,
    plan_trim,
    protected_size,
    recent_turns,
    trim_pays,
    window_size,
)

__all__ = ["REPLY", "Assembler", "Assembly", "Budget", "ContextError", "ModelTraits", "Persona", "PromptSettings",
           "Shape"]

log = logging.getLogger(__name__)

ROLLING_INSTRUCTION = (
    "These messages are leaving the persona's context window. Write the memory summary that will stand in for "
    "them (and for the earlier summary, and for any memory given in place of some of them): what was said and "
    "done, by whom and on which day, with every name, number and identifier kept."
)
OPENING_PAGE = 256  # messages read with the thread: a window's newest page, or all that came since it was kept
COLD_SECONDS = 300  # the history's cache lifetime: after it, bringing newer memory in costs nothing extra
# Room a cut leaves in a window of a handful of turns (context.cut_room_turns unset). A provider that bills a
# re-sent window: two turns, so the window carries as much as a Letta-style one and still costs less (bench
# cache_efficiency at 8k: 0.83 of the budget for 3,447 a turn, against 0.74 for 3,000 with half of turns_per_cut).
# A local server evaluates the window again on the CPU at each cut: half of turns_per_cut, so cuts stay rare
# (shared/findings/real-models.md).
CUT_ROOM_TURNS = 2
# What a window's first cut reads of what leaves it (after a bulk import, the whole archive): the newest this many
# tokens (older ones are the short-term memory's), within this share of a summarisation request.
LEAVING_READ_TOKENS = 4_800
ONE_CALL_SHARE = 0.8
TRIM_VERSIONS = 3  # a trim looks for the messages it drops in this many of the thread's newest memory versions
WINDOWS_KEPT = 64  # threads whose window (and rendering) is kept in memory between turns
RENDERED_KEPT = 5_000  # messages a kept rendering holds before it starts afresh (a window without a cut)
REPLY_DEPTH = 3  # how far back a reply chain is followed (what a reply answers, and what that answered ...)
REPLY_CHARS = 400  # of each message in it
FOLD_AHEAD_TURNS = 4  # a cut's summary is prepared this many usual turns before the window overflows
STABLE_KEPT = 4  # message lists (window, head, parent region) whose blocks a rendering keeps between turns
PREVIEW_SEQ = 2**62  # the sequence an unstored, previewed message takes (after every real one)


@dataclass(frozen=True)
class Persona:
    name: str
    card: str


@dataclass(frozen=True)
class Shape:
    """What a request carries around a conversation's history: the normal reply is one shape, a playbook's
    context profiles (issue: playbooks) and the benchmarks' baselines are others; all use the same code."""

    tier: Tier = "standard"
    with_recall: bool = True  # recall in the tail (when the assembler's recall is on)
    # Tools the model may call: the first bytes of the prompt, so every request that shares the
    # conversation's cache sends the same list in the same order. None: the conversation's tools (the
    # assembler's `conversation_tools`); () none, and stored tool turns are sent as text.
    tools: tuple[Tool, ...] | None = None
    tool_choice: str | None = None  # narrows what may be called without touching the cached tool list
    instruction: str | None = None  # a task for the model after the cached history (a playbook node's action)
    recall_for: str | None = None  # what recall looks up when no new message asks (a node's task)
    naive: bool = False  # a benchmark's plain slide: the newest messages that fit, no summary, no recall


REPLY = Shape()


IMAGE_TOKENS = 1_600  # what a model charges for a mid-sized image (Anthropic: about width x height / 750)
MAX_IMAGES = 3  # of one message
IMAGE_FRESH_SECONDS = 3_600.0  # a chat service's attachment links expire: only a new message's are sent


def _fresh_images(trigger: Message | None, now: float, room: int) -> list[str]:
    """The image URLs of the message being answered, while its links are fresh and as many as fit."""
    if trigger is None or now - trigger.created_at > IMAGE_FRESH_SECONDS:
        return []
    refs = trigger.metadata.get("images") or []
    urls = [str(r.get("url")) for r in refs if isinstance(r, dict) and str(r.get("url", "")).startswith("https://")]
    return urls[:min(MAX_IMAGES, max(0, room // IMAGE_TOKENS))]


@dataclass(frozen=True)
class PromptSettings:
    """What a conversation's own settings change in its prompt."""

    persona: Persona
    memory_versions: int  # short-term versions shown
    shared_channels: int  # other channels whose memory is shown
    model: str | None = None  # the model its replies use, when its server chose one

    @classmethod
    def of(cls, persona: Persona, short_term: ShortTermSettings, work: MemoryWorkSettings,
           model: str | None = None) -> PromptSettings:
        return cls(persona, short_term.max_history_count, work.shared_channels, model)


@dataclass
class Assembly:
    """A request ready to send, with the token breakdown by part for /context."""

    request: LLMRequest
    thread: Thread
    parts: dict[str, int] = field(default_factory=dict)
    window_budget: int = 0
    cut: bool = False
    parent_messages: list[Message] = field(default_factory=list)  # the parent's protected region
    window_messages: list[Message] = field(default_factory=list)  # the window, the new message included
    recalled: list[recall.Hit] = field(default_factory=list)
    tail: tuple[str, ...] = ()  # the tail's texts (time, recall), when it holds nothing but text
    fold_soon: bool = False  # the window nears its budget: prepare the next cut's summary now


@dataclass(frozen=True)
class Prepared:
    """A cut or trim summarised ahead of time, valid while the window it was planned on is unchanged."""

    base: tuple[Any, ...]  # the window's state and every stored text, as it was planned on (Assembler._base)
    cut: tuple[int, int]  # (head, start) as planned: items keep their places while the window holds still
    state: dict[str, Any]


@dataclass(frozen=True)
class KeptTail:
    """A reply's tail (time, recall) left in place after the message it answered, on a server whose prefix
    cache holds what the model wrote (llama.cpp, vLLM, Ollama): the next turn then finds the reply in the
    cache instead of evaluating it again, at the price of the tail's room in the window."""

    blocks: tuple[str, ...]
    tokens: int
    recalled: tuple[recall.Hit, ...]


@dataclass(frozen=True)
class _Planned:
    """One assembly's plan: memory layers, the window's room and contents, the summary's room."""

    layers: Layers
    capacity: int  # what the windows share
    ratios: list[float]
    budget: int  # this thread's own window
    seen: Rendering
    window: list[Message]  # the head (a trimmed window's) and the recent part, the gap left out
    items: list[Item]
    whole: bool  # the window was read from its start (else only its newest part: it overflows a lot)
    head: int  # items before the gap (0: no gap)
    marked: int  # items before the breakpoint a cut put where the next trim may end the head (0: none)
    cached: int  # items sent inside the last request that rewrote the prefix: a new head cannot end among them
    room: int  # for the next rolling summary or bridge
    summary: int  # the current rolling summary's tokens
    bridge: int  # the current bridge's tokens
    spare: int  # what the window may grow past its budget on this turn (recall's floor, on a remark's)


class Rendering:
    """Each message's text and tokens as one viewer sees them, computed once per assembly."""

    def __init__(self, viewer: set[int], policy: ContextSettings, max_message_tokens: int,
                 tails: dict[int, KeptTail] | None = None):
        self.viewer = viewer
        self.policy = policy
        self.max_message_tokens = max_message_tokens
        self.tails: dict[int, KeptTail] = tails or {}  # message seq -> the tail its reply was asked with
        self._done: dict[int, tuple[str, int]] = {}
        # (first message, the one before it) -> (index and seq of a turn start, the blocks before it)
        self._stable: dict[tuple[int, int | None], tuple[int, int, list[Piece]]] = {}

    def __call__(self, message: Message) -> tuple[str, int]:
        found = self._done.get(message.seq)
        if found is None:
            text = message_text(message, self.viewer, self.policy, self.max_message_tokens)
            found = (text, message_tokens(message, text))
            if message.seq != PREVIEW_SEQ:  # a previewed message is not stored: the next may differ
                self._done[message.seq] = found
        return found

    def __len__(self) -> int:
        return len(self._done)

    def pieces(self, messages: list[Message], after: Message | None = None) -> list[Piece]:
        """Blocks for messages, each day's first message opening with the day's date (the first one
        always, unless it follows `after` on the same day).

        What came before the last turn of the previous call is reused: a window only grows between
        cuts, and a turn's blocks depend on nothing after it.
        """
        if not messages:
            return []
        key = (messages[0].seq, after.seq if after is not None else None)
        start, stable = 0, []
        found = self._stable.get(key)
        if found is not None and found[0] < len(messages) and messages[found[0]].seq == found[1]:
            start, stable = found[0], found[2]
        last = max((i for i in range(start, len(messages)) if _starts_turn(messages[i])
                    and messages[i].seq != PREVIEW_SEQ), default=start)
        stable = stable + self._render(messages[start:last], messages[start - 1] if start else after)
        if last:
            self._stable[key] = (last, messages[last].seq, stable)
            while len(self._stable) > STABLE_KEPT:
                del self._stable[next(iter(self._stable))]
        return stable + self._render(messages[last:], messages[last - 1] if last else after)

    def _render(self, messages: list[Message], after: Message | None) -> list[Piece]:
        texts = [self(m)[0] for m in messages]
        for i, starts in enumerate(day_starts(messages, after)):
            if starts:
                texts[i] = f"[{dates.day_line(messages[i].created_at)}]\n{texts[i]}"
        pieces: list[Piece] = []
        start = 0
        for i in (i for i, m in enumerate(messages) if m.seq in self.tails):  # a user message: no tool call spans it
            pieces += to_pieces(messages[start:i + 1], texts[start:i + 1])
            pieces += [Piece("user", Block(text)) for text in self.tails[messages[i].seq].blocks]
            start = i + 1
        return pieces + to_pieces(messages[start:], texts[start:])

    def tokens(self, messages: list[Message], after: Message | None = None) -> int:
        return sum(self(m)[1] + self.tail_tokens(m.seq) for m in messages) + sum(
            day_tokens(m) for m, starts in zip(messages, day_starts(messages, after), strict=True) if starts)

    def tail_tokens(self, seq: int) -> int:
        tail = self.tails.get(seq)
        return 0 if tail is None else tail.tokens


def day_starts(messages: list[Message], after: Message | None = None) -> list[bool]:
    """Which messages open a day in this list (the first does, unless it follows `after` on the same day),
    so history says when things were said."""
    before = [after, *messages[:-1]][: len(messages)]
    return [b is None or not dates.same_day(b.created_at, m.created_at) for b, m in zip(before, messages, strict=True)]


def day_tokens(message: Message) -> int:
    return cached_tokens(f"[{dates.day_line(message.created_at)}]") + 1


@dataclass(frozen=True)
class ModelTraits:
    """What the model (and its server) does, as far as a request's layout cares."""

    tools: tuple[Tool, ...] = ()  # what every reply offers
    tools_work: Callable[[], bool] = lambda: True  # the model still takes tools (a server may refuse them)
    images: bool = False  # the model reads images: the newest message's are sent with it
    keep_tails: bool = False  # the model's server caches its answers: a reply's tail stays where it was


class Assembler:
    def __init__(self, store: Store, llm: LLM, persona: Persona, budget: Budget, policy: ContextSettings,
                 stelis: StelisSettings, clock: Callable[[], float] = time.time, *,
                 traits: ModelTraits = ModelTraits(), recall_enabled: bool = True,
                 visibilities: recall.Visibilities | None = None,
                 conversation_for: Callable[[Thread], Awaitable[PromptSettings]] | None = None):
        self.store = store
        self.llm = llm
        self.budget = budget
        self.policy = policy if policy.cut_room_turns is not None or traits.keep_tails else policy.model_copy(
            update={"cut_room_turns": CUT_ROOM_TURNS})
        self.stelis = stelis
        self.clock = clock
        self.conversation = PromptSettings.of(persona, ShortTermSettings(), MemoryWorkSettings())
        self._tools = traits.tools
        self.tools_work = traits.tools_work
        self.images_enabled = traits.images
        self.keep_tails = traits.keep_tails
        self.recall_enabled = recall_enabled
        self.frequencies = recall.Frequencies()
        self.visibilities = visibilities or recall.Visibilities()  # shared with whoever else reads visibility
        # Per-conversation settings (a server may change the card, a channel its memory); default: fixed ones.
        self.conversation_for = conversation_for
        self._last_request: dict[int, float] = {}  # thread -> when its cache was last warmed (this process)
        self._prepared: dict[int, Prepared] = {}  # thread -> its next cut, summarised in the background
        self._folding: dict[int, asyncio.Future[bool]] = {}  # thread -> its next cut being summarised now
        # thread -> ((start, gap, its revision), the stored messages, their items, the rendering that sized them)
        self._windows: OrderedDict[int, tuple[tuple[Any, ...], list[Message], list[Item], Rendering]] = OrderedDict()
        # likewise, each message's text; and the memory layers
        self._renderings: OrderedDict[int, tuple[tuple[Any, ...], Rendering]] = OrderedDict()
        self._layers: OrderedDict[int, tuple[tuple[Any, ...], Layers]] = OrderedDict()
        self._lives: OrderedDict[int, tuple[tuple[Thread, int], str]] = OrderedDict()  # child -> (as read, status)
        # visible conversations -> (the store's branch changes when read, the working memory then)
        self._branches: OrderedDict[frozenset[str], tuple[int, list[dict[str, str]]]] = OrderedDict()
        # per persona, where any pin is (as of the store's memory changes) and where open branches are listed
        self._pinned: OncePerStamp[str, set[tuple[str, int]]] = OncePerStamp()
        self._open_branches: OncePerStamp[str, set[str]] = OncePerStamp()

    async def assemble(self, thread_id: int, *, shape: Shape = REPLY, incoming: NewMessage | None = None,
                       persist: bool = True, calls: bool = True) -> Assembly:
        """The next request for a thread; may cut its window first (with a summary prepared ahead, or one call).

        With `incoming`, the request that (unstored) message would produce; with `persist=False`, a
        preview: a cut is planned and summarised but not saved, and the cache's clock is left alone.
        With `calls=False` (what /context shows) no model is asked: a summary not written yet is a note.
        """
        for _ in range(STALE_RETRIES):  # a message erased while the cut's summary was written: plan it again
            with contextlib.suppress(StaleSummary):
                return await self._assemble(thread_id, shape, incoming, persist, calls)
        return await self._assemble(thread_id, shape, incoming, persist, calls)

    async def _assemble(self, thread_id: int, shape: Shape, incoming: NewMessage | None, persist: bool,
                        calls: bool) -> Assembly:
        preview, naive = not persist, shape.naive
        # Another process's erasure does not live on in a cache here; the opening's newest record: what a cold
        # cache shows memory as of. Read before the held block: openings asked at once share a statement, which a
        # task holding a connection would wait for with it (bench concurrency, PostgreSQL at 500 channels: the
        # front 0.47 -> 0.35 s)
        opened = await self._open(thread_id, naive)
        async with self.store.held():  # the reads before anything is waited on
            thread = opened.thread
            chain = await lineage(self.store, thread)
            tools = self.conversation_tools if shape.tools is None else shape.tools
            persona, system_text, budget = await self._system(chain, tools)
            now = self.clock()
            extra = [_unstored(thread.id, incoming, now)] if incoming is not None else []
            fresh = thread.memory_as_of is None or self._cold(thread.id, now)
            p, cut, as_of = await self._next_cut(opened, chain, budget, fresh, extra, naive)
        # The reads are done and the layout up to the model call is CPU alone: yield once first, so that where many
        # replies' reads came back together (SQLite's thread returns them in bursts) the loop does not run all their
        # layouts in one turn while its timers wait (bench concurrency, SQLite at 500 channels: worst stall 64 -> 31 ms)
        await asyncio.sleep(0)
        if calls and cut is not None and thread.id in self._folding:  # summarised ahead now: wait, never twice
            with contextlib.suppress(Failure):  # its failure is logged where it ran; then this one summarises
                await asyncio.shield(self._folding[thread.id])
            p, cut, as_of = await self._next_cut(opened, chain, budget, fresh, extra, naive)

        window, fold_soon = p.window, False
        if cut is not None:
            found = self._prepared_for(thread)  # `_cut` chose it if it still fits; the same cut summarises the same
            state = found.state if found is not None and found.cut == cut else \
                await self._fold_state(thread, p, cut, write=calls)
            # A cut sends everything after the persona card again: the cache holds no prefix ending
            # inside what it keeps, until the next turn; a trim keeps its head's.
            rewritten = {} if cut[0] else {"window_cached_after": window[-1].seq}
            thread = await self._fold(thread, {**state, "memory_as_of": as_of, **rewritten}, preview)
            window = _shown(window, thread)
        else:
            fold_soon = not naive and _nearly_full(p.items, p.budget + p.spare, p.summary + p.bridge, self.policy)
            if not preview and as_of != thread.memory_as_of:  # stored with the thread's next message (the reply)
                thread = self.store.note_window(thread, memory_as_of=as_of,
                                                window_cached_after=window[-1].seq if window else None)
        if not preview:
            self._last_request[thread.id] = now

        protected: list[Message] = []
        if not thread.is_root and thread.kind != "subagent":  # a subagent's thread sees its own history alone
            parent_window = window_size(p.capacity, p.ratios[:-1])
            protected = await self._protected(chain[1], thread, protected_size(parent_window, thread.window_ratio),
                                              p.seen)
        if window and window[-1].seq in p.seen.tails:  # asked again (a retry, a preview): its new tail replaces it
            self._drop_tail(thread.id, p.seen, window[-1].seq)
        assembly = await self._request(thread, chain, persona, system_text, budget, p.layers, protected, window,
                                       p.seen, p.budget, cut is not None, shape)
        assembly.fold_soon = fold_soon and self._prepared_for(thread) is None
        if self.keep_tails and persist and calls and shape == REPLY:
            self._keep_tail(thread.id, p.seen, assembly)
        return assembly

    def _keep_tail(self, thread_id: int, seen: Rendering, assembly: Assembly) -> None:
        """Leave a reply's tail after the stored message it answers, in every request until the window moves
        past it (the window's sizes count it from now on)."""
        trigger = assembly.window_messages[-1] if assembly.window_messages else None
        if trigger is None or trigger.role != "user" or trigger.seq == PREVIEW_SEQ or not assembly.tail:
            return
        tail = KeptTail(assembly.tail, sum(cached_tokens(t) for t in assembly.tail), tuple(assembly.recalled))
        seen.tails[trigger.seq] = tail
        self._resize_last(thread_id, seen, trigger.seq, tail.tokens)

    def _drop_tail(self, thread_id: int, seen: Rendering, seq: int) -> None:
        self._resize_last(thread_id, seen, seq, -seen.tails.pop(seq).tokens)

    def _resize_last(self, thread_id: int, seen: Rendering, seq: int, tokens: int) -> None:
        """The kept window's newest item (message `seq`) is `tokens` larger: its tail came or went."""
        cached = self._windows.get(thread_id)
        if cached is not None and cached[3] is seen and cached[2] and cached[2][-1].seq == seq:
            cached[2][-1] = replace(cached[2][-1], tokens=cached[2][-1].tokens + tokens)

    async def prepare_fold(self, thread_id: int) -> bool:
        """Summarise now what the thread's next cut will fold, so the reply that cuts waits on no model call.

        Run in the background once a reply reports `fold_soon`. False when there is nothing to prepare.
        A reply that needs the cut meanwhile waits for this one instead of asking the model again.
        """
        running = self._folding.get(thread_id)
        if running is None:
            running = self._folding[thread_id] = asyncio.ensure_future(self._prepare_fold(thread_id))
            running.add_done_callback(lambda _: self._folding.pop(thread_id, None))
        return await asyncio.shield(running)

    async def _prepare_fold(self, thread_id: int) -> bool:
        opened = await self._open(thread_id, False)
        thread = opened.thread
        if self._prepared_for(thread) is not None:
            return False
        base = self._base(thread)  # taken before reading: an erasure while the model writes voids the result
        chain = await lineage(self.store, thread)
        _, _, budget = await self._system(chain, self.conversation_tools)
        p, cut, _ = await self._next_cut(opened, chain, budget, thread.memory_as_of is None, [], False, force=True)
        if cut is None or _outgrown(p, cut, self.policy):
            return False
        self._prepared[thread.id] = Prepared(base, cut, await self._fold_state(thread, p, cut))
        return True

    async def _open(self, thread_id: int, naive: bool) -> Opening:
        """The thread, the newest memory record, and the messages its window will read: those since the window
        kept here, else its newest from its start (a naive window reads the whole thread: no page). Its own memory
        comes with it where its layers are not kept here (more conversations than WINDOWS_KEPT talk at once) or
        its cache is cold (its memory is then shown as of that newest record)."""
        kept = self._windows.get(thread_id)
        layers = self._layers.get(thread_id)
        # as many versions as its layers showed last (their key, `_memory`), or the default before any
        versions = layers[0][3] if layers is not None else self.conversation.memory_versions
        unread = layers is None or self._cold(thread_id, self.clock())
        return await self.store.opening(thread_id, kept[1][-1].seq if kept is not None and not naive else None,
                                        0 if naive else OPENING_PAGE, versions if unread else 0)

    def _cold(self, thread_id: int, now: float) -> bool:
        """No request for this thread here within the cache's lifetime: its memory is shown as of the newest."""
        return now - self._last_request.get(thread_id, float("-inf")) > COLD_SECONDS

    async def _next_cut(self, opened: Opening, chain: list[Thread], budget: Plan, fresh: bool,
                        extra: list[Message], naive: bool, force: bool = False
                        ) -> tuple[_Planned, tuple[int, int] | None, int | None]:
        """The plan, the overflow's (head, start) if any (head 0: a cut), and the memory record it shows.

        A cut brings the newest memory in (read with the thread; everything after the persona card is sent again
        anyway), which changes the window's room, so it is planned again with it; a trim keeps the memory shown,
        or its head would not stay cached.
        """
        thread, newest = opened.thread, opened.newest_record
        as_of = newest if fresh else thread.memory_as_of
        while True:
            p = await self._plan(thread, chain, budget, as_of, extra, naive, opened)
            cut = None if naive else self._cut(thread, p, force)
            if cut is None or fresh or cut[0]:
                return p, cut, as_of
            as_of, fresh = newest, True

    def _cut(self, thread: Thread, p: _Planned, force: bool) -> tuple[int, int] | None:
        """(head, start) when the window overflows: as prepared ahead if that still fits, unless a trim planned now
        pays and keeps a longer head (any head, where a cut was prepared); else a trim while the window has trims
        left and one pays, else a cut."""
        shown = _memory_shown(thread, p)
        start = plan_cut(p.items, p.budget, self.policy, p.summary + p.bridge, p.room, force,
                         p.head if thread.window_gap_to is not None else 0, p.spare, shown)
        if start is None:
            return None
        ready = None if force else self._ready(thread, p)
        trim = None
        if p.whole and thread.window_trims < self.policy.trims:
            trim = plan_trim(p.items, p.budget, self.policy, p.summary, p.room, p.head, p.cached, p.marked, shown)
            # priced at what a summary here comes to, not the most it may (a model writes well within its room)
            written = min(p.room, max(p.summary, p.bridge)) or p.room
            if trim is not None and not trim_pays(p.items, p.budget, p.summary, written, trim, start):
                trim = None
        # What was prepared ahead was planned on the window as it was: where a long tool output was among the locked
        # turns then, a trim's head stopped before it (every trim until the next cut keeps that head), or the trim
        # sent so much again that the cut was cheaper. What pays now wins.
        if ready is not None and (trim is None or ready.cut[0] >= trim[0]):
            return ready.cut
        return trim or (0, start)

    async def _system(self, chain: list[Thread], tools: tuple[Tool, ...]) -> tuple[Persona, str, Plan]:
        """The persona, its system prompt, and the request's budget shared out around it."""
        persona = (await self.conversation_of(chain[-1])).persona
        system_text = system_prompt(persona.name, persona.card)
        return persona, system_text, plan(self.budget, cached_tokens(system_text) + tool_tokens(tools))

    async def _plan(self, thread: Thread, chain: list[Thread], budget: Plan, as_of: int | None,
                    extra: list[Message], naive: bool, opened: Opening | None = None) -> _Planned:
        """The memory layers as of a record, the window's room that leaves, and the window read within it."""
        layers = await self._memory(thread, chain[-1], as_of, budget, opened)
        capacity = budget.windows(layers.tokens)
        ratios = [t.window_ratio for t in reversed(chain[:-1])]
        own_budget = window_size(capacity, ratios)
        seen = self._rendering(thread, chain, int(own_budget * MESSAGE_SHARE))
        # as far as a remark's turn lets it grow: read any shorter, a window in recall's floor would slide
        window, items, whole = await self._read(thread, own_budget + (0 if naive else budget.recall_floor), seen,
                                                extra, naive, opened)
        room = summary_room(own_budget, self.budget.shares, self.policy.summary_tokens)
        summary = cached_tokens(thread.window_summary) if thread.window_summary else 0
        bridge = cached_tokens(thread.window_bridge) if thread.window_bridge and not naive else 0
        before = len(_head(window, thread)) if not naive else 0
        # A trimmed window read in part (new memory shrank its room) has its gap still: a cut restarts after it.
        head, marked = (before, 0) if thread.window_gap_to is not None else (0, before if whole else 0)
        floor = thread.window_cached_after
        cached = 0 if floor is None else bisect_right(window, floor, key=_seq)
        return _Planned(layers, capacity, ratios, own_budget, seen, window, items, whole, head, marked, cached, room,
                        summary, bridge, self._spare(window, budget))

    def _spare(self, window: list[Message], budget: Plan) -> int:
        """Recall's floor, where this turn's message is a remark: its recall (a few lines, seldom any) takes what
        the window leaves, so the window grows into the floor before it is trimmed. A question's recall keeps it,
        and so does every turn where each reply's tail stays in the window (a question's room is a remark's)."""
        last = window[-1] if window else None
        remark = last is not None and last.role == "user" and not recall.asks(last.content)
        return budget.recall_floor if remark and not self.keep_tails else 0

    def _base(self, thread: Thread) -> tuple[Any, ...]:
        """What a prepared cut depends on: the window's start, the summary's end, its gap, where the cache
        holds a prefix, every stored text."""
        return (thread.window_start_seq, thread.window_summary_to, thread.window_gap_to, thread.window_trims,
                thread.window_cached_after, thread.revision)

    def _prepared_for(self, thread: Thread) -> Prepared | None:
        """The cut prepared for this thread, if nothing it was planned on has changed since."""
        found = self._prepared.get(thread.id)
        return found if found is not None and found.base == self._base(thread) else None

    def _ready(self, thread: Thread, p: _Planned) -> Prepared | None:
        """The prepared cut or trim, if it was planned on this window and still leaves room for a few turns."""
        found = self._prepared_for(thread)
        if found is None:
            return None
        after = replace(thread, **found.state)
        kept = [item for item in p.items if item.seq >= (after.window_start_seq or 0) and _kept(item.seq, after)]
        summaries = sum(cached_tokens(t) for t in (after.window_summary, after.window_bridge) if t)
        if not kept or _nearly_full(kept, p.budget, summaries, self.policy):
            return None
        return found

    async def _request(self, thread: Thread, chain: list[Thread], persona: Persona, system_text: str,
                       budget: Plan, layers: Layers, protected: list[Message], window: list[Message],
                       seen: Rendering, own_budget: int, cut: bool, shape: Shape) -> Assembly:
        """Lay out the request: system, layers, parent region, summary, history, then the tail."""
        trigger = window[-1] if window and window[-1].role == "user" else None
        query = trigger.content if trigger is not None else shape.recall_for
        searching = None
        # A question reaches further, and may have more room, unless each reply's tail stays in the window.
        asked = recall.asks(query or "") and not self.keep_tails
        if query and self.recall_enabled and shape.with_recall and not shape.naive:
            # Recall's look-ups run in the database while the history is rendered here: the layout waits until they
            # are handed over (or recall is done), or they would start only once it is over.
            before = window[:-1] if trigger is not None else window
            tails = [seen.tails[m.seq] for m in window if m.seq in seen.tails]
            sent = asyncio.Event()
            searching = asyncio.ensure_future(self._recall(
                chain[-1], query, before, protected + window, layers, tails,
                recall.QUESTION if asked else recall.REMARK, sent, _whole_from(thread, window)))
            searching.add_done_callback(lambda _: sent.set())
        try:
            if searching is not None:
                await sent.wait()
            return await self._lay_out(thread, chain, persona, system_text, budget, layers, protected, window, seen,
                                       own_budget, cut, shape, searching, asked)
        finally:
            if searching is not None and not searching.done():
                searching.cancel()
            elif searching is not None and not searching.cancelled():
                searching.exception()  # retrieved: a failed layout has already raised its own error

    async def _lay_out(self, thread: Thread, chain: list[Thread], persona: Persona, system_text: str,
                       budget: Plan, layers: Layers, protected: list[Message], window: list[Message],
                       seen: Rendering, own_budget: int, cut: bool, shape: Shape,
                       searching: asyncio.Future[list[recall.Hit]] | None, asked: bool = False) -> Assembly:
        """The request itself, recall's hits (being looked up meanwhile) placed last; `asked`: recall answers a
        question, and may take the room the window leaves.

        The new message closes the cached history, so the next turn reads it from the cache; only
        the tail (time, recall) after it is paid in full each turn.
        """
        drawn, naive = list(window), shape.naive
        head = seen.pieces(protected)
        summary = thread.window_summary if not naive else None
        if summary:
            head.append(Piece("user", Block(rolling_summary(thread))))
        own_head = _head(window, thread) if not naive else []
        recent = window[len(own_head):]
        head += seen.pieces(own_head)  # a window's head stays cached with what precedes it when it is trimmed
        gapped = bool(own_head) and thread.window_gap_to is not None
        bridge = thread.window_bridge if gapped else None
        joined = own_head[-1] if own_head and not gapped else None  # no gap: the day goes on
        history = seen.pieces(recent, joined)
        if bridge:
            history.insert(0, Piece("user", Block(bridge_summary(thread))))
        if head and history:
            mark(head, len(head) - 1)
        pieces = head + history
        if pieces:
            mark(pieces, len(pieces) - 1)
        parts = {
            "system": budget.system,
            "memory": layers.tokens,
            "parent": seen.tokens(protected),
            "summary": sum(cached_tokens(t) for t in (summary, bridge) if t),
            "history": seen.tokens(own_head) + seen.tokens(recent, joined),
        }
        if shape.instruction:
            parts["instruction"] = cached_tokens(shape.instruction)
        left = budget.input - sum(parts.values())  # what the window leaves: the tail's first, then recall's
        tail_text = await self._tail(thread, chain, protected + window,
                                     max(MIN_TAIL, min(budget.tail + budget.recall, left - budget.recall_floor)))
        tail = [Piece("user", Block(tail_text))]
        parts["tail"] = cached_tokens(tail_text)
        recalled: list[recall.Hit] = []
        if searching is not None:
            # The tail is paid in full every turn: a remark gets a few hit lines, a question what the window leaves.
            room = min(budget.recall_room(asked), budget.input - sum(parts.values()))
            recall_text, recalled = recall.render(await searching, room)
            if recall_text:
                tail.append(Piece("user", Block(recall_text)))
                parts["recall"] = cached_tokens(recall_text)
        trigger = window[-1] if window and window[-1].role == "user" else None
        images = _fresh_images(trigger, self.clock(), budget.input - sum(parts.values())) \
            if self.images_enabled and not shape.naive else []
        if images:  # what the newest message shows, in the tail: volatile, never in a cached prefix
            tail += [Piece("user", Block(url, kind="image")) for url in images]
            parts["images"] = IMAGE_TOKENS * len(images)
        kept = tuple(p.block.text for p in tail) if not images else ()
        if shape.instruction:  # after everything cached: the history's prefix is the normal reply's
            tail.append(Piece("user", Block(shape.instruction)))
        system = [Block(system_text, cache="1h")]
        if layers.text:
            system.append(Block(layers.text, cache="1h"))
        chosen = (await self.conversation_of(chain[-1])).model if shape.tier == "standard" else None
        request = LLMRequest(system=tuple(system), turns=tuple(to_turns(pieces + tail)),
                             max_tokens=self.budget.output, tier=shape.tier, persona=persona.name,
                             tools=self.conversation_tools if shape.tools is None else shape.tools,
                             tool_choice=shape.tool_choice, model=chosen, cache_key=f"thread:{chain[-1].id}")
        parts["output"] = self.budget.output
        parts["free"] = max(0, self.budget.context_tokens - sum(parts.values()))
        return Assembly(request, thread, parts, own_budget, cut, protected, drawn, recalled, kept)

    def keep_spare(self, share: float) -> None:
        """Plan every request with `share` of the budget to spare (the model's server counts more than we do)."""
        self.budget = replace(self.budget, safety=share)

    @property
    def conversation_tools(self) -> tuple[Tool, ...]:
        """What every reply (and conversation-profile request) offers: none once the model's server refused them."""
        return self._tools if self.tools_work() else ()

    @conversation_tools.setter
    def conversation_tools(self, tools: tuple[Tool, ...]) -> None:
        self._tools = tools

    async def conversation_of(self, root: Thread) -> PromptSettings:
        return await self.conversation_for(root) if self.conversation_for else self.conversation

    async def _memory(self, thread: Thread, root: Thread, as_of: int | None, budget: Plan,
                      opened: Opening | None = None) -> Layers:
        """The layers as of a record, read once per window: what else changes them (another channel's
        activity reordering the shared ones, a thread's version rewritten in place) waits for the next
        cut, like a new version. Removing memory or changing a pin shows at once."""
        conversation = await self.conversation_of(root)
        key = (root.id, as_of, budget.memory, conversation.memory_versions, conversation.shared_channels,
               self.store.memory_changes, self.store.sharing_version)
        found = self._layers.get(thread.id)
        if as_of is None or found is None or found[0] != key:
            # Where no pin and no other shared channel can be shown, they are not read (most conversations of a
            # busy server: a burst of five hundred read each of them five hundred times to find none).
            pinned = await self._pinned.get(root.persona, self.store.memory_changes,
                                            lambda: self.store.pinned_scopes(root.persona))
            others = root.guild_id is not None and len((await self.visibilities.of(self.store, root)).scope_keys) > 1
            known = (opened.memory_asked, opened.memory) \
                if opened is not None and opened.memory_asked and as_of == opened.newest_record else None
            found = (key, await memory_layers(self.store, thread, root, versions=conversation.memory_versions,
                                              shared=conversation.shared_channels if others else 0, as_of=as_of,
                                              budget=budget.memory, pinned=pinned, known=known))
        _keep(self._layers, thread.id, found)
        return found[1]

    async def _recall(self, root: Thread, query: str, window: list[Message], shown: list[Message],
                      layers: Layers, tails: Iterable[KeptTail] = (), reach: recall.Reach = recall.REMARK,
                      sent: asyncio.Event | None = None, whole_from: tuple[int, int] | None = None
                      ) -> list[recall.Hit]:
        """Recall's hits for the new message (or a task) and the turn before it, best first; none the
        request already carries (in its window, its memory, or an earlier reply's kept tail)."""
        before = " ".join(m.content for m in window[-1:] if m.role in ("user", "assistant"))
        already = recall.Shown({m.seq for m in shown}, set(layers.records),
                               {int(m.metadata["stelis_thread_id"]) for m in shown if anchors.is_anchor(m)},
                               dict(layers.partly), whole_from=whole_from,
                               texts=tuple(m.content for m in shown if m.seq != PREVIEW_SEQ))
        for hit in (hit for tail in tails for hit in tail.recalled):
            if hit.kind == "message":
                already.messages.add(hit.key)
            elif hit.kind == "memory":
                already.memory_lines.add(hit.key)
            else:
                already.chronicles.add(hit.key)
        hits = await recall.search(self.store, await self.visibilities.of(self.store, root), query, already,
                                   context=before, frequencies=self.frequencies, unindexed_ok=len(window),
                                   now=self.clock(), reach=reach, sent=sent)
        return hits

    async def _protected(self, parent: Thread, thread: Thread, budget: int, seen: Rendering) -> list[Message]:
        """The parent's newest messages up to this thread's anchor, within budget, opening on a turn."""
        kept: list[Message] = []
        used = 0
        before = (thread.anchor_seq + 1) if thread.anchor_seq is not None else None
        async for message in self.store.newest_first(parent.id, before_seq=before):
            used += seen(message)[1] + day_tokens(message)
            if used > budget:
                break
            kept.append(message)
        kept.reverse()
        while kept and not _starts_turn(kept[0]):
            kept.pop(0)
        return kept

    async def _read(self, thread: Thread, budget: int, seen: Rendering, extra: list[Message],
                    naive: bool, opened: Opening | None = None) -> tuple[list[Message], list[Item], bool]:
        """The thread's window from its persisted start (a trimmed one without its gap), as items to
        plan on, and whether it was read whole.

        Read once newest first until it overflows; after that, the window read last time plus what
        came since (a window moves only at a cut or trim, and any rewrite of a message re-reads it).
        What `opened` read with the thread is not read again.
        """
        trimmed = None if naive else thread
        start = None if naive else thread.window_start_seq
        gap = None if naive else thread.window_gap_to
        key = (start, gap, thread.revision)
        cached = self._windows.get(thread.id)
        if cached is not None and cached[0] == key and cached[3] is seen and not naive:  # the rendering sizes items
            last = cached[1][-1].seq
            new = opened.messages[::-1] if _opened_at(opened, last) and opened.whole else \
                [m async for m in self.store.span(thread.id, last + 1, None)]
            stored, counted, whole = cached[1] + new, cached[2] + _items(new, seen, gap, cached[1][-1]), True
        else:
            stored, whole = await self._read_back(thread.id, start, trimmed, budget, seen, extra, opened)
            counted = _items(stored, seen, gap, None)
        if whole and stored and not naive:
            _keep(self._windows, thread.id, (key, stored, counted, seen))
        messages = stored + extra
        items = counted + _items(extra, seen, gap, stored[-1] if stored else None)
        if naive:
            return _naive_window(messages, items, budget), [], whole
        return messages, items, whole

    async def _read_back(self, thread_id: int, start: int | None, trimmed: Thread | None, budget: int,
                         seen: Rendering, extra: list[Message], opened: Opening | None) -> tuple[list[Message], bool]:
        """Stored messages from `start` (a `trimmed` window's gap left out), newest first until the
        window overflows, oldest first; and whether they are all of them (the read reached the start)."""
        messages: list[Message] = []
        used, turns = sum(seen(m)[1] for m in extra), len(extra)
        if used > budget and turns >= self.policy.locked_turns:
            return messages, False
        async for message in self._newest_first(thread_id, window_after(start), opened):
            if trimmed is not None and not _kept(message.seq, trimmed):
                continue
            messages.append(message)
            used += seen(message)[1]
            turns += _starts_turn(message)
            if used > budget and turns >= self.policy.locked_turns:
                messages.reverse()
                return messages, False
        messages.reverse()
        return messages, True

    def _newest_first(self, thread_id: int, after: int, opened: Opening | None) -> AsyncIterator[Message]:
        """The thread's live messages after `after`, newest first: the opening's page where it was read from
        there, then the store's pages past it."""
        if not _opened_at(opened, after):
            return self.store.newest_first(thread_id, after_seq=after)
        rest = None if opened.whole else \
            self.store.newest_first(thread_id, after_seq=after, before_seq=opened.messages[-1].seq)
        return _chained(opened.messages, rest)

    def _rendering(self, thread: Thread, chain: list[Thread], max_message_tokens: int) -> Rendering:
        """The thread's rendering, kept between turns while nothing it depends on changed.

        A cut starts it afresh, so it holds no more than the window (and the parent's region) it renders.
        """
        viewer = {t.id for t in chain}  # the parents' regions are rendered too: their revisions count
        key = (thread.window_start_seq, frozenset(viewer), max_message_tokens, tuple(t.revision for t in chain),
               self.store.memory_changes, self.store.sharing_version)  # the last two: what a kept tail recalled
        found = self._renderings.get(thread.id)
        if found is None or found[0] != key or len(found[1]) > RENDERED_KEPT:
            start = thread.window_start_seq or 0  # a cut keeps the tails of the turns it keeps
            tails = {seq: t for seq, t in found[1].tails.items() if seq >= start} \
                if found is not None and found[0][1:] == key[1:] else {}
            found = (key, Rendering(viewer, self.policy, max_message_tokens, tails))
        _keep(self._renderings, thread.id, found)
        return found[1]

    async def _fold_state(self, thread: Thread, p: _Planned, cut: tuple[int, int],
                          write: bool = True) -> dict[str, Any]:
        """Summarise what leaves the window at a cut or trim (`cut`: head, start): its new state (`write`
        False: a note stands for the summary, and no model is asked)."""
        head, start = cut
        if head:
            return await self._trim_state(thread, p, head, start, write)
        new_start = p.window[start].seq
        covered_to = p.layers.covered_to
        # Messages the shown memory versions already cover need no summary, and neither does an earlier
        # summary they cover entirely: the rolling summary spans only the gap between memory and window.
        lower = max(thread.window_start_seq or 0, (covered_to or 0) + 1)
        keep_earlier = bool(thread.window_summary) and thread.window_start_seq is not None and (
            covered_to is None or (thread.window_summary_to or 0) > covered_to)
        lines = [Line.of(f"[earlier summary]\n{thread.window_summary}")] if keep_earlier else []
        # The summary must hold every message of its range (a short-term version reads it for them). After a
        # window's first cut: all that left and memory does not cover yet, the trimmed gap as said too (a trim's
        # bridge holds only the newest part of each run). A first cut, which may follow a bulk import, reads one
        # request's worth (the transcript's prefixes take the margin); older messages are the short-term memory's.
        bound = None if thread.window_start_seq is not None else self._leaving_read()
        leaving = await self._leaving(thread, lower, new_start, bound)
        lines += [Line(*line) for line in dated_transcript(leaving, p.seen.viewer, self.policy)]
        summary = first = last = first_at = last_at = None
        if lines:
            summary = await self._summary(lines, p.room, write)
            first = thread.window_summary_from if keep_earlier else (leaving[0].seq if leaving else None)
            first_at = thread.window_summary_first_at if keep_earlier else (leaving[0].created_at if leaving else None)
            last = leaving[-1].seq if leaving else thread.window_summary_to
            last_at = leaving[-1].created_at if leaving else thread.window_summary_last_at
        state = dict(window_start_seq=new_start, window_summary=summary, window_summary_from=first,
                     window_summary_to=last, window_summary_first_at=first_at, window_summary_last_at=last_at,
                     **WINDOW_GAP)
        if self.policy.trims:
            # What this cut keeps before its locked turns (or a little past unusually large ones) is a head the next
            # trim may keep: the cut's request puts a breakpoint there (the head's end), so the cache holds that prefix
            end = head_end(p.items, start, p.budget, self.policy, cached_tokens(summary) if summary else 0, p.room,
                           _memory_shown(thread, p))
            state["window_gap_from"] = p.window[end].seq if end is not None else None
        return state

    async def _summary(self, lines: list[Line], room: int, write: bool) -> str:
        """The rolling summary of what leaves the window, or, without a model call, a note saying so."""
        if not write:
            return f"(not summarised yet: {len(lines)} message(s) fold here, summarised at the next reply)"
        return await summarise(self.llm, ROLLING_INSTRUCTION, lines, chunk_tokens=self.stelis.chunk_tokens,
                               max_tokens=room, tier="light")

    def _leaving_read(self) -> int:
        """The most a first cut reads of what leaves the window, in tokens."""
        return min(LEAVING_READ_TOKENS, int(ONE_CALL_SHARE * self.stelis.chunk_tokens))

    async def _trim_state(self, thread: Thread, p: _Planned, head: int, start: int,
                          write: bool = True) -> dict[str, Any]:
        """Summarise the run a trim drops (after the head, before `start`) into the bridge, with the one before.

        The bridge holds every message of its gap (in parts past one request), so the next short-term version reads
        it in place of them (memory/short_term.py); window_bridge_from is the first message whose words it holds
        (a memory version read in place of some of the run holds words from before the gap)."""
        lines = [Line.of(f"[earlier summary]\n{thread.window_bridge}")] if thread.window_bridge else []
        first = p.window[head]  # the gap's first message, unless the window was trimmed before
        if thread.window_gap_to is not None:  # the gap only grows: it starts where it started (a reach of None: a
            # bridge from before bridges held all of their gap, which stands for no messages until the next cut)
            gap_from, first_at, reach = thread.window_gap_from, thread.window_bridge_first_at, thread.window_bridge_from
        else:
            gap_from, first_at, reach = first.seq, first.created_at, first.seq
        dropped, versions_reach = await self._dropped(thread, p, p.window[head:start])
        bridge = await self._summary(lines + dropped, p.room, write)
        if reach is not None and versions_reach is not None:
            reach = min(reach, versions_reach)
        return dict(window_gap_from=gap_from, window_gap_to=p.window[start].seq, window_bridge=bridge,
                    window_bridge_first_at=first_at, window_bridge_last_at=p.window[start - 1].created_at,
                    window_bridge_from=reach, window_trims=thread.window_trims + 1)

    async def _dropped(self, thread: Thread, p: _Planned, run: list[Message]) -> tuple[list[Line], int | None]:
        """What a bridge is written from, and the first message whose words a memory version in it holds: of the run
        a trim drops, nothing a shown memory version covers; a newer version of the thread's own where it is shorter
        than the messages it covers (the memory work read them already); the rest as said."""
        covered = p.layers.covered_to or 0
        run = [m for m in run if m.seq > covered]
        scope = thread.memory_scope
        newer = [] if scope is None or not run else [
            v for v in await self.store.recent_records(thread.persona, *scope, "short_term", TRIM_VERSIONS)
            if v.first_seq is not None and v.last_seq is not None and v.last_seq > covered]
        lines: list[Line] = []
        reaches: list[int] = []
        for version, messages in _by_version(run, newer):
            if version is not None and \
                    (memory := Line.of(_memory_of(version))).tokens < sum(m.token_count for m in messages):
                lines.append(memory)
                if version.reach is not None:
                    reaches.append(version.reach)
                continue
            lines += [Line(*line) for line in dated_transcript(messages, p.seen.viewer, self.policy)]
        return lines, min(reaches, default=None)

    async def _fold(self, thread: Thread, state: dict[str, Any], preview: bool) -> Thread:
        """Move the window's start (unless previewing); `state` holds the summary that stands in for what left."""
        if state.get("window_gap_to") is not None:
            log.info("window trim in thread %d: gap %s-%s", thread.id, state["window_gap_from"], state["window_gap_to"])
        else:
            log.info("window cut in thread %d: start %s -> %d, summary covers %s-%s", thread.id,
                     thread.window_start_seq, state["window_start_seq"], state["window_summary_from"],
                     state["window_summary_to"])
        if preview:
            return replace(thread, **state)
        self._prepared.pop(thread.id, None)
        return await self.store.set_window(thread.id, revision=thread.revision, **state)

    async def _leaving(self, thread: Thread, lower: int, new_start: int, bound: int | None) -> list[Message]:
        """The messages a cut summarises: the newest from `lower` up to the new start, within `bound` tokens if
        one is given.

        Anything older is the short-term memory's job, so a first reply after a bulk import makes one
        summarisation call of bounded size, not one over the whole archive.
        """
        kept: list[Message] = []
        used = 0
        async for message in self.store.newest_first(thread.id, before_seq=new_start, after_seq=lower - 1):
            used += message.token_count
            if bound is not None and used > bound:
                break
            kept.append(message)
        kept.reverse()
        return kept

    async def _tail(self, thread: Thread, chain: list[Thread], shown: list[Message], budget: int) -> str:
        """The volatile part: the time, live status of active children, news from the parent (within budget)."""
        lineage_ids = {t.id for t in chain}
        live = []
        for message in shown:
            if anchors.is_anchor(message) and "final" not in message.metadata:
                child_id = int(message.metadata["stelis_thread_id"])
                if child_id in lineage_ids:
                    continue
                status = await self._live(child_id)
                if status is not None:
                    live.append(status)
        parent_news = None
        if not thread.is_root and thread.anchor_seq is not None:
            parent = chain[1]
            count = await self.store.count_messages(parent.id, after_seq=thread.anchor_seq)
            if count:
                last = [m async for m in self.store.newest_first(parent.id, after_seq=thread.anchor_seq, page=3)][:3]
                parent_news = {"label": parent.label or "the main conversation", "count": count,
                               "lines": anchors.exchange_lines(last[::-1])}
        args: dict[str, Any] = dict(now=dates.now_text(self.clock()), thread=thread, ref=anchors.thread_ref(thread.id))
        branches = await self._working_memory(chain[-1])
        replied = await self._replied(thread, shown)
        # Over budget, the live details go first, then the news, then the branches, then what a reply answers.
        for shown_live, news, current, answered in ((live, parent_news, branches, replied),
                                                    ([], None, branches, replied), ([], None, [], replied)):
            text = render("tail.md.j2", **args, live=shown_live, parent_news=news, branches=current,
                          replied=answered)
            if cached_tokens(text) <= budget:
                return text
        return render("tail.md.j2", **args, live=[], parent_news=None, branches=[], replied=())

    async def _live(self, child_id: int) -> str | None:
        """An active Stelis thread's status for the tail (None once it ended); its last exchanges are read again
        only when it changed: a message came or went (its count), or one was edited or erased (its revision)."""
        found = await self.store.thread_with_count(child_id)
        if found is None or found[0].status != "active":
            return None
        cached = self._lives.get(child_id)
        if cached is not None and cached[0] == found:
            self._lives.move_to_end(child_id)
            return cached[1]
        child, count = found
        status = anchors.render_live(child, count, await self.store.last_exchanges(child_id, anchors.LAST_EXCHANGES))
        _keep(self._lives, child_id, (found, status))
        return status

    async def _replied(self, thread: Thread, shown: list[Message]) -> tuple[str, ...]:
        """What the newest message replies to (Discord's reply), and what that answered, a few deep, when they
        have left the view; only this conversation's own messages, never one erased."""
        newest = next((m for m in reversed(shown) if m.role == "user"), None)
        ref = newest.metadata.get("reply_to") if newest is not None else None
        if not isinstance(ref, int):  # most requests: nothing to look at
            return ()
        in_view = {m.external_id for m in shown if m.external_id is not None}
        lines: list[str] = []
        while isinstance(ref, int) and ref not in in_view and len(lines) < REPLY_DEPTH:
            found = await self.store.message_by_external_id(ref)
            if found is None or found.deleted_at is not None or not found.content:
                break
            where = await self.store.find_thread(found.thread_id)
            if where is None or where.scope_key != thread.scope_key:  # another conversation's: never shown here
                break
            who = found.author_name if found.role == "user" else "you"
            lines.append(f"- {who}, {dates.day_line(found.created_at)}: {anchors.clip(found.content, REPLY_CHARS)}")
            ref = found.metadata.get("reply_to")
        return tuple(lines)

    async def _working_memory(self, root: Thread) -> list[dict[str, str]]:
        """The persona's open branches this conversation may see (recall's visibility), latest first (seed
        001's working memory); read again only when a branch changed."""
        if not self.policy.working_memory:
            return []
        seen = await self.visibilities.of(self.store, root)
        changes = self.store.branch_changes  # taken before the read: a change meanwhile reads them again next time
        view = frozenset(seen.scope_keys)  # a server's public channels all see the same: one entry, one read
        cached = self._branches.get(view)
        if cached is not None and cached[0] == changes:
            self._branches.move_to_end(view)
            return cached[1]
        listed = await self._open_branches.get(root.persona, changes,
                                               lambda: self.store.open_branch_scopes(root.persona))
        rows = [] if listed.isdisjoint(view) else \
            await self.store.recent_branches(root.persona, seen.scope_keys, self.policy.working_memory)
        found = [{"label": b.label, "kind": b.branch_type, "status": b.status, "state": b.brief_state or "",
                  "when": dates.day_line(b.active_at)} for b in rows]
        _keep(self._branches, view, (changes, found))  # a busy bot's others stay (they were all dropped)
        return found


def tool_tokens(tools: tuple[Tool, ...]) -> int:
    """What tool definitions weigh in a request (they come before the system prompt)."""
    return sum(cached_tokens(t.written) for t in tools)


def _keep(cache: OrderedDict[Any, Any], key: Hashable, entry: Any) -> None:
    """Keep an entry (for a thread, or a conversation's view), as its most recent use; the least recently used
    beyond WINDOWS_KEPT go."""
    cache[key] = entry
    cache.move_to_end(key)
    while len(cache) > WINDOWS_KEPT:
        cache.popitem(last=False)


def _nearly_full(items: list[Item], budget: int, summary: int, policy: ContextSettings,
                 turns: int = FOLD_AHEAD_TURNS) -> bool:
    """Within a few usual turns of a cut: time to summarise ahead, while the conversation goes on."""
    sizes = recent_turns(items)
    return summary + sum(i.tokens for i in items) + turns * sum(sizes) / len(sizes) > budget


def _outgrown(p: _Planned, cut: tuple[int, int], policy: ContextSettings) -> bool:
    """A cut planned now would no longer be ready (`_ready`) when the window overflows, up to FOLD_AHEAD_TURNS turns
    from now: where a cut leaves room for only a few turns (a small window), the overflowing reply cuts afresh, and
    summarising this one ahead would be paid for nothing (bench cache_efficiency at 8k: 4 of 5 were)."""
    head, start = cut
    summaries = p.room + (p.summary if head else 0)  # the new summary or bridge, and a trim keeps the summary
    return _nearly_full(p.items[:head] + p.items[start:], p.budget, summaries, policy, 2 * FOLD_AHEAD_TURNS)


def _memory_shown(thread: Thread, p: _Planned) -> int:
    """The memory layers a cut keeps before the window, as its fill counts them: a root's (a Stelis thread's own
    window is a share of its parent's, planned without them)."""
    return p.layers.tokens if thread.is_root else 0


def _items(messages: list[Message], seen: Rendering, gap_to: int | None, before: Message | None) -> list[Item]:
    """Messages as the window plans on them: their tokens, with a date line where a day (or the bridge) opens."""
    items = []
    for message in messages:
        opens = (before is None or not dates.same_day(before.created_at, message.created_at)
                 or (gap_to is not None and before.seq < gap_to <= message.seq))
        items.append(Item(message.seq, seen(message)[1] + seen.tail_tokens(message.seq)
                          + (day_tokens(message) if opens else 0), _starts_turn(message)))
        before = message
    return items


def _by_version(run: list[Message], versions: list[MemoryRecord]) -> list[tuple[MemoryRecord | None, list[Message]]]:
    """The run's messages in consecutive groups: those a version covers (with it), and those none does (None)."""
    groups: list[tuple[MemoryRecord | None, list[Message]]] = []
    for message in run:
        version = next((v for v in versions if (v.first_seq or 0) <= message.seq <= (v.last_seq or 0)), None)
        if groups and groups[-1][0] is version:
            groups[-1][1].append(message)
        else:
            groups.append((version, [message]))
    return groups


def _memory_of(version: MemoryRecord) -> str:
    return f"[memory of messages {version.first_seq}-{version.last_seq}, {covered_days(version)}]\n{version.content}"


def _opened_at(opened: Opening | None, after: int) -> TypeGuard[Opening]:
    """`opened` holds a page of the messages after `after`."""
    return opened is not None and opened.limit > 0 and opened.after == after


async def _chained(first: list[Message], rest: AsyncIterator[Message] | None) -> AsyncIterator[Message]:
    for message in first:
        yield message
    if rest is not None:
        async for message in rest:
            yield message


def _kept(seq: int, thread: Thread) -> bool:
    """Whether a message from the window's start on is shown: not in a trimmed window's gap."""
    gap_from, gap_to = thread.window_gap_from, thread.window_gap_to
    return gap_from is None or gap_to is None or not gap_from <= seq < gap_to


@lru_cache(maxsize=64)
def system_prompt(name: str, card: str) -> str:
    """The persona's system prompt, rendered once per persona card: every reply and every playbook request that
    speaks as the persona opens with it, byte for byte (the cache's prefix)."""
    return render("system.md.j2", persona_name=name, persona_card=card.strip())


def _shown(messages: list[Message], thread: Thread) -> list[Message]:
    """The messages of a window as its state (start, gap) shows them."""
    start = thread.window_start_seq or 0
    return [m for m in messages if m.seq >= start and _kept(m.seq, thread)]


def _whole_from(thread: Thread, window: list[Message]) -> tuple[int, int] | None:
    """(thread, seq): from that message on the request shows the thread whole, to its newest (after the gap a trim
    left, else from the window's first)."""
    first = next((m.seq for m in window if m.seq != PREVIEW_SEQ), None)
    return None if first is None else (thread.id, max(first, thread.window_gap_to or 0))


def _head(window: list[Message], thread: Thread) -> list[Message]:
    """A window's head: its messages before the gap, or before the breakpoint where the next trim may end it."""
    gap = thread.window_gap_from
    return [] if gap is None else window[: bisect_left(window, gap, key=_seq)]


def _seq(message: Message) -> int:
    return message.seq


def _unstored(thread_id: int, incoming: NewMessage, now: float) -> Message:
    """A previewed message as if stored now, after every real one."""
    return Message(PREVIEW_SEQ, thread_id, incoming.role, incoming.content, cached_tokens(incoming.content),
                   incoming.author_id, incoming.author_name, dict(incoming.metadata), None, now)


def _starts_turn(message: Message) -> bool:
    return message.role in ("user", "system")


def _naive_window(messages: list[Message], items: list[Item], budget: int) -> list[Message]:
    """The newest messages that fit, recomputed every turn: the slide that breaks the cache (bench only)."""
    used = 0
    start = len(items)
    for i in range(len(items) - 1, -1, -1):
        used += items[i].tokens
        if used > budget:
            break
        start = i
    while start < len(items) and not items[start].starts_turn:
        start += 1
    return messages[start:]
