"""What PostgreSQL's shared statements carry (memory/grouped.py): appends and opening reads, each with its
caller's answer."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from memory.grouped import answer_future
from memory.records import NewMessage, Thread
from memory.settings import Triggers


@dataclass
class Pending:
    """One append waiting for its statement: what to store, when it was asked, and its caller's answer."""

    thread_id: int
    new: NewMessage
    now: float
    counting: tuple[Thread, Triggers] | None
    noted: tuple[int, dict[str, Any]] | None = None  # the thread's window bookkeeping, at the revision noted
    answer: asyncio.Future[Any] = field(default_factory=answer_future)


@dataclass
class Asked:
    """One opening read waiting for its statement (Store.opening's arguments) and its caller's answer."""

    thread_id: int
    after_seq: int | None
    limit: int
    versions: int
    answer: asyncio.Future[Any] = field(default_factory=answer_future)
