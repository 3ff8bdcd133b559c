"""A loopback OpenAI-compatible server that behaves like the local servers Stelis meets (llama-cpp-python,
llama.cpp's llama-server, vLLM, Ollama): streamed answers, their context limits and refusals, their ways
of taking a JSON schema, their introspection endpoints, llama.cpp's slots and prompt cache."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from aiohttp import web

from bot.providers.offline import example
from memory.tokens import cached_tokens

Flavor = Literal["llama-cpp-python", "llama.cpp", "vllm", "ollama", "openai"]
# What the model writes: its text, or a dict with "text", "tool_calls" ([{"name", "arguments"}]) and
# "finish_reason" ("stop" or "length").
Answer = str | dict[str, Any]


@dataclass
class FakeOpenAI:
    flavor: Flavor = "llama-cpp-python"
    n_ctx: int = 2_048
    slots: int = 1
    tools_work: bool = False  # does the model's chat template take tools (llama.cpp, Ollama)
    model_num_ctx: bool = True  # Ollama: the model sets num_ctx (else the server's own context, not said)
    ratio: float = 1.15  # the model's tokens for each cl100k one
    responder: Callable[[dict[str, Any]], Answer] | None = None
    chunk_delay: float = 0.0  # seconds between streamed pieces
    model: str = "SmolLM2-135M-Instruct.Q4_1.gguf"
    calls: list[dict[str, Any]] = field(default_factory=list)
    refused: list[tuple[int, str]] = field(default_factory=list)
    disconnects: int = 0
    _slot_prompts: dict[int, str] = field(default_factory=dict)
    _runner: web.AppRunner | None = None
    base_url: str = ""

    async def start(self) -> FakeOpenAI:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        routes = {"llama.cpp": [("GET", "/props", self._props), ("POST", "/tokenize", self._tokenize)],
                  "llama-cpp-python": [("POST", "/extras/tokenize/count", self._count)],
                  "vllm": [("POST", "/tokenize", self._tokenize)],
                  "ollama": [("GET", "/api/version", self._version), ("POST", "/api/show", self._show)]}
        for method, path, handler in routes.get(self.flavor, []):
            app.router.add_route(method, path, handler)
        self._runner = web.AppRunner(app, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.base_url = f"http://{host}:{port}/v1"
        return self

    async def stop(self) -> None:
        if self._runner:
            await self._runner.cleanup()

    def tokens(self, text: str) -> int:
        return round(cached_tokens(text) * self.ratio)

    # chat

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        refusal = self._refusal(body)
        if refusal is not None:
            self.refused.append(refusal)
            return web.json_response({"error": {"code": refusal[0], "message": refusal[1]}}, status=refusal[0])
        self.calls.append(body)
        prompt = prompt_text(body)
        prompt_tokens = self.tokens(prompt)
        room = self.n_ctx - prompt_tokens
        max_tokens = min(body.get("max_tokens") or room, room)  # llama.cpp cuts max_tokens silently
        answer = self._answer(body)
        text: str = answer.get("text", "")
        finish = answer.get("finish_reason", "stop")
        words = text.split(" ")
        if self.tokens(text) > max_tokens:  # cut where the room ends
            words = words[:max(1, int(len(words) * max_tokens / max(1, self.tokens(text))))]
            finish = "length"
        cached = self._cached(body, prompt)
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": self.tokens(" ".join(words)),
                 "total_tokens": prompt_tokens + self.tokens(" ".join(words))}
        if self.flavor in ("vllm", "openai"):
            usage["prompt_tokens_details"] = {"cached_tokens": cached}
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": " ".join(words)}
            return web.json_response({"id": "c", "object": "chat.completion", "created": 0, "model": self.model,
                                      "choices": [{"index": 0, "finish_reason": finish, "message": message}],
                                      "usage": usage})
        return await self._stream(request, body, words, answer.get("tool_calls") or [], finish, usage, cached)

    def _refusal(self, body: dict[str, Any]) -> tuple[int, str] | None:
        form = body.get("response_format")
        if form is not None and self.flavor == "llama-cpp-python" and form.get("type") not in ("text", "json_object"):
            return 422, json.dumps({"detail": [{"type": "literal_error", "loc": ["body", "response_format", "type"],
                                                "msg": "Input should be 'text' or 'json_object'"}]})
        if form is not None and self.flavor in ("vllm", "openai") and "schema" in form:
            return 400, "response_format: Extra inputs are not permitted: 'schema'"
        if self.flavor == "vllm" and body.get("tools") and not self.tools_work and body.get("tool_choice") != "none":
            return 400, '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
        tokens = self.tokens(prompt_text(body))
        if tokens >= self.n_ctx:
            return 400, (f"This model's maximum context length is {self.n_ctx} tokens. However, you requested "
                         f"{tokens + (body.get('max_tokens') or 0)} tokens ({tokens} in the messages, "
                         f"{body.get('max_tokens') or 0} in the completion).")
        return None

    def _answer(self, body: dict[str, Any]) -> dict[str, Any]:
        given: Answer = self.responder(body) if self.responder else "Hello from the small model."
        answer = {"text": given} if isinstance(given, str) else dict(given)
        choice = body.get("tool_choice")
        if isinstance(choice, dict) and body.get("tools"):  # a named tool: a grammar makes the call (all servers)
            tool = next(t for t in body["tools"] if t["function"]["name"] == choice["function"]["name"])
            return {"tool_calls": [{"name": tool["function"]["name"],
                                    "arguments": json.dumps(example(tool["function"]["parameters"], ""))}]}
        if not self.tools_work or not body.get("tools"):
            answer.pop("tool_calls", None)
        schema = _schema(body.get("response_format"))
        if schema is not None:  # a grammar holds the model to the schema
            try:
                valid = isinstance(json.loads(answer.get("text", "")), dict)
            except json.JSONDecodeError:
                valid = False
            if not valid:
                answer["text"] = json.dumps(example(schema, answer.get("text", "")))
        return answer

    def _cached(self, body: dict[str, Any], prompt: str) -> int:
        """llama.cpp: the prompt's common prefix with what its slot held last."""
        slot = int(body.get("id_slot", 0)) if self.slots > 1 else 0
        before = self._slot_prompts.get(slot, "")
        self._slot_prompts[slot] = prompt
        same = next((i for i, (a, b) in enumerate(zip(before, prompt, strict=False)) if a != b),
                    min(len(before), len(prompt)))
        return self.tokens(prompt[:same])

    async def _stream(self, request: web.Request, body: dict[str, Any], words: list[str],
                      calls: list[dict[str, Any]], finish: str, usage: dict[str, Any],
                      cached: int) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)

        async def send(delta: dict[str, Any], reason: str | None = None, **extra: Any) -> None:
            chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": self.model,
                     "choices": [{"index": 0, "delta": delta, "finish_reason": reason}] if delta or reason else [],
                     **extra}
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
            if self.chunk_delay:
                await asyncio.sleep(self.chunk_delay)

        try:
            await send({"role": "assistant", "content": ""})
            for i, word in enumerate(words):
                await send({"content": word if i == 0 else f" {word}"})
            for i, call in enumerate(calls):
                await send({"tool_calls": [{"index": i, "id": f"call_{i}", "type": "function",
                                            "function": {"name": call["name"], "arguments": call["arguments"]}}]})
            await send({}, "tool_calls" if calls else finish)
            if (body.get("stream_options") or {}).get("include_usage") and self.flavor != "llama-cpp-python":
                extra = {"timings": {"cache_n": cached, "prompt_n": usage["prompt_tokens"] - cached}} \
                    if self.flavor == "llama.cpp" else {}
                await send({}, usage=usage, **extra)
            await response.write(b"data: [DONE]\n\n")
        except ConnectionResetError:  # the client closed its stream: the server stops writing
            self.disconnects += 1
        except asyncio.CancelledError:
            self.disconnects += 1
            raise
        return response

    # what the server says about itself

    async def _models(self, request: web.Request) -> web.Response:
        entry: dict[str, Any] = {"id": self.model, "object": "model", "owned_by": "me"}
        if self.flavor == "vllm":
            entry |= {"owned_by": "vllm", "max_model_len": self.n_ctx}
        return web.json_response({"object": "list", "data": [entry]})

    async def _props(self, request: web.Request) -> web.Response:
        return web.json_response({"default_generation_settings": {"n_ctx": self.n_ctx}, "total_slots": self.slots,
                                  "chat_template_caps": {"supports_tools": self.tools_work}})

    async def _tokenize(self, request: web.Request) -> web.Response:
        body = await request.json()
        n = self.tokens(body.get("content") or body.get("prompt") or "")
        return web.json_response({"tokens": list(range(n)), "count": n})

    async def _count(self, request: web.Request) -> web.Response:
        return web.json_response({"count": self.tokens((await request.json())["input"])})

    async def _version(self, request: web.Request) -> web.Response:
        return web.json_response({"version": "0.12.0"})

    async def _show(self, request: web.Request) -> web.Response:
        num_ctx = f"num_ctx                        {self.n_ctx}\n" if self.model_num_ctx else ""
        return web.json_response({"parameters": f"{num_ctx}stop \"<|im_end|>\"",
                                  "capabilities": ["completion", *(["tools"] if self.tools_work else [])],
                                  "model_info": {"llama.context_length": 8192}})


def prompt_text(body: dict[str, Any]) -> str:
    """What the model reads: the messages, and the tools when its template takes them."""
    parts = [str(m.get("content") or "") + json.dumps(m.get("tool_calls") or "") for m in body["messages"]]
    return "\n".join(parts) + (json.dumps(body["tools"]) if body.get("tools") else "")


def _schema(form: dict[str, Any] | None) -> dict[str, Any] | None:
    if not form:
        return None
    if form.get("type") == "json_schema":
        return dict((form.get("json_schema") or {}).get("schema") or {"type": "object"})
    if form.get("type") == "json_object":
        return dict(form.get("schema") or {"type": "object"})
    return None


@asynccontextmanager
async def running(**settings: Any) -> AsyncIterator[FakeOpenAI]:
    """A FakeOpenAI with these settings, started for the block."""
    server = await FakeOpenAI(**settings).start()
    try:
        yield server
    finally:
        await server.stop()
