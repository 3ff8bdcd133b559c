"""The memory engine's settings: each one's default, bounds and meaning, declared once.

config.yaml sections validate against these same models (bot/config.py composes them), so a
value that memory/ reads is never declared a second time elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Tier = Literal["standard", "light"]


class Settings(BaseModel):
    """A settings section: unknown keys are errors, assignments are validated, values never change in place."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, frozen=True)


class StelisSettings(Settings):
    default_window_ratio: float = Field(0.8, gt=0.0, lt=1.0, description="share of its parent's window a thread gets")
    max_depth: int = Field(3, ge=0, le=10, description="deepest Stelis nesting allowed")
    chunk_tokens: int = Field(6_000, ge=500, le=200_000, description="largest transcript part in one summary request")
    chronicle_tokens: int = Field(800, ge=64, le=8_000, description="longest chronicle the model may write")


class ContextSettings(Settings):
    """The request's budget shares and the cache-stable window's policy (DESIGN.md section 5)."""

    memory_share: float = Field(0.25, ge=0.0, le=0.5, description="memory layers, of what the system prompt leaves")
    recall_share: float = Field(0.10, ge=0.0, le=0.4, description="recall in the tail: uncached every turn")
    tail_share: float = Field(0.04, ge=0.01, le=0.2, description="time, live Stelis threads, news from the parent")
    summary_share: float = Field(0.15, ge=0.02, le=0.4, description="a window's rolling summary, of that window")
    recall: bool = Field(True, description="search older messages, chronicles and memories before each reply")
    low_water: float = Field(0.62, gt=0.1, lt=1.0, description="a cut leaves the window at least this full")
    high_water: float = Field(0.72, gt=0.1, lt=1.0, description="... and at most this full")
    turns_per_cut: int = Field(12, ge=1, le=1_000, description="room a cut leaves, in turns of the usual size")
    locked_turns: int = Field(6, ge=1, le=100, description="the immediate buffer: recent turns never cut")
    trims: int = Field(8, ge=0, le=100, description="overflows that keep the window's head before one restarts it")
    summary_tokens: int = Field(1_200, ge=64, le=16_000, description="the longest rolling summary")
    observation_max_lines: int = Field(120, ge=10, le=100_000, description="tool results longer than this are reduced")
    observation_keep_lines: int = Field(40, ge=1, le=10_000, description="lines kept at each end of a reduced result")

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


class ShortTermSettings(Settings):
    enabled: bool = Field(True, description="write short-term memory versions at all")
    max_history_count: int = Field(5, ge=1, le=50, description="short-term versions in prompts and as context")
    conversation_idle_seconds: int = Field(7_200, ge=60, le=30 * 86_400, description="quiet time before a version")
    message_threshold: int = Field(50, ge=2, le=10_000, description="messages that bring a version sooner")

    @property
    def triggers(self) -> Triggers:
        return Triggers(idle_seconds=self.conversation_idle_seconds, threshold=self.message_threshold)


class MemoryWorkSettings(Settings):
    """How memory is written: the scheduler's pace and the summaries' sizes."""

    scan_interval_seconds: int = Field(60, ge=5, le=86_400, description="how often due conversations are looked for")
    concurrency: int = Field(2, ge=1, le=32, description="memory updates (model calls) at once")
    retry_seconds: int = Field(60, ge=1, le=86_400, description="first back-off after a failure; doubles each time")
    short_term_tokens: int = Field(600, ge=64, le=8_000, description="longest short-term version")
    long_term_tokens: int = Field(1_500, ge=64, le=16_000, description="longest long-term memory")
    shared_channels: int = Field(5, ge=0, le=50, description="other channels whose memory a prompt shows")
    # The light model, as for the window's own summaries (and Letta's); "standard" buys better prose
    # at about three times the cost.
    tier: Tier = Field("light", description="the model that writes memory")


@dataclass(frozen=True)
class MemorySettings:
    """What writing one conversation's memory needs, from its effective settings."""

    short_term: ShortTermSettings
    work: MemoryWorkSettings
    stelis: StelisSettings

    @property
    def triggers(self) -> Triggers:
        return self.short_term.triggers
