"""A reply never opens with the request's markup (issue 27, point 5): `[Now: ...]`, `[Rin]`, `Rin:` are taken
off its start, while it streams and before it is stored; what follows is untouched."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from memory.llm import LLMRequest, Turn
from memory.reply_markup import CleanStart, clean_reply, speakers

ANSWERS = json.loads((Path(__file__).parent / "fixtures" / "real_model_answers.json").read_text(encoding="utf-8"))
NAMES = {"Rin", "kai"}


def test_the_recorded_replies_lose_their_markup_and_keep_their_words():
    assert clean_reply(ANSWERS["reply_with_markup"]["text"], NAMES) == \
        "Good evening! The lighthouse tour is on Saturday."
    assert clean_reply(ANSWERS["reply_with_speaker"]["text"], NAMES) == \
        "asked about the tide: it is low at 6 [1]."  # a tag of someone else at the start goes too; [1] stays


def test_what_is_not_markup_is_left_alone():
    for text in ("[1] first point", "Right, Rin: see above", "[offline model] Stelis here", "Rinse the cups.",
                 "[link](https://x.y) here", "  plain"):
        assert clean_reply(text, NAMES) == text


def test_the_names_come_from_the_request():
    request = LLMRequest(system=(), turns=(Turn.text("user", "[kai] hello\n[lena] hi there"),
                                           Turn.text("assistant", "[not a speaker] x")), max_tokens=10)
    assert speakers(request, "Rin") == {"Rin", "kai", "lena"}


@given(st.lists(st.text(max_size=12), max_size=12))
def test_streamed_in_any_pieces_the_reply_reads_as_the_cleaned_whole(cuts):
    text = ANSWERS["reply_with_markup"]["text"]
    pieces, at = [], 0
    for cut in cuts:
        step = len(cut)
        pieces.append(text[at:at + step])
        at += step
    pieces.append(text[at:])
    shown: list[str] = []
    sink = CleanStart(shown.append, NAMES)
    for piece in pieces:
        sink(piece)
    sink.close()
    assert "".join(shown) == clean_reply(text, NAMES)
    assert not any("[Now" in s or "[Rin]" in s for s in shown)


async def test_a_reply_is_stored_and_streamed_without_the_markup(make_config, fake_anthropic):
    from bot.config import AnthropicConfig, ModelTiers
    from bot.engine import Engine
    from bot.providers.anthropic_llm import AnthropicLLM
    from memory.records import Scope

    fake_anthropic.responder = lambda body: ANSWERS["reply_with_markup"]["text"]
    llm = AnthropicLLM(AnthropicConfig(api_key="k", base_url=fake_anthropic.base_url, max_retries=0), ModelTiers())
    engine = await Engine.open(make_config(snapshots={"interval_seconds": 0}, persona={"name": "Rin"},
                                           llm={"reply_tools": False}), llm)
    try:
        scope = Scope.channel(1, 2)
        await engine.conversations.hear(scope, "when is the tour?", author_name="kai", author_id=5)
        shown: list[str] = []
        reply = await engine.conversations.reply((await engine.stelis.root(scope)).id, on_text=shown.append)
        assert reply.content == "Good evening! The lighthouse tour is on Saturday."
        assert "".join(shown) == reply.content
    finally:
        await engine.close()
