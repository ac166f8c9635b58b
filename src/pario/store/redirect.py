"""An open file of a store: the redirector (CEDA seed 000 §4.6, §5.2) and hybrid routing
(CI-LAYOUT seed 002 §5), in the store engine.

:class:`File` is the Python face of the engine's redirected file
(``src/pario/native/store/redirect.c``, the same code that serves MPI programs):

* a read asks the RMT where each part of it goes — the original where no entry overlaps (the
  common case), else a DIRTY replica, else a CLEAN one (route ``replica``, CEDA) or the
  cheapest up-to-date copy (route ``cheapest``, hybrid: the profile's per-request cost, or
  the store's ``cost``); stale copies are never read;
* a write goes to the copy a read would use, the flag change recorded first (the target
  DIRTY, every other copy STALE), then the bytes; a write into a partial replica's own
  extents where no copy is readable (after a truncation, past the end) goes to that
  replica, DIRTY (the bytes first, then the claim); an extending write makes the original's
  data files hold the new size first;
* :meth:`File.flush` (and close, and a first opener's recovery) copies DIRTY replica bytes
  back to the original, then refreshes STALE replicas, in batches of up to 64 MiB, each
  made durable before its flags are cleared; hybrid replicas left STALE by writes are
  synchronised in the background by the engine's lazy-sync thread;
* several processes (a shared store): a write holds its byte range of the store's range
  lock shared from the lookup to its last byte, a synchronisation batch exclusive; the
  engine follows other processes' journal records before every lookup.

docs/store.md has the whole argument; tests/store/test_redirect.py and the crash stresses check it.
"""

from __future__ import annotations

import time

import numpy as np

from .. import ParioError


class File:
    """An open file of a store, with RMT redirection and hybrid routing (the engine's)."""

    def __init__(self, store, name: str):
        self.store = store
        self.name = name
        self.ef = store.engine.open(name)
        self.fid = self.ef.fid
        self.shared = bool(store.shared)
        self.closed = False
        self.refs = 1

    @property
    def size(self) -> int:
        return self.ef.size

    def current_size(self) -> int:
        """The size including other processes' writes (shared store); else :attr:`size`."""
        return self.ef.current_size() if self.shared else self.ef.size

    @property
    def layout(self):
        return self.store.backend.layout_of(self.fid)

    @property
    def stats(self) -> dict:
        """Calls, redirected calls and bytes by copy (the engine's counters)."""
        return self.ef.stats()

    # ------------------------------------------------------------------ routing (reports)
    def served_by(self, x: int, e: int) -> list[tuple[int, int, str | None]]:
        """Where a read of ``[x, e)`` goes now: ``(start, end, replica file or None for the
        original)`` per segment, the engine's own decision (for reports and tests)."""
        name = self.store.rmt.name
        return [(s, t, name(r) if r else None) for s, t, r in self.ef.served_by(int(x), int(e))]

    # ------------------------------------------------------------------ I/O
    def readinto(self, offset: int, buf) -> int:
        """Read ``len(buf)`` bytes at ``offset``; bytes past the end read as 0; returns bytes inside the file."""
        if int(offset) < 0:
            raise ParioError("read: offset must be >= 0")
        self.store.fg_last = time.monotonic()
        return self.ef.readinto(int(offset), buf)

    def read(self, offset: int, length: int) -> bytes:
        length = max(0, int(length))
        buf = bytearray(length)
        n = self.readinto(offset, buf) if length else 0
        return bytes(buf[:n]) if n < length else bytes(buf)

    def write(self, offset: int, data) -> int:
        """Write ``data`` at ``offset`` (redirected to replicas where the RMT says so)."""
        if int(offset) < 0:
            raise ParioError("write: offset must be >= 0")
        self.store.fg_last = time.monotonic()
        return self.ef.write(int(offset), data)

    def readv(self, offsets, lengths, buf, buf_offsets) -> None:
        """Read many ranges at once: ``[offsets[k], +lengths[k])`` → ``buf[buf_offsets[k]:]``
        (zeros past the end)."""
        o, ln, bo = _vec(offsets, lengths, buf_offsets)
        if len(o):
            self.store.fg_last = time.monotonic()
            self.ef.readv(o, ln, buf, bo)

    def writev(self, offsets, lengths, buf, buf_offsets) -> None:
        """Write many non-overlapping ranges at once (``buf[buf_offsets[k]:+lengths[k]]`` →
        ``offsets[k]``)."""
        o, ln, bo = _vec(offsets, lengths, buf_offsets)
        if len(o) == 0:
            return
        if int(o.min()) < 0:
            raise ParioError("write: offset must be >= 0")
        self.store.fg_last = time.monotonic()
        self.ef.writev(o, ln, buf, bo)

    def truncate(self, size: int) -> None:
        self.ef.truncate(int(size))

    def resized(self, size: int) -> None:
        """Another process of the job set the size to ``size`` (MPI_File_set_size on rank 0):
        this handle's size is that, and an extension it made before is void."""
        self.ef.resized(int(size))

    # ------------------------------------------------------------------ synchronisation
    def sync_step(self, chunk: int = 4 << 20) -> bool:
        """Synchronise at most ``chunk`` bytes (lazy synchronisation, hybrid replication):
        DIRTY replica ranges → original first, then original → STALE replicas.  Returns
        whether unclean entries remain."""
        return False if self.closed else self.ef.sync_step(int(chunk))

    def flush(self) -> None:
        """Write dirty replica data back and refresh stale replicas (CEDA: at close)."""
        self.ef.flush()

    def fsync(self) -> None:
        """Make every byte written so far durable: data files (original and replicas), size,
        and the RMT records that say where the newest bytes are (FRESH replicas CLEAN)."""
        self.ef.fsync()

    def close(self) -> None:
        if self.closed:
            return
        self.store._release(self)

    def _close_now(self) -> None:
        self.closed = True
        self.ef.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _vec(offsets, lengths, buf_offsets):
    """int64 arrays of a vectored request, zero-length ranges dropped."""
    o = np.asarray(offsets, dtype=np.int64).ravel()
    ln = np.asarray(lengths, dtype=np.int64).ravel()
    bo = np.asarray(buf_offsets, dtype=np.int64).ravel()
    if not (len(o) == len(ln) == len(bo)):
        raise ParioError("vectored I/O: offsets, lengths and buffer offsets differ in length")
    keep = ln > 0
    if not keep.all():
        o, ln, bo = o[keep], ln[keep], bo[keep]
    return np.ascontiguousarray(o), np.ascontiguousarray(ln), np.ascontiguousarray(bo)
