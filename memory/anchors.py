"""Stelis anchors (seed 000): one message in the parent, rendered on read for whoever is looking.

From the anchored thread itself or a descendant: the brief one-line form. From anywhere else: the
full form. While the child runs, the full form's changing part is rendered for the tail; when the
child ends its full form is fixed in the anchor's metadata and never changes again.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import UTC, datetime
from typing import Any

from memory.records import Message, NewMessage, Thread
from memory.templates import render

ANCHOR_TYPE = "stelis_anchor"
EXCHANGE_CHARS = 300
LAST_EXCHANGES = 3


def is_anchor(message: Message) -> bool:
    return message.metadata.get("type") == ANCHOR_TYPE


def new_anchor(label: str) -> NewMessage:
    """The seed's anchor message; the store adds the child id and creation time."""
    return NewMessage("system", "", metadata={"type": ANCHOR_TYPE, "stelis_label": label})


def resume_anchor(previous: Message) -> NewMessage:
    """The first message of a resumed branch session: an anchor to the previous session (seed 001).

    Rendered from the new session it is not an ancestor, so it shows the full form: chronicle and
    the last raw exchanges of the previous session.
    """
    return NewMessage("system", "", metadata=dict(previous.metadata))


def thread_ref(thread_id: int) -> str:
    return f"stelis:{thread_id}"


def sees_brief(viewer_lineage: Collection[int], anchored_id: int) -> bool:
    """The seed's ancestor rule: brief when the anchored thread is the viewer or one of its ancestors."""
    return anchored_id in viewer_lineage


def render_anchor(message: Message, viewer_lineage: Collection[int]) -> str:
    """The anchor as the viewer's history shows it (stable: safe to cache)."""
    meta = message.metadata
    child_id = int(meta["stelis_thread_id"])
    if sees_brief(viewer_lineage, child_id):
        return render("anchor_brief.md.j2", label=meta["stelis_label"], ref=thread_ref(child_id))
    if "final" in meta:
        return str(meta["final"])
    return render("anchor_full.md.j2", label=meta["stelis_label"], ref=thread_ref(child_id),
                  started=format_time(meta["created_at"]), ended=None, status="active")


def render_final(child: Thread, count: int, last: list[Message]) -> str:
    """The full form of an ended thread, written once into its anchor."""
    return render(
        "anchor_full.md.j2", label=child.label or "", ref=thread_ref(child.id), started=format_time(child.created_at),
        ended=format_time(child.completed_at or child.created_at), status=child.status, count=count,
        chronicle=child.chronicle_summary, exchanges=exchange_lines(last),
    )


def render_live(child: Thread, count: int, last: list[Message]) -> str:
    """The changing part of an active child's full form, for the volatile tail."""
    return render("anchor_live.md.j2", label=child.label or "", ref=thread_ref(child.id), count=count,
                  exchanges=exchange_lines(last))


def final_metadata(anchor_meta: dict[str, Any], child: Thread, final: str) -> dict[str, Any]:
    return {**anchor_meta, "final": final, "stelis_status": child.status}


def exchange_lines(messages: list[Message]) -> list[str]:
    return [f"[{m.role}]: {clip(m.content)}" for m in messages[-LAST_EXCHANGES:]]


def format_time(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def clip(text: str, limit: int = 0) -> str:
    """One line of at most `limit` characters (the exchanges' length by default), an ellipsis where it was cut."""
    limit = limit or EXCHANGE_CHARS
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
