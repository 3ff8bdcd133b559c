"""The playbook runtime end to end: every node type, profiles, tool loops, subagents, unwinding, depth."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from bot.config import AnthropicConfig, ModelTiers
from bot.engine import Engine, PlaybookError
from bot.playbooks.profiles import NEUTRAL_SYSTEM
from bot.providers.anthropic_llm import AnthropicLLM
from bot.providers.offline import OfflineLLM, example
from memory.llm import LLMRequest, LLMResult, TextSink
from memory.records import Scope
from tests.fake_anthropic import flatten

HERE = Scope.channel(1, 10)


class Recording(OfflineLLM):
    """The offline model, keeping every request it was sent."""

    def __init__(self) -> None:
        self.requests: list[LLMRequest] = []

    async def complete(self, request: LLMRequest, on_text: TextSink | None = None) -> LLMResult:
        self.requests.append(request)
        return await super().complete(request, on_text)


def write(folder: Path, raw: dict) -> None:
    folder.mkdir(exist_ok=True)
    (folder / f"{raw['name']}.json").write_text(json.dumps(raw))


@pytest.fixture
async def world(make_config, tmp_path):
    """An engine on the recording offline model, with the operator folder `tmp_path/playbooks`."""
    folder = tmp_path / "playbooks"
    folder.mkdir()
    llm = Recording()
    engines: list[Engine] = []

    async def start(*raws: dict, **sections) -> Engine:
        for raw in raws:
            write(folder, raw)
        engine = await Engine.open(make_config(playbooks={"folder": str(folder)}, snapshots={"interval_seconds": 0},
                                               **sections), llm)
        engines.append(engine)
        return engine

    yield start, llm
    for engine in engines:
        await engine.close()


EVERY_NODE = {
    "name": "every_node", "description": "one of each node type",
    "input_schema": {"type": "object", "properties": {"topic": {"type": "string"}}, "required": ["topic"]},
    "output_schema": {"type": "object", "properties": {"verdict": {}, "when": {}, "said": {}}},
    "start_node": "open",
    "nodes": [
        {"id": "open", "type": "stelis_start", "label": "checking {topic}", "next": "clock"},
        {"id": "clock", "type": "tool", "tool": "now", "output_key": "when", "next": "judge"},
        {"id": "judge", "type": "llm", "context_profile": "worker_light", "action": "Is {topic} settled?",
         "response_schema": {"type": "object", "properties": {"settled": {"type": "boolean"},
                                                              "why": {"type": "string"}},
                             "required": ["settled", "why"]},
         "output_key": "verdict", "next": "route"},
        {"id": "route", "type": "route", "conditional_next": {
            "field": "verdict.settled", "operator": "truthy", "cases": {"true": "note", "false": "close"}}},
        {"id": "note", "type": "set", "values": {"said": "{verdict.why}", "count": 2}, "next": "inner"},
        {"id": "inner", "type": "subplay", "playbook": "echo", "args": {"word": "{topic}"}, "output_key": "echoed",
         "next": "close"},
        {"id": "close", "type": "stelis_end", "generate_chronicle": True},
    ],
}
ECHO = {
    "name": "echo", "description": "returns its word",
    "input_schema": {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]},
    "output_schema": {"type": "object", "properties": {"word": {}}},
    "start_node": "keep", "nodes": [{"id": "keep", "type": "set", "values": {"word": "{word}"}}],
}


async def test_every_node_type_runs_and_every_step_is_logged(world):
    start, _ = world
    engine = await start(EVERY_NODE, ECHO)
    assert engine.playbooks.problems == []
    progress: list[str] = []
    done = await engine.playbooks.run(HERE, "every_node", {"topic": "the release"}, progress=progress.append)
    assert done.outputs["verdict"]["settled"] is True and isinstance(done.outputs["verdict"]["why"], str)
    assert done.outputs["said"] == done.outputs["verdict"]["why"]  # a whole-value {var} keeps its type
    assert "UTC" in done.outputs["when"]
    assert set(done.outputs) == {"verdict", "when", "said", "last"}  # only output_schema keys come back
    assert progress == [f"every_node: {n} ({t})" for n, t in [
        ("open", "stelis_start"), ("clock", "tool"), ("judge", "llm"), ("route", "route"), ("note", "set"),
        ("inner", "subplay")]] + ["echo: keep (set)", "every_node: close (stelis_end)"]
    root = await engine.stelis.root(HERE)
    tree = await engine.stelis.tree(root.id)
    child = tree[1].thread
    assert child.label == "checking the release" and child.status == "completed"
    assert done.thread_id == root.id  # back where it started
    runs = await engine.playbooks.runs(HERE)
    assert [r.run.playbook for r in runs] == ["echo", "every_node"]  # newest first: the inline callee ran too
    outer = runs[1]
    assert outer.run.status == "completed" and outer.run.args == {"topic": "the release"}
    assert [s.node for s in outer.steps] == ["open", "clock", "judge", "route", "note", "inner", "close"]
    judge = outer.steps[2]
    assert (judge.profile, judge.tier) == ("worker_light", "light") and judge.output_tokens > 0


async def test_profiles_shape_the_request(world):
    start, llm = world
    shapes = {
        "name": "shapes", "description": "one llm node per profile", "start_node": "router",
        "nodes": [
            {"id": "router", "type": "llm", "context_profile": "router", "action": "Route this.", "next": "worker"},
            {"id": "worker", "type": "llm", "context_profile": "worker", "action": "Work on it.", "next": "talk"},
            {"id": "talk", "type": "llm", "context_profile": "conversation", "action": "Say it."},
        ],
    }
    engine = await start(shapes)
    for i in range(4):
        await engine.conversations.hear(HERE, f"message {i} about the deploy", author_name="mahe")
    await engine.playbooks.run(HERE, "shapes", {})
    router, worker, talk = llm.requests[-3:]
    assert router.tier == "light" and "You are Stelis" in router.system[0].text and len(router.turns) == 1
    assert "message 3 about the deploy" in router.turns[0].blocks[0].text
    assert router.turns[0].blocks[0].text.endswith("Route this.")
    assert worker.tier == "standard" and worker.system[0].text == NEUTRAL_SYSTEM and len(worker.turns) == 1
    assert "about the deploy" not in worker.turns[0].blocks[0].text  # no history, the state only
    reply = (await engine.conversations.context((await engine.stelis.root(HERE)).id)).request
    assert talk.system == reply.system and talk.turns[:-1] == reply.turns[:-1]  # the reply's request ...
    assert talk.turns[-1].blocks[-1].text == "Say it."  # ... and the instruction after it


async def test_a_conversation_node_reads_the_normal_replys_cached_prefix(make_config, fake_anthropic, tmp_path):
    fake_anthropic.min_cacheable_tokens = 50
    llm = AnthropicLLM(AnthropicConfig(api_key="k", base_url=fake_anthropic.base_url, max_retries=0), ModelTiers())
    ask = {"name": "ask", "description": "one question in the conversation", "start_node": "q", "nodes": [
        {"id": "q", "type": "llm", "context_profile": "conversation", "action": "Is anything still open?"}]}
    write(tmp_path / "pb", ask)
    engine = await Engine.open(make_config(snapshots={"interval_seconds": 0},
                                           playbooks={"folder": str(tmp_path / "pb")}), llm)
    for i in range(8):
        await engine.conversations.hear(HERE, f"message {i}: the calculator_v2 release has many moving parts",
                                        author_name="mahe")
    thread = (await engine.stelis.root(HERE)).id
    await engine.conversations.reply(thread)
    await engine.conversations.hear(HERE, "and now?", author_name="mahe")
    await engine.conversations.reply(thread)
    reply = fake_anthropic.calls[-1]
    await engine.playbooks.run(HERE, "ask", {})
    asked = fake_anthropic.calls[-1]
    breakpoint_ = max(i for i, (_, _, ttl) in enumerate(flatten(reply.body)) if ttl)
    assert [c for c, _, _ in flatten(asked.body)[:breakpoint_ + 1]] == \
        [c for c, _, _ in flatten(reply.body)[:breakpoint_ + 1]]  # byte for byte up to the reply's last breakpoint
    assert asked.usage["cache_read_input_tokens"] >= reply.usage["cache_read_input_tokens"] + \
        reply.usage["cache_creation_input_tokens"] - 40  # all the reply cached, bar its volatile tail
    done = await engine.playbooks.run(HERE, "research", {"topic": "calculator_v2"})
    assert done.outputs["findings"]
    assert all(c.status == 200 for c in fake_anthropic.calls)  # every request valid, tools and all
    await engine.close()


async def test_tool_calls_stay_paired_with_their_results_across_window_cuts(make_config, fake_anthropic):
    made = iter(range(1, 1_000))

    def answer(body):
        last = body["messages"][-1]["content"]
        if body.get("tools") and not any(b.get("type") == "tool_result" for b in last):
            return [{"type": "text", "text": "Let me look."},
                    {"type": "tool_use", "id": f"toolu_{next(made)}", "name": "recall", "input": {"query": "release"}}]
        return "fake answer " + "word " * 40

    fake_anthropic.responder = answer
    llm = AnthropicLLM(AnthropicConfig(api_key="k", base_url=fake_anthropic.base_url, max_retries=0), ModelTiers())
    looker = {"name": "looker", "description": "asks with recall", "start_node": "ask", "nodes": [
        {"id": "ask", "type": "llm", "context_profile": "conversation", "action": "What about the release?",
         "tools": ["recall"], "max_tool_rounds": 2, "memorize": True}]}
    folder = make_config().data_dir.parent / "pb"
    write(folder, looker)
    engine = await Engine.open(make_config(llm={"context_tokens": 4_096}, playbooks={"folder": str(folder)},
                                           snapshots={"interval_seconds": 0}), llm)
    thread = (await engine.stelis.root(HERE)).id
    for i in range(30):  # the window is cut several times around the stored tool pairs
        await engine.conversations.hear(HERE, f"turn {i}: the release " + "detail " * 30, author_name="mahe")
        if i % 5 == 4:
            await engine.playbooks.run(HERE, "looker", {})
        else:
            await engine.conversations.reply(thread)
    assert all(c.status == 200 for c in fake_anthropic.calls), [c.body for c in fake_anthropic.calls
                                                                 if c.status != 200][:1]
    assert sum(1 for c in fake_anthropic.calls if c.body.get("tools")) >= 12  # each run called, then answered
    for call in fake_anthropic.calls:  # the ancestor's mistake: a run's own messages twice in one prompt
        ids = [b["id"] for m in call.body["messages"] for b in m["content"] if b.get("type") == "tool_use"]
        texts = [b.get("text") for m in call.body["messages"] for b in m["content"] if b.get("type") == "text"]
        assert len(ids) == len(set(ids)) and texts.count("Let me look.") == len(ids)
    assert (await engine.conversations.context(thread)).parts["summary"] > 0  # the window was cut
    await engine.close()


async def test_a_subagent_runs_in_its_own_thread_and_leaves_the_parent_untouched(world):
    start, llm = world
    caller = {
        "name": "caller", "description": "asks a subagent", "start_node": "sub",
        "output_schema": {"type": "object", "properties": {"found": {}}},
        "nodes": [
            {"id": "sub", "type": "subplay", "playbook": "inside", "execution": "subagent", "output_key": "found"}],
    }
    inside = {
        "name": "inside", "description": "works in its thread", "start_node": "talk",
        "output_schema": {"type": "object", "properties": {"answer": {}}},
        "nodes": [{"id": "talk", "type": "llm", "context_profile": "conversation", "action": "Think aloud.",
                   "output_key": "answer", "memorize": True}],
    }
    engine = await start(caller, inside)
    await engine.conversations.hear(HERE, "the parent conversation's only message", author_name="mahe")
    root = await engine.stelis.root(HERE)
    before = await engine.conversations.context(root.id)
    done = await engine.playbooks.run(HERE, "caller", {})
    assert set(done.outputs["found"]) == {"answer", "last"}
    sub = (await engine.stelis.tree(root.id))[1].thread
    assert sub.kind == "subagent" and sub.status == "completed"  # kept for /threads show
    assert await engine.conversations.message_count(root.id) == 1  # no anchor, nothing of it in the parent
    assert (await engine.conversations.context(root.id)).request == before.request  # the parent's request is as it was
    asked = llm.requests[-1]
    assert not any("the parent conversation's only message" in b.text for t in asked.turns for b in t.blocks)


async def test_cancelling_a_run_mid_thread_aborts_the_thread_with_a_partial_chronicle(world):
    start, llm = world
    slow = {
        "name": "slow", "description": "waits inside a thread", "start_node": "open",
        "nodes": [
            {"id": "open", "type": "stelis_start", "label": "long work", "next": "plan"},
            {"id": "plan", "type": "llm", "context_profile": "conversation", "action": "Plan the work.",
             "memorize": True, "next": "work"},
            {"id": "work", "type": "llm", "context_profile": "worker", "action": "Take your time.", "next": "close"},
            {"id": "close", "type": "stelis_end"},
        ],
    }
    engine = await start(slow)
    started = asyncio.Event()
    real = llm.complete

    async def stuck(request, on_text=None):
        if request.purpose == "reply" and request.system[0].text == NEUTRAL_SYSTEM:
            started.set()
            await asyncio.sleep(60)
        return await real(request, on_text)

    llm.complete = stuck
    task = asyncio.create_task(engine.playbooks.run(HERE, "slow", {}))
    await asyncio.wait_for(started.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    root = await engine.stelis.root(HERE)
    thread = (await engine.stelis.tree(root.id))[1].thread
    assert thread.status == "aborted" and thread.chronicle_summary  # never left open, something kept
    [view] = await engine.playbooks.runs(HERE)
    assert view.run.status == "cancelled" and [s.node for s in view.steps] == ["open", "plan"]


async def test_a_failing_node_unwinds_the_threads_and_names_the_node(world):
    start, _ = world
    failing = {
        "name": "failing", "description": "a tool refuses", "start_node": "open",
        "nodes": [
            {"id": "open", "type": "stelis_start", "label": "doomed", "next": "read"},
            {"id": "read", "type": "tool", "tool": "recall_thread", "args": {"thread": 999_999}, "next": "close"},
            {"id": "close", "type": "stelis_end"},
        ],
    }
    engine = await start(failing)
    with pytest.raises(PlaybookError, match="failing, node read: there is no Stelis thread 999999"):
        await engine.playbooks.run(HERE, "failing", {})
    root = await engine.stelis.root(HERE)
    assert (await engine.stelis.tree(root.id))[1].thread.status == "aborted"
    assert (await engine.playbooks.runs(HERE))[0].run.status == "failed"


async def test_depth_is_refused_before_any_work(world):
    start, llm = world
    engine = await start(stelis={"max_depth": 1})  # research opens one thread; from inside one it would be two
    run = await engine.stelis.new_run(HERE)
    await engine.stelis.start(run, "already inside")
    calls = len(llm.requests)
    with pytest.raises(PlaybookError, match="past the maximum depth 1"):
        await engine.playbooks.run(HERE, "research", {"topic": "x"}, run_id=run.id)
    assert len(llm.requests) == calls  # no model call
    root = await engine.stelis.root(HERE)
    # nothing opened, run
    assert len(await engine.stelis.tree(root.id)) == 2 and await engine.playbooks.runs(HERE) == []


async def test_a_playbook_that_fails_the_check_does_not_load(world, caplog):
    start, _ = world
    broken = {"name": "broken", "description": "a typo", "start_node": "a",
              "nodes": [{"id": "a", "type": "tool", "tool": "now", "args_input": {}}]}
    engine = await start(broken)
    assert "broken" not in engine.playbooks.library and "research" in engine.playbooks.library
    [problem] = engine.playbooks.problems
    assert (problem.node, problem.field) == ("a", "args_input") and problem.file.endswith("broken.json")
    assert "playbook not loaded" in caplog.text
    with pytest.raises(PlaybookError, match="there is no playbook 'broken'"):
        await engine.playbooks.run(HERE, "broken", {})


async def test_meta_user_is_the_normal_reply_byte_for_byte(world):
    start, llm = world
    engine = await start()
    await engine.conversations.hear(HERE, "we ship calculator_v2 on Friday", author_name="mahe")
    await engine.conversations.hear(HERE, "what do you think?", author_name="mahe")
    thread = (await engine.stelis.root(HERE)).id
    direct = (await engine.conversations.context(thread)).request
    done = await engine.playbooks.run(HERE, "meta_user", {})
    assert llm.requests[-1] == direct  # the same request as the direct path, to the last byte
    said = await engine.conversations.last_message(thread)
    assert said is not None and said.role == "assistant" and said.content == done.outputs["reply"]


def test_only_a_conversation_node_may_leave_its_instruction_empty():
    from bot.playbooks.checker import parse

    raw = {"name": "x", "description": "x", "start_node": "a",
           "nodes": [{"id": "a", "type": "llm", "context_profile": "worker", "action": ""}]}
    _, problems = parse(json.dumps(raw), "x.json")
    assert [p.node for p in problems] == ["a"] and "only a conversation-profile node" in problems[0].message


async def test_every_builtin_runs_end_to_end_against_the_fake_server(make_config, fake_anthropic):
    """Structured answers come back as JSON text; every request the built-ins make is valid."""
    def answer(body):
        asked = body["messages"][-1]["content"][-1].get("text", "")
        if "JSON schema" in asked:
            schema = json.loads(asked.split("matching this JSON schema:\n", 1)[1].splitlines()[0])
            return json.dumps({"needed": True} if "needed" in schema["properties"] else example(schema, asked))
        return "fake answer about " + asked[-60:]

    fake_anthropic.responder = answer
    llm = AnthropicLLM(AnthropicConfig(api_key="k", base_url=fake_anthropic.base_url, max_retries=0), ModelTiers())
    engine = await Engine.open(make_config(snapshots={"interval_seconds": 0}), llm)
    assert sorted(engine.playbooks.library) == ["branch_work", "detail_recall", "meta_auto", "meta_user", "reach_out",
                                                 "research", "summarise_thread"]
    await engine.conversations.hear(HERE, "we ship calculator_v2 on Friday", author_name="mahe")
    reply = await engine.playbooks.run(HERE, "meta_user", {})
    research = await engine.playbooks.run(HERE, "research", {"topic": "the calculator_v2 release"})
    thread = (await engine.stelis.tree((await engine.stelis.root(HERE)).id))[1].thread
    assert thread.label == "research: the calculator_v2 release" and thread.status == "completed"
    detail = await engine.playbooks.run(HERE, "detail_recall", {"thread": thread.id, "question": "when?"})
    summary = await engine.playbooks.run(HERE, "summarise_thread", {"thread": thread.id})
    pulse = await engine.playbooks.run(HERE, "meta_auto", {})
    work = await engine.playbooks.run(HERE, "branch_work", {"label": "notes", "goal": "tidy the release notes",
                                                           "steps": "1. [ ] list changes", "state": "just started"})
    assert pulse.outputs["decision"]["action"] == "wait" and (await engine.autonomy.log(HERE))[0].kind == "wait"
    assert work.outputs["work"].startswith("fake answer") and work.outputs["assess"]["next"] == "pause"
    opening = await engine.playbooks.run(HERE, "reach_out", {"partner": "Eris", "state": "no exchange yet"})
    assert opening.outputs["opening"].startswith("fake answer")
    assert reply.outputs["reply"].startswith("fake answer") and research.outputs["findings"]
    assert detail.outputs["summary"].startswith("fake answer") and summary.outputs["summary"].startswith("fake")
    assert fake_anthropic.calls and all(c.status == 200 for c in fake_anthropic.calls)
    tiers = {c.body["model"] for c in fake_anthropic.calls}
    assert tiers == {ModelTiers().standard, ModelTiers().light}  # router and worker_light use the light model
    await engine.close()


async def test_a_bad_file_in_the_folder_is_named_and_skipped_and_the_bot_starts(world, tmp_path):
    start, _ = world
    folder = tmp_path / "playbooks"
    (folder / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (folder / "latin1.json").write_bytes('{"name": "café"}'.encode("latin-1"))
    (folder / "x.json").mkdir()
    (folder / "huge.json").write_bytes(b" " * 1_100_000)
    engine = await start(ECHO)  # starts, with the good one and the built-in ones
    assert {"echo", "meta_auto", "branch_work"} <= set(engine.playbooks.library)
    problems = {Path(p.file).name: p.message for p in engine.playbooks.problems}
    assert "nested too deep" in problems["deep.json"]
    assert "not UTF-8" in problems["latin1.json"]
    assert "cannot be read" in problems["x.json"]
    assert "larger than 1 MB" in problems["huge.json"]


LOOPING = {"name": "looping", "description": "calls itself", "start_node": "again",
           "nodes": [{"id": "again", "type": "subplay", "playbook": "looping"}]}
PING = {"name": "ping", "description": "calls pong", "start_node": "go",
        "nodes": [{"id": "go", "type": "subplay", "playbook": "pong"}]}
PONG = {"name": "pong", "description": "calls ping", "start_node": "go",
        "nodes": [{"id": "go", "type": "subplay", "playbook": "ping", "execution": "subagent"}]}
LEFT_OPEN = {"name": "left_open", "description": "opens a thread and never ends it", "start_node": "open",
             "nodes": [{"id": "open", "type": "stelis_start", "label": "forgotten", "next": "note"},
                       {"id": "note", "type": "set", "values": {"x": 1}}]}
UNMATCHED_END = {"name": "unmatched_end", "description": "ends a thread it did not open", "start_node": "close",
                 "nodes": [{"id": "close", "type": "stelis_end"}]}
ONE_SIDED = {"name": "one_sided", "description": "closes on one branch only", "start_node": "open",
             "nodes": [{"id": "open", "type": "stelis_start", "label": "t", "next": "pick"},
                       {"id": "pick", "type": "route", "conditional_next": {
                           "field": "input.x", "operator": "eq", "cases": {"a": "close", "b": "skip"}}},
                       {"id": "skip", "type": "set", "values": {"y": 1}, "next": "close2"},
                       {"id": "close2", "type": "set", "values": {"z": 1}},
                       {"id": "close", "type": "stelis_end"}]}
TOO_DEEP_FOR_ITSELF = {"name": "too_deep", "description": "promises depth 0, opens one",
                       "start_node": "open",
                       "nodes": [{"id": "open", "type": "stelis_start", "label": "t",
                                  "stelis_config": {"max_depth": 0}, "next": "close"},
                                 {"id": "close", "type": "stelis_end"}]}


async def test_the_checker_refuses_cycles_unbalanced_threads_and_a_broken_max_depth(world):
    start, llm = world
    engine = await start(LOOPING, PING, PONG, LEFT_OPEN, UNMATCHED_END, ONE_SIDED, TOO_DEEP_FOR_ITSELF, ECHO)
    problems = [str(p) for p in engine.playbooks.problems]
    refused = {name for name in ("looping", "ping", "pong", "left_open", "unmatched_end", "one_sided", "too_deep")
               if any(f"{name}.json" in p for p in problems)}
    assert refused == {"looping", "ping", "pong", "left_open", "unmatched_end", "one_sided", "too_deep"}
    assert any("calls itself (looping -> looping)" in p for p in problems)
    assert any("ping -> pong -> ping" in p for p in problems)
    assert any("still open" in p and "left_open" in p for p in problems)
    assert any("stelis_config.max_depth" in p and "too_deep" in p for p in problems)
    assert set(engine.playbooks.library) >= {"echo"} and not refused & set(engine.playbooks.library)
    assert not llm.requests  # refused before any work


async def test_a_run_never_recurses_and_never_leaves_a_thread_open_even_past_the_checker(world):
    from bot.playbooks.model import Playbook

    start, _ = world
    engine = await start()
    library = dict(engine.playbooks.library)  # as if the folder changed under a loaded library
    for raw in (LOOPING, LEFT_OPEN, TOO_DEEP_FOR_ITSELF):
        library[raw["name"]] = Playbook.model_validate(raw)
    engine.playbooks._runner.library = library
    with pytest.raises(PlaybookError, match="calls itself"):
        await engine.playbooks.run(HERE, "looping", {})
    (logged,) = await engine.playbooks.runs(HERE, 50)  # the outer run, failed at its first call: no more
    assert logged.run.status == "failed" and "calls itself" in (logged.run.error or "")
    done = await engine.playbooks.run(HERE, "left_open", {})
    root = await engine.stelis.root(HERE)
    assert done.thread_id == root.id
    assert all(row.thread.status != "active" for row in await engine.stelis.tree(root.id) if row.thread.id != root.id)
    with pytest.raises(PlaybookError, match=r"past its stelis_config\.max_depth 0"):
        await engine.playbooks.run(HERE, "too_deep", {})
    assert all(row.thread.status != "active" for row in await engine.stelis.tree(root.id) if row.thread.id != root.id)
