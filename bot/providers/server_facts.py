"""What a model's server says about itself: which server it is, its context, its slots, how its tokenizer
counts, whether its model calls tools. Asked once at start, briefly; what a server does not say is left to
the settings."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any, Literal

import httpx2

from memory.tokens import cached_tokens

log = logging.getLogger(__name__)

Kind = Literal["llama.cpp", "llama-cpp-python", "vllm", "ollama", "other"]
JsonForm = Literal["json_schema", "json_object"]
PROBE_SECONDS = 5.0
# Counted by the server and by us to learn how much more its tokenizer counts: prose, names, numbers, markup,
# Japanese, as a conversation has them.
SAMPLE = (
    "[Now: Tuesday, 24 November 2026, 09:15 UTC]\n"
    "Kai: I run the lighthouse tours in Pemberly. The next tour is on Saturday at 9 from the north pier; "
    "tickets cost 12 euros, and my sister Lena brings the tide table.\n"
    "Rin: Noted! Saturday 9:00, north pier, 12 EUR. Shall I remind you on Friday evening?\n"
    "Mara: the scaffolding (4 x 2.5 m) arrives on 20 April — if it's dry.\n"
    "ユキ: 明日の午後三時に駅前のカフェで会いましょう。新しい本を持っていきます。\n"
    "- short-term memory v3: Kai and Lena plan a sunset tour (19:30, June); the Osprey seats 16.\n"
)


@dataclass(frozen=True)
class ServerFacts:
    kind: Kind = "other"
    context_tokens: int | None = None  # the context the server runs its model with, if it says
    slots: int = 0  # llama.cpp's parallel slots a request can be pinned to (id_slot)
    tokens_per_estimate: float | None = None  # the server's tokens for each of ours, on SAMPLE
    tools: bool | None = None  # does its model call tools (None: it does not say)
    json_form: JsonForm = "json_schema"  # how it takes a JSON schema for an answer (response_format)


async def probe(base_url: str, model: str, key: str | None) -> ServerFacts:
    """Ask the server at `base_url` (…/v1) what it is; a server that answers none of it is `other`."""
    root = re.sub(r"/v1/?$", "", base_url.rstrip("/"))
    headers = {"Authorization": f"Bearer {key}"} if key else None
    async with httpx2.AsyncClient(timeout=PROBE_SECONDS, headers=headers) as http:
        for ask in (_llama_server, _llama_cpp_python, _ollama, _vllm):
            try:
                facts = await ask(http, root, model)
            except (httpx2.HTTPError, ValueError, KeyError, TypeError) as exc:
                log.debug("%s: %s", ask.__name__, exc)
                continue
            if facts is not None:
                return facts
    return ServerFacts()


async def _get(http: httpx2.AsyncClient, url: str) -> Any:
    response = await http.get(url)
    return response.json() if response.status_code == 200 else None


async def _post(http: httpx2.AsyncClient, url: str, body: dict[str, Any]) -> Any:
    response = await http.post(url, json=body)
    return response.json() if response.status_code == 200 else None


def _ratio(counted: int | None) -> float | None:
    return counted / cached_tokens(SAMPLE) if counted else None


async def _llama_server(http: httpx2.AsyncClient, root: str, model: str) -> ServerFacts | None:
    """llama.cpp's llama-server: /props has the running context, the slots and the template's abilities."""
    props = await _get(http, f"{root}/props")
    if not isinstance(props, dict) or "default_generation_settings" not in props:
        return None
    settings = props["default_generation_settings"]
    caps = props.get("chat_template_caps") or {}
    tools = caps.get("supports_tools") if "supports_tools" in caps else None
    if tools is None and isinstance(props.get("chat_template"), str):
        tools = "tools" in props["chat_template"]
    counted = await _post(http, f"{root}/tokenize", {"content": SAMPLE})
    return ServerFacts("llama.cpp", _int(settings.get("n_ctx")), int(props.get("total_slots") or 1),
                       _ratio(len(counted["tokens"]) if isinstance(counted, dict) else None), tools)


async def _llama_cpp_python(http: httpx2.AsyncClient, root: str, model: str) -> ServerFacts | None:
    """llama-cpp-python's server: it counts tokens, does not say its context, and its chat templates drop
    tools; a JSON schema goes in a json_object response_format."""
    counted = await _post(http, f"{root}/extras/tokenize/count", {"input": SAMPLE})
    if not isinstance(counted, dict) or "count" not in counted:
        return None
    return ServerFacts("llama-cpp-python", tokens_per_estimate=_ratio(int(counted["count"])), tools=False,
                       json_form="json_object")


async def _ollama(http: httpx2.AsyncClient, root: str, model: str) -> ServerFacts | None:
    """Ollama: /api/show has the model's abilities and its num_ctx, if the model sets one."""
    version = await _get(http, f"{root}/api/version")
    if not isinstance(version, dict) or "version" not in version:
        return None
    shown = await _post(http, f"{root}/api/show", {"model": model}) or {}
    found = re.search(r"^num_ctx\s+(\d+)", str(shown.get("parameters") or ""), re.MULTILINE)
    capabilities = shown.get("capabilities")
    # Without num_ctx the context is the server's (OLLAMA_CONTEXT_LENGTH), which it does not say.
    return ServerFacts("ollama", int(found.group(1)) if found else None,
                       tools=("tools" in capabilities) if isinstance(capabilities, list) else None)


async def _vllm(http: httpx2.AsyncClient, root: str, model: str) -> ServerFacts | None:
    """vLLM: /v1/models has max_model_len; /tokenize counts."""
    listed = await _get(http, f"{root}/v1/models")
    models = listed.get("data") if isinstance(listed, dict) else None
    if not models or not isinstance(models, list) or "max_model_len" not in models[0]:
        return None
    chosen = next((m for m in models if m.get("id") == model), models[0])
    counted = await _post(http, f"{root}/tokenize", {"model": chosen["id"], "prompt": SAMPLE})
    return ServerFacts("vllm", _int(chosen.get("max_model_len")),
                       tokens_per_estimate=_ratio(int(counted["count"]) if isinstance(counted, dict) else None))


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and value > 0 else None
