"""Which words of a text carry meaning: for ranking summary sentences and for recall queries."""

from __future__ import annotations

import re

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?", re.UNICODE)
CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")
_STOPWORDS_TEXT = """
a about above after again all also am an and any are as at be because been before being below between both but
by can could did do does doing done down during each even ever every few for from get got had has have having he
her here hers him his how i if in into is it its just like me more most much my no nor not now of off oh ok okay
on once only or other our out over own really same she should so some such than that the their them then there
these they this those through to too under until up us very was way we well were what when where which while who
whom why will with would yeah yes you your yours haha lol hey hi hello thanks thank wow sure right maybe still
one two three going gonna want know think thing things lot bit kind sort pretty quite i'm it's that's don't can't
didn't isn't let's you're i've i'll ever anyone someone something anything tell said say says
good morning evening afternoon everyone everybody guys folks cool nice great awesome fun totally exactly
absolutely definitely agree true omg yay hmm umm aww ahh
"""
STOPWORDS = frozenset(_STOPWORDS_TEXT.split())


def words(text: str) -> list[str]:
    """Lower-cased words in order (runs of letters and digits, apostrophes kept inside)."""
    return _WORD.findall(text.lower().replace("’", "'"))


def content_words(text: str) -> frozenset[str]:
    """Words that carry meaning: no stopwords; numbers always; CJK runs as pairs of characters."""
    found: set[str] = set()
    for word in words(text):
        if CJK.search(word):
            found.update(word[i:i + 2] for i in range(max(1, len(word) - 1)))
        elif any(c.isdigit() for c in word) or (len(word) > 2 and word not in STOPWORDS):
            found.add(word)
    return frozenset(found)
