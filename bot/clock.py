"""The engine's clock: wall time plus an offset a demo (/idle) or a test can advance."""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass
class Clock:
    offset: float = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += seconds
