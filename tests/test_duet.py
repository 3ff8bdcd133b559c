"""`python -m bot duet`: two personas, one shared conversation, a social session per exchange."""

from __future__ import annotations

import io

import pytest

from bot.config import validate
from bot.duet import PLACE, DuetError, duet
from bot.engine import Engine
from bot.providers.offline import OfflineLLM
from memory.anchors import is_anchor


def _config(tmp_path, name: str):
    return validate({"data_dir": str(tmp_path / name), "persona": {"name": name, "card": f"You are {name}."},
                     "snapshots": {"interval_seconds": 0}})


async def test_two_personas_remember_each_exchange_as_a_session_of_their_social_branch(tmp_path):
    out = io.StringIO()
    stelis, eris = _config(tmp_path, "Stelis"), _config(tmp_path, "Eris")
    await duet(stelis, eris, out, turns=3, exchanges=2, opening="Shall we read together?")
    text = out.getvalue()
    assert text.count("--- exchange") == 2 and text.count("\nStelis: Shall we read together?\n") == 2
    assert "Stelis — branch with Eris [suspended], 2 session(s)" in text
    assert "Eris — branch with Stelis [suspended], 2 session(s)" in text
    for config, partner in ((stelis, "Eris"), (eris, "Stelis")):
        engine = await Engine.open(config, OfflineLLM())
        (branch,) = await engine.branches.of(PLACE, kind="social")
        first, second = (await engine.branches.detail(PLACE, branch.id)).sessions
        assert branch.label == f"with {partner}" and first.chronicle_summary and second.chronicle_summary
        opening = (await engine.store.tail(second.id, 5))[0]
        assert is_anchor(opening) and opening.metadata["stelis_thread_id"] == first.id
        root = await engine.stelis.root(PLACE)
        anchors = [m for m in await engine.store.tail(root.id, 20) if is_anchor(m)]
        assert len(anchors) == 2  # both exchanges reach the shared conversation, through their anchors
        await engine.close()


async def test_a_duet_needs_two_personas_and_two_databases(tmp_path):
    with pytest.raises(DuetError, match="both configs are the persona 'Stelis'"):
        await duet(_config(tmp_path, "Stelis"), _config(tmp_path, "Stelis"), io.StringIO(), turns=1, exchanges=1,
                   opening="hi")
    same = validate({"data_dir": str(tmp_path / "Stelis"), "persona": {"name": "Eris", "card": "You are Eris."}})
    with pytest.raises(DuetError, match="give the second its own data_dir"):
        await duet(_config(tmp_path, "Stelis"), same, io.StringIO(), turns=1, exchanges=1, opening="hi")
