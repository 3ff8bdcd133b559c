"""Anthropic Messages API through AsyncAnthropic: cache breakpoints, usage logging, SDK retries."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

import anthropic
import httpx2  # the SDK's HTTP client: errors in the middle of a stream reach us unwrapped

from bot.config import AnthropicConfig, ModelTiers
from bot.fitting import served_tokens, too_long
from bot.providers.server_facts import SAMPLE, ServerFacts
from bot.providers.usage_log import log_call
from memory.llm import Block, LLMError, LLMRequest, LLMResult, RequestTooLarge, TextSink, Tool, ToolCall, Usage
from memory.tokens import cached_tokens

log = logging.getLogger(__name__)
ANSWER_TOOL = "answer"  # a JSON answer comes as this forced tool's input


class AnthropicLLM:
    name = "anthropic"
    supports_tools = True
    supports_images = True  # image blocks with a URL source
    discovery_sets_context = False  # discover() says how its tokenizer counts, never a context: start-up goes on

    def __init__(self, config: AnthropicConfig, tiers: ModelTiers):
        self.config = config
        self.tiers = tiers
        self.client = anthropic.AsyncAnthropic(
            api_key=config.api_key.get_secret_value() if config.api_key else None,
            base_url=config.base_url,
            timeout=config.timeout_seconds,
            max_retries=config.max_retries,
        )

    async def discover(self) -> ServerFacts:
        """How Anthropic's tokenizer counts against our estimate, from its free count-tokens endpoint (the
        difference of two counts leaves the message's framing out)."""
        try:
            sample, framing = await asyncio.gather(*(self.client.messages.count_tokens(
                model=self.tiers.standard, messages=[{"role": "user", "content": text}]) for text in (SAMPLE, ".")))
        except anthropic.APIError as exc:
            log.info("the model's tokens were not counted before the first request (%s)", exc)
            return ServerFacts()
        return ServerFacts(tokens_per_estimate=max(1, sample.input_tokens - framing.input_tokens)
                           / cached_tokens(SAMPLE))

    async def complete(self, request: LLMRequest, on_text: TextSink | None = None) -> LLMResult:
        params = to_params(request, request.model or getattr(self.tiers, request.tier))
        started = time.monotonic()
        try:
            if self.config.stream:
                async with self.client.messages.stream(**params) as stream:
                    async for piece in stream.text_stream:
                        if on_text:
                            on_text(piece)
                    message = await stream.get_final_message()
            else:
                message = await self.client.messages.create(**params)
        except anthropic.APIError as exc:
            raise _as_llm_error(exc, self.config) from exc
        except httpx2.HTTPError as exc:  # a stream cut or stalled after it began
            raise LLMError(f"The model's answer broke off ({type(exc).__name__}); nothing of it was kept.") from exc
        if message.stop_reason is None:  # the stream ended without its final event: an unfinished answer
            raise LLMError("The model's answer ended before it was finished; nothing of it was kept.")
        usage = Usage(
            input_tokens=message.usage.input_tokens,
            output_tokens=message.usage.output_tokens,
            cache_read_input_tokens=message.usage.cache_read_input_tokens or 0,
            cache_creation_input_tokens=message.usage.cache_creation_input_tokens or 0,
        )
        log_call(self.name, message.model, request, usage, time.monotonic() - started)
        text = "".join(b.text for b in message.content if b.type == "text")
        calls = tuple(ToolCall(b.id, b.name, dict(b.input)) for b in message.content if b.type == "tool_use")
        stop = message.stop_reason
        if forced_answer(request):  # the JSON answer came as the answer tool's input
            text = next((json.dumps(c.input, ensure_ascii=False) for c in calls if c.name == ANSWER_TOOL), text)
            calls = ()
            stop = "end_turn" if stop == "tool_use" else stop
        if not self.config.stream and on_text and text:
            on_text(text)
        return LLMResult(text=text, usage=usage, model=message.model, stop_reason=stop,
                         tool_calls=calls)

    async def aclose(self) -> None:
        await self.client.close()


def to_params(request: LLMRequest, model: str) -> dict[str, Any]:
    """The keyword arguments of messages.create for a request (tools first: they open the cache prefix)."""
    request = request.replayable()
    params: dict[str, Any] = {
        "model": model,
        "max_tokens": request.max_tokens,
        "messages": [
            {"role": t.role, "content": [_block(b) for b in t.blocks]} for t in request.turns
        ],
    }
    if request.system:
        params["system"] = [_block(b) for b in request.system]
    if request.tools:
        params["tools"] = [_tool(t) for t in request.tools]
    if request.tool_choice is not None:
        params["tool_choice"] = ({"type": request.tool_choice} if request.tool_choice in ("auto", "any", "none")
                                 else {"type": "tool", "name": request.tool_choice})
    if forced_answer(request):
        assert request.response_schema is not None
        params["tools"] = [{"name": ANSWER_TOOL, "description": "Give your answer.",
                            "input_schema": request.response_schema}]
        params["tool_choice"] = {"type": "tool", "name": ANSWER_TOOL}
    return params


def forced_answer(request: LLMRequest) -> bool:
    """A JSON answer is asked for as a forced tool call, when the request offers no tools of its own (the
    model must be free to call those first, and a conversation's cached tool list must not change)."""
    return request.response_schema is not None and not request.tools


def _tool(tool: Tool) -> dict[str, Any]:
    out: dict[str, Any] = {"name": tool.name, "description": tool.description, "input_schema": tool.input_schema}
    if tool.cache:
        out["cache_control"] = {"type": "ephemeral", "ttl": tool.cache}
    return out


def _block(block: Block) -> dict[str, Any]:
    if block.kind == "tool_use":
        out: dict[str, Any] = {"type": "tool_use", "id": block.tool_id, "name": block.tool_name,
                               "input": block.tool_input or {}}
    elif block.kind == "tool_result":
        out = {"type": "tool_result", "tool_use_id": block.tool_id, "content": block.text}
    elif block.kind == "image":
        out = {"type": "image", "source": {"type": "url", "url": block.text}}
    else:
        out = {"type": "text", "text": block.text}
    if block.cache:
        out["cache_control"] = {"type": "ephemeral", "ttl": block.cache}
    return out


def _as_llm_error(exc: anthropic.APIError, config: AnthropicConfig) -> LLMError:
    retries = f" after {config.max_retries} retries" if config.max_retries else ""
    if isinstance(exc, anthropic.APITimeoutError):
        return LLMError(f"The model did not answer within {config.timeout_seconds:g} s{retries}.")
    if isinstance(exc, anthropic.APIConnectionError):
        return LLMError(f"Could not reach the model server{retries}.")
    if isinstance(exc, anthropic.APIStatusError):
        status = exc.status_code
        detail = _error_message(exc)
        if status == 529:
            return LLMError(f"The model is overloaded (529){retries}; try again in a minute.", status=status)
        if status == 429:
            return LLMError(f"The model is rate-limited (429){retries}; try again shortly.", status=status)
        if status in (401, 403):
            return LLMError(f"The model server refused the API key ({status}).", retryable=False,
                            status=status)
        if status == 400 and too_long(detail):
            return RequestTooLarge(f"The model rejected the request as too long: {detail}", served_tokens(detail))
        if 400 <= status < 500:
            return LLMError(f"The model rejected the request ({status}): {detail}", retryable=False,
                            status=status)
        return LLMError(f"The model server failed ({status}){retries}: {detail}", status=status)
    return LLMError(f"The model call failed: {exc}")


def _error_message(exc: anthropic.APIStatusError) -> str:
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error")
    return str((error.get("message") if isinstance(error, dict) else None) or exc.message)
