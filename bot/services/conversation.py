"""Hearing and replying: messages stored and counted, replies assembled and stored, recall kept indexed."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from dataclasses import replace
from typing import Any

from bot import logs, metrics
from bot.memory_scheduler import MemoryScheduler
from bot.services.effective_settings import EffectiveSettings
from bot.services.forgetting import Forgetting
from bot.services.snapshots import Snapshots
from bot.services.stelis import StelisThreads
from bot.services.tool_calls import ToolBox, scope_of
from memory.budget import ContextError
from memory.context import REPLY, Assembler, Assembly, Shape
from memory.errors import Failure
from memory.images import describe
from memory.llm import LLM, LLMError, LLMResult, RequestTooLarge, TextSink
from memory.records import Message, NewMessage, Role, Scope, Thread
from memory.reply_markup import CleanStart, clean_reply, speakers
from memory.store import OptedOut, Store, StoreError
from memory.turns import tool_call_message, tool_result_message
from memory.window import LockedBufferTooLarge

log = logging.getLogger(__name__)

MAX_TOOL_ROUNDS = 3  # tool calls a reply may make before it must answer
FINAL = Shape(tool_choice="none")  # the last round: answer now (the tool list stays, so the cache does)
INDEX_DELAY_SECONDS = 1.0  # what is heard is indexed for recall this long after, in one batch
PARTICIPANTS_SEEN = 200  # recent messages whose authors a reply may ping
SAVE_RETRY_SECONDS = 1.0  # a refused reply is tried again after this, then twice as long each time ...
SAVE_RETRY_MAX_SECONDS = 60.0  # ... up to this


class ReplyFailed(Failure):
    """The model could not answer; the user's message is stored, `notice` is fit to show."""


class ReplyUnsaved(Failure):
    """The model answered (`text`, already shown as it streamed) but the database refused to store it: it is
    kept and stored, before anything newer in its thread, as soon as the database takes it."""

    def __init__(self, text: str, notice: str):
        super().__init__(notice)
        self.text = text


class Conversations:
    def __init__(self, store: Store, llm: LLM, assembler: Assembler, settings: EffectiveSettings, stelis: StelisThreads,
                 forgetting: Forgetting, snapshots: Snapshots, toolbox: ToolBox, scheduler: MemoryScheduler,
                 persona: str, *, describes_images: bool = False):
        self._store = store
        self._scheduler = scheduler  # a message moves its conversation's memory timer (once the scheduler runs)
        self._foreground = scheduler.worker.foreground  # memory work waits while replies do their own
        self._llm = llm
        self._assembler = assembler
        self._settings = settings
        self._stelis = stelis
        self._forgetting = forgetting
        self._snapshots = snapshots
        self._persona = persona
        self.toolbox = toolbox  # the tools a reply may call
        self._reply_locks: defaultdict[int, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._roots: dict[str, Thread] = {}  # scope key -> root thread, for hear (ids and places only)
        self.folding: dict[int, asyncio.Task[None]] = {}  # thread -> its next cut being summarised ahead
        self.describing: set[asyncio.Task[None]] = set()  # images being described once
        self.describes_images = describes_images  # the model reads images: a new one is described once
        self._unsaved: dict[int, list[NewMessage]] = {}  # thread -> replies the database refused, in order
        self.saving: dict[int, asyncio.Task[None]] = {}  # thread -> its refused replies being tried again
        self.indexer: asyncio.Task[None] | None = None
        self.closed = False

    async def hear(
        self, scope: Scope, content: str, *, author_name: str | None = None, author_id: int | None = None,
        external_id: int | None = None, role: Role = "user", thread_id: int | None = None,
        images: list[dict[str, Any]] | None = None, reply_to: int | None = None,
    ) -> Message | None:
        """Remember a message in the scope's root thread, or in the given thread; duplicates stored once.

        Someone who opted out is not remembered at all: None.
        """
        await self._forgetting.refresh()
        if not self._forgetting.remembers(author_id):
            return None
        thread = await (self._store.thread(thread_id) if thread_id is not None else self._root(scope))
        await self._save_unsaved(thread.id)  # a reply the database refused comes before what answers it
        new = NewMessage(role, content, author_id, author_name, external_id=external_id,
                         metadata={**({"images": images} if images else {}),
                                   **({"reply_to": reply_to} if reply_to is not None else {})})
        triggers = await self._settings.counted(thread)
        try:
            with self._foreground.busy():
                if triggers is None:
                    message, created = await self._store.append(thread.id, new)
                    due = None
                else:
                    message, created, due = await self._store.append_counted(thread, new, triggers)
        except OptedOut:  # another process recorded the opt-out since this one last read them
            await self._forgetting.load()
            return None
        self._snapshots.changed(thread.id)
        self._index_soon()
        if created and images and self.describes_images and not self.closed:
            task = asyncio.create_task(self._describe(message))
            self.describing.add(task)
            task.add_done_callback(self.describing.discard)
        if not created:
            log.debug("duplicate message %s ignored", external_id)
        elif triggers is not None:
            self._scheduler.arm(thread.id, due)
        return message

    async def reply(self, thread_id: int, on_text: TextSink | None = None) -> Message:
        """Answer what the thread holds now; store and return the reply. Raises ReplyFailed."""
        with logs.tagged(thread=thread_id):
            async with self._reply_locks[thread_id]:
                assembly, message = await self._write_reply(thread_id, on_text)
            if assembly.fold_soon:
                self._fold_ahead(thread_id)
            return message

    async def _write_reply(self, thread_id: int, on_text: TextSink | None) -> tuple[Assembly, Message]:
        """The answer, stored (under the thread's reply lock), counted in the metrics."""
        started = time.monotonic()
        try:
            await self._save_unsaved(thread_id)
            assembly, result = await self._answer(thread_id, on_text)
        except StoreError as exc:
            log.error("reply in thread %d: the database refused: %s", thread_id, exc.notice)
            metrics.REPLIES.labels("failed").inc()
            raise ReplyFailed(f"I can't reach my memory right now ({exc.notice}).") from exc
        except LLMError as exc:
            log.warning("reply failed in thread %d: %s", thread_id, exc.notice)
            metrics.REPLIES.labels("failed").inc()
            raise ReplyFailed(exc.notice) from exc
        except (LockedBufferTooLarge, ContextError) as exc:
            metrics.REPLIES.labels("failed").inc()
            raise ReplyFailed(f"The conversation does not fit the model's context: {exc.notice}") from exc
        metrics.REPLY_SECONDS.observe(time.monotonic() - started)
        if not result.text.strip():
            metrics.REPLIES.labels("failed").inc()
            raise ReplyFailed("The model returned an empty reply.")
        metrics.REPLIES.labels("ok").inc()
        reply = NewMessage("assistant", result.text, author_name=self._persona,
                           metadata={"placeholder": True} if result.placeholder else {})
        try:
            with self._foreground.busy():
                message, _ = await self._store.append(thread_id, reply)
        except StoreError as exc:
            self._unsaved.setdefault(thread_id, []).append(reply)
            self._keep_trying(thread_id)
            log.error("reply in thread %d not stored yet (%s); kept, and stored once the database takes it",
                      thread_id, exc.notice)
            raise ReplyUnsaved(result.text, f"My reply is not saved yet: the database refused ({exc.notice}). "
                                            "I keep it and save it as soon as the database is back.") from exc
        self._snapshots.changed(thread_id)
        return assembly, message

    async def _save_unsaved(self, thread_id: int) -> None:
        """Store the thread's refused replies, oldest first (raises StoreError while the database refuses)."""
        waiting = self._unsaved.get(thread_id)
        while waiting:
            await self._store.append(thread_id, waiting[0])
            waiting.pop(0)
            self._snapshots.changed(thread_id)
        self._unsaved.pop(thread_id, None)

    def _keep_trying(self, thread_id: int) -> None:
        """Try the refused replies again in the background, waiting longer each time, until they are stored."""
        if thread_id not in self.saving and not self.closed:
            task = asyncio.create_task(self._try_saving(thread_id))
            self.saving[thread_id] = task
            task.add_done_callback(lambda _: self.saving.pop(thread_id, None))

    async def _try_saving(self, thread_id: int) -> None:
        delay = SAVE_RETRY_SECONDS
        while thread_id in self._unsaved:
            await asyncio.sleep(delay)
            try:
                async with self._reply_locks[thread_id]:
                    await self._save_unsaved(thread_id)
            except StoreError as exc:
                delay = min(delay * 2, SAVE_RETRY_MAX_SECONDS)
                log.warning("reply of thread %d still not stored (%s); next try in %.0f s", thread_id,
                            exc.notice, delay)
        log.info("the replies of thread %d the database had refused are stored", thread_id)

    def stop(self) -> list[asyncio.Task[None]]:
        """Shutdown: no new background work from now on; what still runs (indexing, summaries prepared ahead,
        image descriptions, refused replies tried again) is returned for the caller to end."""
        self.closed = True
        return [t for t in (self.indexer, *self.folding.values(), *self.describing, *self.saving.values())
                if t is not None]

    async def save_counts(self) -> None:
        """Recall's word counts not saved yet kept for the next start (a cache: a refusal is logged, and the indexing
        or shutdown that saves them goes on)."""
        try:
            await self._assembler.frequencies.save(self._store)
        except Failure as exc:
            log.warning("recall's word counts not saved: %s", exc)

    def unsaved(self) -> int:
        """Replies shown but not stored yet (the database refused them): what a shutdown would lose."""
        return sum(len(w) for w in self._unsaved.values())

    async def _answer(self, thread_id: int, on_text: TextSink | None) -> tuple[Assembly, LLMResult]:
        """The model's answer, after the tool calls it makes on the way (each stored as a paired exchange)."""
        offered = [t.name for t in self._assembler.conversation_tools]
        for round_ in range(MAX_TOOL_ROUNDS + 1):
            last = round_ == MAX_TOOL_ROUNDS
            shape = FINAL if last and offered else REPLY
            with self._foreground.busy():
                assembly = await self._assembler.assemble(thread_id, shape=shape)
            if not assembly.request.turns:
                raise ReplyFailed("There is nothing to reply to yet.")
            names = speakers(assembly.request, self._persona)
            sink = CleanStart(on_text, names) if on_text is not None else None
            try:
                result = await self._llm.complete(assembly.request, sink)
            except RequestTooLarge:
                # The server counts more than planned, and the plan has shrunk since (bot/fitting.py): once
                # more, smaller; never the same request again.
                smaller = await self._assembler.assemble(thread_id, shape=shape)
                if smaller.request == assembly.request:
                    raise
                assembly = smaller
                result = await self._llm.complete(assembly.request, sink)
            if not result.tool_calls or last:
                if sink is not None:
                    sink.close()
                return assembly, replace(result, text=clean_reply(result.text, names))
            thread = assembly.thread
            await self._store.append(thread_id, tool_call_message(result, self._persona))
            for call in result.tool_calls:
                output = await self.toolbox.answer(call, scope_of(thread), thread_id, offered)
                await self._store.append(thread_id, tool_result_message(call, output,
                                                                        lookup=self.toolbox.looks_up(call.name)))
        raise AssertionError("the last round always returns")

    async def context(self, thread_id: int, *, calls: bool = True) -> Assembly:
        """The next request for a thread as it stands; nothing is stored or cut. `calls=False` (what /context
        shows): no model is asked, and a cut's summary not written yet is a note."""
        return await self._assembler.assemble(thread_id, persist=False, calls=calls)

    async def preview(self, scope: Scope, content: str, *, author_name: str | None = None,
                      author_id: int | None = None, thread_id: int | None = None) -> Assembly:
        """The request a message would produce, without storing it or persisting a window cut."""
        thread = await (self._store.thread(thread_id) if thread_id is not None else self._stelis.root(scope))
        return await self._assembler.assemble(thread.id, incoming=NewMessage("user", content, author_id, author_name),
                                              persist=False)

    async def participants(self, thread_id: int, recent: int = PARTICIPANTS_SEEN) -> set[int]:
        """Who spoke among a thread's recent messages: the only people a reply may ping."""
        return {m.author_id for m in await self._store.tail(thread_id, recent)
                if m.author_id is not None and m.role == "user"}

    async def last_seen(self, thread_id: int) -> int | None:
        """The newest remembered Discord message id in a thread (backfill starts after it)."""
        return await self._store.last_external_id(thread_id)

    async def channel_roots(self) -> list[Thread]:
        """Every channel conversation this persona has (for backfill and visibility after a reconnect)."""
        return await self._store.root_threads(self._persona)

    async def last_message(self, thread_id: int) -> Message | None:
        found = await self._store.tail(thread_id, 1)
        return found[-1] if found else None

    async def message_count(self, thread_id: int) -> int:
        return await self._store.count_messages(thread_id)

    async def _describe(self, message: Message) -> None:
        """Each image of a message described once, in a line its text shows from then on (memory keeps it)."""
        try:
            images = await describe(self._llm, list(message.metadata["images"]))
        except LLMError as exc:  # the image stays named; its description is only a help
            log.warning("could not describe the images of message %d: %s", message.seq, exc.notice)
            return
        await self._store.set_metadata(message.seq, {**message.metadata, "images": images})

    async def settle(self) -> None:
        """Do the background work a pause in the talk allows: summaries prepared ahead, recall's index."""
        if self.indexer is not None and not self.indexer.done():
            self.indexer.cancel()
            await asyncio.gather(self.indexer, return_exceptions=True)
            await self._store.index_messages()
            await self._store.merge_index()
        await asyncio.gather(*self.folding.values(), *self.describing, return_exceptions=True)

    def start_recall(self) -> None:
        """At start-up, in the background: index what the last run left, merge, count the newest words."""
        self.indexer = asyncio.create_task(self._start_recall())

    async def _root(self, scope: Scope) -> Thread:
        """A scope's root for hearing: its identity never changes, so it is looked up once per process."""
        found = self._roots.get(scope.key)
        if found is None:
            found = self._roots[scope.key] = await self._stelis.root(scope)
        return found

    def _index_soon(self) -> None:
        """Index what was heard for recall shortly, in one batch with whatever else arrives meanwhile."""
        if (self.indexer is None or self.indexer.done()) and not self.closed:
            self.indexer = asyncio.create_task(self._index_after(INDEX_DELAY_SECONDS))

    async def _start_recall(self) -> None:
        try:
            await self._store.index_messages()
            await self._store.merge_index()
            await self._assembler.frequencies.warm(self._store)
            await self.save_counts()
        except Failure as exc:  # a search indexes and counts for itself
            log.warning("recall not prepared at start-up: %s", exc)
        if self._store.unindexed:  # heard meanwhile: this task was the indexer
            await self._index_after(INDEX_DELAY_SECONDS)

    async def _index_after(self, delay: float) -> None:
        try:
            while True:
                await asyncio.sleep(delay)
                await self._store.index_messages()
                await self._store.merge_index()  # in short steps: replies slip in between
                await self.save_counts()
                if not self._store.unindexed:
                    return
        except Failure as exc:  # the next search tries again
            log.warning("recall's index not brought up to date: %s", exc)

    def _fold_ahead(self, thread_id: int) -> None:
        """Summarise the window's next cut in the background, so the reply that cuts waits on no model call."""
        if thread_id in self.folding or self.closed:
            return
        task = asyncio.create_task(self._prepare_fold(thread_id))
        self.folding[thread_id] = task
        task.add_done_callback(lambda _: self.folding.pop(thread_id, None))

    async def _prepare_fold(self, thread_id: int) -> None:
        try:
            await self._assembler.prepare_fold(thread_id)
        except LLMError as exc:  # the cut will summarise inline instead, and retry the model then
            log.warning("could not summarise ahead in thread %d: %s", thread_id, exc.notice)
        except Failure as exc:
            log.warning("could not plan the next cut of thread %d: %s", thread_id, exc.notice)
