"""The persona runtime shared by the console and the Discord cogs: hear a message, reply to a scope."""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from dataclasses import replace

from bot.config import Config
from bot.providers import make_llm
from memory.llm import LLM, Block, LLMError, LLMRequest, TextSink, Turn
from memory.records import Message, NewMessage, Role, Scope, Thread
from memory.store import Store
from memory.templates import render
from memory.tokens import MESSAGE_OVERHEAD, count_tokens
from memory.turns import fit_budget, to_turns

log = logging.getLogger(__name__)

SAFETY_MARGIN = 0.05  # token counts are cl100k estimates of another tokenizer


class ReplyFailed(Exception):
    """The model could not answer; the user's message is stored, `notice` is fit to show."""

    def __init__(self, notice: str):
        super().__init__(notice)
        self.notice = notice


class Engine:
    def __init__(self, config: Config, store: Store, llm: LLM):
        self.config = config
        self.store = store
        self.llm = llm
        self._reply_locks: defaultdict[int, asyncio.Lock] = defaultdict(asyncio.Lock)

    @classmethod
    async def open(cls, config: Config, llm: LLM | None = None) -> Engine:
        store = await Store.open(config.database_path)
        return cls(config, store, llm or make_llm(config))

    async def close(self) -> None:
        await self.llm.aclose()
        await self.store.close()

    @property
    def persona(self) -> str:
        return self.config.persona.name

    async def thread_for(self, scope: Scope) -> Thread:
        return await self.store.root_thread(self.persona, scope, self.config.stelis.default_window_ratio)

    async def hear(
        self,
        scope: Scope,
        content: str,
        *,
        author_name: str | None = None,
        author_id: int | None = None,
        external_id: int | None = None,
        role: Role = "user",
    ) -> Message:
        """Remember a message; the same external id heard twice is stored once."""
        thread = await self.thread_for(scope)
        new = NewMessage(role, content, author_id, author_name, external_id=external_id)
        message, created = await self.store.append(thread.id, new)
        if not created:
            log.debug("duplicate message %s ignored", external_id)
        return message

    async def reply(self, scope: Scope, on_text: TextSink | None = None) -> Message:
        """Answer what the scope's thread holds now; store and return the reply. Raises ReplyFailed."""
        thread = await self.thread_for(scope)
        async with self._reply_locks[thread.id]:
            request = await self.build_request(thread)
            if not request.turns:
                raise ReplyFailed("There is nothing to reply to yet.")
            try:
                result = await self.llm.complete(request, on_text)
            except LLMError as exc:
                log.warning("reply failed in thread %d: %s", thread.id, exc.notice)
                raise ReplyFailed(exc.notice) from exc
            if not result.text.strip():
                raise ReplyFailed("The model returned an empty reply.")
            message, _ = await self.store.append(
                thread.id, NewMessage("assistant", result.text, author_name=self.persona)
            )
            return message

    async def build_request(self, thread: Thread) -> LLMRequest:
        """System prompt from the template, then the newest history that fits the budget."""
        system_text = render(
            "system.md.j2", persona_name=self.persona, persona_card=self.config.persona.card.strip()
        )
        llm = self.config.llm
        budget = int(llm.context_tokens * (1 - SAFETY_MARGIN)) - llm.max_output_tokens
        budget -= count_tokens(system_text)
        recent = await self.store.tail(thread.id, self.config.context.history_messages)
        turns = to_turns(fit_budget(recent, budget, MESSAGE_OVERHEAD))
        return LLMRequest(
            system=(Block(system_text, cache="1h"),),
            turns=tuple(_mark_stable_prefix(turns)),
            max_tokens=llm.max_output_tokens,
            persona=self.persona,
        )


def _mark_stable_prefix(turns: list[Turn]) -> list[Turn]:
    """A cache breakpoint on the last turn that the next request will repeat unchanged."""
    if len(turns) < 2:
        return turns
    stable = turns[-2]
    marked = replace(stable.blocks[-1], cache="5m")
    return [*turns[:-2], Turn(stable.role, (*stable.blocks[:-1], marked)), turns[-1]]
