"""Plain-text renderings shared by the console and the slash commands."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from bot.config import OVERRIDABLE, masked_dump, shown_value
from bot.playbooks.checker import Problem
from bot.playbooks.model import LLMNode, Playbook
from bot.services.playbooks import RunView
from bot.services.pulse import AutonomyStatus, PulseOutcome
from bot.services.spending import Spent
from bot.services.views import BranchDetail, MemoryView, SettingsView, TreeRow
from memory.anchors import thread_ref
from memory.dates import day_line
from memory.layers import covered_days
from memory.recall import Hit
from memory.records import AutonomyEntry, Branch, MemoryRecord, Task
from memory.short_term import Outcome

DAY_HEADER = re.compile(r"^\[[^\]]*\d{4}\]$")  # a summary's "[8 May 2023]" lines

BAR_WIDTH = 40
RESULT_CHARS = 1_500  # of a playbook's result, shown


def tree_lines(rows: list[TreeRow], current: int | None = None) -> list[str]:
    lines = []
    for row in rows:
        t = row.thread
        name = "main conversation" if t.is_root else (t.label or "")
        extra = f", parent keeps {row.protected} protected" if row.protected else ""
        here = " <- you are here" if t.id == current else ""
        lines.append(f"{'  ' * t.depth}{thread_ref(t.id)} {name} [{t.status}] depth {t.depth}, "
                     f"window {row.window}{extra}{here}")
    return lines


def context_bars(parts: dict[str, int], total: int) -> list[str]:
    """One bar per part against the whole context: used parts in `#` (at least one when not empty), free in `.`."""
    lines = []
    for part, tokens in parts.items():
        width = round(BAR_WIDTH * tokens / total) if total else 0
        bar = "." * width if part == "free" else "#" * max(width, 1 if tokens else 0)
        lines.append(f"  {part:<11} {bar:<{BAR_WIDTH}} {tokens:>8} {100 * tokens / total if total else 0:5.1f}%")
    return lines


def memory_lines(view: MemoryView, now: float, *, full: bool = False) -> list[str]:
    """/memory: one line per layer and version (their days and first fact); `full`: every text in full."""
    ch = view.channel
    if ch.paused:
        state = "automatic updates are paused"
    elif ch.due_at is not None:
        state = f"the next version is due {in_time(ch.due_at - now)}"
    else:
        state = "nothing waits to be written"
    lines = [f"Memory of this conversation: {ch.pending_count} message(s) since the last version; {state}."]
    if view.long_term:
        lt = view.long_term
        lines.append(f"Long-term (v{lt.version}, {covered_days(lt)}):\n{lt.content}" if full else
                     f"Long-term v{lt.version} ({covered_days(lt)}): {_facts(lt.content)} fact(s), first: "
                     f"{_first_fact(lt.content)}")
    if view.short_term:
        lines.append("Short-term versions in prompts, oldest first:")
        lines += [f"Short-term v{r.version} (messages {r.first_seq}-{r.last_seq}, {covered_days(r)}):\n{r.content}"
                  if full else "  " + history_line(r) for r in view.short_term]
    if not (view.long_term or view.short_term):
        lines.append("No memory written yet.")
    lines += [f"Pinned: {fact}" for fact in view.pins]
    if not full and (view.long_term or view.short_term):
        lines.append("(the full texts: /memory full in the console, /memory show full:True in Discord)")
    return lines


def in_time(seconds: float) -> str:
    """A delay as people say it: "in 45 s", "in 12 min", "in 2 h", "in 3 days"; "now" when past."""
    if seconds <= 0:
        return "now"
    return f"in {duration_text(seconds)}"


def duration_text(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 36 * 3600:
        hours = seconds / 3600
        return f"{hours:.1f} h" if hours < 10 else f"{hours:.0f} h"
    return f"{seconds / 86_400:.0f} days"


def _facts(text: str) -> int:
    return sum(1 for ln in text.splitlines() if ln.strip() and not DAY_HEADER.match(ln.strip()))


def _first_fact(text: str) -> str:
    facts = [ln.strip() for ln in text.splitlines() if ln.strip() and not DAY_HEADER.match(ln.strip())]
    first = facts[0] if facts else ""
    return first[:160] + ("…" if len(first) > 160 else "")


def history_line(record: MemoryRecord) -> str:
    """One version in /memory history: its number, range, the days it covers, and its first fact."""
    facts = [ln for ln in record.content.splitlines() if ln.strip() and not DAY_HEADER.match(ln.strip())]
    first = facts[0] if facts else ""
    hidden = f" [replaced by v{record.hidden_by}: shown nowhere; /memory rollback {record.version} restores it]" \
        if record.hidden_by is not None else ""
    return (f"v{record.version} (messages {record.first_seq}-{record.last_seq}, {covered_days(record)}){hidden}: "
            f"{first[:200]}{'…' if len(first) > 200 else ''}")


def recall_lines(query: str, hits: list[Hit]) -> list[str]:
    """What recall found, each hit with its date, who said it and where, one line each."""
    if not hits:
        return [f"Nothing found for {query!r} (words in most messages, and greetings, are not searched)."]
    lines = [f"Recall for {query!r}:"]
    for hit in hits:
        text = " ".join(hit.text.split())
        lines.append(f"- {day_line(hit.at)}, {hit.who} ({hit.where}): {text[:300]}{'…' if len(text) > 300 else ''}")
    return lines


SUSPENDED_MEANS = ("(suspended: its last session ended with a chronicle the conversation remembers; the next session "
                   "starts from it, when a pulse, a message in its thread or a resume takes it up)")


def branch_list_lines(branches: list[Branch]) -> list[str]:
    """Branches one per line, and what "suspended" means when one is."""
    if not branches:
        return ["No branches here yet."]
    lines = [branch_line(b) for b in branches]
    return [*lines, SUSPENDED_MEANS] if any(b.status == "suspended" for b in branches) else lines


def branch_line(branch: Branch) -> str:
    return f"{branch.id} [{branch.branch_type}, {branch.status}] {branch.label}"


# What a memory admin action did, in the words both front ends use.

def branch_detail_lines(detail: BranchDetail) -> list[str]:
    """A branch and its sessions, each with the first line of its chronicle."""
    lines = [branch_line(detail.branch)]
    for t in detail.sessions:
        first = t.chronicle_summary.splitlines()[0][:200] if t.chronicle_summary else ""
        lines.append(f"- {thread_ref(t.id)} [{t.status}] {first}")
    return lines


def pin_text(fact: str, pinned: bool, changed: bool) -> str:
    return f"{'Pinned' if pinned else 'Unpinned'}: {fact}" if changed else "Nothing changed."


def written_text(record: MemoryRecord) -> str:
    return f"Short-term memory v{record.version} written."


def rollback_text(version: int, record: MemoryRecord) -> str:
    return f"Version {version} is current again, as v{record.version}."


def pause_text(paused: bool, where: str, changed: bool = True) -> str:
    if not changed:
        return f"Automatic memory updates were already {'paused' if paused else 'running'} {where}; nothing changed."
    return f"Automatic memory updates {'paused' if paused else 'resumed'} {where}."


def outcome_lines(outcome: Outcome, *, detail: bool = False) -> list[str]:
    """A memory update's result; `detail` adds the new version's text and range (the console)."""
    if outcome.error:
        return [f"Memory update failed: {outcome.error} It will be retried."]
    if outcome.short_term is None:
        return ["Nothing new to remember."]
    r = outcome.short_term
    lines = [f"Short-term memory v{r.version} written (messages {r.first_seq}-{r.last_seq}):\n{r.content}" if detail
             else written_text(r)]
    if outcome.long_term:
        lines.append(f"Long-term memory updated (v{outcome.long_term.version}).")
    return lines


def config_lines(shown: SettingsView, here: str) -> list[str]:
    """The overridable settings in effect, then each override and where it was set (`here`: "channel")."""
    dumped = masked_dump(shown.effective)
    lines = [f"{key} = {_lookup(dumped, key)!r}" for key in OVERRIDABLE]
    overrides = [f"  server {k} = {v!r}" for k, v in shown.server.items()]
    overrides += [f"  {here} {k} = {v!r}" for k, v in shown.channel.items()]
    overrides += [f"  {here} {k} = {v!r} (not used: one value per server; /config reset it)"
                  for k, v in shown.unused.items()]
    return [*lines, "Overrides:", *(overrides or ["  (none)"])]


def _lookup(data: dict[str, Any], dotted: str) -> Any:
    node: Any = data
    for part in dotted.split("."):
        node = node[part]
    return node


def context_heading(thread_id: int, parts: dict[str, int], total: int, window_budget: int) -> str:
    """The budget /context draws against: the whole context, and what of it the window may grow to."""
    used = total - parts.get("free", 0)
    return (f"Next request for {thread_ref(thread_id)}: {used} of {total} tokens in use (llm.context_tokens); "
            f"its history may grow to {window_budget} before older turns are folded into a summary:")


def not_set_text(problems: list[str]) -> str:
    return f"Not set: {'; '.join(problems)}"


def set_text(key: str, stored: object, where: str) -> str:
    return f"Set {key} = {shown_value(stored)} {where}."


def reset_text(key: str, removed: bool) -> str:
    return f"Override of {key} removed." if removed else f"{key} had no override here."


# Playbooks

def playbook_list_lines(library: Mapping[str, Playbook]) -> list[str]:
    return [f"{name}: {pb.description}" for name, pb in sorted(library.items())] or ["No playbooks loaded."]


def playbook_lines(pb: Playbook) -> list[str]:
    """A playbook's shape: what it takes and gives, and its nodes with where each leads."""
    takes, gives = ", ".join(sorted(pb.inputs)) or "(nothing)", ", ".join(sorted(pb.outputs)) or "(last)"
    lines = [f"{pb.name}: {pb.description}", f"takes: {takes}; gives: {gives}"]
    for node in pb.nodes:
        profile = f", {node.context_profile}" if isinstance(node, LLMNode) else ""
        targets = " | ".join(node.successors()) or "end"
        lines.append(f"  {node.id} ({getattr(node, 'type', '')}{profile}) -> {targets}")
    return lines


def problem_lines(problems: list[Problem]) -> list[str]:
    return [str(p) for p in problems] or ["No problems: every playbook passes the check."]


def result_lines(name: str, outputs: dict[str, Any]) -> list[str]:
    shown = json.dumps(outputs, ensure_ascii=False, indent=1, default=str)
    return [f"{name} finished:", shown if len(shown) <= RESULT_CHARS else shown[:RESULT_CHARS] + "…"]


def runs_lines(views: list[RunView], now: float) -> list[str]:
    """Recent runs, newest first, each with its steps: profile, tier, tokens, cache, time, result."""
    lines: list[str] = []
    for view in views:
        run = view.run
        took = f"{(run.ended_at or now) - run.started_at:.1f} s"
        lines.append(f"#{run.id} {run.playbook} [{run.status}] {day_line(run.started_at)}, {took}"
                     + (f": {run.error}" if run.error else ""))
        for s in view.steps:
            model = f" {s.profile}/{s.tier}, {s.input_tokens}+{s.output_tokens} tokens, cache read {s.cache_read}" \
                    f" write {s.cache_write}" if s.profile else ""
            lines.append(f"  {s.node} ({s.node_type}{model}) {s.duration_ms:.0f} ms: {s.summary}")
    return lines or ["No playbook has run here yet."]


# Tasks

def task_lines(tasks: list[Task]) -> list[str]:
    return [f"#{t.id} {t.title} [{t.status}] {sum(s['done'] for s in t.steps)}/{len(t.steps)} steps"
            for t in tasks] or ["No tasks here yet."]


def task_detail_lines(task: Task) -> list[str]:
    lines = [f"#{task.id} {task.title} [{task.status}], branch {task.branch_id}", f"Goal: {task.goal}"]
    lines += [f"  {'[x]' if s['done'] else '[ ]'} {i}. {s['text']}" for i, s in enumerate(task.steps, 1)]
    return lines


# The autonomous pulse

def autonomy_lines(status: AutonomyStatus, next_pulse: float | None, now: float) -> list[str]:
    """/autonomy status: the switch, the home channel, the timer, the gates and today's spending."""
    c = status.config
    home = ("the console" if status.home.guild_id is None else f"<#{status.home.channel_id}>") \
        if status.home else "not set (/autonomy-admin home)"
    lines = [f"Autonomy is {'on' if c.enabled else 'off'}; home channel: {home}.",
             f"A pulse every {c.interval_minutes} min (± {c.jitter_minutes}), when the home channel has been quiet "
             f"{c.quiet_minutes} min" + (f", never {c.quiet_hours} ({c.timezone})" if c.quiet_hours else "") + ".",
             f"Today: {status.spent_calls} of {c.daily_calls} model calls, {status.spent_tokens} of {c.daily_tokens} "
             f"tokens; at most {c.session_turns} turns a session."]
    if status.running:
        lines.append("A pulse is running now.")
    elif next_pulse is not None and c.enabled:
        lines.append(f"Next pulse in about {_minutes(next_pulse - now)}.")
    if status.last_pulse is not None:
        lines.append(f"Last pulse {_minutes(now - status.last_pulse.at)} ago: {status.last_pulse.detail}.")
    return lines


def autonomy_log_lines(entries: list[AutonomyEntry], now: float) -> list[str]:
    """/autonomy log: newest first, what each pulse did or why it did nothing."""
    lines = []
    for e in entries:
        cost = f" ({e.calls} calls, {e.tokens} tokens)" if e.kind == "pulse" else ""
        branch = f" [{e.branch_id}]" if e.branch_id else ""
        lines.append(f"{_minutes(now - e.at)} ago  {e.kind}{branch}: {e.detail}{cost}")
    return lines or ["No pulse has run here yet."]


def pulse_text(outcome: PulseOutcome) -> str:
    spent = f" ({outcome.calls} model calls, {outcome.tokens} tokens)" if outcome.calls else ""
    return {"skip": "No pulse: ", "wait": "Pulse: it waits. ", "react": "Pulse: it spoke up. ",
            "create": "Pulse: new task. ", "resume": "Pulse: resumed. ", "interrupted": "Pulse interrupted: ",
            "error": "Pulse failed: "}.get(outcome.action, "Pulse: ") + outcome.detail + spent


def _minutes(seconds: float) -> str:
    return duration_text(max(0.0, seconds))


def usage_lines(spent: Spent, today: str, month: str) -> list[str]:
    """/usage: today's and this month's model calls by model, with the cache's share and the estimated cost."""
    lines = []
    for label, since in (("Today", today), ("This month", month)):
        rows = spent.by_model(since)
        if not rows:
            lines.append(f"{label}: no model calls.")
            continue
        costs = [cost for *_, cost in rows if cost is not None]
        lines.append(f"{label}: {sum(c for _, c, *_ in rows)} model call(s)"
                     + (f", about ${sum(costs):.2f}" if costs else "") + ":")
        for model, calls, tokens, share, cost in rows:
            price = f"about ${cost:.2f}" if cost is not None else "no price set (llm.prices)"
            lines.append(f"- {model}: {calls} call(s), {tokens:,} tokens, {share:.0%} of the input read from the "
                         f"cache, {price}")
    return lines
