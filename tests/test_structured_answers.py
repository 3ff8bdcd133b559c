"""A step that must answer with a JSON object (the pulse's checks, detail_recall's judge): asked in the
form the model's server enforces, validated, asked once more with what was wrong, then ended cleanly."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.config import AnthropicConfig, ModelTiers
from bot.engine import Engine, PlaybookError
from bot.playbooks.runtime import RunResult
from bot.providers.anthropic_llm import AnthropicLLM
from bot.providers.offline import OfflineLLM
from bot.providers.openai_llm import OpenAILLM
from memory.llm import LLMRequest, LLMResult, TextSink
from memory.records import Scope
from tests.context_helpers import pulse_at_2k
from tests.fake_openai import running

HERE = Scope.channel(1, 10)
REAL = json.loads((Path(__file__).parent / "fixtures" / "real_model_answers.json").read_text())
JUDGE = {"name": "judge", "description": "one structured step", "start_node": "check",
         "output_schema": {"type": "object", "properties": {"check": {}}}, "nodes": [
    {"id": "check", "type": "llm", "context_profile": "router", "action": "Did someone ask you something?",
     "response_schema": {"type": "object", "properties": {"react": {"type": "string", "enum": ["no", "yes"]},
                                                          "why": {"type": "string"}},
                         "required": ["react", "why"]},
     "output_key": "check"}]}


class Scripted(OfflineLLM):
    """Answers from a list, keeping each request."""

    def __init__(self, *answers: str | tuple[str, str]) -> None:
        self.answers = list(answers)
        self.requests: list[LLMRequest] = []

    async def complete(self, request: LLMRequest, on_text: TextSink | None = None) -> LLMResult:
        self.requests.append(request)
        if request.response_schema is not None and self.answers:
            answer = self.answers.pop(0)
            text, stop = answer if isinstance(answer, tuple) else (answer, "stop")
            return LLMResult(text, stop_reason=stop)
        return await super().complete(request, on_text)


@contextlib.asynccontextmanager
async def _engine(make_config, tmp_path: Path, llm) -> AsyncIterator[Engine]:
    """An engine with the judge playbook, closed after the block."""
    folder = tmp_path / "pb"
    folder.mkdir(exist_ok=True)
    (folder / "judge.json").write_text(json.dumps(JUDGE))
    engine = await Engine.open(make_config(playbooks={"folder": str(folder)}, snapshots={"interval_seconds": 0}),
                               llm)
    try:
        yield engine
    finally:
        await engine.close()


async def _judged(make_config, tmp_path: Path, llm) -> RunResult:
    """The judge playbook run once with this model."""
    async with _engine(make_config, tmp_path, llm) as engine:
        return await engine.playbooks.run(HERE, "judge", {})


async def test_an_answer_that_is_not_the_json_asked_for_is_asked_again_once_with_what_was_wrong(make_config, tmp_path):
    llm = Scripted(REAL["react_check_not_json"]["text"], '{"react": "no", "why": "nobody asked"}')
    done = await _judged(make_config, tmp_path, llm)
    assert done.outputs["check"] == {"react": "no", "why": "nobody asked"}
    first, again = [r for r in llm.requests if r.response_schema is not None]
    assert again.turns[:-2] == first.turns and again.turns[-2].blocks[0].text == REAL["react_check_not_json"]["text"]
    assert "did not answer with a JSON object" in again.turns[-1].blocks[0].text


async def test_an_answer_cut_off_at_the_length_limit_is_asked_again_shorter(make_config, tmp_path):
    """What SmolLM2 did in make e2e: the grammar held it to JSON, but its "why" ran to max_tokens."""
    cut = ('{ "react": "no", "why": "yes }\n```\n```\nThe model didn\'t answer with a JSON object. The user', "length")
    llm = Scripted(cut, '{"react": "no", "why": "quiet"}')
    done = await _judged(make_config, tmp_path, llm)
    assert done.outputs["check"]["why"] == "quiet"
    assert "cut off at the length limit: keep each text short" in llm.requests[-1].turns[-1].blocks[0].text


async def test_a_line_break_inside_a_string_is_an_answer(make_config, tmp_path):
    """What SmolLM2 answered in make e2e under llama-cpp-python's grammar, whose strings take any character but a
    quote or a backslash: twice refused as no JSON object, the pulse failed."""
    broken = '{ "react": "no", "why": "yes },\n[thedays]\n[" }'
    llm = Scripted(broken)
    done = await _judged(make_config, tmp_path, llm)
    assert done.outputs["check"] == {"react": "no", "why": "yes },\n[thedays]\n["}
    assert len([r for r in llm.requests if r.response_schema is not None]) == 1


def test_the_builtin_structured_steps_bound_their_texts():
    """A grammar-held answer cannot end a string it is never told to end: every free text has a maxLength."""
    from bot.playbooks.library import BUILTIN

    def texts(schema: dict) -> list[dict]:
        found = [schema] if schema.get("type") == "string" and "enum" not in schema else []
        for child in (*(schema.get("properties") or {}).values(), *([schema["items"]] if "items" in schema else [])):
            found += texts(child)
        return found

    checked = 0
    for path in BUILTIN.glob("*.json"):
        for node in json.loads(path.read_text())["nodes"]:
            for text in texts(node.get("response_schema") or {}):
                assert "maxLength" in text, (path.name, node["id"])
                checked += 1
    assert checked >= 7


async def test_a_value_outside_the_schema_is_not_an_answer_either(make_config, tmp_path):
    llm = Scripted('{"react": "maybe", "why": "unsure"}', '{"react": "yes", "why": "kai asked"}')
    done = await _judged(make_config, tmp_path, llm)
    assert done.outputs["check"]["react"] == "yes"
    assert '\'react\' is one of "no", "yes", not "maybe"' in llm.requests[-1].turns[-1].blocks[0].text


async def test_two_unusable_answers_end_the_step_with_an_error_that_says_so(make_config, tmp_path):
    llm = Scripted(REAL["react_check_not_json"]["text"], "I think no.")
    async with _engine(make_config, tmp_path, llm) as engine:
        with pytest.raises(PlaybookError, match="node check: twice no usable answer"):
            await engine.playbooks.run(HERE, "judge", {})
        runs = await engine.playbooks.runs(HERE)
    assert runs[0].run.status == "failed" and len([r for r in llm.requests if r.response_schema]) == 2


async def test_on_anthropic_a_json_answer_is_a_forced_tool_call(make_config, tmp_path, fake_anthropic):
    fake_anthropic.responder = lambda body: '{"react": "yes", "why": "kai asked about the tour"}'
    llm = AnthropicLLM(AnthropicConfig(api_key="k", base_url=fake_anthropic.base_url, max_retries=0), ModelTiers())
    done = await _judged(make_config, tmp_path, llm)
    body = fake_anthropic.calls[-1].body
    assert body["tool_choice"] == {"type": "tool", "name": "answer"}
    assert body["tools"] == [{"name": "answer", "description": "Give your answer.",
                              "input_schema": JUDGE["nodes"][0]["response_schema"]}]
    assert done.outputs["check"] == {"react": "yes", "why": "kai asked about the tour"}


async def test_the_pulse_decides_on_a_small_local_model_that_writes_prose(make_config):
    """The pulse failed on every pulse against llama.cpp (shared/findings/real-models.md): the model wrote prose
    where JSON was asked. The server's grammar now holds it to the schema."""
    home = Scope.channel(1, 20)
    prose = REAL["react_check_not_json"]["text"]
    async with running(flavor="llama-cpp-python", responder=lambda body: prose) as server:
        llm = OpenAILLM(make_config(llm={"provider": "openai", "openai": {"base_url": server.base_url}}).llm.openai,
                        ModelTiers(standard="smol", light="smol"))
        outcome = await pulse_at_2k(make_config, llm, home, ["the tour is on Saturday"])
    assert outcome.action in ("wait", "resume", "create", "react"), outcome
    structured = [c for c in server.calls if "response_format" in c]
    assert structured and all(c["response_format"]["type"] == "json_object" for c in structured)
    assert not server.refused  # asked what it is first: the form it takes from the start


async def test_the_context_a_server_runs_with_is_what_requests_are_planned_in(make_config, caplog):
    async with running(flavor="llama.cpp", n_ctx=4096, slots=2) as server:
        for told, planned in ((None, 4096), (8192, 4096), (3000, 3000)):
            llm_section = {"provider": "openai", "openai": {"base_url": server.base_url}}
            if told:
                llm_section["context_tokens"] = told
            config = make_config(llm=llm_section, snapshots={"interval_seconds": 0},
                                 persona={"models": {"standard": "smol", "light": "smol"}})
            engine = await Engine.open(config)
            try:
                assert engine.config.llm.context_tokens == planned and engine.fitted.context_tokens == planned
                assert engine.assembler.budget.context_tokens == planned
                assert engine.fitted.ratio >= 1.1  # the server counted the sample: replies planned with its ratio
            finally:
                await engine.close()
    assert "llm.context_tokens is 8192 but the model server runs with 4096" in caplog.text
