from pathlib import Path

import pytest
import yaml

from bot.__main__ import main
from bot.config import (
    DEFAULT_CONFIG_FILE,
    Config,
    ConfigError,
    apply_overrides,
    flat_keys,
    load_config,
    masked_dump,
    validate,
)

REPO_CONFIG = Path(__file__).resolve().parent.parent / "config.yaml"


def problems(environ=None, path=None) -> list[str]:
    with pytest.raises(ConfigError) as err:
        load_config(path, environ or {})
    return err.value.problems


# 9 aliases per level, 9 levels: a few hundred bytes that a plain YAML load expands to 9**9 items.
ALIAS_BOMB = "a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
    f"{c}: &{c} [{','.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True))


def test_shipped_config_is_valid_and_every_key_is_commented():
    config = load_config(REPO_CONFIG, {}).config
    assert config.stelis.default_window_ratio == 0.8
    assert config.stelis.max_depth == 3
    lines = REPO_CONFIG.read_text().splitlines()
    for key in flat_keys():
        leaf = key.split(".")[-1]
        index = next(i for i, ln in enumerate(lines) if ln.strip().startswith(f"{leaf}:"))
        assert lines[index - 1].strip().startswith("#"), f"{key} has no comment above it"


def test_defaults_choose_the_offline_model_without_a_key():
    config = load_config(REPO_CONFIG, {}).config
    assert config.llm.resolved_provider() == "offline"
    assert load_config(REPO_CONFIG, {"ANTHROPIC_API_KEY": "sk-x"}).config.llm.resolved_provider() == "anthropic"


def test_environment_overrides_the_file_including_the_seed_names():
    loaded = load_config(REPO_CONFIG, {
        "STELIS_DEFAULT_WINDOW_RATIO": "0.5", "STELIS_MAX_DEPTH": "2",
        "STELIS_LLM_PROVIDER": "offline", "STELIS_PERSONA_NAME": "Eris",
        "DISCORD_TOKEN": "tok-123", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9",
    })
    c = loaded.config
    assert (c.stelis.default_window_ratio, c.stelis.max_depth) == (0.5, 2)
    assert c.persona.name == "Eris"
    assert c.discord.token.get_secret_value() == "tok-123"
    assert c.llm.anthropic.base_url == "http://127.0.0.1:9"
    assert loaded.env_overrides["stelis.max_depth"] == "STELIS_MAX_DEPTH"


def test_empty_outside_variables_count_as_unset():
    c = load_config(REPO_CONFIG, {"DISCORD_TOKEN": "", "ANTHROPIC_API_KEY": " "}).config
    assert c.discord.token is None and c.llm.resolved_provider() == "offline"


def test_stelis_config_selects_another_file(tmp_path):
    other = tmp_path / "other.yaml"
    other.write_text("persona:\n  name: Other\n")
    assert load_config(None, {"STELIS_CONFIG": str(other)}).config.persona.name == "Other"


def test_each_bad_value_is_named_with_its_value_and_allowed_range():
    found = problems({
        "STELIS_DEFAULT_WINDOW_RATIO": "1.5",
        "STELIS_MAX_DEPTH": "-1",
        "STELIS_LLM_PROVIDER": "gpt",
        "STELIS_LLM_CONTEXT_TOKENS": "lots",
        "STELIS_LOG_LEVEL": "LOUD",
    })
    text = "\n".join(found)
    assert len(found) == 5
    assert "stelis.default_window_ratio = '1.5' (from STELIS_DEFAULT_WINDOW_RATIO)" in text
    assert "allowed: 0.0 < value < 1.0" in text
    assert "stelis.max_depth = '-1' (from STELIS_MAX_DEPTH)" in text and "0 <= value <= 10" in text
    assert "llm.provider = 'gpt'" in text and "'auto', 'anthropic', 'openai' or 'offline'" in text
    assert "llm.context_tokens = 'lots'" in text and "valid integer" in text
    assert "log_level = 'LOUD'" in text


def test_bad_values_in_the_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("persona:\n  name: ''\n  nmae: x\nllm:\n  max_output_tokens: 5\n")
    found = problems(path=bad)
    text = "\n".join(found)
    assert "persona.name = ''" in text and "1 <= length <= 80" in text
    assert "persona.nmae: unknown key (did you mean name?)" in text
    assert "llm.max_output_tokens = 5" in text and "16 <= value <= 64000" in text


def test_unreadable_and_malformed_files(tmp_path):
    assert "cannot read config file" in problems(path=tmp_path / "missing.yaml")[0]
    broken = tmp_path / "broken.yaml"
    broken.write_text("persona: [unclosed\n")
    assert "is not valid YAML" in problems(path=broken)[0]
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(ALIAS_BOMB)
    assert "aliases (*name) are not allowed" in problems(path=bomb)[0] and len(problems(path=bomb)[0]) < 600
    twice = tmp_path / "twice.yaml"
    twice.write_text("llm:\n  context_tokens: 8192\n  context_tokens: 4096\n")
    assert "key 'context_tokens' appears twice" in problems(path=twice)[0]
    huge = tmp_path / "huge.yaml"
    huge.write_text("# filler\n" * 40_000)
    assert "may be at most" in problems(path=huge)[0]
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(b"persona:\n  card: caf\xe9\n")
    assert "is not UTF-8" in problems(path=latin)[0]
    listy = tmp_path / "list.yaml"
    listy.write_text("- a\n- b\n")
    assert "must hold a mapping" in problems(path=listy)[0]


def test_anthropic_without_a_key_is_refused_with_the_variable_to_set():
    assert problems({"STELIS_LLM_PROVIDER": "anthropic"}) == [
        "llm.provider is 'anthropic' but no key is set (set ANTHROPIC_API_KEY)"
    ]


def test_unknown_stelis_variable_warns_with_a_suggestion():
    loaded = load_config(REPO_CONFIG, {"STELIS_MAX_DEPHT": "2"})
    assert loaded.warnings == ["ignored STELIS_MAX_DEPHT: not a config key (did you mean STELIS_MAX_DEPTH?)"]


def test_secret_values_are_masked_and_never_echoed_in_errors():
    c = load_config(REPO_CONFIG, {"ANTHROPIC_API_KEY": "sk-secret-1", "DISCORD_TOKEN": "tok-2"}).config
    dumped = str(masked_dump(c))
    assert "sk-secret-1" not in dumped and "tok-2" not in dumped and "***" in dumped


def test_overrides_are_validated_like_the_file():
    base = load_config(REPO_CONFIG, {}).config
    assert apply_overrides(base, {"stelis.max_depth": 1}).stelis.max_depth == 1
    with pytest.raises(ConfigError, match=r"stelis.max_depth = 99 \(from override\).*0 <= value <= 10"):
        apply_overrides(base, {"stelis.max_depth": 99})
    with pytest.raises(ConfigError, match=r"did you mean stelis\.max_depth"):
        apply_overrides(base, {"stelis.max_dept": 1})


def test_check_config_prints_masked_config_and_fails_on_invalid(capsys, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-never-print")
    monkeypatch.delenv("STELIS_CONFIG", raising=False)
    assert main(["check-config"]) == 0
    out = capsys.readouterr().out
    assert "sk-never-print" not in out and '"api_key": "***"' in out
    assert "llm provider in use: anthropic" in out
    monkeypatch.setenv("STELIS_MAX_DEPTH", "many")
    assert main(["check-config"]) == 2
    err = capsys.readouterr().err
    assert "stelis.max_depth = 'many' (from STELIS_MAX_DEPTH)" in err


def test_log_level_in_any_case_and_an_empty_data_dir_is_refused():
    assert load_config(None, {"STELIS_LOG_LEVEL": "info"}).config.log_level == "INFO"
    refused = problems({"STELIS_DATA_DIR": ""})
    assert refused[0].startswith("data_dir = ''") and "must name a directory" in refused[0]


async def test_missing_privileged_intents_say_which_switch_to_turn_on(monkeypatch, caplog):
    import discord
    from discord.ext import commands

    from bot.discord_bot import run_discord

    async def refused(self, token, *, reconnect=True):
        raise discord.PrivilegedIntentsRequired(None)

    monkeypatch.setattr(commands.Bot, "start", refused)
    config = load_config(None, {"DISCORD_TOKEN": "x.y.z"}).config
    assert await run_discord(config) == 2
    assert "Message Content Intent" in caplog.text


def test_a_bad_list_item_is_shown_with_its_own_value(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("discord:\n  personas: [123, abc]\n")
    assert problems(path=path)[0].startswith("discord.personas.1 = 'abc'")


def test_the_shipped_config_yaml_is_the_models_rendering():
    """Defaults, ranges and descriptions live in the models alone; config.yaml is written from them."""
    from bot.config_file import render

    assert DEFAULT_CONFIG_FILE.read_text() == render(), "run: python -m bot config-template > config.yaml"
    assert validate(yaml.safe_load(render())) == Config()  # and it reads back as the defaults
    assert "# Deepest Stelis nesting allowed; root is depth 0. Allowed: 0-10." in render()


def test_config_template_prints_the_file_without_reading_a_config(tmp_path, capsys):
    from bot.__main__ import main

    broken = tmp_path / "broken.yaml"
    broken.write_text("stelis: {max_depth: -1}\n")
    assert main(["--config", str(broken), "config-template"]) == 0
    assert capsys.readouterr().out == DEFAULT_CONFIG_FILE.read_text()


def test_playbooks_check_on_the_command_line_names_each_problem_and_fails(tmp_path, capsys):
    from bot.__main__ import main

    bad = tmp_path / "bad.json"
    bad.write_text('{"name": "bad", "description": "x", "start_node": "a", "nodes": ['
                   '{"id": "a", "type": "tool", "tool": "send_email", "next": "b"},'
                   '{"id": "b", "type": "llm", "context_profile": "worker", "action": "Use {nothing}."}]}')
    assert main(["playbooks", "check", str(bad)]) == 1
    out = capsys.readouterr().out
    assert f"{bad}: node a: field tool: unknown tool 'send_email'" in out
    assert f"{bad}: node b: field action: variable 'nothing' is never declared" in out
    assert main(["playbooks", "check"]) == 0 and "No problems" in capsys.readouterr().out  # the built-in ones
    assert main(["playbooks", "list"]) == 0 and "research:" in capsys.readouterr().out
    assert main(["playbooks", "check", str(tmp_path / "missing.json")]) == 2


def test_a_database_url_is_checked_and_its_password_never_shown(tmp_path):
    from bot.config import ConfigError, load_config

    environ = {"DATABASE_URL": "postgresql://stelis:hunter2@db:5432/stelis", "STELIS_DATA_DIR": str(tmp_path)}
    config = load_config(None, environ).config
    assert config.database_name == "postgresql://stelis:***@db:5432/stelis"
    assert "hunter2" in config.secrets() and str(config.database_target).endswith("@db:5432/stelis")
    with pytest.raises(ConfigError, match=r"database\.url") as refused:
        load_config(None, {"DATABASE_URL": "mysql://root:hunter2@db/x", "STELIS_DATA_DIR": str(tmp_path)})
    assert "postgresql://" in str(refused.value) and "hunter2" not in str(refused.value)
    by_variable = load_config(None, {"STELIS_DATA_DIR": str(tmp_path), "STELIS_DATABASE_FILE": "other.sqlite3"})
    assert by_variable.config.database_path == tmp_path / "other.sqlite3"
    (tmp_path / "old.yaml").write_text("database: kept.sqlite3\n")  # configs from before: the file name alone
    old_style = load_config(tmp_path / "old.yaml", {"STELIS_DATA_DIR": str(tmp_path)})
    assert old_style.config.database_path == tmp_path / "kept.sqlite3" and old_style.config.database.url is None


def test_every_variable_env_example_names_is_one_the_bot_reads():
    """.env.example is what Docker users copy: a name in it that the bot ignores would be a setting that silently
    does nothing."""
    import re

    from bot.config import load_config

    example = DEFAULT_CONFIG_FILE.with_name(".env.example").read_text()
    assigned = dict(re.findall(r"^#? ?([A-Z][A-Z0-9_]+)=(.*)$", example, re.MULTILINE))
    assert {"DISCORD_TOKEN", "ANTHROPIC_API_KEY", "STELIS_LLM_PROVIDER", "STELIS_LLM_CONTEXT_TOKENS"} <= set(assigned)
    values = {name: value or "x" for name, value in assigned.items() if name != "STELIS_LOG_LEVEL"}
    loaded = load_config(None, {**values, "STELIS_LOG_LEVEL": "INFO"})
    assert loaded.warnings == []
    assert loaded.config.llm.provider == "openai" and loaded.config.llm.context_tokens == 8192


def test_the_command_line_reads_its_options_anywhere_and_says_what_each_command_does(tmp_path, capsys, monkeypatch):
    from bot.__main__ import thread_id

    config = tmp_path / "mine.yaml"
    config.write_text("persona:\n  name: Mira\ndata_dir: memory-here\n")
    monkeypatch.chdir(DEFAULT_CONFIG_FILE.parent.parent)  # started from elsewhere than the config's folder
    assert main(["check-config", "--config", str(config)]) == 0  # after the command, as people type it
    out = capsys.readouterr().out
    assert f"# source: {config}" in out and '"name": "Mira"' in out
    assert str(tmp_path / "memory-here") in out  # beside the config file, not in the working directory

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.startswith("stelis ")
    with pytest.raises(SystemExit):
        main(["snapshot", "export", "--help"])
    assert "write a thread's snapshot" in capsys.readouterr().out  # the command's own description, not a usage line
    assert thread_id("stelis:12") == thread_id("12") == 12
    with pytest.raises(SystemExit):
        main(["snapshot", "export", "stelis:x"])
    assert "is not a thread id" in capsys.readouterr().err


def test_a_reader_that_stops_early_gets_no_traceback():
    """`stelis check-config | head -1`: the pipe closes under the printout; the command ends quietly."""
    import subprocess
    import sys

    shell = f"{sys.executable} -m bot check-config | head -1"
    done = subprocess.run(["sh", "-c", shell], capture_output=True, text=True, timeout=60,
                          cwd=DEFAULT_CONFIG_FILE.parent)
    assert done.stdout.startswith("# source:") and "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr


@pytest.mark.parametrize("value", ["123,456", "123, 456", "[123, 456]"])
def test_a_list_setting_comes_from_the_environment_as_commas_or_json(value):
    from bot.config import load_config

    config = load_config(None, {"STELIS_DISCORD_ALLOW_USERS": value, "STELIS_DISCORD_PERSONAS": "77"}).config
    assert config.discord.allow_users == [123, 456] and config.discord.personas == [77]


def test_a_bad_item_of_a_list_from_the_environment_names_the_variable():
    from bot.config import load_config

    with pytest.raises(ConfigError) as caught:
        load_config(None, {"STELIS_DISCORD_DENY_USERS": "123,abc"})
    assert "discord.deny_users.1 = 'abc' (from STELIS_DISCORD_DENY_USERS)" in str(caught.value)
