"""The experience pass (issue 14): what a newcomer and a server admin meet first."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import discord
import pytest
import yaml

from bot import health, logs
from bot.config import load_config, validate
from bot.console import Console
from bot.discord_bot import make_bot, sync_commands
from bot.engine import Engine
from bot.providers.offline import OfflineLLM
from bot.report import context_bars, context_heading
from memory.records import Scope


@pytest.fixture
async def offline_bot(make_config):
    """The Discord bot on the offline model, automatic memory updates off (tests drive them)."""
    import discord.ext.test as dpytest

    from tests.discord_helpers import start_bot

    config = make_config(snapshots={"interval_seconds": 0}, short_term_history={"enabled": False})
    engine = await Engine.open(config, OfflineLLM())
    bot = await start_bot(engine, config)
    yield bot, engine
    await dpytest.empty_queue()
    await engine.close()


class Tree:
    """The parts of discord.py's CommandTree that !sync uses, with what Discord holds per place."""

    def __init__(self, global_commands: int = 0):
        self.held: dict[int | None, list[str]] = {None: ["cmd"] * global_commands}  # on Discord
        self.local: dict[int, list[str]] = {}  # in the bot's tree, per server

    async def sync(self, *, guild=None):
        self.held[guild.id if guild else None] = self.local.get(guild.id, []) if guild else ["cmd"] * 3
        return self.held[guild.id if guild else None]

    async def fetch_commands(self, *, guild=None):
        return self.held.get(guild.id if guild else None, [])

    def copy_global_to(self, *, guild):
        self.local[guild.id] = ["cmd"] * 3

    def clear_commands(self, *, guild):
        self.local[guild.id] = []


async def test_sync_warns_when_a_server_would_list_every_command_twice():
    guild = SimpleNamespace(id=1)
    both = SimpleNamespace(tree=Tree(global_commands=3))
    said = await sync_commands(both, "guild", guild)
    assert said.startswith("Synced 3 command(s) to this server.") and "see each twice" in said
    assert "!sync clear-guild" in said
    said = await sync_commands(both, "global", guild)
    assert "members see each command twice" in said
    said = await sync_commands(both, "clear-guild", guild)
    assert "own copies of the commands are gone" in said and both.tree.held[1] == []
    assert "members see each command twice" not in await sync_commands(both, "global", guild)
    alone = SimpleNamespace(tree=Tree())
    assert "twice" not in await sync_commands(alone, "guild", guild)
    assert (await sync_commands(alone, "bogus", guild)).startswith("Usage: !sync guild")
    assert "only in a server" in await sync_commands(alone, "guild", None)


def test_no_voice_warning_at_start(make_config, caplog):
    discord.VoiceClient.warn_nacl = discord.VoiceClient.warn_dave = True  # as a fresh process starts
    with caplog.at_level(logging.WARNING, logger="discord.client"):
        make_bot(make_config())
    assert not [r for r in caplog.records if "voice will NOT be supported" in r.getMessage()]


def test_the_discord_bot_logs_to_its_file_and_to_the_screen(tmp_path, capsys):
    root = logging.getLogger()
    kept = list(root.handlers), root.level
    try:
        logs.configure("INFO", ["secret-token"], log_file=tmp_path / "stelis.log", screen=True)
        logging.getLogger("stelis").info("connected with secret-token")
        for handler in root.handlers:
            handler.flush()
    finally:
        root.handlers[:] = kept[0]
        root.setLevel(kept[1])
    assert "connected with ***" in (tmp_path / "stelis.log").read_text()
    assert "connected with ***" in capsys.readouterr().err


async def test_the_log_file_rolls_over_and_the_schedulers_timers_stay_out_of_it(tmp_path, monkeypatch):
    """A timer pushed back by each message wrote half the log; the file never grows without bound."""
    from bot.memory_scheduler import MemoryScheduler

    monkeypatch.setattr(logs, "LOG_BYTES", 2_000)
    root = logging.getLogger()
    kept = list(root.handlers), root.level
    path = tmp_path / "stelis.log"

    class Worker:
        clock = staticmethod(lambda: 0.0)

        async def run_due(self):
            return []

    scheduler = MemoryScheduler(Worker(), 60)  # type: ignore[arg-type]
    try:
        logs.configure("INFO", [], log_file=path)
        scheduler.scheduler.start()
        for thread_id in range(30):
            scheduler.arm(thread_id, 3_600.0)
        for n in range(300):
            logging.getLogger("stelis").info("line %03d of a busy day", n)
        for handler in root.handlers:
            handler.flush()
    finally:
        scheduler.scheduler.shutdown(wait=False)
        root.handlers[:] = kept[0]
        root.setLevel(kept[1])
    files = sorted(tmp_path.glob("stelis.log*"))
    assert path in files and len(files) == 1 + logs.LOG_BACKUPS
    assert all(f.stat().st_size <= 2_000 for f in files)
    assert "line 299" in path.read_text() and "line 000" not in path.read_text()
    assert not any("Added job" in f.read_text() for f in files)


def test_context_bars_agree_with_their_heading():
    parts = {"system": 84, "memory": 0, "history": 20, "tail": 18, "output": 1024, "free": 198854}
    heading = context_heading(1, parts, 200_000, 188_604)
    assert "1146 of 200000 tokens in use" in heading and "may grow to 188604" in heading
    bars = {line.split()[0]: line for line in context_bars(parts, 200_000)}
    assert "#" in bars["system"] and "#" in bars["tail"]  # used, however small: drawn filled
    assert "#" not in bars["memory"] and "#" not in bars["free"] and "." in bars["free"]
    shown = sum(int(re.findall(r"\s(\d+)\s+[\d.]+%$", line)[0]) for line in bars.values())
    assert shown == 200_000  # the parts add up to the budget the heading names


async def test_console_double_slash_sends_a_message_and_pausing_twice_says_so(make_config):
    engine = await Engine.open(make_config(snapshots={"interval_seconds": 0}), OfflineLLM())
    script = "//etc/hosts is where the names live\n/memory pause\n/memory pause\n/memory resume\n/memory resume\n"
    out = io.StringIO()
    await Console(engine, io.StringIO(script), out, "mahe").run_loop()
    text = out.getvalue()
    root = await engine.stelis.root(Scope.console())
    said = [m.content for m in await engine.store.tail(root.id, 10) if m.role == "user"]
    assert said == ["/etc/hosts is where the names live"] and "Unknown command" not in text
    assert text.count("Automatic memory updates paused here.") == 1
    assert "were already paused here; nothing changed" in text
    assert "were already running here; nothing changed" in text
    await engine.close()


REPO = Path(__file__).resolve().parent.parent


def test_the_container_runs_as_a_user_with_every_extra_a_health_check_and_the_bot_only():
    dockerfile = (REPO / "Dockerfile").read_text()
    assert "pip install --no-cache-dir -e '.[openai]'" in dockerfile
    # its user cannot write bytecode beside the sources: compiled at build, or every start compiles them again
    compiled = re.search(r"python -m compileall -q ([\w ]+)", dockerfile)
    assert compiled and {"bot", "memory", "cogs"} <= set(compiled.group(1).split())
    users = re.findall(r"^USER (\S+)", dockerfile, re.MULTILINE)
    assert users and users[-1] not in ("root", "0")
    assert re.search(r"^HEALTHCHECK .*\"bot\", \"health\"", dockerfile, re.MULTILINE)
    assert dockerfile.rstrip().endswith('CMD ["python", "-m", "bot", "discord"]')
    service = yaml.safe_load((REPO / "compose.yaml").read_text())["services"]["stelis"]
    assert service["restart"] not in ("always", "unless-stopped")  # a bad token (exit 2) must not loop forever
    assert not service.get("tty") and not service.get("stdin_open")  # `up -d` never starts a detached console
    passed = set(service["environment"])
    assert {"ANTHROPIC_BASE_URL", "STELIS_LLM_PROVIDER", "OPENAI_BASE_URL", "OPENAI_API_KEY"} <= passed
    assert service["env_file"] == [{"path": ".env", "required": False}]
    assert "./config.yaml:/app/config.yaml:ro" in service["volumes"]


def _bot(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STELIS_", "ANTHROPIC_", "DISCORD_"))}
    env["STELIS_DATA_DIR"] = str(tmp_path)
    return subprocess.run([sys.executable, "-m", "bot", *args], capture_output=True, text=True, cwd=REPO, env=env,
                          timeout=60)


def test_the_discord_command_without_a_token_stops_with_what_to_do(tmp_path):
    done = _bot(tmp_path, "discord")
    assert done.returncode == 2 and "DISCORD_TOKEN is not set" in done.stderr and "python -m bot console" in done.stderr


async def test_health_follows_the_heartbeat(tmp_path):
    path = health.heartbeat_path(tmp_path)
    assert health.check(path) == (False, f"no heartbeat at {path}: the bot has not connected to Discord yet")
    connected = False
    beating = asyncio.create_task(health.beat(path, lambda: connected, every=0.01))
    await asyncio.sleep(0.05)
    assert not path.exists()  # not connected: no beat
    connected = True
    await asyncio.sleep(0.05)
    beating.cancel()
    ok, why = health.check(path)
    assert ok and why.startswith("connected")
    stale, why = health.check(path, now=time.time() + 3600)
    assert not stale and "not connected to Discord" in why
    assert _bot(tmp_path, "health").returncode == 0


def test_renaming_the_persona_renames_its_default_card():
    luna = load_config(None, {"STELIS_PERSONA_NAME": "Luna"}).config
    assert luna.persona.card.startswith("You are Luna, a warm") and "Stelis" not in luna.persona.card
    own = validate({"persona": {"name": "Eris", "card": "I am {name}; {name} reads old novels."}})
    assert own.persona.card == "I am Eris; Eris reads old novels."


async def test_the_offline_models_words_are_kept_but_never_recalled_as_the_personas(make_config):
    engine = await Engine.open(make_config(snapshots={"interval_seconds": 0}), OfflineLLM())
    here = Scope.console()
    await engine.conversations.hear(here, "the comet returns in 2061", author_name="mahe")
    reply = await engine.conversations.reply((await engine.stelis.root(here)).id)
    stored = await engine.conversations.last_message(reply.thread_id)
    assert stored.metadata == {"placeholder": True} and "language model is configured" in stored.content
    assert await engine.archive.recall(here, "configured language model") == []  # the stand-in's words
    assert [h.text for h in await engine.archive.recall(here, "comet 2061")] == ["the comet returns in 2061"]
    await engine.close()


async def test_help_lists_every_command_and_branches_explain_suspended(offline_bot):
    from tests.test_slash import run, said

    bot, _ = offline_bot
    it = await run(bot.get_cog("Help").help, bot.get_cog("Help"))
    helped = said(it)
    assert "/threads tree: " in helped and "/stelis" not in helped  # named for what it is, not the persona
    pager = it.response.views[0]  # one message with pages, not a stream of messages
    assert len(it.response.sent + it.followup.sent) == 1 and len(pager.pages) > 1
    assert all(len(page) <= 2_000 for page in pager.pages)
    for command in ("/help: ", "/memory show: ", "/autonomy-admin pulse-now: ", "/branches-admin create: ",
                    "/tasks list: "):
        assert command in helped
    admin = bot.get_cog("Admin")
    await run(admin.branches_create, admin, "Stargazing", None)
    listed = said(await run(admin.branches_list, admin))
    assert "[free, suspended] Stargazing" in listed and "(suspended: its last session ended" in listed
    assert "There is no kind 'user'" in said(await run(admin.branches_list, admin, None, "user"))
    it = await run(admin.branches_list, admin)  # any interaction will do for the autocomplete
    assert [c.value for c in await admin._kinds(it, "")] == ["free"]  # only kinds this channel has


def test_members_are_never_offered_memory_changes(make_config):
    from cogs.admin import Admin

    memory = {c.name for c in Admin.memory.commands}
    changes = {c.name for c in Admin.memory_admin.commands}
    assert memory == {"show", "history", "forget-me", "optout", "optin"}
    assert changes == {"pin", "unpin", "edit", "rollback", "regenerate", "forget", "pause", "resume"}
    assert Admin.memory_admin.default_permissions == discord.Permissions(manage_guild=True)
    assert Admin.memory.default_permissions is None  # reading, forget-me and opt-out are everyone's


class Streaming:
    """A model that writes its reply in pieces, or breaks off after the first ones."""

    name = "streaming"

    def __init__(self, pieces: list[str], fail: bool = False):
        self.pieces, self.fail = pieces, fail

    async def complete(self, request, on_text=None):
        from memory.llm import LLMError, LLMResult

        for piece in self.pieces:
            if on_text:
                on_text(piece)
            await asyncio.sleep(0.03)
        if self.fail:
            raise LLMError("the connection dropped mid-answer")
        return LLMResult(text="".join(self.pieces))

    async def aclose(self):
        return None


async def _streamed(make_config, monkeypatch, llm):
    import discord.ext.test as dpytest

    from cogs import reply_stream
    from tests.discord_helpers import mention, post, start_bot

    monkeypatch.setattr(reply_stream, "EDIT_SECONDS", 0.01)
    edits: list[str] = []
    original = discord.Message.edit

    async def edit(self, **fields):
        edits.append(fields.get("content"))
        return await original(self, **fields)

    monkeypatch.setattr(discord.Message, "edit", edit)
    config = make_config(snapshots={"interval_seconds": 0}, short_term_history={"enabled": False})
    engine = await Engine.open(config, llm)
    bot = await start_bot(engine, config)
    post(f"{mention(bot)} which one is the W?")
    await dpytest.run_all_events()
    await asyncio.sleep(0.3)
    sent = []
    while not dpytest.verify().message().nothing():
        sent.append(dpytest.get_message())
    await engine.close()
    return sent, edits


async def test_a_reply_is_shown_as_it_is_written_then_in_full(make_config, monkeypatch):
    pieces = ["Cassiopeia ", "is the ", "W shape, ", "high in the autumn sky."]
    sent, edits = await _streamed(make_config, monkeypatch, Streaming(pieces))
    assert len(sent) == 1 and sent[0].content == pieces[0]  # one message, sent with the first words ...
    assert len(edits) >= 2 and edits[-1] == "".join(pieces)  # ... edited as the text came, ending with all of it
    assert edits[0] != edits[-1]


async def test_a_reply_that_breaks_off_leaves_the_notice_not_half_an_answer(make_config, monkeypatch):
    sent, edits = await _streamed(make_config, monkeypatch, Streaming(["Half an ", "answer"], fail=True))
    assert len(sent) == 1 and sent[0].content.startswith("Half an")  # shown as it came ...
    assert edits and edits[-1].startswith("⚠️ I couldn't answer just now")  # ... and replaced by the notice


async def test_long_texts_come_from_a_prefilled_form_or_an_attached_file(offline_bot):
    from unittest.mock import AsyncMock, MagicMock

    from tests.test_slash import interaction, run, said

    bot, engine = offline_bot
    admin = bot.get_cog("Admin")
    opened = await run(admin.persona_set, admin)  # no text: a form, filled with the card as it is
    form = opened.response.modal
    assert form.text.style == discord.TextStyle.paragraph and form.text.default.startswith("You are Stelis")
    form.text._value = "You are Stelis.\nYou love the night sky.\nYou answer in two lines at most."
    submitted = interaction()
    await form.on_submit(submitted)
    assert "Persona card updated" in said(submitted)
    assert (await engine.settings.effective(submitted.guild_id, submitted.channel_id)).persona.card.endswith("at most.")

    card = MagicMock(spec=discord.Attachment, filename="memory.txt", size=40)
    card.read = AsyncMock(return_value=b"[8 May 2023]\nmahe: the W is Cassiopeia")
    assert "written" in said(await run(admin.memory_edit, admin, None, card))
    view = await engine.admin.view(Scope.channel(submitted.guild_id, submitted.channel_id))
    assert view.short_term[-1].content == "[8 May 2023]\nmahe: the W is Cassiopeia"
    again = (await run(admin.memory_edit, admin)).response.modal  # the form holds the memory as it now is
    assert again.text.default == "[8 May 2023]\nmahe: the W is Cassiopeia"
    binary = MagicMock(spec=discord.Attachment, filename="photo.png", size=10)
    binary.read = AsyncMock(return_value=b"\x89PNG\xff\xfe")
    assert "Not changed: photo.png is not UTF-8 text." in said(await run(admin.memory_edit, admin, None, binary))


async def test_who_is_answered_allow_deny_cooldown_and_direct_messages(offline_bot, monkeypatch):
    import discord.ext.test as dpytest

    from tests.discord_helpers import channel, member, mention, post
    from tests.test_slash import run, said

    bot, engine = offline_bot
    access, talk = bot.get_cog("Access"), bot.get_cog("Messages")
    alice = member()
    reactions: list[str] = []

    async def add_reaction(self, emoji):  # dpytest's own fails on this discord.py (no reaction type)
        reactions.append(str(emoji))

    monkeypatch.setattr(discord.Message, "add_reaction", add_reaction)
    here = Scope.channel(channel().guild.id, channel().id)

    async def answered(text: str) -> bool:
        post(f"{mention(bot)} {text}", author=alice)
        await dpytest.run_all_events()
        await asyncio.sleep(0.05)
        got = not dpytest.verify().message().nothing()
        while not dpytest.verify().message().nothing():
            dpytest.get_message()
        return got

    assert await answered("first")
    assert "on the deny list" in said(await run(access.deny, access, alice))
    assert not await answered("denied, but remembered")
    remembered = [m.content for m in await engine.store.tail((await engine.stelis.root(here)).id, 20)]
    assert any("denied, but remembered" in m for m in remembered)
    assert "off both lists" in said(await run(access.remove, access, alice))
    assert "needs the Manage Server permission" in said(await run(access.cooldown, access, 60, as_admin=False))
    assert "Cooldown: 60 s." in said(await run(access.cooldown, access, 60))
    assert not await answered("too soon after 'first'") and reactions == ["⏳"]  # marked instead of answered
    shown = said(await run(access.show, access))
    assert "Denied: nobody" in shown and "Cooldown: 60 s" in shown
    assert "No cooldown." in said(await run(access.cooldown, access, 0))
    assert await answered("no wait any more")

    dm = await alice.create_dm()
    assert (await talk._here(dm)).policy == "chat"
    engine.config.discord.dms = "off"
    assert (await talk._here(dm)).policy == "off"


async def test_a_server_chooses_the_model_its_replies_use(make_config, fake_anthropic):
    import discord.ext.test as dpytest

    from bot.config import AnthropicConfig, ModelTiers
    from bot.providers.anthropic_llm import AnthropicLLM
    from tests.discord_helpers import start_bot
    from tests.test_slash import interaction, run, said

    llm = AnthropicLLM(AnthropicConfig(api_key="k", base_url=fake_anthropic.base_url, max_retries=0), ModelTiers())
    config = make_config(snapshots={"interval_seconds": 0}, short_term_history={"enabled": False},
                         llm={"reply_tools": False})
    engine = await Engine.open(config, llm)
    bot = await start_bot(engine, config)
    admin = bot.get_cog("Admin")
    assert "Replies here use claude-sonnet-5-5: the default." in said(await run(admin.model, admin))
    assert "needs the Manage Server permission" in said(await run(admin.model, admin, "claude-opus-5", as_admin=False))
    assert "claude-opus-5: chosen for this server or channel" in said(await run(admin.model, admin, "claude-opus-5"))
    it = interaction()
    here, elsewhere = Scope.channel(it.guild_id, it.channel_id), Scope.channel(it.guild_id + 1, 5)
    for scope in (here, elsewhere):
        await engine.conversations.hear(scope, "hello", author_name="mahe")
        await engine.conversations.reply((await engine.stelis.root(scope)).id)
    assert [c.body["model"] for c in fake_anthropic.calls] == ["claude-opus-5", "claude-sonnet-5-5"]
    assert "the default." in said(await run(admin.model, admin, "default"))
    await dpytest.empty_queue()
    await engine.close()


async def test_memory_commands_take_another_channel_a_forum_or_a_thread(offline_bot):
    from discord.ext.test import backend

    from tests.discord_helpers import channel, create_thread
    from tests.test_slash import run, said

    bot, engine = offline_bot
    admin = bot.get_cog("Admin")
    general = channel()
    other = backend.make_text_channel("stargazing", general.guild)
    thread = create_thread(8123, general, "W shapes", bot.user.id)
    assert "Pinned" in said(await run(admin.memory_pin, admin, "The W is Cassiopeia", other))
    assert (await engine.admin.view(Scope.channel(general.guild.id, other.id))).pins == ["The W is Cassiopeia"]
    assert (await engine.admin.view(Scope.channel(general.guild.id, general.id))).pins == []  # not here
    assert "paused in #stargazing" in said(await run(admin.memory_pause, admin, other))
    await run(admin.memory_pin, admin, "General's own fact")
    assert "Pinned: General's own fact" in said(await run(admin.memory_show, admin, thread))  # its parent's memory


async def test_members_see_no_command_they_would_be_refused(offline_bot):
    from cogs.help import command_lines

    bot, _ = offline_bot
    offered = [c for c in bot.tree.get_commands() if c.default_permissions is None]
    hidden = [c for c in bot.tree.get_commands() if c.default_permissions == discord.Permissions(manage_guild=True)]
    everyone = [line for line in command_lines(bot.tree) if line.split(":")[0].split()[0][1:] in
                {c.name for c in offered}]
    assert everyone and not [line for line in everyone if "(Manage Server)" in line]  # only what members may do
    assert {"memory-admin", "branches-admin", "tasks-admin", "autonomy-admin", "playbooks-admin", "access", "config",
            "persona"} <= {c.name for c in hidden}


async def test_a_direct_message_user_can_read_their_memory(offline_bot):
    from unittest.mock import MagicMock

    from tests.discord_helpers import member
    from tests.test_slash import Followup, Response, said

    bot, engine = offline_bot
    admin = bot.get_cog("Admin")
    alice = member()
    dm = await alice.create_dm()
    it = MagicMock(spec=discord.Interaction)
    it.channel, it.channel_id, it.guild_id, it.user = dm, dm.id, None, alice
    it.response, it.followup = Response(), Followup()
    await engine.conversations.hear(Scope.dm(alice.id, dm.id), "my telescope is a 70 mm refractor", author_name="alice",
                      author_id=alice.id)
    await engine.admin.regenerate(Scope.dm(alice.id, dm.id))
    await admin.memory_show.callback(admin, it)
    assert "v1 (messages 1-1" in said(it) and "70 mm refractor" in said(it)
    assert not type(admin).memory.guild_only and type(admin).memory_admin.guild_only  # /memory is offered in DMs


async def test_the_model_sees_the_images_of_the_message_it_answers_while_their_links_are_fresh(make_config,
                                                                                               fake_anthropic):
    from unittest.mock import MagicMock

    from bot.clock import Clock
    from bot.config import AnthropicConfig, ModelTiers
    from bot.providers.anthropic_llm import AnthropicLLM
    from cogs.messages import _arrival, _content

    clock = Clock()
    llm = AnthropicLLM(AnthropicConfig(api_key="k", base_url=fake_anthropic.base_url, max_retries=0), ModelTiers())
    engine = await Engine.open(make_config(snapshots={"interval_seconds": 0}, llm={"reply_tools": False}), llm,
                               clock=clock)
    here = Scope.channel(1, 10)
    star = {"url": "https://cdn.example/att/cassiopeia.png", "name": "cassiopeia.png", "media_type": "image/png"}
    heard = await engine.conversations.hear(here, "what is this W?\n[image: cassiopeia.png]", author_name="mahe",
                                            images=[star])
    await engine.conversations.settle()  # described once, in the background, by the light model
    described = fake_anthropic.calls[-1].body
    assert described["model"] == ModelTiers().light and described["messages"][0]["content"][0]["type"] == "image"
    kept = await engine.store.message_by_seq(heard.seq)
    assert kept.content == heard.content and kept.metadata["images"][0]["description"].startswith("fake reply")
    root = (await engine.stelis.root(here)).id
    await engine.conversations.reply(root)
    sent = fake_anthropic.calls[-1]
    assert "[image: cassiopeia.png: fake reply to" in json.dumps(sent.body["messages"])  # memory keeps what it showed
    assert sent.status == 200
    last = sent.body["messages"][-1]["content"]
    images = [i for i, b in enumerate(last) if b.get("type") == "image"]
    assert [last[i]["source"] for i in images] == [{"type": "url", "url": star["url"]}]
    marked = [i for i, b in enumerate(last) if b.get("cache_control")]
    assert all(i < images[0] for i in marked)  # in the volatile tail: no cached prefix holds it

    await engine.conversations.hear(here, "and now a plain question", author_name="mahe")
    await engine.conversations.reply(root)
    assert not any(b.get("type") == "image" for m in fake_anthropic.calls[-1].body["messages"] for b in m["content"]
                   if isinstance(m["content"], list))  # only the message being answered shows its images
    await engine.conversations.hear(here, "look again\n[image: cassiopeia.png]", author_name="mahe", images=[star])
    await engine.conversations.settle()
    clock.advance(7_200)  # the chat service's link has expired meanwhile: named, not sent
    await engine.conversations.reply(root)
    assert fake_anthropic.calls[-1].status == 200
    assert "image" not in json.dumps(fake_anthropic.calls[-1].body["messages"][-1]["content"][-1])
    await engine.close()

    photo = MagicMock(spec=discord.Attachment, filename="sky.jpg", url="https://cdn.example/sky.jpg",
                      content_type="image/jpeg", size=200_000)
    huge = MagicMock(spec=discord.Attachment, filename="raw.tiff", url="https://cdn.example/raw.tiff",
                     content_type="image/tiff", size=40_000_000)
    notes = MagicMock(spec=discord.Attachment, filename="notes.txt", url="https://cdn.example/notes.txt",
                      content_type="text/plain", size=100)
    message = MagicMock(spec=discord.Message, content="tonight's sky", attachments=[photo, huge, notes])
    assert _content(message) == ("tonight's sky\n[image: sky.jpg]\n[attachment: raw.tiff https://cdn.example/raw.tiff]"
                                 "\n[attachment: notes.txt https://cdn.example/notes.txt]")
    message.author.bot = False
    arrival = _arrival(message)
    assert [i["url"] for i in arrival.images] == ["https://cdn.example/sky.jpg"] and not arrival.persona


async def test_a_model_without_images_gets_none(make_config):
    engine = await Engine.open(make_config(snapshots={"interval_seconds": 0}), OfflineLLM())
    here = Scope.channel(1, 10)
    await engine.conversations.hear(here, "[image: a.png]", author_name="mahe", images=[{"url": "https://cdn.example/a.png"}])
    request = (await engine.conversations.context((await engine.stelis.root(here)).id)).request
    assert not any(b.kind == "image" for t in request.turns for b in t.blocks)
    await engine.close()


async def test_help_explains_one_command_and_suggests_for_a_typo(offline_bot):
    from tests.test_slash import run, said

    bot, _ = offline_bot
    helper = bot.get_cog("Help")
    explained = said(await run(helper.help, helper, "memory-admin pin"))
    assert explained.startswith("/memory-admin pin: ") and "Needs the Manage Server permission." in explained
    assert "- fact: " in explained
    assert "Did you mean /memory show" in said(await run(helper.help, helper, "/memroy show"))
    choices = await helper._complete(await run(helper.help, helper, "help"), "memory-admin p")
    assert [c.value for c in choices] == ["memory-admin pause", "memory-admin pin"]
