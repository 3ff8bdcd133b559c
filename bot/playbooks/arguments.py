"""A run's arguments as a person types them: a JSON object, or plain words for a playbook with one text input."""

from __future__ import annotations

import json
from typing import Any

from bot.playbooks.model import Playbook
from bot.playbooks.state import PlaybookError


def parse_arguments(playbook: Playbook, raw: str) -> dict[str, Any]:
    """`{"topic": "tea"}`, or `lighthouse budget` when the playbook has one text input (or needs only one)."""
    text = raw.strip()
    if not text:
        return {}
    if text.startswith("{"):
        try:
            value: dict[str, Any] = json.loads(text)  # "{" opens nothing but an object
        except json.JSONDecodeError as exc:
            raise PlaybookError(f"the arguments are not valid JSON ({exc.msg}); {_usage(playbook)}") from None
        return value
    key = _text_input(playbook)
    if key is None:
        raise PlaybookError(f"plain words fit a playbook with one text input; {_usage(playbook)}")
    return {key: text}


def _text_input(playbook: Playbook) -> str | None:
    """The one text input plain words go to: the only input, or else the only required one."""
    properties: dict[str, Any] = playbook.input_schema.get("properties") or {}
    texts = [k for k, v in properties.items() if isinstance(v, dict) and v.get("type", "string") == "string"]
    required = [str(k) for k in playbook.input_schema.get("required") or [] if k in properties]
    if len(properties) == 1 and texts:
        return texts[0]
    if len(required) == 1 and required[0] in texts:
        return required[0]
    return None


def _usage(playbook: Playbook) -> str:
    names = sorted((playbook.input_schema.get("properties") or {}).keys())
    if not names:
        return f"{playbook.name} takes no arguments"
    example = json.dumps({name: "..." for name in names})
    return f"{playbook.name} takes {', '.join(names)}, for example {example}"
