"""The cache-stable window: sizes from the seed's ratios, and where to cut when a window overflows.

The window keeps a persisted start; it moves only on overflow, in one step down to a low-water
mark, so the prefix the cache holds stays byte-identical between cuts (seed 003 plus metabolism).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class WindowPolicy:
    low_water: float = 0.6  # share of the budget kept after a cut
    locked_turns: int = 6  # the immediate buffer: never cut
    summary_tokens: int = 1200  # room kept for the rolling summary injected at the cut
    observation_max_lines: int = 120  # tool results longer than this are reduced
    observation_keep_lines: int = 40  # lines kept at each end of a reduced tool result


class LockedBufferTooLarge(Exception):
    """The last K turns alone exceed the window; sending them would overflow the model."""


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


def locked_start(items: Sequence[Item], turns: int) -> int:
    """Index where the last `turns` turns begin (0 when the thread has fewer)."""
    seen = 0
    for i in range(len(items) - 1, -1, -1):
        if items[i].starts_turn:
            seen += 1
            if seen == turns:
                return i
    return 0


def plan_cut(items: Sequence[Item], budget: int, policy: WindowPolicy, summary_tokens: int = 0) -> int | None:
    """Index of the new first item after one cut, or None when everything fits.

    Cuts only before a turn start, so no tool_use is parted from its result and the window never
    opens with an assistant turn or an orphan tool result.
    """
    total = summary_tokens + sum(i.tokens for i in items)
    lock = locked_start(items, policy.locked_turns)
    locked = sum(i.tokens for i in items[lock:])
    if locked > budget:
        raise LockedBufferTooLarge(
            f"the last {policy.locked_turns} turns alone need {locked} tokens but the window holds {budget}; "
            "raise llm.context_tokens or lower context.locked_turns"
        )
    if total <= budget:
        return None
    target = max(0, int(budget * policy.low_water) - policy.summary_tokens)
    suffix = locked
    best = lock if lock > 0 else None
    for i in range(lock - 1, 0, -1):
        suffix += items[i].tokens
        if suffix > target:
            break
        if items[i].starts_turn:
            best = i
    return best
