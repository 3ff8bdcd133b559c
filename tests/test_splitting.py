from hypothesis import given, settings
from hypothesis import strategies as st

from bot.splitting import DISCORD_LIMIT, split_message


def fences_balanced(chunk: str) -> bool:
    return sum(1 for line in chunk.splitlines() if line.lstrip().startswith("```")) % 2 == 0


def words(text: str) -> list[str]:
    return [w for w in text.replace("```python", " ").replace("```", " ").split()]


def test_short_text_is_one_chunk():
    assert split_message("hello") == ["hello"]
    assert split_message("   ") == []


def test_a_5000_character_reply_with_code_splits_into_valid_chunks():
    prose = "\n\n".join(f"Paragraph {i}: " + "words and more words " * 12 for i in range(10))
    code = "```python\n" + "\n".join(f"def function_{i}(x):\n    return x * {i}" for i in range(90)) + "\n```"
    text = prose + "\n\n" + code + "\n\nThat is all."
    assert len(text) > 5000
    chunks = split_message(text)
    assert len(chunks) >= 3
    assert all(len(c) <= DISCORD_LIMIT for c in chunks)
    assert all(fences_balanced(c) for c in chunks)
    assert words(" ".join(chunks)) == words(text)  # nothing lost or reordered
    inside = [c for c in chunks if "def function_" in c]
    assert len(inside) >= 2 and all(c.startswith("```python") or "```python" in c for c in inside)


def test_paragraph_breaks_are_preferred():
    text = ("a" * 900 + "\n\n") * 3
    chunks = split_message(text)
    assert chunks[0] == "a" * 900 + "\n\n" + "a" * 900 and chunks[1] == "a" * 900


def test_a_single_enormous_word_is_hard_cut():
    chunks = split_message("x" * 4500)
    assert all(len(c) <= DISCORD_LIMIT for c in chunks) and "".join(chunks) == "x" * 4500


@settings(max_examples=80, deadline=None)
@given(st.lists(st.one_of(st.text(alphabet="abc xyz\n", min_size=1, max_size=400),
                          st.just("```js\n"), st.just("\n```\n")), min_size=1, max_size=40))
def test_chunks_are_short_balanced_and_lossless(parts):
    text = "".join(parts)
    chunks = split_message(text)
    assert all(len(c) <= DISCORD_LIMIT for c in chunks)
    assert all(fences_balanced(c) for c in chunks)
    assert words(" ".join(chunks)).count("abc") == words(text).count("abc")
