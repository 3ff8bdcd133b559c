import logging
from dataclasses import replace

import pytest

from bot.config import AnthropicConfig, ModelTiers
from bot.providers.anthropic_llm import AnthropicLLM, to_params
from memory.llm import Block, LLMError, LLMRequest, Tool, ToolCall, Turn

CARD = "You are Stelis, a careful persona. " * 120  # long enough to be cacheable


def provider(server, **overrides) -> AnthropicLLM:
    settings = {"api_key": "sk-test-key", "base_url": server.base_url, "max_retries": 2,
                "timeout_seconds": 5, **overrides}
    return AnthropicLLM(AnthropicConfig(**settings), ModelTiers(standard="std-model", light="light-model"))


def request(text="hello", **kw) -> LLMRequest:
    return LLMRequest(system=(Block(CARD, cache="1h"),), turns=(Turn.text("user", text),), max_tokens=64, **kw)


@pytest.mark.parametrize("stream", [False, True])
async def test_reply_and_usage_from_the_server(fake_anthropic, stream, caplog):
    llm = provider(fake_anthropic, stream=stream)
    pieces: list[str] = []
    caplog.set_level(logging.INFO, logger="stelis.llm")
    first = await llm.complete(request("hello there"), on_text=pieces.append)
    second = await llm.complete(request("and again", tier="light"))
    await llm.aclose()
    assert first.text == "fake reply to: hello there" == "".join(pieces)
    if stream:
        assert len(pieces) > 1  # text arrived in pieces
    assert first.usage.cache_creation_input_tokens > 1024 and first.usage.cache_read_input_tokens == 0
    assert second.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens
    assert [c.body["model"] for c in fake_anthropic.calls] == ["std-model", "light-model"]
    assert fake_anthropic.calls[0].body["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    lines = [r.getMessage() for r in caplog.records if r.name == "stelis.llm"]
    assert len(lines) == 2
    assert f"cache_read={second.usage.cache_read_input_tokens}" in lines[1] and "tier=light" in lines[1]
    assert all("sk-test-key" not in line for line in lines)


async def test_429_then_success_is_retried_by_the_sdk(fake_anthropic):
    fake_anthropic.fail_next(429)
    llm = provider(fake_anthropic)
    result = await llm.complete(request("after a rate limit"))
    await llm.aclose()
    assert result.text.endswith("after a rate limit")
    assert [c.status for c in fake_anthropic.calls] == [429, 200]


async def test_529_exhausted_becomes_a_clear_error(fake_anthropic):
    fake_anthropic.fail_next(529, 529, 529)
    llm = provider(fake_anthropic, max_retries=2)
    with pytest.raises(LLMError) as err:
        await llm.complete(request())
    await llm.aclose()
    assert err.value.notice == "The model is overloaded (529) after 2 retries; try again in a minute."
    assert err.value.retryable and err.value.status == 529
    assert len(fake_anthropic.calls) == 3


async def test_a_request_breaking_the_rules_is_rejected_and_not_retried(fake_anthropic):
    llm = provider(fake_anthropic)
    bad = LLMRequest(system=(), turns=(Turn.text("assistant", "I speak first"),), max_tokens=8)
    with pytest.raises(LLMError) as err:
        await llm.complete(bad)
    await llm.aclose()
    assert not err.value.retryable and err.value.status == 400
    assert 'first message must use the "user" role' in err.value.notice
    assert len(fake_anthropic.calls) == 1


async def test_a_hanging_server_times_out_into_a_clear_error(fake_anthropic):
    fake_anthropic.hang_next()
    llm = provider(fake_anthropic, timeout_seconds=0.3, max_retries=0)
    with pytest.raises(LLMError, match=r"did not answer within 0.3 s"):
        await llm.complete(request())
    await llm.aclose()


async def test_a_refused_key_is_not_retryable(fake_anthropic):
    fake_anthropic.fail_next(401)
    llm = provider(fake_anthropic)
    with pytest.raises(LLMError) as err:
        await llm.complete(request())
    await llm.aclose()
    assert not err.value.retryable and "refused the API key" in err.value.notice


def test_tool_blocks_and_breakpoints_map_to_the_messages_api():
    req = LLMRequest(
        system=(Block("card", cache="1h"),),
        turns=(
            Turn.text("user", "list files"),
            Turn("assistant", (Block(kind="tool_use", tool_id="t1", tool_name="ls", tool_input={"p": "/"}),)),
            Turn("user", (Block("a\nb", kind="tool_result", tool_id="t1", cache="5m"),)),
        ),
        max_tokens=10, tools=(LS,), tool_choice="ls",
    )
    params = to_params(req, "m")
    assert params["tools"] == [{"name": "ls", "description": "list a folder", "input_schema": LS.input_schema,
                                "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
    assert params["tool_choice"] == {"type": "tool", "name": "ls"}
    assert params["system"] == [{"type": "text", "text": "card", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
    assert params["messages"][1]["content"][0] == {"type": "tool_use", "id": "t1", "name": "ls", "input": {"p": "/"}}
    assert params["messages"][2]["content"][0]["tool_use_id"] == "t1"
    assert params["messages"][2]["content"][0]["cache_control"]["ttl"] == "5m"


async def test_a_stream_cut_midway_is_a_clear_error_not_a_crash(fake_anthropic):
    llm = provider(fake_anthropic, stream=True, max_retries=0)
    fake_anthropic.cut_next()
    pieces: list[str] = []
    with pytest.raises(LLMError, match="broke off") as caught:
        await llm.complete(request("a long story please"), on_text=pieces.append)
    assert caught.value.retryable
    assert (await llm.complete(request("again"))).text == "fake reply to: again"  # the next call works
    await llm.aclose()


async def test_a_stream_without_its_final_event_is_not_taken_as_an_answer(fake_anthropic):
    llm = provider(fake_anthropic, stream=True, max_retries=0)
    fake_anthropic.unfinish_next()
    with pytest.raises(LLMError, match="ended before it was finished"):
        await llm.complete(request("tell me everything"))
    await llm.aclose()


async def test_a_stream_that_stalls_midway_times_out_into_a_clear_error(fake_anthropic):
    llm = provider(fake_anthropic, stream=True, max_retries=0, timeout_seconds=0.5)
    fake_anthropic.stall_next()
    with pytest.raises(LLMError, match="broke off"):
        await llm.complete(request("hello"))
    await llm.aclose()


LS = Tool("ls", "list a folder", {"type": "object", "properties": {"p": {"type": "string"}}, "required": ["p"]},
          cache="1h")


def test_a_history_with_tool_turns_is_sent_as_text_when_the_request_defines_no_tools():
    req = LLMRequest(system=(), max_tokens=10, turns=(
        Turn.text("user", "list files"),
        Turn("assistant", (Block(kind="tool_use", tool_id="t1", tool_name="ls", tool_input={"p": "/"}),)),
        Turn("user", (Block("a\nb", kind="tool_result", tool_id="t1", cache="5m"), Block("and now?"))),
    ))
    params = to_params(req, "m")
    assert "tools" not in params
    assert params["messages"][1]["content"] == [{"type": "text", "text": '[tool call ls {"p": "/"}]'}]
    assert params["messages"][2]["content"][0] == {"type": "text", "text": "[tool result]\na\nb",
                                                   "cache_control": {"type": "ephemeral", "ttl": "5m"}}
    with_tools = to_params(replace(req, tools=(LS,)), "m")  # with tools the blocks stay tool blocks
    assert with_tools["messages"][1]["content"][0]["type"] == "tool_use"


@pytest.mark.parametrize("stream", [True, False])
async def test_tool_calls_come_back_from_the_server_streamed_or_not(fake_anthropic, stream):
    fake_anthropic.responder = lambda body: [
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {"p": "/home/mahe", "depth": 2}},
    ]
    llm = provider(fake_anthropic, stream=stream)
    pieces: list[str] = []
    result = await llm.complete(replace(request("what is in my folder?"), tools=(LS,), tool_choice="auto"),
                                on_text=pieces.append)
    assert result.stop_reason == "tool_use"
    assert result.tool_calls == (ToolCall("toolu_1", "ls", {"p": "/home/mahe", "depth": 2}),)
    assert result.text == "Let me look." and "".join(pieces) == "Let me look."
    sent = fake_anthropic.calls[-1].body
    assert sent["tools"][0]["name"] == "ls" and sent["tool_choice"] == {"type": "auto"}
    await llm.aclose()


async def test_the_tool_definitions_are_the_first_bytes_the_cache_holds(fake_anthropic):
    fake_anthropic.min_cacheable_tokens = 1
    llm = provider(fake_anthropic)
    ask = replace(request("hello"), tools=(LS,))
    await llm.complete(ask)
    second = await llm.complete(replace(ask, turns=(Turn.text("user", "something else entirely"),)))
    assert second.usage.cache_read_input_tokens > 0  # the tool list, cached at its breakpoint, is read again
    await llm.aclose()


async def test_the_tokenizer_is_counted_before_the_first_request_and_a_failed_count_is_no_failure(fake_anthropic):
    from bot.providers.server_facts import SAMPLE
    from memory.tokens import cached_tokens
    from tests.fake_anthropic import flatten

    llm = provider(fake_anthropic)
    facts = await llm.discover()
    await llm.aclose()
    counted = [sum(t for _, t, _ in flatten({"messages": [{"role": "user", "content": text}]}))
               for text in (SAMPLE, ".")]
    assert facts.tokens_per_estimate == pytest.approx((counted[0] - counted[1]) / cached_tokens(SAMPLE))
    assert fake_anthropic.calls == []  # counting is not a model call
    unreachable = AnthropicLLM(AnthropicConfig(api_key="k", base_url="http://127.0.0.1:9", max_retries=0),
                               ModelTiers())
    assert (await unreachable.discover()).tokens_per_estimate is None
    await unreachable.aclose()
