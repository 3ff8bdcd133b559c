"""What tools may use of the engine (bot/tools/registry.ToolServices), always for one conversation."""

from __future__ import annotations

from collections.abc import Callable

from bot.services.conversation import Conversations
from bot.services.memory_admin import MemoryAdmin
from bot.services.stelis import StelisThreads
from memory import dates, recall
from memory.anchors import exchange_lines, thread_ref
from memory.records import Scope

RECALL_TOKENS = 800  # what one recall tool result may hold


class EngineTools:
    def __init__(self, conversations: Conversations, stelis: StelisThreads, admin: MemoryAdmin,
                 clock: Callable[[], float]):
        self._conversations = conversations
        self._stelis = stelis
        self._admin = admin
        self._clock = clock

    async def recall_text(self, scope: Scope, query: str, limit: int) -> list[str]:
        hits = await self._conversations.recall(scope, query, limit)
        text, _ = recall.render(hits, RECALL_TOKENS)
        return text.splitlines() if hits else []

    async def thread_text(self, scope: Scope, thread_id: int, messages: int) -> str | None:
        detail = await self._stelis.detail(scope, thread_id, exchanges=messages)
        if detail is None:
            return None
        t = detail.thread
        return "\n".join([f"{thread_ref(t.id)} {t.label} [{t.status}], depth {t.depth}",
                          f"Chronicle: {t.chronicle_summary or '(none yet)'}", "Latest messages:",
                          *exchange_lines(detail.last)])

    async def pin(self, scope: Scope, fact: str) -> bool:
        return await self._admin.pin(scope, fact)

    def now_text(self) -> str:
        return dates.now_text(self._clock())
