"""What a conversation holds, for the persona's tools: recall within what it may see, and its own posts.

Replies call tools and tools read and write the conversation; both go through this, so the tools need nothing
of the replies (`Conversations`) and the replies can be given their tools when they are built.
"""

from __future__ import annotations

from dataclasses import replace

from bot.services.snapshots import Snapshots
from bot.services.stelis import StelisThreads
from memory import recall
from memory.context import Assembler
from memory.records import Message, NewMessage, Scope
from memory.store import Store


class Archive:
    def __init__(self, store: Store, assembler: Assembler, stelis: StelisThreads, snapshots: Snapshots,
                 persona: str):
        self._store = store
        self._assembler = assembler
        self._stelis = stelis
        self._snapshots = snapshots
        self._persona = persona

    async def recall(self, scope: Scope, query: str, limit: int = 10, *, replies: bool = False) -> list[recall.Hit]:
        """What recall finds for a query in a conversation, under the same visibility rules as replies; with
        `replies`, what was said back to the messages found too (as for a question)."""
        root = await self._stelis.root(scope)
        seen = await self._assembler.visibilities.of(self._store, root)
        reach = replace(recall.SEARCH, limit=limit, replies=recall.QUESTION.replies if replies else 0)
        return await recall.search(self._store, seen, query, recall.Shown(), reach,
                                   frequencies=self._assembler.frequencies, now=self._store.clock())

    async def said(self, scope: Scope, text: str) -> Message:
        """What the persona said on its own (a post), remembered in the conversation as its replies are."""
        thread = await self._stelis.root(scope)
        message, _ = await self._store.append(thread.id, NewMessage("assistant", text, author_name=self._persona))
        self._snapshots.changed(thread.id)
        return message
