"""The cache-stable window: sizes from the seed's ratios, and what to drop when a window overflows.

The window keeps a persisted start; it moves only on overflow, in one step, so the prefix the cache
holds stays byte-identical in between (seed 003 plus metabolism). Everything after the first
changed byte is sent again uncached, so a *cut* (a new start) costs all it keeps, and the turns
until the next overflow are what it freed: kept / (1 - kept) per turn, whatever the window's size.
A cut leaves the window and the memory layers shown before it between `low_water` and `high_water` full
(0.68-0.76 by default, fuller when the usual turns are small next to the window, emptier when it holds so
few that low_water would not leave room for `cut_room_turns` more); the rolling summary, the memory layers
and recall carry what left it. The memory counts as kept: a channel whose memory is still empty keeps more
of its window, one with long memory less, so a request is about as full after a cut either way. However low
that is, a cut keeps as many of the newest ten turns (seed 003's buffer at its most) as locked turns may fill
(`lock_limit`): beside long memory a small window's fill is below its six locked turns, and a cut that kept
those alone left little but the memory and the summary. Trims lock `locked_turns` alone: each sends them again.

Most overflows are *trims*: the window keeps its head (its oldest turns, whose prefix the cache
holds) and its locked turns, and drops the run between them into a bridge summary. Only the bridge
and the locked turns are sent again, so a trim costs a fraction of a cut for the same fill, and
requests average about 0.8 of the input budget for a cache share above a Letta-style sliding
window's. After `trims` trims (the head grows stale, and new memory versions wait for a cut) the
next overflow cuts, and so does one where the trim would cost more per turn (`trim_pays`: a head so
large that a trim frees little). bench cache_efficiency measures the trade (README).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memory.errors import Failure
from memory.settings import ContextSettings

MESSAGE_SHARE = 0.4  # one message is shown reduced (head and tail) beyond this share of its window
CUT_TURNS = 10  # a cut keeps as many of the newest turns as fit the lock limit, up to seed 003's most (5-10)


class LockedBufferTooLarge(Failure):
    """The newest turn alone exceeds the window; sending it would overflow the model."""


@dataclass(frozen=True)
class Item:
    """One stored message as the window sees it."""

    seq: int
    tokens: int
    starts_turn: bool  # a user or system message (not a tool result): a safe first message


def window_size(capacity: int, ratios: Sequence[float]) -> int:
    """The seed's formula: the capacity times each window_ratio from the root down, truncated per step."""
    size = capacity
    for ratio in ratios:
        size = int(size * ratio)
    return size


def protected_size(parent_window: int, ratio: float) -> int:
    """What a Stelis thread keeps of its parent: parent window × (1 − ratio), so the two sum to the parent's."""
    return parent_window - int(parent_window * ratio)  # not int(w * (1 - r)): 1 - 0.8 is 0.19999...


def turn_sizes(items: Sequence[Item]) -> list[int]:
    """Tokens of each turn (a user or system message and what follows it), oldest first."""
    sizes: list[int] = []
    for item in items:
        if item.starts_turn or not sizes:
            sizes.append(0)
        sizes[-1] += item.tokens
    return sizes


def locked_start(items: Sequence[Item], turns: int, limit: int | None = None) -> int:
    """Index where the last `turns` turns begin (0 when the thread has fewer).

    With a `limit`, only as many of them as fit in it are locked, but always the newest turn.
    """
    suffix = 0
    start, seen = len(items), 0
    for i in range(len(items) - 1, -1, -1):
        suffix += items[i].tokens
        if not items[i].starts_turn:
            continue
        if seen and limit is not None and suffix > limit:
            return start
        start, seen = i, seen + 1
        if seen == turns:
            return start
    if limit is not None and seen and suffix > limit:
        return start
    return 0


def lock_limit(items: Sequence[Item], budget: int, policy: ContextSettings, summary_room: int) -> int:
    """The most the locked turns may fill: with the next summary, no more than high_water of the window, nor
    more than leaves room for half of turns_per_cut (a small window's locked turns would fill it)."""
    roomy = _roomy(recent_turns(items), budget, policy)
    return int(budget * min(policy.high_water, roomy)) - summary_room


def fill_target(items: Sequence[Item], budget: int, policy: ContextSettings, shown: int = 0,
                biggest: bool = True) -> float:
    """How full a cut leaves the window: room for `turns_per_cut` usual turns, and for two of the biggest of the
    locked turns (`biggest` False: of the usual size); at least low_water full while that leaves room for half as
    many. The waters are of the window and the memory `shown` before it (a cut keeps both), so a window shown
    without memory yet keeps more of itself."""
    sizes = recent_turns(items)
    usual = sum(sizes) / len(sizes)
    low, high = (_of_window(water, budget, shown) for water in (policy.low_water, policy.high_water))
    fill = max(min(low, _roomy(sizes, budget, policy)), 1 - policy.turns_per_cut * usual / budget)
    big = max(sizes[-policy.locked_turns:]) if biggest else usual
    return max(0.15, min(high, fill, 1 - 2 * big / budget))


def _of_window(water: float, budget: int, shown: int) -> float:
    """A water of the window and the memory shown before it, as a share of the window alone."""
    return (water * (budget + shown) - shown) / budget


def recent_turns(items: Sequence[Item]) -> list[int]:
    """The turn sizes a window's usual turn is judged by: the last 20."""
    return turn_sizes(items)[-20:] or [0]


def _roomy(sizes: list[int], budget: int, policy: ContextSettings) -> float:
    """The fill that leaves room for cut_room_turns usual turns (`sizes`: the recent ones; unset, half of
    turns_per_cut). Where it binds (a window of a few turns) a cut keeps less, so cuts, each sent again whole,
    do not come every other turn."""
    turns = policy.turns_per_cut / 2 if policy.cut_room_turns is None else policy.cut_room_turns
    return 1 - turns * (sum(sizes) / len(sizes)) / budget


def plan_cut(items: Sequence[Item], budget: int, policy: ContextSettings, summary_tokens: int = 0,
             summary_room: int | None = None, force: bool = False, head: int = 0, spare: int = 0,
             shown: int = 0) -> int | None:
    """Index of the new first item after one cut, or None when everything fits (and not `force`d).

    `summary_tokens` is the current summaries' size, `summary_room` what the next one may take, `shown` the
    memory shown before the window (`fill_target`);
    `force` plans the cut the window will take when it overflows, to summarise it ahead of time;
    a trimmed window (`head` items before its gap) restarts after its gap; it overflows only past the budget and
    `spare` (room the request lends it this turn), but is cut within the budget. Cuts only before a turn
    start, so no tool_use is parted from its result and the window never opens with an assistant
    turn or an orphan tool result.
    """
    total = summary_tokens + sum(i.tokens for i in items)
    room = policy.summary_tokens if summary_room is None else summary_room
    limit = lock_limit(items, budget, policy, room)
    lock = max(head, locked_start(items, policy.locked_turns, limit))
    locked = sum(i.tokens for i in items[lock:])
    if locked > budget:
        raise LockedBufferTooLarge(
            f"the newest turn alone needs {locked} tokens but the window holds {budget}; "
            "raise llm.context_tokens"
        )
    if total <= budget + spare and not force:
        return None
    target = max(0, int(budget * fill_target(items, budget, policy, shown)) - room)
    floor = max(head, locked_start(items, max(CUT_TURNS, policy.locked_turns), limit)) or lock
    suffix = sum(i.tokens for i in items[floor:])
    best = floor if floor > 0 else None
    for i in range(floor - 1, max(0, head - 1), -1):
        suffix += items[i].tokens
        if suffix > target:
            break
        if items[i].starts_turn:
            best = i
    return best


def plan_trim(items: Sequence[Item], budget: int, policy: ContextSettings, summary_tokens: int = 0,
              summary_room: int | None = None, head: int = 0, cached: int = 0,
              marked: int = 0, shown: int = 0) -> tuple[int, int] | None:
    """(head, start) of a trim: the window keeps items[:head] and its locked turns items[start:].

    What a trim keeps after the head is sent again, so it keeps no more than the locked turns. A
    window without a head yet takes the longest run of whole turns that fills the rest of a cut's
    fill, ending where the cache holds the prefix: after its first `cached` items (they were last
    sent inside one request), or at `marked` (a breakpoint put there for it). `summary_tokens` is
    the summary before the window (a trim keeps it), `summary_room` the bridge's, `shown` the memory
    before the window (`fill_target`). None when nothing lies between head and locked turns, or they
    leave no room.
    """
    room = policy.summary_tokens if summary_room is None else summary_room
    lock = locked_start(items, policy.locked_turns, lock_limit(items, budget, policy, room))
    locked = sum(i.tokens for i in items[lock:])
    if not head:
        target = int(budget * fill_target(items, budget, policy, shown)) - summary_tokens - room - locked
        ends, used = [], 0
        for i in range(lock):
            if items[i].starts_turn and i and (i >= cached or i == marked):
                ends.append((i, used))
            used += items[i].tokens
        fitting = [i for i, before in ends if before <= target]
        head = fitting[-1] if fitting else ends[0][0] if ends else 0
    if head < 1 or lock <= head or sum(i.tokens for i in items[:head]) + locked + summary_tokens + room >= budget:
        return None
    return head, lock


def head_end(items: Sequence[Item], start: int, budget: int, policy: ContextSettings, summary_tokens: int = 0,
             summary_room: int | None = None, shown: int = 0) -> int | None:
    """Where the head the next trims keep may end after a cut to items[start:] (None: nowhere): at the cut's
    locked turns, or past them where they are larger than usual (a long tool output among them).

    Every trim until the next cut keeps that head; planned around an unusual output, it would leave each of
    them emptier. So it reaches as far as a head that leaves a trim's fill (not lowered for the output) room for
    the new summary (`summary_tokens`), a bridge (`summary_room`) and locked turns of the usual size, and takes
    in a turn straddling that where stopping before it would leave the head more than a usual turn short.
    """
    room = policy.summary_tokens if summary_room is None else summary_room
    lock = locked_start(items, policy.locked_turns, lock_limit(items, budget, policy, room))
    kept = items[start:]
    sizes = recent_turns(kept)
    turn = sum(sizes) / len(sizes)
    fill = fill_target(kept, budget, policy, shown, biggest=False)
    target = budget * fill - summary_tokens - room - policy.locked_turns * turn
    end = lock if start < lock < len(items) else None
    first = max(start, lock)
    before = at = sum(i.tokens for i in items[start:first])
    for i in range(first + 1, len(items)):
        before += items[i - 1].tokens
        if not items[i].starts_turn:
            continue
        if before > target:
            return i if target - at > turn else end
        end, at = i, before
    return end


def trim_pays(items: Sequence[Item], budget: int, summary_tokens: int, written: int, trim: tuple[int, int],
              cut: int) -> bool:
    """Whether a trim costs less per turn than the cut: what each sends again, over the room it leaves.

    A cut sends again all it keeps and its new summary, a trim its bridge and the locked turns (`written`: what
    the summary or bridge is expected to take).
    """
    def tokens(part: Sequence[Item]) -> int:
        return sum(i.tokens for i in part)

    head, start = trim
    trim_sent = written + tokens(items[start:])
    trim_free = budget - summary_tokens - tokens(items[:head]) - trim_sent
    cut_sent = written + tokens(items[cut:])
    return trim_free > 0 and trim_sent * (budget - cut_sent) < cut_sent * trim_free
