"""The memory layers of a prompt (seed 004), within their share of the budget.

Shown, in this order: the server's long-term memory, other shareable channels, then this
conversation (pinned facts, long-term memory, short-term versions oldest first), then a Discord
thread's own memory. When they do not fit, they are kept by priority: pins, this conversation's
long-term memory, its newest version, the server's memory, older versions, other channels.

Sharing is enforced here: another channel's memory appears only when it is shareable and in the
same guild; a DM (or the console) sees only its own memory and never reaches a guild. Records are
read as of a snapshot (`as_of`, a record id), so a version written mid-conversation reaches the
prompt at the window's next cut, not in the middle of a cached prefix.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass, field

from memory import dates, extractive
from memory.records import MemoryRecord, Thread, Versions, channel_versions, own_memory
from memory.store import Store
from memory.tokens import cached_tokens

OWN, OTHER, SERVER, THREAD = "own", "other", "server", "thread"
# A conversation's own memory read already (Store.opening): what was asked (records.own_memory), and each part
Known = tuple[tuple[Versions, ...], list[list[MemoryRecord]]]


@dataclass(frozen=True)
class Layers:
    text: str = ""
    tokens: int = 0
    records: frozenset[int] = frozenset()  # ids of the records shown whole
    partly: dict[int, frozenset[str]] = field(default_factory=dict)  # a record shortened to fit: the lines shown
    covered_to: int | None = None  # the newest message of this thread a shown version of its own covers


@dataclass
class _Piece:
    priority: int
    section: tuple[int, str]  # display order, title
    order: int  # display order within the section
    text: str
    record: MemoryRecord | None = None
    shortened: bool = False  # lines were left out to fit: recall may still bring them
    tokens: int = field(init=False)

    def __post_init__(self) -> None:
        self.tokens = cached_tokens(self.text) + 1


async def memory_layers(store: Store, thread: Thread, root: Thread, *, versions: int,
                        shared: int, as_of: int | None = None,
                        budget: int | None = None, pinned: Container[tuple[str, int]] | None = None,
                        known: Known | None = None) -> Layers:
    """The rendered layers for a thread whose conversation root is `root`, within `budget` tokens (`pinned`: the
    (scope, id) pairs known to have pins, when known: a conversation not among them has its pins left unread;
    `shared` 0: no other channel shown; `known`: its own memory already read as of `as_of`, and what was asked)."""
    pieces = await _candidates(store, thread, root, versions, shared, as_of, pinned, known)
    chosen = fit(pieces, budget)
    if not chosen:
        return Layers()
    text = render(chosen)
    # Only the thread's own versions cover its messages: a Discord thread's messages are not its channel's.
    own = [p.record for p in chosen if p.record is not None and p.record.type == "short_term"
           and (p.record.scope, p.record.scope_id) == thread.memory_scope]
    whole = frozenset(p.record.id for p in chosen if p.record and not p.shortened)
    partly = {p.record.id: frozenset(p.text.splitlines()) for p in chosen if p.record and p.shortened}
    return Layers(text, cached_tokens(text), whole, partly,
                  max((r.last_seq for r in own if r.last_seq is not None), default=None))


async def _candidates(store: Store, thread: Thread, root: Thread, versions: int, shared: int, as_of: int | None,
                      pinned: Container[tuple[str, int]] | None, known: Known | None) -> list[_Piece]:
    persona, guild_id, channel_id = root.persona, root.guild_id, root.channel_id or 0
    asked = own_memory(root, thread, versions)
    # Four statements at most, whatever the server shares: the pins, the versions of this conversation, its
    # Discord thread and its server (unless read with the thread: `known`), and which channels share; then all
    # their versions at once. One after the other: they run on the connection the assembly holds (Store.held).
    pins = await store.pins(persona, "channel", channel_id) \
        if pinned is None or ("channel", channel_id) in pinned else []
    if known is not None and known[0] == asked and thread.persona == persona:  # read with the thread, its persona's
        found = known[1]
    else:
        found = await store.newest_records(persona, asked, as_of)
    others = [] if guild_id is None or shared <= 0 else await store.shared_channels(persona, guild_id, limit=shared,
                                                                                   besides=channel_id)
    own = (50, OWN)
    pieces = [_Piece(0, own, -1, "## Pinned facts\n" + "\n".join(f"- {p}" for p in pins))] if pins else []
    long_term, recent, *rest = found
    pieces += _channel(own, long_term, recent, (1, 3, 5))
    thread_version = rest.pop(0) if thread.discord_thread_id is not None else []
    server = rest.pop(0) if guild_id is not None else []
    if thread_version:
        pieces.append(_Piece(2, (90, THREAD), 0, _short_term_text(thread_version[0], "Latest"), thread_version[0]))
    if server:
        pieces.append(_Piece(4, (0, SERVER), 0, _long_term_text(server[0]), server[0]))
    # Seed 004: each shared channel's newest versions too, oldest first; a tight room drops its oldest versions
    # before another channel's newest (a channel's long-term memory comes before its versions). The most recently
    # active are nearest this conversation.
    theirs = await store.newest_records(
        persona, [ask for other in others for ask in channel_versions(other.channel_id or 0, versions)], as_of) \
        if others else []
    for rank, other in enumerate(others):
        pieces += _channel((49 - rank, f"#{other.name or other.channel_id}"), theirs[2 * rank],
                           theirs[2 * rank + 1], (10 + 2 * rank, 11 + 2 * rank, 11 + 2 * rank))
    return pieces


def _channel(section: tuple[int, str], long_term: list[MemoryRecord], recent: list[MemoryRecord],
             priorities: tuple[int, int, int]) -> list[_Piece]:
    """A channel's long-term memory and its newest versions, oldest first, each with its priority."""
    pieces = [_Piece(priorities[0], section, 0, _long_term_text(long_term[0]), long_term[0])] if long_term else []
    for age, record in enumerate(reversed(recent)):
        label = "Newest" if age == 0 else ("Oldest shown" if age == len(recent) - 1 else "Earlier")
        priority = priorities[1] if age == 0 else priorities[2] + age
        pieces.append(_Piece(priority, section, len(recent) - age, _short_term_text(record, label), record))
    return pieces


def fit(pieces: list[_Piece], budget: int | None) -> list[_Piece]:
    """Pieces by priority while they fit; one that does not is shortened to the room left, if that is worth it."""
    if budget is None:
        return pieces
    chosen: list[_Piece] = []
    used = 0
    titles: set[tuple[int, str]] = set()
    for piece in sorted(pieces, key=lambda p: (p.priority, p.section, p.order)):
        header = 0 if piece.section in titles else cached_tokens(_title(piece.section)) + 2
        room = budget - used - header
        if piece.tokens > room:
            if room < 80:
                continue
            piece = _Piece(piece.priority, piece.section, piece.order, shorten(piece.text, room), piece.record, True)
            if piece.tokens > room:
                continue
        chosen.append(piece)
        titles.add(piece.section)
        used += piece.tokens + header
    return chosen


def shorten(text: str, tokens: int) -> str:
    """The most informative whole lines that fit in `tokens`, in their order, with a note of what was left out."""
    lines = text.splitlines()
    body = [extractive.Sentence(i, None, None, line, None) for i, line in enumerate(lines[1:])]
    chosen = extractive.select(body, tokens - cached_tokens(lines[0]) - 24)
    left_out = len(body) - len(chosen)
    if left_out <= 0:
        return text
    return "\n".join([lines[0], *(s.text for s in chosen),
                      f"(… {left_out} line(s) left out here; recall and /memory show have them)"])


def render(chosen: list[_Piece]) -> str:
    sections: dict[tuple[int, str], list[_Piece]] = {}
    for piece in sorted(chosen, key=lambda p: (p.section, p.order)):
        sections.setdefault(piece.section, []).append(piece)
    blocks = []
    for section, pieces in sections.items():
        blocks.append("\n".join([_title(section), *(p.text for p in pieces)]))
    return "\n\n".join(blocks)


def _title(section: tuple[int, str]) -> str:
    name = section[1]
    return {OWN: "# Memory of this conversation", SERVER: "# Memory of this server",
            THREAD: "# Memory of this Discord thread"}.get(name, f"# Memory of {name}")


def covered_days(record: MemoryRecord) -> str:
    """The days a record's messages were said on, from its metadata (older records: when it was written)."""
    meta = record.metadata
    return dates.span(meta.get("first_at", record.created_at), meta.get("last_at", record.created_at))


def _long_term_text(record: MemoryRecord) -> str:
    return f"## Long-term memory (v{record.version}, {covered_days(record)})\n{record.content}"


def _short_term_text(record: MemoryRecord, label: str) -> str:
    span = f", messages {record.first_seq}-{record.last_seq}" if record.first_seq is not None else ""
    return f"### {label} short-term memory (v{record.version}, {covered_days(record)}{span})\n{record.content}"
