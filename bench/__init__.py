"""Benchmarks that print one JSON object per line (DESIGN.md section 9)."""

from collections.abc import Callable

Report = Callable[[dict], None]  # takes each result line as soon as it is measured
