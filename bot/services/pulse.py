"""The autonomous pulse (seed 001): perceive, react, decide; then work in a branch's session and suspend it.

`meta_auto` (a playbook) looks and decides; this service gates the pulse (on, quiet home channel,
quiet hours, daily budget), carries out the decision in a task branch's session through
`branch_work`, and logs every decision. A person speaking in the server interrupts a running pulse:
its session ends with a chronicle (shielded from the cancellation) and the branch is suspended.
What the pulse's playbooks call back (perceive, record_wait) is `Autonomy`'s, so the playbooks need
nothing of this.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, time
from zoneinfo import ZoneInfo

from bot import logs
from bot.config import AutonomyConfig, quiet_span
from bot.metering import Meter, metered
from bot.pulse_scheduler import PulseScheduler
from bot.services.autonomy import Autonomy, place_of
from bot.services.branches import DiscordThreadBranches, current_session
from bot.services.playbooks import Playbooks
from bot.services.social import Socials
from bot.services.stelis import StelisThreads
from bot.services.tasks import Tasks
from bot.tools import FrontEnd, ToolError
from memory.errors import Failure
from memory.records import AutonomyEntry, AutonomyKind, Branch, Scope, Task
from memory.store import OtherServer, Store

log = logging.getLogger(__name__)

TURN_CALLS = 2  # a work turn: the work, then its assessment
QUIET_LOOKBACK = 20  # recent messages searched for the last one a person said in the home channel


@dataclass(frozen=True)
class PulseOutcome:
    place: str
    action: str  # skip, react, wait, create, resume, interrupted, error
    detail: str
    branch_id: str | None = None
    calls: int = 0
    tokens: int = 0


@dataclass(frozen=True)
class AutonomyStatus:
    config: AutonomyConfig
    home: Scope | None
    spent_calls: int
    spent_tokens: int
    last_pulse: AutonomyEntry | None
    running: bool


class Pulses:
    def __init__(self, store: Store, autonomy: Autonomy, stelis: StelisThreads, tasks: Tasks,
                 branches: DiscordThreadBranches, socials: Socials, playbooks: Playbooks,
                 front_end: Callable[[], FrontEnd | None], persona: str, clock: Callable[[], float]):
        self._store = store
        self._autonomy = autonomy
        self._stelis = stelis
        self._tasks = tasks
        self._branches = branches
        self._socials = socials
        self._playbooks = playbooks
        self.front_end = front_end  # the front end attached now (Discord), if any: it posts and opens threads
        self._persona = persona
        self._clock = clock
        self.running: dict[str, asyncio.Task[PulseOutcome]] = {}
        self.timers = PulseScheduler(self.pulse)  # started by the front end that runs the persona's own time
        self._working: dict[str, str] = {}  # place -> the branch a running pulse works in

    async def status(self, scope: Scope) -> AutonomyStatus:
        config = await self._autonomy.config(scope)
        place = place_of(scope)
        calls, tokens = await self._spent(scope, config)
        running = place in self.running and not self.running[place].done()
        return AutonomyStatus(config, await self._autonomy.home(scope), calls, tokens,
                              await self._autonomy.last_pulse(place), running)

    async def arm(self, scope: Scope) -> None:
        """Set this server's pulse timer from its settings (off: none)."""
        if self.timers.running:
            config = await self._autonomy.config(scope)
            self.timers.arm(place_of(scope), scope, enabled=config.enabled, minutes=config.interval_minutes,
                            jitter_minutes=config.jitter_minutes)

    def next_pulse(self, scope: Scope) -> float | None:
        when = self.timers.next_pulse(place_of(scope))
        return when.timestamp() if when else None

    # the pulse

    async def pulse(self, scope: Scope, *, force: bool = False) -> PulseOutcome:
        """One pulse in this scope's server (`force`: now, whatever the switch, timers and quiet say; the budget
        still holds). Runs as its own task, so a person speaking can interrupt it."""
        place = place_of(scope)
        if place in self.running and not self.running[place].done():
            return PulseOutcome(place, "skip", "a pulse is already running")
        with logs.tagged(guild=scope.guild_id, pulse=place):  # the pulse's task copies the tags
            task = asyncio.create_task(self._beat(scope, force), name=f"pulse {place}")
        self.running[place] = task
        try:
            await asyncio.wait({task})
        finally:
            if self.running.get(place) is task:
                del self.running[place]
        if task.cancelled():  # what it came to is in the log: the interruption, then the pulse's own line
            spent, said = await self._store.autonomy_log(self._persona, place, 2)
            return PulseOutcome(place, "interrupted", said.detail, spent.branch_id, spent.calls, spent.tokens)
        return task.result()

    async def pulse_now(self, scope: Scope) -> PulseOutcome:
        """A pulse now, whatever the switch, timer and quiet say (the daily budget still holds)."""
        return await self.pulse(scope, force=True)

    async def pulse_if_due(self, scope: Scope) -> PulseOutcome | None:
        """A pulse if autonomy is on and an interval has passed (the console's /idle)."""
        return await self.pulse(scope) if await self._autonomy.due(scope) else None

    async def configure(self, scope: Scope, key: str, value: object) -> object:
        """Change a server's autonomy setting (`enabled`, `home_channel`, `interval_minutes`, ...) and its timer."""
        typed = await self._autonomy.set(scope, key, value)
        await self.arm(scope)
        return typed

    async def interrupt(self, scope: Scope) -> bool:
        """A person spoke in this server: stop its running pulse now, and wait until the session is suspended."""
        task = self.running.get(place_of(scope))
        if task is None or task.done():
            return False
        task.cancel()
        await asyncio.wait({task})
        return True

    async def stop(self) -> None:
        """At shutdown: running pulses end as if interrupted (their sessions suspended)."""
        for task in list(self.running.values()):
            task.cancel()
        if self.running:
            await asyncio.wait(set(self.running.values()))

    async def _beat(self, scope: Scope, force: bool) -> PulseOutcome:
        place = place_of(scope)
        config = await self._autonomy.config(scope)
        home = await self._autonomy.home(scope)
        try:
            reason = "no home channel is set" if home is None else \
                await self._foreign(home) or await self._held_back(home, config, force)
        except OtherServer as exc:  # its conversation is another server's: nothing of it is read
            reason = exc.notice
        if reason is not None or home is None:
            await self._log(place, "skip", reason or "")
            return PulseOutcome(place, "skip", reason or "")
        calls, tokens = await self._spent(home, config)
        with metered(config.daily_calls - calls, config.daily_tokens - tokens) as meter:  # never past the budget
            try:
                outcome = await self._decide_and_act(home, config, meter)
            except asyncio.CancelledError:
                await asyncio.shield(self._interrupted(place, meter))
                raise
            except Failure as exc:
                log.warning("pulse in %s failed: %s", place, exc.notice)
                await self._log(place, "error", exc.notice)
                outcome = PulseOutcome(place, "error", exc.notice)
            finally:
                self._working.pop(place, None)
            await self._spent_on(place, outcome.action, outcome.branch_id, meter)
        return PulseOutcome(place, outcome.action, outcome.detail, outcome.branch_id, meter.calls, meter.tokens)

    async def _spent_on(self, place: str, action: str, branch_id: str | None, meter: Meter) -> None:
        """The pulse's own line in the log: what it came to, and its calls and tokens (the budget's sum)."""
        await self._store.log_autonomy(self._persona, place, "pulse", action, branch_id=branch_id,
                                       calls=meter.calls, tokens=meter.tokens)

    async def _foreign(self, home: Scope) -> str | None:
        """A home channel that is not this server's (a value stored before it was checked): no pulse at all."""
        front = self.front_end()
        if home.guild_id is None or front is None or not await front.strangers(home.guild_id, "channel",
                                                                               [home.channel_id or 0]):
            return None
        return f"the home channel {home.channel_id} is not a channel of this server"

    async def _held_back(self, home: Scope, config: AutonomyConfig, force: bool) -> str | None:
        """Why no pulse may run now, or None."""
        now = self._clock()
        if not force:
            if not config.enabled:
                return "autonomy is off here"
            if _in_quiet_hours(config, now):
                return f"quiet hours ({config.quiet_hours}, {config.timezone})"
            root = await self._stelis.root(home)
            spoken = [m for m in await self._store.tail(root.id, QUIET_LOOKBACK) if m.role == "user"]
            if spoken and now - spoken[-1].created_at < config.quiet_minutes * 60:
                return f"the home channel spoke less than {config.quiet_minutes} min ago"
        return self._over_budget(config, *await self._spent(home, config))

    def _over_budget(self, config: AutonomyConfig, calls: int, tokens: int) -> str | None:
        if calls >= config.daily_calls:
            return f"today's budget is spent: {calls} of {config.daily_calls} model calls"
        if tokens >= config.daily_tokens:
            return f"today's budget is spent: {tokens} of {config.daily_tokens} tokens"
        return None

    async def _spent(self, scope: Scope, config: AutonomyConfig) -> tuple[int, int]:
        return await self._store.autonomy_spent(self._persona, place_of(scope), self._day_start(config))

    def _chronicle_cost(self) -> int:
        """The most one chronicle call of a pulse's session costs: held back when the session starts."""
        settings = self._stelis.settings
        return settings.chunk_tokens + settings.chronicle_tokens

    def _day_start(self, config: AutonomyConfig) -> float:
        # The day in the store's clock, which stamped the spending (the console's /idle moves it too).
        now = datetime.fromtimestamp(self._store.clock(), ZoneInfo(config.timezone))
        return datetime.combine(now.date(), time(0), now.tzinfo).timestamp()

    async def _decide_and_act(self, home: Scope, config: AutonomyConfig, meter: Meter) -> PulseOutcome:
        place = place_of(home)
        done = await self._playbooks.run(home, "meta_auto", {})
        decision = done.outputs.get("decision") or {}
        action, reason = str(decision.get("action", "wait")), str(decision.get("reason", ""))
        if (read := _doable(action, decision)) != action:  # a small model's decision, left incomplete
            log.info("meta_auto chose %s without what it needs: taken as %s", action, read)
            action = read
            if action == "wait":
                return await self._waited(place, f"{reason} (it chose to start something but named nothing)")
        if action == "react":
            await self._log(place, "react", reason)
            return PulseOutcome(place, "react", reason)
        if action in ("resume", "create", "free") and not meter.reserve(1, self._chronicle_cost()):
            detail = f"{action} chosen, but today's budget has no room for a session and its chronicle"
            return await self._waited(place, detail)
        if action == "resume":
            try:
                branch = await self._resumed(home, str(decision.get("branch", "")))
            except ToolError as exc:  # an id a small model made up, or a branch not open here: nothing to take up
                return await self._waited(place, f"{reason} ({exc})")
            await self._log(place, "resume", f"{branch.label}: {reason}", branch.id)
            if branch.branch_type == "social":  # the exchange goes on as the other persona answers
                return PulseOutcome(place, "resume", f"{branch.label}: {await self._reach_out(home, branch)}",
                                    branch.id)
        elif action == "create":
            branch = await self._created(home, decision)
            await self._log(place, "create", f"{branch.label}: {reason}", branch.id)
        elif action == "free":  # seed 001's free action: a branch of its own, begun and ended when it chooses
            branch = await self._begun(home, decision)
            await self._log(place, "create", f"{branch.label} (free): {reason}", branch.id)
        else:  # wait: record_wait logged it
            return PulseOutcome(place, "wait", reason)
        self._working[place] = branch.id
        try:
            state = await self._work(home, branch, config, meter)
        except Failure:  # the session must not stay open: it ends with what chronicle can be made
            await self._suspend(branch.id)
            raise
        return PulseOutcome(place, action, f"{branch.label}: {state}", branch.id)

    async def _resumed(self, home: Scope, branch_id: str) -> Branch:
        not_open = ToolError(f"meta_auto chose to resume {branch_id!r}, which is not an open branch here")
        try:
            branch = await self._branches.visible(home, branch_id)
        except ToolError:
            raise not_open from None
        if branch.status == "completed":
            raise not_open
        if branch.branch_type == "social":
            return branch  # its session opens where the persona reaches out (_reach_out)
        session = await current_session(self._store, branch)
        if session is None or session.status != "active":
            await self._branches.resume(branch)  # a new session, opened by an anchor to the previous one
        found = await self._store.branch(branch.id)
        assert found is not None
        return found

    async def _created(self, home: Scope, decision: dict[str, object]) -> Branch:
        title = str(decision.get("title") or "").strip()[:100]
        goal = str(decision.get("goal") or "").strip()
        listed = decision.get("steps")
        steps = [str(s) for s in listed][:5] if isinstance(listed, list) else []
        front = self.front_end()
        thread_id = await front.open_work_thread(home, title) if front is not None else None
        task = await self._tasks.create(home, title, goal, steps, discord_thread_id=thread_id)
        branch = await self._store.branch(task.branch_id or "")
        assert branch is not None
        return branch

    async def _reach_out(self, home: Scope, branch: Branch) -> str:
        """Begin an exchange with the other persona of a social branch in the home channel: a new session there
        (or the one going on), the opening line kept in it and said in the channel, addressed to the other."""
        if not (branch.partner_persona or "").isdigit():
            raise ToolError(f"{branch.id} names no other persona to talk to")
        partner, name = int(branch.partner_persona or 0), branch.label.removeprefix("with ")
        session = await self._socials.session(home, partner, name)
        done = await self._playbooks.run(home, "reach_out", {"partner": name, "state": branch.brief_state or ""},
                                         run_id=session.run_id)
        opening = str(done.outputs.get("opening") or "").strip()
        front = self.front_end()
        if opening and front is not None:
            try:
                await front.post(home, f"<@{partner}> {opening}")
            except ToolError as exc:  # kept in the session all the same: the exchange is there when it answers
                log.warning("could not say the opening to %s: %s", name, exc.notice)
        return opening

    async def _begun(self, home: Scope, decision: dict[str, object]) -> Branch:
        title = str(decision.get("title") or "").strip()[:100]
        branch = await self._branches.create(home, "free", title, str(decision.get("reason") or "")[:200] or None)
        await self._branches.resume(branch)  # its first session, anchored in the home channel
        found = await self._store.branch(branch.id)
        assert found is not None
        return found

    async def _work(self, home: Scope, branch: Branch, config: AutonomyConfig, meter: Meter) -> str:
        """Turns of `branch_work` in the branch's session (within the session and daily budgets), its
        progress applied to the task; then the session ends with its chronicle: suspended, or completed."""
        task = await self._store.task(int(branch.task_id)) if branch.task_id else None
        brief = branch.brief_state or "just started"
        for _ in range(config.session_turns):
            if not meter.fits(TURN_CALLS, 0):
                break
            session = await current_session(self._store, await self._store.branch(branch.id))
            if session is None or session.status != "active":
                break  # closed from outside meanwhile
            args = {"label": branch.label, "goal": task.goal if task else branch.label,
                    "steps": _steps_text(task), "state": brief}
            done = await self._playbooks.run(home, "branch_work", args, run_id=session.run_id)
            await self._share(home, branch, str(done.outputs.get("work") or ""))
            assess = done.outputs.get("assess") or {}
            brief = str(assess.get("brief_state") or brief)[:200]
            if task is not None:
                task = await self._ticked(home, task, assess.get("steps_done"))
            if assess.get("next") == "finished":
                if task is not None:
                    await self._tasks.close(home, task.id, "done")
                await self._branches.update(home, branch.id, brief_state=f"done: {brief}"[:200], status="completed")
                await self._log(place_of(home), "suspend", f"{branch.label} finished: {brief}", branch.id)
                return f"finished: {brief}"
            if assess.get("next") != "continue":
                break
        await self._branches.update(home, branch.id, brief_state=brief, status="suspended")
        await self._log(place_of(home), "suspend", f"{branch.label}: {brief}", branch.id)
        return brief

    async def _ticked(self, home: Scope, task: Task, steps: object) -> Task:
        for step in steps if isinstance(steps, list) else []:
            if isinstance(step, int) and 1 <= step <= len(task.steps) and not task.steps[step - 1]["done"]:
                task = await self._tasks.update_step(home, task.id, step, True)
        return task

    async def _share(self, home: Scope, branch: Branch, text: str) -> None:
        """Work on a branch with a Discord thread is said there (it is already kept in the session)."""
        front = self.front_end()
        if branch.discord_thread_id is None or front is None or not text.strip():
            return
        try:
            await front.post(Scope(home.key, home.guild_id, home.channel_id, branch.discord_thread_id), text)
        except ToolError as exc:
            log.warning("could not post the work of %s in its thread: %s", branch.id, exc.notice)

    async def _interrupted(self, place: str, meter: Meter) -> None:
        """The pulse was cancelled: the branch it worked in is suspended (its session ends with a chronicle)."""
        branch_id = self._working.get(place)
        label = await self._suspend(branch_id) if branch_id is not None else None
        await self._log(place, "interrupt", f"a person spoke; {label} suspended" if label else "a person spoke",
                        branch_id)
        await self._spent_on(place, "interrupted", branch_id, meter)

    async def _suspend(self, branch_id: str) -> str | None:
        """Suspend a branch still active (its session ends with a chronicle); its label, if it was."""
        branch = await self._store.branch(branch_id)
        if branch is None or branch.status != "active":
            return None
        try:
            await self._branches.update(Scope(branch.scope_key, branch.guild_id, branch.channel_id), branch_id,
                                        brief_state=None, status="suspended")
        except Failure as exc:
            log.warning("could not suspend %s: %s", branch_id, exc.notice)
        return branch.label

    async def _log(self, place: str, kind: AutonomyKind, detail: str, branch_id: str | None = None) -> None:
        await self._store.log_autonomy(self._persona, place, kind, detail, branch_id=branch_id)

    async def _waited(self, place: str, why: str) -> PulseOutcome:
        """A pulse that chose, or came to, nothing to do: logged with why."""
        why = why.strip()
        await self._log(place, "wait", why)
        return PulseOutcome(place, "wait", why)



def _in_quiet_hours(config: AutonomyConfig, now: float) -> bool:
    span = quiet_span(config.quiet_hours) if config.quiet_hours else None
    if span is None:
        return False
    local = datetime.fromtimestamp(now, ZoneInfo(config.timezone))
    minute = local.hour * 60 + local.minute
    start, end = span
    return start <= minute < end if start <= end else minute >= start or minute < end


def _steps_text(task: Task | None) -> str:
    steps = task.steps if task is not None else []
    return "\n".join(f"{i}. [{'x' if s['done'] else ' '}] {s['text']}" for i, s in enumerate(steps, 1)) \
        or "(no steps: decide them as you go)"


def _doable(action: str, decision: dict[str, object]) -> str:
    """The action a decision can be carried out as: a task without a goal is begun as a free branch of that title
    (seed 001's action without a plan), one with no title at all is a wait; anything else as chosen."""
    if action not in ("create", "free"):
        return action
    if not str(decision.get("title") or "").strip():
        return "wait"
    if action == "create" and not str(decision.get("goal") or "").strip():
        return "free"
    return action
