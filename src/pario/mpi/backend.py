"""Byte back ends of :class:`pario.mpi.File`: a plain POSIX file or a pario store file.

Every back end offers ``pread_into(buf, offset) -> n``, ``pwrite(offset, data)``,
``size()``, ``set_size(n)``, ``sync()``, ``close()`` and ``placement()`` (the file's
:class:`~pario.mpi.placement.Placement` or None).  Independent and collective requests of
the MPI-IO layer both end up here: the collective path calls it from the aggregators.
"""

from __future__ import annotations

import os

import numpy as np

from .. import ParioError


class PosixBackend:
    """A plain file opened by every rank with ``os.open`` (pread/pwrite)."""

    def __init__(self, path: str, flags: int, placement=None):
        self.path = path
        try:
            self.fd = os.open(path, flags, 0o666)
        except OSError as exc:
            raise ParioError(f"cannot open {path}: {exc.strerror}") from None
        self._placement = placement

    def pread_into(self, buf: np.ndarray, offset: int) -> int:
        mv = memoryview(buf)
        got = 0
        n = len(mv)
        while got < n:
            k = os.preadv(self.fd, [mv[got:]], offset + got)
            if k <= 0:
                break
            got += k
        return got

    def pwrite(self, offset: int, data) -> int:
        mv = memoryview(data)
        done = 0
        n = len(mv)
        while done < n:
            done += os.pwrite(self.fd, mv[done:], offset + done)
        return done

    def pwritev(self, offset: int, bufs) -> int:
        """Write the buffers back to back at ``offset`` (``pwritev``, IOV_MAX per call)."""
        return _vectored(os.pwritev, self.fd, bufs, offset, stop_at_eof=False)

    def preadv_into(self, bufs, offset: int) -> int:
        """Fill the buffers back to back from ``offset``; returns bytes read (short at EOF)."""
        return _vectored(os.preadv, self.fd, bufs, offset, stop_at_eof=True)

    def size(self) -> int:
        return os.fstat(self.fd).st_size

    def set_size(self, n: int) -> None:
        os.ftruncate(self.fd, n)

    def resized(self, n: int) -> None:
        """Another rank set the size (the file system knows it already)."""

    def sync(self) -> None:
        os.fsync(self.fd)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def placement(self):
        return self._placement


def _vectored(call, fd: int, bufs, offset: int, *, stop_at_eof: bool) -> int:
    """``os.pwritev``/``os.preadv`` over any number of buffers (IOV_MAX per call), resuming
    after short transfers; a read stops at the end of the file.  Returns the bytes moved."""
    bufs = [memoryview(b).cast("B") for b in bufs]
    done = 0
    i = 0
    while i < len(bufs):
        chunk = bufs[i:i + 1024]
        want = sum(len(b) for b in chunk)
        k = call(fd, chunk, offset + done)
        if k <= 0 and stop_at_eof:
            break
        done += k
        if k == want:
            i += len(chunk)
            continue
        bufs = _drop(chunk, k) + bufs[i + len(chunk):]   # short transfer: continue after it
        i = 0
    return done


def _drop(bufs, n: int):
    """The buffers after their first ``n`` bytes."""
    out = []
    for b in bufs:
        if n >= len(b):
            n -= len(b)
            continue
        out.append(b[n:])
        n = 0
    return out


def posix_flags(amode: int, *, creating: bool) -> int:
    from mpi4py import MPI

    if amode & MPI.MODE_RDONLY:
        fl = os.O_RDONLY
    elif amode & MPI.MODE_WRONLY:
        fl = os.O_WRONLY
    else:
        fl = os.O_RDWR
    if creating and amode & MPI.MODE_CREATE:
        fl |= os.O_CREAT
        if amode & MPI.MODE_EXCL:
            fl |= os.O_EXCL
    return fl
