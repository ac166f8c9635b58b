"""Inter-process coordination of a store opened by several processes (``Store(..., shared=True)``).

* :class:`StoreLock` — ``flock`` on ``DIR/.lock``: an exclusive opener holds ``LOCK_EX``
  (no other process), shared openers hold ``LOCK_SH``.  Every wait polls with ``LOCK_NB``
  and gives up after a timeout with a one-line :class:`pario.ParioError` (flock itself has
  no timeout).
* :class:`SyncLocks` — POSIX record locks (``fcntl F_SETLK``) on byte ``id`` of
  ``DIR/.sync.lock``, one byte per logical file.  Writers of a file hold the byte *shared*
  while they look up the RMT, mark entries and write the bytes; synchronisation
  (:meth:`pario.store.redirect.File.sync_step`: copy DIRTY → original, original → STALE,
  clear the flag) holds it *exclusive*.  So a flag is never cleared while a write of the
  same file is between its RMT update and its bytes, in any process.  POSIX locks belong to
  the process, so threads of one process never conflict (they are serialised by the file's
  own lock), and a process killed with SIGKILL loses its locks: nothing to clean up.
* :class:`Generation` — a 64-bit counter in a shared ``mmap`` of ``DIR/rmt.gen``,
  incremented after every committed RMT change.  A process compares it with the value it
  last saw before using its in-memory RMT cache: one aligned 8-byte load (~0.1 µs), far
  cheaper than asking SQLite (``PRAGMA data_version``) on every request.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import mmap
import os
import threading
import time
from pathlib import Path

from .. import ParioError

DEFAULT_TIMEOUT = 60.0


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
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
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


class SyncLocks:
    """Per-file shared/exclusive POSIX record locks on ``DIR/.sync.lock`` (byte = file id)."""

    def __init__(self, path: Path, timeout: float = DEFAULT_TIMEOUT):
        self.path = Path(path)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        self.timeout = timeout
        self._held: dict[int, list] = {}   # fid -> [mode, depth]  (this process)
        self._mu = threading.Lock()

    def _set(self, kind: int, fid: int, wait: bool) -> bool:
        try:
            fcntl.lockf(self.fd, kind | (0 if wait else fcntl.LOCK_NB), 1, fid)
            return True
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                return False
            raise

    def acquire(self, fid: int, exclusive: bool, name: str = "") -> None:
        """Re-entrant per process: a nested acquire of a held byte only counts (an exclusive
        inside a shared hold upgrades it)."""
        with self._mu:
            cur = self._held.get(fid)
            if cur is not None and (cur[0] or not exclusive):
                cur[1] += 1
                return
        kind = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        if not self._set(kind, fid, False):
            what = (f"the {'exclusive' if exclusive else 'shared'} sync lock of {name or fid!r} in {self.path.parent} "
                    "(another process is synchronising or writing it; a stopped or hung process?)")
            _poll(lambda: self._set(kind, fid, False), self.timeout, what)
        with self._mu:
            cur = self._held.get(fid)
            if cur is None:
                self._held[fid] = [exclusive, 1]
            else:
                cur[0] = True
                cur[1] += 1

    def release(self, fid: int) -> None:
        with self._mu:
            cur = self._held.get(fid)
            if cur is None:
                return
            cur[1] -= 1
            if cur[1] > 0:
                return
            del self._held[fid]
        fcntl.lockf(self.fd, fcntl.LOCK_UN, 1, fid)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class _Held:
    __slots__ = ("locks", "fid", "exclusive", "name")

    def __init__(self, locks, fid, exclusive, name):
        self.locks, self.fid, self.exclusive, self.name = locks, fid, exclusive, name

    def __enter__(self):
        if self.locks is not None:
            self.locks.acquire(self.fid, self.exclusive, self.name)
        return self

    def __exit__(self, *exc):
        if self.locks is not None:
            self.locks.release(self.fid)


def held(locks: SyncLocks | None, fid: int, exclusive: bool, name: str = "") -> _Held:
    """Context manager; ``locks=None`` (exclusive store) does nothing."""
    return _Held(locks, fid, exclusive, name)


class Generation:
    """A shared 64-bit change counter (``mmap`` of a small file; increments under ``flock``)."""

    SIZE = 4096

    def __init__(self, path: Path):
        self.path = Path(path)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        if os.fstat(self.fd).st_size < self.SIZE:
            os.ftruncate(self.fd, self.SIZE)   # concurrent openers: same size, content kept
        self.mm = mmap.mmap(self.fd, self.SIZE)
        self._v = ctypes.c_int64.from_buffer(self.mm)   # aligned 8-byte loads/stores

    def value(self) -> int:
        return self._v.value

    def bump(self) -> int:
        """Increment; returns the value before the increment."""
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        try:
            old = self._v.value
            self._v.value = old + 1
            return old
        finally:
            fcntl.flock(self.fd, fcntl.LOCK_UN)

    def close(self) -> None:
        if self.mm is not None:
            del self._v
            self.mm.close()
            self.mm = None
            os.close(self.fd)
            self.fd = -1


__all__ = ["StoreLock", "SyncLocks", "Generation", "held", "DEFAULT_TIMEOUT"]
