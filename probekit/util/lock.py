"""One writer per directory: an inter-process lock (``filelock``) that names its holder.

Two processes writing the same activation store (two ``probekit capture`` runs into one
``--out``, two suites filling one cache entry) would sweep each other's temp files and race on
the manifest. :class:`DirectoryLock` is held while a directory is written: a second writer
waits up to ``timeout`` seconds (then finds the store complete, or resumes it) or is refused
with one line naming the holder (pid, host, start time, command). The lock is an OS file lock
(``fcntl.flock`` on POSIX), so a killed holder releases it: no stale lock survives a crash.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import time
import weakref
from pathlib import Path
from typing import Any

from ..errors import StoreError

log = logging.getLogger("probekit")

LOCK_NAME = ".probekit.lock"
HOLDER_NAME = ".probekit.lock.json"


def _release(lock: Any, holder: Path) -> None:
    """Remove the holder record and release ``lock`` (if this process still holds it)."""
    if lock.is_locked:
        holder.unlink(missing_ok=True)
        lock.release(force=True)


class LockedError(StoreError):
    """Another process holds the write lock of a directory (the message names it)."""


class DirectoryLock:
    """The write lock of ``directory`` (files ``.probekit.lock`` and ``.probekit.lock.json``).

    Args:
        directory: the directory written under the lock (created if missing).
        what: what the directory is, for messages (``"store"``, ``"cache entry"``).
    """

    def __init__(self, directory: str | Path, *, what: str = "store") -> None:
        from filelock import FileLock

        self.directory = Path(directory)
        self.what = what
        self._lock = FileLock(str(self.directory / LOCK_NAME))
        self._finalizer: weakref.finalize | None = None

    @property
    def held(self) -> bool:
        """True while this object holds the lock."""
        return bool(self._lock.is_locked)

    def holder(self) -> str:
        """Who holds the lock, as recorded by it (``"an unknown process"`` if unreadable)."""
        try:
            info = json.loads((self.directory / HOLDER_NAME).read_text())
            started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info["started"]))
            return (f"pid {info['pid']} on {info['host']}, since {started}: "
                    f"{' '.join(info['command'])[:120]}")
        except (OSError, ValueError, KeyError, TypeError):
            return "an unknown process"

    def acquire(self, timeout: float | int = 0.0) -> None:
        """Take the lock, waiting up to ``timeout`` seconds (0: refuse at once if held).

        Raises:
            LockedError: another process holds it after ``timeout`` seconds.
        """
        from filelock import Timeout

        self.directory.mkdir(parents=True, exist_ok=True)
        try:
            self._lock.acquire(timeout=0)
        except Timeout:
            if timeout <= 0:
                raise self._error(timeout) from None
            log.info("waiting up to %.0f s for the %s %s: it is being written by %s",
                     timeout, self.what, self.directory, self.holder())
            try:
                self._lock.acquire(timeout=timeout)
            except Timeout:
                raise self._error(timeout) from None
        info: dict[str, Any] = {"pid": os.getpid(), "host": socket.gethostname(),
                                "started": time.time(), "command": list(sys.argv)}
        (self.directory / HOLDER_NAME).write_text(json.dumps(info))
        # released when this object is dropped, too (a writer that never calls close())
        self._finalizer = weakref.finalize(self, _release, self._lock, self.directory / HOLDER_NAME)

    def _error(self, timeout: float | int) -> LockedError:
        waited = f" (waited {timeout:g} s)" if timeout > 0 else ""
        return LockedError(
            f"{self.what} {self.directory} is being written by another process ({self.holder()})"
            f"{waited}; wait for it to finish (rerunning then resumes or finds it complete) or "
            "write to another directory"
        )

    def release(self) -> None:
        """Give the lock up (no-op if not held)."""
        if self._finalizer is not None:
            self._finalizer()
            self._finalizer = None

    def __enter__(self) -> DirectoryLock:
        """Acquire without waiting."""
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        """Release."""
        self.release()
