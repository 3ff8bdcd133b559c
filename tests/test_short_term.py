"""Versioned short-term memory, long-term consolidation and the scheduler (seed 004), on a controllable clock."""

import asyncio
import itertools

import pytest

from bot.clock import Clock
from bot.engine import Engine, MemoryAdminError
from bot.memory_scheduler import MemoryWorker
from bot.providers.offline import OfflineLLM
from memory.backends import open_store
from memory.llm import LLMError, LLMResult
from memory.records import Scope
from memory.store import StaleUpdate

IDLE = 7_200
THRESHOLD = 5
GENERAL = Scope.channel(10, 100)
RANDOM = Scope.channel(10, 101)
SECRET = Scope.channel(10, 102)
OTHER_GUILD = Scope.channel(20, 200)
DM = Scope.dm(7, 300)


class Scripted:
    """Answers summaries with a numbered text that quotes the material, and can be told to fail."""

    name = "scripted"

    def __init__(self):
        self.requests = []
        self.fail = 0

    async def complete(self, request, on_text=None):
        self.requests.append(request)
        if self.fail:
            self.fail -= 1
            raise LLMError("The model is overloaded (529) after 3 retries; try again in a minute.")
        text = request.turns[-1].blocks[-1].text
        material = text.split("<transcript>")[-1].split("</transcript>")[0].strip().replace("\n", " | ")
        return LLMResult(text=f"summary #{len(self.requests)}: {material[:400]}")

    async def aclose(self):
        return None


def memory_config(make_config):
    """Quick triggers, no snapshot timer: the worker is driven by the test."""
    return make_config(short_term_history={"conversation_idle_seconds": IDLE, "message_threshold": THRESHOLD},
                       snapshots={"interval_seconds": 0})


@pytest.fixture
async def world(make_config):
    clock = Clock()
    llm = Scripted()
    config = memory_config(make_config)
    engine = await Engine.open(config, llm, clock)
    for scope, name, public in ((GENERAL, "general", True), (RANDOM, "random", True), (SECRET, "secret", False),
                                (OTHER_GUILD, "elsewhere", True)):
        await engine.admin.describe(scope, name=name, public=public)
    yield engine, clock, llm
    await engine.close()


async def say(engine, scope, *texts, name="mahe"):
    for text in texts:
        await engine.conversations.hear(scope, text, author_name=name)


async def versions(engine, scope, type_="short_term"):
    return await engine.admin.history(scope, type_)


async def test_the_first_message_writes_no_version_until_the_conversation_idles(world):
    engine, clock, llm = world
    assert await engine.memory.run_due() == []
    await say(engine, GENERAL, "hello, first message")
    assert await engine.memory.run_due() == [] and llm.requests == []  # no model call for a new channel
    clock.advance(IDLE)
    outcomes = await engine.memory.run_due()
    assert [o.short_term.version for o in outcomes if o.short_term] == [1]


async def idle(engine, clock):
    """Let the conversations go quiet long enough for their versions to fall due, and run them."""
    clock.advance(IDLE)
    return await engine.memory.run_due()


async def first_version(engine, clock, scope=GENERAL):
    await say(engine, scope, "seed message about calculator_v2")
    await idle(engine, clock)
    assert len(await versions(engine, scope)) == 1


@pytest.mark.parametrize(("idle", "messages", "due"), [
    (IDLE, 1, True),           # idle reached and something new
    (IDLE, 0, False),          # idle reached but nothing new: no identical version
    (IDLE - 1, 1, False),      # something new, not idle yet, under the threshold
    (0, THRESHOLD, True),      # threshold reached without idling
    (IDLE, THRESHOLD, True),   # both: still exactly one version
    (IDLE - 1, THRESHOLD - 1, False),  # neither
])
async def test_trigger_combinations(world, idle, messages, due):
    engine, clock, _ = world
    await first_version(engine, clock)
    await say(engine, GENERAL, *[f"new message {i}" for i in range(messages)])
    clock.advance(idle)
    await engine.memory.run_due()
    await engine.memory.run_due()  # a second scan never adds a duplicate
    assert len(await versions(engine, GENERAL)) == (2 if due else 1)


async def test_a_burst_gives_one_version_and_the_next_covers_only_what_is_new(world):
    engine, clock, llm = world
    await first_version(engine, clock)
    await say(engine, GENERAL, *[f"burst {i}" for i in range(THRESHOLD - 1)])
    clock.advance(IDLE)
    await engine.memory.run_due()
    history = await versions(engine, GENERAL)
    assert len(history) == 2 and history[1].first_seq > history[0].last_seq
    request = next(r for r in reversed(llm.requests) if "short-term memory of this conversation" in
                   r.turns[0].blocks[0].text)
    text = request.turns[0].blocks[0].text
    assert "burst 0" in text and "seed message" not in text.split("<transcript>")[1]  # only the new messages
    assert "v1: summary" in text  # the previous version is given as context


async def test_each_version_updates_the_channel_long_term_memory(world):
    engine, clock, _ = world
    await first_version(engine, clock)
    await say(engine, GENERAL, "the deploy is on 2026-12-01")
    clock.advance(IDLE)
    await engine.memory.run_due()
    long_term = await versions(engine, GENERAL, "long_term")
    assert len(long_term) == 2 and long_term[-1].metadata["from_short_term"] == 2
    assert "calculator_v2" in long_term[-1].content  # the earlier fact is still there


async def test_workspace_memory_is_updated_once_per_run_from_shareable_channels_only(world):
    engine, clock, _llm = world
    await say(engine, GENERAL, "general talks about calculator_v2")
    await say(engine, RANDOM, "random talks about Tokyo")
    await say(engine, SECRET, "secret plan ISSUE-99")
    await idle(engine, clock)
    workspace = await engine.store.recent_records("Stelis", "workspace", 10, "long_term", 10)
    assert len(workspace) == 1
    assert "calculator_v2" in workspace[0].content and "Tokyo" in workspace[0].content
    assert "ISSUE-99" not in workspace[0].content
    assert sorted(workspace[0].metadata["sources"]) == ["#general lt-v1", "#random lt-v1"]


class WorkspaceFails(Scripted):
    """A model that is overloaded for the first workspace merge only."""

    async def complete(self, request, on_text=None):
        if "this server" in request.turns[-1].blocks[-1].text and not getattr(self, "failed", False):
            self.failed = True
            raise LLMError("The model is overloaded (529) after 3 retries; try again in a minute.")
        return await super().complete(request, on_text)


async def test_a_workspace_merge_the_model_failed_is_tried_again_at_the_next_scan(world):
    engine, clock, _ = world
    worker = MemoryWorker(engine.store, WorkspaceFails(), engine.memory.settings_for, clock, 1, 600)
    await say(engine, GENERAL, "general talks about calculator_v2")
    clock.advance(IDLE)
    assert [o.long_term for o in await worker.run_due()] != [None]  # the channel's memory is saved ...
    assert await engine.store.latest_record("Stelis", "workspace", 10, "long_term") is None  # ... the merge failed
    assert await worker.run_due() == []  # nothing due, but the failed merge is tried again
    merged = await engine.store.latest_record("Stelis", "workspace", 10, "long_term")
    assert merged is not None and merged.metadata["sources"] == ["#general lt-v1"]


async def test_pinned_facts_survive(world):
    engine, clock, llm = world
    await engine.admin.pin(GENERAL, "Mahe's birthday is 03-14")
    await say(engine, GENERAL, "talking about the weather")
    await idle(engine, clock)
    view = await engine.admin.view(GENERAL)
    assert "Mahe's birthday is 03-14" in view.short_term[-1].content
    assert "Mahe's birthday is 03-14" in view.long_term.content
    assert "Pinned facts: keep each" in llm.requests[0].turns[0].blocks[0].text
    assert await engine.admin.pin(GENERAL, "Mahe's birthday is 03-14", pinned=False)
    with pytest.raises(MemoryAdminError, match="cannot be empty"):
        await engine.admin.pin(GENERAL, "  ")


async def test_edit_rollback_regenerate_and_pause(world):
    engine, clock, _ = world
    await first_version(engine, clock)
    edited = await engine.admin.edit(GENERAL, "corrected memory")
    assert edited.version == 2 and edited.metadata["edited_from"] == 1
    rolled = await engine.admin.rollback(GENERAL, 1)
    assert rolled.version == 3 and rolled.content == (await versions(engine, GENERAL))[0].content
    with pytest.raises(MemoryAdminError, match="no short-term memory version 9"):
        await engine.admin.rollback(GENERAL, 9)
    regenerated = await engine.admin.regenerate(GENERAL)  # nothing new: re-summarise the latest range
    assert regenerated.short_term.version == 4
    await engine.admin.pause(GENERAL, True)
    await say(engine, GENERAL, *[f"while paused {i}" for i in range(THRESHOLD)])
    clock.advance(IDLE)
    await engine.memory.run_due()
    assert len(await versions(engine, GENERAL)) == 4
    await engine.admin.pause(GENERAL, False)
    await engine.memory.run_due()
    assert len(await versions(engine, GENERAL)) == 5


async def test_an_llm_failure_writes_nothing_and_retries_with_back_off(world):
    engine, clock, llm = world
    await say(engine, GENERAL, "hello")
    llm.fail = 1
    outcomes = await idle(engine, clock)
    assert outcomes[0].error and await versions(engine, GENERAL) == []
    assert await engine.memory.run_due() == []  # not before the back-off
    clock.advance(61)
    await engine.memory.run_due()
    assert len(await versions(engine, GENERAL)) == 1


async def test_one_channels_failure_does_not_stop_the_others(world):
    engine, clock, llm = world
    await say(engine, GENERAL, "one")
    await say(engine, RANDOM, "two")
    llm.fail = 1
    outcomes = await idle(engine, clock)
    assert sorted(bool(o.error) for o in outcomes) == [False, True]


async def test_a_crash_between_short_and_long_term_is_repaired(world):
    engine, clock, llm = world
    await say(engine, GENERAL, "remember calculator_v2")
    llm.fail = 0
    original = Scripted.complete
    calls = {"n": 0}

    async def die_on_long_term(self, request, on_text=None):
        calls["n"] += 1
        if "Update the long-term memory" in request.turns[0].blocks[0].text:
            raise LLMError("crash in the middle")
        return await original(self, request, on_text)

    Scripted.complete = die_on_long_term
    try:
        await idle(engine, clock)
    finally:
        Scripted.complete = original
    ch = await engine.store.memory_channel((await engine.stelis.root(GENERAL)).id)
    assert ch.long_term_pending == 1 and len(await versions(engine, GENERAL)) == 1
    assert await versions(engine, GENERAL, "long_term") == []
    clock.advance(61)
    await engine.memory.run_due()
    assert len(await versions(engine, GENERAL, "long_term")) == 1
    assert len(await versions(engine, GENERAL)) == 1  # repaired without a new short-term version


async def test_concurrent_version_allocation_never_collides(world):
    engine, _clock, _ = world
    results = await asyncio.gather(*(engine.admin.edit(GENERAL, f"edit {i}") for i in range(20)))
    assert sorted(r.version for r in results) == list(range(1, 21))


async def test_restart_recomputes_deadlines_and_skips_nothing(make_config):
    clock = Clock()
    config = memory_config(make_config)
    engine = await Engine.open(config, Scripted(), clock)
    await say(engine, GENERAL, "first")
    await idle(engine, clock)
    await say(engine, GENERAL, "said just before the restart")
    await engine.close()
    clock.advance(IDLE + 1)
    engine = await Engine.open(config, Scripted(), clock)
    await engine.start_memory()  # the first due-scan runs at start
    for _ in range(50):
        if len(await versions(engine, GENERAL)) == 2:
            break
        await asyncio.sleep(0.05)
    assert len(await versions(engine, GENERAL)) == 2
    await engine.close()


async def test_each_message_pushes_the_idle_timer_back(world):
    from datetime import UTC, datetime

    engine, clock, _ = world
    await engine.start_memory()
    await first_version(engine, clock)
    thread_id = (await engine.stelis.root(GENERAL)).id

    def remaining() -> float:
        return (engine.scheduler.deadline(thread_id) - datetime.now(UTC)).total_seconds()

    await say(engine, GENERAL, "one")
    assert engine.scheduler.deadline(thread_id) is None  # two hours away: no timer yet (issue 32)
    clock.advance(IDLE - 60)
    await engine.scheduler.arm_upcoming()  # a minute before the deadline, the scheduler's scan arms it
    assert remaining() == pytest.approx(60, abs=5)
    await say(engine, GENERAL, "two")  # a message pushes it back two hours: the timer goes
    assert engine.scheduler.deadline(thread_id) is None
    clock.advance(IDLE - 30)
    await engine.scheduler.arm_upcoming()
    assert remaining() == pytest.approx(30, abs=5)


async def test_start_up_arms_only_the_timers_of_the_next_scans_and_each_scan_arms_the_next(world):
    """Issue 32: deadlines hours away need no timer at start-up (a thousand servers'); they get one in time."""
    engine, clock, _ = world
    await say(engine, GENERAL, "due in two hours")
    clock.advance(IDLE - 60)
    await say(engine, RANDOM, "due in two hours from now")
    near, far = (await engine.stelis.root(GENERAL)).id, (await engine.stelis.root(RANDOM)).id
    await engine.start_memory()
    assert engine.scheduler.deadline(near) is not None  # within two scans (60 s each): armed at start
    assert engine.scheduler.deadline(far) is None  # hours away: the scans arm it later
    clock.advance(IDLE - 90)
    await engine.scheduler.arm_upcoming()  # what the scheduler's interval job runs
    assert engine.scheduler.deadline(far) is not None


async def test_timers_that_fire_together_make_one_due_scan_and_one_more_after_it():
    """Issue 32: five hundred channels falling due at once ran five hundred scans side by side, each reading every
    due channel (memory work added 80 % to replies' p95); now one runs, and looks once more when it ends."""
    from types import SimpleNamespace

    from bot.memory_scheduler import MemoryScheduler

    started, release = asyncio.Event(), asyncio.Event()
    scans = []

    async def run_due():
        scans.append(1)
        started.set()
        await release.wait()
        return []

    scheduler = MemoryScheduler(SimpleNamespace(run_due=run_due), 60)
    first = asyncio.create_task(scheduler.scan())
    await started.wait()
    await asyncio.gather(*(scheduler.scan() for _ in range(500)))  # each returns at once: one is running
    assert len(scans) == 1
    release.set()
    await first
    assert len(scans) == 2  # the one more look: channels due after the first began
    await scheduler.scan()
    assert len(scans) == 3  # alone, a scan runs once


async def test_channels_due_at_once_get_a_scan_without_a_timer_each(world, monkeypatch):
    """Issue 32: a burst of five hundred channels reaching their threshold together made five hundred timer jobs,
    each waking the scheduler, before the replies' model calls. A channel due already asks for a scan; those asking
    while one is on its way share it (or its one more look)."""
    engine, _, _ = world
    await engine.start_memory()
    await engine.scheduler.scan()  # the start's own scan, done
    scans = []
    run_due = engine.memory.run_due

    async def counted():
        scans.append(1)
        return await run_due()

    monkeypatch.setattr(engine.memory, "run_due", counted)
    timers = []
    add_job = engine.scheduler.scheduler.add_job

    def timed(*args, **kwargs):
        timers.append(kwargs["id"])
        return add_job(*args, **kwargs)

    monkeypatch.setattr(engine.scheduler.scheduler, "add_job", timed)
    scopes = (GENERAL, RANDOM, SECRET, OTHER_GUILD)
    await asyncio.gather(*(say(engine, scope, *[f"{scope.channel_id}: message {i}" for i in range(THRESHOLD)])
                           for scope in scopes))
    assert timers == []  # they were due already: no timer each

    async def written() -> list[int]:
        return [len(await versions(engine, s)) for s in scopes]

    for _ in range(100):
        if await written() == [1] * 4:
            break
        await asyncio.sleep(0.02)
    assert await written() == [1] * 4
    assert 1 <= len(scans) <= 2


async def test_a_channel_falling_due_while_the_scheduler_stops_starts_no_scan(world, monkeypatch):
    """Stopping pauses the scheduler and lets running updates drain: a message arriving meanwhile must not start
    an update the drain does not know of (the store closes under it)."""
    engine, _, _ = world
    await engine.start_memory()
    await asyncio.sleep(0.05)  # the start's own scan
    engine.scheduler.scheduler.pause()  # what stop() does first
    scans = []

    async def counted():
        scans.append(1)
        return []

    monkeypatch.setattr(engine.memory, "run_due", counted)
    await say(engine, GENERAL, *[f"late {i}" for i in range(THRESHOLD)])
    await asyncio.sleep(0.05)
    assert scans == []
    engine.scheduler.scheduler.resume()


async def test_prompt_order_labels_and_isolation(world):
    engine, clock, _ = world
    for scope, text in ((GENERAL, "general fact calculator_v2"), (RANDOM, "random fact Tokyo"),
                        (SECRET, "secret fact ISSUE-99"), (OTHER_GUILD, "other guild fact Osaka"),
                        (DM, "dm fact Kyoto")):
        await say(engine, scope, text)
    await idle(engine, clock)
    for i in range(2):
        await say(engine, GENERAL, f"more general {i}")
        clock.advance(IDLE)
        await engine.memory.run_due()

    def layers(scope):
        async def get():
            request = (await engine.conversations.context((await engine.stelis.root(scope)).id)).request
            return request.system[1].text if len(request.system) > 1 else ""
        return get()

    general = await layers(GENERAL)
    assert general.index("# Memory of this server") < general.index("# Memory of #random") \
        < general.index("# Memory of this conversation")
    own = general[general.index("# Memory of this conversation"):]
    assert own.index("## Long-term memory") < own.index("### Oldest shown short-term memory (v1, ")
    assert own.index("(v1, ") < own.index("### Earlier short-term memory (v2, ") \
        < own.index("### Newest short-term memory (v3, ")
    assert "ISSUE-99" not in general and "Osaka" not in general and "Kyoto" not in general
    secret = await layers(SECRET)
    assert "ISSUE-99" in secret and "Tokyo" in secret  # a private channel sees the shared ones
    dm = await layers(DM)
    assert "Kyoto" in dm and "calculator_v2" not in dm and "Memory of this server" not in dm
    elsewhere = await layers(OTHER_GUILD)
    assert "Osaka" in elsewhere and "calculator_v2" not in elsewhere and "Tokyo" not in elsewhere
    await engine.admin.share(SECRET, True)  # an admin opts the private channel in
    assert "ISSUE-99" in await layers(GENERAL)


async def test_per_channel_overrides_are_validated_and_used(world):
    engine, clock, _ = world
    from bot.config import ConfigError

    await engine.settings.set("channel", 101, "short_term_history.message_threshold", 2)
    with pytest.raises(ConfigError, match=r"short_term_history.message_threshold = 1 \(from override\)"):
        await engine.settings.set("channel", 101, "short_term_history.message_threshold", 1)
    await first_version(engine, clock, RANDOM)
    await say(engine, RANDOM, "a", "b")  # two messages reach this channel's threshold
    await engine.memory.run_due()
    assert len(await versions(engine, RANDOM)) == 2


async def test_disabled_short_term_history_writes_nothing(make_config):
    engine = await Engine.open(make_config(short_term_history={"enabled": False}), OfflineLLM())
    await say(engine, GENERAL, "hello")
    assert await engine.memory.run_due() == []
    await engine.close()


async def test_a_discord_threads_short_term_memory_is_overwritten_in_place(world):
    from memory import threads
    from memory.settings import StelisSettings
    from memory.threads import Run

    engine, clock, _ = world
    root = await engine.stelis.root(GENERAL)
    backed = await threads.start(engine.store, Run(root.id), "thread in Discord", StelisSettings(),
                                 discord_thread_id=555)
    for text in ("first thread talk about Kyoto", "second thread talk about Nara"):
        await engine.conversations.hear(GENERAL, text, author_name="mahe", thread_id=backed.id)
        clock.advance(IDLE)
        await engine.memory.run_due()
    records = await engine.store.recent_records("Stelis", "thread", 555, "short_term", 10)
    assert len(records) == 1 and records[0].version == 1
    assert "Nara" in records[0].content
    assert await engine.store.recent_records("Stelis", "workspace", 10, "short_term", 10) == []
    layers = (await engine.conversations.context(backed.id)).request.system[1].text
    assert "# Memory of this Discord thread" in layers and "Nara" in layers


async def test_close_cancels_a_running_update_cleanly(make_config):
    class Hanging:
        name = "hanging"

        async def complete(self, request, on_text=None):
            await asyncio.sleep(3600)

        async def aclose(self):
            return None

    config = make_config(snapshots={"interval_seconds": 0})
    engine = await Engine.open(config, Hanging())
    await say(engine, GENERAL, "hello")
    engine.clock.advance(IDLE)
    running = asyncio.create_task(engine.memory.run_due())
    await asyncio.sleep(0.05)
    engine.shutdown_grace = 0.1
    await engine.close()
    assert running.cancelled()
    from memory.backends import open_store

    store = await open_store(config.database_path)  # reopened: nothing half-written, the work still pending
    root = await store.root_thread("Stelis", GENERAL, 0.8)
    assert await store.recent_records("Stelis", "channel", 100, "short_term", 5) == []
    assert (await store.memory_channel(root.id)).pending_count == 1
    await store.close()


async def test_shutdown_lets_a_running_update_finish_quietly(make_config, caplog):
    clock = Clock()

    class Slow(Scripted):
        async def complete(self, request, on_text=None):
            self.started.set()
            await asyncio.sleep(0.3)
            return await super().complete(request, on_text)

    llm = Slow()
    llm.started = asyncio.Event()
    config = memory_config(make_config)
    engine = await Engine.open(config, llm, clock)
    await engine.start_memory()
    await say(engine, GENERAL, *(f"message {i}" for i in range(THRESHOLD)))  # due now: the timer fires
    await asyncio.wait_for(llm.started.wait(), 5)
    await engine.close()  # inside the 10 s grace: the update completes instead of being cancelled
    store = await open_store(config.database_path)
    thread = await store.find_root(engine.persona, GENERAL)
    assert len(await store.recent_records(engine.persona, "channel", 100, "short_term", 5)) == 1
    assert thread is not None
    await store.close()
    assert "CancelledError" not in caplog.text and not [r for r in caplog.records if r.levelname == "ERROR"]


async def test_regenerating_twice_writes_no_copy(make_config):
    from bot.providers.offline import OfflineLLM

    engine = await Engine.open(make_config(snapshots={"interval_seconds": 0}), OfflineLLM())
    await say(engine, GENERAL, "the Kyoto trip is on 3 May", "Ben books the ryokan")
    first = await engine.admin.regenerate(GENERAL)
    again = await engine.admin.regenerate(GENERAL)  # same messages, same model: the same text
    assert first.short_term is not None and again.short_term is None
    assert len(await versions(engine, GENERAL)) == 1
    await engine.close()


async def test_shared_channels_come_from_the_query_most_recent_first_and_bounded(world):
    engine, clock, _ = world
    for i in range(30):
        scope = Scope.channel(10, 1_000 + i)
        await engine.admin.describe(scope, name=f"c{i}", public=i % 3 != 0)  # every third one private
        await say(engine, scope, f"message in c{i}")
        clock.advance(1)
    await engine.admin.share(Scope.channel(10, 1_001), False)  # public, but opted out of sharing
    found = await engine.store.shared_channels(engine.persona, 10, limit=5, besides=1_029)
    assert [c.channel_id for c in found] == [1_028, 1_026, 1_025, 1_023, 1_022]
    everything = await engine.store.shared_channels(engine.persona, 10)
    assert all(c.shared for c in everything) and 1_001 not in {c.channel_id for c in everything}
    assert {c.channel_id for c in everything} >= {100, 101}  # the fixture's public channels


async def test_memory_is_written_by_the_light_model_unless_a_channel_asks_for_the_standard_one(world):
    engine, clock, llm = world
    await first_version(engine, clock)
    assert {r.tier for r in llm.requests} == {"light"}  # the short-term version and the long-term merge
    from bot.config import ConfigError

    with pytest.raises(ConfigError, match=r"memory\.tier"):
        await engine.settings.set("channel", 101, "memory.tier", "huge")
    await engine.settings.set("channel", 101, "memory.tier", "standard")
    before = len(llm.requests)
    await first_version(engine, clock, RANDOM)
    short_term = [r for r in llm.requests[before:] if "short-term memory of this conversation" in
                  r.turns[0].blocks[0].text]
    assert short_term and {r.tier for r in short_term} == {"standard"}
    assert "light" in {r.tier for r in llm.requests[before:]}  # the server's memory follows the server's setting


async def test_memory_layers_hold_still_between_cuts_but_a_pin_or_an_erasure_shows_at_once(world):
    """Another channel's chatter reorders the shared channels; the cached prefix must not move for it."""
    engine, clock, llm = world
    await say(engine, GENERAL, "general fact calculator_v2")
    await say(engine, RANDOM, "random fact Tokyo", name="kai")
    await engine.conversations.hear(RANDOM, "kai's own fact ISSUE-7", author_name="kai", author_id=77)
    await say(engine, SECRET, "secret fact ISSUE-99")
    await idle(engine, clock)
    secret = (await engine.stelis.root(SECRET)).id

    async def layers() -> str:
        await say(engine, SECRET, "and another thing")
        await engine.conversations.reply(secret)
        request = next(r for r in reversed(llm.requests) if r.purpose != "summary")
        return request.system[1].text

    async def most_recent_first() -> list[str | None]:
        return [c.name for c in await engine.store.shared_channels(engine.persona, 10, besides=102)]

    before = await layers()
    assert "# Memory of #random" in before and "# Memory of #general" in before
    assert await most_recent_first() == ["random", "general"]
    await say(engine, GENERAL, "general is the busiest channel now")
    assert await most_recent_first() == ["general", "random"]  # read afresh, the layers would reorder
    assert await layers() == before

    await engine.admin.pin(SECRET, "the launch is on Friday")
    pinned = await layers()
    assert "the launch is on Friday" in pinned

    await engine.forgetting.forget_person(77, guild_id=10)
    assert "ISSUE-7" in pinned and "ISSUE-7" not in await layers()


async def test_a_channel_another_worker_holds_is_left_to_it(world):
    engine, clock, _ = world
    await say(engine, GENERAL, "I am Mahe, building calculator_v2")
    thread_id = (await engine.stelis.root(GENERAL)).id
    assert await engine.store.claim_due(clock(), "another-process", 600, 1, thread_id=thread_id)
    skipped = await engine.memory.run_channel(thread_id, force=True)
    assert skipped.short_term is None and skipped.error is None
    assert await versions(engine, GENERAL) == []
    await engine.store.release_channel(thread_id, "another-process")
    done = await engine.memory.run_channel(thread_id, force=True)
    assert done.short_term is not None and len(await versions(engine, GENERAL)) == 1
    assert await engine.store.claim_due(clock(), "another-process", 600, 1, thread_id=thread_id)  # released after


async def test_a_workspace_merge_another_process_holds_is_left_to_it(world):
    engine, _, _ = world
    assert await engine.store.claim("workspace:Stelis:10", "another-process", 600)
    await engine.memory._workspace("Stelis", 10)
    assert await engine.store.latest_record("Stelis", "workspace", 10, "long_term") is None
    await engine.store.release("workspace:Stelis:10", "another-process")
    await say(engine, GENERAL, "I am Mahe, building calculator_v2")
    await engine.memory.run_channel((await engine.stelis.root(GENERAL)).id, force=True)
    await engine.memory._workspace("Stelis", 10)
    assert await engine.store.latest_record("Stelis", "workspace", 10, "long_term") is not None


class Held(Scripted):
    """Holds its workspace merges until let go, as a slow model in another process would."""

    def __init__(self):
        super().__init__()
        self.merging, self.go = asyncio.Event(), asyncio.Event()

    async def complete(self, request, on_text=None):
        if "this server" in request.turns[-1].blocks[-1].text:
            self.merging.set()
            await self.go.wait()
        return await super().complete(request, on_text)


async def test_a_channel_memory_saved_while_another_process_merges_is_merged_by_it(world):
    engine, clock, _ = world
    slow, quick = Held(), Scripted()
    workers = []
    for llm, owner in ((slow, "process-a"), (quick, "process-b")):
        worker = MemoryWorker(engine.store, llm, engine.memory.settings_for, clock, 1, 600)
        worker.owner = owner
        workers.append(worker)
    a, b = workers
    await say(engine, GENERAL, "I am Mahe, building calculator_v2")
    await a.run_channel((await engine.stelis.root(GENERAL)).id, force=True)
    merging = asyncio.create_task(a._workspace("Stelis", 10))
    await asyncio.wait_for(slow.merging.wait(), 5)  # a has read #general's memory and waits on the model
    await say(engine, RANDOM, "random talks about Tokyo")
    await b.run_channel((await engine.stelis.root(RANDOM)).id, force=True)
    await b._workspace("Stelis", 10)  # held by a: b leaves it
    assert not any("this server" in r.turns[-1].blocks[-1].text for r in quick.requests)
    slow.go.set()
    await asyncio.wait_for(merging, 5)
    merges = await engine.store.recent_records("Stelis", "workspace", 10, "long_term", 10)
    assert [sorted(m.metadata["sources"]) for m in merges] == [["#general lt-v1"], ["#general lt-v1", "#random lt-v1"]]
    assert "Tokyo" in merges[-1].content
    calls = len(slow.requests)
    await a._workspace("Stelis", 10)  # nothing new since: no model call, no version
    assert len(slow.requests) == calls
    assert len(await engine.store.recent_records("Stelis", "workspace", 10, "long_term", 10)) == 2


async def test_a_save_over_a_range_another_worker_saved_first_writes_nothing(world):
    engine, clock, _ = world
    await say(engine, GENERAL, "I am Mahe, building calculator_v2")
    thread_id = (await engine.stelis.root(GENERAL)).id
    read_before = await engine.store.memory_channel(thread_id)  # a slow worker read this, then its lease ran out
    assert (await engine.memory.run_channel(thread_id, force=True)).short_term is not None
    with pytest.raises(StaleUpdate):
        await engine.store.save_short_term(read_before, "a late copy", 1, 1, 1, clock(),
                                           (await engine.settings.memory(None)).triggers, {}, live=1)
    assert len(await versions(engine, GENERAL)) == 1


async def test_a_claim_left_by_a_crash_does_not_hold_the_conversation_back_after_a_restart(make_config):
    clock = Clock()
    config = memory_config(make_config)
    engine = await Engine.open(config, Scripted(), clock)
    await say(engine, GENERAL, "I am Mahe, building calculator_v2")
    thread_id = (await engine.stelis.root(GENERAL)).id
    assert await engine.store.claim_due(clock(), "a-process-that-crashed", 900, 1, thread_id=thread_id)
    await engine.close()
    engine = await Engine.open(config, Scripted(), clock)  # the bot alone holds the database again
    assert (await engine.memory.run_channel(thread_id, force=True)).short_term is not None
    await engine.close()


@pytest.mark.parametrize(("context", "share", "configured", "expected"), [
    (8_192, 0.25, None, 3_378),    # twice what the memory layers may take of a request: (8,192 x .95 - 1,024) x .25
    (2_048, 0.25, None, 716),      # a small local model's: (2,048 x .95 - 512) x .25, twice
    (2_048, 0.10, None, 512),      # ... but never less than is worth writing
    (32_768, 0.25, None, 8_000),   # a merge rewrites it all, so never more than this
    (32_768, 0.25, 1_200, 1_200),  # memory.long_term_tokens set: as set
])
async def test_the_long_term_memory_is_sized_by_the_models_context(make_config, context, share, configured, expected):
    clock, llm = Clock(), Scripted()
    memory = {"long_term_tokens": configured} if configured else {}
    config = make_config(short_term_history={"conversation_idle_seconds": IDLE, "message_threshold": THRESHOLD},
                         snapshots={"interval_seconds": 0}, llm={"context_tokens": context}, memory=memory,
                         context={"memory_share": share})
    engine = await Engine.open(config, llm, clock)
    try:
        await first_version(engine, clock)
        merges = [r for r in llm.requests if "Update the long-term memory" in r.turns[0].blocks[0].text]
        assert [r.max_tokens for r in merges] == [expected]
    finally:
        await engine.close()


async def test_an_edit_replaces_what_it_edits_and_a_rollback_hides_what_came_after(make_config, database):
    """Prompts, recall and the long-term memory follow the admin's correction; history keeps every version."""
    from bot.report import history_line

    clock = Clock()
    config = make_config(short_term_history={"conversation_idle_seconds": IDLE, "message_threshold": THRESHOLD},
                         snapshots={"interval_seconds": 0}, database=database)
    engine = await Engine.open(config, OfflineLLM(), clock)

    async def seen() -> str:
        """What a prompt carries of memory, and what recall finds of it (the words said stay what they were: the
        message is the person's, and /forget is what erases it)."""
        request = (await engine.conversations.preview(GENERAL, "where does mahe live?", author_name="mahe")).request
        memory = "\n".join(b.text for b in request.system[1:])
        recalled = " ".join(h.text for h in await engine.archive.recall(GENERAL,
                                                                        "mahe lives where") if h.kind == "memory")
        return memory + "\n" + recalled

    async def long_term() -> str:
        return (await versions(engine, GENERAL, "long_term"))[-1].content

    try:
        await say(engine, GENERAL, "I live in Paris near the canal", "the weather is grey today")
        await engine.admin.regenerate(GENERAL)
        assert "Paris" in await seen() and "Paris" in await long_term()

        edited = await engine.admin.edit(GENERAL, "mahe lives in Lyon.")
        assert "Lyon" in await seen() and "Paris" not in await seen()
        assert "Lyon" in await long_term() and "Paris" not in await long_term()
        history = await versions(engine, GENERAL)
        assert [r.hidden_by for r in history] == [edited.version, None]
        assert "replaced by v2" in history_line(history[0])

        await engine.admin.rollback(GENERAL, 1)  # back to Paris: the edit is hidden, kept in history
        assert "Paris" in await seen() and "Lyon" not in await seen() and "Lyon" not in await long_term()
        assert [r.hidden_by for r in await versions(engine, GENERAL)] == [2, 3, None]  # v3 is v1 again

        await engine.admin.rollback(GENERAL, 2)  # a hidden version is restorable
        assert "Lyon" in await seen() and "Paris" not in await seen()
    finally:
        await engine.close()


async def test_a_rollback_after_someone_is_forgotten_brings_none_of_their_words_back(make_config, database):
    """A version an edit replaced, quoting someone who is then forgotten, goes whole: shown nowhere, it would not be
    rewritten, and a rollback would bring their words back. What is left, and the long-term memory written again,
    hold none of them."""
    clock = Clock()
    config = make_config(short_term_history={"conversation_idle_seconds": IDLE, "message_threshold": THRESHOLD},
                         snapshots={"interval_seconds": 0}, database=database)
    engine = await Engine.open(config, OfflineLLM(), clock)
    try:
        await engine.conversations.hear(GENERAL, "my bank pin is quillwort-8812", author_name="kai", author_id=77)
        await say(engine, GENERAL, "the team lunch is on Friday")
        await engine.admin.regenerate(GENERAL)
        assert "quillwort" in (await versions(engine, GENERAL))[0].content
        await engine.admin.edit(GENERAL, "the team lunch is on Friday.")
        await engine.forgetting.forget_person(77, guild_id=10)
        assert [r.hidden_by for r in await versions(engine, GENERAL)] == [None]  # the replaced one went whole
        await engine.admin.rollback(GENERAL, 1)  # v1 now is what forget-me wrote again: kai's words are not in it
        kept = [r.content for t in ("short_term", "long_term") for r in await versions(engine, GENERAL, t)]
        assert kept and any("team lunch" in text for text in kept)
        request = (await engine.conversations.preview(GENERAL, "what is kai's bank pin?", author_name="mahe")).request
        recalled = await engine.archive.recall(GENERAL, "quillwort bank pin")
        assert not any("quillwort" in text for text in kept)
        assert "quillwort" not in str(request) and not any("quillwort" in h.text for h in recalled)
    finally:
        await engine.close()


@pytest.mark.parametrize("whole", [True, False])
async def test_a_version_reads_what_a_window_cut_summarised_as_that_summary_not_again_message_by_message(world, whole):
    """Messages a cut folded into the rolling summary, or a trim into its bridge, are given to the version as that
    summary (as the prompt showed it), the others as they were said: the memory work reads each message once. A
    bridge written before bridges held all of their gap (no window_bridge_from) never stands for its messages."""
    engine, clock, llm = world
    await first_version(engine, clock)
    await say(engine, GENERAL, "before the fold", *[f"folded detail {i}" for i in range(3)], "the window's head",
              *[f"bridged detail {i}" for i in range(3)], "after the bridge")
    root = await engine.stelis.root(GENERAL)
    said = {m.content: m async for m in engine.store.span(root.id, None, None)}
    folded = [said[f"folded detail {i}"] for i in range(3)]
    bridged = [said[f"bridged detail {i}"] for i in range(3)]
    await engine.store.set_window(root.id, window_start_seq=said["the window's head"].seq,
                                  window_summary="ROLLING: three items were listed",
                                  window_summary_from=folded[0].seq, window_summary_to=folded[-1].seq,
                                  window_summary_first_at=folded[0].created_at,
                                  window_summary_last_at=folded[-1].created_at,
                                  window_gap_from=bridged[0].seq, window_gap_to=said["after the bridge"].seq,
                                  window_bridge="BRIDGE: three more items",
                                  window_bridge_first_at=bridged[0].created_at,
                                  window_bridge_last_at=bridged[-1].created_at, window_trims=1,
                                  window_bridge_from=bridged[0].seq if whole else None)
    await idle(engine, clock)
    text = _version_requests(llm)[-1].split("<transcript>")[1]
    assert "[Memory Summary] Earlier conversation" in text and text.count("ROLLING") == 1
    assert "folded detail" not in text  # not read a second time
    if whole:
        assert "[Memory Summary] Between the messages" in text and text.count("BRIDGE") == 1
        assert "bridged detail" not in text
    else:
        assert "BRIDGE" not in text and all(f"bridged detail {i}" in text for i in range(3))
    bridge = "BRIDGE" if whole else "bridged detail 0"
    order = ["before the fold", "ROLLING", "the window's head", bridge, "after the bridge"]
    assert [text.index(part) for part in order] == sorted(text.index(part) for part in order)
    assert "seed message" not in text  # the previous version's messages stay out, as before
    assert len(await versions(engine, GENERAL)) == 2


async def test_a_bridge_whose_gap_began_before_the_versions_messages_stands_for_those_in_it(world):
    """A window trims for longer than a version takes, so a bridge's gap usually began among the previous version's
    messages: the next version reads the bridge for the gap's messages it covers (the memory work reads each message
    once), the ones after the gap as said, and records that its reading began where the bridge's words do."""
    engine, clock, llm = world
    await say(engine, GENERAL, "early part of the gap", "the gap goes on")
    await idle(engine, clock)  # v1 covers the gap's first two messages
    await say(engine, GENERAL, *[f"bridged detail {i}" for i in range(3)], "after the bridge")
    root = await engine.stelis.root(GENERAL)
    said = {m.content: m async for m in engine.store.span(root.id, None, None)}
    gap_from = said["early part of the gap"]
    await engine.store.set_window(root.id, window_start_seq=gap_from.seq, window_gap_from=gap_from.seq,
                                  window_gap_to=said["after the bridge"].seq,
                                  window_bridge="BRIDGE: the gap and three items",
                                  window_bridge_first_at=gap_from.created_at,
                                  window_bridge_last_at=said["bridged detail 2"].created_at, window_trims=2,
                                  window_bridge_from=gap_from.seq - 1)  # it read a version reaching further back
    await idle(engine, clock)
    text = _version_requests(llm)[-1].split("<transcript>")[1]
    assert text.count("BRIDGE") == 1 and "bridged detail" not in text and "after the bridge" in text
    assert text.index("BRIDGE") < text.index("after the bridge")
    v1, v2 = await engine.store.recent_records(engine.persona, "channel", GENERAL.channel_id, "short_term", 10)
    assert v2.first_seq == said["bridged detail 0"].seq and v2.metadata["read_from"] == gap_from.seq - 1
    assert v2.reach == gap_from.seq - 1 < v1.first_seq <= gap_from.seq  # an erasure there rewrites it too


async def test_a_rolling_summary_older_than_the_new_messages_or_a_regeneration_reads_the_messages(world):
    engine, clock, llm = world
    await say(engine, GENERAL, "old chatter one", "old chatter two")
    root = await engine.stelis.root(GENERAL)
    old = [m async for m in engine.store.span(root.id, None, None)]
    await engine.store.set_window(root.id, window_start_seq=old[-1].seq + 1, window_summary="STALE rolling summary",
                                  window_summary_from=old[0].seq, window_summary_to=old[0].seq)
    await idle(engine, clock)  # v1 covers both messages; the summary covers the first alone
    await say(engine, GENERAL, "fresh news about the kiln")
    await idle(engine, clock)
    text = _version_requests(llm)[-1].split("<transcript>")[1]
    assert "fresh news about the kiln" in text and "STALE" not in text
    await engine.admin.regenerate(GENERAL)  # regenerating the latest version reads its own messages again
    assert "fresh news about the kiln" in _version_requests(llm)[-1].split("<transcript>")[1]


def _version_requests(llm: Scripted) -> list[str]:
    return [r.turns[0].blocks[0].text for r in llm.requests
            if "short-term memory of this conversation" in r.turns[0].blocks[0].text]


async def test_a_version_written_while_someone_in_its_range_is_erased_is_not_saved(world):
    """forget-me may erase a message while a version covering it is being written (from its words, or from a rolling
    summary holding them): that version is dropped, not saved after the rewrite looked for what covered the message,
    and the next scan writes one from what is left."""
    engine, clock, llm = world
    await first_version(engine, clock)
    await engine.conversations.hear(GENERAL, "my locker code is wintergreen-4471", author_name="kai", author_id=77,
                                    external_id=9_001)
    await say(engine, GENERAL, "the release slips to Monday")
    real = llm.complete
    erased = []

    async def erasing(request, on_text=None):  # the erasure lands while the model writes the version
        if not erased and "short-term memory of this conversation" in request.turns[0].blocks[0].text:
            erased.append(await engine.forgetting.delete_message(9_001))
            await asyncio.gather(*engine.forgetting.rewrites)
        return await real(request, on_text)

    llm.complete = erasing
    clock.advance(IDLE)
    outcomes = await engine.memory.run_due()
    assert erased == [True] and outcomes[0].short_term is None  # dropped; still due, so taken again at once
    written = await versions(engine, GENERAL)
    assert len(written) == 2 and "release slips" in written[-1].content
    assert not any("wintergreen" in r.content for r in written)


class Noting(Scripted):
    """Answers every summary with a short dated note that quotes nothing of the request."""

    async def complete(self, request, on_text=None):
        self.requests.append(request)
        return LLMResult(text=f"[23 November 2026]\nmahe: note {len(self.requests)} on the kiln and the flour")


async def in_parts(make_config, llm, clock=None):
    """An engine whose summarisation requests read 500 tokens of transcript at most."""
    return await Engine.open(make_config(
        short_term_history={"conversation_idle_seconds": IDLE, "message_threshold": THRESHOLD},
        snapshots={"interval_seconds": 0}, stelis={"chunk_tokens": 500}), llm, clock or Clock())


async def write_in_parts(engine, llm) -> tuple[list[str], str]:
    """A version of a message longer than one request: the requests for its parts, and the one that puts them
    together (the short messages after it wait for the next version)."""
    llm.requests.clear()
    await say(engine, GENERAL, "a later week: " + "the kiln is relined with firebrick " * 100,
              *(f"a later week, line {i}: the kiln cools" for i in range(THRESHOLD - 1)))
    await engine.memory.run_due()
    asked = [r.turns[-1].blocks[-1].text for r in llm.requests]
    (together,) = [text for text in asked if "summaries of consecutive parts" in text]
    return [text for text in asked if "This is part" in text], together


async def test_a_version_written_in_parts_reads_the_earlier_versions_and_pins_once_where_it_is_put_together(
        make_config):
    """Each part summarises its own messages; the request that writes the version (here the combine) is the one
    told what earlier versions hold and which facts are pinned."""
    llm = Noting()
    engine = await in_parts(make_config, llm)
    await engine.admin.pin(GENERAL, "the ferry leaves at 07:40")
    await say(engine, GENERAL, *(f"first week, note {i}: the cooperative orders flour" for i in range(THRESHOLD)))
    await engine.memory.run_due()
    (first,) = await versions(engine, GENERAL)
    parts, together = await write_in_parts(engine, llm)
    assert len(parts) >= 2
    assert all(first.content not in text and "07:40" not in text for text in parts)
    assert first.content.splitlines()[0] in together and "the ferry leaves at 07:40" in together
    (*_, second) = await versions(engine, GENERAL)
    assert second.version == 2 and "the ferry leaves at 07:40" in second.content
    await engine.close()


async def test_a_backlog_longer_than_one_request_makes_a_version_per_request_and_loses_nothing(make_config):
    """Messages whose transcript one request cannot read (stelis.chunk_tokens) are not summarised in parts put
    together: the version covers the oldest that fit, and the rest wait for the next one, written in the same run
    while they are still due. Every message is covered once, in order, and each version is one request."""
    llm, clock = Noting(), Clock()
    engine = await in_parts(make_config, llm, clock)
    notes = [f"week note {i}: the cooperative orders flour, salt and lamp oil for the ferry " * 4
             for i in range(3 * THRESHOLD)]
    await say(engine, GENERAL, *notes)
    await engine.memory.run_due()
    asked = _version_requests(llm)
    history = await versions(engine, GENERAL)
    assert len(history) >= 2 and len(asked) == len(history)  # one request a version: no parts, none combined
    assert not any("This is part" in r.turns[-1].blocks[-1].text or "summaries of consecutive parts" in
                   r.turns[-1].blocks[-1].text for r in llm.requests)
    root = await engine.stelis.root(GENERAL)
    said = [m async for m in engine.store.span(root.id, None, None)]
    assert history[0].first_seq == said[0].seq and history[-1].last_seq <= said[-1].seq
    for before, after in itertools.pairwise(history):
        assert after.first_seq == next(m.seq for m in said if m.seq > before.last_seq)  # no gap, no overlap
    for text, version in zip(asked, history, strict=True):
        transcript = text.split("<transcript>")[1]
        inside = [m.content for m in said if version.first_seq <= m.seq <= version.last_seq]
        assert inside and all(note.split(":")[0] + ":" in transcript for note in inside)
        assert not any(m.content.split(":")[0] + ":" in transcript for m in said if m.seq > version.last_seq)
    left = [m for m in said if m.seq > history[-1].last_seq]
    assert 0 < len(left) < THRESHOLD  # what is left is not due yet ...
    channel = await engine.store.memory_channel(root.id)
    assert channel is not None and channel.pending_count == len(left)
    await idle(engine, clock)  # ... until the conversation idles
    (*_, last) = await versions(engine, GENERAL)
    assert last.version == len(history) + 1 and (last.first_seq, last.last_seq) == (left[0].seq, left[-1].seq)
    await engine.close()


async def test_where_the_model_reads_less_than_a_request_s_ceiling_the_whole_backlog_goes_in_parts(make_config):
    """A model whose context holds less than stelis.chunk_tokens refuses the oldest messages' request: the version
    then covers every message, in parts put together, as before (a remainder would only leave memory further
    behind), and nothing is left counted."""
    from memory.llm import RequestTooLarge

    class Narrow(Noting):
        async def complete(self, request, on_text=None):
            if len(request.turns[-1].blocks[-1].text) > 1_600:  # about 350 tokens
                raise RequestTooLarge("the request needs more than the model's context")
            return await super().complete(request, on_text)

    llm = Narrow()
    engine = await in_parts(make_config, llm)
    notes = [f"week note {i}: the cooperative orders flour, salt and lamp oil for the ferry " * 4
             for i in range(2 * THRESHOLD)]
    await say(engine, GENERAL, *notes)
    await engine.memory.run_due()
    (version,) = await versions(engine, GENERAL)
    root = await engine.stelis.root(GENERAL)
    said = [m async for m in engine.store.span(root.id, None, None)]
    assert (version.first_seq, version.last_seq) == (said[0].seq, said[-1].seq)
    asked = [r.turns[-1].blocks[-1].text for r in llm.requests]
    assert any("This is part" in text for text in asked) and any("summaries of consecutive parts" in text
                                                                 for text in asked)
    channel = await engine.store.memory_channel(root.id)
    assert channel is not None and channel.pending_count == 0
    await engine.close()


async def test_a_version_of_part_of_a_backlog_holds_a_rolling_summary_only_with_the_messages_it_stands_for(
        make_config):
    """A window's rolling summary stands for its messages in the version that reaches them, not in one that ends
    before them (it would tell of messages that version does not cover, and the next one would tell them again)."""
    llm, clock = Noting(), Clock()
    engine = await in_parts(make_config, llm, clock)
    long_notes = [f"early note {i}: the cooperative orders flour, salt and lamp oil for the ferry " * 4
                  for i in range(2 * THRESHOLD)]
    await say(engine, GENERAL, *long_notes, *[f"folded detail {i}" for i in range(3)], "the window's head")
    root = await engine.stelis.root(GENERAL)
    said = {m.content: m async for m in engine.store.span(root.id, None, None)}
    folded = [said[f"folded detail {i}"] for i in range(3)]
    await engine.store.set_window(root.id, window_start_seq=said["the window's head"].seq,
                                  window_summary="ROLLING: three items were listed",
                                  window_summary_from=folded[0].seq, window_summary_to=folded[-1].seq,
                                  window_summary_first_at=folded[0].created_at,
                                  window_summary_last_at=folded[-1].created_at)
    await engine.memory.run_due()
    await idle(engine, clock)
    texts = [text.split("<transcript>")[1] for text in _version_requests(llm)]
    assert len(texts) >= 2 and "ROLLING" not in texts[0]  # the first ends before the folded messages
    assert sum(text.count("ROLLING") for text in texts) == 1 and not any("folded detail" in t for t in texts)
    (*_, last) = await versions(engine, GENERAL)
    assert last.last_seq == said["the window's head"].seq
    await engine.close()


async def test_where_the_model_has_no_room_for_every_earlier_version_the_oldest_are_left_out_not_the_parts_redone(
        make_config):
    from memory.llm import RequestTooLarge

    class Small(Noting):
        """A model whose context holds the request that writes a version with two earlier versions at most."""

        async def complete(self, request, on_text=None):
            if request.turns[-1].blocks[-1].text.count("\n- v") > 2:
                raise RequestTooLarge("the request needs more than the model's context")
            return await super().complete(request, on_text)

    llm = Small()
    engine = await in_parts(make_config, llm)
    for week in range(3):
        await say(engine, GENERAL, *(f"week {week}, note {i}: the cooperative orders flour" for i in range(THRESHOLD)))
        await engine.memory.run_due()
    assert [v.version for v in await versions(engine, GENERAL)] == [1, 2, 3]
    parts, together = await write_in_parts(engine, llm)
    assert len(parts) >= 2 and len(set(parts)) == len(parts)  # each part asked once
    assert "- v3:" in together and "- v2:" in together and "- v1:" not in together
    assert [v.version for v in await versions(engine, GENERAL)] == [1, 2, 3, 4]
    await engine.close()


async def test_a_memory_update_waits_while_a_reply_does_its_own_work_but_not_past_its_limit(world, monkeypatch):
    """Replies first (issue 32): a version started in a burst of replies waits for a moment with none preparing or
    storing one, so its work comes out of the time they wait on the model; a server never quiet still gets it."""
    engine, _, llm = world
    root = await engine.stelis.root(GENERAL)
    release, assembling = asyncio.Event(), asyncio.Event()
    real = engine.assembler.assemble

    async def held(*args, **kwargs):
        assembling.set()
        await release.wait()
        return await real(*args, **kwargs)

    monkeypatch.setattr(engine.assembler, "assemble", held)
    for most, released in ((30.0, True), (0.2, False)):
        engine.memory.foreground.most = most
        await say(engine, GENERAL, *[f"round {most}: message {i}" for i in range(THRESHOLD)])
        assembling.clear()
        replying = asyncio.create_task(engine.conversations.reply(root.id))
        await assembling.wait()
        asked = len(llm.requests)
        updating = asyncio.create_task(engine.memory.run_due())
        await asyncio.sleep(0.1)
        assert len(llm.requests) == asked and not updating.done()  # the version waits for the reply's own work
        if released:
            release.set()
            await replying
            outcomes = await updating
            assert llm.requests[asked].purpose == "reply"  # the reply's request went first
            release.clear()
        else:
            outcomes = await asyncio.wait_for(updating, 5)  # the reply is still assembling: the limit ran out
            assert not replying.done()
            release.set()
            await replying
        assert [o.short_term is not None for o in outcomes] == [True]


async def test_a_channel_that_stops_being_shared_leaves_the_server_memory_before_the_next_prompt(world):
    """A channel made private (its permissions changed, or an admin stopped sharing it): what the server memory
    merged from it is not shown in the other channels' prompts any more."""
    engine, clock, _ = world
    await say(engine, GENERAL, "the staff party venue is the Blue Heron, keep it quiet", name="mahe")
    await say(engine, RANDOM, "ben likes the Kyoto trip plan", name="ben")
    clock.advance(IDLE)
    await engine.memory.run_due()
    server = await engine.store.latest_record(engine.persona, "workspace", GENERAL.guild_id, "long_term")
    assert server is not None and "Blue Heron" in server.content
    await engine.admin.describe(GENERAL, public=False)
    root = await engine.stelis.root(RANDOM)
    await say(engine, RANDOM, "what are the plans?", name="ben")
    prompt = str((await engine.conversations.context(root.id)).request)
    assert "Blue Heron" not in prompt  # at once
    await engine.memory.drain(10)  # merged again, in the background, from the channels still shared
    server = await engine.store.latest_record(engine.persona, "workspace", GENERAL.guild_id, "long_term")
    assert server is not None and "Kyoto" in server.content and "Blue Heron" not in server.content
    await engine.admin.share(RANDOM, False)  # an admin stops sharing the other one: nothing is left to merge
    assert await engine.store.latest_record(engine.persona, "workspace", GENERAL.guild_id, "long_term") is None
    await engine.memory.drain(10)
    assert await engine.store.latest_record(engine.persona, "workspace", GENERAL.guild_id, "long_term") is None
