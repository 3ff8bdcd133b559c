"""Every command runs on uvloop where it is installed, and on asyncio's own loop where it is not."""

import asyncio
import gc
import sys

import pytest

from bot import event_loop


async def _loop_module() -> str:
    await asyncio.sleep(0)
    return type(asyncio.get_running_loop()).__module__


def test_commands_run_on_uvloop_where_it_is_installed():
    pytest.importorskip("uvloop")
    assert event_loop.run(_loop_module()).startswith("uvloop")


def test_without_uvloop_the_same_coroutine_runs_on_asyncio(monkeypatch):
    monkeypatch.setitem(sys.modules, "uvloop", None)  # as on Windows: the import fails
    assert event_loop.run(_loop_module()).startswith("asyncio")


def test_an_error_inside_comes_out_as_itself():
    async def fails() -> None:
        raise LookupError("no such conversation")

    with pytest.raises(LookupError, match="no such conversation"):
        event_loop.run(fails())


async def _young_collections(allocations: int) -> int:
    """Collections (of the youngest generation, and the older ones with it) while `allocations` lists are made and
    kept."""
    collections = 0

    def count(phase: str, info: dict) -> None:
        nonlocal collections
        collections += phase == "start"

    gc.callbacks.append(count)
    try:
        kept = [[] for _ in range(allocations)]
    finally:
        gc.callbacks.remove(count)
    assert len(kept) == allocations
    return collections


def test_a_command_collects_young_objects_every_ten_thousand_allocations_then_leaves_the_pace_as_it_was():
    before = gc.get_threshold()
    gc.set_threshold(700, *before[1:])  # Python's default
    try:
        assert asyncio.run(_young_collections(30_000)) >= 30  # a burst's worth of objects, walked some 40 times
        assert event_loop.run(_young_collections(30_000)) <= 30_000 // event_loop.YOUNG + 1
        assert gc.get_threshold() == (700, *before[1:])
    finally:
        gc.set_threshold(*before)
