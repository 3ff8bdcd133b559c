"""The small LLM protocol the memory engine needs; bot/ provides the implementations."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from memory.errors import Failure

CacheTTL = Literal["5m", "1h"]
Tier = Literal["standard", "light"]
Purpose = Literal["reply", "summary"]


@dataclass(frozen=True)
class Block:
    """One content block: text, a tool call or a tool result; `cache` marks a cache breakpoint."""

    text: str = ""
    kind: Literal["text", "tool_use", "tool_result"] = "text"
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
class LLMRequest:
    """A provider-neutral request shaped like the Messages API (system blocks, then turns)."""

    system: tuple[Block, ...]
    turns: tuple[Turn, ...]
    max_tokens: int
    tier: Tier = "standard"
    purpose: Purpose = "reply"
    # Who speaks, for the offline model's plain-spoken replies and for logs.
    persona: str = ""


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0


@dataclass(frozen=True)
class LLMResult:
    text: str
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    stop_reason: str | None = None


class LLMError(Failure):
    """A request that failed for good (after the provider's retries); `notice` is fit to show users."""

    def __init__(self, notice: str, *, retryable: bool = True, status: int | None = None):
        super().__init__(notice)
        self.retryable = retryable
        self.status = status


TextSink = Callable[[str], None]


class LLM(Protocol):
    name: str

    async def complete(self, request: LLMRequest, on_text: TextSink | None = None) -> LLMResult:
        """Answer the request; stream text pieces to `on_text` when given; raise LLMError on failure."""
        ...

    async def aclose(self) -> None: ...
