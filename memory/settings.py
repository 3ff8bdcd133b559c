"""The memory engine's settings: each one's default, bounds and meaning, declared once.

config.yaml sections validate against these same models (bot/config.py composes them), so a
value that memory/ reads is never declared a second time elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

LONG_TERM_LEAST = 512  # tokens of long-term memory, whatever the context
LONG_TERM_MOST = 8_000  # ... and at most: each merge rewrites all of it

Tier = Literal["standard", "light"]


class Section(BaseModel):
    """A settings section: unknown keys are errors, assignments are validated, values never change in place."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, frozen=True)


class StelisSettings(Section):
    default_window_ratio: float = Field(0.8, gt=0.0, lt=1.0, description=(
        "Share of the parent's window a Stelis thread gets; the seed's 0.8."))
    max_depth: int = Field(3, ge=0, le=10, description=(
        "Deepest Stelis nesting allowed; root is depth 0."))
    chunk_tokens: int = Field(24_000, ge=500, le=200_000, description=(
        "Largest transcript part in one summarisation request; longer ones are summarised in parts, then combined "
        "(a conversation's new messages, where the model reads this much at once: a memory version of the oldest "
        "that fit, the rest waiting for the next). A part the model's context cannot hold is halved until it fits, "
        "so this is a ceiling: every further part costs an answer and a combining request."))
    chronicle_tokens: int = Field(800, ge=64, le=8_000, description=(
        "Longest chronicle the model may write when a thread ends."))


class ContextSettings(Section):
    """The request's budget shares and the cache-stable window's policy (DESIGN.md section 5)."""

    memory_share: float = Field(0.35, ge=0.0, le=0.5, description=(
        "Memory layers (server, channel and thread memory), of what the reply's reserve and the persona card "
        "leave; trimmed by priority when over."))
    recall_share: float = Field(0.10, ge=0.0, le=0.4, description=(
        "Recall of older messages, chronicles and memories in the tail. The tail is sent uncached on every turn, "
        "so for a remark recall takes no more than this, nor more than about 400 tokens (a few hit lines); a "
        "question (where recall answers) may have whatever room the window leaves, up to about 1,600 tokens, "
        "except on a local server, where each reply's tail stays in the window."))
    tail_share: float = Field(0.04, ge=0.01, le=0.2, description=(
        "The volatile tail: the time, live Stelis threads, news from the parent."))
    summary_share: float = Field(0.15, ge=0.02, le=0.4, description=(
        "A window's rolling summary, as a share of that window, up to summary_tokens."))
    recall: bool = Field(True, description=(
        "Recall: before each reply, look the new message up in everything this conversation may see."))
    low_water: float = Field(0.68, gt=0.1, lt=1.0, description=(
        "When a window overflows it is cut once, leaving it as full as leaves room for turns_per_cut more turns "
        "of the usual size, but at least low_water full (while that leaves room for cut_room_turns) ... "
        "(of the window and the memory layers shown before it, which a cut keeps too)"))
    high_water: float = Field(0.76, gt=0.1, lt=1.0, description=(
        "... and at most high_water full (not below low_water). What a cut keeps is sent again uncached: keeping "
        "less makes cuts cheaper, keeping more shows more verbatim (see memory/window.py and bench "
        "cache_efficiency)."))
    turns_per_cut: int = Field(12, ge=1, le=1_000, description=(
        "Turns a cut leaves room for, so cuts (and the cache misses they cost) stay rare."))
    cut_room_turns: int | None = Field(None, ge=1, le=1_000, description=(
        "Where the window holds only a handful of turns, a cut still leaves room for this many (low_water gives "
        "way). Unset: half of turns_per_cut with a local model server, whose every cut evaluates the window "
        "again on this machine's CPU; 2 with a provider that bills a re-sent window, so a small window carries as "
        "much as a Letta-style one (bench cache_efficiency at 8k)."))
    locked_turns: int = Field(6, ge=1, le=100, description=(
        "The immediate buffer: the last N turns are never cut, unless they would fill more than high_water. A cut "
        "keeps more of the newest turns, up to ten, where they fit that bound; a trim sends its locked turns "
        "again each time, so it keeps N."))
    trims: int = Field(8, ge=0, le=100, description=(
        "Overflows that only trim the window before one cuts it. A trim keeps the window's oldest turns (its "
        "head, still cached) and the locked turns, and summarises the run between into a bridge: only what "
        "follows the head is sent again. A cut restarts the window and brings in the newest memory versions; 0 "
        "makes every overflow a cut."))
    summary_tokens: int = Field(1_200, ge=64, le=16_000, description=(
        "Longest rolling summary written for what leaves the window."))
    observation_max_lines: int = Field(120, ge=10, le=100_000, description=(
        "Tool results longer than this many lines are shown as head and tail."))
    working_memory: int = Field(7, ge=0, le=30, description=(
        "Branches of the persona's activity shown in each request's tail (label, kind, status, where it stands), "
        "latest first; 0 shows none."))
    observation_keep_lines: int = Field(40, ge=1, le=10_000, description=(
        "Lines kept at each end of a reduced tool result; under half of observation_max_lines."))

    @model_validator(mode="after")
    def _consistent(self) -> ContextSettings:
        if 2 * self.observation_keep_lines >= self.observation_max_lines:
            raise ValueError("context.observation_keep_lines must be under half of context.observation_max_lines")
        if self.low_water > self.high_water:
            raise ValueError(f"context.low_water ({self.low_water}) must not exceed context.high_water "
                             f"({self.high_water})")
        shares = self.memory_share + self.recall_share + self.tail_share
        if shares > 0.7:
            raise ValueError(f"context.memory_share + context.recall_share + context.tail_share is {shares:.2f}; "
                             "at most 0.7, so the conversation itself keeps room")
        return self


@dataclass(frozen=True)
class Triggers:
    """When a conversation gets its next short-term version (seed 004)."""

    idle_seconds: float
    threshold: int


class ShortTermSettings(Section):
    enabled: bool = Field(True, description=(
        "Write versioned short-term memories of each conversation (seed 004)."))
    max_history_count: int = Field(5, ge=1, le=50, description=(
        "Short-term versions shown in prompts and given as context to the next one."))
    conversation_idle_seconds: int = Field(7_200, ge=60, le=30 * 86_400, description=(
        "A new version once a conversation has been quiet this long with something new ..."))
    message_threshold: int = Field(50, ge=2, le=10_000, description=(
        "... or as soon as this many messages arrived since the last version."))

    @property
    def triggers(self) -> Triggers:
        return Triggers(idle_seconds=self.conversation_idle_seconds, threshold=self.message_threshold)


class MemoryWorkSettings(Section):
    """How memory is written: the scheduler's pace and the summaries' sizes."""

    scan_interval_seconds: int = Field(60, ge=5, le=86_400, description=(
        "Seconds between due-scans, which recompute pending memory work from the database."))
    concurrency: int = Field(2, ge=1, le=32, description=(
        "Memory updates running at once (each makes LLM calls)."))
    lease_seconds: int = Field(900, ge=5, le=86_400, description=(
        "How long a process holds a conversation's memory update; a crashed process's work is taken over by "
        "another after this (keep it above the longest update)."))
    retry_seconds: int = Field(60, ge=1, le=86_400, description=(
        "First retry delay after a failed update; it doubles each time, up to an hour."))
    short_term_tokens: int = Field(600, ge=64, le=8_000, description=(
        "Longest short-term memory the model may write."))
    long_term_tokens: int | None = Field(None, ge=64, le=16_000, description=(
        "Longest long-term memory the model may write. Unset: twice what the memory layers may take of the "
        "model's context (llm.context_tokens), within 512-8,000. A long-term memory larger than the prompt shows "
        "loses less at each merge, and recall reaches the lines the prompt leaves out."))
    shared_channels: int = Field(5, ge=0, le=50, description=(
        "Other shareable channels whose memory appears in a prompt, most recently active first."))
    tier: Tier = Field("light", description=(
        "The model that writes short-term and long-term memory: light (as for the window's own summaries, and "
        "Letta's) or standard (better prose, about three times the cost)."))


@dataclass(frozen=True)
class MemorySettings:
    """What writing one conversation's memory needs, from its effective settings."""

    short_term: ShortTermSettings
    work: MemoryWorkSettings
    stelis: StelisSettings
    context_memory: int = 0  # what the memory layers may take of a request: sizes the long-term memory

    @property
    def long_term_tokens(self) -> int:
        if self.work.long_term_tokens is not None:
            return self.work.long_term_tokens
        return max(LONG_TERM_LEAST, min(LONG_TERM_MOST, 2 * self.context_memory))

    @property
    def triggers(self) -> Triggers:
        return self.short_term.triggers
