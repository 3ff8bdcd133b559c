"""One running Stelis per database: a second process on the same file is refused with a clear message.

Two processes would each sweep the other's active threads and run the same memory updates, so
rather than coordinate them we keep the rule simple. The lock is an advisory `flock` on a file next
to the database; the kernel drops it when the process dies, so a crash never leaves it stale.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from memory.errors import Failure


class AlreadyRunning(Failure):
    """Another process holds the database."""


class InstanceLock:
    def __init__(self, database: Path):
        self.path = database.with_name(database.name + ".lock")
        self._fd: int | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise AlreadyRunning(f"another Stelis process (pid {holder}) is using {self.path.with_suffix('')}; "
                                 "stop it first, or give this one its own data_dir") from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the lock
            self._fd = None
