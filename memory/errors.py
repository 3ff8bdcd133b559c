"""One error family: everything Stelis refuses or fails to do carries a `notice` a person can read.

Front ends catch `Failure` and show `notice`; the subclasses say which part failed, for callers
that react differently (a retry for the model, a repair hint for the database).
"""

from __future__ import annotations


class Failure(Exception):
    """The base of every error Stelis reports; `notice` is short, plain and fit to show users."""

    def __init__(self, notice: str):
        super().__init__(notice)
        self.notice = notice
