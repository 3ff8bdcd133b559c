"""The console front end: a terminal chat with the persona on the same engine as Discord."""

from __future__ import annotations

import asyncio
import difflib
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from bot.character_card import card_file
from bot.config import OVERRIDABLE, ConfigError, shown_value
from bot.dashboard.access import CONSOLE
from bot.engine import Engine, ReplyFailed, ReplyUnsaved
from bot.logs import Held
from bot.report import (
    autonomy_lines,
    autonomy_log_lines,
    branch_detail_lines,
    branch_line,
    branch_list_lines,
    config_lines,
    context_bars,
    context_heading,
    history_line,
    memory_lines,
    outcome_lines,
    pause_text,
    pin_text,
    playbook_lines,
    playbook_list_lines,
    problem_lines,
    pulse_text,
    recall_lines,
    result_lines,
    rollback_text,
    runs_lines,
    set_text,
    task_detail_lines,
    task_lines,
    tree_lines,
    usage_lines,
    written_text,
)
from bot.tools import ToolError
from memory.anchors import thread_ref
from memory.errors import Failure
from memory.records import BranchStatus, Scope, TaskStatus
from memory.short_term import Outcome
from memory.store import StoreError
from memory.threads import Run

if TYPE_CHECKING:  # a terminal's line editor (prompt_toolkit) is imported only where there is a terminal
    from bot.dashboard.server import Dashboard
    from bot.line_editor import LineEditor

HELP = """Commands:
  /thread new <label>   start a Stelis working thread under the current one
  /thread end           end the current thread (a chronicle is written) and return to its parent
  /thread abort         abort the current thread (a partial chronicle when possible)
  /thread list          the threads of this conversation
  /tree                 the Stelis tree with status, depth and window sizes
  /context              the token breakdown of the next request
  /recall <words>       what the persona can recall about something (dates, speakers, sources)
  /memory               this conversation's memory, one line per version (/memory full: every text)
  /memory history       every short-term version
  /memory pin <fact>    a fact summaries must keep (/memory unpin <fact> to drop it)
  /memory edit <text>   replace the current short-term memory (a new version; the old one is hidden)
  /memory rollback <v>  make version v current again (a new version; those after v are hidden)
  /memory regenerate    write a new version now
  /memory pause|resume  stop or restart automatic updates here
  /config               the settings in effect here, and their overrides
  /config set <k> <v>   override a setting for this conversation (/config reset <k> to remove it)
  /persona              the persona card here (/persona import <card.json|png>: a SillyTavern or chub
                        character card becomes it; /persona export <file.json>: it as a V2 card)
  /playbooks            the playbooks this persona can run (/playbooks show <name> for one)
  /playbooks run <name> [words | JSON]     run one here, node by node (/playbooks runs: what ran)
  /playbooks check [file]                  the static check of a file, or of what did not load
  /tasks                this conversation's tasks (/tasks show <n>, /tasks close <n> [abandoned])
  /tasks create <title> | <goal> | <step>; <step>   a task with its own branch and session
  /branches             branches of activity here (/branches show|suspend|resume|complete <id>)
  /branches create <label> [| <where it stands>]   a free branch the persona may take up in its own time
  /autonomy             the persona's own time: on|off, interval <min>, quiet <HH:MM-HH:MM|none>,
                        budget <calls> [tokens], log, pulse-now (the console is its own home channel)
  /usage                model calls, tokens and estimated cost here, today and this month
  /dashboard            a one-time link to this conversation's memory dashboard (dashboard.enabled)
  /idle <seconds>       let time pass (a demo clock): memory updates and pulses that fall due run
  /retry                ask for a reply again (after a failure)
  /help                 this list
  /quit                 leave (Ctrl-D, or Ctrl-C twice, works too; Ctrl-C alone clears the line)
Anything else is a message to the persona: Alt-Enter starts a new line in it, Tab completes commands, Ctrl-R
searches what you typed before."""

def console_run_id(scope: Scope) -> str:
    """One run per console scope, so Stelis threads left open are resumed, not swept, next time."""
    return f"console-run:{scope.key}"


MAX_IDLE_SECONDS = 366 * 86_400.0
COMMANDS = ("/thread", "/tree", "/context", "/recall", "/memory", "/config", "/persona", "/playbooks", "/tasks",
            "/branches", "/autonomy", "/usage", "/dashboard", "/idle", "/retry", "/help", "/quit")


def completions(playbooks: Iterable[str] = (), branches: Iterable[str] = (),
                settings: Iterable[str] = ()) -> dict[str, Any]:
    """What Tab completes: the commands, their words, and the names that change (playbooks, branch ids, keys)."""
    names = dict.fromkeys(playbooks)
    ids = dict.fromkeys(branches)
    keys = dict.fromkeys(settings)
    words: dict[str, Any] = {
        "/thread": dict.fromkeys(("new", "end", "abort", "list")),
        "/memory": dict.fromkeys(("show", "full", "history", "pin", "unpin", "edit", "rollback", "regenerate",
                                  "pause", "resume")),
        "/config": {"show": None, "set": keys, "reset": keys},
        "/persona": dict.fromkeys(("show", "import", "export")),
        "/playbooks": {"list": None, "show": names, "run": names, "runs": None, "check": None},
        "/tasks": dict.fromkeys(("list", "show", "create", "close")),
        "/branches": {"list": None, "create": None, **{action: ids for action in ("show", "suspend", "resume",
                                                                                 "complete")}},
        "/autonomy": dict.fromkeys(("status", "on", "off", "interval", "quiet", "budget", "log", "pulse-now")),
    }
    return {command: words.get(command) for command in COMMANDS}


async def read_line(stream: TextIO) -> str | None:
    """A line from a blocking stream without blocking the loop; None at end of input.

    A daemon thread, not the default executor: on Ctrl-C the process must not wait for Enter.
    """
    loop = asyncio.get_running_loop()
    done: asyncio.Future[str] = loop.create_future()

    def read() -> None:
        try:
            line = stream.readline()
        except (OSError, ValueError):  # closed while waiting
            line = ""
        def deliver() -> None:
            if not done.done():
                done.set_result(line)

        loop.call_soon_threadsafe(deliver)

    threading.Thread(target=read, name="console-stdin", daemon=True).start()
    return (await done) or None


@dataclass
class Console:
    engine: Engine
    stdin: TextIO
    stdout: TextIO
    user_name: str
    scope: Scope = field(default_factory=Scope.console)
    run: Run | None = None
    editor: LineEditor | None = None  # a terminal's line editor; None reads plain lines (piped input)
    held: Held | None = None  # warnings held for one status line, instead of printed over a reply
    dashboard: Dashboard | None = None  # the web dashboard, when config turns it on

    @property
    def interactive(self) -> bool:
        return self.stdin.isatty()

    async def start(self) -> Run:
        if self.run is None:
            self.run = await self.engine.stelis.new_run(self.scope, console_run_id(self.scope))
            if self.run.stack:
                self._say(f"(resuming Stelis thread {thread_ref(self.run.current)}, left open last time; "
                          "/thread end to close it)")
        return self.run

    async def post(self, scope: Scope, text: str) -> None:
        """The persona says something on its own (a tool, a playbook): printed as its line."""
        self._say(f"{self.engine.persona}: {text}")

    async def open_thread(self, scope: Scope, name: str) -> str:
        raise ToolError("the console has no Discord threads; /thread new opens a Stelis thread here")

    async def open_work_thread(self, scope: Scope, name: str) -> int | None:
        return None  # the console's tasks work in their Stelis sessions, shown by /tree and /branches

    async def strangers(self, guild_id: int, kind: str, ids: list[int]) -> list[int]:
        return ids  # the console is in no server

    async def run_loop(self) -> int:
        self.engine.attach(self)
        run = await self.start()
        if self.interactive:
            await self._greet(run)
        while True:
            line = await self._read_line()
            if line is None:
                self._leaving(run)
                return 0
            line = line.strip()  # a pasted block stays one message: its inner newlines are kept
            if not line:
                continue
            if line.startswith("//"):  # a message that starts with a slash: "//etc" says "/etc"
                line = line[1:]
            elif line.startswith("/"):
                if not await self.command(line):
                    self._leaving(run)
                    return 0
                continue
            try:
                await self.engine.conversations.hear(self.scope, line, author_name=self.user_name,
                                                     thread_id=run.current)
            except StoreError as exc:  # disk full, read-only: the line is still on screen to send again
                self._say(f"(!) Not saved: {exc}. Free some space or fix the data directory, then send it again.")
                continue
            await self._reply()

    def _leaving(self, run: Run) -> None:
        if run.stack:
            self._say(f"(!) You are leaving inside Stelis thread {thread_ref(run.current)}: it stays open, and the "
                      "next console session resumes it.")

    async def command(self, line: str) -> bool:
        """Run a slash command; False means leave."""
        name, _, rest = line.partition(" ")
        rest = rest.strip()
        try:
            if name in ("/quit", "/exit"):
                return False
            if name == "/help":
                self._say(HELP)
            elif name == "/retry":
                await self._retry()
            elif name == "/thread":
                await self._thread(rest)
            elif name == "/tree":
                await self._tree()
            elif name == "/context":
                await self._context()
            elif name == "/recall":
                await self._recall(rest)
            elif name == "/memory":
                await self._memory(rest)
            elif name == "/idle":
                await self._idle(rest)
            elif name == "/config":
                await self._config(rest)
            elif name == "/playbooks":
                await self._playbooks(rest)
            elif name == "/tasks":
                await self._tasks(rest)
            elif name == "/branches":
                await self._branches(rest)
            elif name == "/autonomy":
                await self._autonomy(rest)
            elif name == "/persona":
                await self._persona(rest)
            elif name == "/dashboard":
                self._dashboard()
            elif name == "/usage":
                spending = self.engine.spending
                spent = await spending.of(None, days=31)  # the console is in no server
                self._lines(usage_lines(spent, spending.today(), spending.month_start()))
            else:
                near = difflib.get_close_matches(name, [*COMMANDS, "/exit"], n=1)
                self._say(f"Unknown command {name}." + (f" Did you mean {near[0]}?" if near else "")
                          + " Type /help for the list.")
        except StoreError:
            raise  # the database itself: the session cannot go on as if nothing happened
        except Failure as exc:
            self._say(f"(!) {exc.notice}")
        return True

    def _dashboard(self) -> None:
        if self.dashboard is None:
            self._say("The dashboard is off: set dashboard.enabled: true in config.yaml and start again.")
            return
        minutes = self.dashboard.config.sign_in_minutes
        self._say(f"Open this link (it works once, for {minutes} minutes): "
                  f"{self.dashboard.sign_in_link(CONSOLE, 0)}")

    async def _thread(self, rest: str) -> None:
        run = await self.start()
        action, _, label = rest.partition(" ")
        if action == "new":
            if not label.strip():
                self._say("Usage: /thread new <label>")
                return
            thread = await self.engine.stelis.start(run, label)
            self._say(f"Started {thread_ref(thread.id)} \"{thread.label}\" at depth {thread.depth}. "
                      "Messages now go to this thread; /thread end to finish it.")
        elif action == "end":
            if not run.stack:
                self._say("(!) no Stelis thread is active in this run: you are in the main conversation.")
                return
            self._say("Ending the thread and writing its chronicle...")
            thread = await self.engine.stelis.end(run)
            self._say(f"Ended {thread_ref(thread.id)} ({thread.status}). Chronicle:\n"
                      f"{thread.chronicle_summary or '(none)'}")
        elif action == "abort":
            thread = await self.engine.stelis.abort(run)
            self._say(f"Aborted {thread_ref(thread.id)}.")
        elif action == "list":
            await self._tree()
        else:
            self._say("Usage: /thread new <label> | end | abort | list")

    async def _tree(self) -> None:
        run = await self.start()
        for line in tree_lines(await self.engine.stelis.tree(run.root_id), run.current):
            self._say(line)

    async def _context(self) -> None:
        run = await self.start()
        assembly = await self.engine.conversations.context(run.current, calls=False)
        total = self.engine.config.llm.context_tokens
        self._say(context_heading(run.current, assembly.parts, total, assembly.window_budget))
        self._lines(context_bars(assembly.parts, total))

    async def _recall(self, query: str) -> None:
        if not query:
            self._say("Usage: /recall <words>, for example /recall calculator deadline")
            return
        for line in recall_lines(query, await self.engine.archive.recall(self.scope, query)):
            self._say(line)

    async def _memory(self, rest: str) -> None:
        action, _, arg = rest.partition(" ")
        arg = arg.strip()
        engine = self.engine
        if action in ("", "show", "full"):
            view = await engine.admin.view(self.scope)
            self._lines(memory_lines(view, engine.clock(), full=action == "full"))
            if not (view.long_term or view.short_term):
                self._say("Talk a little, then /idle 7200 or /memory regenerate.")
        elif action == "history":
            for record in await engine.admin.history(self.scope):
                self._say(history_line(record))
        elif action in ("pin", "unpin"):
            done = await engine.admin.pin(self.scope, arg, pinned=action == "pin")
            self._say(pin_text(arg, action == "pin", done))
        elif action == "edit":
            self._say(written_text(await engine.admin.edit(self.scope, arg)))
        elif action == "rollback":
            if not (arg.isascii() and arg.isdecimal()):  # "²" is a digit to str.isdigit
                self._say("Usage: /memory rollback <version number>")
                return
            self._say(rollback_text(int(arg), await engine.admin.rollback(self.scope, int(arg))))
        elif action == "regenerate":
            self._say("Writing a new short-term memory...")
            self._outcome(await engine.admin.regenerate(self.scope))
        elif action in ("pause", "resume"):
            changed = await engine.admin.pause(self.scope, action == "pause")
            self._say(pause_text(action == "pause", "here", changed))
        else:
            self._say("Usage: /memory [show | full | history | pin <fact> | unpin <fact> | edit <text> | "
                      "rollback <v> | regenerate | pause | resume]")

    async def _config(self, rest: str) -> None:
        """The console is one conversation: its overrides are its channel's (channel 0, never a Discord one)."""
        action, _, arg = rest.partition(" ")
        key, _, value = arg.strip().partition(" ")
        channel = self.scope.channel_id or 0
        if action in ("", "show"):
            for line in config_lines(await self.engine.settings.shown(self.scope.guild_id, channel), "here"):
                self._say(line)
        elif action == "set" and key and value.strip():
            try:
                stored = await self.engine.settings.set("channel", channel, key, value.strip())
            except ConfigError as exc:
                self._say(f"Not set: {'; '.join(exc.problems)}")
                return
            self._say(f"Set {key} = {shown_value(stored)} here.")
        elif action == "reset" and key:
            removed = await self.engine.settings.reset("channel", channel, key)
            self._say(f"Override of {key} removed." if removed else f"{key} had no override here.")
        else:
            self._say("Usage: /config [show | set <key> <value> | reset <key>]")

    async def _persona(self, rest: str) -> None:
        """The persona card here: shown, imported from a character card file, exported as one."""
        action, _, arg = rest.partition(" ")
        path, channel = Path(arg.strip()), self.scope.channel_id or 0
        if action in ("", "show"):
            effective = await self.engine.settings.effective(self.scope.guild_id, channel)
            self._say(f"{effective.persona.name}\n{effective.persona.card}")
        elif action == "import" and arg.strip():
            try:
                data = await asyncio.to_thread(path.read_bytes)
            except OSError as exc:
                self._say(f"Not changed: {path} cannot be read ({exc.strerror or exc}).")
                return
            try:
                character = await self.engine.settings.import_character("channel", channel, data, path.name)
            except ConfigError as exc:
                self._say(f"Not changed: {'; '.join(exc.problems)}")
                return
            self._say(f"Persona card updated here from {character.name}'s character card; /persona shows it.")
        elif action == "export" and arg.strip():
            effective = await self.engine.settings.effective(self.scope.guild_id, channel)
            text = card_file(effective.persona.name, effective.persona.card)
            await asyncio.to_thread(path.write_text, text, "utf-8")
            self._say(f"Wrote {effective.persona.name}'s character card (V2) to {path}.")
        else:
            self._say("Usage: /persona [show | import <card.json or card.png> | export <file.json>]")

    async def _playbooks(self, rest: str) -> None:
        action, _, arg = rest.partition(" ")
        name, _, raw = arg.strip().partition(" ")
        engine = self.engine
        if action in ("", "list"):
            self._lines(playbook_list_lines(engine.playbooks.library))
        elif action == "show" and name in engine.playbooks.library:
            self._lines(playbook_lines(engine.playbooks.library[name]))
        elif action == "check":
            path = arg.strip()
            self._lines(problem_lines(engine.playbooks.check(Path(path)) if path else engine.playbooks.problems))
        elif action == "runs":
            self._lines(runs_lines(await engine.playbooks.runs(self.scope), engine.clock()))
        elif action == "run" and name:
            run = await self.start()
            done = await engine.playbooks.run(self.scope, name, raw, run_id=run.id,
                                             progress=lambda step: self._say(f"... {step}"))
            self._lines(result_lines(name, done.outputs))
        else:
            self._say("Usage: /playbooks [list | show <name> | check [file] | run <name> [words or a JSON object] "
                      "| runs]")

    async def _tasks(self, rest: str) -> None:
        action, _, arg = rest.partition(" ")
        engine, arg = self.engine, arg.strip()
        if action in ("", "list"):
            self._lines(task_lines(await engine.tasks.of(self.scope)))
        elif action == "show" and arg.isdecimal():
            self._lines(task_detail_lines(await engine.tasks.get(self.scope, int(arg))))
        elif action == "create" and arg.count("|") >= 1:
            title, goal, *steps = (part.strip() for part in arg.split("|"))
            task = await engine.tasks.create(self.scope, title, goal,
                                            [s for s in (steps[0].split(";") if steps else [])])
            self._say(f"Task #{task.id} created, with its branch {task.branch_id} and a session.")
        elif action == "close" and arg.split(" ")[0].isdecimal():
            number, _, how = arg.partition(" ")
            status: TaskStatus = "abandoned" if how.strip() == "abandoned" else "done"
            task = await engine.tasks.close(self.scope, int(number), status)
            self._say(f"Task #{task.id} is {task.status}; its session ended with a chronicle.")
        else:
            self._say("Usage: /tasks [list | show <n> | create <title> | <goal> | <step>; <step> | "
                      "close <n> [abandoned]]")

    async def _branches(self, rest: str) -> None:
        action, _, branch = rest.partition(" ")
        branch = branch.strip()
        statuses: dict[str, BranchStatus] = {"suspend": "suspended", "resume": "active", "complete": "completed"}
        if action in ("", "list"):
            self._lines(branch_list_lines(await self.engine.branches.of(self.scope)))
        elif action in statuses and branch:
            found = await self.engine.branches.update(self.scope, branch, status=statuses[action])
            self._say(branch_line(found))
        elif action == "show" and branch:
            detail = await self.engine.branches.detail(self.scope, branch)
            self._lines(branch_detail_lines(detail) if detail else [f"There is no branch {branch!r} here."])
        elif action == "create" and branch:
            label, _, brief = branch.partition("|")
            made = await self.engine.branches.create(self.scope, "free", label, brief.strip() or None)
            self._say(branch_line(made) + " (a pulse, or /branches resume, opens its first session)")
        else:
            self._say("Usage: /branches [list | show <id> | create <label> [| <brief>] | suspend <id> | resume <id> "
                      "| complete <id>]")

    async def _autonomy(self, rest: str) -> None:
        action, _, arg = rest.partition(" ")
        words, engine = arg.split(), self.engine
        changes: dict[str, dict[str, object]] = {
            "on": {"enabled": True}, "off": {"enabled": False},
            "interval": {"interval_minutes": words[0]} if words else {},
            "quiet": {"quiet_hours": "" if words and words[0] == "none" else words[0]} if words else {},
            "budget": {"daily_calls": words[0], **({"daily_tokens": words[1]} if len(words) > 1 else {})}
            if words else {},
        }
        if action in ("", "status"):
            status = await engine.pulses.status(self.scope)
            self._lines(autonomy_lines(status, None, engine.clock()))
        elif action == "log":
            self._lines(autonomy_log_lines(await engine.autonomy.log(self.scope), engine.clock()))
        elif action == "pulse-now":
            self._say(pulse_text(await engine.pulses.pulse_now(self.scope)))
        elif changes.get(action):
            for key, value in changes[action].items():
                stored = await engine.pulses.configure(self.scope, key, value)
                self._say(set_text(f"autonomy.{key}", stored, "this conversation"))
        else:
            self._say("Usage: /autonomy [status | on | off | interval <minutes> | quiet <HH:MM-HH:MM|none> | "
                      "budget <calls> [tokens] | log | pulse-now]")

    def _lines(self, lines: list[str]) -> None:
        for line in lines:
            self._say(line)

    async def _idle(self, rest: str) -> None:
        try:
            seconds = float(rest)
        except ValueError:
            self._say("Usage: /idle <seconds>, for example /idle 7200")
            return
        if not (0 < seconds <= MAX_IDLE_SECONDS):  # also refuses nan and inf
            self._say(f"Usage: /idle <seconds> with a number from 1 to {MAX_IDLE_SECONDS:.0f} (a year)")
            return
        self.engine.clock.advance(seconds)
        self._say(f"(time passes: {seconds:.0f} s)")
        outcomes = await self.engine.memory.run_due()
        for outcome in outcomes:
            self._outcome(outcome)
        if not outcomes:
            self._say("(no memory update was due)")
        pulse = await self.engine.pulses.pulse_if_due(self.scope)
        if pulse is not None:
            self._say(f"({pulse_text(pulse)})")

    def _outcome(self, outcome: Outcome) -> None:
        for line in outcome_lines(outcome, detail=True):
            self._say(line)

    async def _retry(self) -> None:
        run = await self.start()
        last = await self.engine.conversations.last_message(run.current)
        if last is None or last.role == "assistant":
            self._say("Nothing to retry: the last message already has its reply. Say something new.")
            return
        await self._reply()

    async def _reply(self) -> None:
        run = await self.start()
        self.stdout.write(f"{self.engine.persona}: ")
        try:
            await self.engine.conversations.reply(run.current, on_text=self._stream)
        except ReplyFailed as exc:
            self.stdout.write(f"(no reply: {exc.notice} Your message is kept; /retry to ask again.)")
        except ReplyUnsaved as exc:
            self.stdout.write(f"\n(!) {exc.notice}")
        self.stdout.write("\n")
        self.stdout.flush()

    def _stream(self, piece: str) -> None:
        self.stdout.write(piece)
        self.stdout.flush()

    async def _greet(self, run: Run) -> None:
        remembered = await self.engine.conversations.message_count(run.root_id)
        self._say(
            f"Stelis console: chatting with {self.engine.persona} on the {self.engine.model_name} model"
            f" ({remembered} message(s) remembered in {self.engine.config.database_name}). /help for commands,"
            " /quit to leave; //text sends a message that starts with a slash."
        )

    async def _read_line(self) -> str | None:
        self._status()
        where = "" if self.run is None or not self.run.stack else f" [{thread_ref(self.run.current)}]"
        if self.editor is not None:
            branches = [str(b.id) for b in await self.engine.branches.of(self.scope)]
            self.editor.complete(completions(self.engine.playbooks.library, branches, OVERRIDABLE))
            line = await self.editor.read(f"{self.user_name}{where}> ")
            if self.editor.hint:
                self._say(self.editor.hint)
            return line
        if self.interactive:
            self.stdout.write(f"{self.user_name}{where}> ")
            self.stdout.flush()
        return await read_line(self.stdin)

    def _status(self) -> None:
        """Warnings since the last line, as one line (the details are in the log file)."""
        records = self.held.take() if self.held is not None else []
        if records:
            self._say(f"(!) {len(records)} warning(s), details in {self.engine.config.data_dir / 'stelis.log'}; "
                      f"the last: {records[-1].getMessage()[:160]}")

    def _say(self, text: str) -> None:
        self.stdout.write(text + "\n")
        self.stdout.flush()
