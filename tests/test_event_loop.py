"""Every command runs on uvloop where it is installed, and on asyncio's own loop where it is not."""

import asyncio
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
