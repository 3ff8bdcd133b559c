"""Several personas from one process (issue 31, point 13): `companions` names their configs."""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace

import discord
import pytest
from discord.ext import commands

from bot.companions import introduce, load_companions
from bot.config import ConfigError, load_config

ENV = {"DISCORD_TOKEN": "first.token.x", "STELIS_PERSONA_NAME": "Stelis", "DATABASE_URL": "postgresql://u@h/first",
       "ANTHROPIC_API_KEY": "sk-shared"}


def _write(path, text: str):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_companion_has_its_own_name_token_and_memory_and_shares_the_model_keys(tmp_path):
    _write(tmp_path / "wren" / "wren.yaml", "persona: {name: Wren}\ndiscord: {token: wren.token.y}\ndata_dir: mem\n")
    first = _write(tmp_path / "config.yaml", "companions: [wren/wren.yaml]\n")
    config = load_config(first, ENV).config
    (wren,) = load_companions(config, ENV)
    assert wren.persona.name == "Wren"  # STELIS_PERSONA_NAME is the first persona's
    assert wren.discord.token is not None and wren.discord.token.get_secret_value() == "wren.token.y"
    assert wren.database.url is None  # DATABASE_URL too: the companion keeps its own memory ...
    assert wren.data_dir == tmp_path / "wren" / "mem"  # ... beside its own file
    assert wren.llm.anthropic.api_key is not None  # the model's key serves both


@pytest.mark.parametrize(("text", "problem"), [
    ("persona: {name: Stelis}\ndiscord: {token: b.b.b}\ndata_dir: other\n", "is the persona 'Stelis' again"),
    ("persona: {name: Wren}\ndiscord: {token: b.b.b}\n", "uses "),  # the same data_dir: the same database
    ("persona: {name: Wren}\ndata_dir: other\n", "has no discord.token"),
    ("persona: {name: Wren}\ndiscord: {token: a.a.a}\ndata_dir: other\n", "the same discord.token"),
    ("persona: {name: Wren}\ndiscord: {token: b.b.b}\ndata_dir: other\ncompanions: [x.yaml]\n",
     "lists companions of its own"),
    ("persona: {name: ''}\n", "persona.name = ''"),
])
def test_a_companion_that_cannot_run_beside_the_first_says_why(tmp_path, text, problem):
    _write(tmp_path / "wren.yaml", text)
    first = _write(tmp_path / "config.yaml", "companions: [wren.yaml]\ndiscord: {token: a.a.a}\n")
    with pytest.raises(ConfigError) as caught:
        load_companions(load_config(first, {}).config, {})
    assert any(p.startswith("companions: ") and problem in p for p in caught.value.problems), caught.value.problems


def test_a_missing_companion_file_is_named(tmp_path):
    first = _write(tmp_path / "config.yaml", "companions: [nowhere.yaml]\n")
    with pytest.raises(ConfigError) as caught:
        load_companions(load_config(first, {}).config, {})
    assert "nowhere.yaml" in caught.value.problems[0]


def test_each_persona_answers_the_others_as_persona_bots_once_they_are_in():
    a, b, c = (SimpleNamespace(discord=SimpleNamespace(personas=list(known))) for known in ([7], [], []))
    introduce([(a, 1), (b, 2), (c, None)])  # c not logged in yet
    assert (a.discord.personas, b.discord.personas, c.discord.personas) == ([7, 2], [1], [1, 2])
    introduce([(a, 1), (b, 2), (c, 3)])
    assert (a.discord.personas, b.discord.personas, c.discord.personas) == ([7, 2, 3], [1, 3], [1, 2])


async def test_one_process_runs_every_persona_and_a_bad_token_stops_them_all(tmp_path, monkeypatch, caplog):
    from bot.discord_bot import run_discord

    _write(tmp_path / "wren.yaml", "persona: {name: Wren}\ndiscord: {token: bad.token.w}\ndata_dir: wren\n")
    first = _write(tmp_path / "config.yaml", "companions: [wren.yaml]\ndiscord: {token: good.token.s}\n")
    config = load_config(first, {}).config
    (wren,) = load_companions(config, {})
    started: list[str] = []
    stopped: dict[int, asyncio.Event] = {}
    close = commands.Bot.close

    async def closing(self):
        stopped.setdefault(id(self), asyncio.Event()).set()
        await close(self)

    async def start(self, token, *, reconnect=True):
        started.append(token)
        self._connection.user = SimpleNamespace(id=100 + len(started))
        self.dispatch("ready")
        if token.startswith("bad"):
            await asyncio.sleep(0.05)
            raise discord.LoginFailure("Improper token has been passed.")
        await stopped.setdefault(id(self), asyncio.Event()).wait()  # the good bot runs until the process stops it

    monkeypatch.setattr(commands.Bot, "start", start)
    monkeypatch.setattr(commands.Bot, "close", closing)
    with caplog.at_level(logging.ERROR):
        assert await asyncio.wait_for(run_discord(config, [wren]), 5) == 2
    assert sorted(started) == ["bad.token.w", "good.token.s"]
    assert "Wren: Discord refused the token" in caplog.text
    assert config.discord.personas == [102] and wren.discord.personas == [101]  # they met before it stopped


def test_check_config_names_each_companion_and_refuses_a_bad_one(tmp_path, capsys, monkeypatch):
    from bot.__main__ import main

    for name in [k for k in ENV] + ["STELIS_CONFIG"]:
        monkeypatch.delenv(name, raising=False)
    _write(tmp_path / "wren.yaml", "persona: {name: Wren}\ndiscord: {token: w.w.w}\ndata_dir: wren\n")
    first = _write(tmp_path / "config.yaml", "companions: [wren.yaml]\n")
    assert main(["check-config", "--config", str(first)]) == 0
    assert "# companion Wren from" in capsys.readouterr().out
    _write(tmp_path / "wren.yaml", "persona: {name: Stelis}\ndiscord: {token: w.w.w}\ndata_dir: wren\n")
    assert main(["check-config", "--config", str(first)]) == 2
    assert "is the persona 'Stelis' again" in capsys.readouterr().err
