"""Any OpenAI-compatible chat endpoint (Ollama, vLLM, llama.cpp server); needs the `openai` extra.

Answers are streamed (text reaches the front end as it is written; a cancelled request closes its stream,
so the server stops computing it). A parameter the server refuses (a JSON schema's form, usage in the
stream, a slot) is dropped for good and the request sent again without it.
"""

from __future__ import annotations

import json
import logging
import time
import zlib
from dataclasses import dataclass, field, replace
from typing import Any

import httpx2

from bot.config import ModelTiers, OpenAIConfig
from bot.fitting import request_tokens, served_tokens, too_long
from bot.providers.server_facts import JsonForm, ServerFacts, probe
from bot.providers.usage_log import log_call
from memory.llm import LLMError, LLMRequest, LLMResult, RequestTooLarge, TextSink, ToolCall, Turn, Usage
from memory.tokens import cached_tokens

log = logging.getLogger(__name__)
ANTHROPIC_DEFAULTS = ("claude-",)  # a model tier still named as for Anthropic: not this server's
JSON_FORMS: tuple[JsonForm, ...] = ("json_schema", "json_object")


class OpenAILLM:
    name = "openai"

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
        self.facts = ServerFacts()
        self.supports_tools = config.tools != "no"
        # A local server (llama.cpp, Ollama, vLLM) keeps what the model wrote in its prefix cache, so a reply's
        # tail is left in place (memory/context.py KeptTail); a cloud API caches prompts alone.
        self.caches_answers = config.local()
        # What this server takes, narrowed when it refuses something: JSON schema forms in the order tried,
        # usage at the end of a stream, pinning to a slot.
        self._json_forms: list[JsonForm] = list(JSON_FORMS)
        self._stream_usage = True
        self.client = openai.AsyncOpenAI(
            api_key=config.api_key.get_secret_value() if config.api_key else "not-needed",
            base_url=config.base_url,
            timeout=config.timeout(),
            max_retries=config.retries(),
        )

    async def discover(self) -> ServerFacts:
        """Ask the server what it is (its context, slots, tokenizer, tools), once, before the first request."""
        if self.config.base_url is None:  # OpenAI itself: nothing to ask
            return self.facts
        key = self.config.api_key.get_secret_value() if self.config.api_key else None
        self.facts = await probe(self.config.base_url, await self._model(self.tiers.standard), key)
        if self.config.tools == "auto" and self.facts.tools is not None:
            self.supports_tools = self.facts.tools
        self._json_forms.sort(key=lambda form: form != self.facts.json_form)
        log.info("model server: %s, context %s, %d slot(s), tools %s", self.facts.kind,
                 self.facts.context_tokens or "not said", self.facts.slots, "yes" if self.supports_tools else "no")
        return self.facts

    async def complete(self, request: LLMRequest, on_text: TextSink | None = None) -> LLMResult:
        model = request.model or await self._model(getattr(self.tiers, request.tier))
        started = time.monotonic()
        while True:
            params = self._params(request, model)
            try:
                answer = await self._stream(params, on_text)
                break
            except self._openai.APIStatusError as exc:
                if not self._dropped_refused(exc, params):
                    raise self._error(exc) from exc
            except self._openai.APIError as exc:
                raise self._error(exc) from exc
            except httpx2.HTTPError as exc:  # the stream broke off after it began
                raise LLMError(f"The model's answer broke off ({type(exc).__name__}); nothing of it was kept.") from exc
        usage = answer.usage or Usage(input_tokens=request_tokens(request), output_tokens=cached_tokens(answer.text),
                                      estimated=True)
        log_call(self.name, model, request, usage, time.monotonic() - started)
        return LLMResult(text=answer.text, usage=usage, model=answer.model or model, stop_reason=answer.finish,
                         tool_calls=answer.tool_calls())

    def _params(self, request: LLMRequest, model: str) -> dict[str, Any]:
        sent = request if self.supports_tools else replace(request, tools=(), tool_choice=None)
        params: dict[str, Any] = {"model": model, "max_tokens": request.max_tokens, **to_chat_params(sent)}
        if request.response_schema is not None and self._json_forms:
            params["response_format"] = response_format(self._json_forms[0], request.response_schema)
        if self._stream_usage:
            params["stream_options"] = {"include_usage": True}
        if self.facts.kind == "llama.cpp" and self.facts.slots > 1:
            params["extra_body"] = {"id_slot": slot_for(request, self.facts.slots), "cache_prompt": True}
        return params

    async def _stream(self, params: dict[str, Any], on_text: TextSink | None) -> _Answer:
        answer = _Answer()
        stream = await self.client.chat.completions.create(**params, stream=True)
        try:
            async for chunk in stream:
                answer.add(chunk, on_text)
        finally:
            await stream.close()  # cancelled or done: the server stops computing this answer
        if answer.finish is None:
            raise LLMError("The model's answer ended before it was finished; nothing of it was kept.")
        return answer

    def _dropped_refused(self, exc: Any, params: dict[str, Any]) -> bool:
        """A 400/422 naming a parameter this server does not take: drop it from now on (True: send again)."""
        said = str(exc).lower()
        if exc.status_code not in (400, 422) or too_long(said):
            return False
        if "response_format" in params and ("response_format" in said or "json_schema" in said):
            log.warning("the model server refused response_format %s", self._json_forms.pop(0))
            return True
        if "stream_options" in params and "stream_options" in said:
            self._stream_usage = False
            return True
        if "extra_body" in params and ("id_slot" in said or "slot" in said):
            self.facts = replace(self.facts, slots=0)
            return True
        if "tools" in params and "tool" in said:
            log.warning("the model server refused tools; recall comes in the request instead (llm.openai.tools: no)")
            self.supports_tools = False
            return True
        return False

    def _error(self, exc: Any) -> LLMError:
        status = getattr(exc, "status_code", None)
        if status == 400 and too_long(str(exc)):
            return RequestTooLarge(f"the model server refused the request as too long: {exc}", served_tokens(str(exc)))
        if isinstance(exc, self._openai.APITimeoutError):
            return LLMError(f"The model did not answer within {self.config.timeout():g} s.")
        return LLMError(f"The model server failed ({status or 'no answer'}): {exc}",
                        retryable=status is None or status >= 500 or status == 429, status=status)

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


@dataclass
class _Answer:
    """An answer as its stream arrives: text, tool calls by index, the stop reason, usage."""

    text: str = ""
    finish: str | None = None
    model: str = ""
    usage: Usage | None = None
    calls: dict[int, list[str]] = field(default_factory=dict)  # index -> [id, name, arguments]

    def add(self, chunk: Any, on_text: TextSink | None) -> None:
        self.model = chunk.model or self.model
        if chunk.usage is not None:
            self.usage = _usage(chunk.usage, getattr(chunk, "timings", None))
        for choice in chunk.choices:
            delta = choice.delta
            if delta is not None and delta.content:
                self.text += delta.content
                if on_text:
                    on_text(delta.content)
            for piece in (delta.tool_calls or ()) if delta is not None else ():
                call = self.calls.setdefault(piece.index, [f"call_{piece.index}", "", ""])
                call[0] = piece.id or call[0]
                if piece.function is not None:
                    call[1] += piece.function.name or ""
                    call[2] += piece.function.arguments or ""
            self.finish = choice.finish_reason or self.finish

    def tool_calls(self) -> tuple[ToolCall, ...]:
        return tuple(ToolCall(i, name, _arguments(args)) for i, name, args in self.calls.values() if name)


def _usage(reported: Any, timings: Any) -> Usage:
    """The server's count; prompt tokens it read from its cache are cache reads (OpenAI's and vLLM's
    cached_tokens, llama.cpp's timings.cache_n)."""
    details = getattr(reported, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", 0) or 0
    if not cached and isinstance(timings, dict):
        cached = int(timings.get("cache_n") or 0)
    return Usage(input_tokens=reported.prompt_tokens - cached, output_tokens=reported.completion_tokens,
                 cache_read_input_tokens=cached)


def slot_for(request: LLMRequest, slots: int) -> int:
    """A conversation keeps its slot (the server reuses the slot's cached prefix); background jobs share the
    last one, so they never push a conversation's prefix out."""
    if not request.cache_key:
        return slots - 1
    return zlib.crc32(request.cache_key.encode()) % (slots - 1)


def response_format(form: JsonForm, schema: dict[str, Any]) -> dict[str, Any]:
    """The answer constrained to a JSON schema: OpenAI's json_schema (vLLM, Ollama, llama.cpp's server), or
    llama-cpp-python's json_object with the schema beside it."""
    if form == "json_object":
        return {"type": "json_object", "schema": schema}
    return {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}


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
    """A tool call's arguments; a model that wrote no valid JSON object gets its text back under "raw". A line
    break inside a string is what a local server's grammar lets through (llama.cpp's `char`): taken as written."""
    try:
        parsed = json.loads(raw or "{}", strict=False)
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
