"""A Letta-style context manager for `bench cache_efficiency`, as faithful as a stand-in can be.

Letta's sliding-window summariser: a static system prompt (cached), then a summary message, then
the most recent messages. When a request would exceed the context budget, everything older than a
cut is summarised in one call (the previous summary included) and the kept messages start at an
assistant message and fit in `keep_share` of the context window with the system prompt (Letta's
default 0.3); the summary is clipped to 2,000 characters. Given the same message-level cache
breakpoint as Stelis, so the comparison is with the best version of the design.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from memory.llm import LLM, Block, LLMRequest, Turn
from memory.records import Message, NewMessage
from memory.tokens import count_tokens
from memory.turns import Piece, mark, to_pieces, to_turns

SUMMARY_NOTE = ("Note: prior messages have been hidden from view due to conversation memory constraints.\n"
                "The following is a summary of the previous messages:\n")
SUMMARY_PROMPT = ("Summarise the conversation below for the assistant's memory: who said what, every name, "
                  "number and decision, in under 100 words.")
CLIP_CHARS = 2_000


@dataclass
class LettaStyle:
    llm: LLM
    system: str
    input_budget: int  # what a request may carry (the context less the reply's reserve)
    context_window: int
    max_tokens: int
    keep_share: float = 0.3
    messages: list[Message] = field(default_factory=list)
    summary: str = ""
    summaries: int = 0

    def add(self, new: NewMessage) -> None:
        self.messages.append(Message(len(self.messages) + 1, 0, new.role, new.content, count_tokens(new.content),
                                     metadata=dict(new.metadata)))

    async def request(self) -> LLMRequest:
        """The next request, summarising first when it would not fit."""
        if self._tokens(self.messages) > self.input_budget:
            await self._summarise()
        return self._layout()

    def _layout(self) -> LLMRequest:
        pieces = to_pieces(self.messages, [m.content for m in self.messages])
        if self.summary:
            pieces.insert(0, Piece("user", Block(SUMMARY_NOTE + self.summary)))
        if pieces:
            mark(pieces, len(pieces) - 1)
        return LLMRequest(system=(Block(self.system, cache="1h"),), turns=tuple(to_turns(pieces)),
                          max_tokens=self.max_tokens)

    def _tokens(self, messages: list[Message]) -> int:
        return (count_tokens(self.system) + (count_tokens(SUMMARY_NOTE + self.summary) if self.summary else 0)
                + sum(m.token_count for m in messages))

    async def _summarise(self) -> None:
        """Move the cut forward in tenths of the messages until the rest fits `keep_share` of the window."""
        keep_at = _last_user(self.messages)  # nothing fits: keep only the message being answered
        limit = self.keep_share * self.context_window
        for tenth in range(7, 10):
            start = _next_assistant(self.messages, round(tenth / 10 * len(self.messages)))
            if start is not None and count_tokens(self.system) + sum(
                    m.token_count for m in self.messages[start:]) <= limit:
                keep_at = start
                break
        leaving, self.messages = self.messages[:keep_at], self.messages[keep_at:]
        transcript = "\n".join(f"{m.role}: {m.content}" for m in leaving)
        if self.summary:
            transcript = f"[previous summary] {self.summary}\n{transcript}"
        result = await self.llm.complete(LLMRequest(
            system=(Block(SUMMARY_PROMPT),), turns=(Turn.text("user", transcript),), max_tokens=512,
            tier="light", purpose="summary"))
        self.summary = result.text[:CLIP_CHARS]
        self.summaries += 1


def _last_user(messages: list[Message]) -> int:
    return max((i for i, m in enumerate(messages) if m.role == "user"), default=len(messages))


def _next_assistant(messages: list[Message], index: int) -> int | None:
    """Letta keeps from an assistant message on (here: one that is not a tool call, so no result is orphaned)."""
    for i in range(index, len(messages)):
        if messages[i].role == "assistant" and not messages[i].metadata.get("tool_use"):
            return i
    return None
