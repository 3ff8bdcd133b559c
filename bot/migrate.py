"""`python -m bot migrate --from A --to B`: copy a whole database into another and compare the counts."""

from __future__ import annotations

import sys
from pathlib import Path

from bot.instance_lock import AlreadyRunning, InstanceLock
from memory.backends import open_store
from memory.copying import copy_store
from memory.database_url import is_shared, safe_url


def target_of(text: str) -> Path | str:
    """sqlite:///relative/file, sqlite:////absolute/file, a plain file path, or a postgresql:// URL."""
    if is_shared(text):
        return text
    return Path(text.removeprefix("sqlite:///")) if text.startswith("sqlite:///") else Path(text)


def shown(target: Path | str) -> str:
    return safe_url(target) if isinstance(target, str) else str(target)


async def migrate(source_text: str, target_text: str) -> int:
    source, target = target_of(source_text), target_of(target_text)
    if shown(source) == shown(target):
        print("stelis: --from and --to name the same database", file=sys.stderr)
        return 2
    if isinstance(source, Path) and not source.is_file():
        print(f"stelis: no database file {source}", file=sys.stderr)
        return 2
    locks = [InstanceLock(t) for t in (source, target) if isinstance(t, Path)]
    try:
        for lock in locks:  # a bot writing to a file while it is copied would leave the copy behind
            lock.acquire()
    except (AlreadyRunning, OSError) as exc:
        print(f"stelis: {exc} (stop it before migrating)", file=sys.stderr)
        return 2
    try:
        return await _copy(source, target)
    finally:
        for lock in locks:
            lock.release()


async def _copy(source: Path | str, target: Path | str) -> int:
    src = await open_store(source)
    try:
        dst = await open_store(target)
        try:
            print(f"copying {shown(source)} -> {shown(target)}", file=sys.stderr)
            copies = await copy_store(src, dst, progress=lambda table, rows: print(
                f"\r  {table}: {rows} rows", end="", file=sys.stderr, flush=True))
            print(file=sys.stderr)
        finally:
            await dst.close()
    finally:
        await src.close()
    width = max(len(c.table) for c in copies)
    for c in copies:
        mark = "ok" if c.matches else "MISMATCH"
        print(f"{c.table:<{width}}  source {c.source:>9}  target {c.target:>9}  new {c.added:>9}  {mark}")
    wrong = [c.table for c in copies if not c.matches]
    if wrong:
        print(f"stelis: {', '.join(wrong)} differ between the two databases: the target held other rows "
              "before the copy (copy into an empty database)", file=sys.stderr)
        return 1
    print(f"done: every table matches ({sum(c.added for c in copies)} rows written)")
    return 0
