"""The tokenizer's table as read at start: from the user's cache when a start has written it, counted alike."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import tiktoken

from memory import tokens

TEXTS = ["", "hello, are you there?", "明日の予定は？ 三時にカフェで", "🍰🍰 <|endoftext|> café\n\n\tend",
         "a" * 5000, "def f(x):\n    return x ** 2  # squared"]


@pytest.fixture
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    tokens._encoder.cache_clear()
    yield tmp_path / "cache"
    tokens._encoder.cache_clear()


def _stock_counts() -> list[int]:
    stock = tiktoken.get_encoding(tokens.ENCODING)
    return [len(stock.encode_ordinary(text)) for text in TEXTS]


def _counts_of_a_new_start() -> list[int]:
    tokens._encoder.cache_clear()
    return [tokens.count_tokens(text) for text in TEXTS]


def test_the_first_start_writes_the_table_and_the_next_counts_from_it_alike(cache_home: Path) -> None:
    assert not tokens.table_path().exists()
    first = _counts_of_a_new_start()
    table = tokens.table_path()
    assert table.is_file() and table.parent == cache_home / "stelis"
    assert oct(table.parent.stat().st_mode & 0o777) == oct(0o700)  # the user's own: marshal trusts what it reads
    written = table.stat().st_mtime_ns
    assert _counts_of_a_new_start() == first == _stock_counts()
    assert table.stat().st_mtime_ns == written  # read, not written again
    assert os.listdir(table.parent) == [table.name]  # no temporary file left beside it


@pytest.mark.parametrize("damage", [b"", b"\x00garbage", "cut"])
def test_a_table_cut_short_or_not_ours_is_read_from_the_source_and_written_whole(cache_home: Path,
                                                                                damage: bytes | str) -> None:
    _counts_of_a_new_start()
    table = tokens.table_path()
    whole = table.read_bytes()
    table.write_bytes(whole[:len(whole) // 2] if damage == "cut" else damage)
    assert _counts_of_a_new_start() == _stock_counts()
    assert table.read_bytes() == whole


def test_a_cache_folder_it_cannot_write_costs_only_the_time(cache_home: Path) -> None:
    cache_home.write_text("a file where the folder would be")  # mkdir fails as a read-only home would
    assert _counts_of_a_new_start() == _stock_counts()
    assert cache_home.is_file()


def test_the_table_is_named_for_the_data_file_it_was_read_from(cache_home: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """An upgraded data file (another size or time) is read anew, not taken from the old table."""
    _counts_of_a_new_start()
    before = tokens.table_path()
    copy = cache_home / "other.tiktoken"
    copy.write_bytes(tokens.SOURCE.read_bytes() + b"\n")
    monkeypatch.setattr(tokens, "SOURCE", copy)
    assert tokens.table_path() != before


def test_without_a_home_folder_it_counts_from_the_source(cache_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XDG_CACHE_HOME")

    def nowhere() -> Path:
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(Path, "home", staticmethod(nowhere))
    assert _counts_of_a_new_start() == _stock_counts()
