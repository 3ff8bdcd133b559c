"""config.yaml written from the settings models: every key with its description, bounds and default.

The models are the one source; the shipped config.yaml is this rendering (a test keeps them equal),
so a default or a description is never edited in two places. `python -m bot config-template`.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo

from bot.config import OVERRIDABLE, Config

WIDTH = 100
HEADER = """\
# Stelis configuration, written from the settings models (`python -m bot config-template`): each key
# with what it does, its allowed range and its default. Every key can be overridden by an environment
# variable named STELIS_<SECTION>_<KEY> in upper case (for example STELIS_LLM_PROVIDER=offline), and a
# few by their usual names (DISCORD_TOKEN, ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, OPENAI_API_KEY,
# OPENAI_BASE_URL, STELIS_DEFAULT_WINDOW_RATIO, STELIS_MAX_DEPTH). STELIS_CONFIG points at another
# file. `python -m bot check-config` prints the effective values with secrets masked.
"""


def render() -> str:
    """The whole file."""
    return HEADER + "".join(_section(Config, indent="", prefix=""))


def _section(model: type[BaseModel], indent: str, prefix: str) -> list[str]:
    out: list[str] = []
    for name, field in model.model_fields.items():
        sub = field.annotation
        if isinstance(sub, type) and issubclass(sub, BaseModel):
            out.append("\n")
            if sub.__doc__ and sub.__doc__ != BaseModel.__doc__:
                out += _comment(sub.__doc__.strip(), indent)
            out.append(f"{indent}{name}:\n")
            out += _section(sub, indent + "  ", f"{prefix}{name}.")
        else:
            if not indent:
                out.append("\n")
            overridable = " Per server or channel: /config set." if prefix + name in OVERRIDABLE else ""
            out += _comment(f"{field.description or ''}{_bounds(field)}{overridable}", indent)
            out.append(_value(name, field.get_default(call_default_factory=True), indent))
    return out


def _comment(text: str, indent: str) -> list[str]:
    width = WIDTH - len(indent) - 2
    return [f"{indent}# {line}\n" for line in textwrap.wrap(" ".join(text.split()), width)]


def _bounds(field: FieldInfo) -> str:
    """The allowed range from the field's constraints, as config errors state it."""
    limits = {key: getattr(item, key) for item in field.metadata
              for key in ("ge", "gt", "le", "lt", "min_length", "max_length") if getattr(item, key, None) is not None}
    low = next(((k, limits[k]) for k in ("ge", "gt") if k in limits), None)
    high = next(((k, limits[k]) for k in ("le", "lt") if k in limits), None)
    if low and high:
        if low[0] == "gt" and high[0] == "lt":
            note = ", exclusive"
        elif low[0] == "gt":
            note = f"; above {low[1]}"
        elif high[0] == "lt":
            note = f"; below {high[1]}"
        else:
            note = ""
        return f" Allowed: {low[1]}-{high[1]}{note}."
    if low:
        return f" Allowed: at least {low[1]}." if low[0] == "ge" else f" Allowed: above {low[1]}."
    if "min_length" in limits and "max_length" in limits:
        return f" Allowed: {limits['min_length']}-{limits['max_length']} characters."
    return ""


def _value(name: str, value: Any, indent: str) -> str:
    if isinstance(value, SecretStr):
        value = value.get_secret_value()
    if isinstance(value, Path):
        value = str(value)
    if isinstance(value, dict):  # a mapping of models (llm.prices): plain values, as a person writes them
        value = {k: v.model_dump() if isinstance(v, BaseModel) else v for k, v in value.items()}
    if isinstance(value, str) and "\n" in value:
        body = textwrap.indent(value, indent + "  ")
        return f"{indent}{name}: |\n{body if body.endswith(chr(10)) else body + chr(10)}"
    dumped = yaml.safe_dump({name: value}, default_flow_style=True, width=10_000, allow_unicode=True).strip()
    return f"{indent}{dumped[1:-1]}\n"  # {name: value} without the braces
