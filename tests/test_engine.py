import asyncio
import re
from pathlib import Path

import pytest

from bot.engine import Engine, ReplyFailed
from bot.providers.anthropic_llm import AnthropicLLM
from bot.providers.offline import OFFLINE_TAG, OfflineLLM
from memory.backends import open_store
from memory.identifiers import identifiers
from memory.llm import LLMError
from memory.records import Scope
from tests.fake_anthropic import validate_request

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
async def engine(make_config):
    config = make_config()
    e = await Engine.open(config, OfflineLLM())
    yield e
    await e.close()


async def test_hear_then_reply_stores_both_turns(engine):
    scope = Scope.channel(1, 10)
    await engine.conversations.hear(scope, "hello, I am Mahe", author_name="mahe", external_id=111)
    reply = await engine.conversations.reply((await engine.stelis.root(scope)).id)
    thread = await engine.stelis.root(scope)
    stored = await engine.store.tail(thread.id, 10)
    assert [m.role for m in stored] == ["user", "assistant"]
    assert stored[1].content == reply.content and reply.content.startswith(OFFLINE_TAG)
    assert stored[0].author_name == "mahe" and stored[0].external_id == 111


async def test_the_same_discord_message_heard_twice_is_stored_once(engine):
    scope = Scope.channel(1, 10)
    await engine.conversations.hear(scope, "hi", author_name="a", external_id=5)
    await engine.conversations.hear(scope, "hi", author_name="a", external_id=5)
    assert await engine.store.count_messages((await engine.stelis.root(scope)).id) == 1


async def test_channels_do_not_see_each_other(engine):
    await engine.conversations.hear(Scope.channel(1, 10), "secret in ten", author_name="a")
    await engine.conversations.hear(Scope.channel(1, 20), "hello twenty", author_name="b")
    request = (await engine.conversations.context((await engine.stelis.root(Scope.channel(1, 20))).id)).request
    assert "secret in ten" not in str(request)


async def test_request_is_valid_for_the_messages_api_and_marks_breakpoints(engine):
    scope = Scope.console()
    await engine.conversations.hear(scope, "first", author_name="u")
    await engine.conversations.hear(scope, "second from someone else", author_name="v")  # merged into one user turn
    await engine.conversations.reply((await engine.stelis.root(scope)).id)
    await engine.conversations.hear(scope, "third", author_name="u")
    request = (await engine.conversations.context((await engine.stelis.root(scope)).id)).request
    from bot.providers.anthropic_llm import to_params

    params = to_params(request, "m")
    validate_request(params)
    assert [m["role"] for m in params["messages"]] == ["user", "assistant", "user"]
    assert params["messages"][0]["content"][1]["text"] == "[v] second from someone else"
    assert params["system"][0]["cache_control"]["ttl"] == "1h"
    newest = params["messages"][2]["content"]
    assert newest[-2]["text"].endswith("[u] third") and newest[-2]["cache_control"]["ttl"] == "5m"
    assert newest[-1]["text"].startswith("[Now: ") and "cache_control" not in newest[-1]
    assert "You are Stelis" in params["system"][0]["text"]


async def test_history_is_cut_to_the_token_budget_newest_kept(make_config):
    config = make_config(llm={"context_tokens": 4096, "max_output_tokens": 256})
    e = await Engine.open(config, OfflineLLM())
    scope = Scope.console()
    for i in range(300):
        await e.conversations.hear(scope, f"message {i} " + "filler words " * 20, author_name="u")
    assembly = await e.conversations.context((await e.stelis.root(scope)).id)
    blocks = [b.text for t in assembly.request.turns for b in t.blocks]
    summary = next(i for i, b in enumerate(blocks) if b.startswith("[Memory Summary]"))
    history = " ".join(blocks[summary + 1:])
    assert assembly.cut and "message 299 " in history and "message 0 " not in history
    kept = set(identifiers(blocks[summary]))
    first, last = (int(n) for n in re.search(r"messages (\d+)-(\d+)", blocks[summary]).groups())
    assert first > 1  # older than one summarisation's span: the short-term memory's job, not the cut's
    assert blocks[summary].endswith("more)") or str(last - 1) in kept  # "message {seq - 1}": kept or counted
    assert sum(assembly.parts[p] for p in ("summary", "history")) <= assembly.window_budget
    await e.close()


class Failing:
    name = "failing"

    async def complete(self, request, on_text=None):
        raise LLMError("The model is overloaded (529) after 3 retries; try again in a minute.")

    async def aclose(self):
        return None


async def test_an_llm_failure_keeps_the_message_and_says_why(make_config):
    e = await Engine.open(make_config(), Failing())
    scope = Scope.console()
    await e.conversations.hear(scope, "are you there?", author_name="u")
    with pytest.raises(ReplyFailed, match="overloaded"):
        await e.conversations.reply((await e.stelis.root(scope)).id)
    stored = await e.store.tail((await e.stelis.root(scope)).id, 10)
    assert [m.content for m in stored] == ["are you there?"]
    await e.close()


async def test_replies_come_from_an_anthropic_compatible_server(make_config, fake_anthropic):
    config = make_config(llm={"provider": "anthropic", "anthropic": {
        "api_key": "sk-x", "base_url": fake_anthropic.base_url}})
    e = await Engine.open(config, AnthropicLLM(config.llm.anthropic, config.persona.models))
    await e.conversations.hear(Scope.console(), "ping from the engine", author_name="u")
    reply = await e.conversations.reply((await e.stelis.root(Scope.console())).id)
    assert reply.content == "fake reply to: [u] ping from the engine"
    await e.close()


async def test_start_up_does_not_wait_for_anthropics_token_count_and_takes_it_when_it_comes(make_config, monkeypatch):
    """Issue 32: opening the engine waited for two count-token requests before the first reply could go out (and,
    with the SDK's retries, for as long as that endpoint kept failing). What they say changes no setting."""
    from bot.fitting import FIRST_RATIO
    from tests.fake_anthropic import FakeAnthropic

    release = asyncio.Event()
    fake = FakeAnthropic()
    counting = fake._count_tokens

    async def slow_count(request):
        await release.wait()
        return await counting(request)

    monkeypatch.setattr(fake, "_count_tokens", slow_count)  # before start: the route takes the bound method
    await fake.start()
    config = make_config(llm={"provider": "anthropic", "anthropic": {"api_key": "sk-x", "base_url": fake.base_url}})
    e = await asyncio.wait_for(Engine.open(config, AnthropicLLM(config.llm.anthropic, config.persona.models)), 10)
    assert e.fitted.ratio == FIRST_RATIO  # not counted yet: planned with room to spare
    await e.conversations.hear(Scope.console(), "ping before the count", author_name="u")
    reply = await asyncio.wait_for(e.conversations.reply((await e.stelis.root(Scope.console())).id), 10)
    assert reply.content == "fake reply to: [u] ping before the count"
    learnt = len(e.fitted._ratios)  # the reply's usage counted
    release.set()
    await asyncio.wait_for(e._calibrator, 10)
    assert len(e.fitted._ratios) == learnt + 1  # and the count, once it came
    await e.close()
    await fake.stop()


async def test_restart_remembers(make_config):
    config = make_config()
    e = await Engine.open(config, OfflineLLM())
    await e.conversations.hear(Scope.console(), "remember calculator_v2", author_name="u")
    await e.conversations.reply((await e.stelis.root(Scope.console())).id)
    await e.close()
    store = await open_store(config.database_path)
    e = Engine(config, store, OfflineLLM())
    await e.conversations.hear(Scope.console(), "what did I say?", author_name="u")
    thread = await e.stelis.root(Scope.console())
    assert "[u] remember calculator_v2" in str((await e.conversations.context(thread.id)).request)
    reply = await e.conversations.reply(thread.id)
    assert "(1 earlier message(s) from people here and 1 of mine" in reply.content
    await e.close()


@pytest.mark.parametrize("fault", ["cut_next", "unfinish_next"])
async def test_a_broken_stream_fails_the_reply_and_stores_nothing_of_it(make_config, fake_anthropic, fault):
    config = make_config(llm={"provider": "anthropic", "anthropic": {
        "api_key": "sk-x", "base_url": fake_anthropic.base_url, "stream": True, "max_retries": 0}})
    e = await Engine.open(config, AnthropicLLM(config.llm.anthropic, config.persona.models))
    await e.conversations.hear(Scope.console(), "tell me a long story", author_name="u")
    thread = await e.stelis.root(Scope.console())
    getattr(fake_anthropic, fault)()
    with pytest.raises(ReplyFailed):
        await e.conversations.reply(thread.id)
    assert [m.role for m in await e.store.tail(thread.id, 10)] == ["user"]  # nothing partial kept
    assert (await e.conversations.reply(thread.id)).content == "fake reply to: [u] tell me a long story"  # a retry
    await e.close()


async def test_start_up_sweeps_without_waiting_for_the_model_and_chronicles_later(make_config):
    from memory import threads
    from memory.records import NewMessage

    config = make_config(snapshots={"interval_seconds": 0})
    e = await Engine.open(config, OfflineLLM())
    root = await e.stelis.root(Scope.console())
    orphan = await threads.start(e.store, threads.Run(root.id), "left behind", e.config.stelis)
    await e.store.append(orphan.id, NewMessage("user", "half done work on calculator_v2"))
    await e.close()  # the run is gone with the process

    class Slow:
        name = "slow"

        def __init__(self):
            self.release = asyncio.Event()
            self.calls = 0

        async def complete(self, request, on_text=None):
            self.calls += 1
            await self.release.wait()
            return await OfflineLLM().complete(request)

        async def aclose(self):
            return None

    slow = Slow()
    e = await asyncio.wait_for(Engine.open(config, slow), 5)  # up at once, whatever the model does
    assert (await e.store.thread(orphan.id)).status == "aborted"
    slow.release.set()
    for _ in range(100):
        if (await e.store.thread(orphan.id)).chronicle_summary:
            break
        await asyncio.sleep(0.02)
    assert "calculator_v2" in (await e.store.thread(orphan.id)).chronicle_summary
    await e.close()


async def test_a_second_process_on_the_same_database_is_refused_clearly(make_config, tmp_path):
    import os
    import sys

    from memory.store import StoreError

    config = make_config()
    first = await Engine.open(config, OfflineLLM())
    with pytest.raises(StoreError, match=f"another Stelis process \\(pid {os.getpid()}\\)"):
        await Engine.open(config, OfflineLLM())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STELIS_", "ANTHROPIC_", "DISCORD_"))}
    env.update(STELIS_DATA_DIR=str(config.data_dir))
    other = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", "console", env=env, cwd=REPO, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    _, err = await asyncio.wait_for(other.communicate(b"hello\n"), 60)
    assert other.returncode == 2 and b"another Stelis process" in err
    assert await first.store.count_messages((await first.stelis.root(Scope.console())).id) == 0  # untouched
    snapshot = await Engine.open(config, OfflineLLM(), exclusive=False)  # exports may run beside the bot
    await snapshot.close()
    await first.close()
    again = await Engine.open(config, OfflineLLM())  # the lock went with the first engine
    await again.close()


async def test_one_message_larger_than_the_window_is_reduced_and_blocks_nothing(make_config):
    e = await Engine.open(make_config(llm={"context_tokens": 4096, "max_output_tokens": 256}), OfflineLLM())
    scope = Scope.console()
    thread = await e.stelis.root(scope)
    for text in ["hi", "word " * 9000, "next", "and next"]:
        await e.conversations.hear(scope, text, author_name="u")
        assert (await e.conversations.reply(thread.id)).content  # every turn answered, the huge one included
    await e.close()


async def test_what_is_heard_is_indexed_for_recall_in_the_background(engine, monkeypatch):
    monkeypatch.setattr("bot.services.conversation.INDEX_DELAY_SECONDS", 0.01)
    scope = Scope.channel(1, 10)
    for i in range(5):
        await engine.conversations.hear(scope, f"the quokka count is {i}", author_name="mahe")
    assert engine.store.unindexed >= 5  # storing a message writes no index entry
    for _ in range(200):  # nobody searches: the engine indexes on its own a moment later
        if engine.store.unindexed == 0:
            break
        await asyncio.sleep(0.01)
    assert engine.store.unindexed == 0
    _, counts = await engine.store.match_counts(["quokka"], 100)
    assert counts == {"quokka": 5}


async def test_at_start_up_the_engine_indexes_and_counts_the_newest_words_in_the_background(make_config):
    config = make_config(snapshots={"interval_seconds": 0})
    engine = await Engine.open(config, OfflineLLM())
    scope = Scope.channel(1, 10)
    for i in range(5):
        await engine.conversations.hear(scope, f"the quokka census counted {i} wombats", author_name="mahe")
    await engine.close()

    engine = await Engine.open(config, OfflineLLM())
    try:
        for _ in range(200):
            if engine.store.unindexed == 0 and "quokka" in engine.assembler.frequencies._known:
                break
            await asyncio.sleep(0.01)
        assert engine.store.unindexed == 0  # what the last run left unindexed, indexed without a search
        assert await engine.assembler.frequencies.counts(engine.store, ["quokka"]) == {"quokka": 5}
        assert "wombat" in engine.assembler.frequencies._known  # "wombats", as a query stems it
    finally:
        await engine.close()


async def _on_the_fake_server(make_config, fake_anthropic, responder, said: str) -> tuple[Engine, int]:
    """An engine on the Anthropic provider at the fake server, with one message heard; its thread."""
    from bot.config import AnthropicConfig, ModelTiers
    from bot.providers.anthropic_llm import AnthropicLLM

    fake_anthropic.responder = responder
    llm = AnthropicLLM(AnthropicConfig(api_key="k", base_url=fake_anthropic.base_url, max_retries=0), ModelTiers())
    engine = await Engine.open(make_config(snapshots={"interval_seconds": 0}), llm)
    scope = Scope.channel(1, 10)
    await engine.conversations.hear(scope, said, author_name="mahe")
    return engine, (await engine.stelis.root(scope)).id


def _calls_recall(body, query: str) -> list[dict]:
    return [{"type": "tool_use", "id": f"toolu_{len(body['messages'])}", "name": "recall", "input": {"query": query}}]


async def test_a_reply_may_call_recall_first_and_the_exchange_is_stored_paired(make_config, fake_anthropic):
    from memory.transcript import dated_transcript

    def answer(body):
        last = body["messages"][-1]["content"]
        if body.get("tool_choice", {}).get("type") == "none" or any(b["type"] == "tool_result" for b in last):
            return "It ships on Friday, as you said."
        return _calls_recall(body, "ship date")

    engine, thread = await _on_the_fake_server(make_config, fake_anthropic, answer, "we ship calculator_v2 on Friday")
    reply = await engine.conversations.reply(thread)
    assert reply.content == "It ships on Friday, as you said."
    stored = await engine.store.tail(thread, 10)
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[1].metadata["tool_use"][0]["name"] == "recall" and "Friday" in stored[2].content
    summarised = "\n".join(line for line, _ in dated_transcript(stored, {thread}))
    assert "[tool]" not in summarised and summarised.count("Friday") == 2  # said, and answered: not looked up
    bodies = [c.body for c in fake_anthropic.calls]
    assert all(c.status == 200 for c in fake_anthropic.calls) and len(bodies) == 2
    assert [t["name"] for t in bodies[0]["tools"]] == ["recall", "recall_thread"] == \
        [t["name"] for t in bodies[1]["tools"]]  # the same list, first in the prefix, every time
    await engine.close()


async def test_a_reply_that_keeps_calling_tools_is_made_to_answer(make_config, fake_anthropic):
    from bot.services.conversation import MAX_TOOL_ROUNDS

    def answer(body):
        if body.get("tool_choice", {}).get("type") == "none":
            return "Enough looking: here is my answer."
        return _calls_recall(body, "more")

    engine, thread = await _on_the_fake_server(make_config, fake_anthropic, answer, "tell me everything")
    assert (await engine.conversations.reply(thread)).content == "Enough looking: here is my answer."
    assert len(fake_anthropic.calls) == MAX_TOOL_ROUNDS + 1
    assert fake_anthropic.calls[-1].body["tools"] == fake_anthropic.calls[0].body["tools"]
    await engine.close()


async def test_the_offline_model_is_offered_no_tools(engine):
    scope = Scope.channel(1, 10)
    await engine.conversations.hear(scope, "hello", author_name="mahe")
    assembly = await engine.conversations.context((await engine.stelis.root(scope)).id)
    assert assembly.request.tools == ()
