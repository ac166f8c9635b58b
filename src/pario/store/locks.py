"""The store lock of a store opened by several processes (``Store(..., shared=True)``).

:class:`StoreLock` — ``flock`` on ``DIR/.lock``: an exclusive opener holds ``LOCK_EX`` (no
other process), shared openers hold ``LOCK_SH``.  Every wait polls with ``LOCK_NB`` and
gives up after a timeout with a one-line :class:`pario.ParioError` (flock itself has no
timeout).

The finer coordination lives with the RMT's C core (``src/pario/native``): the journal lock
(changes are appended one process at a time) and the byte-range locks of ``DIR/.sync.lock``
(a write holds its range shared from its RMT lookup to its last byte; a synchronisation
batch or a replicator chunk holds its ranges exclusive from the copy to the flag change).
Both are open-file-description locks, which the kernel drops when a process dies.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from pathlib import Path

from .. import ParioError

DEFAULT_TIMEOUT = 60.0


def store_timeout() -> float:
    """Seconds any wait for another process may take: ``$PARIO_STORE_TIMEOUT`` (0 to 1e9),
    else 60 — the one setting every process honours (the C runtime: pxs_store_timeout)."""
    v = os.environ.get("PARIO_STORE_TIMEOUT", "")
    try:
        t = float(v)
    except ValueError:
        return DEFAULT_TIMEOUT
    return t if 0 <= t < 1e9 else DEFAULT_TIMEOUT


def _poll(try_once, timeout: float, what: str):
    """Call ``try_once()`` (True = acquired) until it succeeds or ``timeout`` s passed."""
    if try_once():
        return
    t0 = time.monotonic()
    nap = 1e-4
    while True:
        time.sleep(nap)
        if try_once():
            return
        if time.monotonic() - t0 >= timeout:
            raise ParioError(f"timed out after {timeout:g} s waiting for {what}")
        nap = min(nap * 2, 0.02)


class StoreLock:
    """``flock`` on ``DIR/.lock`` (exclusive or shared), with timeouts."""

    def __init__(self, path: Path):
        self.path = Path(path)
        try:        # never through a planted link (a store directory may come from someone else)
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise ParioError(f"{self.path}: {exc.strerror}"
                             + (" (a symbolic link: pario never follows one it did not make)"
                                if exc.errno == errno.ELOOP else "")) from None
        self.mode = None

    def _try(self, op) -> bool:
        try:
            fcntl.flock(self.fd, op | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False

    def try_exclusive(self) -> bool:
        ok = self._try(fcntl.LOCK_EX)
        if ok:
            self.mode = "ex"
        return ok

    def try_shared(self) -> bool:
        ok = self._try(fcntl.LOCK_SH)
        if ok:
            self.mode = "sh"
        return ok

    def downgrade(self) -> bool:
        """EX → SH (flock conversion: never blocks here, nobody else can hold the lock)."""
        return self.try_shared()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
            self.mode = None


__all__ = ["StoreLock", "DEFAULT_TIMEOUT", "store_timeout"]
