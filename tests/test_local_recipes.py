"""The README's local-model recipes, as written: each server started as its recipe says (a fake that answers
as that server does), Stelis started with the recipe's variables over the shipped config.yaml."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from bot.config import load_config
from bot.engine import Engine
from memory.records import Scope
from tests.fake_openai import running

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()
SECTION = README.split("### Local models", 1)[1].split("\n## ", 1)[0]
BLOCK = SECTION.split("```sh", 1)[1].split("```", 1)[0]
FLAVORS = {"llama.cpp's": "llama.cpp", "llama-cpp-python's": "llama-cpp-python", "Ollama:": "ollama", "vLLM:": "vllm"}


def recipes() -> list[tuple[str, str, str]]:
    """(server flavor, the server's command, Stelis's command) for each recipe in the README."""
    found = []
    for chunk in BLOCK.strip().split("\n\n"):
        lines = chunk.splitlines()
        flavor = FLAVORS[lines[0].split()[1]]
        commands = [line for line in lines if not line.startswith("#")]
        found.append((flavor, commands[0], commands[1]))
    return found


def _server_settings(flavor: str, command: str) -> dict:
    """What the server's command line asks of it: its context, slots, whether its template takes tools."""
    context = re.search(r"(?:-c|--n_ctx|--max-model-len|OLLAMA_CONTEXT_LENGTH=)\s*(\d+)", command)
    slots = re.search(r"--parallel (\d+)", command)
    return {"flavor": flavor, "n_ctx": int(context.group(1)), "slots": int(slots.group(1)) if slots else 1,
            # qwen2.5 (the Ollama recipe's model) is listed with the tools capability
            "tools_work": "--jinja" in command or "--enable-auto-tool-choice" in command or flavor == "ollama",
            "model_num_ctx": False}  # Ollama: the server's OLLAMA_CONTEXT_LENGTH, which it does not say


def test_the_readme_has_a_recipe_for_each_server():
    assert [flavor for flavor, _, _ in recipes()] == ["llama.cpp", "llama-cpp-python", "ollama", "vllm"]


@pytest.mark.parametrize(("flavor", "server", "stelis"), recipes(), ids=[r[0] for r in recipes()])
async def test_a_readme_recipe_runs_as_written(flavor, server, stelis, tmp_path, caplog):
    settings = _server_settings(flavor, server)
    words = shlex.split(stelis)
    assert words[-2:] == ["make", "run"]
    async with running(**settings, responder=lambda body: "Saturday at nine, from the north pier.") as fake:
        environ = dict(word.split("=", 1) for word in words[:-2])
        environ |= {"OPENAI_BASE_URL": re.sub(r"http://127\.0\.0\.1:\d+/v1", fake.base_url,
                                              environ["OPENAI_BASE_URL"]),
                    "STELIS_DATA_DIR": str(tmp_path / "data"), "STELIS_SNAPSHOTS_INTERVAL_SECONDS": "0"}
        config = load_config(environ=environ).config
        engine = await Engine.open(config)
        try:
            scope = Scope.console()
            root = await engine.stelis.root(scope)
            await engine.conversations.hear(scope, "When is the tour?", author_name="kai")
            reply = await engine.conversations.reply(root.id)
            assert engine.config.llm.context_tokens == settings["n_ctx"]  # planned in the server's context
            assert engine.fitted.ratio > 1.1 or flavor == "ollama"  # counted by the server where it counts
            offered = engine.assembler.conversation_tools
            assert bool(offered) is (flavor != "llama-cpp-python")  # its templates drop tools
        finally:
            await engine.close()
    assert reply.content == "Saturday at nine, from the north pier."
    assert not fake.refused and "does not say its context" not in caplog.text
    if flavor == "llama.cpp":
        assert fake.calls[-1]["id_slot"] == 0  # the conversation's own slot; the last is background work's
