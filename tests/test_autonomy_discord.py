"""The pulse on Discord (dpytest): /autonomy, a task's own thread in the home channel, a person interrupting."""

from __future__ import annotations

import asyncio
import json

import discord
import discord.ext.test as dpytest
import pytest

from bot.engine import Engine
from bot.providers.offline import OfflineLLM
from memory.llm import LLMRequest, LLMResult, TextSink, Usage
from memory.records import Scope
from tests.discord_helpers import channel, create_thread, mention, post, start_bot
from tests.test_slash import interaction, run, said

CREATE = {"action": "create", "title": "Autumn star map", "goal": "Draw a star map of the autumn sky",
          "steps": ["list the constellations", "sketch the map"], "reason": "I want to learn the sky"}


class ScriptedPersona(OfflineLLM):
    """The offline model, except that the pulse decides to create a task and its work says something;
    `hold` keeps the step after the work waiting (a pulse caught mid-session)."""

    def __init__(self) -> None:
        self.hold: asyncio.Event | None = None
        self.worked = asyncio.Event()

    async def complete(self, request: LLMRequest, on_text: TextSink | None = None) -> LLMResult:
        text = "\n".join(b.text for t in request.turns for b in t.blocks if b.kind == "text")
        if "Choose what to do now" in text:
            return _said(json.dumps(CREATE))
        if "(Your own time" in text:
            self.worked.set()
            return _said("Listed Cassiopeia, Pegasus and Andromeda.")
        if "Which step numbers are now done" in text:
            if self.hold is not None:
                await self.hold.wait()
            return _said(json.dumps({"next": "pause", "brief_state": "constellations listed", "steps_done": [1]}))
        return await super().complete(request, on_text)


def _said(text: str) -> LLMResult:
    return LLMResult(text=text, usage=Usage(input_tokens=100, output_tokens=20), model="scripted",
                     stop_reason="end_turn")


@pytest.fixture
async def discord_pulse(make_config, monkeypatch):
    config = make_config(snapshots={"interval_seconds": 0}, short_term_history={"enabled": False},
                         discord={"reply_policy": "mention"}, autonomy={"quiet_minutes": 0})
    llm = ScriptedPersona()
    engine = await Engine.open(config, llm)
    bot = await start_bot(engine, config)
    opened: list[discord.Thread] = []

    async def create_thread_here(self, *, name, type, auto_archive_duration):  # dpytest cannot create threads
        thread = create_thread(9000 + len(opened), self, name, bot.user.id)
        opened.append(thread)
        return thread

    monkeypatch.setattr(discord.TextChannel, "create_thread", create_thread_here)
    yield bot, engine, llm, opened
    await dpytest.empty_queue()
    await engine.close()


async def test_autonomy_commands_and_a_task_that_works_in_its_own_thread(discord_pulse):
    bot, engine, _, opened = discord_pulse
    cog = bot.get_cog("AutonomyCommands")
    assert "Autonomy is off; home channel: not set" in said(await run(cog.status, cog))
    assert "needs the Manage Server permission" in said(await run(cog.on, cog, as_admin=False))
    assert "Set its home channel with /autonomy-admin home: no pulse" in said(await run(cog.on, cog))
    engine.config.discord.personas.append(4242)
    assert f"Home channel: <#{channel().id}>" in said(await run(cog.home, cog))
    home = Scope.channel(channel().guild.id, channel().id)
    (social,) = await engine.branches.of(home, kind="social")  # made in advance, waiting for an exchange
    assert social.label == "with persona 4242" and social.status == "suspended"
    refused = said(await run(cog.quiet, cog, "late"))
    assert "autonomy.quiet_hours" in refused and "HH:MM-HH:MM" in refused
    assert "Daily budget: 20 model calls" in said(await run(cog.budget, cog, 20))
    assert "Autonomy is on; home channel:" in said(await run(cog.status, cog))

    outcome = said(await run(cog.pulse_now, cog))
    assert outcome.startswith("Pulse: new task. Autumn star map: constellations listed")
    thread = opened[0]
    assert thread.name == "Autumn star map" and thread.parent_id == channel().id and thread.owner_id == bot.user.id
    worked = dpytest.get_message()
    assert worked.channel.id == thread.id and "Cassiopeia" in worked.content  # the work is said in its thread
    branch = await engine.store.branch("task-1")
    assert branch.discord_thread_id == thread.id and branch.status == "suspended"
    log = said(await run(cog.log, cog))
    assert "pulse [task-1]: create" in log and "suspend [task-1]" in log and "create [task-1]" in log

    # Someone answers in the task's thread: the same branch resumes (no second branch), and the persona,
    # who owns the thread, answers without being mentioned.
    post("which constellation is the brightest?", in_channel=thread)
    await dpytest.run_all_events()
    await asyncio.sleep(0.05)
    sessions = await engine.store.branch_threads("task-1")
    assert len(sessions) == 2 and sessions[1].status == "active" and await engine.store.branch("discord-9000") is None
    assert dpytest.get_message().channel.id == thread.id


async def test_a_member_speaking_interrupts_the_pulse_and_the_reply_sees_what_it_was_doing(discord_pulse):
    bot, engine, llm, _ = discord_pulse
    cog = bot.get_cog("AutonomyCommands")
    await run(cog.on, cog)
    await run(cog.home, cog)
    llm.hold = asyncio.Event()
    pulse = asyncio.create_task(run(cog.pulse_now, cog))
    await llm.worked.wait()
    await asyncio.sleep(0.05)

    post(f"{mention(bot)} hey, what are you up to?")
    await dpytest.run_all_events()
    assert "Pulse interrupted: a person spoke; Autumn star map suspended" in said(await pulse)
    branch = await engine.store.branch("task-1")
    session = await engine.store.thread(branch.current_thread_id)
    assert branch.status == "suspended" and session.status == "completed" and session.chronicle_summary
    await dpytest.run_all_events()
    assert dpytest.get_message().channel.id == channel().id  # then the reply
    root = await engine.stelis.root(Scope.channel(channel().guild.id, channel().id))
    asked = "\n".join(b.text for t in (await engine.conversations.context(root.id)).request.turns for b in t.blocks)
    assert "Autumn star map" in asked and "## Chronicle" in asked and session.chronicle_summary[:20] in asked
    assert "interrupt" in said(await run(cog.log, cog, it=interaction()))
