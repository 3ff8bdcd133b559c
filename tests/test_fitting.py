"""Every request inside the model's context (issue 27, points 1-2): sized before it is sent, calibrated on what
the server counted, shrunk (never resent unchanged) when it does not fit."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest
from aiohttp import web

from bot.config import ModelTiers, OpenAIConfig
from bot.fitting import FittedLLM, request_tokens, served_tokens
from bot.providers.openai_llm import OpenAILLM
from memory.llm import Block, LLMRequest, LLMResult, RequestTooLarge, Turn, Usage
from memory.summarise import Line, summarise
from tests.http_server import serving

ANSWERS = json.loads((Path(__file__).parent / "fixtures" / "real_model_answers.json").read_text(encoding="utf-8"))


class Counting:
    """A server whose tokenizer counts `ratio` times cl100k, with a context of `context` tokens (a 400 past it)."""

    name = "counting"

    def __init__(self, ratio: float = 1.3, context: int = 2048, counts: bool = True):
        self.ratio, self.context = ratio, context
        self.counts = counts  # says its count in each answer's usage (llama-cpp-python's stream does not)
        self.requests: list[LLMRequest] = []

    async def complete(self, request: LLMRequest, on_text=None) -> LLMResult:
        self.requests.append(request)
        served = int(request_tokens(request) * self.ratio)
        if served + request.max_tokens > self.context:
            raise RequestTooLarge(ANSWERS["refused_for_length"]["body"]["error"]["message"])
        usage = Usage(input_tokens=served, output_tokens=8) if self.counts else \
            Usage(input_tokens=request_tokens(request), output_tokens=8, estimated=True)
        return LLMResult("Kai: the tour is on Saturday.", usage, stop_reason="stop")

    async def aclose(self) -> None:
        return None


def _request(words: int, max_tokens: int = 256) -> LLMRequest:
    return LLMRequest(system=(Block("You are Rin."),), turns=(Turn.text("user", "tide " * words),),
                      max_tokens=max_tokens)


async def test_a_request_that_cannot_fit_is_refused_before_the_server_is_asked():
    server = Counting()
    fitted = FittedLLM(server, 2048)
    with pytest.raises(RequestTooLarge, match="of the model's 2048"):
        await fitted.complete(_request(2100))
    assert server.requests == []


async def test_the_answer_gets_the_room_the_context_leaves_and_the_estimate_learns_the_servers_count():
    server = Counting(ratio=1.3)
    fitted = FittedLLM(server, 2048)
    await fitted.complete(_request(100))
    assert fitted.ratio >= 1.3  # learnt from what the server counted
    planned: list[float] = []
    fitted.on_planned = planned.append
    await fitted.complete(_request(100))
    result = await fitted.complete(_request(1400, max_tokens=600))  # 1,400 words at 1.3: ~1,850 of 2,048
    assert result.text and server.requests[-1].max_tokens < 600  # asked for what fits, not refused by the server
    assert fitted.planned >= 1.3 and not planned  # raised once, at the first count (before the callback)


async def test_a_summary_too_large_for_a_small_context_is_written_in_smaller_parts():
    server = Counting(ratio=1.3, context=2048)
    fitted = FittedLLM(server, 2048)
    lines = [Line.of(f"[kai]: message {i} about the lighthouse tour, the tide table and the north pier")
             for i in range(400)]
    summary = await summarise(fitted, "Write the memory.", lines, chunk_tokens=6000, max_tokens=300)
    assert summary
    refused = [r for r in server.requests if int(request_tokens(r) * 1.3) + r.max_tokens > 2048]
    assert len(refused) <= 2  # before it has counted, the server may refuse; then it is shrunk and sent again ...
    assert len({str(r) for r in refused}) == len(refused)  # ... never the same request twice
    assert all(int(request_tokens(r) * 1.3) + r.max_tokens <= 2048 for r in server.requests[-3:])


async def test_a_servers_400_for_length_is_request_too_large_and_not_retried():
    calls = []

    async def completions(request: web.Request) -> web.Response:
        calls.append(await request.json())
        refused = ANSWERS["refused_for_length"]
        return web.json_response(refused["body"], status=refused["status"])

    async with serving({("POST", "/v1/chat/completions"): completions}) as url:
        llm = OpenAILLM(OpenAIConfig(base_url=url, max_retries=2), ModelTiers(standard="smol"))
        try:
            with pytest.raises(RequestTooLarge, match="maximum context length"):
                await llm.complete(_request(10))
        finally:
            await llm.aclose()
    assert len(calls) == 1  # a 400 is not retried by the client, and never resent unchanged by Stelis


async def test_at_a_2k_context_the_conversation_and_its_memory_never_lock_up(make_config):
    from bot.clock import Clock
    from bot.engine import Engine
    from memory.records import Scope

    server = Counting(ratio=1.3, context=2048)
    clock = Clock()
    config = make_config(llm={"context_tokens": 2048, "max_output_tokens": 256}, snapshots={"interval_seconds": 0},
                         short_term_history={"conversation_idle_seconds": 60, "message_threshold": 500})
    engine = await Engine.open(config, server, clock)
    try:
        scope = Scope.channel(1, 2)
        root = await engine.stelis.root(scope)
        for i in range(60):
            await engine.conversations.hear(scope,
                                            f"message {i}: the lighthouse tour, the tide table and the north pier " * 3,
                              author_name="kai", author_id=5)
            assert (await engine.conversations.reply(root.id)).content  # every reply, past the window's cuts
        clock.advance(120)
        outcomes = await engine.memory.run_due()
        assert outcomes and all(o.error is None for o in outcomes) and outcomes[0].short_term is not None
        assert (await engine.conversations.context(root.id, calls=False)).request.turns
    finally:
        await engine.close()
    refused = [r for r in server.requests if int(request_tokens(r) * 1.3) + r.max_tokens > 2048]
    assert len(refused) <= 2 and len({str(r) for r in refused}) == len(refused)


def test_a_server_that_does_not_say_its_context_is_planned_small_when_local_and_said_so(make_config, caplog):
    from bot.fitting import UNSAID_LOCAL_CONTEXT, to_server
    from bot.providers.server_facts import ServerFacts

    def planned(url: str, **llm: object) -> int:
        config = make_config(llm={"provider": "openai", "openai": {"base_url": url}, **llm})
        return to_server(config, ServerFacts("llama-cpp-python")).llm.context_tokens

    assert planned("http://127.0.0.1:8000/v1") == UNSAID_LOCAL_CONTEXT
    assert "does not say its context size" in caplog.text
    assert planned("http://127.0.0.1:8000/v1", context_tokens=2048) == 2048  # given: kept
    assert planned("https://api.example.com/v1") == 200_000  # a cloud API: its models are large
    small = to_server(make_config(llm={"provider": "openai", "openai": {"base_url": "http://127.0.0.1:1/v1"}}),
                      ServerFacts("llama.cpp", context_tokens=4096)).llm
    assert (small.context_tokens, small.max_output_tokens) == (4096, 1024)
    offline = make_config()
    assert to_server(offline, ServerFacts()) is offline


class Verbose:
    """A small model that writes until max_tokens every time, the source's own words (what SmolLM2 did)."""

    name = "verbose"

    def __init__(self) -> None:
        self.requests: list[LLMRequest] = []

    async def complete(self, request: LLMRequest, on_text=None) -> LLMResult:
        self.requests.append(request)
        words = request.turns[-1].blocks[0].text.split("<transcript>")[-1].replace("</transcript>", "").split()
        text = " ".join(words[:int(request.max_tokens * 0.7)])
        return LLMResult(text, Usage(input_tokens=request_tokens(request), output_tokens=request.max_tokens),
                         stop_reason="stop")

    async def aclose(self) -> None:
        return None


async def test_parts_are_summarised_at_most_half_their_size_so_combining_ends():
    """make e2e at 2,048: part summaries as long as their parts were combined into 18 parts, then stored with
    the request's [part N of M] headers."""
    llm = Verbose()
    lines = [Line.of(f"kai: line {i} about the Osprey, the tide table and Lena's sunset tour at 19:30")
             for i in range(300)]
    summary = await summarise(llm, "Write the memory.", lines, chunk_tokens=400, max_tokens=600)
    assert "[part" not in summary and summary
    parts = [r for r in llm.requests if "of a longer record" in r.turns[-1].blocks[0].text]
    assert parts and all(r.max_tokens <= 200 for r in parts)  # half a 400-token part
    rounds = list(dict.fromkeys(int(re.search(r"part \d+ of (\d+)", r.turns[-1].blocks[0].text).group(1))
                                for r in parts))
    assert all(later <= earlier / 2 for earlier, later in itertools.pairwise(rounds))  # each round halves
    assert "of a longer record" not in llm.requests[-1].turns[-1].blocks[0].text  # ... down to one request


async def test_a_pulse_on_a_busy_day_fits_a_2k_context(make_config):
    """make e2e: react_check needed 2,007 tokens of 2,048 once the day's messages were in its view."""
    from bot.providers.offline import OfflineLLM
    from memory.records import Scope
    from tests.context_helpers import pulse_at_2k

    class Keeping(OfflineLLM):
        def __init__(self) -> None:
            self.requests: list[LLMRequest] = []

        async def complete(self, request: LLMRequest, on_text=None) -> LLMResult:
            self.requests.append(request)
            return await super().complete(request, on_text)

    home, llm = Scope.channel(1, 20), Keeping()
    day = [f"note {i}: " + "the Osprey's inspection, the tide table and the sunset tour " * 4 for i in range(40)]
    outcome = await pulse_at_2k(make_config, llm, home, day)
    assert outcome.action != "error", outcome.detail
    routed = [r for r in llm.requests if r.response_schema is not None]
    assert routed and all(request_tokens(r) + r.max_tokens <= 2048 * 0.95 for r in routed)
    assert "note 39" in routed[0].turns[-1].blocks[0].text  # the newest of the day stays in view


async def test_a_conversation_step_with_a_long_task_fits_a_2k_context(make_config, tmp_path):
    from bot.engine import Engine
    from bot.providers.offline import OfflineLLM
    from memory.records import Scope

    folder = tmp_path / "pb"
    folder.mkdir()
    (folder / "long.json").write_text(json.dumps({
        "name": "long", "description": "a step whose task carries a long text", "start_node": "say",
        "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        "nodes": [{"id": "say", "type": "llm", "context_profile": "conversation", "action": "Answer this: {text}"}]}))
    config = make_config(llm={"context_tokens": 2048, "max_output_tokens": 200}, snapshots={"interval_seconds": 0},
                         playbooks={"folder": str(folder)})
    engine = await Engine.open(config, OfflineLLM())
    try:
        here = Scope.channel(1, 30)
        for i in range(20):
            await engine.conversations.hear(here, f"line {i}: the tide table and the Osprey " * 5, author_name="kai")
        done = await engine.playbooks.run(here, "long", {"text": "the north pier and the tour " * 400})
    finally:
        await engine.close()
    assert done.outputs["last"]  # answered: the request fitted (a RequestTooLarge would have failed the run)


async def test_a_reply_the_server_refuses_for_length_is_planned_smaller_and_sent_once_more(make_config):
    from bot.engine import Engine
    from bot.providers.offline import OfflineLLM
    from memory.records import Scope

    class RefusesOnce(OfflineLLM):
        """A server that refuses the first full reply for length (its tokenizer counts more than planned)."""

        def __init__(self) -> None:
            self.replies: list[LLMRequest] = []

        async def complete(self, request: LLMRequest, on_text=None) -> LLMResult:
            if request.purpose == "reply":
                self.replies.append(request)
                if len(self.replies) == 1:  # its tokenizer counts 1.6 times ours, as its message says
                    served = int(request_tokens(request) * 1.6)
                    said = (f"This model's maximum context length is 2048 tokens. However, you requested "
                            f"{served + 200} tokens ({served} in the messages, 200 in the completion).")
                    raise RequestTooLarge(said, served_tokens(said))
            return await super().complete(request, on_text)

    server = RefusesOnce()
    config = make_config(llm={"context_tokens": 2048, "max_output_tokens": 200}, snapshots={"interval_seconds": 0})
    engine = await Engine.open(config, server)
    here = Scope.channel(1, 40)
    try:
        root = await engine.stelis.root(here)
        for i in range(40):
            await engine.conversations.hear(here, f"line {i}: the tide table and the Osprey's deck " * 3,
                                            author_name="kai")
        reply = await engine.conversations.reply(root.id)
    finally:
        await engine.close()
    _, again = server.replies  # refused once, then sent smaller
    assert reply.content and request_tokens(again) * 1.6 + again.max_tokens <= 2048  # planned to fit, answered


def test_the_servers_count_of_a_refused_prompt_is_read_from_its_message():
    assert served_tokens(ANSWERS["refused_for_length"]["body"]["error"]["message"]) == 2279
    assert served_tokens("prompt is too long: 210345 tokens > 200000 maximum") == 210345
    assert served_tokens('{"code":400,"message":"the request exceeds the available context size","type":'
                         '"exceed_context_size_error","n_prompt_tokens":4120,"n_ctx":4096}') == 4120
    assert served_tokens("context length exceeded") is None
