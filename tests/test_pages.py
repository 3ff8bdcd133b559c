"""Long answers as pages with buttons."""

from unittest.mock import AsyncMock, MagicMock

import discord

from cogs.pages import Pager


def pressed_by(user_id: int) -> MagicMock:
    it = MagicMock(spec=discord.Interaction)
    it.user = MagicMock()
    it.user.id = user_id
    it.response = MagicMock()
    it.response.edit_message = AsyncMock()
    return it


async def test_pages_turn_with_the_buttons_and_only_for_who_asked():
    pager = Pager(["one", "two", "three"], owner_id=7)
    assert (pager.previous.disabled, pager.next.disabled, pager.counter.label) == (True, False, "1 / 3")
    it = pressed_by(7)
    await pager.next.callback(it)
    await pager.next.callback(it)
    assert it.response.edit_message.await_args.kwargs["content"] == "three"
    assert (pager.previous.disabled, pager.next.disabled, pager.counter.label) == (False, True, "3 / 3")
    await pager.previous.callback(it)
    assert it.response.edit_message.await_args.kwargs["content"] == "two" and pager.counter.disabled
    assert await pager.interaction_check(it) and not await pager.interaction_check(pressed_by(8))
