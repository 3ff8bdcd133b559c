import asyncio
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.providers.offline import OfflineLLM
from memory import context, dates, threads
from memory.backends import open_store
from memory.budget import Budget, plan, summary_room
from memory.context import MESSAGE_SHARE, ModelTraits, Rendering, Shape, _starts_turn
from memory.llm import LLMResult, Tool, Usage
from memory.records import Message, NewMessage, Scope
from memory.settings import StelisSettings
from memory.threads import Run
from memory.tokens import cached_tokens
from memory.window import ContextSettings, Item, LockedBufferTooLarge, lock_limit, locked_start
from tests import context_helpers
from tests.context_helpers import (
    FIXED_NOW,
    all_text,
    answer,
    assembler,
    blocks,
    body,
    calls_of,
    say,
    stable_prefix,
    tool_burst,
)
from tests.fake_anthropic import FakeAnthropic, validate_request


async def root(store):
    return await store.root_thread("Stelis", Scope.channel(1, 2), 0.8)


async def test_request_layout_and_breakpoints(store):
    r = await root(store)
    await store.add_record("Stelis", "channel", 2, "long_term", "Mahe likes tea.")
    await say(store, r.id, "hello")
    await answer(store, r.id, "hi Mahe")
    await say(store, r.id, "how are you?")
    a = await assembler(store).assemble(r.id)
    params = body(a)
    validate_request(params)
    assert params["system"][0]["text"].startswith("You are Stelis.")
    assert "Mahe likes tea." in params["system"][1]["text"]
    assert [b["cache_control"]["ttl"] for b in params["system"]] == ["1h", "1h"]
    ttls = [ttl for _, _, ttl in blocks(a) if ttl]
    assert len(ttls) <= 4
    last_user = params["messages"][-1]["content"]
    assert last_user[-1]["text"].startswith("[Now: ")  # the volatile tail comes last
    assert last_user[-2]["text"].endswith("[mahe] how are you?")
    assert "cache_control" in last_user[-2]  # the new message closes the cached history: read next turn
    assert "cache_control" not in params["messages"][-2]["content"][-1]


async def test_appending_keeps_every_block_before_the_tail_identical(store):
    r = await root(store)
    asm = assembler(store, context_tokens=20_000)
    await say(store, r.id, "first")
    previous = await asm.assemble(r.id)
    for i in range(8):
        await answer(store, r.id, f"reply {i}")
        await say(store, r.id, f"message {i}")
        current = await asm.assemble(r.id)
        assert not current.cut
        prefix = stable_prefix(previous)
        assert [c for c, _, _ in blocks(current)][: len(prefix)] == prefix
        previous = current


async def test_a_child_thread_stays_cache_stable_while_its_parent_talks(store):
    r = await root(store)
    for i in range(4):
        await say(store, r.id, f"parent message {i}")
        await answer(store, r.id, f"parent reply {i}")
    run = Run(r.id)
    child = await threads.start(store, run, "Coding", StelisSettings())
    asm = assembler(store, context_tokens=20_000)
    await say(store, child.id, "start coding")
    before = await asm.assemble(child.id)
    await say(store, r.id, "meanwhile, in the channel")
    await answer(store, r.id, "answered in the channel")
    await answer(store, child.id, "coding started")
    await say(store, child.id, "continue")
    after = await asm.assemble(child.id)
    prefix = stable_prefix(before)
    assert [c for c, _, _ in blocks(after)][: len(prefix)] == prefix
    text = all_text(after)
    assert "[mahe] parent message 3" in text  # the parent's protected region
    assert "[Stelis thread Coding (stelis:" in text and "started]" in text  # its own anchor: brief
    assert "Meanwhile in the main conversation: 2 new message(s)" in text  # parent news: tail only
    assert "meanwhile, in the channel" not in "".join(prefix)


async def test_a_live_stelis_threads_status_follows_its_messages_and_is_read_again_only_when_they_change(store):
    """The tail shows an active Stelis thread's last exchanges: a new message, an edit and an erasure there reach
    the next request, as on a first read; while the thread is still, its exchanges are not read again."""
    r = await root(store)
    await say(store, r.id, "let us plan the trip")
    child = await threads.start(store, Run(r.id), "Planning", StelisSettings())
    await store.append(child.id, NewMessage("user", "book the ferry", author_name="mahe", external_id=901))
    asm = assembler(store, context_tokens=20_000)
    reads = []
    exchanges = store.last_exchanges

    async def counted(thread_id, limit):
        reads.append(thread_id)
        return await exchanges(thread_id, limit)

    store.last_exchanges = counted

    async def tail_after(text):
        await say(store, r.id, text)
        return all_text(await asm.assemble(r.id))

    assert "[user]: book the ferry" in await tail_after("good morning")
    assert "[user]: book the ferry" in await tail_after("nice weather")
    assert reads == [child.id]  # still: its status as first read
    await store.append(child.id, NewMessage("assistant", "ferry booked for noon"))
    shown = await tail_after("anything new")
    assert "[assistant]: ferry booked for noon" in shown and "2 message(s) so far" in shown
    await store.edit_message(901, "book the night train")
    shown = await tail_after("and now")
    assert "[user]: book the night train" in shown and "book the ferry" not in shown
    await store.purge(external_id=901)
    shown = await tail_after("and then")
    assert "night train" not in shown and "1 message(s) so far" in shown
    assert reads == [child.id] * 4


async def test_conversations_answering_at_once_read_who_has_pins_branches_and_shared_channels_once(store):
    """Issue 32: a burst of a server's channels answering at once, none with a pin, an open branch or another
    shared channel, read each of those three per channel to find nothing. Now each is known for the persona (or the
    server) once, and a conversation that has one reads it, at once after it appears."""
    roots = [await store.root_thread("Stelis", Scope.channel(1, 10 + i), 0.8) for i in range(12)]
    for r in roots:
        await store.ensure_memory_channel(r)
        await say(store, r.id, "good morning")
    await store.add_record("Stelis", "channel", 12, "short_term", "The harbour master moved the market.", 1, 1)
    asm = assembler(store, context_tokens=20_000)
    asked: dict[str, int] = {}
    for name in ("pins", "pinned_scopes", "recent_branches", "open_branch_scopes", "shared_channels",
                 "visible_conversations"):
        def counting(read, name=name):
            async def counted(*args, **kwargs):
                asked[name] = asked.get(name, 0) + 1
                return await read(*args, **kwargs)
            return counted
        setattr(store, name, counting(getattr(store, name)))

    await asyncio.gather(*(asm.assemble(r.id) for r in roots))
    assert asked == {"pinned_scopes": 1, "open_branch_scopes": 1, "visible_conversations": 1}

    asked.clear()
    await store.pin("Stelis", "channel", 10, "the boat leaves at nine")
    await store.create_branch("b-1", "Stelis", "task", "repaint the pier", roots[1].scope_key, 1, 11, None)
    await store.set_channel_flags(roots[2].id, public=1, name="harbour")
    for r in roots[:4]:
        await say(store, r.id, "what is new")
    shown = [str(a.request) for a in await asyncio.gather(*(asm.assemble(r.id) for r in roots[:4]))]
    assert "the boat leaves at nine" in shown[0] and "repaint the pier" in shown[1]
    assert "moved the market" in shown[0] and "moved the market" in shown[3]  # the channel made public, elsewhere
    assert all("the boat leaves" not in text and "repaint" not in text for text in shown[2:])
    assert asked["pins"] == 1 and asked["recent_branches"] == 1  # only where there is one
    assert asked["pinned_scopes"] == asked["open_branch_scopes"] == asked["visible_conversations"] == 1


async def test_a_pin_quoting_someone_forgotten_leaves_the_next_prompt_though_the_pins_were_known(store):
    """Which conversations have pins is kept per persona: a forget-me that takes a pin quoting the person away
    moves it, so the next prompt neither shows the pin nor thinks one is still there to read."""
    r = await root(store)
    said = "my locker code is 5512"
    await store.append(r.id, NewMessage("user", said, author_id=77, author_name="ana"))
    await store.pin("Stelis", "channel", 2, said)
    asm = assembler(store, context_tokens=20_000)
    await say(store, r.id, "good morning")
    assert "5512" in str((await asm.assemble(r.id)).request)
    await store.purge(author_id=77, thread_ids=[r.id])
    assert await store.pins("Stelis", "channel", 2) == []
    await say(store, r.id, "what now")
    assert "5512" not in str((await asm.assemble(r.id)).request)


async def test_an_edit_reads_again_the_window_of_its_thread_and_of_threads_showing_it_and_no_other(store):
    """Window caches key on the revisions of the threads they show (read with the thread rows): an edit in one
    conversation leaves another's cached window alone, and reaches a Stelis thread showing its parent's region."""
    here, there = await root(store), await store.root_thread("Stelis", Scope.channel(1, 3), 0.8)
    for i in range(3):
        await store.append(here.id, NewMessage("user", f"the pier plan, part {i}", author_name="mahe",
                                               external_id=100 + i))
        await say(store, there.id, f"the heron count, day {i}")
    child = await threads.start(store, Run(here.id), "Planning", StelisSettings())
    await say(store, child.id, "work out the pier plan")
    asm = assembler(store, context_tokens=20_000)
    for thread in (here, there, child):
        await asm.assemble(thread.id)
    reads: list[int] = []
    newest_first = store.newest_first

    def counted(thread_id, **kwargs):
        reads.append(thread_id)
        return newest_first(thread_id, **kwargs)

    store.newest_first = counted
    await store.edit_message(101, "the pier plan, part 1: moved to the lighthouse")
    shown_there = await asm.assemble(there.id)
    assert reads == [] and "heron count, day 2" in all_text(shown_there)  # another conversation: kept as read
    assert "moved to the lighthouse" in all_text(await asm.assemble(here.id)) and reads == [here.id]
    assert "moved to the lighthouse" in all_text(await asm.assemble(child.id))  # the parent's region, read again


async def test_the_parent_keeps_an_active_childs_changing_part_in_the_tail(store):
    r = await root(store)
    run = Run(r.id)
    child = await threads.start(store, run, "Research", StelisSettings())
    await say(store, r.id, "how is the research going?")
    asm = assembler(store, context_tokens=20_000)
    first = await asm.assemble(r.id)
    await say(store, child.id, "reading paper 1")
    await answer(store, child.id, "paper 1 read")
    second = await asm.assemble(r.id)
    assert "- Ended: in progress" in "".join(stable_prefix(first))
    assert stable_prefix(first) == stable_prefix(second)
    assert "0 message(s) so far" in all_text(first)
    assert "2 message(s) so far" in all_text(second) and "[assistant]: paper 1 read" in all_text(second)


async def test_the_protected_region_is_the_parents_share(store):
    r = await root(store)
    for i in range(80):
        await say(store, r.id, f"parent message {i} " + "words " * 20)
    child = await threads.start(store, Run(r.id), "Task", StelisSettings())
    await say(store, child.id, "go")
    a = await assembler(store, context_tokens=8_000).assemble(child.id)
    capacity = plan(Budget(8_000, 200), a.parts["system"]).windows(a.parts["memory"])
    assert 0 < a.parts["parent"] <= capacity - int(capacity * 0.8)
    assert a.window_budget == int(capacity * 0.8)
    text = all_text(a)
    assert "parent message 79 " in text and "parent message 0 " not in text


async def test_a_remark_lets_the_window_grow_into_recalls_floor_and_a_question_keeps_it(store):
    """Recall's floor is reserved for a question: on a remark's turn the window grows into it before it overflows
    (a remark's recall takes what is left), read whole by an assembler that keeps nothing, so its start holds
    still; a question asked there overflows it and leaves recall its floor."""
    r = await root(store)
    shares = plan(Budget(8_000, 200), 0)
    grown, first = [], None
    for i in range(60):
        await say(store, r.id, f"note {i} " + "filler " * 100)
        a = await assembler(store, context_tokens=8_000).assemble(r.id)  # nothing kept: the window read back
        held = a.parts["history"] + a.parts["summary"]
        if a.cut:
            first = None
        elif held > a.window_budget:
            assert first is None or a.window_messages[0].seq == first  # never slid a message at a time
            first = a.window_messages[0].seq
            grown.append(held - a.window_budget)
            asked = await assembler(store, context_tokens=8_000).assemble(
                r.id, incoming=NewMessage("user", "what did we say about note 3?"), persist=False)
            assert asked.cut  # a question's turn keeps recall's floor
            spent = sum(v for k, v in asked.parts.items() if k not in ("output", "free", "recall"))
            assert asked.parts.get("recall", 0) + spent <= shares.input
            assert shares.input - spent >= shares.recall_floor
        await answer(store, r.id, f"ok {i}")
    assert grown and max(grown) <= shares.recall_floor


async def test_a_window_cut_folds_the_dropped_span_into_a_summary(store):
    r = await root(store)
    asm = assembler(store, context_tokens=3_000)
    for i in range(120):
        await say(store, r.id, f"note {i}: code ISSUE-{i} " + "filler " * 10)
        await answer(store, r.id, f"ok {i}")
    a = await asm.assemble(r.id)
    thread = await store.thread(r.id)
    assert a.cut and thread.window_start_seq is not None
    summary = next(b.text for t in a.request.turns for b in t.blocks if b.text.startswith("[Memory Summary]"))
    day = dates.span(thread.window_summary_first_at, thread.window_summary_last_at)
    assert f"(messages {thread.window_summary_from}-{thread.window_summary_to}, {day})" in summary
    body_text = summary.split("summarised:\n", 1)[1]
    assert cached_tokens(body_text) <= summary_room(a.window_budget, ContextSettings(), 150)
    assert "ISSUE-" in body_text and body_text.endswith("more)")  # what does not fit is counted, not lost
    again = await asm.assemble(r.id)
    assert not again.cut and stable_prefix(again) == stable_prefix(a)  # the start holds until the next overflow


async def test_a_small_window_keeps_more_after_a_cut_where_the_resent_window_is_billed_than_on_a_local_server(store):
    """A window of a few turns: with an API a cut keeps low_water or more, as many of the newest turns as locked
    turns may fill (it carries as much as a Letta-style window); a local server evaluates every cut on the CPU, so
    there a cut keeps less and cuts come less often."""
    kept = {}
    for channel, local in ((2, False), (3, True)):
        r = await store.root_thread("Stelis", Scope.channel(1, channel), 0.8)
        for i in range(40):
            await say(store, r.id, f"note {i}: " + "filler " * 90)
            await answer(store, r.id, f"ok {i}, " + "sure " * 90)
        a = await assembler(store, context_tokens=2_500, traits=ModelTraits(keep_tails=local)).assemble(r.id)
        assert a.cut
        start = (await store.thread(r.id)).window_start_seq
        kept[local] = sum([m.token_count async for m in store.span(r.id, start, None)])
        assert kept[local] <= ContextSettings().high_water * a.window_budget
    assert kept[False] > 1.5 * kept[True]


async def test_a_cut_carrying_an_earlier_summary_on_summarises_all_that_left_the_window(store):
    """More left than one call summarises: with an earlier summary carried on, all of it is summarised (in parts),
    so the summary's range holds no message that no summary read (a short-term version reads the summary for them);
    without one (the first cut after a bulk import) the newest part only, the rest left to memory."""
    r = await root(store)
    llm = Recording()
    asm = assembler(store, context_tokens=3_000, llm=llm)
    for i in range(120):
        await say(store, r.id, f"note {i}: code ISSUE-{i} " + "filler " * 10)
        await answer(store, r.id, f"ok {i}")
    said = [m async for m in store.span(r.id, None, None)]
    await store.set_window(r.id, window_start_seq=said[10].seq, window_summary="EARLIER-MARK the first notes",
                           window_summary_from=said[0].seq, window_summary_to=said[9].seq,
                           window_summary_first_at=said[0].created_at, window_summary_last_at=said[9].created_at)
    assert (await asm.assemble(r.id)).cut
    thread = await store.thread(r.id)
    assert (thread.window_summary_from, thread.window_summary_to) == (said[0].seq, thread.window_start_seq - 1)
    read = "\n".join(str(request) for request in llm.requests)
    assert "EARLIER-MARK" in read and len(llm.requests) > 1  # more than one call's worth, in parts
    assert all(f"ISSUE-{i} " in read for i in range(5, 50))  # every note that left (notes 5-49 and more)

    fresh = await store.root_thread("Stelis", Scope.channel(1, 3), 0.8)
    for i in range(120):
        await say(store, fresh.id, f"note {i}: code ISSUE-{i} " + "filler " * 10)
        await answer(store, fresh.id, f"ok {i}")
    llm.requests.clear()
    assert (await asm.assemble(fresh.id)).cut
    cut = await store.thread(fresh.id)
    read = "\n".join(str(request) for request in llm.requests)
    assert "ISSUE-5 " not in read and cut.window_summary_from > said[0].seq  # the first cut: a bounded read
    newest_left = [m async for m in store.span(fresh.id, cut.window_start_seq - 2, cut.window_start_seq)]
    assert newest_left[0].content.split(":")[0] in read


async def test_a_first_cut_reads_a_bounded_part_whatever_the_size_of_a_summarisation_request(store):
    """The largest summarisation request (stelis.chunk_tokens) is a ceiling for records; what a first cut reads of
    what left the window is bounded on its own, so a larger ceiling does not make every cut read more."""
    read = {}
    for chunk_tokens in (6_000, 200_000):
        r = await store.root_thread("Stelis", Scope.channel(1, chunk_tokens), 0.8)
        said = [(("user", f"note {i}: code ISSUE-{i} " + "filler " * 10), ("assistant", f"ok {i}")) for i in range(600)]
        await store.append_many(r.id, [NewMessage(role, text, author_name="mahe") for p in said for role, text in p])
        llm = Recording()
        asm = context.Assembler(store, llm, context.Persona("Stelis", "You are Stelis."), Budget(4_000, 200),
                                ContextSettings(low_water=0.6, locked_turns=3, summary_tokens=150),
                                StelisSettings(chunk_tokens=chunk_tokens), clock=lambda: FIXED_NOW)
        assert (await asm.assemble(r.id)).cut
        text = "\n".join(block.text for request in llm.requests for turn in request.turns for block in turn.blocks)
        read[chunk_tokens] = {i for i in range(600) if f"ISSUE-{i} " in text}
        # about 500 notes left the window (it holds about 100): the newest of them only, the rest are memory's
        assert 0 < len(read[chunk_tokens]) < 300 and 0 not in read[chunk_tokens]
    assert read[200_000] == read[6_000]  # ~4,800 tokens of the newest that left, in both


class Recording(OfflineLLM):
    def __init__(self) -> None:
        super().__init__()
        self.requests: list = []

    async def complete(self, request, on_text=None):
        self.requests.append(request)
        return await super().complete(request, on_text)


async def test_oversized_tool_output_is_reduced_in_the_request_not_in_the_store(store):
    r = await root(store)
    await say(store, r.id, "run the build")
    await tool_burst(store, r.id, calls=2, lines=500, tag="t")
    await say(store, r.id, "and?")
    a = await assembler(store, context_tokens=20_000).assemble(r.id)
    validate_request(body(a))
    results = [b for t in a.request.turns for b in t.blocks if b.kind == "tool_result"]
    assert len(results) == 2 and all(b.text.startswith("[Data Truncated]") for b in results)
    assert "(490 lines omitted)" in results[0].text
    stored = [m for m in await store.tail(r.id, 10) if m.role == "tool"]
    assert all(len(m.content.splitlines()) == 500 for m in stored)


async def test_an_oversized_message_is_shown_reduced_and_never_blocks_the_conversation(store):
    r = await root(store)
    for i in range(3):
        await say(store, r.id, f"start{i} " + "huge " * 3_000 + f"end{i}")
    a = await assembler(store, context_tokens=3_000).assemble(r.id)
    validate_request(body(a))
    text = all_text(a)
    assert "start2 huge" in text and "huge end2" in text and "tokens of this message left out here" in text
    assert sum(a.parts[p] for p in ("summary", "history")) <= a.window_budget
    assert all(len(m.content) > 14_000 for m in await store.tail(r.id, 3))  # the stored messages stay whole


async def test_only_a_turn_larger_than_the_whole_window_is_refused(store):
    r = await root(store)
    await say(store, r.id, "run everything")
    uses = [{"id": f"big-{i}", "name": "run", "input": {}} for i in range(12)]
    await store.append(r.id, _new("assistant", "running", tool_use=uses))
    for use in uses:  # each result is reduced to its share of the window, but twelve still do not fit
        await store.append(r.id, _new("tool", "\n".join("word " * 60 for _ in range(25)), tool_use_id=use["id"]))
    with pytest.raises(LockedBufferTooLarge, match="the newest turn alone needs"):
        await assembler(store, context_tokens=3_000).assemble(r.id)


async def test_orphan_tool_calls_and_results_render_as_text(store):
    r = await root(store)
    await say(store, r.id, "try")
    await store.append(r.id, _new("assistant", "calling", tool_use=[{"id": "x1", "name": "run", "input": {}}]))
    await say(store, r.id, "interrupting before the result")
    await store.append(r.id, _new("tool", "late result", tool_use_id="x1"))
    await say(store, r.id, "well?")
    a = await assembler(store, context_tokens=20_000).assemble(r.id)
    validate_request(body(a))
    text = all_text(a)
    assert "[called tool run; no result was recorded]" in text and "[tool result]\nlate result" in text


def _new(role, content, **metadata):
    from memory.records import NewMessage

    return NewMessage(role, content, metadata=metadata)


# property test: random histories with tool bursts, long outputs and cuts

EVENTS = st.lists(
    st.one_of(
        st.tuples(st.just("say"), st.integers(1, 120)),
        st.tuples(st.just("reply"), st.integers(1, 160)),
        st.tuples(st.just("tools"), st.integers(1, 3), st.sampled_from([1, 5, 60])),
    ),
    min_size=4, max_size=45,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(EVENTS)
def test_assembly_invariants_over_random_histories(events):
    asyncio.run(_check_invariants(events))


def _kept(assembly):
    return [b for b in blocks(assembly) if "[Recall: " not in b[0]]


async def _check_invariants(events):
    with tempfile.TemporaryDirectory() as tmp:
        store = await open_store(Path(tmp) / "p.sqlite3")
        try:
            r = await root(store)
            asm = assembler(store, context_tokens=4_000, locked_turns=2)
            previous = None
            for n, event in enumerate(events):
                if event[0] == "say":
                    await say(store, r.id, f"m{n} " + "word " * event[1])
                elif event[0] == "reply":
                    await answer(store, r.id, f"r{n} " + "answer " * event[1])
                else:
                    await tool_burst(store, r.id, event[1], event[2], tag=f"e{n}")
                if event[0] != "say":
                    continue
                stored = [(m.seq, m.content, m.token_count, m.metadata) for m in await store.tail(r.id, 10_000)]
                try:
                    current = await asm.assemble(r.id)
                except LockedBufferTooLarge:
                    previous = None
                    continue
                validate_request(body(current))
                assert len([1 for _, _, ttl in blocks(current) if ttl]) <= 4
                after = [(m.seq, m.content, m.token_count, m.metadata) for m in await store.tail(r.id, 10_000)]
                assert after == stored  # assembly never changes stored messages
                await _locked_buffer_is_verbatim(store, r.id, current, asm.policy)
                if not current.cut:  # what is kept between turns renders as a fresh assembler would
                    again = await assembler(store, context_tokens=4_000, locked_turns=2).assemble(r.id, persist=False)
                    # Recall is volatile (after the last breakpoint) and ranks by word frequencies an assembler
                    # estimates and caches: a fresh one may choose other terms. Everything kept must match.
                    assert _kept(again) == _kept(current)
                if previous is not None and not current.cut:
                    prefix = stable_prefix(previous)
                    assert [c for c, _, _ in blocks(current)][: len(prefix)] == prefix
                previous = current
        finally:
            await store.close()


async def _locked_buffer_is_verbatim(store, thread_id, assembly, policy):
    """The last K turns reach the model whole and in order (tool output reduced, never cut or summarised), unless
    they would fill more than the window's lock limit (memory/window.py): then as many of the newest as fit, and
    always the newest."""
    messages = await store.tail(thread_id, 10_000)
    budget = assembly.window_budget
    seen = Rendering({thread_id}, policy, int(budget * MESSAGE_SHARE))  # each message as the window counts it
    items = [Item(m.seq, seen(m)[1], _starts_turn(m)) for m in messages]
    # The window's own limit also weighs its usual turn sizes since its start, which this check does not replay:
    # a turn well inside the limit must be there; near it, only the newest turn is sure to be.
    limit = lock_limit(items, budget, policy, summary_room(budget, policy, policy.summary_tokens)) // 2
    locked = messages[locked_start(items, policy.locked_turns, limit):]
    sent = [b.text for t in assembly.request.turns for b in t.blocks if b.text]
    position = 0
    for message in locked:
        expected = seen(message)[0]
        if not expected.strip():
            continue
        found = [i for i in range(position, len(sent)) if sent[i] == expected or sent[i].endswith(expected)]
        assert found, f"locked message {message.seq} missing or altered"
        position = found[0] + 1


async def test_fake_server_accepts_assembled_requests_through_the_sdk(store, fake_anthropic):
    from bot.config import AnthropicConfig, ModelTiers
    from bot.providers.anthropic_llm import AnthropicLLM

    r = await root(store)
    await say(store, r.id, "hello")
    await tool_burst(store, r.id, 2, 50, "sdk")
    await say(store, r.id, "done?")
    llm = AnthropicLLM(AnthropicConfig(api_key="k", base_url=fake_anthropic.base_url, max_retries=0), ModelTiers())
    a = await assembler(store, context_tokens=20_000).assemble(r.id)
    result = await llm.complete(a.request)
    await llm.aclose()
    assert result.text.startswith("fake reply to:") and fake_anthropic.calls[-1].status == 200
    assert isinstance(fake_anthropic, FakeAnthropic)


async def test_recall_runs_beside_the_layout_and_goes_down_with_it(store, monkeypatch):
    """Recall's look-ups are in the database's hands before the rendering starts, so the two overlap; a layout that
    fails leaves no search running behind it."""
    r = await root(store)
    await say(store, r.id, "the deploy of calculator_v2 is on Friday")
    await answer(store, r.id, "noted")
    for i in range(30):
        await say(store, r.id, f"filler {i}")
        await answer(store, r.id, "ok")
    asm = assembler(store, context_tokens=2_048)
    order: list[str] = []
    real_lookup, real_layout = store.recall_matches, asm._lay_out

    async def lookup(*args):
        order.append("look-up")
        return await real_lookup(*args)

    async def layout(*args):
        order.append("layout")
        return await real_layout(*args)

    monkeypatch.setattr(store, "recall_matches", lookup)
    monkeypatch.setattr(asm, "_lay_out", layout)
    await say(store, r.id, "when is the calculator_v2 deploy?")
    assert "Friday" in all_text(await asm.assemble(r.id))  # recalled, through the overlapped search
    assert order == ["look-up", "layout"]

    started = asyncio.Event()

    async def slow_lookup(*args):
        started.set()
        await asyncio.sleep(30)  # a database that does not answer
        return await real_lookup(*args)

    async def broken_tail(*args):
        await started.wait()
        raise RuntimeError("the tail could not be rendered")

    real_tail = asm._tail
    monkeypatch.setattr(store, "recall_matches", slow_lookup)
    monkeypatch.setattr(asm, "_tail", broken_tail)
    await say(store, r.id, "and the calculator_v2 deploy again?")
    before = asyncio.all_tasks()
    with pytest.raises(RuntimeError, match="tail could not be rendered"):
        await asyncio.wait_for(asm.assemble(r.id), 5)
    await asyncio.sleep(0)
    assert not [t for t in asyncio.all_tasks() - before if not t.done()]

    # an assembly given up while recall has not yet handed its look-ups over (a slow first read) takes recall with it
    real_visibility = asm.visibilities.of

    async def slow_visibility(*args):
        await asyncio.sleep(30)
        return await real_visibility(*args)

    monkeypatch.setattr(asm.visibilities, "of", slow_visibility)
    monkeypatch.setattr(asm, "_tail", real_tail)
    before = asyncio.all_tasks()
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(asm.assemble(r.id), 0.2)
    await asyncio.sleep(0)
    assert not [t for t in asyncio.all_tasks() - before if not t.done()]


async def test_a_trim_keeps_the_window_head_cached_and_bridges_what_it_drops(store):
    r = await root(store)
    llm = Recording()
    asm = assembler(store, context_tokens=4_000, locked_turns=2, llm=llm)
    asm.policy = asm.policy.model_copy(update={"trims": 4})
    cache = FakeAnthropic()  # its prompt-cache rules, without a server
    trims = cuts = 0
    bridges: set[str] = set()
    for n in range(120):
        await say(store, r.id, f"m{n} " + "word " * 40)
        assembly = await asm.assemble(r.id)
        flat = blocks(assembly)
        usage = cache.account(body(assembly))
        thread = assembly.thread
        if assembly.cut and thread.window_gap_to is not None:
            trims += 1
            # The head ends at the breakpoint before the last. It is read from the cache at least up to
            # its last user message (a prefix an earlier turn wrote): at most the reply after it is sent again.
            head_end = [i for i, (_, _, ttl) in enumerate(flat) if ttl][-2]
            last_user = max(i for i in range(head_end + 1) if '"_role": "user"' in flat[i][0])
            assert head_end - last_user <= 1
            assert usage["cache_read_input_tokens"] >= sum(tokens for _, tokens, _ in flat[: last_user + 1])
            text = all_text(assembly)
            assert thread.window_bridge and thread.window_bridge in text
            gap = {m.seq async for m in store.span(r.id, thread.window_gap_from, thread.window_gap_to - 1)}
            shown = {m.seq for m in assembly.window_messages}
            assert gap and not gap & shown and min(shown) < min(gap) and max(gap) < thread.window_gap_to <= max(shown)
            assert text.index(thread.window_bridge) < text.index(assembly.window_messages[-1].content)
        elif assembly.cut:
            cuts += 1
            # The cut's summary holds every message of its range as said, the trimmed gap's too (a bridge holds
            # only the newest part of each run): a short-term version reads it for them.
            read = str(llm.requests[-1])
            assert thread.window_summary_to == thread.window_start_seq - 1  # all that left, the gap included
            summarised = [m async for m in store.span(r.id, thread.window_summary_from, thread.window_summary_to + 1)]
            assert summarised and all(f"{m.content.split()[0]} " in read for m in summarised)
            assert all(thread_bridge not in read for thread_bridge in bridges)
        if assembly.thread.window_bridge:
            bridges.add(assembly.thread.window_bridge)
        await answer(store, r.id, f"r{n} " + "answer " * 40)
    assert trims >= 4 and cuts >= 1, (trims, cuts)  # four trims, then a cut that restarts the window


def test_a_window_rendered_turn_by_turn_matches_one_rendered_whole():
    # Days change, a tool call's result arrives in a later call, an unstored preview comes and goes.
    def message(seq, role, text, day, **metadata):
        return Message(seq, 1, role, text, 5, created_at=1_700_000_000.0 + day * 86_400 + seq, metadata=metadata)

    history = []
    for n in range(12):
        history.append(message(4 * n + 1, "user", f"question {n}", n // 4))
        call = [{"id": f"t{n}", "name": "run"}]
        history.append(message(4 * n + 2, "assistant", f"checking {n}", n // 4, tool_use=call))
        history.append(message(4 * n + 3, "tool", f"result {n}", n // 4, tool_use_id=f"t{n}"))
        history.append(message(4 * n + 4, "assistant", f"answer {n}", n // 4))
    kept = Rendering({1}, ContextSettings(), 1_000)
    preview = Message(2**62, 1, "user", "unstored", 2, created_at=1_700_000_000.0 + 5 * 86_400)
    for end in range(1, len(history) + 1):
        window = history[:end]
        assert kept.pieces(window) == Rendering({1}, ContextSettings(), 1_000).pieces(window)
        previewed = [*window, preview]
        assert kept.pieces(previewed) == Rendering({1}, ContextSettings(), 1_000).pieces(previewed)
        after = history[0]
        assert kept.pieces(window[1:], after) == Rendering({1}, ContextSettings(), 1_000).pieces(window[1:], after)


RUN_TOOL = Tool("run", "runs a command", {"type": "object", "properties": {"n": {"type": "integer"}}})


async def test_an_instruction_shape_repeats_the_replys_cached_prefix_and_asks_after_it(store, fake_anthropic):
    from bot.config import AnthropicConfig, ModelTiers
    from bot.providers.anthropic_llm import AnthropicLLM

    fake_anthropic.min_cacheable_tokens = 50
    r = await root(store)
    for i in range(6):
        await say(store, r.id, f"message {i} about the calculator_v2 release and its many moving parts")
        await answer(store, r.id, f"answer {i}: noted, the release train keeps its schedule")
    await say(store, r.id, "so when do we ship?")
    asm = assembler(store, context_tokens=20_000)
    reply = await asm.assemble(r.id, persist=False)
    task = await asm.assemble(r.id, shape=Shape(instruction="Decide: does this need a task branch? yes or no."),
                              persist=False)
    assert stable_prefix(task) == stable_prefix(reply)  # byte for byte, up to the last breakpoint
    assert task.request.turns[-1].blocks[-1].text == "Decide: does this need a task branch? yes or no."
    assert task.parts["instruction"] > 0 and "instruction" not in reply.parts
    llm = AnthropicLLM(AnthropicConfig(api_key="k", base_url=fake_anthropic.base_url, max_retries=0), ModelTiers())
    await llm.complete(reply.request)
    asked = await llm.complete(task.request)
    await llm.aclose()
    assert asked.usage.cache_read_input_tokens >= sum(t for _, t, _ in blocks(reply)[:len(stable_prefix(reply))])


async def test_stored_tool_turns_are_tool_blocks_with_tools_and_text_without(store, fake_anthropic):
    from bot.config import AnthropicConfig, ModelTiers
    from bot.providers.anthropic_llm import AnthropicLLM

    r = await root(store)
    await say(store, r.id, "run it twice")
    await tool_burst(store, r.id, 2, 3, "t")
    await say(store, r.id, "and?")
    asm = assembler(store, context_tokens=20_000)
    plain = await asm.assemble(r.id, persist=False)
    tooled = await asm.assemble(r.id, shape=Shape(tools=(RUN_TOOL,), with_recall=False), persist=False)
    assert [t.name for t in tooled.request.tools] == ["run"]
    kinds = {b.kind for t in tooled.request.turns for b in t.blocks}
    assert {"tool_use", "tool_result"} <= kinds  # the stored exchange, as the model made it
    sent = body(plain)["messages"]
    assert all(b["type"] == "text" for m in sent for b in m["content"])  # no tools: the API would refuse them
    assert any("[tool call run" in b["text"] for m in sent for b in m["content"])
    llm = AnthropicLLM(AnthropicConfig(api_key="k", base_url=fake_anthropic.base_url, max_retries=0), ModelTiers())
    for assembly in (plain, tooled):  # the fake server applies the API's rules to both
        assert (await llm.complete(assembly.request)).text.startswith("fake reply to:")
    await llm.aclose()
    assert [c.status for c in fake_anthropic.calls] == [200, 200]


async def test_a_shape_without_recall_leaves_recall_out(store):
    r = await root(store)
    await say(store, r.id, "the deploy of calculator_v2 is on Friday")
    await answer(store, r.id, "noted")
    for i in range(60):  # enough that the deploy message leaves the window
        await say(store, r.id, f"filler {i} about the weather and lunch plans and other small talk of the day")
        await answer(store, r.id, "ok")
    await say(store, r.id, "when is the calculator_v2 deploy?")
    asm = assembler(store, context_tokens=2_048)
    with_recall = await asm.assemble(r.id)
    assert with_recall.recalled and "recall" in with_recall.parts
    without = await asm.assemble(r.id, shape=Shape(with_recall=False))
    assert without.recalled == [] and "recall" not in without.parts


async def test_a_tool_exchange_stored_from_a_result_comes_back_as_the_same_tool_blocks(store):
    from memory.llm import LLMResult, ToolCall
    from memory.turns import tool_call_message, tool_result_message

    r = await root(store)
    await say(store, r.id, "how many files?")
    calls = (ToolCall("toolu_a", "run", {"n": 1}), ToolCall("toolu_b", "run", {"n": 2}))
    await store.append(r.id, tool_call_message(LLMResult("Counting.", tool_calls=calls), "Stelis"))
    for call, output in zip(calls, ("12 files", "3 folders"), strict=True):
        await store.append(r.id, tool_result_message(call, output))
    await say(store, r.id, "thanks")
    a = await assembler(store, context_tokens=20_000).assemble(r.id, shape=Shape(tools=(RUN_TOOL,)))
    blocks_ = [b for t in a.request.turns for b in t.blocks]
    uses = [(b.tool_id, b.tool_name, b.tool_input) for b in blocks_ if b.kind == "tool_use"]
    results = [(b.tool_id, b.text) for b in blocks_ if b.kind == "tool_result"]
    assert uses == [("toolu_a", "run", {"n": 1}), ("toolu_b", "run", {"n": 2})]
    assert results == [("toolu_a", "12 files"), ("toolu_b", "3 folders")]


async def test_a_discord_threads_cut_summarises_its_own_messages_whatever_its_channels_memory_covers(store):
    """The channel's memory versions cover the channel's messages, not a thread's said meanwhile: a cut in the thread
    leaves none of its messages out of its rolling summary because the channel's newest version came later."""
    r = await root(store)
    thread = await threads.start(store, Run(r.id), "thread in Discord", StelisSettings(), discord_thread_id=555)
    llm = Recording()
    asm = assembler(store, context_tokens=4_000, locked_turns=2, llm=llm)
    asm.policy = asm.policy.model_copy(update={"trims": 0})
    for n in range(60):
        await say(store, thread.id, f"t{n} " + "word " * 40)
        await answer(store, thread.id, f"a{n} " + "answer " * 40)
    await say(store, r.id, "meanwhile in the channel")
    newest = (await store.tail(r.id, 1))[0].seq
    await store.add_record("Stelis", "channel", 2, "short_term", "the channel's talk", 1, newest)
    assembly = await asm.assemble(thread.id)
    cut = assembly.thread
    assert assembly.cut and cut.window_start_seq is not None
    left = [m async for m in store.span(thread.id, None, cut.window_start_seq)]
    assert left and cut.window_summary_from is not None and cut.window_summary_from <= left[-1].seq
    read = " ".join(str(request) for request in llm.requests)
    assert f"{left[-1].content.split()[0]} " in read  # the newest message that left was summarised


async def test_a_trim_reads_a_newer_memory_version_instead_of_the_messages_it_covers(store):
    """The memory work read those messages already: a bridge is written from its version where that is shorter, and
    from nothing where a shown version covers them; never from another conversation's memory."""
    r = await root(store)
    elsewhere = await store.root_thread("Stelis", Scope.channel(1, 3), 0.8)
    await say(store, elsewhere.id, "private words of channel three")
    llm = Recording()
    asm = assembler(store, context_tokens=4_000, locked_turns=2, llm=llm)
    asm.policy = asm.policy.model_copy(update={"trims": 8})
    covered, versions, run_from, noted, as_said = 0, [], None, 0, 0
    for n in range(150):
        await say(store, r.id, f"m{n} " + "word " * 40)
        asked = len(llm.requests)
        thread = (await asm.assemble(r.id)).thread
        if thread.window_gap_to is None:
            run_from = None
        elif thread.window_gap_to != run_from and len(llm.requests) > asked:  # a trim that wrote its bridge
            read = str([request.turns for request in llm.requests[asked:]])
            run = [m async for m in store.span(r.id, run_from or thread.window_gap_from, thread.window_gap_to)
                   if m.role == "user"]
            inside = [m for m in run if any(first <= m.seq <= last for first, last, text in versions
                                            if not text.startswith("the long version"))]
            assert not [m for m in inside if f"{m.content.split()[0]} " in read]  # memory read them already
            outside = [m for m in run if m not in inside]
            if outside:
                assert f"{outside[-1].content.split()[0]} " in read  # the newest of the rest, as said
                as_said += 1
            used = [(first, text) for first, last, text in versions if any(first <= m.seq <= last for m in inside)]
            noted += any(text in read for _, text in used)
            read_in = [first for first, text in used if text in read]
            if read_in:  # its words reach back to the version's first message, for forget-me and the next version
                assert thread.window_bridge_from <= min(read_in)
            assert "the long version" not in read  # longer than the two messages it covers: they are read instead
            assert "channel three" not in read  # another conversation's memory never
            assert ("[earlier summary]" in read) == (run_from is not None)  # the bridge before it, after the first
            run_from = thread.window_gap_to
        await answer(store, r.id, f"r{n} " + "answer " * 40)
        newest = (await store.tail(r.id, 1))[0].seq
        if n % 9 == 8:  # the memory work writes a version now and then
            text = f"memory note {n}: mahe said many words"
            if n == 62:
                text = "the long version " + "detail " * 400
                covered = newest - 4  # it covers two messages; the next takes the rest
            versions.append((covered + 1, newest, text))
            await store.add_record("Stelis", "channel", 2, "short_term", text, covered + 1, newest)
            await store.add_record("Stelis", "channel", 3, "short_term", "channel three's memory", covered + 1, newest)
            covered = newest
    assert noted >= 3 and as_said >= 3, (noted, as_said)


async def test_a_reply_asks_the_model_without_writing_first_and_stores_what_memory_it_showed_with_its_answer(store):
    """Which memory a window shows is kept with the thread at once and stored with the reply: the same memory
    next turn, though a version was written between the two."""
    r = await root(store)
    await store.add_record("Stelis", "channel", 2, "long_term", "Mahe likes tea.")
    await say(store, r.id, "hello")
    asm = assembler(store)
    writes = []
    for name in ("set_window", "append", "append_counted", "close_thread"):
        method = getattr(store, name)

        async def spied(*args, _method=method, _name=name, **kwargs):
            writes.append(_name)
            return await _method(*args, **kwargs)
        setattr(store, name, spied)
    first = await asm.assemble(r.id)
    assert writes == []  # nothing waits on a write of its own before the model is asked
    assert (await store.thread(r.id)).memory_as_of is None
    await store.add_record("Stelis", "channel", 2, "long_term", "Mahe likes coffee now.")
    await answer(store, r.id, "hi Mahe")
    stored = await store.thread(r.id)
    assert stored.memory_as_of is not None and stored.window_cached_after == first.window_messages[-1].seq
    await say(store, r.id, "what do I drink?")
    second = await asm.assemble(r.id)
    memory = body(second)["system"][1]["text"]
    assert "Mahe likes tea." in memory and "coffee" not in memory
    assert stable_prefix(first) == [c for c, _, _ in blocks(second)][: len(stable_prefix(first))]


@pytest.mark.parametrize("page", [2, context.OPENING_PAGE])
async def test_a_reply_reads_its_window_with_its_thread_and_misses_nothing_said(store, monkeypatch, page):
    """The thread and its window's messages come in one round trip, on a first turn and after; where more came
    than the page holds, the window is read on, and every message said is in it."""
    monkeypatch.setattr(context, "OPENING_PAGE", page)
    r = await root(store)
    said = []
    for i in range(3):
        said += [f"early {i}", f"reply {i}"]
        await say(store, r.id, said[-2])
        await answer(store, r.id, said[-1])
    await say(store, r.id, "now?")
    asm = assembler(store)
    reads: list[str] = []
    for name in ("newest_first", "span"):  # pages read apart from the thread
        method = getattr(store, name)

        def spied(*args, _method=method, _name=name, **kwargs):
            reads.append(_name)
            return _method(*args, **kwargs)
        monkeypatch.setattr(store, name, spied)
    first = await asm.assemble(r.id)
    assert [m.content for m in first.window_messages] == [*said, "now?"]
    assert reads == ([] if page > 7 else ["newest_first"])
    await answer(store, r.id, "soon")
    for text in ("a", "b", "c"):
        await say(store, r.id, text)
    reads.clear()
    second = await asm.assemble(r.id)
    assert [m.content for m in second.window_messages] == [*said, "now?", "soon", "a", "b", "c"]
    assert reads == ([] if page > 4 else ["span"])


async def test_a_cold_turn_reads_its_own_memory_with_its_thread_and_a_warm_one_keeps_what_it_showed(store, monkeypatch):
    """Where the cache is cold the window shows memory as of the newest record: the conversation's own memory comes
    with its thread (no read apart), the same as read apart; a warm turn asks for none and shows what it showed."""
    r = await root(store)
    for n in range(3):
        await store.add_record("Stelis", "channel", 2, "short_term", f"Version {n}: Mahe said {n}.")
    await store.add_record("Stelis", "channel", 2, "long_term", "Mahe likes tea.")
    await say(store, r.id, "hello")
    now = [FIXED_NOW]
    asm = assembler(store)
    asm.clock = lambda: now[0]
    openings, apart = calls_of(store, "opening", monkeypatch), calls_of(store, "newest_records", monkeypatch)
    first = body(await asm.assemble(r.id))["system"][1]["text"]
    assert [c[3] for c in openings] == [asm.conversation.memory_versions] and apart == []
    read_apart = body(await assembler(store).assemble(r.id))["system"][1]["text"]
    assert first == read_apart and "Mahe likes tea." in first and "Version 2" in first
    await answer(store, r.id, "hi Mahe")
    await store.add_record("Stelis", "channel", 2, "short_term", "Version 3: Mahe moved to Kyoto.")
    await say(store, r.id, "where do I live?")
    openings.clear()
    warm = body(await asm.assemble(r.id))["system"][1]["text"]
    assert [c[3] for c in openings] == [0] and warm == first  # the cached prefix keeps the memory it showed
    now[0] += context.COLD_SECONDS + 1
    openings.clear()
    cold = body(await asm.assemble(r.id))["system"][1]["text"]
    assert [c[3] for c in openings] == [asm.conversation.memory_versions] and apart == [] and "Kyoto" in cold


async def test_more_conversations_than_are_kept_read_their_own_memory_with_their_thread(store, monkeypatch):
    """Hundreds of channels talking at once outgrow the layers kept here (WINDOWS_KEPT): a warm turn whose layers
    were let go reads its conversation's memory with its thread, not apart, and still shows what it showed; memory
    written since (the newest record moved) is read apart as of what the window showed."""
    monkeypatch.setattr(context, "WINDOWS_KEPT", 1)
    here, there = await root(store), await store.root_thread("Stelis", Scope.channel(1, 3), 0.8)
    await store.add_record("Stelis", "channel", 2, "short_term", "Version 0: Mahe likes tea.")
    await store.add_record("Stelis", "channel", 3, "short_term", "Version 0: Kai likes rain.")
    asm = assembler(store)
    apart = calls_of(store, "newest_records", monkeypatch)
    shown = {}
    for thread in (here, there):
        await say(store, thread.id, "hello")
        shown[thread.id] = body(await asm.assemble(thread.id))["system"][1]["text"]
        await answer(store, thread.id, "hi")
    await say(store, here.id, "and now?")  # warm, its layers let go for the other conversation's
    assert body(await asm.assemble(here.id))["system"][1]["text"] == shown[here.id] and apart == []
    await answer(store, here.id, "still here")
    await store.add_record("Stelis", "channel", 3, "short_term", "Version 1: Kai moved to Oslo.")
    await say(store, there.id, "and you?")
    again = body(await asm.assemble(there.id))["system"][1]["text"]
    assert again == shown[there.id] and "Oslo" not in again and len(apart) == 1  # as of what it showed


async def test_asked_about_today_recall_reads_the_days_messages_the_window_no_longer_shows(backend, monkeypatch):
    """A long day: its newest messages are in the window, its first ones were cut out of it. "What did we say
    today?" looks the day up past what the request shows (the window, after any gap a trim left), so the day's
    earlier messages come back rather than the newest it already carries."""
    now = [context_helpers.FIXED_NOW - 20_000]
    store = await open_store(backend, clock=lambda: now[0])
    r = await root(store)
    asm = assembler(store)
    for n in range(40):
        now[0] += 60
        await say(store, r.id, f"item {n}: the heron count at pond {n} was {n * 3} birds, noted for the survey "
                               "with the wind from the north, the water high and the reeds cut back along the path")
        await answer(store, r.id, f"noted item {n}")
        await asm.assemble(r.id)
    looked_up = calls_of(store, "recall_matches", monkeypatch)
    now[0] += 60
    await say(store, r.id, "what did we say today?")
    assembly = await asm.assemble(r.id)
    window = {m.seq for m in assembly.window_messages}
    thread = await store.thread(r.id)
    assert thread.window_gap_to or thread.window_start_seq  # trimmed or cut: some of the day is out of the window
    recent = [m.seq for m in assembly.window_messages if m.seq >= (thread.window_gap_to or 0)]
    assert [call[9] for call in looked_up] == [(r.id, recent[0])]
    days = [h for h in assembly.recalled if h.kind == "message"]
    assert days and all(h.key not in window and h.key < recent[0] for h in days)
    await store.close()


async def test_a_conversation_that_shows_more_versions_reads_them_apart_once_then_with_its_thread(store, monkeypatch):
    """A channel's own setting may show more versions than the default the first opening asks for: they are read
    apart then, in full, and the next cold turn asks for as many as it showed."""
    r = await root(store)
    for n in range(8):
        await store.add_record("Stelis", "channel", 2, "short_term", f"Version {n}.")
    await say(store, r.id, "hello")
    now = [FIXED_NOW]
    asm = assembler(store)
    asm.clock = lambda: now[0]
    seven = context.PromptSettings(asm.conversation.persona, 7, asm.conversation.shared_channels)
    assert asm.conversation.memory_versions != 7

    async def settings(root_thread):
        return seven
    asm.conversation_for = settings
    apart = calls_of(store, "newest_records", monkeypatch)
    first = body(await asm.assemble(r.id))["system"][1]["text"]
    assert len(apart) == 1 and "Version 1." in first and "Version 0." not in first  # the newest seven
    now[0] += context.COLD_SECONDS + 1
    again = body(await asm.assemble(r.id))["system"][1]["text"]
    assert len(apart) == 1 and again == first


@pytest.mark.parametrize("erased", ["in the kept window", "the kept window's last"])
async def test_a_message_erased_after_its_window_was_kept_is_in_no_later_request(store, erased):
    """The opening reads what came since the window kept here; an erasure in between (a forget-me, a delete) moves
    the thread's revision, so the kept window and what was read after it are set aside and the window read anew."""
    r = await root(store)
    await store.append(r.id, NewMessage("user", "hello", author_id=1, author_name="ana"))
    await answer(store, r.id, "hi ana")
    await store.append(r.id, NewMessage("user", "my number is 555-0199", author_id=7, author_name="ben",
                                        external_id=901))
    await answer(store, r.id, "noted")
    if erased == "the kept window's last":
        await store.append(r.id, NewMessage("user", "my pin is 4321", author_id=7, author_name="ben",
                                            external_id=902))
    asm = assembler(store)
    first = await asm.assemble(r.id)
    assert "555-0199" in all_text(first)
    await store.purge(author_id=7, thread_ids=[r.id])  # ben is forgotten
    await say(store, r.id, "what did ben say?", name="ana")
    later = await asm.assemble(r.id)
    shown = [m.content for m in later.window_messages]
    assert "555-0199" not in all_text(later) and "4321" not in all_text(later)
    assert shown[-1] == "what did ben say?" and "hello" in shown


async def test_a_trims_bridge_reads_all_of_a_run_longer_than_a_first_cut_reads_and_says_where_its_words_begin(store):
    """A short-term version reads the bridge in place of the gap's messages (memory/short_term.py): the bridge holds
    every message of each run, however long (in parts past one request), and records the first message whose words
    it may hold."""
    r = await root(store)
    llm = Recording()
    asm = assembler(store, context_tokens=64_000, locked_turns=2, llm=llm)
    asm.policy = asm.policy.model_copy(update={"trims": 8})
    longest = 0
    for n in range(160):
        await say(store, r.id, f"m{n} " + "word " * 300)
        asked = len(llm.requests)
        before = await store.thread(r.id)
        thread = (await asm.assemble(r.id)).thread
        if thread.window_gap_to is not None and thread.window_gap_to != before.window_gap_to:  # a trim
            read = str([request.turns for request in llm.requests[asked:]])
            run = [m async for m in store.span(r.id, before.window_gap_to or thread.window_gap_from,
                                               thread.window_gap_to) if m.role == "user"]
            assert run and all(f"{m.content.split()[0]} " in read for m in run)
            assert thread.window_bridge_from == thread.window_gap_from
            longest = max(longest, sum(m.token_count for m in run))
        await answer(store, r.id, f"r{n} " + "answer " * 300)
    assert longest > context.LEAVING_READ_TOKENS  # what a first cut reads, and a bridge read before


async def test_a_trim_prepared_ahead_gives_way_to_a_longer_head_planned_at_the_overflow(store):
    """A trim summarised ahead planned its head on the window as it was then; where a long tool output was among
    the locked turns, that head was shorter than the overflow's own plan, and every trim until the next cut keeps
    it. The window keeps the head it would have kept had nothing been prepared."""
    async def turn(thread_id: int, n: int) -> None:
        if n % 9 == 4:
            await say(store, thread_id, f"m{n} run it")
            await tool_burst(store, thread_id, calls=1, lines=25, tag=f"t{n}", width=40)  # long, but not reduced
        await say(store, thread_id, f"m{n} " + "word " * 60)

    def head(a) -> int:
        return sum(m.seq < a.thread.window_gap_from for m in a.window_messages)

    ahead, inline = await root(store), await store.root_thread("Stelis", Scope.channel(1, 3), 0.8)
    asm = assembler(store, context_tokens=8_000, locked_turns=2, llm=Recording())
    prepared = trims = 0
    for n in range(30):
        for thread_id in (ahead.id, inline.id):
            await turn(thread_id, n)
        a, b = await asm.assemble(ahead.id), await asm.assemble(inline.id)
        if a.thread.window_gap_to is not None:
            trims += 1
            assert head(a) == head(b)
            break
        await answer(store, ahead.id, f"r{n} " + "answer " * 60)
        await answer(store, inline.id, f"r{n} " + "answer " * 60)
        if a.fold_soon:
            prepared += await asm.prepare_fold(ahead.id)
    assert trims and prepared, "no trim was prepared ahead: the test proves nothing"


async def test_a_cut_prepared_ahead_gives_way_to_a_trim_that_pays_at_the_overflow(store):
    """A cut summarised ahead was weighed against the trim on the window as it was some turns before: where a long
    tool output was among the locked turns then, the trim sent so much again that the cut looked cheaper. At the
    overflow the trim that pays now is taken, as an assembler with nothing prepared takes it."""
    r = await root(store)
    asm = assembler(store, context_tokens=16_000, locked_turns=3, llm=Sized(40))
    asm.policy = asm.policy.model_copy(update={"trims": 8})
    weighed = gave_way = 0
    for n in range(200):
        if n % 7 == 3:
            await say(store, r.id, f"m{n} run it")
            await tool_burst(store, r.id, calls=1, lines=25, tag=f"t{n}", width=60)
        await say(store, r.id, f"m{n} " + "word " * 60)
        prepared = asm._prepared.get(r.id)
        if prepared is not None and not prepared.cut[0]:  # a cut was summarised ahead
            del asm._prepared[r.id]  # what the overflow does with nothing prepared, previewed
            plain = await asm.assemble(r.id, persist=False, calls=False)
            asm._prepared[r.id] = prepared
            a = await asm.assemble(r.id)
            if a.cut:
                weighed += 1
                trimmed = a.thread.window_gap_to is not None
                assert trimmed == (plain.thread.window_gap_to is not None), n
                gave_way += trimmed
        else:
            a = await asm.assemble(r.id)
        await answer(store, r.id, f"r{n} " + "answer " * 60)
        if a.fold_soon:
            await asm.prepare_fold(r.id)
    assert gave_way, f"no cut prepared ahead met a trim that pays ({weighed} weighed): the test proves nothing"


@pytest.mark.parametrize("room", [2, 12])
async def test_a_cut_summarised_ahead_is_one_the_overflow_uses_and_none_is_paid_for_nothing(store, room):
    """What a reply reports as soon to fold is summarised in the background (prepare_fold) only where the cut it
    plans will still be the one taken when the window overflows: a window whose cut leaves room for a turn or two
    cuts afresh then, and a summary written ahead would be thrown away. A roomier one is summarised ahead."""
    r = await root(store)
    llm = Recording()
    asm = assembler(store, context_tokens=8_000, locked_turns=2, llm=llm)
    asm.policy = asm.policy.model_copy(update={"trims": 0, "cut_room_turns": room, "turns_per_cut": 2 * room})
    asm.stelis = asm.stelis.model_copy(update={"chunk_tokens": 24_000})  # one request a summary
    prepared = folds = 0
    for n in range(120):
        await say(store, r.id, f"m{n} " + "word " * 120)
        before = (await store.thread(r.id)).window_start_seq
        assembly = await asm.assemble(r.id)
        folds += assembly.thread.window_start_seq != before
        if folds == 4:  # stop at a cut: nothing summarised ahead is still waiting for its overflow
            break
        await answer(store, r.id, f"r{n} " + "answer " * 120)
        if assembly.fold_soon:
            prepared += await asm.prepare_fold(r.id)
    summaries = sum(request.purpose == "summary" for request in llm.requests)
    assert folds == 4, "the window never cut: the test proves nothing"
    assert summaries == folds  # each cut's summary written once, ahead or at the cut
    assert (prepared > 0) == (room > 2)


def test_a_tool_definition_weighs_what_its_json_counts_and_a_changed_one_is_counted_anew():
    """Counted once per definition (each request asks twice): the same weight as its JSON's tokens, and a definition
    built again with another description weighs what it now says."""
    import json

    from memory.context import tool_tokens
    from memory.llm import Tool
    from memory.tokens import count_tokens

    schema = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}
    short = Tool("recall", "Look something up.", schema)
    written = count_tokens(json.dumps({"name": "recall", "description": "Look something up.", "input_schema": schema},
                                      sort_keys=True))
    assert tool_tokens((short,)) == tool_tokens((short,)) == written
    longer = Tool("recall", "Look something up in everything this conversation may see, by words or by day.", schema)
    assert tool_tokens((longer,)) > written and tool_tokens((short, longer)) == written + tool_tokens((longer,))


async def test_what_a_trim_bridged_never_comes_back_into_the_window(store):
    """A cut of a trimmed window restarts after its gap, even where the newest memory it brings in leaves the window
    less room and only its newest part is read: a cut inside the head had put the bridged run back into the window,
    to be cut again on the next turn."""
    r = await root(store)
    asm = assembler(store, context_tokens=8_000, locked_turns=2, llm=Recording())
    asm.policy = asm.policy.model_copy(update={"trims": 3})
    bridged: set[int] = set()
    trims = cuts_after_trims = 0
    covered = 0
    for n in range(200):
        await say(store, r.id, f"m{n} " + "word " * 40)
        before = await store.thread(r.id)
        assembly = await asm.assemble(r.id)
        thread = assembly.thread
        assert not bridged & {m.seq for m in assembly.window_messages}, n
        if thread.window_gap_to is not None and thread.window_gap_to != before.window_gap_to:
            trims += 1
            bridged |= {m.seq async for m in store.span(r.id, thread.window_gap_from, thread.window_gap_to - 1)}
        elif assembly.cut and before.window_gap_to is not None:
            cuts_after_trims += 1
            assert thread.window_start_seq >= before.window_gap_to
        await answer(store, r.id, f"r{n} " + "answer " * 40)
        if n % 7 == 6:  # the memory work writes a version now and then, each longer than the last
            newest = (await store.tail(r.id, 1))[0].seq
            await store.add_record("Stelis", "channel", 2, "short_term", f"memory note {n} " + "detail " * (4 * n),
                                   covered + 1, newest)
            covered = newest
    assert trims >= 3 and cuts_after_trims >= 1, (trims, cuts_after_trims)


class Sized(OfflineLLM):
    """A model whose summaries are `words` words long (None: as long as their room allows)."""

    def __init__(self, words: int | None) -> None:
        super().__init__()
        self.words = words

    async def complete(self, request, on_text=None):
        if request.purpose != "summary":
            return await super().complete(request, on_text)
        words = min(self.words or request.max_tokens, request.max_tokens)
        text = " ".join(f"point{i}" for i in range(words // 2))
        return LLMResult(text=text, usage=Usage(100, cached_tokens(text)), model="sized", stop_reason="end_turn")



async def test_a_trim_is_priced_at_the_bridge_this_model_writes_not_at_all_the_room_it_may(store, monkeypatch):
    """Where summaries come well within their room, a trim (which sends its bridge again) is weighed against the cut
    at what they come to; a model that fills its room is weighed at the room, as before."""
    priced: list[int] = []
    real = context.trim_pays

    def spy(items, budget, summary_tokens, written, trim, cut):
        priced.append(written)
        return real(items, budget, summary_tokens, written, trim, cut)

    monkeypatch.setattr(context, "trim_pays", spy)
    weighed: dict[int | None, list[int]] = {}
    written_most = 0
    for channel, words in ((100, 30), (101, None)):
        thread = await store.root_thread("Stelis", Scope.channel(1, channel), 0.8)
        asm = assembler(store, context_tokens=8_000, locked_turns=3, llm=Sized(words))
        asm.policy = asm.policy.model_copy(update={"trims": 8})
        priced.clear()
        for n in range(120):
            await say(store, thread.id, f"m{n} " + "word " * 60)
            a = await asm.assemble(thread.id)
            if words:
                written_most = max([written_most] + [cached_tokens(t) for t in (a.thread.window_summary,
                                                                                  a.thread.window_bridge) if t])
            await answer(store, thread.id, f"r{n} " + "answer " * 60)
        weighed[words] = list(priced)
    # the first trim, before any summary or bridge, is weighed at the room; the terse model's later ones at theirs
    terse, verbose = weighed[30], weighed[None]
    assert len(terse) >= 3 and len(verbose) >= 3, (terse, verbose)
    assert terse[0] == max(verbose) and all(written <= written_most for written in terse[1:])
    assert 3 * written_most < min(verbose)
