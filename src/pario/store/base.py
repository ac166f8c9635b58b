"""The store backend interface (in the spirit of IOR's ``aiori`` interface).

A *backend* keeps logical files, each placed on the servers of a system profile by a
:class:`~pario.layout.Layout`, and moves bytes with the exact mapping of
:func:`pario.layout.map_requests`.  It knows nothing about replicas: the CEDA data path
(RMT, replicator, redirector) and hybrid replication sit above it (:mod:`pario.store.root`,
:mod:`pario.store.redirect`) and only call the methods below, so a distributed backend
(CephFS, RADOS) plugs in by implementing this class.

Every method works on logical file names (``str``) or on a handle from :meth:`open`;
offsets and lengths are logical (file) offsets.  Errors the user can fix are
:class:`pario.ParioError`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from ..layout import Layout


@dataclass(frozen=True)
class FileStat:
    """``stat`` of a logical file: size, layout and per-server logical bytes (index = server)."""

    name: str
    size: int
    layout: Layout
    server_bytes: np.ndarray


class Handle(ABC):
    """An open logical file of a backend (``name``, ``layout``, current ``size``)."""

    name: str
    layout: Layout
    size: int


class Backend(ABC):
    """One store backend: create, open, read at, write at, stat, truncate, delete, usage."""

    #: backend name as written in ``store.json`` (``"local"``)
    kind = "base"

    @abstractmethod
    def create(self, name: str, layout: Layout, *, exist_ok: bool = False) -> None:
        """Create an empty logical file with ``layout``."""

    @abstractmethod
    def open(self, name: str) -> Handle:
        """Open an existing logical file (ParioError if absent)."""

    @abstractmethod
    def close(self, h: Handle) -> None:
        """Persist the size and release the handle's resources."""

    @abstractmethod
    def readinto(self, h: Handle, offset: int, buf) -> int:
        """Read ``len(buf)`` bytes at ``offset`` into the writable buffer ``buf``; holes and
        bytes past the end of the file read as 0; returns the bytes inside the file."""

    @abstractmethod
    def write_at(self, h: Handle, offset: int, data) -> int:
        """Write ``data`` (bytes-like) at ``offset``; extends the file; returns ``len(data)``."""

    @abstractmethod
    def readv(self, h: Handle, offsets, lengths, buf, buf_offsets) -> None:
        """Vectorised read: ``[offsets[k], +lengths[k])`` into ``buf[buf_offsets[k]:]``."""

    @abstractmethod
    def writev(self, h: Handle, offsets, lengths, buf, buf_offsets) -> None:
        """Vectorised write: ``buf[buf_offsets[k]:+lengths[k]]`` to ``[offsets[k], +lengths[k])``."""

    @abstractmethod
    def fsync(self, h: Handle, everything: bool = False) -> None:
        """Make the bytes written through ``h`` and the size durable (``everything``: all of
        the file's bytes, whoever wrote them)."""

    @abstractmethod
    def truncate(self, h: Handle, size: int) -> None:
        """Set the logical size (shrinking discards bytes, growing adds a hole)."""

    @abstractmethod
    def stat(self, name: str) -> FileStat:
        """Size, layout and per-server bytes of a logical file."""

    @abstractmethod
    def delete(self, name: str) -> None:
        """Remove a logical file and its data."""

    @abstractmethod
    def exists(self, name: str) -> bool:
        """Whether a logical file exists."""

    @abstractmethod
    def list(self) -> list[str]:
        """Names of all logical files."""

    @abstractmethod
    def usage(self) -> np.ndarray:
        """Per-server bytes allocated by this store (index = server)."""

    @abstractmethod
    def free_space(self) -> np.ndarray:
        """Per-server free bytes of the storage behind each server (index = server)."""

    # ------------------------------------------------------------------ conveniences
    def read1(self, h: Handle, offset: int, length: int, mv) -> None:
        """One range into ``mv[:length]`` (backends may override with a scalar fast path)."""
        self.readv(h, (offset,), (length,), mv, (0,))

    def write1(self, h: Handle, offset: int, mv) -> None:
        """Write the bytes of ``mv`` at ``offset`` (backends may override with a scalar fast path)."""
        self.writev(h, (offset,), (len(mv),), mv, (0,))

    def copy(self, src: Handle, src_offsets, dst: Handle, dst_offsets, lengths) -> None:
        """Copy ranges of ``src`` to ranges of ``dst`` (default: through a buffer)."""
        lens = np.asarray(lengths, dtype=np.int64)
        bo = np.concatenate(([0], np.cumsum(lens)[:-1])) if len(lens) else lens
        buf = bytearray(int(lens.sum()))
        self.readv(src, src_offsets, lens, buf, bo)
        self.writev(dst, dst_offsets, lens, buf, bo)

    def extend(self, h: Handle, end: int) -> None:
        """The logical size grows to ``end`` (its bytes were written elsewhere)."""
        h.size = max(h.size, int(end))

    def reserve(self, h: Handle, end: int) -> None:
        """The logical size grows to ``end`` and the file's own storage holds that size (its
        bytes were written elsewhere, e.g. to a replica; a crash or another process must
        still see the size); default: :meth:`extend`."""
        self.extend(h, end)

    def resized(self, h: Handle, size: int) -> None:
        """Another process set the file's size to ``size``: the handle's size is that, and an
        extension it made before is void (default: the handle's size only)."""
        h.size = int(size)

    def refresh_size(self, h: Handle) -> int:
        """The size as other processes left it (shared stores); default: the handle's."""
        return h.size

    def read_at(self, h: Handle, offset: int, length: int) -> bytes:
        """``length`` bytes at ``offset`` (clipped at the end of the file)."""
        n = max(0, min(int(length), h.size - int(offset)))
        buf = bytearray(n)
        if n:
            self.readinto(h, offset, memoryview(buf))
        return bytes(buf)
