"""What front ends show: plain records assembled by the services, never rows or store handles."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bot.config import Config
from memory.records import Branch, MemoryChannel, MemoryRecord, Message, Thread


@dataclass(frozen=True)
class TreeRow:
    thread: Thread
    window: int  # the seed's window size at the model's full context
    protected: int  # the part of its parent's window the parent keeps protected, which the thread sees (0: a root)


@dataclass(frozen=True)
class MemoryView:
    """What /memory shows: the bookkeeping, the current versions and the pins."""

    channel: MemoryChannel
    long_term: MemoryRecord | None
    short_term: list[MemoryRecord]
    pins: list[str]


@dataclass(frozen=True)
class ThreadDetail:
    """A Stelis thread with its last exchanges (/threads show)."""

    thread: Thread
    last: list[Message]


@dataclass(frozen=True)
class BranchDetail:
    """A branch and its sessions, oldest first (/branches show)."""

    branch: Branch
    sessions: list[Thread]


@dataclass(frozen=True)
class SettingsView:
    """The settings in effect in a conversation and the overrides that made them (/config show)."""

    effective: Config
    server: dict[str, Any]  # the server's overrides
    channel: dict[str, Any]  # the channel's (or the console's, or a DM's)
    unused: dict[str, Any] = field(default_factory=dict)  # the channel's that do not apply: set per server only
