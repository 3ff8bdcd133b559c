"""The engine's clock: wall time plus an offset a demo (/idle) or a test can advance."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Clock:
    offset: float = 0.0
    kept_in: Path | None = None  # where the offset is kept across runs (the console's data folder)

    @classmethod
    def kept(cls, path: Path) -> Clock:
        """The clock of a data folder whose time a demo moved forward: never earlier than what it stored."""
        try:
            offset = max(0.0, float(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            offset = 0.0
        return cls(offset, path)

    def __call__(self) -> float:
        return time.time() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += seconds
        if self.kept_in is not None:
            self.kept_in.parent.mkdir(parents=True, exist_ok=True)
            self.kept_in.write_text(f"{self.offset}\n", encoding="utf-8")
