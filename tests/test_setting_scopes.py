"""Every setting a server may override changes what the bot does, at each level it may be set (issue 29, item 1).

For each overridable key: set it for the server, then for one channel, and watch what the service that
acts on it does (a Stelis thread refused, a memory version written or not, the request's persona card,
the pulse due or not) in that channel, and in another channel of the same server. A server-wide setting
cannot be set on a channel of a server, and one stored there before is not used.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Any

import pytest

from bot.clock import Clock
from bot.config import OVERRIDABLE, SCOPES, ConfigError
from bot.engine import Engine
from bot.providers.offline import OfflineLLM
from bot.report import config_lines
from cogs.access import permitted
from memory.errors import Failure
from memory.records import Scope

GUILD = 10
HERE, THERE = Scope.channel(GUILD, 100), Scope.channel(GUILD, 101)
ELSEWHERE = Scope.channel(GUILD + 1, 200)  # a channel of another server: nothing overridden there
FRIEND, ROLE = 4242, 77


async def _root(engine: Engine, scope: Scope):
    return await engine.stelis.root(scope)


async def _depth_allowed(engine: Engine, scope: Scope) -> bool:
    run = await engine.stelis.new_run(scope)
    try:
        await engine.stelis.start(run, "a look into it")
    except Failure:
        return False
    await engine.stelis.abort(run)
    return True


async def _window_ratio(engine: Engine, scope: Scope) -> float:
    run = await engine.stelis.new_run(scope)
    thread = await engine.stelis.start(run, "a look into it")
    await engine.stelis.abort(run)
    return thread.window_ratio


async def _versions_after(engine: Engine, scope: Scope, messages: int, idle: float) -> int:
    """Memory versions written for a channel after `messages` and then `idle` seconds of quiet."""
    for i in range(messages):
        engine.clock.advance(10)
        await engine.conversations.hear(scope, f"note {i} about the lighthouse and the tide", author_name="kai")
    engine.clock.advance(idle)
    await engine.memory.run_due()
    return len(await engine.store.recent_records(engine.persona, "channel", scope.channel_id or 0, "short_term", 50))


async def _request_text(engine: Engine, scope: Scope) -> str:
    request = (await engine.conversations.preview(scope, "hello", author_name="kai")).request
    return "\n".join(b.text for b in request.system)


def _member(*roles: int) -> Any:
    return SimpleNamespace(id=FRIEND, roles=[SimpleNamespace(id=r) for r in roles])


async def _discord(engine: Engine, scope: Scope):
    return (await engine.settings.effective(scope.guild_id, scope.channel_id)).discord


async def _autonomy(engine: Engine, scope: Scope):
    return await engine.autonomy.config(scope)  # what the pulse of the scope's server reads


Probe = Callable[[Engine, Scope], Awaitable[Any]]
# key -> (a value that changes what the bot does, how to watch it)
PROBES: dict[str, tuple[object, Probe]] = {
    "discord.reply_policy": ("chat", lambda e, s: e.settings.reply_policy(s.guild_id, s.channel_id)),
    "persona.name": ("Wren", _request_text),  # the default card's {name} and the system prompt say it
    "persona.card": ("You are Wren, who only speaks in riddles.", _request_text),
    "persona.models.standard": ("claude-haiku-4-5", lambda e, s: _model(e, s)),
    "short_term_history.enabled": (False, lambda e, s: _versions_after(e, s, 60, 0)),
    "short_term_history.max_history_count": (2, lambda e, s: _shown_versions(e, s)),
    "short_term_history.conversation_idle_seconds": (600, lambda e, s: _versions_after(e, s, 3, 900)),
    "short_term_history.message_threshold": (3, lambda e, s: _versions_after(e, s, 4, 0)),
    "stelis.max_depth": (0, _depth_allowed),
    "stelis.default_window_ratio": (0.3, _window_ratio),
    "memory.shared_channels": (1, lambda e, s: _shared(e, s)),
    "memory.tier": ("standard", lambda e, s: _tier(e, s)),
    "discord.cooldown_seconds": (30, lambda e, s: _cooldown(e, s)),
    "discord.allow_users": ([4343], lambda e, s: _permits(e, s, _member())),
    "discord.allow_roles": ([ROLE + 1], lambda e, s: _permits(e, s, _member(ROLE))),
    "discord.deny_users": ([FRIEND], lambda e, s: _permits(e, s, _member())),
    "discord.deny_roles": ([ROLE], lambda e, s: _permits(e, s, _member(ROLE))),
    "autonomy.enabled": (True, lambda e, s: e.autonomy.due(s)),
    "autonomy.home_channel": (101, lambda e, s: e.autonomy.home(s)),
    "autonomy.interval_minutes": (15, lambda e, s: _autonomy_value(e, s, "interval_minutes")),
    "autonomy.jitter_minutes": (3, lambda e, s: _autonomy_value(e, s, "jitter_minutes")),
    "autonomy.quiet_minutes": (1, lambda e, s: _autonomy_value(e, s, "quiet_minutes")),
    "autonomy.quiet_hours": ("01:00-06:00", lambda e, s: _autonomy_value(e, s, "quiet_hours")),
    "autonomy.timezone": ("Asia/Tokyo", lambda e, s: _autonomy_value(e, s, "timezone")),
    "autonomy.daily_calls": (3, lambda e, s: _autonomy_value(e, s, "daily_calls")),
    "autonomy.daily_tokens": (5_000, lambda e, s: _autonomy_value(e, s, "daily_tokens")),
    "autonomy.session_turns": (2, lambda e, s: _turns_left(e, s)),
}


async def _model(engine: Engine, scope: Scope) -> str | None:
    return (await engine.conversations.preview(scope, "hello", author_name="kai")).request.model


async def _shown_versions(engine: Engine, scope: Scope) -> int:
    return (await engine.settings.conversation(await _root(engine, scope))).memory_versions  # the assembler's view


async def _shared(engine: Engine, scope: Scope) -> int:
    return (await engine.settings.conversation(await _root(engine, scope))).shared_channels


async def _tier(engine: Engine, scope: Scope) -> str:
    root = await _root(engine, scope)
    await engine.conversations.hear(scope, "hello", author_name="kai")  # its memory channel exists once it speaks
    channel = await engine.store.memory_channel(root.id)
    return (await engine.settings.memory(channel)).work.tier  # what the memory worker writes this channel with


async def _cooldown(engine: Engine, scope: Scope) -> int:
    return (await _discord(engine, scope)).cooldown_seconds  # what the conversation cog waits between answers


async def _permits(engine: Engine, scope: Scope, member: Any) -> bool:
    return permitted(await _discord(engine, scope), member)  # the cog's own check, on the config in effect


async def _autonomy_value(engine: Engine, scope: Scope, name: str) -> object:
    return getattr(await _autonomy(engine, scope), name)


async def _turns_left(engine: Engine, scope: Scope) -> int:
    root = await _root(engine, scope)
    return await engine.socials.turns_left(scope, root.id)


@pytest.fixture
async def engine(make_config, database):
    e = await Engine.open(make_config(snapshots={"interval_seconds": 0}, database=database,
                                      autonomy={"quiet_minutes": 0}), OfflineLLM(), Clock())
    yield e
    await e.close()


def test_every_overridable_key_is_walked_and_declares_its_levels():
    assert set(PROBES) == set(OVERRIDABLE)
    assert all(levels and set(levels) <= {"guild", "channel"} for levels in SCOPES.values())


@pytest.mark.parametrize("key", OVERRIDABLE)
async def test_a_server_override_changes_what_the_bot_does_in_its_channels(engine, key):
    value, probe = PROBES[key]
    await engine.settings.set("guild", GUILD, key, value)
    before = await probe(engine, ELSEWHERE)  # another server's channel: config.yaml's value
    assert await probe(engine, HERE) != before
    assert await probe(engine, THERE) != before


@pytest.mark.parametrize("key", [k for k in OVERRIDABLE if "channel" in SCOPES[k]])
async def test_a_channel_override_changes_what_the_bot_does_there_and_only_there(engine, key):
    value, probe = PROBES[key]
    await engine.settings.set("channel", HERE.channel_id, key, value, GUILD)
    before = await probe(engine, ELSEWHERE)
    assert await probe(engine, HERE) != before
    assert await probe(engine, THERE) == before


@pytest.mark.parametrize("key", ["persona.card", "persona.name", "persona.models.standard",
                                 "short_term_history.max_history_count"])
async def test_what_a_prompt_reads_of_the_settings_follows_each_change_made_after_it_was_read(engine, key):
    """What a conversation's settings change in its prompt is kept between replies: a change after it was read
    shows in the next request, and the reset goes back."""
    value, probe = PROBES[key]
    before = await probe(engine, HERE)
    await engine.settings.set("channel", HERE.channel_id, key, value, GUILD)
    assert await probe(engine, HERE) != before
    await engine.settings.reset("channel", HERE.channel_id, key)
    assert await probe(engine, HERE) == before


@pytest.mark.parametrize("key", [k for k in OVERRIDABLE if "channel" not in SCOPES[k]])
async def test_a_server_wide_setting_is_refused_on_a_channel_and_one_stored_there_is_not_used(engine, key):
    value, probe = PROBES[key]
    with pytest.raises(ConfigError, match="one value for the whole server"):
        await engine.settings.set("channel", HERE.channel_id, key, value, GUILD)
    await engine.store.set_setting("channel", HERE.channel_id, key, value)  # as an older version stored it
    engine.settings._cache.clear()
    assert await probe(engine, HERE) == await probe(engine, ELSEWHERE)
    shown = await engine.settings.shown(GUILD, HERE.channel_id)
    assert key in shown.unused and key not in shown.channel
    assert f"channel {key} = " in (listed := "\n".join(config_lines(shown, "channel")))
    assert "not used: one value per server" in listed


async def test_outside_a_server_a_conversation_sets_server_wide_settings_on_itself(engine):
    dm = Scope.dm(7, 300)
    await engine.settings.set("channel", dm.channel_id, "autonomy.enabled", True)
    assert await engine.autonomy.due(dm)


async def test_a_playbook_keeps_to_the_depth_its_channel_allows(engine):
    await engine.settings.set("channel", HERE.channel_id, "stelis.max_depth", 0, GUILD)
    with pytest.raises(Failure, match=r"maximum depth 0 \(stelis.max_depth\)"):
        await engine.playbooks.run(HERE, "research", {"topic": "where the tide table is kept"})
    done = await engine.playbooks.run(THERE, "research", {"topic": "where the tide table is kept"})
    assert done.thread_id == (await engine.stelis.root(THERE)).id  # ran, and came back out of its thread
