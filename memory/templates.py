"""Jinja2 templates from templates/: prompt layers, anchors, summarisation prompts."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import jinja2

TEMPLATE_DIR = Path(__file__).resolve().parent.parent / "templates"


@cache
def _environment(directory: Path) -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(directory),
        undefined=jinja2.StrictUndefined,  # a missing variable is a bug, not an empty string
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
        autoescape=False,
        auto_reload=False,  # they ship with the code: a lookup per prompt need not stat the file (a restart reloads)
    )


def render(name: str, directory: Path = TEMPLATE_DIR, **context: Any) -> str:
    """Render a template; output is stripped so prompts stay byte-stable across edits of whitespace."""
    return _environment(directory).get_template(name).render(**context).strip()
