"""The autonomous pulse (seed 001) against the fake Anthropic server, on real SQLite, with a moving clock."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

import pytest

from bot.clock import Clock
from bot.config import AnthropicConfig, ModelTiers
from bot.engine import Engine
from bot.providers.anthropic_llm import AnthropicLLM
from memory.anchors import is_anchor
from memory.records import Branch, Scope
from tests.fake_anthropic import _content

HOME = Scope.channel(1, 100)
ELSEWHERE = Scope.channel(2, 200)


def _instruction(body: dict[str, Any]) -> str:
    return "\n".join(b.get("text", "") for m in body["messages"] for b in _content(m) if b.get("type") == "text")


class Persona:
    """Answers each kind of request a pulse makes; `decisions` are taken in turn by the branch-decide step."""

    def __init__(self, *decisions: dict[str, Any], react: str = "no"):
        self.decisions = list(decisions)
        self.react = react
        self.seen: list[str] = []

    def __call__(self, body: dict[str, Any]) -> str:
        text = _instruction(body)
        self.seen.append(text)
        if "Did someone speak to you" in text:
            return json.dumps({"react": self.react, "why": "someone asked about the star map"})
        if "Choose what to do now" in text:
            return json.dumps(self.decisions.pop(0) if self.decisions else {"action": "wait", "reason": "nothing"})
        if "Which step numbers are now done" in text:
            return json.dumps({"next": "pause", "brief_state": "constellations listed", "steps_done": [1]})
        if "(Your own time" in text:
            return "Listed Cassiopeia, Pegasus and Andromeda for the autumn sky."
        if "(A free moment" in text:
            return "Oh, about the star map: I started it!"
        return "Chronicle: worked on the autumn star map; listed Cassiopeia, Pegasus and Andromeda."


CREATE = {"action": "create", "title": "Autumn star map", "goal": "Draw a star map of the autumn sky",
          "steps": ["list the constellations", "sketch the map"], "reason": "I want to learn the sky"}


def engines(make_config, fake_anthropic, database: dict | None = None):
    """Engines on the fake Anthropic server with their own moving clocks (on a backend's `database`), and a
    closing of them all."""
    opened: list[Engine] = []

    async def make(persona: Any, **autonomy: Any) -> tuple[Engine, Clock]:
        fake_anthropic.responder = persona
        clock = Clock()
        llm = AnthropicLLM(AnthropicConfig(api_key="k", base_url=fake_anthropic.base_url, max_retries=0,
                                           stream=False), ModelTiers())
        config = make_config(database=database or {}, snapshots={"interval_seconds": 0}, llm={"reply_tools": False},
                             autonomy={"quiet_minutes": 10, **autonomy})
        engine = await Engine.open(config, llm, clock=clock)
        opened.append(engine)
        return engine, clock

    async def close() -> None:
        for engine in opened:
            await engine.close()

    return make, close


@pytest.fixture
async def make_engine(make_config, fake_anthropic):
    make, close = engines(make_config, fake_anthropic)
    yield make
    await close()


async def _home(engine: Engine, scope: Scope = HOME) -> None:
    await engine.pulses.configure(scope, "enabled", True)
    await engine.pulses.configure(scope, "home_channel", scope.channel_id)


async def test_a_pulse_creates_a_task_works_in_its_session_and_suspends_it(make_engine):
    engine, clock = await make_engine(Persona(CREATE))
    await _home(engine)
    await engine.conversations.hear(HOME, "anyone into astronomy?", author_name="mahe", author_id=7)
    clock.advance(3600)

    outcome = await engine.pulses.pulse_if_due(HOME)
    assert outcome is not None and outcome.action == "create" and outcome.branch_id == "task-1"
    assert outcome.calls == 5 and outcome.tokens > 0  # react check, decide, work, assess, chronicle
    task = (await engine.tasks.of(HOME))[0]
    assert task.title == "Autumn star map" and task.steps[0]["done"] and not task.steps[1]["done"]
    branch = await engine.store.branch("task-1")
    assert branch.status == "suspended" and branch.brief_state == "constellations listed"
    session = await engine.store.thread(branch.current_thread_id)
    assert session.status == "completed" and "Cassiopeia" in (session.chronicle_summary or "")
    kept = [m.content for m in await engine.store.tail(session.id, 10)]
    assert any("Listed Cassiopeia" in m for m in kept)  # the work is the session's, not the channel's
    root = await engine.stelis.root(HOME)
    assert session.parent_thread_id == root.id and session.anchor_seq is not None
    assert not any("Listed Cassiopeia" in m.content for m in await engine.store.tail(root.id, 20))
    kinds = [e.kind for e in await engine.autonomy.log(HOME)]
    assert kinds[:3] == ["pulse", "suspend", "create"]


async def test_a_later_pulse_resumes_the_task_with_an_anchor_to_its_last_session(make_engine):
    persona = Persona(CREATE, {"action": "resume", "branch": "task-1", "reason": "the map is half done"})
    engine, clock = await make_engine(persona)
    await _home(engine)
    clock.advance(3600)
    await engine.pulses.pulse_if_due(HOME)
    first = (await engine.store.branch_threads("task-1"))[0]
    assert await engine.pulses.pulse_if_due(HOME) is None  # not due: the interval has not passed
    clock.advance(3600)

    outcome = await engine.pulses.pulse_if_due(HOME)
    assert outcome is not None and outcome.action == "resume"
    sessions = await engine.store.branch_threads("task-1")
    assert len(sessions) == 2 and all(s.status == "completed" for s in sessions)
    opening = (await engine.store.tail(sessions[1].id, 10))[0]
    assert is_anchor(opening) and opening.metadata["stelis_thread_id"] == first.id
    work_request = next(t for t in reversed(persona.seen) if "(Your own time" in t)
    assert f"stelis:{first.id}" in work_request and "Cassiopeia" in work_request  # it sees where it left off
    assert "Where it stands: constellations listed" in work_request


async def test_a_person_speaking_interrupts_the_pulse_and_the_reply_sees_the_chronicle(make_engine, fake_anthropic):
    persona = Persona(CREATE)
    engine, _ = await make_engine(persona)
    await _home(engine)
    worked = asyncio.Event()

    def work_then_hold(body: dict[str, Any]) -> str:
        answer = persona(body)
        if "(Your own time" in _instruction(body):
            fake_anthropic.hang_next(1)  # the next call hangs: the pulse is mid-session, its first work kept
            worked.set()
        return answer

    fake_anthropic.responder = work_then_hold
    pulse = asyncio.create_task(engine.pulses.pulse_now(HOME))
    await worked.wait()
    await asyncio.sleep(0.05)
    assert await engine.arrivals.person_spoke(ELSEWHERE) is False  # another server's voice is not this one's
    assert await engine.arrivals.person_spoke(HOME)
    outcome = await pulse
    assert outcome.action == "interrupted" and outcome.branch_id == "task-1"
    branch = await engine.store.branch("task-1")
    session = await engine.store.thread(branch.current_thread_id)
    assert branch.status == "suspended" and session.status == "completed" and session.chronicle_summary
    log = await engine.autonomy.log(HOME)
    assert log[0].kind == "pulse" and log[0].detail == "interrupted" and log[1].kind == "interrupt"
    assert "Autumn star map suspended" in log[1].detail

    await engine.conversations.hear(HOME, "what were you up to?", author_name="mahe", author_id=7)
    root = await engine.stelis.root(HOME)
    await engine.conversations.reply(root.id)
    asked = _instruction(fake_anthropic.calls[-1].body)
    assert "Autumn star map" in asked and "## Chronicle" in asked and session.chronicle_summary[:30] in asked


async def test_budgets_quiet_channels_and_quiet_hours_hold_the_pulse_back(make_engine, fake_anthropic):
    engine, clock = await make_engine(Persona(CREATE, CREATE), daily_calls=3)
    await _home(engine)
    await engine.conversations.hear(HOME, "we are talking here", author_name="mahe", author_id=7)
    held = await engine.pulses.pulse(HOME)
    assert held.action == "skip" and "spoke less than 10 min ago" in held.detail and not fake_anthropic.calls

    clock.advance(3600)
    now = datetime.fromtimestamp(clock(), UTC)
    await engine.pulses.configure(HOME, "quiet_hours", f"{now.hour:02d}:00-{(now.hour + 2) % 24:02d}:00")
    held = await engine.pulses.pulse(HOME)
    assert held.action == "skip" and "quiet hours" in held.detail and not fake_anthropic.calls
    await engine.pulses.configure(HOME, "quiet_hours", "")

    spent = await engine.pulses.pulse(HOME)  # react, decide, one call held for the chronicle: no room to work
    assert spent.action == "create" and spent.calls <= 3
    again = await engine.pulses.pulse_now(HOME)  # even an admin's pulse-now keeps to the budget
    assert len(fake_anthropic.calls) == spent.calls + again.calls <= 3
    held = await engine.pulses.pulse_now(HOME)
    assert held.action == "skip" and "today's budget is spent" in held.detail
    assert len(fake_anthropic.calls) == spent.calls + again.calls
    status = await engine.pulses.status(HOME)
    assert status.spent_calls == spent.calls + again.calls and status.spent_tokens == spent.tokens + again.tokens
    clock.advance(86_400)  # the next day: a new budget
    assert (await engine.pulses.pulse(HOME)).action != "skip"


async def test_autonomy_is_off_by_default_and_nothing_of_a_pulse_crosses_servers(make_engine):
    persona = Persona(CREATE)
    engine, clock = await make_engine(persona)
    assert (await engine.pulses.pulse(HOME)).detail == "no home channel is set"
    await engine.pulses.configure(HOME, "home_channel", 100)
    assert "autonomy is off" in (await engine.pulses.pulse(HOME)).detail
    await engine.conversations.hear(ELSEWHERE, "secret plans of the other server", author_name="eve", author_id=9)
    await engine.conversations.hear(HOME, "the garden needs water", author_name="mahe", author_id=7)
    clock.advance(3600)
    await _home(engine)
    await engine.pulses.pulse(HOME)
    seen = next(t for t in persona.seen if "Did someone speak to you" in t)
    assert "the garden needs water" in seen and "secret plans" not in seen
    assert await engine.tasks.of(ELSEWHERE) == [] and await engine.autonomy.log(ELSEWHERE) == []
    assert (await engine.pulses.status(ELSEWHERE)).config.enabled is False


async def test_a_waiting_pulse_logs_why_and_a_bad_setting_names_the_key(make_engine):
    from bot.config import ConfigError

    engine, _ = await make_engine(Persona({"action": "wait", "reason": "everyone is busy"}))
    await _home(engine)
    outcome = await engine.pulses.pulse_now(HOME)
    assert outcome.action == "wait"
    log = await engine.autonomy.log(HOME)
    assert [e.kind for e in log[:2]] == ["pulse", "wait"] and log[1].detail == "everyone is busy"
    with pytest.raises(ConfigError, match=r"autonomy\.interval_minutes"):
        await engine.pulses.configure(HOME, "interval_minutes", 1)
    with pytest.raises(ConfigError, match="HH:MM-HH:MM"):
        await engine.pulses.configure(HOME, "quiet_hours", "late")


async def test_a_failed_pulse_leaves_no_session_open(make_engine, fake_anthropic):
    persona = Persona(CREATE)
    engine, _ = await make_engine(persona)
    await _home(engine)

    def failing(body: dict[str, Any]) -> str:
        if "(Your own time" in _instruction(body):
            fake_anthropic.fail_next(500)
        return persona(body)

    fake_anthropic.responder = failing
    outcome = await engine.pulses.pulse_now(HOME)
    assert outcome.action == "error"
    branch = await engine.store.branch("task-1")
    assert branch.status == "suspended"
    assert (await engine.store.thread(branch.current_thread_id)).status != "active"
    assert (await engine.autonomy.log(HOME))[1].kind == "error"


async def test_the_pulse_timer_is_armed_per_server_with_jitter(make_engine):
    engine, _ = await make_engine(Persona())
    await engine.start_pulses()
    await _home(engine)
    await engine.pulses.configure(HOME, "interval_minutes", 30)
    job = engine.pulses.timers.scheduler.get_job("pulse-guild:1")
    assert job is not None and job.trigger.interval.total_seconds() == 1800 and job.trigger.jitter == 600
    assert engine.pulses.next_pulse(HOME) is not None and engine.pulses.next_pulse(ELSEWHERE) is None
    await engine.pulses.configure(HOME, "enabled", False)
    assert engine.pulses.timers.scheduler.get_job("pulse-guild:1") is None


async def test_a_restart_keeps_a_tasks_open_session_and_sweeps_an_orphan_thread(make_config):
    from bot.providers.offline import OfflineLLM

    config = make_config(snapshots={"interval_seconds": 0})
    engine = await Engine.open(config, OfflineLLM())
    task = await engine.tasks.create(HOME, "Star map", "draw the autumn sky", ["list", "sketch"])
    session_id = (await engine.store.branch(task.branch_id)).current_thread_id
    orphan = await engine.stelis.start(await engine.stelis.new_run(HOME), "left open by a run that is gone")
    await engine.close()

    again = await Engine.open(config, OfflineLLM())  # the sweep runs at every exclusive start
    assert (await again.store.thread(session_id)).status == "active"  # its branch decides when it ends
    assert (await again.store.thread(orphan.id)).status == "aborted"
    await again.close()


class Front:
    """A front end that keeps what the persona says on its own."""

    def __init__(self) -> None:
        self.posts: list[tuple[Scope, str]] = []

    async def post(self, scope: Scope, text: str) -> None:
        self.posts.append((scope, text))

    async def open_thread(self, scope: Scope, name: str) -> str:
        return "no threads here"

    async def open_work_thread(self, scope: Scope, name: str) -> int | None:
        return None

    async def strangers(self, guild_id: int, kind: str, ids: list[int]) -> list[int]:
        return []


async def test_the_pulse_speaks_up_in_its_home_channel_about_what_it_perceived(make_engine):
    """The react path (seed 001): someone spoke and waits; the pulse answers at once, in its home channel."""
    persona = Persona(react="yes")
    engine, clock = await make_engine(persona)
    front = Front()
    engine.attach(front)
    await _home(engine)
    await engine.conversations.hear(HOME, "@Stelis did you start the star map yet?", author_name="ana", author_id=5)
    clock.advance(3_600)  # quiet since: the pulse may act
    outcome = await engine.pulses.pulse_now(HOME)
    assert outcome.action == "react" and "star map" in outcome.detail
    check = next(text for text in persona.seen if "Did someone speak to you" in text)
    assert "did you start the star map yet?" in check  # it perceived what was said
    assert front.posts == [(HOME, "Oh, about the star map: I started it!")]  # said in the home channel
    said = await engine.store.tail((await engine.stelis.root(HOME)).id, 5)
    assert said[-1].role == "assistant" and said[-1].content == "Oh, about the star map: I started it!"
    assert (await engine.autonomy.log(HOME, 5))[0].kind == "pulse"


FREE = {"action": "free", "title": "Learn the autumn constellations", "reason": "I want to know the sky"}


async def _begun_freely(make_engine: Any, persona: Persona) -> tuple[Engine, Clock, Branch]:
    """An engine whose first pulse, an hour after the home channel is set, begins a free branch: that branch."""
    engine, clock = await make_engine(persona)
    await _home(engine)
    clock.advance(3_600)
    outcome = await engine.pulses.pulse_if_due(HOME)
    assert outcome is not None and outcome.action == "free"
    branch = await engine.store.branch(outcome.branch_id)
    assert branch is not None
    return engine, clock, branch


async def test_the_persona_begins_a_free_branch_of_its_own_works_in_it_and_resumes_it_later(make_engine):
    """Seed 001's free action: a branch the persona begins itself, works in, suspends and takes up again."""
    persona = Persona(FREE)
    engine, clock, branch = await _begun_freely(make_engine, persona)
    assert (branch.branch_type, branch.label, branch.status) == ("free", "Learn the autumn constellations",
                                                                 "suspended")
    [session] = await engine.store.branch_threads(branch.id)
    assert session.status == "completed" and any("Listed Cassiopeia" in m.content
                                                 for m in await engine.store.tail(session.id, 10))
    assert (await engine.autonomy.log(HOME))[2].kind == "create"
    persona.decisions.append({"action": "resume", "branch": branch.id, "reason": "more to learn"})
    clock.advance(3_600)
    assert (await engine.pulses.pulse_if_due(HOME)).action == "resume"
    assert len(await engine.store.branch_threads(branch.id)) == 2


async def test_a_decision_a_small_model_left_incomplete_is_carried_out_as_far_as_it_goes(make_engine):
    """Recorded from SmolLM2 in make e2e: "create" with no title and no goal (the schema cannot require them for
    "create" alone). A task without a goal is begun as a free branch of its title; one naming nothing is a wait,
    logged; neither fails the pulse."""
    persona = Persona({"action": "create", "title": "Star map", "reason": "the sky"},
                      {"action": "create", "reason": "I want to make something"},
                      {"action": "free", "title": "  ", "reason": "free time"})
    engine, clock, branch = await _begun_freely(make_engine, persona)
    assert (branch.branch_type, branch.label) == ("free", "Star map") and await engine.tasks.of(HOME) == []
    for _ in range(2):
        clock.advance(3_600)
        outcome = await engine.pulses.pulse_if_due(HOME)
        assert outcome is not None and outcome.action == "wait" and "named nothing" in outcome.detail
    kinds = [e.kind for e in await engine.autonomy.log(HOME)]  # newest first
    assert kinds == ["pulse", "wait", "pulse", "wait", "pulse", "suspend", "create"]  # no error, one branch begun


async def test_a_resume_of_a_branch_not_open_here_is_a_wait_and_takes_up_nothing(make_engine):
    """A made-up id (SmolLM2 in make e2e named "resume_2017-06-28 ..."), another server's branch, a completed one:
    the pulse waits, says why in its log, and no session opens anywhere."""
    persona = Persona(CREATE)
    engine, clock = await make_engine(persona)
    await _home(engine)
    await _home(engine, ELSEWHERE)
    clock.advance(3_600)
    elsewhere = await engine.pulses.pulse_if_due(ELSEWHERE)  # the other server's pulse makes its task-1
    assert elsewhere is not None and elsewhere.action == "create"
    theirs = await engine.store.branch(elsewhere.branch_id)
    sessions = len(await engine.store.branch_threads(theirs.id))
    persona.decisions += [{"action": "resume", "branch": "resume_2017-06-28 23:54", "reason": "go on"},
                          {"action": "resume", "branch": theirs.id, "reason": "go on"}]
    for _ in range(2):
        clock.advance(3_600)
        outcome = await engine.pulses.pulse_if_due(HOME)
        assert outcome is not None and outcome.action == "wait" and "not an open branch here" in outcome.detail
    assert len(await engine.store.branch_threads(theirs.id)) == sessions
    assert [e.kind for e in await engine.autonomy.log(HOME)] == ["pulse", "wait", "pulse", "wait"]


async def test_the_pulse_reaches_out_to_another_persona_and_the_model_can_create_a_branch(make_engine):
    """Every kind the decide step is shown, it can act on: resuming a social branch begins an exchange with that
    persona in the home channel (its opening kept in the session, said in the channel), which goes on when the
    other persona answers; and branch_create makes a free branch from a tool call."""
    persona = Persona()
    engine, clock = await make_engine(persona)
    front = Front()
    engine.attach(front)
    await _home(engine)
    [social] = await engine.socials.prepare(HOME, {99: "Eris"})
    assert social.partner_persona == "99"
    made = await engine.tools.create_branch(HOME, "Sketch the harbour at dusk", "not started")
    assert "new free branch" in made
    persona.decisions.append({"action": "resume", "branch": social.id, "reason": "I miss talking with Eris"})
    clock.advance(3_600)
    outcome = await engine.pulses.pulse_if_due(HOME)
    decide = next(text for text in persona.seen if "Choose what to do now" in text)
    assert "Sketch the harbour at dusk" in decide and "with Eris" in decide
    assert outcome.action == "resume" and outcome.branch_id == social.id
    [(where, said)] = front.posts
    assert where == HOME and said.startswith("<@99> ")  # addressed to the other persona, in the home channel
    session = await engine.store.thread((await engine.store.branch(social.id)).current_thread_id)
    assert session.status == "active" and session.scope_key == HOME.key
    assert (await engine.store.tail(session.id, 5))[-1].role == "assistant"  # the opening, kept in the session
    from bot.services.arrivals import Arrival

    answer = await engine.arrivals.receive(HOME, Arrival("hello! yes, let's talk", "Eris", 99, persona=True))
    assert answer.thread_id == session.id  # the other persona's answer goes on in the same exchange
    from bot.tools import REGISTRY

    assert "branch_create" in REGISTRY and REGISTRY["branch_create"].input_schema["required"] == ["label"]
