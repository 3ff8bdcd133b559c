"""A window's cut is summarised ahead, in the background: no reply waits on a summarisation call."""

import asyncio

import pytest

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
        self.last_reply: LLMRequest | None = None

    async def complete(self, request: LLMRequest, on_text=None) -> LLMResult:
        if request.purpose == "summary":
            await self.gate.wait()
            if self.fail_summaries:
                raise LLMError("the summariser is down")
            self.summaries += 1
            read = " ".join(b.text for turn in request.turns for b in turn.blocks)
            quoted = " Mahe opened with turn 0." if "turn 0:" in read else ""
            return LLMResult(f"Summary {self.summaries}: they talked about deploys and travel.{quoted}")
        self.last_reply = request
        return LLMResult("Noted, " + request.turns[-1].blocks[0].text[:40])

    async def aclose(self) -> None:
        return None


def _message(turn: int) -> str:
    return f"turn {turn}: let me tell you more about {TOPICS[turn % len(TOPICS)]}. " * 6


SCOPE = Scope.channel(1, 10)


@pytest.fixture
async def world(make_config):
    llm = SlowSummaries()
    config = make_config(llm={"context_tokens": 4096, "max_output_tokens": 256}, snapshots={"interval_seconds": 0})
    engine = await Engine.open(config, llm)
    yield llm, engine, (await engine.stelis.root(SCOPE)).id
    llm.gate.set()  # whatever a failing test left waiting
    await engine.close()


async def _turn(engine: Engine, root_id: int, turn: int, **who) -> str:
    """Someone says something; the persona answers."""
    await engine.conversations.hear(SCOPE, _message(turn), author_name="mahe", **who)
    return (await engine.conversations.reply(root_id)).content


async def _start(engine: Engine, root_id: int) -> int | None:
    return (await engine.store.thread(root_id)).window_start_seq


async def _moves(engine: Engine, root_id: int) -> tuple[int | None, int | None]:
    """Where the window starts and where its recent part starts: a cut moves the first, a trim the second."""
    thread = await engine.store.thread(root_id)
    return thread.window_start_seq, thread.window_gap_to


async def test_no_reply_waits_on_a_summary_in_the_steady_state(world):
    llm, engine, root_id = world
    engine.assembler.policy = engine.assembler.policy.model_copy(update={"trims": 4})
    moves = set()
    for turn in range(160):  # four trims, then a cut, and again
        # The gate is shut while the reply runs: a reply summarising inline would never finish.
        assert (await asyncio.wait_for(_turn(engine, root_id, turn), 10)).startswith("Noted")
        moves.add(await _moves(engine, root_id))
        llm.gate.set()  # a pause in the talk: the model summarises what was prepared
        await engine.conversations.settle()
        llm.gate.clear()
    thread = await engine.store.thread(root_id)
    assert len({start for start, _ in moves} - {None}) >= 2, "the window never cut: the test proves nothing"
    assert len({gap for _, gap in moves} - {None}) >= 3, "the window never trimmed: the test proves nothing"
    # the last reply's request (a preview now may already plan the next trim, with a note in the bridge's place)
    request = str(llm.last_reply)
    assert thread.window_summary and thread.window_summary.startswith("Summary") and thread.window_summary in request
    if thread.window_bridge:
        assert thread.window_bridge.startswith("Summary") and thread.window_bridge in request


async def test_when_the_summary_could_not_be_prepared_the_cut_summarises_inline(world):
    llm, engine, root_id = world
    llm.gate.set()
    for turn in range(90):
        llm.fail_summaries = False  # the model is back by the time the window overflows...
        await _turn(engine, root_id, turn)
        llm.fail_summaries = True  # ... but every summary prepared ahead fails
        await engine.conversations.settle()
        if await _moves(engine, root_id) != (None, None):
            break
    thread = await engine.store.thread(root_id)
    assert (thread.window_bridge or thread.window_summary or "").startswith("Summary")


async def test_a_summary_prepared_before_an_erasure_is_never_used(world):
    llm, engine, root_id = world
    # a cut's summary: turn 0 leaves the window
    engine.assembler.policy = engine.assembler.policy.model_copy(update={"trims": 0})
    llm.gate.set()
    turn = 0
    while llm.summaries == 0:  # until the first cut's summary is prepared (it quotes turn 0)
        await _turn(engine, root_id, turn, author_id=7, external_id=100 + turn)
        await engine.conversations.settle()
        turn += 1
        assert turn < 60, "nothing was ever prepared: the test proves nothing"
    assert await _start(engine, root_id) is None  # prepared, not used yet
    await engine.forgetting.delete_message(100)  # turn 0 is erased while its summary waits for the cut
    while await _start(engine, root_id) is None:
        await _turn(engine, root_id, turn, author_id=7, external_id=100 + turn)
        turn += 1
    assert "turn 0" not in (await engine.store.thread(root_id)).window_summary


async def test_a_reply_that_needs_the_cut_being_summarised_ahead_waits_for_it_instead_of_asking_again(world):
    llm, engine, root_id = world
    engine.assembler.policy = engine.assembler.policy.model_copy(update={"trims": 0})
    for turn in range(200):  # the gate stays shut: a summary prepared ahead waits, as on a slow local model
        before = llm.summaries
        reply = asyncio.create_task(_turn(engine, root_id, turn))
        done, _ = await asyncio.wait({reply}, timeout=1.0)
        if done:
            continue
        assert engine.assembler._folding, "a reply waits on a summary nobody prepared: the test proves nothing"
        llm.gate.set()  # the model answers the summary prepared ahead ...
        await reply
        await engine.conversations.settle()
        assert llm.summaries - before == 1  # ... and the reply used it: one call for the cut
        assert (await engine.store.thread(root_id)).window_summary.startswith("Summary")
        return
    raise AssertionError("the window never needed its cut: the test proves nothing")


async def test_context_shows_a_cut_without_asking_the_model(world):
    llm, engine, root_id = world
    engine.assembler.policy = engine.assembler.policy.model_copy(update={"trims": 0})
    llm.gate.set()
    llm.fail_summaries = True  # nothing is prepared ahead
    for turn in range(200):
        await engine.conversations.hear(SCOPE, _message(turn), author_name="mahe")
        shown = await asyncio.wait_for(engine.conversations.context(root_id, calls=False), 5)
        if shown.cut:
            break
    else:
        raise AssertionError("the window never needed its cut: the test proves nothing")
    assert llm.summaries == 0 and "not summarised yet" in str(shown.request)
    assert (await engine.store.thread(root_id)).window_start_seq is None  # and nothing was cut for it
