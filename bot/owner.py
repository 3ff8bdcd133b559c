"""Who this process is to a database others may share: the name on its claims, leases and open threads."""

from __future__ import annotations

import os
import secrets
import socket

HEARTBEAT_SECONDS = 30.0  # how often a process says it is alive; three missed beats and it counts as gone


def process_owner() -> str:
    """Host, process id and a random tag (a restarted process with a reused pid is someone new)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
