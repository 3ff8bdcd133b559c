"""A loopback fake of Anthropic's Messages API that the real SDK talks to through base_url.

It rejects requests that break the Messages rules (DESIGN.md section 5) with Anthropic's 400 error
shape, simulates the prompt cache (prefix hashes written at breakpoints, 20-block lookback, a
minimum cacheable length, 5 m / 1 h TTL) and reports usage; it can be told to fail or hang.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from memory.tokens import count_tokens

LOOKBACK_BLOCKS = 20
MAX_BREAKPOINTS = 4
TTL_SECONDS = {"5m": 300, "1h": 3600}
ERROR_TYPES = {
    400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
    404: "not_found_error", 429: "rate_limit_error", 500: "api_error", 529: "overloaded_error",
}


class RequestRejected(Exception):
    """A request that breaks the Messages rules; the message is what Anthropic would say."""


@dataclass
class Fault:
    status: int | None = None  # answer with this error status
    hang: bool = False  # never answer (until the client gives up)
    cut: bool = False  # drop the connection in the middle of a streamed answer
    stall: bool = False  # stop sending in the middle of a streamed answer, connection open
    unfinished: bool = False  # end a streamed answer cleanly but without its final events


@dataclass
class CallRecord:
    body: dict[str, Any]
    usage: dict[str, int]
    status: int


@dataclass
class FakeAnthropic:
    """Start with `await start()`; `base_url` is then ready for AsyncAnthropic(base_url=...)."""

    min_cacheable_tokens: int = 1024
    clock: Callable[[], float] = time.monotonic
    # A reply's text, or its content blocks (text and tool_use dicts) to answer with tool calls.
    responder: Callable[[dict[str, Any]], str | list[dict[str, Any]]] | None = None
    retry_after_ms: int = 1  # keeps the SDK's back-off short in tests
    calls: list[CallRecord] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    _cache: dict[str, float] = field(default_factory=dict)  # prefix hash -> expiry
    _runner: web.AppRunner | None = None
    _released: asyncio.Event = field(default_factory=asyncio.Event)
    base_url: str = ""

    # lifecycle

    async def start(self) -> FakeAnthropic:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/messages", self._messages)
        app.router.add_post("/v1/messages/count_tokens", self._count_tokens)
        self._runner = web.AppRunner(app, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.base_url = f"http://{host}:{port}"
        return self

    async def stop(self) -> None:
        self._released.set()  # hung handlers end now instead of holding up shutdown
        if self._runner:
            await self._runner.cleanup()

    def fail_next(self, *statuses: int) -> None:
        self.faults.extend(Fault(status=s) for s in statuses)

    def hang_next(self, count: int = 1) -> None:
        self.faults.extend(Fault(hang=True) for _ in range(count))

    def cut_next(self, count: int = 1) -> None:
        self.faults.extend(Fault(cut=True) for _ in range(count))

    def stall_next(self, count: int = 1) -> None:
        self.faults.extend(Fault(stall=True) for _ in range(count))

    def unfinish_next(self, count: int = 1) -> None:
        self.faults.extend(Fault(unfinished=True) for _ in range(count))

    def forget_cache(self) -> None:
        self._cache.clear()

    # handlers

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        fault = self.faults.pop(0) if self.faults else Fault()
        if fault.hang:
            await self._released.wait()
            return _error(500, "released at shutdown")
        if fault.status:
            self.calls.append(CallRecord({}, {}, fault.status))
            return _error(fault.status, f"simulated {fault.status}", self.retry_after_ms)
        try:
            body = await request.json()
        except json.JSONDecodeError:
            return _error(400, "request body is not valid JSON")
        try:
            validate_request(body)
        except RequestRejected as exc:
            self.calls.append(CallRecord(body, {}, 400))
            return _error(400, str(exc))
        usage = self.account(body)
        answer = self.responder(body) if self.responder else default_reply(body)
        content = [{"type": "text", "text": answer}] if isinstance(answer, str) else answer
        content = _as_forced(body.get("tool_choice"), content, len(self.calls))
        usage["output_tokens"] = sum(count_tokens(b.get("text") or json.dumps(b.get("input", {}))) for b in content)
        self.calls.append(CallRecord(body, usage, 200))
        calls_tools = any(b["type"] == "tool_use" for b in content)
        message = {
            "id": f"msg_fake_{len(self.calls)}", "type": "message", "role": "assistant",
            "model": body["model"], "content": content,
            "stop_reason": "tool_use" if calls_tools else "end_turn", "stop_sequence": None, "usage": usage,
        }
        if body.get("stream"):
            return await _stream(request, message, fault, self._released)
        return web.json_response(message)

    async def _count_tokens(self, request: web.Request) -> web.Response:
        body = await request.json()
        try:
            validate_request({**body, "max_tokens": 1})
        except RequestRejected as exc:
            return _error(400, str(exc))
        return web.json_response({"input_tokens": sum(t for _, t, _ in flatten(body))})

    # the prompt cache

    def account(self, body: dict[str, Any]) -> dict[str, int]:
        """Usage for a request under the caching rules, updating the simulated cache."""
        blocks = flatten(body)
        now = self.clock()
        cumulative, total = [], 0
        for _, tokens, _ in blocks:
            total += tokens
            cumulative.append(total)
        hashes = _prefix_hashes(blocks)
        breakpoints = [i for i, (_, _, ttl) in enumerate(blocks) if ttl]
        read_upto = -1
        for bp in breakpoints:
            for j in range(bp, max(-1, bp - LOOKBACK_BLOCKS - 1), -1):
                if self._cache.get(hashes[j], -1.0) > now:
                    read_upto = max(read_upto, j)
                    break
        written_upto = read_upto
        for bp in breakpoints:
            if cumulative[bp] >= self.min_cacheable_tokens:
                ttl = TTL_SECONDS[blocks[bp][2]]
                self._cache[hashes[bp]] = max(self._cache.get(hashes[bp], 0.0), now + ttl)
                written_upto = max(written_upto, bp)
        if read_upto >= 0:  # a hit refreshes the entry's lifetime
            self._cache[hashes[read_upto]] = max(self._cache[hashes[read_upto]], now + 300)
        cache_read = cumulative[read_upto] if read_upto >= 0 else 0
        cache_creation = (cumulative[written_upto] if written_upto >= 0 else 0) - cache_read
        return {
            "input_tokens": total - cache_read - cache_creation,
            "cache_read_input_tokens": cache_read,
            "cache_creation_input_tokens": cache_creation,
            "output_tokens": 0,
        }


def default_reply(body: dict[str, Any]) -> str:
    """Echo the newest message (its last line: a day line may open it); it comes before the time and recall notes."""
    last = body["messages"][-1]
    texts = [b.get("text", "") for b in _content(last)
             if b.get("type") == "text" and not b.get("text", "").startswith(("[Now:", "[Recall:"))]
    return "fake reply to: " + (texts[-1].splitlines()[-1][-200:] if texts and texts[-1] else "(no text)")


# validation: the Messages rules of DESIGN.md section 5


def validate_request(body: dict[str, Any]) -> None:
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise RequestRejected("model: Field required")
    if not isinstance(body.get("max_tokens"), int) or body["max_tokens"] < 1:
        raise RequestRejected("max_tokens: must be a positive integer")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestRejected("messages: at least one message is required")
    _validate_system(body.get("system"))
    _validate_tools(body.get("tools"), body.get("tool_choice"))
    if not body.get("tools") and any(b.get("type") in ("tool_use", "tool_result")
                                     for m in messages for b in _content(m)):
        raise RequestRejected("Requests which include `tool_use` or `tool_result` blocks must define tools.")
    previous_tool_uses: set[str] = set()
    for i, message in enumerate(messages):
        role = message.get("role")
        if role not in ("user", "assistant"):
            raise RequestRejected(f"messages.{i}.role: Input should be 'user' or 'assistant'")
        if i == 0 and role != "user":
            raise RequestRejected("messages: first message must use the \"user\" role")
        if i > 0 and role == messages[i - 1].get("role"):
            raise RequestRejected(f"messages.{i}: roles must alternate between \"user\" and \"assistant\"")
        content = _content(message)
        if not content:
            raise RequestRejected(f"messages.{i}: all messages must have non-empty content")
        for j, block in enumerate(content):
            _validate_block(block, f"messages.{i}.content.{j}", role)
        results = _leading_tool_results(content)
        if any(b.get("type") == "tool_result" for b in content[len(results):]):
            raise RequestRejected(f"messages.{i}: tool_result blocks must come first in the user message")
        if previous_tool_uses:
            answered = {b.get("tool_use_id") for b in results}
            missing = previous_tool_uses - answered
            if missing:
                raise RequestRejected(
                    f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately "
                    f"after: {', '.join(sorted(missing))}. Each `tool_use` block must have a "
                    "corresponding `tool_result` block in the next message."
                )
        expected = previous_tool_uses
        for b in results:
            if b.get("tool_use_id") not in expected:
                raise RequestRejected(
                    f"messages.{i}: unexpected `tool_use_id` found in `tool_result` blocks: "
                    f"{b.get('tool_use_id')}. Each `tool_result` block must have a corresponding "
                    "`tool_use` block in the previous message."
                )
        previous_tool_uses = (
            {b["id"] for b in content if b.get("type") == "tool_use"} if role == "assistant" else set()
        )
    if previous_tool_uses:
        raise RequestRejected("messages: the last assistant message has `tool_use` blocks with no results")
    _validate_breakpoints(body)


TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def _validate_tools(tools: Any, choice: Any) -> None:
    if tools is None:
        if choice is not None:
            raise RequestRejected("tool_choice may only be specified while providing tools.")
        return
    if not isinstance(tools, list):
        raise RequestRejected("tools: Input should be a valid list")
    names = set()
    for j, tool in enumerate(tools):
        if set(tool) - {"name", "description", "input_schema", "cache_control"}:
            raise RequestRejected(f"tools.{j}: Extra inputs are not permitted")
        if not isinstance(tool.get("name"), str) or not TOOL_NAME.match(tool["name"]):
            raise RequestRejected(f"tools.{j}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'")
        schema = tool.get("input_schema")
        if not isinstance(schema, dict) or schema.get("type") != "object":
            raise RequestRejected(f"tools.{j}.input_schema: an object schema is required")
        if tool["name"] in names:
            raise RequestRejected(f"tools: Tool names must be unique ({tool['name']})")
        names.add(tool["name"])
    if choice is not None:
        kind = choice.get("type") if isinstance(choice, dict) else None
        if kind not in ("auto", "any", "tool", "none"):
            raise RequestRejected("tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'")
        if kind == "tool" and choice.get("name") not in names:
            raise RequestRejected(f"tool_choice.name: no tool named {choice.get('name')!r}")


def _validate_system(system: Any) -> None:
    if system is None or isinstance(system, str):
        return
    if not isinstance(system, list):
        raise RequestRejected("system: Input should be a valid string or list of text blocks")
    for j, block in enumerate(system):
        if block.get("type") != "text":
            raise RequestRejected(f"system.{j}.type: Input should be 'text'")
        _validate_block(block, f"system.{j}", "system")


def _validate_block(block: dict[str, Any], where: str, role: str) -> None:
    kind = block.get("type")
    if kind == "text":
        text = block.get("text")
        if not isinstance(text, str) or not text:
            raise RequestRejected(f"{where}: text content blocks must be non-empty")
        if not text.strip():
            raise RequestRejected(f"{where}: text content blocks must contain non-whitespace text")
    elif kind == "tool_use":
        if role != "assistant":
            raise RequestRejected(f"{where}: tool_use blocks are only allowed in assistant messages")
        if not block.get("id") or not block.get("name") or not isinstance(block.get("input"), dict):
            raise RequestRejected(f"{where}: tool_use needs id, name and an input object")
    elif kind == "image":
        source = block.get("source") or {}
        if role != "user":
            raise RequestRejected(f"{where}: image blocks are only allowed in user messages")
        if source.get("type") != "url" or not str(source.get("url", "")).startswith("https://"):
            raise RequestRejected(f"{where}.source: an image needs a url source with an https URL")
    elif kind == "tool_result":
        if role != "user":
            raise RequestRejected(f"{where}: tool_result blocks are only allowed in user messages")
        if not block.get("tool_use_id"):
            raise RequestRejected(f"{where}.tool_use_id: Field required")
        if isinstance(block.get("content"), str) and not block["content"]:
            raise RequestRejected(f"{where}: tool_result content must be non-empty when given")
    else:
        raise RequestRejected(f"{where}.type: unsupported block type {kind!r}")
    control = block.get("cache_control") or {"type": "ephemeral"}
    if control.get("type") != "ephemeral" or control.get("ttl", "5m") not in TTL_SECONDS:
        raise RequestRejected(f"{where}.cache_control: type must be 'ephemeral', ttl '5m' or '1h'")


def _validate_breakpoints(body: dict[str, Any]) -> None:
    ttls = [ttl for _, _, ttl in flatten(body) if ttl]
    if len(ttls) > MAX_BREAKPOINTS:
        raise RequestRejected(
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {len(ttls)}."
        )
    if "1h" in ttls and "5m" in ttls[: max(i for i, t in enumerate(ttls) if t == "1h")]:
        raise RequestRejected("a ttl='1h' cache_control block must not come after a ttl='5m' one")


def _content(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return content if isinstance(content, list) else []


def _leading_tool_results(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    results = []
    for block in content:
        if block.get("type") != "tool_result":
            break
        results.append(block)
    return results


# the cache's view of a request: tools, then system, then message blocks


IMAGE_TOKENS = 1_600


def flatten(body: dict[str, Any]) -> list[tuple[str, int, str | None]]:
    """(canonical JSON, tokens, breakpoint TTL or None) per block, in cache-prefix order."""
    blocks: list[dict[str, Any]] = [{**tool, "_tool": True} for tool in body.get("tools") or []]
    system = body.get("system")
    if isinstance(system, str):
        blocks.append({"type": "text", "text": system})
    elif system:
        blocks.extend(system)
    for message in body.get("messages", []):
        for block in _content(message):
            blocks.append({**block, "_role": message["role"]})
    out = []
    for block in blocks:
        control = block.get("cache_control")
        plain = {k: v for k, v in block.items() if k != "cache_control"}
        canonical = json.dumps(plain, sort_keys=True, ensure_ascii=False)
        if plain.pop("_tool", False):  # a tool definition weighs its name, description and schema
            text = json.dumps(plain, sort_keys=True)
        elif plain.get("type") == "image":  # what Anthropic charges for a mid-sized image
            out.append((canonical, IMAGE_TOKENS, (control.get("ttl", "5m") if control else None)))
            continue
        else:
            text = plain.get("text") or plain.get("content") or json.dumps(plain.get("input", ""))
        tokens = count_tokens(text if isinstance(text, str) else json.dumps(text)) + 3
        out.append((canonical, tokens, (control.get("ttl", "5m") if control else None)))
    return out


def _prefix_hashes(blocks: list[tuple[str, int, str | None]]) -> list[str]:
    hashes, running = [], hashlib.sha256()
    for canonical, _, _ in blocks:
        running.update(canonical.encode())
        hashes.append(running.copy().hexdigest())
    return hashes


# wire formats


def _error(status: int, message: str, retry_after_ms: int | None = None) -> web.Response:
    headers = {"retry-after-ms": str(retry_after_ms)} if retry_after_ms is not None else {}
    body = {"type": "error", "error": {"type": ERROR_TYPES.get(status, "api_error"), "message": message}}
    return web.json_response(body, status=status, headers=headers)


async def _stream(request: web.Request, message: dict[str, Any], fault: Fault,
                  released: asyncio.Event) -> web.StreamResponse:
    response = web.StreamResponse(headers={"content-type": "text/event-stream", "cache-control": "no-cache"})
    await response.prepare(request)
    usage = message["usage"]
    start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {"type": "message_start", "message": start})]
    for index, block in enumerate(message["content"]):
        events += _block_events(index, block)
    events += [
        ("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                           "usage": {"output_tokens": usage["output_tokens"]}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    if fault.unfinished:
        events = events[:-2]  # no message_delta (stop_reason) and no message_stop
    for i, (name, data) in enumerate(events):
        if fault.cut and i == 3:
            request.transport.close()  # mid-answer, as a dropped connection
            return response
        if fault.stall and i == 3:
            await released.wait()
            return response
        await response.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
    await response.write_eof()
    return response


def _block_events(index: int, block: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """A content block as the API streams it: start, deltas of 16 characters, stop."""
    if block["type"] == "tool_use":
        opening = {**block, "input": {}}
        whole, kind, key = json.dumps(block["input"]), "input_json_delta", "partial_json"
    else:
        opening, whole, kind, key = {"type": "text", "text": ""}, block["text"], "text_delta", "text"
    events: list[tuple[str, dict[str, Any]]] = [
        ("content_block_start", {"type": "content_block_start", "index": index, "content_block": opening})]
    for i in range(0, len(whole), 16):
        events.append(("content_block_delta", {"type": "content_block_delta", "index": index,
                                               "delta": {"type": kind, key: whole[i:i + 16]}}))
    events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    return events


def _as_forced(choice: Any, content: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """A forced tool choice is always answered with that tool's call, as the API does: a scripted text
    answer becomes its input when it is a JSON object (else the input is empty)."""
    if not isinstance(choice, dict) or choice.get("type") != "tool" or any(b["type"] == "tool_use" for b in content):
        return content
    text = "".join(b.get("text", "") for b in content)
    try:
        given = json.loads(text[text.find("{"):text.rfind("}") + 1]) if "{" in text else {}
    except json.JSONDecodeError:
        given = {}
    return [{"type": "tool_use", "id": f"toolu_forced_{n}", "name": choice["name"],
             "input": given if isinstance(given, dict) else {}}]
