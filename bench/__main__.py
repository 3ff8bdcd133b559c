"""`python -m bench NAME|all`: run benchmarks, one JSON line per result."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

from bench import (
    cache_efficiency,
    concurrency,
    context_latency,
    dashboard,
    due_scan,
    first_reply,
    growth,
    ingest,
    memory_quality,
    startup,
)
from bench.backends import BACKENDS
from bot import event_loop

BENCHES: dict[str, Callable[[], Awaitable[list[dict]]]] = {
    "cache_efficiency": cache_efficiency.run,
    "concurrency": concurrency.run,
    "context_latency": context_latency.run,
    "dashboard": dashboard.run,
    "due_scan": due_scan.run,
    "first_reply": first_reply.run,
    "growth": growth.run,
    "ingest": ingest.run,
    "memory_quality": memory_quality.run,
    "startup": startup.run,
}


# Benchmarks that run on either storage backend; the others measure SQLite only.
ON_EITHER_BACKEND: dict[str, Callable[[str], Awaitable[list[dict]]]] = {
    "concurrency": concurrency.run,
    "context_latency": context_latency.run,
    "ingest": ingest.run,
}
# What the PostgreSQL/SQLite ratios are taken of: lines of the same size (the key), these figures.
COMPARED = {"concurrency": (("channels", "memory_work"), ("wall_s",)),
            "context_latency": (("messages",), ("p50_ms", "p50_ms_without_recall", "recall_p50_ms", "p50_ms_question")),
            "ingest": (("channels",), ("per_second",))}


def streaming(args: argparse.Namespace) -> dict[str, Callable[[], Awaitable[list[dict]]]]:
    """The long benchmarks, printing each line as it is measured; `--quick`: a smaller run of each, for a first
    look."""
    quick, data = args.quick, args.data
    turns = args.turns or (cache_efficiency.QUICK_TURNS if quick else cache_efficiency.TURNS)
    return {
        "cache_efficiency": lambda: cache_efficiency.run(
            turns, cache_efficiency.BUDGETS[:2] if quick else cache_efficiency.BUDGETS, _print_line,
            cache_efficiency.SEED if args.seed is None else args.seed, tuple(args.strategies), not args.chat_only),
        "memory_quality": lambda: memory_quality.run(
            memory_quality.QUICK_CONVERSATIONS if quick else memory_quality.CONVERSATIONS,
            memory_quality.BUDGETS, _print_line, data, args.seed or 0),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("name", choices=[*BENCHES, "all"])
    parser.add_argument("--backend", choices=[*BACKENDS, "both"], default="sqlite",
                        help="storage for context_latency and ingest (both: each, then PostgreSQL/SQLite ratios)")
    parser.add_argument("--quick", action="store_true",
                        help="cache_efficiency over 400 turns at 8k and 16k, memory_quality over 3 conversations: a "
                             "first look in about a minute each (figures differ from the full run's)")
    parser.add_argument("--data", type=Path, help="memory_quality on conversations in the LoCoMo format (a JSON "
                        "file of samples or a directory of them) instead of the generated ones")
    parser.add_argument("--turns", type=_positive, help="cache_efficiency: turns of the script (default "
                        f"{cache_efficiency.TURNS:,}; the issue's held-out comparison runs 600)")
    parser.add_argument("--seed", type=int,
                        help="cache_efficiency: another conversation of the same kind (default "
                             f"{cache_efficiency.SEED}); memory_quality: the conversations generated from this seed on "
                             "(default 0), to see whether a change holds on ones it was not measured on")
    parser.add_argument("--chat-only", action="store_true",
                        help="cache_efficiency: a script of chat alone, no tool calls and their long outputs")
    parser.add_argument("--strategies", type=_strategies, default=list(cache_efficiency.STRATEGIES),
                        help="cache_efficiency: a comma-separated subset of " + ", ".join(cache_efficiency.STRATEGIES))
    args = parser.parse_args(argv)
    if args.name == "memory_quality" and args.data and args.seed is not None:
        parser.error("--seed picks generated conversations; with --data they are the file's")
    names = list(BENCHES) if args.name == "all" else [args.name]
    live = streaming(args)
    for name in names:
        if name in live:
            event_loop.run(live[name]())  # printed as measured
            continue
        if name not in ON_EITHER_BACKEND:
            _print(event_loop.run(BENCHES[name]()))
            continue
        backends = BACKENDS if args.backend == "both" else (args.backend,)
        by_backend = {backend: event_loop.run(ON_EITHER_BACKEND[name](backend)) for backend in backends}
        for lines in by_backend.values():
            _print(lines)
        if len(by_backend) == 2:
            _print(ratios(name, by_backend["sqlite"], by_backend["postgresql"]))
    return 0


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _strategies(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in cache_efficiency.STRATEGIES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown strategy {', '.join(unknown) or '(none given)'}; choose from "
                                         + ", ".join(cache_efficiency.STRATEGIES))
    return names


def ratios(name: str, sqlite: list[dict], postgresql: list[dict]) -> list[dict]:
    """PostgreSQL's figures over SQLite's, line by line where both measured the same size."""
    keys, figures = COMPARED[name]
    return [{"bench": name, **{k: a[k] for k in keys},
             **{f"postgresql_over_sqlite_{f}": round(b[f] / a[f], 2) for f in figures}}
            for a in sqlite for b in postgresql
            if all(a.get(k) == b.get(k) for k in keys) and all(f in a and f in b for f in figures)]


def _print(lines: list[dict]) -> None:
    for line in lines:
        _print_line(line)


def _print_line(line: dict) -> None:
    print(json.dumps(line), flush=True)


if __name__ == "__main__":
    sys.exit(main())
