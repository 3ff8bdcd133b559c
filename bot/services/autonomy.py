"""Autonomy's settings, its log, and what the pulse's playbooks see of a server (perceive, record_wait).

The pulse itself is `bot/services/pulse.py`: it runs the playbooks, which call back into this.
"""

from __future__ import annotations

from collections.abc import Callable

from bot.config import AutonomyConfig, Where
from bot.services.effective_settings import EffectiveSettings
from bot.services.stelis import StelisThreads
from bot.services.tasks import Tasks
from memory import dates
from memory.records import AutonomyEntry, Scope, Task
from memory.store import Store

PERCEIVED_MESSAGES = 30  # what perceive shows at most, newest
PERCEIVED_CHARS = 240  # of one message
FIRST_LOOK_SECONDS = 86_400.0  # a first pulse looks back one day


def place_of(scope: Scope) -> str:
    """What a pulse belongs to: a server, or outside one the conversation (the console)."""
    return f"guild:{scope.guild_id}" if scope.guild_id is not None else scope.key


def settings_level(scope: Scope) -> tuple[Where, int]:
    """Where autonomy settings of this scope's server live: the server's, or outside one its conversation's."""
    return ("guild", scope.guild_id) if scope.guild_id is not None else ("channel", scope.channel_id or 0)


class Autonomy:
    def __init__(self, store: Store, settings: EffectiveSettings, stelis: StelisThreads, tasks: Tasks, persona: str,
                 clock: Callable[[], float]):
        self._store = store
        self._settings = settings
        self._stelis = stelis
        self._tasks = tasks
        self._persona = persona
        self._clock = clock

    # settings and the log

    async def config(self, scope: Scope) -> AutonomyConfig:
        return (await self._settings.effective(scope.guild_id, None if scope.guild_id else scope.channel_id)).autonomy

    async def home(self, scope: Scope) -> Scope | None:
        """The conversation autonomous sessions hang under: the server's home channel (the console: itself)."""
        if scope.guild_id is None:
            return Scope(scope.key, None, scope.channel_id)
        channel = (await self.config(scope)).home_channel
        return Scope.channel(scope.guild_id, channel) if channel else None

    async def set(self, scope: Scope, key: str, value: object) -> object:
        """Change an autonomy setting of this server (validated; `key` without `autonomy.`), and its timer."""
        return await self._settings.set(*settings_level(scope), f"autonomy.{key}", value, scope.guild_id)

    async def last_pulse(self, place: str) -> AutonomyEntry | None:
        found = await self._store.autonomy_log(self._persona, place, 1, kind="pulse")
        return found[0] if found else None

    async def log(self, scope: Scope, limit: int = 20) -> list[AutonomyEntry]:
        return await self._store.autonomy_log(self._persona, place_of(scope), limit)

    async def due(self, scope: Scope) -> bool:
        """Has an interval passed since the server's last pulse (the console's /idle asks; Discord has timers)?"""
        config = await self.config(scope)
        last = await self.last_pulse(place_of(scope))
        return config.enabled and (last is None or self._clock() - last.at >= config.interval_minutes * 60)

    # what tools see

    async def perceive(self, scope: Scope) -> str:
        """What was said in the server since the last pulse, and the open tasks: what `perceive` returns."""
        place = place_of(scope)
        last = await self.last_pulse(place)
        since = last.at if last else self._clock() - FIRST_LOOK_SECONDS
        seen = await self._stelis.seen_from(scope)
        said = await self._store.messages_since(self._persona, seen.scope_keys, since, PERCEIVED_MESSAGES)
        lines = [f"Now: {dates.now_text(self._clock())}. Since your last look ({dates.now_text(since)}): "
                 + (f"{len(said)} message(s)." if said else "nothing was said.")]
        where: dict[int, str] = {}
        for message in said:
            if message.thread_id not in where:
                where[message.thread_id] = await self._where(message.thread_id)
            text = message.content if len(message.content) <= PERCEIVED_CHARS \
                else message.content[:PERCEIVED_CHARS - 1] + "…"
            lines.append(f"[{where[message.thread_id]}] {message.author_name or message.role}: {text}")
        open_tasks = [t for t in await self._tasks.of(scope) if t.status == "open"]
        lines.append("Open tasks: " + ("; ".join(f"#{t.id} {t.title} ({_progress(t)})" for t in open_tasks)
                                       if open_tasks else "none."))
        return "\n".join(lines)

    async def record_wait(self, scope: Scope, reason: str) -> str:
        await self._store.log_autonomy(self._persona, place_of(scope), "wait", reason)
        return "noted: waiting for now"

    async def _where(self, thread_id: int) -> str:
        thread = await self._store.thread(thread_id)
        if thread.is_root:
            return f"channel {thread.channel_id}" if thread.guild_id is not None else "here"
        return f"thread {thread.label or thread.id}"


def _progress(task: Task) -> str:
    return f"{sum(1 for s in task.steps if s['done'])}/{len(task.steps)} steps" if task.steps else "no steps"
