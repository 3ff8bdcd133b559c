"""One budget (DESIGN.md section 5): everything a request carries is planned inside the model's context.

The reply's reserve comes off the top; what is left after the system prompt is shared out: memory
layers get a share, the volatile tail and recall get theirs, and the windows get the rest. Shares,
not fixed token counts, so the same plan works from a 2k local model to a 200k one. The tail and
recall are reserved only their floor: what a window leaves unused (all but the turns before a cut)
is theirs up to their share, so no room sits empty while the window is cut early for it. Recall's
floor is a question's: on a remark's turn the window may grow into it (memory/context.py, `_spare`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from memory.errors import Failure
from memory.settings import ContextSettings

SAFETY = 0.05  # of the context: token counts are estimates of another tokenizer
MIN_TAIL = 32  # the time line alone needs about this much
MIN_CONVERSATION = 256  # below this the persona cannot hold a conversation at all
RECALL_FLOOR = 1 / 3  # of recall's share: what a full window still leaves it ...
MIN_RECALL = 256  # ... but never less than about two hit lines, or a small context would recall nothing
MOST_RECALL = 400  # a remark points back at a few things, whatever the context's size: four or so hit lines
MOST_ASKED = 1_600  # a question, where recall answers: what the window leaves, up to about sixteen hit lines


class ContextError(Failure):
    """A context that cannot be assembled within the model's window."""


@dataclass(frozen=True)
class Budget:
    context_tokens: int
    max_output_tokens: int
    shares: ContextSettings = field(default_factory=ContextSettings)
    safety: float = SAFETY  # of the context; more where the model's server counts more tokens than cl100k

    @property
    def output(self) -> int:
        """The reply's reserve: as configured, but never more than a quarter of a small context."""
        return min(self.max_output_tokens, self.context_tokens // 4)

    @property
    def input(self) -> int:
        return int(self.context_tokens * (1 - self.safety)) - self.output

    @property
    def memory(self) -> int:
        """About what the memory layers may take of a request (the persona card, a few hundred tokens, aside)."""
        return int(self.input * self.shares.memory_share)


@dataclass(frozen=True)
class Plan:
    input: int
    system: int
    memory: int  # the most the memory layers may take
    tail: int
    recall: int  # recall's room for a remark, however full or empty the window is

    @property
    def rest(self) -> int:
        return self.input - self.system

    def recall_room(self, question: bool) -> int:
        """Recall's most: a question is where recall answers, and may have whatever room the window leaves
        (right after a cut, a quarter of the request), up to MOST_ASKED."""
        return MOST_ASKED if question else self.recall  # a remark's is never more than MOST_RECALL

    @property
    def recall_floor(self) -> int:
        """What a full window still leaves recall (and the tail, MIN_TAIL)."""
        return max(int(self.recall * RECALL_FLOOR), min(self.recall, MIN_RECALL))

    def windows(self, memory_used: int) -> int:
        """What the windows (root window, and the parent regions of Stelis threads) share."""
        return self.rest - memory_used - MIN_TAIL - self.recall_floor


def plan(budget: Budget, system_tokens: int) -> Plan:
    """Share out one request's input tokens; a persona card that leaves no room is a clear error."""
    rest = budget.input - system_tokens
    if rest < max(MIN_CONVERSATION, budget.input // 3):
        raise ContextError(
            f"the persona card and instructions take {system_tokens} of the {budget.input} input tokens a request "
            f"may use (llm.context_tokens {budget.context_tokens} minus {budget.output} for the reply); "
            "shorten persona.card or raise llm.context_tokens"
        )
    shares = budget.shares
    p = Plan(budget.input, system_tokens, memory=int(rest * shares.memory_share),
             tail=max(MIN_TAIL, int(rest * shares.tail_share)),
             recall=min(MOST_RECALL, int(rest * shares.recall_share)))
    # However small the context, the conversation itself keeps at least half of what the card leaves.
    most = rest // 2 - MIN_TAIL - p.recall_floor
    return replace(p, memory=max(0, min(p.memory, most)))


def summary_room(window: int, shares: ContextSettings, most: int) -> int:
    """Room for a window's rolling summary: its share of the window, within [48, most]."""
    return max(48, min(most, int(window * shares.summary_share)))
