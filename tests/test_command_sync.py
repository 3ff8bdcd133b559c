"""Slash commands sync by themselves on the first start and after they changed, never at every start."""

import logging
from unittest.mock import AsyncMock

import discord
import pytest
from discord import app_commands

from bot.command_sync import SYNCED_FILE, fingerprint, sync_if_changed


@pytest.fixture
async def tree():
    client = discord.Client(intents=discord.Intents.none())
    commands = app_commands.CommandTree(client)

    @commands.command(name="remember", description="What the persona remembers here")
    async def remember(interaction: discord.Interaction, topic: str) -> None: ...

    @commands.command(name="forget", description="Forget what you said")
    async def forget(interaction: discord.Interaction) -> None: ...

    commands.sync = AsyncMock(side_effect=lambda: commands.get_commands())  # Discord echoes what it was given
    yield commands
    await client.close()


async def test_the_first_start_syncs_the_next_does_not_and_a_changed_command_syncs_again(tree, tmp_path):
    assert await sync_if_changed(tree, tmp_path) == len(tree.get_commands())
    assert (tmp_path / SYNCED_FILE).read_text() == fingerprint(tree)
    assert await sync_if_changed(tree, tmp_path) is None  # a restart: Discord already has these
    assert tree.sync.await_count == 1

    first = tree.get_commands()[0]
    first.description = first.description + " (changed by an upgrade)"
    assert await sync_if_changed(tree, tmp_path) is not None
    assert tree.sync.await_count == 2


async def test_a_refused_sync_is_logged_with_what_to_do_and_tried_again_next_start(tree, tmp_path, caplog):
    response = type("Response", (), {"status": 403, "reason": "Forbidden"})()
    tree.sync.side_effect = discord.Forbidden(response, "Missing Access")
    with caplog.at_level(logging.WARNING, logger="bot.command_sync"):
        assert await sync_if_changed(tree, tmp_path) is None
    assert "!sync guild" in caplog.text and "applications.commands" in caplog.text
    assert not (tmp_path / SYNCED_FILE).exists()  # so the next start tries again
