from aiohttp import web

from bot.config import ModelTiers, OpenAIConfig
from bot.providers.openai_llm import OpenAILLM, to_chat_params
from memory.llm import Block, LLMRequest, Tool, Turn
from tests.http_server import serving


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


async def test_reply_from_an_openai_compatible_server():
    seen = []

    async def completions(request: web.Request) -> web.Response:
        body = await request.json()
        seen.append(body)
        return web.json_response({
            "id": "c", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "hello from llama"}}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15,
                      "prompt_tokens_details": {"cached_tokens": 8}},
        })

    async with serving({("POST", "/v1/chat/completions"): completions}) as url:
        llm = OpenAILLM(OpenAIConfig(base_url=url, max_retries=0), ModelTiers(light="small"))
        result = await llm.complete(LLMRequest(system=(Block("card"),), turns=(Turn.text("user", "hi"),),
                                               max_tokens=20, tier="light"))
        await llm.aclose()
    assert result.text == "hello from llama"
    assert (result.usage.input_tokens, result.usage.cache_read_input_tokens, result.usage.output_tokens) == (4, 8, 3)
    assert seen[0]["model"] == "small" and seen[0]["messages"][0] == {"role": "system", "content": "card"}


async def test_with_no_model_named_for_it_the_server_s_own_model_is_used():
    seen = []

    async def models(request: web.Request) -> web.Response:
        seen.append("models")
        return web.json_response({"object": "list", "data": [{"id": "SmolLM2-135M-Instruct.Q4_1.gguf",
                                                              "object": "model", "owned_by": "me"}]})

    async def completions(request: web.Request) -> web.Response:
        body = await request.json()
        seen.append(body["model"])
        return web.json_response({
            "id": "c", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "hi"}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}})

    async with serving({("GET", "/v1/models"): models, ("POST", "/v1/chat/completions"): completions}) as url:
        llm = OpenAILLM(OpenAIConfig(base_url=url, max_retries=0), ModelTiers())  # claude-*: none chosen
        for tier in ("standard", "light"):
            await llm.complete(LLMRequest(system=(), turns=(Turn.text("user", "hi"),), max_tokens=5, tier=tier))
        await llm.aclose()
    assert seen == ["models", "SmolLM2-135M-Instruct.Q4_1.gguf", "SmolLM2-135M-Instruct.Q4_1.gguf"]  # asked once
