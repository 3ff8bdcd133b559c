"""The static checker: every mistake a playbook can make that is visible before it runs.

Run at load (a playbook with a problem does not load) and by `python -m bot playbooks check`.
Each problem names the file, the node and the field.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from bot.playbooks.model import (
    VARIABLE,
    ConditionalNext,
    LLMNode,
    NodeBase,
    Playbook,
    SetNode,
    StelisEndNode,
    StelisStartNode,
    SubplayNode,
    ToolNode,
)
from bot.tools import CONVERSATION_TOOLS

MAX_FILE_BYTES = 1_000_000  # a playbook is a page of JSON; a larger file is refused before it is read
BUILTIN_VARIABLES = {"last", "input"}  # the previous node's result; the run's arguments as one object


@dataclass(frozen=True)
class Problem:
    file: str
    node: str | None
    field: str | None
    message: str

    def __str__(self) -> str:
        where = "".join(f" {label} {value}:" for label, value in (("node", self.node), ("field", self.field))
                        if value)
        return f"{self.file}:{where} {self.message}"


def read(path: Path) -> tuple[Playbook | None, list[Problem]]:
    """A playbook file, or the problems that keep it from being one (never an exception: one bad file in the
    folder must not keep the others, or the bot, from starting)."""
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            return None, [Problem(str(path), None, None, f"larger than {MAX_FILE_BYTES // 1_000_000} MB")]
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, [Problem(str(path), None, None, f"not UTF-8 text (byte {exc.start})")]
    except OSError as exc:  # a directory named x.json, a file that cannot be read
        return None, [Problem(str(path), None, None, f"cannot be read: {exc.strerror or exc}")]
    return parse(text, str(path))


def parse(text: str, file: str) -> tuple[Playbook | None, list[Problem]]:
    """A playbook from JSON text, or the problems that keep it from being one."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, [Problem(file, None, None, f"not valid JSON: {exc}")]
    except RecursionError:
        return None, [Problem(file, None, None, "not a playbook: JSON nested too deep")]
    try:
        return Playbook.model_validate(raw), []
    except ValidationError as exc:
        return None, [_validation_problem(file, raw, err) for err in exc.errors()]
    except RecursionError:
        return None, [Problem(file, None, None, "not a playbook: nested too deep")]


def _validation_problem(file: str, raw: Any, err: Mapping[str, Any]) -> Problem:
    loc = list(err["loc"])
    node = None
    if len(loc) >= 2 and loc[0] == "nodes" and isinstance(loc[1], int):
        found = raw.get("nodes", [])[loc[1]] if isinstance(raw, dict) else None
        node = str(found.get("id", f"#{loc[1]}")) if isinstance(found, dict) else f"#{loc[1]}"
        loc = [part for part in loc[2:] if part not in ("llm", "tool", "set", "route", "subplay", "stelis_start",
                                                        "stelis_end")]
    field = ".".join(str(part) for part in loc) or None
    message = "unknown field (not part of the format)" if err["type"] == "extra_forbidden" else err["msg"]
    return Problem(file, node, field, message)


def check(playbook: Playbook, file: str, *, tools: Collection[str], library: Mapping[str, Playbook],
          max_depth: int, start_depth: int = 0) -> list[Problem]:
    """Every static problem of a parsed playbook; `library` holds the playbooks it may call."""
    problems: list[Problem] = []

    def add(node: str | None, field: str | None, message: str) -> None:
        problems.append(Problem(file, node, field, message))

    ids = [n.id for n in playbook.nodes]
    for duplicate in sorted({i for i in ids if ids.count(i) > 1}):
        add(duplicate, "id", "two nodes have this id")
    known = set(ids)
    if playbook.start_node not in known:
        add(None, "start_node", f"no node {playbook.start_node!r}")
    for node in playbook.nodes:
        for target in node.successors():
            if target not in known:
                add(node.id, "next", f"no node {target!r}")
    reached = _reachable(playbook, known)
    for node in playbook.nodes:
        if node.id not in reached and playbook.start_node in known:
            add(node.id, None, "unreachable from start_node")
    _check_names(playbook, tools, library, add)
    _check_variables(playbook, library, add)
    _check_calls(playbook, library, add)
    if not problems:  # the walks below assume every edge leads to a node and no call cycles
        _check_balance(playbook, add)
        deepest = nesting(playbook, library)
        if start_depth + deepest > max_depth:
            add(None, "stelis_start", f"Stelis threads may nest {deepest} deep from depth {start_depth}, past the "
                f"maximum depth {max_depth}")
        for node in playbook.nodes:
            own = node.stelis_config.max_depth if isinstance(node, StelisStartNode) else None
            if own is not None and deepest > own:
                add(node.id, "stelis_config.max_depth", f"{own}, but this playbook's Stelis threads may nest "
                    f"{deepest} deep below where it starts")
    return problems


def calls(playbook: Playbook) -> list[str]:
    """The playbooks a playbook's subplay nodes call."""
    return [node.playbook for node in playbook.nodes if isinstance(node, SubplayNode)]


def _check_calls(playbook: Playbook, library: Mapping[str, Playbook], add: Any) -> None:
    """A playbook that calls itself, directly or through others, never ends: refused before any run."""
    todo: list[tuple[str, tuple[str, ...]]] = [(callee, (playbook.name,)) for callee in calls(playbook)]
    seen: set[str] = set()
    while todo:
        name, path = todo.pop()
        if name == playbook.name:
            add(None, "playbook", f"calls itself ({' -> '.join((*path, name))}): the run would never end")
            return
        if name in seen or name not in library:
            continue
        seen.add(name)
        todo += [(callee, (*path, name)) for callee in calls(library[name])]


def _check_balance(playbook: Playbook, add: Any) -> None:
    """Every Stelis thread a playbook opens is closed on every path, by the playbook that opened it.

    Each node is reached with one count of open threads whichever way the run comes: an end node
    with threads open, a stelis_end with none open, or a loop that opens more each time is refused.
    """
    opened: dict[str, int] = {playbook.start_node: 0}
    todo = [playbook.start_node]
    while todo:
        node_id = todo.pop()
        node = playbook.node(node_id)
        count = opened[node_id]
        if isinstance(node, StelisEndNode):
            if count == 0:
                add(node.id, None, "ends a Stelis thread this playbook has not opened on the way here")
                return
            count -= 1
        elif isinstance(node, StelisStartNode):
            count += 1
        following = node.successors()
        if (not following or _falls_through(node.conditional_next)) and count:
            add(node.id, None, f"the run can end here with {count} Stelis thread(s) still open: add a stelis_end")
            return
        for target in following:
            if target not in opened:
                opened[target] = count
                todo.append(target)
            elif opened[target] != count:
                add(target, None, f"reached with {opened[target]} and with {count} Stelis thread(s) open: "
                    "every path must open and close the same threads")
                return


def _reachable(playbook: Playbook, known: set[str]) -> set[str]:
    seen: set[str] = set()
    todo = [playbook.start_node] if playbook.start_node in known else []
    while todo:
        node_id = todo.pop()
        if node_id in seen or node_id not in known:
            continue
        seen.add(node_id)
        todo += playbook.node(node_id).successors()
    return seen


def _check_names(playbook: Playbook, tools: Collection[str], library: Mapping[str, Playbook], add: Any) -> None:
    for node in playbook.nodes:
        if isinstance(node, LLMNode):
            for name in node.tools:
                if name not in tools:
                    add(node.id, "tools", f"unknown tool {name!r}")
                elif node.context_profile == "conversation" and name not in CONVERSATION_TOOLS:
                    add(node.id, "tools", f"{name!r} is not one of the conversation's tools "
                        f"({', '.join(CONVERSATION_TOOLS)}): every conversation request offers the same list, or "
                        "the cached prefix is lost; use a worker or router profile for it")
        elif isinstance(node, ToolNode) and node.tool not in tools:
            add(node.id, "tool", f"unknown tool {node.tool!r}")
        elif isinstance(node, SubplayNode) and node.playbook not in library:
            add(node.id, "playbook", f"unknown playbook {node.playbook!r}")


def _check_variables(playbook: Playbook, library: Mapping[str, Playbook], add: Any) -> None:
    produced: dict[str, set[str] | None] = {name: None for name in playbook.inputs | BUILTIN_VARIABLES}
    for node in playbook.nodes:
        key = getattr(node, "output_key", None)
        if isinstance(node, SubplayNode) and key:
            callee = library.get(node.playbook)
            produced[key] = (callee.outputs | {"last"}) if callee else None
        elif key:
            produced[key] = None  # an llm or tool result: any shape
        if isinstance(node, SetNode):
            produced.update(dict.fromkeys(node.values))
    for node in playbook.nodes:
        for field, value in _templates(node):
            for ref in _references(value):
                name, _, rest = ref.partition(".")
                if name not in produced:
                    add(node.id, field, f"variable {name!r} is never declared (input_schema, an output_key or a "
                        "set node)")
                elif rest and produced[name] is not None and rest.split(".")[0] not in (produced[name] or set()):
                    add(node.id, field, f"{name!r} comes from a playbook whose output_schema does not declare "
                        f"{rest.split('.')[0]!r}")
    for key in sorted(playbook.outputs):
        if key not in produced:
            add(None, "output_schema", f"output {key!r} is never set by any node")


def _templates(node: NodeBase) -> list[tuple[str, Any]]:
    found: list[tuple[str, Any]] = []
    if node.conditional_next is not None:
        found.append(("conditional_next.field", "{" + node.conditional_next.field + "}"))
    if isinstance(node, LLMNode):
        found.append(("action", node.action))
    elif isinstance(node, ToolNode | SubplayNode):
        found.append(("args", node.args))
    elif isinstance(node, SetNode):
        found.append(("values", node.values))
    elif isinstance(node, StelisStartNode):
        found.append(("label", node.label))
    return found


def _references(value: Any) -> set[str]:
    if isinstance(value, str):
        return set(VARIABLE.findall(value))
    if isinstance(value, dict):
        return set().union(*(_references(v) for v in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(_references(v) for v in value)) if value else set()
    return set()


def _falls_through(rule: ConditionalNext | None) -> bool:
    """Can a conditional edge match no case and end the run (no default, and cases that leave values out)?"""
    if rule is None or rule.default:
        return False
    truths = {case.lower() in ("true", "yes", "1") for case in rule.cases}
    return not (rule.operator == "truthy" and truths == {True, False})


def nesting(playbook: Playbook, library: Mapping[str, Playbook], seen: frozenset[str] = frozenset()) -> int:
    """How deep the Stelis threads a playbook opens may nest, on its worst path (callees included)."""
    if playbook.name in seen:
        return 0  # a cycle of playbooks is its own problem; do not recurse for ever
    deepest = 0
    stack: list[tuple[str, int, frozenset[str]]] = [(playbook.start_node, 0, frozenset())]
    known = {n.id for n in playbook.nodes}
    while stack:
        node_id, open_, path = stack.pop()
        if node_id not in known or node_id in path:
            continue
        node = playbook.node(node_id)
        if isinstance(node, StelisStartNode):
            open_ += 1
        elif isinstance(node, StelisEndNode):
            open_ = max(0, open_ - 1)
        deepest = max(deepest, open_)
        if isinstance(node, SubplayNode) and node.playbook in library:
            below = nesting(library[node.playbook], library, seen | {playbook.name})
            deepest = max(deepest, open_ + below + (1 if node.execution == "subagent" else 0))
        stack += [(target, open_, path | {node_id}) for target in node.successors()]
    return deepest


def check_file(path: Path, *, tools: Collection[str], library: Mapping[str, Playbook],
               max_depth: int) -> tuple[Playbook | None, list[Problem]]:
    """Parse and check one file."""
    playbook, problems = read(path)
    if playbook is None:
        return None, problems
    return playbook, check(playbook, str(path), tools=tools, library={**library, playbook.name: playbook},
                           max_depth=max_depth)
