"""Records from database rows, for every backend: a row is anything with `keys()` and `row[key]`."""

from __future__ import annotations

import json
from dataclasses import fields
from typing import Any, Protocol, TypeVar

from memory.records import Branch, MemoryChannel, MemoryRecord, Message, PlaybookRun, Task, Thread


class Row(Protocol):
    def keys(self) -> Any: ...
    def __getitem__(self, key: Any) -> Any: ...
    def __iter__(self) -> Any: ...


# Columns a backend derives from others for its own look-ups (PostgreSQL's lower-cased message text): never part
# of a record, never copied (the target derives its own).
DERIVED = frozenset({"content_folded"})


def columns(row: Row, leave_out: tuple[str, ...] = ()) -> dict[str, Any]:
    """A row's columns by name, without what a statement added to it (`leave_out`) or a backend derives."""
    data = dict(zip(row.keys(), row, strict=True))  # both backends' rows iterate their values in the keys' order
    for name in (*leave_out, *DERIVED):
        data.pop(name, None)
    return data


def thread(row: Row, leave_out: tuple[str, ...] = ()) -> Thread:
    return _built(Thread, columns(row, leave_out))


def record(row: Row, leave_out: tuple[str, ...] = ()) -> MemoryRecord:
    data = columns(row, leave_out)
    data["metadata"] = json.loads(data["metadata"])
    return MemoryRecord(**data)


def channel(row: Row) -> MemoryChannel:
    return MemoryChannel(**columns(row))


def playbook_run(row: Row) -> PlaybookRun:
    data = columns(row)
    data["args"] = json.loads(data["args"])
    data["result"] = json.loads(data["result"]) if data["result"] is not None else None
    return PlaybookRun(**data)


def task(row: Row) -> Task:
    data = columns(row)
    data["steps"] = json.loads(data["steps"])
    return Task(**data)


def branch(row: Row) -> Branch:
    return Branch(**columns(row))


def message(row: Row, leave_out: tuple[str, ...] = ()) -> Message:
    data = columns(row, leave_out)
    data["metadata"] = json.loads(data["metadata"])
    return _built(Message, data)


R = TypeVar("R", Thread, Message)
_FIELDS = {cls: frozenset(f.name for f in fields(cls)) for cls in (Thread, Message)}


def _built(cls: type[R], data: dict[str, Any]) -> R:
    """A record read on every reply, from exactly its fields, without its generated __init__ (a frozen dataclass's
    sets each field through object.__setattr__: 8 µs for a thread's forty); other columns go through __init__,
    which names what is missing or unknown."""
    if data.keys() != _FIELDS[cls]:
        return cls(**data)
    record = object.__new__(cls)
    record.__dict__.update(data)
    return record


def copied(record: R, **changes: Any) -> R:
    """dataclasses.replace for a thread or message on the reply's path, without the generated __init__."""
    return _built(type(record), {**record.__dict__, **changes})


def record_params(persona: str, scope: str, scope_id: int, type_: str, content: str, first_seq: int | None,
                  last_seq: int | None, metadata: dict[str, Any] | None, now: float,
                  version: int | None) -> dict[str, Any]:
    """A memory version's columns as query parameters (its metadata as JSON text)."""
    return {"persona": persona, "scope": scope, "scope_id": scope_id, "type": type_, "content": content,
            "first_seq": first_seq, "last_seq": last_seq, "metadata": json.dumps(metadata or {}), "now": now,
            "version": version}


def seqs_by_thread(rows: Any) -> dict[int, set[int]]:
    """(thread_id, seq) rows grouped by thread: what a purge erased, where."""
    grouped: dict[int, set[int]] = {}
    for thread_id, seq in rows:
        grouped.setdefault(thread_id, set()).add(seq)
    return grouped
