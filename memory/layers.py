"""The memory layers of a prompt (seed 004): workspace long-term, then each channel's long-term memory
and recent short-term versions (oldest first, the newest called so), this conversation's last.

Sharing is enforced here: another channel's memory appears only when it is shareable and in the
same guild; a DM (or the console) sees only its own memory and never reaches a guild.
"""

from __future__ import annotations

from dataclasses import dataclass

from memory import channels
from memory.records import MemoryRecord, Thread
from memory.store import Store
from memory.templates import render

SHORT_TERM_VERSIONS = 5
SHARED_CHANNELS = 5


@dataclass(frozen=True)
class ChannelMemory:
    title: str
    long_term: MemoryRecord | None
    short_term: list[MemoryRecord]

    @property
    def short_term_memory(self) -> MemoryRecord | None:
        """The seed's name for the latest version, kept as an alias."""
        return self.short_term[-1] if self.short_term else None


async def memory_layers(store: Store, thread: Thread, root: Thread, versions: int = SHORT_TERM_VERSIONS,
                        shared: int = SHARED_CHANNELS) -> str:
    """The rendered layers for a thread whose conversation root is `root`; empty when nothing is remembered."""
    persona = root.persona
    workspace = None
    sections = []
    if root.guild_id is not None:
        workspace = await store.latest_record(persona, "workspace", root.guild_id, "long_term")
        others = [c for c in await channels.shared_channels(store, persona, root.guild_id)
                  if c.channel_id != root.channel_id][:shared]
        for other in reversed(others):  # the most recently active nearest this conversation
            sections.append(await channel_memory(store, persona, other.channel_id or 0,
                                                 f"#{other.name or other.channel_id}", versions))
    own_title = "this conversation"
    sections.append(await channel_memory(store, persona, root.channel_id or 0, own_title, versions))
    thread_memory = None
    if thread.discord_thread_id is not None:
        thread_memory = await store.latest_record(persona, "thread", thread.discord_thread_id, "short_term")
    sections = [s for s in sections if s.long_term or s.short_term]
    if not (workspace or sections or thread_memory):
        return ""
    return render("memory_layers.md.j2", workspace=workspace, channels=sections, thread_memory=thread_memory)


async def channel_memory(store: Store, persona: str, channel_id: int, title: str, versions: int) -> ChannelMemory:
    long_term = await store.latest_record(persona, "channel", channel_id, "long_term")
    short_term = await store.recent_records(persona, "channel", channel_id, "short_term", versions)
    return ChannelMemory(title, long_term, short_term)
