"""A run's state: templates filled from it (a whole-value `{var}` keeps its type) and routes decided by it."""

from __future__ import annotations

import json
from typing import Any

from bot.playbooks.model import VARIABLE, ConditionalNext
from memory.errors import Failure


class PlaybookError(Failure):
    """A playbook that cannot go on; the notice names the playbook, the node and what went wrong."""


def lookup(state: dict[str, Any], dotted: str) -> Any:
    """`name` or `name.key.key`; a missing one is an error (the checker catches what it can before)."""
    name, *keys = dotted.split(".")
    if name not in state:
        raise PlaybookError(f"variable {name!r} has no value yet")
    value = state[name]
    for key in keys:
        if not isinstance(value, dict) or key not in value:
            raise PlaybookError(f"{dotted!r}: {key!r} is not in {name!r}")
        value = value[key]
    return value


def fill(value: Any, state: dict[str, Any]) -> Any:
    """A template filled from the state: `{var}` alone keeps the value's type, inside text it becomes text."""
    if isinstance(value, str):
        whole = VARIABLE.fullmatch(value)
        if whole:
            return lookup(state, whole.group(1))
        return VARIABLE.sub(lambda m: _text(lookup(state, m.group(1))), value)
    if isinstance(value, dict):
        return {k: fill(v, state) for k, v in value.items()}
    if isinstance(value, list):
        return [fill(v, state) for v in value]
    return value


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def route(rule: ConditionalNext, state: dict[str, Any]) -> str | None:
    """The node a conditional edge leads to: the first case that matches, else the default."""
    value = lookup(state, rule.field)
    for case, target in rule.cases.items():
        if _matches(rule.operator, value, case):
            return target
    return rule.default


def _matches(operator: str, value: Any, case: str) -> bool:
    text = _text(value) if not isinstance(value, bool) else str(value)
    if operator == "truthy":
        return bool(value) == (case.lower() in ("true", "yes", "1"))
    if operator == "ne":
        return text != case
    if operator == "contains":
        return case.lower() in text.lower()
    if operator == "in":
        return text in [c.strip() for c in case.split(",")]
    if operator in ("gt", "lt"):
        try:
            number, bound = float(value), float(case)
        except (TypeError, ValueError):
            return False
        return number > bound if operator == "gt" else number < bound
    return text == case
