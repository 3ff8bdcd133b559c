"""The memory layers of a prompt: workspace long-term, channel long-term, recent short-term versions."""

from __future__ import annotations

from memory.records import Thread
from memory.store import Store
from memory.templates import render

SHORT_TERM_VERSIONS = 5


async def memory_layers(store: Store, thread: Thread, versions: int = SHORT_TERM_VERSIONS) -> str:
    """The rendered layers for a thread's scope; empty when nothing is remembered yet."""
    persona = thread.persona
    workspace = channel = None
    short_term = []
    if thread.guild_id is not None:
        found = await store.recent_records(persona, "workspace", thread.guild_id, "long_term", 1)
        workspace = found[-1].content if found else None
    if thread.channel_id is not None:
        found = await store.recent_records(persona, "channel", thread.channel_id, "long_term", 1)
        channel = found[-1].content if found else None
        short_term = await store.recent_records(persona, "channel", thread.channel_id, "short_term", versions)
    if not (workspace or channel or short_term):
        return ""
    return render("memory_layers.md.j2", workspace_long_term=workspace, channel_long_term=channel,
                  short_term=short_term)
