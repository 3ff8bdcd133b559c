"""Slash commands called with discord.Interaction mocks (never tree.sync())."""

from __future__ import annotations

from unittest.mock import AsyncMock, MagicMock

import discord
import discord.ext.test as dpytest
import pytest

from bot.engine import Engine
from bot.providers.offline import OfflineLLM
from memory.records import Scope
from tests.discord_helpers import channel, create_thread, member, start_bot
from tests.test_config import ALIAS_BOMB


class Response:
    def __init__(self):
        self.sent: list[tuple[str, bool]] = []
        self.views: list = []
        self.deferred: tuple[bool, bool] | None = None
        self.modal = None
        self._done = False

    def is_done(self) -> bool:
        return self._done

    async def send_message(self, content=None, *, ephemeral=False, **more):
        assert not self._done, "responded twice"
        self.sent.append((content, ephemeral))
        self.views.append(more.get("view"))
        self.file = more.get("file")
        self._done = True

    async def send_modal(self, modal):
        assert not self._done, "a modal after responding"
        self.modal = modal
        self._done = True

    async def defer(self, *, ephemeral=False, thinking=False, **_):
        assert not self._done, "deferred after responding"
        self.deferred = (ephemeral, thinking)
        self._done = True


class Followup:
    def __init__(self):
        self.sent: list[tuple[str, bool]] = []
        self.views: list = []

    async def send(self, content=None, *, ephemeral=False, **more):
        self.sent.append((content, ephemeral))
        self.views.append(more.get("view"))


def interaction(where=None, *, admin: bool = True) -> MagicMock:
    where = where or channel()
    it = MagicMock(spec=discord.Interaction)
    it.channel, it.channel_id, it.guild_id, it.guild = where, where.id, where.guild.id, where.guild
    it.user = MagicMock()
    it.user.guild_permissions = discord.Permissions(manage_guild=admin)
    it.response, it.followup = Response(), Followup()
    return it


def said(it) -> str:
    """Everything answered, every page of a paged answer included."""
    messages = it.response.sent + it.followup.sent
    assert messages and all(ephemeral for _, ephemeral in messages), "every answer is ephemeral"
    views = it.response.views + it.followup.views
    return "\n".join("\n".join(view.pages) if view is not None else text
                     for (text, _), view in zip(messages, views, strict=True))


@pytest.fixture
async def admin(make_config):
    # Automatic updates off: the background scheduler would race the explicit /memory regenerate.
    config = make_config(snapshots={"interval_seconds": 0}, short_term_history={"enabled": False})
    engine = await Engine.open(config, OfflineLLM())
    bot = await start_bot(engine, config)
    yield bot.get_cog("Admin"), engine
    await dpytest.empty_queue()
    await engine.close()


async def run(command, cog, *args, **kwargs):
    """A command as discord.py runs it: its group's and its own checks first (a refusal answers), then it."""
    it = kwargs.pop("it", None) or interaction(admin=kwargs.pop("as_admin", True))
    if await command._check_can_run(it):
        await command.callback(cog, it, *args, **kwargs)
    return it


def scope() -> Scope:
    return Scope.channel(channel().guild.id, channel().id)


async def test_memory_commands(admin):
    cog, engine = admin
    await engine.conversations.hear(scope(), "I am Mahe and I build calculator_v2", author_name="mahe")
    assert "No memory written yet." in said(await run(cog.memory_show, cog))
    regenerated = await run(cog.memory_regenerate, cog)
    assert regenerated.response.deferred == (True, True)  # deferred at once: the model may be slow
    assert "Short-term memory v1 written." in said(regenerated)
    assert "Pinned: Mahe likes tea" in said(await run(cog.memory_pin, cog, "Mahe likes tea"))
    shown = said(await run(cog.memory_show, cog))
    assert "  v1 (messages 1-1, " in shown and "Long-term v1 (" in shown and "Pinned: Mahe likes tea" in shown
    assert "calculator_v2" in said(await run(cog.memory_show, cog, full=True))
    assert "v1 (messages" in said(await run(cog.memory_history, cog))
    assert "v2 written" in said(await run(cog.memory_edit, cog, "corrected by an admin"))
    assert "Version 1 is current again, as v3." in said(await run(cog.memory_rollback, cog, 1))
    assert "paused" in said(await run(cog.memory_pause, cog))
    assert (await engine.admin.view(scope())).channel.paused == 1
    assert "resumed" in said(await run(cog.memory_resume, cog))
    assert "Unpinned: Mahe likes tea" in said(await run(cog.memory_unpin, cog, "Mahe likes tea"))


async def test_memory_bad_arguments(admin):
    cog, _ = admin
    assert "cannot be empty" in said(await run(cog.memory_pin, cog, "   "))
    assert "Nothing changed." in said(await run(cog.memory_unpin, cog, "never pinned"))
    assert "cannot be empty" in said(await run(cog.memory_edit, cog, "  "))
    assert "no short-term memory version 99" in said(await run(cog.memory_rollback, cog, 99))


async def test_a_member_without_manage_server_is_refused_and_nothing_changes(admin):
    cog, engine = admin
    for command, args in ((cog.memory_pin, ("x",)), (cog.memory_edit, ("x",)), (cog.memory_rollback, (1,)),
                          (cog.memory_regenerate, ()), (cog.memory_pause, ()), (cog.memory_resume, ()),
                          (cog.memory_unpin, ("x",)), (cog.config_set, ("channel", "stelis.max_depth", "2")),
                          (cog.config_reset, ("channel", "stelis.max_depth")), (cog.persona_set, ("evil card",))):
        assert "needs the Manage Server permission" in said(await run(command, cog, *args, as_admin=False))
    view = await engine.admin.view(scope())
    assert view.pins == [] and view.short_term == [] and view.channel.paused == 0
    assert await engine.store.settings("channel", channel().id) == {}
    # members may still read this channel's memory
    assert "Memory of this conversation" in said(await run(cog.memory_show, cog, as_admin=False))


async def test_stelis_and_branch_commands(admin):
    cog, engine = admin
    create_thread(7001, channel(), "Research", owner_id=member().id)
    await dpytest.run_all_events()
    tree = said(await run(cog.stelis_tree, cog))
    assert "main conversation [active] depth 0" in tree and "Research [active] depth 1" in tree
    session = (await engine.store.branch("discord-7001")).current_thread_id
    assert f"stelis:{session} Research [active]" in said(await run(cog.stelis_show, cog, session))
    assert "There is no Stelis thread 999" in said(await run(cog.stelis_show, cog, 999))
    assert "discord-7001 [task, active] Research" in said(await run(cog.branches_list, cog))
    assert "No branches here yet." in said(await run(cog.branches_list, cog, "completed"))
    assert f"- stelis:{session} [active]" in said(await run(cog.branches_show, cog, "discord-7001"))
    assert "There is no branch 'nope'" in said(await run(cog.branches_show, cog, "nope"))
    # inside the Discord thread, /context is about the thread's session
    thread = channel().guild.get_thread(7001)
    it = interaction(thread)
    await cog.context.callback(cog, it)
    assert it.response.deferred == (True, True) and f"Next request for stelis:{session}" in said(it)
    assert "parent" in said(it) and "#" in said(it)


async def test_config_and_persona_commands(admin):
    cog, engine = admin
    assert "Set discord.reply_policy = 'chat' for this channel." in said(
        await run(cog.config_set, cog, "channel", "discord.reply_policy", "chat"))
    assert await engine.settings.reply_policy(channel().guild.id, channel().id) == "chat"
    shown = said(await run(cog.config_show, cog))
    assert "discord.reply_policy = 'chat'" in shown and "channel discord.reply_policy = 'chat'" in shown
    bad = said(await run(cog.config_set, cog, "guild", "short_term_history.message_threshold", "1"))
    assert "Not set:" in bad and "short_term_history.message_threshold = '1'" in bad and "2 <= value <= 10000" in bad
    assert "cannot be set here" in said(await run(cog.config_set, cog, "guild", "llm.anthropic.api_key", "x"))
    assert "Not set:" in said(await run(cog.config_set, cog, "channel", "discord.reply_policy", "shout"))
    assert "Override of discord.reply_policy removed." in said(
        await run(cog.config_reset, cog, "channel", "discord.reply_policy"))
    assert "had no override here" in said(await run(cog.config_reset, cog, "channel", "discord.reply_policy"))
    assert "Persona card updated" in said(await run(cog.persona_set, cog, "You are Stelis, a pirate."))
    assert "a pirate" in said(await run(cog.persona_show, cog))
    root = await engine.stelis.root(scope())
    assert "a pirate" in (await engine.conversations.context(root.id)).request.system[0].text  # the card, in the prompt


async def test_autocomplete_offers_at_most_25_valid_choices(admin):
    cog, engine = admin
    for i in range(30):
        await engine.admin.edit(scope(), f"version text {i}")
        await engine.admin.pin(scope(), f"fact {i}")
    it = interaction()
    versions = await cog._versions(it, "")
    assert 0 < len(versions) <= 25 and all(isinstance(c.value, int) for c in versions)
    pins = await cog._pinned(it, "fact 2")
    assert {c.value for c in pins} == {"fact 2", *(f"fact {i}" for i in range(20, 30))}
    keys = await cog._keys(it, "short")
    assert keys and all(c.value.startswith("short_term_history.") for c in keys)
    assert await cog._branches(it, "") == []


async def test_reading_another_channels_memory_needs_to_see_it(admin):
    from discord.ext.test import backend

    cog, engine = admin
    guild = channel().guild
    hidden = backend.make_text_channel("staff-only", guild)
    await engine.conversations.hear(Scope.channel(guild.id, hidden.id), "staff secret ISSUE-9", author_name="boss")
    await engine.admin.regenerate(Scope.channel(guild.id, hidden.id))
    assert "ISSUE-9" in said(await run(cog.memory_show, cog, hidden))  # an admin reads any channel
    it = interaction(admin=False)
    it.user = guild.get_member(member().id)
    await dpytest.set_permission_overrides(guild.default_role, hidden, read_messages=False)
    await dpytest.set_permission_overrides(it.user, hidden, read_messages=False)
    await cog.memory_history.callback(cog, it, hidden)
    assert "You cannot see #staff-only" in said(it) and "ISSUE-9" not in said(it)
    visible = backend.make_text_channel("lobby", guild)
    await engine.conversations.hear(Scope.channel(guild.id, visible.id), "lobby talk about Tokyo", author_name="kai")
    await engine.admin.regenerate(Scope.channel(guild.id, visible.id))
    it = interaction(admin=False)
    it.user = guild.get_member(member().id)
    await cog.memory_show.callback(cog, it, visible)
    assert "Tokyo" in said(it)  # a member reads a channel they can see


async def test_recall_answers_ephemerally_with_date_speaker_and_place(admin):
    cog, engine = admin
    await engine.conversations.hear(scope(), "the calculator_v2 deadline is 14 March", author_name="mahe")
    await engine.conversations.hear(scope(), "nice weather today", author_name="ben")
    found = said(await run(cog.recall, cog, "calculator deadline", as_admin=False))  # reading needs no admin
    assert "mahe (this conversation): the calculator_v2 deadline is 14 March" in found and "weather" not in found
    assert "Nothing found for 'zebra'" in said(await run(cog.recall, cog, "zebra"))
    assert "Give some words" in said(await run(cog.recall, cog, "   "))


async def test_memory_reads_stay_in_the_callers_server_and_create_nothing(admin):
    from discord.ext.test import backend

    cog, engine = admin
    other_guild = backend.make_guild("elsewhere")
    foreign = backend.make_text_channel("their-secrets", other_guild)
    theirs = Scope.channel(other_guild.id, foreign.id)
    await engine.conversations.hear(theirs, "their launch code is ZEBRA-77", author_name="them")
    await engine.admin.regenerate(theirs)
    for command in (cog.memory_show, cog.memory_history):
        answer = said(await run(command, cog, foreign))  # even an admin, but of this server only
        assert "not in this server" in answer and "ZEBRA" not in answer

    quiet = backend.make_text_channel("quiet", channel().guild)
    roots = len(await engine.store.root_threads(engine.persona))
    assert "No memory written yet" in said(await run(cog.memory_show, cog, quiet))
    assert "No memory written yet" in said(await run(cog.memory_history, cog, quiet))
    assert len(await engine.store.root_threads(engine.persona)) == roots  # reading created no conversation


async def test_config_values_are_read_as_their_keys_type_never_as_yaml(admin):
    cog, engine = admin
    assert "Set discord.reply_policy = 'off'" in said(
        await run(cog.config_set, cog, "channel", "discord.reply_policy", "off"))  # YAML would make it False
    assert await engine.settings.reply_policy(channel().guild.id, channel().id) == "off"
    card = "# Stelis\nrole: a guide: kind, brief  # not a comment"
    assert "Set persona.card" in said(await run(cog.config_set, cog, "channel", "persona.card", card))
    assert (await engine.settings.effective(channel().guild.id, channel().id)).persona.card == card
    said(await run(cog.config_set, cog, "channel", "stelis.max_depth", "3"))
    assert (await engine.settings.effective(channel().guild.id, channel().id)).stelis.max_depth == 3

    refused = said(await run(cog.config_set, cog, "channel", "stelis.max_depth", ALIAS_BOMB))
    assert "Not set:" in refused and "stelis.max_depth" in refused and len(refused) < 400
    for value in ("nan", "inf", "1e18"):
        assert "Not set:" in said(await run(cog.config_set, cog, "channel", "stelis.default_window_ratio", value))


async def test_forget_me_and_optout_answer_ephemerally(admin):
    cog, engine = admin
    me = member()
    await engine.conversations.hear(scope(), "my locker code is quokka-5521", author_name="me", author_id=me.id)
    it = interaction(admin=False)
    it.user = me
    await cog.memory_forget_me.callback(cog, it)
    assert it.response.deferred == (True, True) and "Forgot 1 message(s) of yours" in said(it)
    # a word, not a bare number: the request's repr holds timestamps, whose digits may contain any four
    assert "quokka" not in str(await engine.conversations.context((await engine.stelis.root(scope())).id))
    refused = await run(cog.memory_forget, cog, me, as_admin=False)
    assert "Manage Server" in said(refused)  # forgetting someone else is for admins
    it = interaction(admin=False)
    it.user = me
    await cog.memory_optout.callback(cog, it)
    assert "don't keep or read" in said(it)
    assert await engine.conversations.hear(scope(), "not kept", author_name="me", author_id=me.id) is None


@pytest.fixture
async def books(make_config):
    config = make_config(snapshots={"interval_seconds": 0}, short_term_history={"enabled": False})
    engine = await Engine.open(config, OfflineLLM())
    bot = await start_bot(engine, config)
    yield bot.get_cog("PlaybookCommands"), engine
    await dpytest.empty_queue()
    await engine.close()


async def test_playbook_commands(books):
    cog, _ = books
    assert "research: Look into a topic" in said(await run(cog.list_, cog))
    assert "  conclude (llm, conversation) -> close" in said(await run(cog.show, cog, "research"))
    assert "There is no playbook 'nope'" in said(await run(cog.show, cog, "nope"))
    assert "needs the Manage Server permission" in said(await run(cog.check, cog, as_admin=False))
    assert "No problems" in said(await run(cog.check, cog))
    assert "needs the Manage Server permission" in said(await run(cog.run, cog, "research", "{}", as_admin=False))
    assert 'not valid JSON' in said(await run(cog.run, cog, "research", "{topic"))
    assert 'research takes topic, for example {"topic": "..."}' in said(await run(cog.run, cog, "research", "{topic"))
    words = await run(cog.run, cog, "research", "lighthouse budget")  # one text input: plain words are it
    assert "research finished:" in said(words)
    assert "did not finish: research: missing argument(s) topic" in said(await run(cog.run, cog, "research", "{}"))
    ran = await run(cog.run, cog, "research", '{"topic": "calculator_v2"}')
    assert ran.response.deferred == (True, True) and "research finished:" in said(ran)
    progress = [c.kwargs["content"] for c in ran.edit_original_response.await_args_list]
    assert progress[0].startswith("Running research...\nresearch: open (stelis_start)")
    assert "research: close (stelis_end)" in progress[-1]
    shown = said(await run(cog.runs, cog))
    assert "research [completed]" in shown


async def test_a_playbook_speaks_and_posts_in_the_channel_through_the_cogs(books):
    _, engine = books
    await engine.conversations.hear(scope(), "we ship on Friday", author_name="mahe")
    done = await engine.playbooks.run(scope(), "meta_user", {})
    posted = dpytest.get_message()
    assert posted.content == done.outputs["reply"] and posted.channel.id == channel().id
    root = await engine.stelis.root(scope())
    last = await engine.conversations.last_message(root.id)
    assert last is not None and last.role == "assistant" and last.content == done.outputs["reply"]  # remembered


async def test_the_persona_opens_a_thread_and_posts_through_its_tools(books, monkeypatch):
    from types import SimpleNamespace

    from bot.services.tool_calls import scope_of
    from memory.llm import ToolCall

    _, engine = books
    opened_here: list[tuple[int, str, object]] = []

    async def create_thread(self, *, name, type, auto_archive_duration):  # dpytest has no thread creation
        opened_here.append((self.id, name, type))
        return SimpleNamespace(name=name, id=4242)

    monkeypatch.setattr(discord.TextChannel, "create_thread", create_thread)
    root = await engine.stelis.root(scope())
    box = engine.conversations.toolbox
    said = await box.answer(ToolCall("t1", "post_message", {"text": "Good morning, all."}), scope_of(root),
                            root.id, ["post_message"])
    assert said == "posted" and dpytest.get_message().content == "Good morning, all."
    opened = await box.answer(ToolCall("t2", "open_thread", {"name": "Release notes"}), scope_of(root), root.id,
                              ["open_thread"])
    assert opened.startswith("opened thread #Release notes (4242)")
    assert opened_here == [(channel().id, "Release notes", discord.ChannelType.public_thread)]
    refused = await box.answer(ToolCall("t3", "post_message", {"text": "x"}), scope_of(root), root.id, ["recall"])
    assert refused == "error: no tool 'post_message' is offered here"


async def test_task_and_branch_commands(books):
    playbooks_cog, _ = books
    tasks_cog, admin_cog = playbooks_cog.bot.get_cog("TaskCommands"), playbooks_cog.bot.get_cog("Admin")
    assert "No tasks here yet." in said(await run(tasks_cog.list_, tasks_cog))
    assert "needs the Manage Server permission" in said(
        await run(tasks_cog.create, tasks_cog, "Notes", "write notes", as_admin=False))
    assert "Task #1 created" in said(await run(tasks_cog.create, tasks_cog, "Notes", "write notes", "a; b"))
    assert "  [ ] 2. b" in said(await run(tasks_cog.show, tasks_cog, 1))
    assert "there is no task 7 here" in said(await run(tasks_cog.show, tasks_cog, 7))
    suspended = said(await run(admin_cog.branches_suspend, admin_cog, "task-1"))
    assert "task-1 [task, suspended] Notes" in suspended
    assert "task-1 [task, active] Notes" in said(await run(admin_cog.branches_resume, admin_cog, "task-1"))
    assert "Task #1 is done" in said(await run(tasks_cog.close, tasks_cog, 1, "done"))
    made = said(await run(admin_cog.branches_create, admin_cog, "Stargazing", "pick a clear night"))
    assert "[free, suspended] Stargazing" in made and "/branches-admin resume opens its first session" in made
    free = made.split(" ")[0]
    assert "needs the Manage Server permission" in said(
        await run(admin_cog.branches_complete, admin_cog, free, as_admin=False))
    assert f"{free} [free, completed] Stargazing" in said(await run(admin_cog.branches_complete, admin_cog, free))
    assert "#1 Notes [done] 0/2 steps" in said(await run(tasks_cog.list_, tasks_cog))


async def test_a_refused_check_is_answered_once_and_not_logged_as_an_error(admin, caplog):
    cog, _ = admin
    it = await run(cog.memory_pin, cog, "x", as_admin=False)  # the group's check answers the refusal
    assert "needs the Manage Server permission" in said(it)
    it.command = None  # (a mock's command would claim an error handler of its own)
    tree = cog.bot.tree
    with caplog.at_level("ERROR"):
        await tree.on_error(it, discord.app_commands.CheckFailure("refused"))
    assert not caplog.records and len(it.response.sent + it.followup.sent) == 1
    with caplog.at_level("ERROR"):
        await tree.on_error(it, discord.app_commands.AppCommandError("broke"))
    assert caplog.records  # anything else is still reported


async def test_a_character_card_becomes_the_servers_persona_card_and_goes_back_out(admin):
    import io as _io
    import json as _json

    from tests.test_character_card import SERAPHINA, encoded, png

    cog, engine = admin
    card = MagicMock(spec=discord.Attachment, filename="seraphina.png")
    card.read = AsyncMock(return_value=png([(b"tEXt", b"chara\0" + encoded({"spec": "chara_card_v2",
                                                                             "data": SERAPHINA}))]))
    assert "Changing the persona card: it needs the Manage Server permission" in said(
        await run(cog.persona_import, cog, card, as_admin=False))
    done = said(await run(cog.persona_import, cog, card))
    assert "The persona is Seraphina in this server, from the character card" in done
    assert channel().guild.me.nick == "Seraphina"
    assert "guardian of the glade" in said(await run(cog.persona_show, cog))
    root = await engine.stelis.root(scope())
    assert "Seraphina is a guardian" in (await engine.conversations.context(root.id)).request.system[0].text

    junk = MagicMock(spec=discord.Attachment, filename="notes.txt")
    junk.read = AsyncMock(return_value=b"just notes")
    assert "Not changed: notes.txt is neither a character card's JSON" in said(await run(cog.persona_import, cog, junk))

    out = await run(cog.persona_export, cog)
    exported = _json.load(_io.BytesIO(out.response.file.fp.read()))
    assert exported["spec"] == "chara_card_v2" and "guardian of the glade" in exported["data"]["description"]


async def test_a_server_or_a_channel_gives_the_persona_a_name_of_its_own_and_its_memory_stays_one(admin):
    """Issue 31, point 13: a name per server (the bot's nickname there too) or per channel; the prompt says it."""
    cog, engine = admin
    guild, here, elsewhere = channel().guild, channel().id, channel().id + 1
    assert "Renaming the persona: it needs the Manage Server permission" in said(
        await run(cog.persona_name, cog, "Mira", as_admin=False))
    done = said(await run(cog.persona_name, cog, "Mira"))
    assert "The persona is Mira in this server" in done and "nickname here is now Mira" in done
    assert guild.me.nick == "Mira"
    done = said(await run(cog.persona_name, cog, "Captain Vell", "channel"))
    assert "Captain Vell in this channel alone" in done and "Discord still shows the bot as Mira here" in done
    assert (await engine.settings.effective(guild.id, elsewhere)).persona.name == "Mira"
    root = await engine.stelis.root(scope())
    system = (await engine.conversations.context(root.id)).request.system[0].text
    assert "You are Captain Vell" in system and "You are Stelis" not in system  # the card's {name} too
    assert root.persona == engine.persona == "Stelis"  # memory is kept under the configured name
    assert said(await run(cog.persona_name, cog, "default", "channel")).endswith("no name of its own: it is Mira here.")
    said(await run(cog.persona_name, cog, "default"))
    assert guild.me.nick == "Stelis"  # the configured name: the test bot's user name is FakeApp
    assert (await engine.settings.effective(guild.id, here)).persona.name == "Stelis"
    assert "80" in said(await run(cog.config_set, cog, "guild", "persona.name", "x" * 81))
    long = "Seraphina of the Whispering Glade, Keeper"  # over Discord's 32: the prompt has it, the nickname not
    assert "32 characters at most" in said(await run(cog.persona_name, cog, long))
    assert guild.me.nick == "Stelis" and (await engine.settings.effective(guild.id, here)).persona.name == long


async def test_usage_shows_this_servers_calls_today_and_this_month_to_managers_only(admin):
    from memory.llm import LLMRequest, LLMResult, Usage

    cog, engine = admin
    request = LLMRequest(system=(), turns=(), max_tokens=10)
    from bot import logs

    with logs.tagged(guild=channel().guild.id):
        await engine.spending.record(request, LLMResult("x", Usage(2_000, 100, 6_000, 0), model="claude-sonnet-5-5"))
    with logs.tagged(guild=channel().guild.id + 1):  # another server's spending never shows here
        await engine.spending.record(request, LLMResult("x", Usage(9, 9, 9, 9), model="claude-opus-5"))
    shown = said(await run(cog.usage, cog))
    assert "Today: 1 model call(s), about $0.01:" in shown
    assert "- claude-sonnet-5-5: 1 call(s), 8,100 tokens, 75% of the input read from the cache" in shown
    assert "This month: 1 model call(s)" in shown and "claude-opus" not in shown
    assert "Manage Server" in said(await run(cog.usage, cog, as_admin=False))


async def test_a_channel_can_have_a_persona_card_and_model_of_its_own(admin):
    """Issue 31, point 13 in part: /persona set, /persona import and /model take `where`: this channel alone."""
    cog, engine = admin
    guild, here, elsewhere = channel().guild.id, channel().id, channel().id + 1
    assert "for this server" in said(await run(cog.persona_set, cog, "You are Stelis, a lighthouse keeper."))
    assert "for this channel" in said(await run(cog.persona_set, cog, "You are Stelis, a pirate.", None, "channel"))
    assert (await engine.settings.effective(guild, here)).persona.card == "You are Stelis, a pirate."
    assert (await engine.settings.effective(guild, elsewhere)).persona.card == "You are Stelis, a lighthouse keeper."
    root = await engine.stelis.root(scope())
    assert "a pirate" in (await engine.conversations.context(root.id)).request.system[0].text
    said(await run(cog.model, cog, "claude-haiku-5-5", "channel"))
    assert (await engine.settings.effective(guild, here)).persona.models.standard == "claude-haiku-5-5"
    assert (await engine.settings.effective(guild, elsewhere)).persona.models.standard != "claude-haiku-5-5"
    assert "Manage Server" in said(await run(cog.persona_set, cog, "x", None, "channel", as_admin=False))
    form = (await run(cog.persona_set, cog, None, None, "channel")).response.modal  # no text: the channel's form
    assert form.text.default == "You are Stelis, a pirate."
    form.text._value = "You are Stelis, a pirate who sings."
    submitted = interaction()
    await form.on_submit(submitted)
    assert "for this channel" in said(submitted)
    assert (await engine.settings.effective(guild, here)).persona.card == "You are Stelis, a pirate who sings."
    assert (await engine.settings.effective(guild, elsewhere)).persona.card == "You are Stelis, a lighthouse keeper."
