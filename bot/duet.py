"""`python -m bot duet OTHER_CONFIG`: two personas talk in one shared conversation, without Discord.

Each persona keeps its own database and sees the other as a partner: every exchange is a new session
of its social branch, anchored in the shared conversation, ended with a chronicle (seed 001). What the
run prints is what each persona now remembers of the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TextIO

from bot.clock import Clock
from bot.config import Config
from bot.engine import Arrival, Engine
from bot.providers.offline import OfflineLLM
from memory.errors import Failure
from memory.records import Scope

PLACE = Scope.channel(1, 1)  # the shared conversation: one server, one channel, in each persona's database
IDS = (1, 2)  # the two personas as each other's partners


class DuetError(Failure):
    """Two configs that cannot talk together (the same persona, or the same database)."""


@dataclass
class Voice:
    engine: Engine
    partner_id: int
    partner: str


async def duet(first: Config, second: Config, out: TextIO, *, turns: int, exchanges: int, opening: str,
               live: bool = False, clock: Clock | None = None) -> None:
    """Run `exchanges` exchanges of at most `turns` turns each; print them and what each persona keeps."""
    if first.persona.name == second.persona.name:
        raise DuetError(f"both configs are the persona {first.persona.name!r}: give the second another name")
    if first.database_name == second.database_name or (
            first.database.url is None and first.database_path.resolve() == second.database_path.resolve()):
        raise DuetError(f"both configs use {first.database_name}: give the second its own data_dir or database")
    a = await Engine.open(first, None if live else OfflineLLM(), clock)
    try:
        b = await Engine.open(second, None if live else OfflineLLM(), clock)
    except BaseException:
        await a.close()
        raise
    voices = (Voice(a, IDS[1], b.persona), Voice(b, IDS[0], a.persona))
    try:
        for voice in voices:
            await voice.engine.socials.prepare(PLACE, {voice.partner_id: voice.partner})
        for n in range(exchanges):
            out.write(f"--- exchange {n + 1}\n")
            await _exchange(voices, out, turns, opening)
        for voice in voices:
            await _remembered(voice, out)
    finally:
        await b.close()
        await a.close()


async def _exchange(voices: tuple[Voice, Voice], out: TextIO, turns: int, opening: str) -> None:
    """The first voice opens; each then hears the other in its session with it and answers, turn by turn."""
    first = voices[0]
    session = await first.engine.socials.session(PLACE, first.partner_id, first.partner)
    await first.engine.conversations.hear(PLACE, opening, role="assistant", author_name=first.engine.persona,
                                          thread_id=session.id)
    out.write(f"{first.engine.persona}: {opening}\n")
    said, speaker = opening, 0
    for _ in range(turns):
        listener = voices[1 - speaker]
        answered = await _turn(listener, said)
        if answered is None:
            break
        said = answered
        out.write(f"{listener.engine.persona}: {said}\n")
        speaker = 1 - speaker
    for voice in voices:
        await voice.engine.socials.end(PLACE, voice.partner_id)


async def _turn(listener: Voice, said: str) -> str | None:
    """The listener hears `said` in its session with the speaker and answers it as a persona's message in Discord
    is answered: while the exchange has turns left (then it ends). Its answer, or None."""
    heard = await listener.engine.arrivals.receive(PLACE, Arrival(said, listener.partner, listener.partner_id,
                                                                  persona=True))
    if heard is None:
        return None
    replies: list[str] = []

    async def answer() -> None:
        replies.append((await listener.engine.conversations.reply(heard.thread_id)).content)

    answered = await listener.engine.socials.answer_turn(PLACE, listener.partner_id, heard.thread_id, answer)
    return replies[0] if answered else None


async def _remembered(voice: Voice, out: TextIO) -> None:
    engine = voice.engine
    for branch in await engine.branches.of(PLACE, kind="social"):
        detail = await engine.branches.detail(PLACE, branch.id)
        sessions = detail.sessions if detail else []
        out.write(f"{engine.persona} — branch {branch.label} [{branch.status}], {len(sessions)} session(s); "
                  f"where it stands: {branch.brief_state}\n")
