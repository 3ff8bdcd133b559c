import socket

import pytest

from tests.conftest import NetworkBlocked


def test_connecting_outside_loopback_is_refused():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s, pytest.raises(NetworkBlocked):
        s.connect(("203.0.113.7", 443))


async def test_loopback_is_allowed(fake_anthropic):
    host, port = fake_anthropic.base_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=2) as s:
        assert s.getpeername()[1] == int(port)


def test_name_lookups_outside_loopback_are_refused():
    with pytest.raises(NetworkBlocked):
        socket.getaddrinfo("api.anthropic.com", 443)


async def test_the_discord_tests_talk_to_dpytests_fake_http_only(make_config):
    import discord.ext.test as dpytest

    from bot.engine import Engine
    from bot.providers.offline import OfflineLLM
    from tests.discord_helpers import start_bot

    config = make_config(snapshots={"interval_seconds": 0}, short_term_history={"enabled": False})
    engine = await Engine.open(config, OfflineLLM())
    bot = await start_bot(engine, config)
    assert type(bot.http).__module__.startswith("discord.ext.test")  # dpytest's fake HTTP, no Discord API
    await dpytest.empty_queue()
    await engine.close()
