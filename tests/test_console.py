import asyncio
import gc
import io
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.clock import Clock
from bot.console import Console
from bot.engine import Engine
from bot.providers.offline import OFFLINE_TAG, OfflineLLM
from memory import dates
from memory.llm import LLMError
from memory.records import Scope

REPO = Path(__file__).resolve().parent.parent


def run_console(tmp_path: Path, stdin: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bot", *args], input=stdin, capture_output=True, text=True,
        cwd=REPO, env=console_env(tmp_path / "data", STELIS_CONSOLE_USER_NAME="mahe"), timeout=60,
    )


def console_env(data: Path, **extra: str) -> dict[str, str]:
    """This environment without the settings a console run must not inherit, its data in `data`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STELIS_", "ANTHROPIC_", "DISCORD_"))}
    return {**env, "STELIS_DATA_DIR": str(data), **extra}


def test_piped_console_replies_per_line_and_remembers_across_runs(tmp_path):
    first = run_console(tmp_path, "hello, I am Mahe\nmy project is calculator_v2\n", "console")
    assert first.returncode == 0, first.stderr
    replies = [ln for ln in first.stdout.splitlines() if ln.startswith("Stelis: ")]
    assert len(replies) == 2 and all(OFFLINE_TAG in r for r in replies)
    assert "(1 earlier message(s) from people here and 1 of mine in view" in first.stdout  # hello, its reply

    second = run_console(tmp_path, "what is my project?\n/recall calculator_v2\n/quit\nnot read after quit\n")
    assert second.returncode == 0, second.stderr
    assert "(2 earlier message(s) from people here and 2 of mine" in second.stdout  # `run`: the same database
    assert "mahe (this conversation): my project is calculator_v2" in second.stdout
    assert "not read after quit" not in second.stdout
    assert (tmp_path / "data" / "stelis.sqlite3").exists()


def test_the_console_starts_without_what_only_a_terminal_or_another_provider_needs():
    # A first reply waits for every import on its way (issue 32: 1.5 s at most): the line editor is for a terminal,
    # the SDKs for their providers, Discord for the bot.
    probe = ("import sys, bot.__main__, bot.console; "
             "print(sorted(m for m in ('prompt_toolkit', 'anthropic', 'openai', 'discord') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_start_up_is_not_collected_and_what_it_made_is_frozen(tmp_path):
    # Importing the provider's SDK makes thousands of classes that live as long as the process: the collector pauses
    # while the engine starts (issue 32's first reply), and collects again for the session, start-up's objects frozen.
    probe = (
        "import gc, bot.engine, bot.console\n"
        "from bot.__main__ import main\n"
        "seen = {}\n"
        "opened = bot.engine.Engine.open.__func__\n"
        "async def open_(cls, *a, **k):\n"
        "    seen['starting'] = gc.isenabled()\n"
        "    return await opened(cls, *a, **k)\n"
        "bot.engine.Engine.open = classmethod(open_)\n"
        "looped = bot.console.Console.run_loop\n"
        "async def run_loop(self):\n"
        "    seen['chatting'] = gc.isenabled()\n"
        "    seen['frozen'] = gc.get_freeze_count() > 1000\n"
        "    return await looped(self)\n"
        "bot.console.Console.run_loop = run_loop\n"
        "code = main(['console'])\n"
        "print(sorted(seen.items()), code)\n")
    done = subprocess.run([sys.executable, "-c", probe], input="hello\n", capture_output=True, text=True, cwd=REPO,
                          env=console_env(tmp_path, STELIS_CONSOLE_USER_NAME="mahe"), timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "[('chatting', True), ('frozen', True), ('starting', False)] 0"


def test_a_start_up_that_fails_leaves_the_collector_on_and_nothing_frozen():
    from bot.__main__ import _start_up

    frozen = gc.get_freeze_count()
    with pytest.raises(RuntimeError), _start_up():
        assert not gc.isenabled()
        raise RuntimeError("the database is not there")
    assert gc.isenabled() and gc.get_freeze_count() == frozen
    gc.disable()  # a caller that had turned collection off keeps it off
    try:
        with _start_up():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
        if not frozen:
            gc.unfreeze()


def test_console_refuses_a_bad_config_with_the_key_named(tmp_path):
    env = {**os.environ, "STELIS_DATA_DIR": str(tmp_path), "STELIS_LLM_MAX_OUTPUT_TOKENS": "0"}
    bad = subprocess.run([sys.executable, "-m", "bot", "console"], input="", capture_output=True,
                         text=True, cwd=REPO, env=env, timeout=60)
    assert bad.returncode == 2
    assert "llm.max_output_tokens = '0' (from STELIS_LLM_MAX_OUTPUT_TOKENS)" in bad.stderr
    assert not (tmp_path / "stelis.sqlite3").exists()


class Flaky:
    name = "flaky"

    def __init__(self):
        self.fail = True

    async def complete(self, request, on_text=None):
        if self.fail:
            raise LLMError("The model is rate-limited (429) after 3 retries; try again shortly.")
        return await OfflineLLM().complete(request, on_text)

    async def aclose(self):
        return None


async def test_help_unknown_commands_and_retry_after_a_failure(make_config):
    llm = Flaky()
    engine = await Engine.open(make_config(), llm)
    out = io.StringIO()
    script = io.StringIO("/help\n/nope\n/memroy\nhello?\n")
    await Console(engine, script, out, "mahe").run_loop()
    text = out.getvalue()
    assert "/retry" in text and "/quit" in text
    assert "Unknown command /nope. Type /help" in text
    assert "Unknown command /memroy. Did you mean /memory? Type /help" in text
    assert "(no reply: The model is rate-limited (429)" in text and "/retry to ask again" in text
    llm.fail = False
    out2 = io.StringIO()
    await Console(engine, io.StringIO("/retry\n"), out2, "mahe").run_loop()
    assert out2.getvalue().startswith(f"Stelis: {OFFLINE_TAG}")
    stored = await engine.store.tail((await engine.stelis.root(Scope.console())).id, 5)
    assert [(m.role, m.content[:6]) for m in stored] == [("user", "hello?"), ("assistant", OFFLINE_TAG[:6])]
    await engine.close()


@pytest.mark.parametrize("line", ["", "   "])
async def test_blank_lines_are_ignored(make_config, line):
    engine = await Engine.open(make_config(), OfflineLLM())
    out = io.StringIO()
    await Console(engine, io.StringIO(line + "\n"), out, "mahe").run_loop()
    assert out.getvalue() == ""
    assert await engine.store.count_messages((await engine.stelis.root(Scope.console())).id) == 0
    await engine.close()


async def test_console_replies_come_from_the_server_at_anthropic_base_url(tmp_path, fake_anthropic):
    env = console_env(tmp_path, STELIS_LLM_PROVIDER="anthropic", ANTHROPIC_API_KEY="sk-fake",
                      ANTHROPIC_BASE_URL=fake_anthropic.base_url, STELIS_CONSOLE_USER_NAME="mahe")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", "console", cwd=REPO, env=env,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(b"hello server\n"), timeout=60)
    assert proc.returncode == 0, err.decode()
    assert "Stelis: fake reply to: [mahe] hello server" in out.decode()
    replies = [c for c in fake_anthropic.calls if "neutral, factual summaries" not in str(c.body.get("system"))]
    assert len(replies) == 1 and replies[0].body["stream"] is True
    assert "sk-fake" not in (tmp_path / "stelis.log").read_text()


async def test_thread_commands_tree_and_context(make_config):
    engine = await Engine.open(make_config(llm={"context_tokens": 100_000}), OfflineLLM())
    out = io.StringIO()
    script = "\n".join([
        "hello main", "/thread new Coding Session", "write calculator_v2", "/thread new", "/tree",
        "/thread new Deep dive", "/context", "/thread end", "/thread abort", "/thread end", "/thread bogus",
        "/thread list",
    ]) + "\n"
    await Console(engine, io.StringIO(script), out, "mahe").run_loop()
    text = out.getvalue()
    assert 'Started stelis:2 "Coding Session" at depth 1' in text
    assert "Usage: /thread new <label>" in text
    assert "stelis:1 main conversation [active] depth 0, window 100000" in text
    assert ("  stelis:2 Coding Session [active] depth 1, window 80000, parent keeps 20000 protected <- you are here"
            in text)
    assert "Next request for stelis:3" in text
    for part in ("system", "parent", "history", "tail", "free"):
        assert f"  {part}" in text
    assert "#" in text.split("Next request for stelis:3")[1]  # the bar
    assert "Ended stelis:3 (completed). Chronicle:" in text
    assert "Aborted stelis:2." in text
    assert "(!) no Stelis thread is active in this run" in text
    assert "Usage: /thread new <label> | end | abort | list" in text
    assert "stelis:2 Coding Session [aborted]" in text and "stelis:3 Deep dive [completed]" in text
    root = await engine.stelis.root(Scope.console())
    assert [m.content for m in await engine.store.tail(root.id, 10) if m.role == "user"] == ["hello main"]
    await engine.close()


async def test_depth_limit_in_the_console_is_a_clear_message(make_config):
    engine = await Engine.open(make_config(stelis={"max_depth": 1}), OfflineLLM())
    out = io.StringIO()
    await Console(engine, io.StringIO("/thread new one\n/thread new two\n"), out, "mahe").run_loop()
    assert "(!) cannot start a Stelis thread under stelis:2 at depth 1: the maximum depth is 1" in out.getvalue()
    await engine.close()


async def test_memory_commands_and_idle_show_a_version_appear(make_config):
    from bot.clock import Clock

    engine = await Engine.open(make_config(snapshots={"interval_seconds": 0}), OfflineLLM(), Clock())
    out = io.StringIO()
    script = "\n".join([
        "/memory", "/idle 10", "I am Mahe, building calculator_v2", "/idle 10", "it ships on 2026-12-01", "/memory",
        "/memory pin Mahe likes green tea", "/idle 7200", "/memory", "/memory full", "/memory history",
        "/memory rollback 1",
        "/memory rollback x", "/memory edit corrected by hand", "/memory pause", "/memory resume",
        "/memory regenerate", "/memory bogus", "/idle soon", "/memory unpin Mahe likes green tea",
    ]) + "\n"
    await Console(engine, io.StringIO(script), out, "mahe").run_loop()
    text = out.getvalue()
    assert "No memory written yet." in text and "(no memory update was due)" in text
    assert text.count("(no memory update was due)") == 2  # ten seconds after a message: not yet
    assert "Short-term memory v1 written (messages 1-4)" in text and "Long-term memory updated (v1)." in text
    assert "Pinned: Mahe likes green tea" in text
    assert "the next version is due in 2.0 h" in text  # after a message: the idle time, as people say it
    summary = text.split("Long-term memory updated (v1).")[1].split("(the full texts:")[0]
    assert "Long-term v1 (" in summary and "  v1 (messages 1-4, " in summary  # one line each
    assert "Short-term v1 (messages 1-4, " in text.split("(the full texts:")[1]  # /memory full: the text
    said_at = (await engine.store.tail((await engine.stelis.root(Scope.console())).id, 100))[0].created_at
    day = dates.day_text(datetime.fromtimestamp(said_at, UTC).date())  # the day it was said, not after /idle
    assert f"v1 (messages 1-4, {day}): mahe: I am Mahe, building calculator_v2" in text
    assert "Version 1 is current again, as v2." in text
    assert "Usage: /memory rollback <version number>" in text
    assert "Short-term memory v3 written." in text
    assert "Automatic memory updates paused here." in text and "Automatic memory updates resumed here." in text
    assert "Short-term memory v4 written" in text
    assert "Usage: /memory [show | full | history" in text and "Usage: /idle <seconds>" in text
    assert "Unpinned: Mahe likes green tea" in text
    await engine.close()


async def test_a_corrupt_database_exits_with_a_clear_error_instead_of_hanging(tmp_path):
    (tmp_path / "stelis.sqlite3").write_bytes(b"not a database " * 500)
    env = console_env(tmp_path)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", "console", cwd=REPO, env=env,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(proc.communicate(b"hello\n"), timeout=60)
    assert proc.returncode == 2
    assert "cannot be used" in err.decode() and "Traceback" not in err.decode()


async def test_shutdown_closes_the_database_even_when_snapshots_fail(make_config, monkeypatch):
    engine = await Engine.open(make_config(), OfflineLLM())

    async def broken():
        raise OSError("disk full")

    monkeypatch.setattr(engine.snapshots, "write_due", broken)
    await asyncio.wait_for(engine.close(), 10)
    with pytest.raises(ValueError):  # aiosqlite: no active connection
        await engine.store.count_messages(1)


def test_bytes_that_are_not_utf8_lose_nothing(tmp_path):
    env = console_env(tmp_path / "data", STELIS_CONSOLE_USER_NAME="mahe")
    done = subprocess.run([sys.executable, "-m", "bot", "console"], input=b"caf\xe9 \xff first\nsecond line\n",
                          capture_output=True, cwd=REPO, env=env, timeout=60)
    assert done.returncode == 0 and b"Traceback" not in done.stderr
    assert done.stdout.count(b"Stelis: ") == 2  # both lines heard and answered


@pytest.mark.parametrize("line", ["/idle nan", "/idle inf", "/idle 1e18", "/idle -5", "/memory rollback ²"])
async def test_bad_numbers_in_console_commands_get_usage_not_a_crash(make_config, line):
    engine = await Engine.open(make_config(), OfflineLLM())
    before = engine.clock()
    out = io.StringIO()
    assert await Console(engine, io.StringIO(line + "\n"), out, "mahe").run_loop() == 0
    assert "Usage:" in out.getvalue()
    assert engine.clock() - before < 60  # the demo clock did not jump
    await engine.close()


async def test_retry_after_a_reply_does_not_ask_again(make_config):
    engine = await Engine.open(make_config(), OfflineLLM())
    out = io.StringIO()
    await Console(engine, io.StringIO("hello\n/retry\n"), out, "mahe").run_loop()
    assert "Nothing to retry" in out.getvalue() and out.getvalue().count("Stelis: ") == 1
    await engine.close()


async def test_thread_end_in_the_main_conversation_is_refused_before_any_progress(make_config):
    engine = await Engine.open(make_config(), OfflineLLM())
    out = io.StringIO()
    await Console(engine, io.StringIO("/thread end\n"), out, "mahe").run_loop()
    assert "no Stelis thread is active" in out.getvalue() and "Ending the thread" not in out.getvalue()
    await engine.close()


def test_quitting_inside_a_thread_warns_and_the_next_session_resumes_it(tmp_path):
    first = run_console(tmp_path, "/thread new Research\nlooking into calculator_v2\n/quit\n", "console")
    assert first.returncode == 0, first.stderr
    assert "You are leaving inside Stelis thread" in first.stdout
    second = run_console(tmp_path, "and continuing\n/thread end\n", "console")
    assert second.returncode == 0, second.stderr
    assert "(resuming Stelis thread" in second.stdout
    assert "Ended stelis:" in second.stdout and "(completed)" in second.stdout  # not swept to aborted


def test_the_console_demo_clock_is_the_one_clock_stored_times_and_schedules_read(tmp_path):
    """/idle moves the time of what is stored and of every schedule alike, and it stays moved for the data folder:
    a message after the idle is not a version of its own, a pulse waits its interval, dates agree."""
    import time

    from memory.backends import open_store

    async def stored_times() -> list[float]:
        store = await open_store(tmp_path / "data" / "stelis.sqlite3")
        root = await store.find_root("Stelis", Scope.console())
        stamps = [m.created_at async for m in store.span(root.id, None, None) if m.role == "user"] if root else []
        await store.close()
        return stamps

    started = time.time()
    done = run_console(tmp_path, "before the idle\n/autonomy on\n/idle 7200\nafter the idle\n/idle 60\n"
                                 "/memory history\n", "console")
    assert done.returncode == 0, done.stderr
    assert "Short-term memory v1 written" in done.stdout  # the idle deadline passed
    assert done.stdout.count("Pulse:") == 1  # the first idle's; a minute later the interval has not passed
    assert "v2" not in done.stdout.split("/memory history")[-1]  # one message after the idle: no version of its own
    before, after = asyncio.run(stored_times())
    assert started - 5 <= before <= time.time() + 5 and 7_195 <= after - before <= 7_300
    again = run_console(tmp_path, "a day later, or so it seems\n", "console")  # the next run keeps the time
    assert again.returncode == 0, again.stderr
    assert asyncio.run(stored_times())[-1] >= after


async def test_a_line_the_database_refuses_is_reported_and_the_session_goes_on(make_config, monkeypatch):
    from memory.store import StoreError

    engine = await Engine.open(make_config(), OfflineLLM())
    original = engine.store.append_counted
    refusals = iter([True])

    async def append(thread, new, triggers):
        if next(refusals, False):
            raise StoreError("the database refused a write (database or disk is full); nothing of it was saved")
        return await original(thread, new, triggers)

    monkeypatch.setattr(engine.store, "append_counted", append)
    out = io.StringIO()
    assert await Console(engine, io.StringIO("first try\nsecond try\n"), out, "mahe").run_loop() == 0
    assert "Not saved" in out.getvalue() and "send it again" in out.getvalue()
    thread = await engine.stelis.root(Scope.console())
    assert [m.content for m in await engine.store.tail(thread.id, 10) if m.role == "user"] == ["second try"]
    await engine.close()


async def test_config_show_set_and_reset_work_in_the_console_as_in_discord(make_config):
    engine = await Engine.open(make_config(snapshots={"interval_seconds": 0}), OfflineLLM())
    script = "\n".join([
        "/config", "/config set short_term_history.message_threshold 12", "/config",
        "/config set short_term_history.message_threshold 1", "/config set llm.context_tokens 4096",
        "/config reset short_term_history.message_threshold", "/config reset short_term_history.message_threshold",
        "/config bogus",
    ]) + "\n"
    out = io.StringIO()
    await Console(engine, io.StringIO(script), out, "mahe").run_loop()
    text = out.getvalue()
    assert "short_term_history.message_threshold = 50" in text and "  (none)" in text  # defaults, no override
    assert "Set short_term_history.message_threshold = 12 here." in text
    assert "  here short_term_history.message_threshold = 12" in text
    assert "Not set: short_term_history.message_threshold = '1'" in text and "(allowed: 2 <= value <= 10000)" in text
    assert "Not set: llm.context_tokens: cannot be set here" in text  # not overridable: config.yaml's alone
    assert "Override of short_term_history.message_threshold removed." in text
    assert "short_term_history.message_threshold had no override here." in text
    assert "Usage: /config [show | set <key> <value> | reset <key>]" in text
    root = await engine.stelis.root(Scope.console())
    assert (await engine.settings.effective(root.guild_id, root.channel_id)).short_term_history.message_threshold == 50
    await engine.close()


async def test_the_engine_refuses_keys_that_are_not_overridable_whoever_asks(make_config):
    from bot.config import ConfigError

    engine = await Engine.open(make_config(snapshots={"interval_seconds": 0}), OfflineLLM())
    with pytest.raises(ConfigError, match=r"llm\.anthropic\.api_key: cannot be set here"):
        await engine.settings.set("guild", 1, "llm.anthropic.api_key", "sk-stolen")
    assert (await engine.settings.shown(1, 2)).server == {}  # nothing stored
    await engine.close()


async def test_playbooks_list_show_run_and_runs_in_the_console(make_config, tmp_path):
    engine = await Engine.open(make_config(snapshots={"interval_seconds": 0}), OfflineLLM())
    broken = tmp_path / "broken.json"
    broken.write_text('{"name": "broken", "description": "x", "start_node": "a",'
                      ' "nodes": [{"id": "a", "type": "llm", "action": "hi"}]}')
    script = "\n".join([
        "we ship calculator_v2 on Friday", "/playbooks", "/playbooks show research",
        '/playbooks run research {"topic": "calculator_v2"}', "/playbooks run research {bad json",
        "/playbooks run research", "/playbooks runs", f"/playbooks check {broken}", "/playbooks check",
        "/playbooks bogus",
    ]) + "\n"
    out = io.StringIO()
    await Console(engine, io.StringIO(script), out, "mahe").run_loop()
    text = out.getvalue()
    assert "research: Look into a topic" in text and "detail_recall:" in text
    assert "  gather (llm, conversation) -> conclude" in text and "takes: topic; gives: findings" in text
    assert "... research: open (stelis_start)" in text and "... research: close (stelis_end)" in text
    assert "research finished:" in text and '"findings"' in text
    assert "the arguments are not valid JSON" in text
    assert "(!) research: missing argument(s) topic" in text
    assert "[completed]" in text and "  gather (llm conversation/standard" in text
    assert f"{broken}: node a: field context_profile: Field required" in text
    assert "No problems: every playbook passes the check." in text
    assert "Usage: /playbooks [list" in text
    await engine.close()


async def test_a_playbook_posts_through_the_console(make_config, tmp_path):
    folder = tmp_path / "pb"
    folder.mkdir()
    (folder / "greet.json").write_text(json.dumps({
        "name": "greet", "description": "says hello on its own", "start_node": "say",
        "nodes": [{"id": "say", "type": "llm", "context_profile": "worker", "action": "Greet the team warmly.",
                   "tools": ["post_message"], "max_tool_rounds": 1}]}))
    engine = await Engine.open(make_config(snapshots={"interval_seconds": 0}, playbooks={"folder": str(folder)}),
                               OfflineLLM())
    out = io.StringIO()
    await Console(engine, io.StringIO("/playbooks run greet\n"), out, "mahe").run_loop()
    posted = [line for line in out.getvalue().splitlines() if line.startswith("Stelis: ")]
    assert len(posted) == 1 and posted[0].startswith("Stelis: Greet the team warmly")  # the offline call, printed
    root = await engine.stelis.root(Scope.console())
    last = await engine.conversations.last_message(root.id)
    assert last is not None and last.role == "assistant" and f"Stelis: {last.content}" == posted[0]  # remembered
    await engine.close()


async def test_tasks_and_branches_in_the_console(make_config):
    engine = await Engine.open(make_config(snapshots={"interval_seconds": 0}), OfflineLLM())
    script = "\n".join([
        "/tasks", "/tasks create Release notes | publish notes for calculator_v2 | collect; draft; post",
        "/tasks", "/tasks show 1", "/branches", "/branches suspend task-1", "/branches resume task-1",
        "/tasks close 1", "/tasks close 1", "/tasks show 99", "/tasks bogus", "/branches bogus",
    ]) + "\n"
    out = io.StringIO()
    await Console(engine, io.StringIO(script), out, "mahe").run_loop()
    text = out.getvalue()
    assert "No tasks here yet." in text
    assert "Task #1 created, with its branch task-1 and a session." in text
    assert "#1 Release notes [open] 0/3 steps" in text and "  [ ] 2. draft" in text
    assert "task-1 [task, active] Release notes" in text and "task-1 [task, suspended] Release notes" in text
    assert "Task #1 is done; its session ended with a chronicle." in text
    assert "(!) task 1 is already done" in text and "(!) there is no task 99 here" in text
    assert "Usage: /tasks [list" in text and "Usage: /branches [list" in text
    await engine.close()


async def test_autonomy_in_the_console_runs_pulses_when_idle(make_config):
    # Noon today: the script's 2 h 40 min of /idle stays inside one day's budget and outside the late quiet hours,
    # whenever the suite runs (from 21:20 UTC on, "Today" was tomorrow by the end)
    noon = datetime.now(UTC).replace(hour=12, minute=0, second=0, microsecond=0).timestamp()
    engine = await Engine.open(make_config(snapshots={"interval_seconds": 0}, autonomy={"quiet_minutes": 0}),
                               OfflineLLM(), clock=Clock(noon - time.time()))
    script = "\n".join([
        "/autonomy", "/idle 7200", "/autonomy on", "/autonomy interval 2", "/autonomy quiet late",
        "/autonomy interval 30", "/autonomy budget 12 50000", "/branches create Star map | listing constellations",
        "/idle 600", "/idle 1800", "/autonomy log", "/autonomy pulse-now", "/autonomy", "/autonomy bogus",
        "/branches show nothing",
    ]) + "\n"
    out = io.StringIO()
    await Console(engine, io.StringIO(script), out, "mahe").run_loop()
    text = out.getvalue()
    assert "Autonomy is off; home channel: the console." in text
    assert "(Pulse" not in text.split("Set autonomy.enabled = True")[0]  # off: /idle runs no pulse
    assert "autonomy.interval_minutes = '2'" in text and "5 <= value <= 1440" in text  # refused, named, ranged
    assert "HH:MM-HH:MM" in text
    assert "[free, suspended] Star map" in text
    pulses = [line for line in text.splitlines() if line.startswith("(Pulse")]
    assert len(pulses) == 2 and all(p.startswith("(Pulse: it waits.") for p in pulses)  # the first, then 30 min on
    assert text.count("  wait: ") == 2 and text.count("  pulse: wait (2 calls") == 2
    assert "Today: 6 of 12 model calls" in text  # two pulses and pulse-now
    assert "Usage: /autonomy [status" in text and "There is no branch 'nothing' here." in text
    await engine.close()


async def test_a_reply_the_database_refuses_is_reported_kept_and_stored_before_the_next_line(make_config, monkeypatch):
    from memory.store import StoreError

    engine = await Engine.open(make_config(snapshots={"interval_seconds": 0}), OfflineLLM())
    original = engine.store.append
    refusals = iter([True])

    async def append(thread_id, new):
        if new.role == "assistant" and next(refusals, False):
            raise StoreError("the database went away (connection refused)")
        return await original(thread_id, new)

    monkeypatch.setattr(engine.store, "append", append)
    out = io.StringIO()
    assert await Console(engine, io.StringIO("first line\nsecond line\n"), out, "mahe").run_loop() == 0
    assert "My reply is not saved yet" in out.getvalue() and "connection refused" in out.getvalue()
    thread = await engine.stelis.root(Scope.console())
    roles = [(m.role, m.content[:11]) for m in await engine.store.tail(thread.id, 10)]
    assert [r for r, _ in roles] == ["user", "assistant", "user", "assistant"]  # in order: nothing lost
    await engine.close()


async def test_persona_import_and_export_in_the_console(make_config, tmp_path):
    import json

    from tests.test_character_card import SERAPHINA, encoded, png

    card = tmp_path / "seraphina.png"
    card.write_bytes(png([(b"tEXt", b"chara\0" + encoded({"spec": "chara_card_v2", "data": SERAPHINA}))]))
    (tmp_path / "notes.txt").write_text("just notes")
    out_file = tmp_path / "out.json"
    engine = await Engine.open(make_config(), OfflineLLM())
    script = (f"/persona import {card}\n/persona\n/persona import {tmp_path / 'notes.txt'}\n"
              f"/persona import {tmp_path / 'missing.png'}\n/persona export {out_file}\n")
    out = io.StringIO()
    await Console(engine, io.StringIO(script), out, "mahe").run_loop()
    text = out.getvalue()
    assert "Persona card updated here from Seraphina's character card" in text
    assert "Seraphina is a guardian of the glade" in text  # /persona shows it
    assert "(!) notes.txt is neither a character card's JSON" in text
    assert "Not changed: " in text and "missing.png cannot be read" in text
    assert json.loads(out_file.read_text())["data"]["name"] == "Seraphina"  # the name here; memory is still
    root = await engine.stelis.root(Scope.console())
    assert root.persona == engine.persona != "Seraphina"  # ... kept under the configured one
    await engine.close()


def test_the_console_speaker_is_the_configured_name_or_the_login_name_never_you(monkeypatch, tmp_path):
    import getpass

    from bot.__main__ import _user_name
    from bot.config import load_config

    monkeypatch.setattr(getpass, "getuser", lambda: "mahe")
    assert _user_name(load_config(None, {"STELIS_DATA_DIR": str(tmp_path)})) == "mahe"
    named = load_config(None, {"STELIS_DATA_DIR": str(tmp_path), "STELIS_CONSOLE_USER_NAME": "ana"})
    assert _user_name(named) == "ana"

    def nobody():
        raise OSError("no login name")

    monkeypatch.setattr(getpass, "getuser", nobody)
    assert _user_name(load_config(None, {"STELIS_DATA_DIR": str(tmp_path)})) == "guest"
