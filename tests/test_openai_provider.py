import asyncio
import json

import pytest

from bot.config import ModelTiers, OpenAIConfig
from bot.providers.openai_llm import OpenAILLM, to_chat_params
from memory.llm import Block, LLMRequest, Tool, Turn
from tests.fake_openai import prompt_text, running


def test_request_maps_to_chat_messages_with_tool_calls():
    req = LLMRequest(
        system=(Block("card"), Block("memory")),
        turns=(
            Turn.text("user", "list files"),
            Turn("assistant", (Block("looking"), Block(kind="tool_use", tool_id="c1", tool_name="ls",
                                                       tool_input={"path": "/"}))),
            Turn("user", (Block("a.txt", kind="tool_result", tool_id="c1"), Block("and?"))),
        ),
        max_tokens=10, tools=(Tool("ls", "list a folder", {"type": "object", "properties": {}}),), tool_choice="any",
    )
    params = to_chat_params(req)
    assert params["tools"] == [{"type": "function", "function": {"name": "ls", "description": "list a folder",
                                                                 "parameters": {"type": "object", "properties": {}}}}]
    assert params["tool_choice"] == "required"
    assert params["messages"] == [
        {"role": "system", "content": "card\n\nmemory"},
        {"role": "user", "content": "list files"},
        {"role": "assistant", "content": "looking", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": '{"path": "/"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
        {"role": "user", "content": "and?"},
    ]


PLAIN = LLMRequest(system=(Block("card"),), turns=(Turn.text("user", "hi"),), max_tokens=40, tier="light")


def provider(url: str, **settings: object) -> OpenAILLM:
    return OpenAILLM(OpenAIConfig(base_url=url, **settings), ModelTiers(standard="smol", light="small"))


def test_a_tool_calls_arguments_with_a_line_break_inside_a_string_are_its_arguments():
    """llama.cpp's JSON grammar lets a raw line break into a string; what is not JSON at all comes back as text."""
    from bot.providers.openai_llm import _arguments

    assert _arguments('{"note": "first line\nsecond line"}') == {"note": "first line\nsecond line"}
    assert _arguments('{"note": "unclosed') == {"raw": '{"note": "unclosed'}
    assert _arguments("") == {}


async def test_an_answer_is_streamed_to_the_front_end_as_it_is_written_and_counted_by_the_server():
    async with running(flavor="vllm", responder=lambda body: "hello from the small model") as server:
        llm = provider(server.base_url)
        pieces: list[str] = []
        result = await llm.complete(PLAIN, pieces.append)
        await llm.aclose()
    assert len(pieces) == 5 and "".join(pieces) == result.text == "hello from the small model"
    sent = server.calls[0]
    assert sent["stream"] is True and sent["model"] == "small" and sent["messages"][0] == {"role": "system",
                                                                                          "content": "card"}
    assert not result.usage.estimated and result.usage.input_tokens == server.tokens(prompt_text(sent))


async def test_a_server_that_streams_no_usage_gets_our_estimate_marked_as_one():
    async with running(flavor="llama-cpp-python") as server:
        llm = provider(server.base_url)
        result = await llm.complete(PLAIN)
        await llm.aclose()
    assert result.usage.estimated and result.usage.input_tokens > 0 and result.usage.output_tokens > 0


async def test_a_cancelled_request_closes_its_stream_so_the_server_stops_computing_it():
    async with running(flavor="llama.cpp", chunk_delay=0.05,
                       responder=lambda body: " ".join(["word"] * 200)) as server:
        llm = provider(server.base_url)
        heard: list[str] = []
        started = asyncio.Event()

        def hear(piece: str) -> None:
            heard.append(piece)
            started.set()

        task = asyncio.create_task(llm.complete(PLAIN, hear))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await llm.aclose()
        for _ in range(100):
            if server.disconnects:
                break
            await asyncio.sleep(0.02)
    assert server.disconnects == 1 and len(heard) < 200


async def test_an_answer_whose_stream_ends_without_a_stop_reason_is_not_an_answer():
    from aiohttp import web

    from memory.llm import LLMError
    from tests.http_server import serving

    async def cut(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
                 "choices": [{"index": 0, "delta": {"content": "half an ans"}, "finish_reason": None}]}
        await response.write(f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode())
        return response

    async with serving({("POST", "/v1/chat/completions"): cut}) as url:
        llm = provider(url)
        with pytest.raises(LLMError, match="ended before it was finished"):
            await llm.complete(PLAIN)
        await llm.aclose()


async def test_with_no_model_named_for_it_the_server_s_own_model_is_used():
    async with running(flavor="llama-cpp-python") as server:
        llm = OpenAILLM(OpenAIConfig(base_url=server.base_url), ModelTiers())  # claude-*: none chosen
        for tier in ("standard", "light"):
            await llm.complete(LLMRequest(system=(), turns=(Turn.text("user", "hi"),), max_tokens=5, tier=tier))
        await llm.aclose()
    assert [c["model"] for c in server.calls] == [server.model, server.model]


def test_a_local_server_gets_a_long_timeout_and_no_blind_retries_a_cloud_one_the_usual():
    for url in ("http://127.0.0.1:8080/v1", "http://localhost:11434/v1", "http://ollama:11434/v1",
                "http://192.168.1.20:8000/v1", "http://gpu-box.local:8000/v1"):
        config = OpenAIConfig(base_url=url)
        assert config.local() and config.timeout() >= 600 and config.retries() == 0, url
    cloud = OpenAIConfig(base_url="https://api.together.xyz/v1")
    assert not cloud.local() and cloud.timeout() == 60 and cloud.retries() == 3
    assert OpenAIConfig(base_url="http://127.0.0.1:8080/v1", timeout_seconds=30, max_retries=1).retries() == 1


@pytest.mark.parametrize(("flavor", "context", "slots", "tools", "form"), [
    ("llama-cpp-python", None, 0, False, "json_object"),
    ("llama.cpp", 4096, 4, True, "json_schema"),
    ("vllm", 4096, 0, None, "json_schema"),
    ("ollama", 4096, 0, True, "json_schema"),
])
async def test_the_server_is_asked_what_it_is(flavor, context, slots, tools, form):
    async with running(flavor=flavor, n_ctx=4096, slots=4, tools_work=True, ratio=1.2) as server:
        llm = provider(server.base_url)
        facts = await llm.discover()
        await llm.aclose()
    assert (facts.kind, facts.context_tokens, facts.slots, facts.tools, facts.json_form) == (
        flavor, context, slots, tools, form)
    assert facts.tokens_per_estimate is None if flavor == "ollama" else 1.1 < facts.tokens_per_estimate < 1.3
    assert llm.supports_tools is (tools is not False)


async def test_tools_are_not_sent_to_a_model_whose_template_drops_them_unless_told_so():
    tool = Tool("recall", "look up", {"type": "object", "properties": {"query": {"type": "string"}}})
    asking = LLMRequest(system=(), turns=(Turn.text("user", "hi"),), max_tokens=20, tools=(tool,))
    async with running(flavor="llama-cpp-python") as server:
        auto, told = provider(server.base_url), provider(server.base_url, tools="yes")
        await auto.discover(), await told.discover()
        await auto.complete(asking), await told.complete(asking)
        await auto.aclose(), await told.aclose()
    assert "tools" not in server.calls[0] and server.calls[1]["tools"][0]["function"]["name"] == "recall"


async def test_a_json_answer_is_held_to_its_schema_in_the_form_the_server_takes():
    schema = {"type": "object", "properties": {"react": {"type": "string", "enum": ["no", "yes"]}},
              "required": ["react"]}
    asking = LLMRequest(system=(), turns=(Turn.text("user", "answer?"),), max_tokens=50, response_schema=schema)
    rambling = "Sure! Here is what I think about the question you asked me."
    async with running(flavor="llama-cpp-python", responder=lambda body: rambling) as server:
        llm = provider(server.base_url)  # not asked what it is: tries OpenAI's form, then the one it takes
        first = await llm.complete(asking)
        second = await llm.complete(asking)
        await llm.aclose()
    assert json.loads(first.text)["react"] in ("no", "yes") and json.loads(second.text)["react"] in ("no", "yes")
    assert [form for form, _ in [(c["response_format"]["type"], 0) for c in server.calls]] == ["json_object"] * 2
    assert server.refused and server.refused[0][0] == 422 and len(server.refused) == 1  # refused once, remembered
    assert server.calls[0]["response_format"]["schema"] == schema


async def test_replies_keep_their_conversation_s_slot_and_background_jobs_another_on_llama_cpp():
    history = "kai: the tour is on Saturday at 9 from the north pier. " * 40
    async with running(flavor="llama.cpp", slots=2) as server:
        llm = provider(server.base_url)
        await llm.discover()
        reads = []
        for i in range(4):
            reply = LLMRequest(system=(Block("card"),), turns=(Turn.text("user", f"{history}\nkai: question {i}"),),
                               max_tokens=20, cache_key="thread:1")
            reads.append((await llm.complete(reply)).usage)
            summary = LLMRequest(system=(Block("You write memory notes."),), turns=(Turn.text("user", history),),
                                 max_tokens=20, purpose="summary")
            await llm.complete(summary)
        await llm.aclose()
    slots = [c["id_slot"] for c in server.calls]
    assert slots == [0, 1] * 4 and all(c["cache_prompt"] for c in server.calls)
    assert all(u.cache_read_input_tokens > 4 * u.input_tokens for u in reads[1:])  # the prefix stayed warm


async def test_quitting_during_a_memory_update_stops_the_server_s_work_without_a_traceback(make_config, caplog):
    from bot.clock import Clock
    from bot.engine import Engine
    from memory.records import Scope

    async with running(flavor="llama-cpp-python", chunk_delay=0.2,
                       responder=lambda body: " ".join(["note"] * 400)) as server:
        clock = Clock()
        config = make_config(llm={"provider": "openai", "context_tokens": 4096, "max_output_tokens": 200,
                                  "openai": {"base_url": server.base_url}},
                             persona={"models": {"standard": "smol", "light": "smol"}},
                             snapshots={"interval_seconds": 0},
                             short_term_history={"conversation_idle_seconds": 60, "message_threshold": 500})
        engine = await Engine.open(config, clock=clock)
        engine.shutdown_grace = 0.3
        scope = Scope.console()
        for i in range(6):
            await engine.conversations.hear(scope, f"line {i}: the tour is on Saturday at nine", author_name="kai")
        clock.advance(120)
        updating = asyncio.create_task(engine.memory.run_due())
        for _ in range(200):
            if server.calls:
                break
            await asyncio.sleep(0.05)
        await engine.close()
        await asyncio.gather(updating, return_exceptions=True)
        for _ in range(50):
            if server.disconnects:
                break
            await asyncio.sleep(0.05)
    assert server.disconnects >= 1  # the stream was closed: the server stopped writing the summary
    ours = [r for r in caplog.records if not r.name.startswith("aiohttp")]
    assert not [r for r in ours if r.exc_info or r.levelname in ("ERROR", "CRITICAL")]


async def test_a_server_that_refuses_tools_gets_none_again_and_replies_stop_planning_them(make_config):
    """vLLM started without a tool parser answers 400 to any request with tools: it is sent again without them,
    and the conversation stops offering them (their definitions took room in every request)."""
    from bot.engine import Engine
    from memory.records import Scope

    async with running(flavor="vllm", n_ctx=4096, responder=lambda body: "Saturday at nine.") as server:
        config = make_config(llm={"provider": "openai", "openai": {"base_url": server.base_url}},
                             persona={"models": {"standard": "smol", "light": "smol"}},
                             snapshots={"interval_seconds": 0})
        engine = await Engine.open(config)
        try:
            assert engine.assembler.conversation_tools  # vLLM does not say: tools are offered at first
            here = Scope.console()
            root = await engine.stelis.root(here)
            for line in ("When is the tour?", "And where?"):
                await engine.conversations.hear(here, line, author_name="kai")
                assert (await engine.conversations.reply(root.id)).content == "Saturday at nine."
            assert engine.assembler.conversation_tools == ()
        finally:
            await engine.close()
    assert len(server.refused) == 1 and all("tools" not in call for call in server.calls)
