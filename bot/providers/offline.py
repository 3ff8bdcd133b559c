"""The offline model: deterministic, no network; extractive summaries and plain-spoken replies."""

from __future__ import annotations

import hashlib
import json
import re
import time
from typing import Any

from bot.providers.offline_reply import offline_reply
from bot.providers.usage_log import log_call
from memory.extractive import OFFLINE_TAG, extractive_summary
from memory.llm import LLMRequest, LLMResult, TextSink, ToolCall, Turn, Usage
from memory.tokens import count_tokens

_TRANSCRIPT = re.compile(r"<transcript>\n?(.*?)\n?</transcript>", re.DOTALL)


class OfflineLLM:
    name = "offline"

    async def complete(self, request: LLMRequest, on_text: TextSink | None = None) -> LLMResult:
        started = time.monotonic()
        calls: tuple[ToolCall, ...] = ()
        placeholder = False
        if request.purpose == "summary":
            text = extractive_summary(_material(request.turns), request.max_tokens)
        elif (call := _tool_call(request)) is not None:
            text, calls = "", (call,)
        elif request.response_schema is not None:  # no model judged anything: its texts say so, by name
            text = json.dumps(example(request.response_schema, "", label=True), ensure_ascii=False)
        else:
            text, placeholder = offline_reply(request), True
        if on_text:
            on_text(text)
        usage = Usage(
            input_tokens=sum(count_tokens(b.text) for b in request.system)
            + count_tokens(_material(request.turns)),
            output_tokens=count_tokens(text),
        )
        log_call(self.name, "offline", request, usage, time.monotonic() - started)
        return LLMResult(text=text, usage=usage, model="offline", stop_reason="tool_use" if calls else "end_turn",
                         tool_calls=calls, placeholder=placeholder)

    async def aclose(self) -> None:
        return None


def _material(turns: tuple[Turn, ...]) -> str:
    """What a summary request asks about: the transcript inside its tags, else all user text."""
    text = "\n".join(b.text for t in turns if t.role == "user" for b in t.blocks if b.text)
    inside = _TRANSCRIPT.search(text)
    return inside.group(1) if inside else text


def _last_text(request: LLMRequest) -> str:
    """The newest user text: what a structured answer or a tool call is about."""
    for turn in reversed(request.turns):
        texts = [b.text for b in turn.blocks if b.kind == "text" and b.text]
        if turn.role == "user" and texts:
            return texts[-1]
    return ""


def _tool_call(request: LLMRequest) -> ToolCall | None:
    """A deterministic call: the named tool (or the first, when one must be called or may be and none was yet);
    once results came back, no more calls."""
    if not request.tools or request.tool_choice == "none":
        return None
    last = request.turns[-1] if request.turns else None
    if last is not None and any(b.kind == "tool_result" for b in last.blocks):
        return None
    tool = next((t for t in request.tools if t.name == request.tool_choice), request.tools[0])
    about = _last_text(request)
    key = hashlib.sha256(f"{tool.name}:{about}".encode()).hexdigest()[:12]
    return ToolCall(f"toolu_offline_{key}", tool.name, example(tool.input_schema, about))


def example(schema: dict[str, Any], about: str, *, label: bool = False, name: str = "") -> Any:
    """A value valid for a JSON schema, made deterministically from the text it is about (`label`: texts
    name their field instead, for answers no model wrote)."""
    kind = schema.get("type")
    if "enum" in schema:
        return schema["enum"][0]
    if kind == "object":
        properties: dict[str, Any] = schema.get("properties") or {}
        required = set(schema.get("required", properties))
        return {key: example(spec, about, label=label, name=key) for key, spec in properties.items()
                if key in required}
    if kind == "array":
        return [example(schema.get("items") or {"type": "string"}, about, label=label, name=name)]
    if kind == "integer":
        return int(schema.get("minimum", 1))
    if kind == "number":
        return float(schema.get("minimum", 1))
    if kind == "boolean":
        return True
    if label:
        return f"{OFFLINE_TAG} {name or 'text'}".replace("_", " ")
    words = re.findall(r"\w+", about)
    return " ".join(words[-8:]) or "offline"
