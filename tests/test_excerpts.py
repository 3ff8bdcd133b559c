"""Excerpts: recall shows, and judges, the densest stretch of a long text's query words."""

from hypothesis import given, settings
from hypothesis import strategies as st

from memory import excerpts


def test_a_short_text_is_whole_and_scores_every_word_it_holds():
    shown = excerpts.best("Kai bought  a new\nbike in Osaka", {"bike": 2.0, "osaka": 1.0, "tokyo": 5.0}, 400)
    assert shown.text == "Kai bought a new bike in Osaka"
    assert shown.score == 3.0


def test_words_far_apart_do_not_add_up():
    filler = " ".join(["lorem ipsum dolor"] * 60)
    text = f"bike {filler} osaka {filler} bike and osaka together at last {filler}"
    shown = excerpts.best(text, {"bike": 2.0, "osaka": 1.0}, 200)
    assert shown.score == 3.0 and "bike and osaka together" in shown.text
    alone = excerpts.best(f"bike {filler} osaka {filler}", {"bike": 2.0, "osaka": 1.0}, 200)
    assert alone.score == 2.0 and alone.text.startswith("bike") and alone.text.endswith("…")


def test_matches_start_words_except_in_cjk():
    assert excerpts.word_starts("eat", "eating weather eat") == [0, 15]
    assert excerpts.word_starts("東京", "私は東京に住む") == [2]


words = st.sampled_from(["bike", "osaka", "tea", "lorem", "ipsum", "kai", "東京", "x"])


@settings(max_examples=200, deadline=None)
@given(st.lists(words, min_size=1, max_size=300), st.integers(80, 400))
def test_an_excerpt_fits_its_width_and_holds_what_it_scores(text_words, width):
    weights = {"bike": 3.0, "osaka": 2.0, "東京": 1.5}
    text = " ".join(text_words)
    shown = excerpts.best(text, weights, width)
    inner = shown.text.strip("…")
    assert len(inner) <= width and inner in text
    held = sum(w for t, w in weights.items() if excerpts.contains(t, inner.lower()))
    assert shown.score <= held + 1e-9
    if len(text) <= width:
        assert shown.score == held
