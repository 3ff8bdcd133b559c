"""Context snapshots (seed 003 section 4): a thread's context state as versioned JSON.

A snapshot holds exactly what the next request draws on: the thread's window and rolling summary,
its ancestors (the parent's protected region), and the memory records shown. Importing it into an
empty database keeps every id and sequence, so the next request is the same.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from memory.context import Assembler
from memory.errors import Failure
from memory.records import Message, NewMessage, Thread
from memory.store import Store

VERSION = "1.0"


class SnapshotError(Failure):
    """A snapshot that cannot be read or imported; the message says why."""


async def export(store: Store, assembler: Assembler, thread_id: int) -> dict[str, Any]:
    """The thread's context state now (assembling it first, as the next reply would)."""
    assembly = await assembler.assemble(thread_id)
    thread = assembly.thread
    chain = [thread]
    while chain[-1].parent_thread_id is not None:
        chain.append(await store.thread(chain[-1].parent_thread_id))
    messages = assembly.window_messages
    return {
        "version": VERSION,
        "timestamp": int(store.clock() * 1000),
        "tokenCount": sum(assembly.parts[p] for p in ("parent", "summary", "history", "tail")),
        "messages": [_message(m) for m in messages],
        "summary": thread.window_summary,
        "thread": asdict(thread),
        "ancestors": [asdict(t) for t in chain[1:]],
        "parentMessages": [_message(m) for m in assembly.parent_messages],
        "memory": await _records(store, thread, (await assembler.conversation_of(chain[-1])).memory_versions),
    }


async def restore(store: Store, snapshot: dict[str, Any]) -> Thread:
    """Import a snapshot into a database that has none of its threads; returns the restored thread."""
    if snapshot.get("version") != VERSION:
        raise SnapshotError(f"snapshot version {snapshot.get('version')!r} is not supported (expected {VERSION})")
    try:
        thread = _thread(snapshot["thread"])
        ancestors = [_thread(t) for t in snapshot["ancestors"]]
    except (KeyError, TypeError) as exc:
        raise SnapshotError(f"snapshot is missing a thread field: {exc}") from None
    for t in [thread, *ancestors]:
        if await store.find_thread(t.id) is not None:
            raise SnapshotError(f"thread {t.id} already exists; import snapshots into an empty database")
    for ancestor in reversed(ancestors):  # root first, so parents exist before children
        await store.insert_thread(ancestor)
    restored = await store.insert_thread(thread)
    if ancestors:
        await _insert_messages(store, ancestors[0].id, snapshot["parentMessages"])
    await _insert_messages(store, thread.id, snapshot["messages"])
    for record in snapshot.get("memory", []):
        await store.add_record(record["persona"], record["scope"], record["scope_id"], record["type"],
                               record["content"], record["first_seq"], record["last_seq"], record["metadata"],
                               version=record["version"])
    return restored


def write(path: Path, snapshot: dict[str, Any]) -> None:
    """Write atomically: a crash mid-write leaves the previous snapshot, never half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(snapshot, ensure_ascii=False, indent=1), encoding="utf-8")
    os.replace(temporary, path)


def read(path: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return data
    except OSError as exc:
        raise SnapshotError(f"cannot read {path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise SnapshotError(f"{path} is not a JSON snapshot: {exc}") from None


def _message(m: Message) -> dict[str, Any]:
    return asdict(m)


def _thread(data: dict[str, Any]) -> Thread:
    names = {f.name for f in fields(Thread)}
    return Thread(**{k: v for k, v in data.items() if k in names})


async def _insert_messages(store: Store, thread_id: int, messages: list[dict[str, Any]]) -> None:
    if not messages:
        return
    await store.append_many(
        thread_id,
        [NewMessage(m["role"], m["content"], m.get("author_id"), m.get("author_name"), m.get("metadata") or {},
                    m.get("external_id")) for m in messages],
        seqs=[m["seq"] for m in messages],
        created=[m["created_at"] for m in messages],
        tokens=[m["token_count"] for m in messages],
    )


async def _records(store: Store, thread: Thread, versions: int) -> list[dict[str, Any]]:
    found = []
    if thread.guild_id is not None:
        found.append(await store.latest_record(thread.persona, "workspace", thread.guild_id, "long_term"))
    if thread.channel_id is not None:
        found.append(await store.latest_record(thread.persona, "channel", thread.channel_id, "long_term"))
        found += await store.recent_records(thread.persona, "channel", thread.channel_id, "short_term",
                                            versions)
    return [asdict(r) for r in found if r is not None]
