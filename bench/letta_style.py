"""A Letta-style context manager for `bench cache_efficiency`, as faithful as a stand-in can be.

Read from letta/services/summarizer/summarizer_sliding_window.py: a static system prompt (cached),
then a summary message, then the most recent messages. When a request would exceed the budget, the
cut starts at `sliding_window_percentage` (default 0.3) of the in-context messages plus a tenth, and
moves on by tenths until the system prompt and the messages from the last assistant message before
the cut fit in (1 - 0.3) of the context window; everything before it (the previous summary message
included) is summarised in one call, clipped at 50,000 characters (Letta's default). Given the same
message-level cache breakpoint as Stelis, so the comparison is with the best version of the design.

Letta counts what it keeps with the provider's token counter, on the messages as the provider receives them
(`token_counter.convert_messages`, then `count_message_tokens`: for Anthropic, the count-tokens endpoint), so
each message's framing counts. Here each request is counted as Stelis counts its own (bot/fitting.py's
`request_tokens`), so both are held to the same budget on the same terms.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.fitting import request_tokens
from memory.llm import LLM, Block, LLMRequest, Turn
from memory.records import Message, NewMessage
from memory.tokens import count_tokens
from memory.turns import Piece, mark, to_pieces, to_turns

SUMMARY_NOTE = ("Note: prior messages have been hidden from view due to conversation memory constraints.\n"
                "The following is a summary of the previous messages:\n")
CLIP_CHARS = 50_000

SUMMARY_PROMPT = ("Summarise the conversation below for the assistant's memory: who said what, every name, "
                  "number and decision, in under 100 words.")


@dataclass
class LettaStyle:
    llm: LLM
    system: str
    input_budget: int  # what a request may carry (the context less the reply's reserve)
    context_window: int
    max_tokens: int
    sliding_window_percentage: float = 0.3
    messages: list[Message] = field(default_factory=list)
    summary: str = ""
    summaries: int = 0

    def add(self, new: NewMessage) -> None:
        self.messages.append(Message(len(self.messages) + 1, 0, new.role, new.content, count_tokens(new.content),
                                     metadata=dict(new.metadata)))

    async def request(self) -> LLMRequest:
        """The next request, summarising first when it would not fit."""
        if request_tokens(self._layout(self.messages, self.summary)) > self.input_budget:
            await self._summarise()
        return self._layout(self.messages, self.summary)

    def _layout(self, messages: list[Message], summary: str) -> LLMRequest:
        pieces = to_pieces(messages, [m.content for m in messages])
        if summary:
            pieces.insert(0, Piece("user", Block(SUMMARY_NOTE + summary)))
        if pieces:
            mark(pieces, len(pieces) - 1)
        return LLMRequest(system=(Block(self.system, cache="1h"),), turns=tuple(to_turns(pieces)),
                          max_tokens=self.max_tokens)

    async def _summarise(self) -> None:
        """Letta's cut: evict from 40 % of the messages on, by tenths, until the rest fits the goal."""
        # Letta's list is [system, summary message?, *messages]; its indices are kept here.
        listed = ([Message(0, 0, "user", SUMMARY_NOTE + self.summary, 0)] if self.summary else []) + self.messages
        total = 1 + len(listed)
        goal = (1 - self.sliding_window_percentage) * self.context_window
        eviction, cut, tokens = self.sliding_window_percentage, None, float(self.context_window)
        while tokens >= goal and eviction < 1.0:
            eviction += 0.1
            index = round(eviction * total)
            cut = next((i for i in reversed(range(1, index + 1)) if i < total and listed[i - 1].role == "assistant"),
                       None)
            if cut is not None:
                tokens = request_tokens(self._layout(listed[cut - 1:], ""))  # the system and what stays
        if cut is None or cut >= total - 1:
            return  # Letta raises here and falls back to summarising everything; no such turn in the script
        leaving = listed[:cut - 1]
        self.messages = listed[cut - 1:]
        transcript = "\n".join(f"{m.role}: {m.content}" for m in leaving)
        result = await self.llm.complete(LLMRequest(
            system=(Block(SUMMARY_PROMPT),), turns=(Turn.text("user", transcript),), max_tokens=512,
            tier="light", purpose="summary"))
        self.summary = result.text[:CLIP_CHARS]
        self.summaries += 1
