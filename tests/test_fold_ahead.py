"""A window's cut is summarised ahead, in the background: no reply waits on a summarisation call."""

import asyncio

from bot.engine import Engine
from memory.llm import LLMError, LLMRequest, LLMResult
from memory.records import Scope

TOPICS = ["the calculator_v2 deploy", "Tokyo in spring", "the pottery workshop", "Mahe's new espresso machine"]


class SlowSummaries:
    """Replies at once; a summary waits until the test opens the gate, as a slow model in a busy channel."""

    name = "slow-summaries"

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.summaries = 0
        self.fail_summaries = False

    async def complete(self, request: LLMRequest, on_text=None) -> LLMResult:
        if request.purpose == "summary":
            await self.gate.wait()
            if self.fail_summaries:
                raise LLMError("the summariser is down")
            self.summaries += 1
            read = " ".join(b.text for turn in request.turns for b in turn.blocks)
            quoted = " Mahe opened with turn 0." if "turn 0:" in read else ""
            return LLMResult(f"Summary {self.summaries}: they talked about deploys and travel.{quoted}")
        return LLMResult("Noted, " + request.turns[-1].blocks[0].text[:40])

    async def aclose(self) -> None:
        return None


def _message(turn: int) -> str:
    return f"turn {turn}: let me tell you more about {TOPICS[turn % len(TOPICS)]}. " * 6


async def _engine(make_config, llm: SlowSummaries) -> Engine:
    config = make_config(llm={"context_tokens": 4096, "max_output_tokens": 256}, snapshots={"interval_seconds": 0})
    return await Engine.open(config, llm)


async def test_no_reply_waits_on_a_summary_in_the_steady_state(make_config):
    llm = SlowSummaries()
    engine = await _engine(make_config, llm)
    scope = Scope.channel(1, 10)
    root = await engine.thread_for(scope)
    starts = set()
    try:
        for turn in range(60):
            await engine.hear(scope, _message(turn), author_name="mahe")
            # The gate is shut while the reply runs: a reply summarising inline would never finish.
            reply = await asyncio.wait_for(engine.reply(root.id), 10)
            assert reply.content.startswith("Noted")
            starts.add((await engine.store.thread(root.id)).window_start_seq)
            llm.gate.set()  # a pause in the talk: the model summarises what was prepared
            await engine.settle()
            llm.gate.clear()
        thread = await engine.store.thread(root.id)
        assert len(starts - {None}) >= 3, "the window never cut: the test proves nothing"
        assert thread.window_summary and thread.window_summary.startswith("Summary")
        request = (await engine.context(root.id)).request
        assert thread.window_summary in str(request)
    finally:
        llm.gate.set()
        await engine.close()


async def test_when_the_summary_could_not_be_prepared_the_cut_summarises_inline(make_config):
    llm = SlowSummaries()
    llm.gate.set()
    engine = await _engine(make_config, llm)
    scope = Scope.channel(1, 10)
    root = await engine.thread_for(scope)
    try:
        for turn in range(60):
            await engine.hear(scope, _message(turn), author_name="mahe")
            llm.fail_summaries = False  # the model is back by the time the window overflows...
            await engine.reply(root.id)
            llm.fail_summaries = True  # ... but every summary prepared ahead fails
            await engine.settle()
            if (await engine.store.thread(root.id)).window_start_seq is not None:
                break
        thread = await engine.store.thread(root.id)
        assert thread.window_start_seq is not None and thread.window_summary.startswith("Summary")
    finally:
        await engine.close()


async def test_a_summary_prepared_before_an_erasure_is_never_used(make_config):
    llm = SlowSummaries()
    llm.gate.set()
    engine = await _engine(make_config, llm)
    scope = Scope.channel(1, 10)
    root = await engine.thread_for(scope)
    try:
        turn = 0
        while llm.summaries == 0:  # until the first cut's summary is prepared (it quotes turn 0)
            await engine.hear(scope, _message(turn), author_name="mahe", author_id=7, external_id=100 + turn)
            await engine.reply(root.id)
            await engine.settle()
            turn += 1
            assert turn < 60, "nothing was ever prepared: the test proves nothing"
        assert (await engine.store.thread(root.id)).window_start_seq is None  # prepared, not used yet
        await engine.delete_message(100)  # turn 0 is erased while its summary waits for the cut
        while (await engine.store.thread(root.id)).window_start_seq is None:
            await engine.hear(scope, _message(turn), author_name="mahe", author_id=7, external_id=100 + turn)
            await engine.reply(root.id)
            turn += 1
        assert "turn 0" not in (await engine.store.thread(root.id)).window_summary
    finally:
        await engine.close()
