"""The small LLM protocol the memory engine needs; bot/ provides the implementations."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, Literal, Protocol

from memory.errors import Failure

CacheTTL = Literal["5m", "1h"]
Tier = Literal["standard", "light"]
Purpose = Literal["reply", "summary"]


@dataclass(frozen=True)
class Block:
    """One content block: text, a tool call, a tool result or an image (`text` holds its URL); `cache` marks
    a cache breakpoint."""

    text: str = ""
    kind: Literal["text", "tool_use", "tool_result", "image"] = "text"
    tool_id: str | None = None
    tool_name: str | None = None
    tool_input: dict[str, Any] | None = None
    cache: CacheTTL | None = None


@dataclass(frozen=True)
class Turn:
    role: Literal["user", "assistant"]
    blocks: tuple[Block, ...]

    @classmethod
    def text(cls, role: Literal["user", "assistant"], text: str) -> Turn:
        return cls(role, (Block(text),))


@dataclass(frozen=True)
class Tool:
    """A tool the model may call: its name, what it does, and the JSON schema of its input."""

    name: str
    description: str
    input_schema: dict[str, Any]
    cache: CacheTTL | None = None  # a breakpoint after the tool list (tools are the first bytes of a prompt)

    @cached_property
    def written(self) -> str:
        """The definition as JSON, as its weight is counted: written once, where every request asked it twice."""
        return json.dumps({"name": self.name, "description": self.description, "input_schema": self.input_schema},
                          sort_keys=True)


# "auto": the model decides; "any": it must call one; "none": it may not; any other value names the tool to call.
ToolChoice = str


@dataclass(frozen=True)
class ToolCall:
    """One tool call in a model's answer; its result goes back as a tool_result block with the same id."""

    id: str
    name: str
    input: dict[str, Any]


@dataclass(frozen=True)
class LLMRequest:
    """A provider-neutral request shaped like the Messages API (tools, system blocks, then turns)."""

    system: tuple[Block, ...]
    turns: tuple[Turn, ...]
    max_tokens: int
    tier: Tier = "standard"
    purpose: Purpose = "reply"
    # Who speaks, for the offline model's plain-spoken replies and for logs.
    persona: str = ""
    tools: tuple[Tool, ...] = ()
    tool_choice: ToolChoice | None = None  # None: the provider's default ("auto" when tools are given)
    # The answer must be a JSON object of this schema (the instruction says so in words; a provider
    # without a model, the offline one, writes a valid object from it).
    response_schema: dict[str, Any] | None = None
    model: str | None = None  # this conversation's own model (a server's choice); None: the tier's
    # The conversation whose cached prefix this request extends ("" for a background job): a local server with
    # several slots keeps each conversation's prefix warm in its own.
    cache_key: str = ""

    def replayable(self) -> LLMRequest:
        """The request as a provider can send it: a history's tool blocks become text when no tools are
        defined (the Messages API rejects tool blocks in a request without tools)."""
        if self.tools or not any(b.kind in ("tool_use", "tool_result") for t in self.turns for b in t.blocks):
            return self
        return replace(self, turns=tuple(Turn(t.role, tuple(_as_text(b) for b in t.blocks)) for t in self.turns))


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    estimated: bool = False  # the server did not count (a stream without usage): these are our estimates


@dataclass(frozen=True)
class LLMResult:
    text: str
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    stop_reason: str | None = None  # "tool_use" when the model waits for tool results
    tool_calls: tuple[ToolCall, ...] = ()
    placeholder: bool = False  # a stand-in's text (no model wrote it): kept, but never recalled as the persona's


def _as_text(block: Block) -> Block:
    """A tool block rendered as plain text, keeping its cache breakpoint."""
    if block.kind == "tool_use":
        text = f"[tool call {block.tool_name} {json.dumps(block.tool_input or {}, ensure_ascii=False)}]"
    elif block.kind == "tool_result":
        text = f"[tool result]\n{block.text}" if block.text else "[tool result: empty]"
    else:
        return block
    return Block(text, cache=block.cache)


class LLMError(Failure):
    """A request that failed for good (after the provider's retries); `notice` is fit to show users."""

    def __init__(self, notice: str, *, retryable: bool = True, status: int | None = None):
        super().__init__(notice)
        self.retryable = retryable
        self.status = status


class RequestTooLarge(LLMError):
    """A request larger than the model's context (said before sending it, or by the server): what does not
    fit must be sent in smaller parts, never sent again unchanged."""

    def __init__(self, notice: str, tokens: int | None = None):
        super().__init__(notice, retryable=False, status=400)
        self.tokens = tokens  # the prompt's size as counted (by the server, when it said so)


TextSink = Callable[[str], None]


class LLM(Protocol):
    name: str

    async def complete(self, request: LLMRequest, on_text: TextSink | None = None) -> LLMResult:
        """Answer the request; stream text pieces to `on_text` when given; raise LLMError on failure."""
        ...

    async def aclose(self) -> None: ...
