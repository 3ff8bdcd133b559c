import asyncio

import pytest

from bot.providers.offline import OfflineLLM
from memory import threads
from memory.anchors import is_anchor, render_anchor, sees_brief
from memory.llm import LLMError, LLMResult
from memory.records import NewMessage, Scope
from memory.settings import StelisSettings
from memory.threads import Run, StelisError
from memory.transcript import message_text

SETTINGS = StelisSettings(max_depth=3, chunk_tokens=600, chronicle_tokens=200)


class Recording:
    """An LLM that records requests and answers each summary with a numbered part."""

    name = "recording"

    def __init__(self, fail: bool = False):
        self.requests = []
        self.fail = fail

    async def complete(self, request, on_text=None):
        self.requests.append(request)
        if self.fail:
            raise LLMError("The model is overloaded (529) after 3 retries; try again in a minute.")
        return LLMResult(text=f"summary #{len(self.requests)}")

    async def aclose(self):
        return None


async def tree(store):
    """root -> stelis_1 -> stelis_1_1, root -> stelis_2 (the seed's example)."""
    root = await store.root_thread("P", Scope.console(), 0.8)
    run = Run(root.id)
    s1 = await threads.start(store, run, "Autonomy", SETTINGS)
    s11 = await threads.start(store, run, "ClaudeCode", SETTINGS)
    other = Run(root.id)
    s2 = await threads.start(store, other, "Other task", SETTINGS)
    return root, s1, s11, s2, run


async def anchor_of(store, thread):
    return await store.message_by_seq(thread.anchor_seq)


async def lineage_ids(store, thread):
    return {t.id for t in await threads.lineage(store, thread)}


async def test_the_seeds_ancestor_table(store):
    root, s1, s11, s2, _ = await tree(store)
    rows = [  # (viewer, anchored, brief?)
        (s1, s1, True),
        (s11, s1, True),
        (s11, s11, True),
        (root, s1, False),
        (s2, s1, False),
    ]
    for viewer, anchored, brief in rows:
        rendered = render_anchor(await anchor_of(store, anchored), await lineage_ids(store, viewer))
        assert sees_brief(await lineage_ids(store, viewer), anchored.id) is brief
        if brief:
            assert rendered == f"[Stelis thread {anchored.label} (stelis:{anchored.id}) started]"
        else:
            assert rendered.startswith(f"[Stelis thread: {anchored.label}]\n- ID: stelis:{anchored.id}\n- Started: ")
            assert "- Ended: in progress" in rendered


async def test_start_inserts_the_seed_anchor_into_the_parent(store):
    root, s1, s11, _, _ = await tree(store)
    anchor = await anchor_of(store, s1)
    assert anchor.thread_id == root.id and anchor.role == "system" and anchor.content == ""
    assert anchor.metadata["type"] == "stelis_anchor"
    assert anchor.metadata["stelis_thread_id"] == s1.id and anchor.metadata["stelis_label"] == "Autonomy"
    assert isinstance(anchor.metadata["created_at"], float)
    assert (await anchor_of(store, s11)).thread_id == s1.id
    assert (root.depth, s1.depth, s11.depth) == (0, 1, 2)
    assert s1.window_ratio == 0.8 and s1.kind == "stelis" and s1.status == "active"


async def test_depth_limit_is_refused_with_a_clear_error(store):
    root = await store.root_thread("P", Scope.console(), 0.8)
    run = Run(root.id)
    for label in ("one", "two", "three"):
        await threads.start(store, run, label, SETTINGS)
    with pytest.raises(StelisError, match=r"at depth 3: the maximum depth is 3 \(stelis.max_depth\)"):
        await threads.start(store, run, "four", SETTINGS)
    assert len(run.stack) == 3
    with pytest.raises(StelisError, match="needs a label"):
        await threads.start(store, Run(root.id), "  ", SETTINGS)
    with pytest.raises(StelisError, match="window_ratio must be between 0 and 1"):
        await threads.start(store, Run(root.id), "x", SETTINGS, window_ratio=1.5)


async def test_nested_starts_are_stack_safe(store):
    root = await store.root_thread("P", Scope.console(), 0.8)
    run = Run(root.id)
    outer = await threads.start(store, run, "outer", SETTINGS)
    inner = await threads.start(store, run, "inner", SETTINGS)
    assert run.current == inner.id
    ended = await threads.end(store, OfflineLLM(), run, SETTINGS)
    assert ended.id == inner.id and run.current == outer.id  # back to the outer, not the root
    await threads.end(store, OfflineLLM(), run, SETTINGS)
    assert run.current == root.id
    with pytest.raises(StelisError, match="no Stelis thread is active"):
        await threads.end(store, OfflineLLM(), run, SETTINGS)


async def test_anchor_full_form_before_and_after_completion(store):
    root, s1, s11, _, run = await tree(store)
    await store.append(s11.id, NewMessage("user", "build calculator_v2", author_name="mahe"))
    await store.append(s11.id, NewMessage("assistant", "done: calculator_v2 ready"))
    before = render_anchor(await anchor_of(store, s11), {root.id})
    llm = Recording()
    ended = await threads.end(store, llm, run, SETTINGS)
    after = render_anchor(await anchor_of(store, s11), {root.id})
    assert before != after
    assert ended.status == "completed" and ended.chronicle_summary == "summary #1"
    assert "- Ended: " in after and "in progress" not in after and "- Messages: 2" in after
    assert "## Chronicle\nsummary #1" in after
    assert "[user]: build calculator_v2" in after and "[assistant]: done: calculator_v2 ready" in after
    # fixed forever: later activity cannot change it
    await store.append(s1.id, NewMessage("user", "more work in the parent"))
    assert render_anchor(await anchor_of(store, s11), {root.id}) == after
    # the chronicle request is neutral: a summary, not an in-character turn
    request = llm.requests[0]
    assert request.purpose == "summary" and "not a participant" in request.system[0].text
    assert "<transcript>" in request.turns[0].blocks[0].text


async def test_anchor_after_abort_is_marked_and_keeps_a_partial_chronicle(store):
    root = await store.root_thread("P", Scope.console(), 0.8)
    run = Run(root.id)
    child = await threads.start(store, run, "risky", SETTINGS, chronicle_prompt="What broke?")
    await store.append(child.id, NewMessage("user", "try deploy ISSUE-7"))
    aborted = await threads.abort(store, Recording(), run, SETTINGS)
    rendered = render_anchor(await anchor_of(store, child), {root.id})
    assert aborted.status == "aborted" and run.current == root.id
    assert "(aborted)" in rendered and "(partial" in rendered


async def test_a_failed_chronicle_ends_the_thread_aborted_and_says_why(store):
    root = await store.root_thread("P", Scope.console(), 0.8)
    run = Run(root.id)
    child = await threads.start(store, run, "doomed", SETTINGS)
    await store.append(child.id, NewMessage("user", "hello"))
    with pytest.raises(LLMError, match="overloaded"):
        await threads.end(store, Recording(fail=True), run, SETTINGS)
    assert (await store.thread(child.id)).status == "aborted"
    assert run.current == root.id
    assert "(aborted)" in render_anchor(await anchor_of(store, child), {root.id})


async def test_a_long_thread_is_chronicled_in_chunks_and_combined(store):
    root = await store.root_thread("P", Scope.console(), 0.8)
    run = Run(root.id)
    child = await threads.start(store, run, "long", SETTINGS, chronicle_prompt="Summarise the build.")
    for i in range(60):
        await store.append(child.id, NewMessage("user", f"step {i}: " + "detail words " * 10, author_name="m"))
    llm = Recording()
    ended = await threads.end(store, llm, run, SETTINGS)
    parts = [r for r in llm.requests if "This is part" in r.turns[0].blocks[0].text]
    assert len(parts) >= 3
    transcript = "".join(r.turns[0].blocks[0].text for r in parts)
    for i in range(60):  # every message reached the model: nothing truncated
        assert f"step {i}:" in transcript
    combine = llm.requests[-1].turns[0].blocks[0].text
    assert "Combine them" in combine and "[part 1 of 4]\nsummary #1\n[part 2 of 4]" in combine
    assert ended.chronicle_summary == f"summary #{len(llm.requests)}"
    assert all("Summarise the build." in r.turns[0].blocks[0].text for r in parts)


async def test_ending_a_thread_aborts_its_active_descendants(store):
    root = await store.root_thread("P", Scope.console(), 0.8)
    run = Run(root.id)
    outer = await threads.start(store, run, "outer", SETTINGS)
    inner = await threads.start(store, Run(outer.id), "inner (another run)", SETTINGS)
    await threads.end(store, OfflineLLM(), run, SETTINGS)
    assert (await store.thread(outer.id)).status == "completed"
    assert (await store.thread(inner.id)).status == "aborted"


async def test_startup_sweep_aborts_orphans_but_keeps_discord_threads(store):
    root = await store.root_thread("P", Scope.console(), 0.8)
    gone = Run(root.id)
    orphan = await threads.start(store, gone, "left behind", SETTINGS)
    await store.append(orphan.id, NewMessage("user", "half done"))
    discord = await threads.start(store, Run(root.id), "discord thread", SETTINGS, discord_thread_id=999)
    alive = Run(root.id)
    running = await threads.start(store, alive, "still running", SETTINGS)
    swept = await threads.sweep(store, OfflineLLM(), SETTINGS, live_runs={alive.id})
    assert [t.id for t in swept] == [orphan.id]
    assert (await store.thread(orphan.id)).status == "aborted"
    assert (await store.thread(discord.id)).status == "active"
    assert (await store.thread(running.id)).status == "active"
    assert "(aborted)" in render_anchor(await anchor_of(store, orphan), {root.id})


async def test_transcript_rendering_of_anchors_depends_on_the_viewer(store):
    _root, s1, s11, _, _ = await tree(store)
    anchor = await anchor_of(store, s11)
    assert is_anchor(anchor)
    assert message_text(anchor, await lineage_ids(store, s11)).endswith("started]")
    assert message_text(anchor, await lineage_ids(store, s1)).startswith("[Stelis thread: ClaudeCode]")


class Slow:
    name = "slow"

    async def complete(self, request, on_text=None):
        await asyncio.sleep(3600)

    async def aclose(self):
        return None


async def test_cancelling_an_end_leaves_the_thread_aborted(store):
    root = await store.root_thread("P", Scope.console(), 0.8)
    run = Run(root.id)
    child = await threads.start(store, run, "interrupted", SETTINGS)
    await store.append(child.id, NewMessage("user", "work"))
    task = asyncio.create_task(threads.end(store, Slow(), run, SETTINGS))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (await store.thread(child.id)).status == "aborted"
    assert run.current == root.id


async def _session_with_work(store, label="trip plan"):
    root = await store.root_thread("P", Scope.channel(1, 2), 0.8)
    await store.append(root.id, NewMessage("user", "let's plan the trip", author_name="mahe"))
    run = Run(root.id)
    child = await threads.start(store, run, label, SETTINGS)
    await store.append(child.id, NewMessage("user", "book the Kyoto hotel for May 3", author_name="mahe"))
    return root, run, child


def _completions(messages):
    return [m for m in messages if m.metadata.get("type") == "stelis_completion"]


async def test_a_thread_ending_in_view_of_its_anchor_adds_nothing_to_the_parent(store):
    root, run, _ = await _session_with_work(store)
    await threads.end(store, Recording(), run, SETTINGS)
    assert _completions(await store.tail(root.id, 10)) == []


async def test_a_thread_whose_anchor_left_the_parents_window_announces_its_chronicle(store):
    root, run, child = await _session_with_work(store)
    for i in range(3):
        await store.append(root.id, NewMessage("user", f"meanwhile {i}", author_name="kai"))
    last = (await store.tail(root.id, 1))[-1]
    await store.set_window(root.id, window_start_seq=last.seq, window_summary="they planned a trip")  # a cut
    ended = await threads.end(store, Recording(), run, SETTINGS)
    [note] = _completions(await store.tail(root.id, 10))
    assert note.role == "system" and note.metadata["stelis_thread_id"] == child.id
    assert ended.chronicle_summary in note.content and "has ended" in note.content
    assert note.seq > last.seq  # in the window, after what it shows


async def test_a_thread_a_memory_version_saw_in_progress_announces_its_end(store):
    from memory.settings import Triggers

    root, run, _ = await _session_with_work(store)
    channel = await store.ensure_memory_channel(root)
    await store.append_counted(root, NewMessage("user", "ok", author_name="mahe"), Triggers(7_200, 50))
    covered = (await store.tail(root.id, 1))[-1].seq
    await store.save_short_term(channel, "they planned a trip; a thread is in progress", 1, covered, 1,
                                store.clock(), Triggers(7_200, 50), {}, live=0)
    await threads.end(store, Recording(), run, SETTINGS)
    [note] = _completions(await store.tail(root.id, 10))
    assert note.seq > covered  # after the version: the next one summarises it
    messages = [m async for m in store.span(root.id, covered + 1, None)]
    assert note in messages


async def test_the_tree_claims_no_protected_parent_region_for_a_subagent_thread(make_config):
    """A subagent's thread sees its own history alone (DESIGN.md section 8): /threads tree says so."""
    from bot.engine import Engine
    from bot.providers.offline import OfflineLLM
    from memory import threads as stelis_threads
    from memory.records import Scope
    from memory.settings import StelisSettings

    engine = await Engine.open(make_config(snapshots={"interval_seconds": 0}), OfflineLLM())
    scope = Scope.channel(1, 2)
    root = await engine.stelis.root(scope)
    run = await engine.stelis.new_run(scope)
    working = await stelis_threads.start(engine.store, run, "Research", StelisSettings())
    helper = await stelis_threads.start(engine.store, run, "a subagent's task", StelisSettings(), kind="subagent")
    rows = {row.thread.id: row for row in await engine.stelis.tree(root.id)}
    assert rows[working.id].protected > 0  # a Stelis thread sees its parent's recent part
    assert rows[helper.id].protected == 0 and rows[helper.id].window > 0
    await engine.close()
