"""The console's line editor, driven through prompt_toolkit's pipe input as a terminal would type."""

import pytest
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from bot.console import completions
from bot.line_editor import LEAVE_HINT, LineEditor

CTRL_C, CTRL_D, CTRL_R, TAB, ENTER, ALT_ENTER = "\x03", "\x04", "\x12", "\t", "\r", "\x1b\r"


@pytest.fixture
def typed(tmp_path):
    """A line editor and a way to type into it."""
    history = tmp_path / "history"
    history.write_text("\n# 2026-11-20 10:00:00\n+the locker code is 4417\n\n# 2026-11-20 10:01:00\n+hello there\n")
    with create_pipe_input() as pipe:
        editor = LineEditor(history, completions(["research", "recap"], ["12"], ["persona.name"]),
                            input=pipe, output=DummyOutput())
        yield editor, pipe.send_text


async def test_ctrl_c_clears_a_line_and_leaves_only_when_pressed_twice_on_an_empty_one(typed):
    editor, send = typed
    send("half a thought" + CTRL_C)
    assert await editor.read("> ") == "" and editor.hint is None  # cleared, as other REPLs do
    send(CTRL_C)
    assert await editor.read("> ") == "" and editor.hint == LEAVE_HINT
    send(CTRL_C)
    assert await editor.read("> ") is None
    send("still here" + ENTER + CTRL_D)
    assert await editor.read("> ") == "still here"
    assert await editor.read("> ") is None


async def test_alt_enter_types_a_newline_and_enter_sends(typed):
    editor, send = typed
    send("first line" + ALT_ENTER + "second line" + ENTER)
    assert await editor.read("> ") == "first line\nsecond line"


async def test_ctrl_r_finds_an_earlier_line(typed):
    editor, send = typed
    send(CTRL_R + "locker" + ENTER + ENTER)
    assert await editor.read("> ") == "the locker code is 4417"


async def test_tab_completes_commands_their_words_and_names(typed):
    import asyncio

    editor, send = typed

    async def typing(*pieces: str) -> str:
        reading = asyncio.ensure_future(editor.read("> "))
        for piece in pieces:  # as a person types: a completion is shown before the next key
            send(piece)
            await asyncio.sleep(0.05)
        return await reading

    assert (await typing("/play", TAB, "sh", TAB, "res", TAB, ENTER)).split() == ["/playbooks", "show", "research"]
    assert (await typing("/branches susp", TAB, "1", TAB, ENTER)).split() == ["/branches", "suspend", "12"]
