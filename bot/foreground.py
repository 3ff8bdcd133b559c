"""Replies first: memory work waits for a moment when no reply is being prepared or stored.

A reply's own work (storing the message, assembling the request, storing the answer) is what a member waits on;
a memory version is not. Memory work started in a burst of replies takes its CPU out of theirs, so a version
waits, up to a limit, for a moment with none under way: the time replies spend waiting on the model.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

MOST_WAIT = 2.0  # seconds memory work waits for a quiet moment: a busy server still gets its versions


class Foreground:
    """How many replies are doing their own work now, and a way to wait until none is."""

    def __init__(self, most: float = MOST_WAIT) -> None:
        self.most = most  # the longest memory work waits
        self._busy = 0
        self._quiet = asyncio.Event()
        self._quiet.set()

    @contextlib.contextmanager
    def busy(self) -> Iterator[None]:
        """Around a reply's own work: storing a message, assembling the request (the reply's model call is outside it;
        a window cut summarised there and then is inside)."""
        self._busy += 1
        self._quiet.clear()
        try:
            yield
        finally:
            self._busy -= 1
            if not self._busy:
                self._quiet.set()

    async def quiet(self) -> None:
        """Return once no reply is doing its own work, or after `most` seconds."""
        if self._busy:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._quiet.wait(), self.most)
