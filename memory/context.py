"""Context assembly (DESIGN.md section 5): system, memory layers, history, volatile tail.

Most stable first, so Anthropic's prefix cache holds: appending a message leaves every block
before the tail byte-identical, except at a window cut or a memory version change.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from memory import anchors
from memory.layers import SHORT_TERM_VERSIONS, memory_layers
from memory.llm import LLM, Block, LLMRequest, Tier
from memory.records import Message, Thread
from memory.store import Store
from memory.summarise import Line, summarise
from memory.templates import render
from memory.threads import StelisSettings, lineage
from memory.transcript import message_text, message_tokens, transcript_line
from memory.turns import Piece, mark, to_pieces, to_turns
from memory.window import Item, WindowPolicy, plan_cut, protected_size, window_size

log = logging.getLogger(__name__)

ROLLING_INSTRUCTION = (
    "These messages are leaving the persona's context window. Write the memory summary that will "
    "stand in for them (and for the earlier summary, if one is given): what was said and done, by "
    "whom, with every name, number and identifier kept."
)


@dataclass(frozen=True)
class Budget:
    context_tokens: int
    max_output_tokens: int
    tail_reserve: int = 1_024  # room kept for the volatile tail, so the window does not depend on it
    safety_margin: float = 0.05  # cl100k counts estimate another tokenizer


@dataclass(frozen=True)
class Persona:
    name: str
    card: str


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


class ContextError(Exception):
    """A context that cannot be assembled within the model's window."""


class Rendering:
    """Each message's text and tokens as one viewer sees them, computed once per assembly."""

    def __init__(self, viewer: set[int], policy: WindowPolicy):
        self.viewer = viewer
        self.policy = policy
        self._done: dict[int, tuple[str, int]] = {}

    def __call__(self, message: Message) -> tuple[str, int]:
        found = self._done.get(message.seq)
        if found is None:
            text = message_text(message, self.viewer, self.policy)
            found = self._done[message.seq] = (text, message_tokens(message, text))
        return found

    def pieces(self, messages: list[Message]) -> list[Piece]:
        return to_pieces(messages, [self(m)[0] for m in messages])

    def tokens(self, messages: list[Message]) -> int:
        return sum(self(m)[1] for m in messages)


class Assembler:
    def __init__(self, store: Store, llm: LLM, persona: Persona, budget: Budget, policy: WindowPolicy,
                 stelis: StelisSettings, clock: Callable[[], float] = time.time):
        self.store = store
        self.llm = llm
        self.persona = persona
        self.budget = budget
        self.policy = policy
        self.stelis = stelis
        self.clock = clock
        self.memory_versions = SHORT_TERM_VERSIONS
        # Per-conversation persona (a server may change the card); defaults to the fixed one.
        self.persona_for: Callable[[Thread], Awaitable[Persona]] | None = None

    async def assemble(self, thread_id: int, *, tier: Tier = "standard", naive: bool = False) -> Assembly:
        """The next request for a thread; may cut its window (one summarisation call) first."""
        thread = await self.store.thread(thread_id)
        chain = await lineage(self.store, thread)
        viewer = {t.id for t in chain}
        seen = Rendering(viewer, self.policy)
        persona = await self.persona_for(chain[-1]) if self.persona_for else self.persona
        system_text = render("system.md.j2", persona_name=persona.name, persona_card=persona.card.strip())
        layers = await memory_layers(self.store, thread, chain[-1], self.memory_versions)
        system_tokens, layer_tokens = anchors.cached_tokens(system_text), anchors.cached_tokens(layers)
        capacity = (int(self.budget.context_tokens * (1 - self.budget.safety_margin)) - self.budget.max_output_tokens
                    - system_tokens - layer_tokens - self.budget.tail_reserve)
        if capacity <= 0:
            raise ContextError(f"the persona card and memory need {system_tokens + layer_tokens} tokens; "
                               "the model's context has no room left for the conversation")
        ratios = [t.window_ratio for t in reversed(chain[:-1])]
        own_budget = window_size(capacity, ratios)

        protected: list[Message] = []
        if not thread.is_root:
            parent_window = window_size(capacity, ratios[:-1])
            protected = await self._protected(chain[1], thread, protected_size(parent_window, thread.window_ratio),
                                              seen)
        window, thread, cut = await self._window(thread, own_budget, seen, naive)
        drawn = list(window)
        trigger = window.pop() if window and window[-1].role == "user" else None
        head = seen.pieces(protected)
        summary = thread.window_summary if not naive else None
        if summary:
            head.append(Piece("user", Block(render("summary_injection.md.j2", summary=summary,
                                                   first=thread.window_summary_from, last=thread.window_summary_to))))
        history = seen.pieces(window)
        if head and history:
            mark(head, len(head) - 1)
        pieces = head + history
        if pieces:
            mark(pieces, len(pieces) - 1)
        tail_text = await self._tail(thread, chain, protected + window)
        tail = [Piece("user", Block(tail_text))]
        if trigger is not None:
            tail.append(Piece("user", Block(seen(trigger)[0])))
        system = [Block(system_text, cache="1h")]
        if layers:
            system.append(Block(layers, cache="1h"))
        request = LLMRequest(system=tuple(system), turns=tuple(to_turns(pieces + tail)),
                             max_tokens=self.budget.max_output_tokens, tier=tier, persona=persona.name)
        parts = {
            "system": system_tokens,
            "memory": layer_tokens,
            "parent": seen.tokens(protected),
            "summary": anchors.cached_tokens(summary) if summary else 0,
            "history": seen.tokens(window),
            "tail": anchors.cached_tokens(tail_text) + (seen(trigger)[1] if trigger else 0),
            "output": self.budget.max_output_tokens,
        }
        parts["free"] = max(0, self.budget.context_tokens - sum(parts.values()))
        return Assembly(request, thread, parts, own_budget, cut, protected, drawn)

    async def _protected(self, parent: Thread, thread: Thread, budget: int, seen: Rendering) -> list[Message]:
        """The parent's newest messages up to this thread's anchor, within budget, opening on a turn."""
        kept: list[Message] = []
        used = 0
        before = (thread.anchor_seq + 1) if thread.anchor_seq is not None else None
        async for message in self.store.newest_first(parent.id, before_seq=before):
            used += seen(message)[1]
            if used > budget:
                break
            kept.append(message)
        kept.reverse()
        while kept and not _starts_turn(kept[0]):
            kept.pop(0)
        return kept

    async def _window(self, thread: Thread, budget: int, seen: Rendering,
                      naive: bool) -> tuple[list[Message], Thread, bool]:
        """The thread's window from its persisted start, cutting once if it overflows."""
        start = None if naive else thread.window_start_seq
        after = start - 1 if start is not None else None
        messages: list[Message] = []
        items: list[Item] = []
        used, turns = 0, 0
        async for message in self.store.newest_first(thread.id, after_seq=after):
            tokens = seen(message)[1]
            messages.append(message)
            items.append(Item(message.seq, tokens, _starts_turn(message)))
            used += tokens
            turns += _starts_turn(message)
            if used > budget and turns >= self.policy.locked_turns:
                break
        messages.reverse()
        items.reverse()
        if naive:
            return _naive_window(messages, items, budget), thread, False
        summary_tokens = anchors.cached_tokens(thread.window_summary) if thread.window_summary else 0
        cut = plan_cut(items, budget, self.policy, summary_tokens)
        if cut is None:
            return messages, thread, False
        thread = await self._fold(thread, messages[cut].seq, seen.viewer)
        return messages[cut:], thread, True

    async def _fold(self, thread: Thread, new_start: int, viewer: set[int]) -> Thread:
        """Summarise what leaves the window (with the earlier summary) and persist the new start."""
        lines = []
        if thread.window_summary:
            lines.append(Line.of(f"[earlier summary]: {thread.window_summary}"))
        first = last = None
        async for message in self.store.span(thread.id, thread.window_start_seq, new_start):
            first = first if first is not None else message.seq
            last = message.seq
            line = transcript_line(message, viewer, self.policy)
            if line is not None:
                lines.append(Line(*line))
        summary = await summarise(self.llm, ROLLING_INSTRUCTION, lines, chunk_tokens=self.stelis.chunk_tokens,
                                  max_tokens=self.policy.summary_tokens, tier="light")
        covered_from = thread.window_summary_from if thread.window_summary_from is not None else first
        log.info("window cut in thread %d: start %s -> %d, summary covers %s-%s", thread.id,
                 thread.window_start_seq, new_start, covered_from, last)
        return await self.store.set_window(thread.id, new_start, summary, covered_from, last)

    async def _tail(self, thread: Thread, chain: list[Thread], shown: list[Message]) -> str:
        """The volatile part: the time, live status of active children, news from the parent."""
        lineage_ids = {t.id for t in chain}
        live = []
        for message in shown:
            if anchors.is_anchor(message) and "final" not in message.metadata:
                child_id = int(message.metadata["stelis_thread_id"])
                if child_id in lineage_ids:
                    continue
                child = await self.store.find_thread(child_id)
                if child is not None and child.status == "active":
                    count = await self.store.count_messages(child_id)
                    last = await self.store.last_exchanges(child_id, anchors.LAST_EXCHANGES)
                    live.append(anchors.render_live(child, count, last))
        parent_news = None
        if not thread.is_root and thread.anchor_seq is not None:
            parent = chain[1]
            count = await self.store.count_messages(parent.id, after_seq=thread.anchor_seq)
            if count:
                last = [m async for m in self.store.newest_first(parent.id, after_seq=thread.anchor_seq, page=3)][:3]
                parent_news = {"label": parent.label or "the main conversation", "count": count,
                               "lines": anchors.exchange_lines(last[::-1])}
        return render("tail.md.j2", now=anchors.format_time(self.clock()), thread=thread,
                      ref=anchors.thread_ref(thread.id), live=live, parent_news=parent_news)


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
