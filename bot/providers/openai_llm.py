"""Any OpenAI-compatible chat endpoint (Ollama, vLLM, llama.cpp server); needs the `openai` extra."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from bot.config import ModelTiers, OpenAIConfig
from bot.fitting import too_long
from bot.providers.usage_log import log_call
from memory.llm import LLMError, LLMRequest, LLMResult, RequestTooLarge, TextSink, ToolCall, Turn, Usage

log = logging.getLogger(__name__)
ANTHROPIC_DEFAULTS = ("claude-",)  # a model tier still named as for Anthropic: not this server's


class OpenAILLM:
    name = "openai"
    supports_tools = True

    def __init__(self, config: OpenAIConfig, tiers: ModelTiers):
        try:
            import openai
        except ImportError as exc:
            raise LLMError(
                "llm.provider is 'openai' but the openai package is missing: pip install -e '.[openai]'",
                retryable=False,
            ) from exc
        self._openai = openai
        self._served: str | None = None  # the server's own model, when none was configured
        self.config = config
        self.tiers = tiers
        self.client = openai.AsyncOpenAI(
            api_key=config.api_key.get_secret_value() if config.api_key else "not-needed",
            base_url=config.base_url,
            timeout=config.timeout_seconds,
            max_retries=config.max_retries,
        )

    async def complete(self, request: LLMRequest, on_text: TextSink | None = None) -> LLMResult:
        model = request.model or await self._model(getattr(self.tiers, request.tier))
        started = time.monotonic()
        try:
            response = await self.client.chat.completions.create(
                model=model, max_tokens=request.max_tokens,
                **to_chat_params(request),
            )
        except self._openai.APIError as exc:
            status = getattr(exc, "status_code", None)
            if status == 400 and too_long(str(exc)):
                raise RequestTooLarge(f"the model server refused the request as too long: {exc}") from exc
            raise LLMError(f"The model server failed ({status or 'no answer'}): {exc}",
                           retryable=status is None or status >= 500 or status == 429,
                           status=status) from exc
        answer = response.choices[0].message
        text = answer.content or ""
        calls = tuple(ToolCall(c.id, c.function.name, _arguments(c.function.arguments))
                      for c in answer.tool_calls or () if getattr(c, "function", None) is not None)
        details = getattr(response.usage, "prompt_tokens_details", None)
        cached = getattr(details, "cached_tokens", 0) or 0
        usage = Usage(
            input_tokens=(response.usage.prompt_tokens - cached) if response.usage else 0,
            output_tokens=response.usage.completion_tokens if response.usage else 0,
            cache_read_input_tokens=cached,
        )
        log_call(self.name, model, request, usage, time.monotonic() - started)
        if on_text and text:
            on_text(text)
        return LLMResult(text=text, usage=usage, model=response.model or model,
                         stop_reason=response.choices[0].finish_reason, tool_calls=calls)

    async def _model(self, configured: str) -> str:
        """The tier's model; Anthropic's default names mean none was chosen for this server: the first model it
        serves (`/v1/models`: llama.cpp, vLLM, Ollama), asked once."""
        if not configured.startswith(ANTHROPIC_DEFAULTS):
            return configured
        if self._served is None:
            try:
                served = [m.id async for m in self.client.models.list()]
            except self._openai.APIError as exc:
                served = []
                log.warning("the model server did not list its models (%s)", exc)
            if not served:  # a server with one model (llama.cpp) takes any name: say so once, then try it
                log.warning("persona.models names no model for this server; sending %r: set persona.models "
                            "standard and light to what it serves", configured)
            self._served = served[0] if served else configured
        return self._served

    async def aclose(self) -> None:
        await self.client.close()


def to_chat_params(request: LLMRequest) -> dict[str, Any]:
    """messages, and tools and tool_choice when the request has tools, in OpenAI's function shape."""
    params: dict[str, Any] = {"messages": to_chat_messages(request)}
    if request.tools:
        params["tools"] = [{"type": "function", "function": {"name": t.name, "description": t.description,
                                                             "parameters": t.input_schema}} for t in request.tools]
    if request.tool_choice is not None:
        params["tool_choice"] = ({"auto": "auto", "any": "required", "none": "none"}.get(request.tool_choice)
                                 or {"type": "function", "function": {"name": request.tool_choice}})
    return params


def _arguments(raw: str) -> dict[str, Any]:
    """A tool call's arguments; a model that wrote no valid JSON object gets its text back under "raw"."""
    try:
        parsed = json.loads(raw or "{}")
    except json.JSONDecodeError:
        return {"raw": raw}
    return parsed if isinstance(parsed, dict) else {"raw": raw}


def to_chat_messages(request: LLMRequest) -> list[dict[str, Any]]:
    """Chat-completions messages: one system message, tool calls and results in OpenAI's shape."""
    request = request.replayable()
    messages: list[dict[str, Any]] = []
    system = "\n\n".join(b.text for b in request.system if b.text)
    if system:
        messages.append({"role": "system", "content": system})
    for turn in request.turns:
        messages.extend(_turn(turn))
    return messages


def _turn(turn: Turn) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    texts = [b.text for b in turn.blocks if b.kind == "text" and b.text]
    calls = [b for b in turn.blocks if b.kind == "tool_use"]
    for result in (b for b in turn.blocks if b.kind == "tool_result"):
        out.append({"role": "tool", "tool_call_id": result.tool_id, "content": result.text})
    if turn.role == "assistant":
        message: dict[str, Any] = {"role": "assistant", "content": "\n\n".join(texts) or None}
        if calls:
            message["tool_calls"] = [
                {"id": c.tool_id, "type": "function",
                 "function": {"name": c.tool_name, "arguments": json.dumps(c.tool_input or {})}}
                for c in calls
            ]
        out.append(message)
    elif texts:
        out.append({"role": "user", "content": "\n\n".join(texts)})
    return out
