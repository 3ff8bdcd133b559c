"""`python -m bench NAME|all`: run benchmarks, one JSON line per result."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Awaitable, Callable

from bench import cache_efficiency, context_latency, due_scan, growth, ingest, memory_quality

BENCHES: dict[str, Callable[[], Awaitable[list[dict]]]] = {
    "cache_efficiency": cache_efficiency.run,
    "context_latency": context_latency.run,
    "due_scan": due_scan.run,
    "growth": growth.run,
    "ingest": ingest.run,
    "memory_quality": memory_quality.run,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("name", choices=[*BENCHES, "all"])
    args = parser.parse_args(argv)
    names = list(BENCHES) if args.name == "all" else [args.name]
    for name in names:
        for line in asyncio.run(BENCHES[name]()):
            print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
