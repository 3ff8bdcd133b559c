"""A message arriving from a front end: kept where it belongs, and what a person speaking interrupts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bot.services.conversation import Conversations
from bot.services.pulse import Pulses
from bot.services.social import Socials
from memory.records import Message, Scope


@dataclass(frozen=True)
class Arrival:
    """Who said what (`persona`: another persona's bot, whose words go to the session of its exchange)."""

    content: str
    author_name: str
    author_id: int
    external_id: int | None = None
    images: list[dict[str, Any]] = field(default_factory=list)
    persona: bool = False
    reply_to: int | None = None  # the message it answers (Discord's reply), by its external id


class Arrivals:
    def __init__(self, conversations: Conversations, socials: Socials, pulses: Pulses):
        self._conversations = conversations
        self._socials = socials
        self._pulses = pulses

    async def receive(self, scope: Scope, arrival: Arrival, *, session_id: int | None = None,
                      live: bool = True) -> Message | None:
        """Keep a message in its conversation (or the session it was said in); None if its author opted out.

        Another persona's message in a server's channel goes to the session of the exchange with it (seed 001).
        A person speaking `live` (not read back after a reconnect) stops the server's running pulse and ends
        the exchanges going on here, each session suspended with its chronicle before anyone answers.
        """
        thread_id = session_id
        if arrival.persona and session_id is None and scope.guild_id is not None:
            thread_id = (await self._socials.session(scope, arrival.author_id, arrival.author_name)).id
        stored = await self._conversations.hear(scope, arrival.content, author_name=arrival.author_name,
                                                author_id=arrival.author_id, external_id=arrival.external_id,
                                                thread_id=thread_id, images=arrival.images or None,
                                                reply_to=arrival.reply_to)
        if live and stored is not None and not arrival.persona and scope.guild_id is not None:
            await self.person_spoke(scope)
        return stored

    async def person_spoke(self, scope: Scope) -> bool:
        """A person spoke: the server's running pulse stops (True) and this conversation's exchanges with other
        personas end, each session suspended with a chronicle before the reply is written."""
        await self._socials.end_all(scope)
        return await self._pulses.interrupt(scope)


__all__ = ["Arrival", "Arrivals"]
