"""Standard logging, one line per event, with every configured secret scrubbed."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from logging.handlers import RotatingFileHandler
from pathlib import Path

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
LOG_BYTES = 10_000_000  # data/stelis.log is rolled over at this size ...
LOG_BACKUPS = 5  # ... keeping this many earlier files (stelis.log.1 newest)


_ids: ContextVar[dict[str, object] | None] = ContextVar("stelis_log_ids", default=None)


@contextmanager
def tagged(**ids: object) -> Iterator[None]:
    """Log lines written inside carry these ids (guild, channel, thread, run) in JSON logs."""
    token = _ids.set({**(_ids.get() or {}), **{k: v for k, v in ids.items() if v is not None}})
    try:
        yield
    finally:
        _ids.reset(token)


def tag(name: str) -> object:
    """An id the code running now is tagged with (None when it is not)."""
    return (_ids.get() or {}).get(name)


class OneLineScrubbed(logging.Formatter):
    """Fold multi-line messages onto one line and replace secrets with ***."""

    def __init__(self, secrets: list[str]):
        super().__init__(FORMAT)
        self.secrets = [s for s in secrets if len(s) >= 4]

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        for secret in self.secrets:
            text = text.replace(secret, "***")
        return text.replace("\n", " | ")


class JsonScrubbed(OneLineScrubbed):
    """One JSON object per line (time, level, logger, message, and the ids the line was written under)."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage() + (f" | {self.formatException(record.exc_info)}" if record.exc_info else "")
        line = json.dumps({"time": self.formatTime(record), "level": record.levelname, "logger": record.name,
                           "message": message, **(_ids.get() or {})}, ensure_ascii=False, default=str)
        for secret in self.secrets:
            line = line.replace(secret, "***")
        return line


def configure(level: str, secrets: list[str], log_file: Path | None = None, *, screen: bool = False,
              json_lines: bool = False) -> None:
    """Log to stderr, or to a file with only warnings on stderr (the console keeps its screen); `screen`:
    everything on stderr as well as in the file (the Discord bot: `docker logs` and data/stelis.log)."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    root.setLevel(level)
    formatter = JsonScrubbed(secrets) if json_lines else OneLineScrubbed(secrets)
    stderr = logging.StreamHandler(sys.stderr)
    stderr.setFormatter(formatter)
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        to_file = RotatingFileHandler(log_file, maxBytes=LOG_BYTES, backupCount=LOG_BACKUPS, encoding="utf-8")
        to_file.setFormatter(formatter)
        root.addHandler(to_file)
        if not screen:
            stderr.setLevel(logging.WARNING)
    root.addHandler(stderr)
    # The SDKs log request details (with headers) at DEBUG, and the database driver and the gateway every
    # statement's values and event's payload (what people said: a forget-me could not reach it); keep them quiet.
    # APScheduler says "Added job" at INFO for every timer a message pushes back: half a busy log.
    for noisy in ("anthropic", "httpx", "httpx2", "httpcore", "openai", "aiosqlite", "asyncpg", "discord.http",
                  "discord.gateway", "discord.state", "discord.client", "apscheduler"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


class Held(logging.Handler):
    """Warnings kept for the console to show as one status line, never printed over what it is writing."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def take(self) -> list[logging.LogRecord]:
        taken, self.records = self.records, []
        return taken


def hold_warnings() -> Held:
    """Warnings stop going to the screen (they stay in the log file) and are held for a status line."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if type(handler) is logging.StreamHandler:  # the screen, not the log file (a StreamHandler too)
            root.removeHandler(handler)
    held = Held()
    root.addHandler(held)
    return held
