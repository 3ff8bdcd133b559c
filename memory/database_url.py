"""What a database target names: a SQLite file this process holds, or a PostgreSQL URL processes share."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit


def is_shared(target: Path | str) -> bool:
    """A database other processes may use at the same time (PostgreSQL), not a file this process holds."""
    return str(target).startswith(("postgresql://", "postgres://"))


def safe_url(url: str) -> str:
    """A database URL without its password, for messages and logs."""
    password = urlsplit(url).password
    return url if password is None else url.replace(f":{password}@", ":***@", 1)
