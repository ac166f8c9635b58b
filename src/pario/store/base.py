"""The store backend: a store's files and their data, through the store engine.

The bytes of a logical file — placed on the servers of a system profile by its
:class:`~pario.layout.Layout` with the mapping of :func:`pario.layout.map_requests` — are moved
by the store engine in C (``src/pario/native/store``: layouts, data files behind one plane
interface, sizes, ``dirty`` marks and their recovery; bound as ``pario.native._rmt``), the
same code that serves MPI programs.  A backend here is the Python face of one engine's
files (:class:`Backend`: names, handles, vectored reads and writes, copies, sizes) plus what
only its data plane knows (one subclass per plane, as IOR's ``aiori`` files: where data
files live, how to list, measure and remove them — :mod:`pario.store.local`,
:mod:`pario.store.rados`).  It knows nothing about replicas: the CEDA data path (RMT,
replicator, redirector) and hybrid replication sit above it.

Every method works on logical file names (``str``) or on a handle from :meth:`open`;
offsets and lengths are logical (file) offsets.  Errors the user can fix are
:class:`pario.ParioError`.
"""

from __future__ import annotations

import json
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from .. import ParioError
from ..layout import ExtentMap, Layout, layout_from_dict, layout_to_dict


@dataclass(frozen=True)
class FileStat:
    """``stat`` of a logical file: size, layout and per-server logical bytes (index = server)."""

    name: str
    size: int
    layout: Layout
    server_bytes: np.ndarray


def _i64(v) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(v, dtype=np.int64).reshape(-1))


class Handle:
    """An open logical file of a backend: ``name``, ``id``, ``layout``, current ``size`` (the
    engine's handle, ``sf``)."""

    __slots__ = ("backend", "name", "id", "layout", "sf")

    def __init__(self, backend: "Backend", name: str, sf, layout: Layout):
        self.backend, self.name, self.sf, self.layout = backend, name, sf, layout
        self.id = sf.id

    @property
    def size(self) -> int:
        return self.sf.size


class Backend(ABC):
    """One store's files through its engine (module docstring); a data plane's subclass adds
    where its data files live."""

    #: the plane's name: ``store.json``'s ``"backend"`` and its key in :data:`pario.store.PLANES`
    name = "base"
    #: reads pass through a client page cache (False: every request reaches the servers, as
    #: O_DIRECT's do; ``pario run`` then measures the devices without dropping caches)
    page_cache = True

    def __init__(self, root, system, engine, meta):
        self.root = root
        self.system = system
        self.engine = engine
        self.meta = meta
        self._lock = threading.RLock()
        self._layouts: dict[int, Layout] = {}

    # ------------------------------------------------------------------ the data plane's part
    # (a plane is chosen by name through :data:`pario.store.PLANES`: :func:`init_store` asks
    # it for a new store's configuration, :class:`Store` for the arguments of its constructor)
    @classmethod
    @abstractmethod
    def configure(cls, system, *, servers=None, cluster=None, object_size=None):
        """A new store's plane: ``(system, entries)`` -- the :class:`~pario.system.System`
        (``system``: a profile name, file, System or None for the plane's default) and the
        plane's ``store.json`` entries; every option checked (a one-line ParioError), nothing
        created yet."""

    @classmethod
    def prepare(cls, root, entries: dict) -> None:
        """Create what the plane keeps in a new store's (empty) directory ``root``."""

    @classmethod
    @abstractmethod
    def options(cls, root, system, cfg: dict) -> dict:
        """The constructor's keyword arguments for the store at ``root`` whose ``store.json``
        is ``cfg`` (checked: a missing entry or mount is a one-line ParioError)."""

    @classmethod
    def holds_data(cls, **options) -> bool:
        """Whether the plane holds data files of the store before it is opened (a missing
        metadata database would lose them); planes that cannot tell cheaply say False."""
        return False

    @abstractmethod
    def _unlink_data(self, fid: int) -> None:
        """Remove every data file of file id ``fid``."""

    @abstractmethod
    def _has_data(self, fid: int) -> str | None:
        """A data file of ``fid`` (its name), if there is one, else None."""

    @abstractmethod
    def datafiles(self) -> list[tuple[int, object, int, int]]:
        """Every entry where the plane keeps data: (server, path or object, file id, data
        file number); names that are not data files' get id -1, links and special files -2."""

    @abstractmethod
    def usage(self) -> np.ndarray:
        """Per-server bytes allocated by this store (index = server)."""

    @abstractmethod
    def free_space(self) -> np.ndarray:
        """Per-server free bytes of the storage behind each server (index = server)."""

    # ------------------------------------------------------------------ namespace
    def layout_of(self, fid: int, layout_json=None) -> Layout:
        lay = self._layouts.get(fid)
        if lay is None:
            if layout_json is None:
                rec = self.meta.get_id(fid)
                if rec is None:
                    raise ParioError(f"no file with id {fid} in the store")
                layout_json = rec[1]
            lay = layout_from_dict(layout_json if isinstance(layout_json, dict) else json.loads(layout_json),
                                   self.system)
            self._layouts[fid] = lay
        return lay

    def create(self, name: str, layout: Layout, *, exist_ok: bool = False) -> None:
        bad = [s for s in layout.servers_used() if s >= self.system.n]
        if bad:
            raise ParioError(f"layout uses server index {bad[0]} but system {self.system.name!r} has {self.system.n} servers")
        with self._lock:
            if self.meta.get(name) is not None:
                if exist_ok:
                    return
                raise ParioError(f"file {name!r} already exists in the store")
            fid = self.meta.create(name, layout_to_dict(layout, self.system))
            stale = self._has_data(fid)
            if stale:       # a new id must have no data: never hand a new file an old one's bytes
                self.meta.delete(name)
                raise ParioError(f"store {self.root}: data file {stale} exists for the new file id {fid} (lost "
                                 f"metadata?); nothing was created: run 'pario store fsck --store {self.root}'")

    def exists(self, name: str) -> bool:
        return self.meta.get(name) is not None

    def list(self) -> list[str]:
        return self.meta.names()

    def open(self, name: str) -> Handle:
        rec = self.meta.get(name)
        if rec is None:
            raise ParioError(f"no file {name!r} in the store")
        sf = self.engine.sfile(name)
        return Handle(self, name, sf, self.layout_of(sf.id, rec[1]))

    def close(self, h: Handle) -> None:
        h.sf.close()

    def delete(self, name: str) -> None:
        with self._lock:
            rec = self.meta.get(name)
            if rec is None:
                raise ParioError(f"no file {name!r} in the store")
            self.meta.delete(name)  # committed first: a crash leaves orphan data (fsck), not a broken file
            self._unlink_data(rec[0])

    def discard(self, name: str) -> None:
        """Remove a file nobody reads (an unfinished upload): its data files first — that
        frees space even on a full file system — then its metadata."""
        with self._lock:
            rec = self.meta.get(name)
            if rec is None:
                return
            self._unlink_data(rec[0])
            self.meta.delete(name)

    def rename(self, old: str, new: str) -> None:
        """Give a closed file another name (one metadata update: atomic)."""
        self.meta.rename(old, new)

    # ------------------------------------------------------------------ data
    def readv(self, h: Handle, offsets, lengths, buf, buf_offsets) -> None:
        """Vectorised read: ``[offsets[k], +lengths[k])`` into ``buf[buf_offsets[k]:]`` (no
        size clamp: bytes past the data read as 0)."""
        h.sf.readv(_i64(offsets), _i64(lengths), buf, _i64(buf_offsets))

    def writev(self, h: Handle, offsets, lengths, buf, buf_offsets) -> None:
        """Vectorised write: ``buf[buf_offsets[k]:+lengths[k]]`` to ``[offsets[k], +lengths[k])``."""
        h.sf.writev(_i64(offsets), _i64(lengths), buf, _i64(buf_offsets))

    def readinto(self, h: Handle, offset: int, buf) -> int:
        """Read ``len(buf)`` bytes at ``offset``; bytes past the end read as 0; returns the
        bytes inside the file."""
        mv = memoryview(buf).cast("B")
        h.sf.readv(_i64([offset]), _i64([len(mv)]), mv, _i64([0]))
        return max(0, min(len(mv), h.size - int(offset)))

    def read_at(self, h: Handle, offset: int, length: int) -> bytes:
        """``length`` bytes at ``offset`` (clipped at the end of the file)."""
        n = max(0, min(int(length), h.size - int(offset)))
        buf = bytearray(n)
        if n:
            self.readinto(h, offset, memoryview(buf))
        return bytes(buf)

    def write_at(self, h: Handle, offset: int, data) -> int:
        mv = memoryview(data).cast("B")
        h.sf.writev(_i64([offset]), _i64([len(mv)]), mv, _i64([0]))
        return len(mv)

    def copy(self, src: Handle, src_offsets, dst: Handle, dst_offsets, lengths) -> None:
        """Copy ranges of ``src`` to ranges of ``dst`` (data file to data file in the engine)."""
        self.engine.copy(src.sf, _i64(src_offsets), dst.sf, _i64(dst_offsets), _i64(lengths))

    def fsync(self, h: Handle, everything: bool = False) -> None:
        h.sf.fsync(bool(everything))

    def truncate(self, h: Handle, size: int) -> None:
        h.sf.truncate(int(size))

    def extend(self, h: Handle, end: int) -> None:
        """The logical size grows to ``end`` (its bytes were written elsewhere)."""
        h.sf.extend(int(end))

    def reserve(self, h: Handle, end: int) -> None:
        """As :meth:`extend`, and the data file of byte ``end - 1`` holds it (a crash or another
        process sees the size)."""
        h.sf.reserve(int(end))

    def resized(self, h: Handle, size: int) -> None:
        """Another process set the file's size to ``size``: the handle's size is that, and an
        extension it made before is void."""
        h.sf.resized(int(size))

    def refresh_size(self, h: Handle) -> int:
        """The size as other processes left it (shared stores)."""
        return h.sf.refresh_size()

    def finalize_sizes(self) -> None:
        """Recover and commit the size of every ``dirty`` file, clearing the flag (alone)."""
        self.engine.finalize_sizes()

    def size_problem(self, name: str) -> str | None:
        """A one-line description if the data files of ``name`` hold bytes past its recorded
        size although the metadata calls that size final (``dirty`` = 0) — a committed size
        was lost — else None."""
        rec = self.meta.get(name)
        if rec is None or rec[3]:
            return None
        h = self.open(name)
        try:
            if h.size != rec[2]:
                return None           # open here and extended: the size is not committed yet
            end = h.sf.recovered_size()
        finally:
            self.close(h)
        if end > rec[2]:
            return (f"file {name!r}: its data files hold bytes up to offset {end}, past its recorded size {rec[2]} "
                    f"({end - rec[2]} bytes; was the metadata's write-ahead log lost?)")
        return None

    # ------------------------------------------------------------------ reports
    def server_bytes(self, layout: Layout, size: int) -> np.ndarray:
        """Logical bytes of ``[0, size)`` per server under ``layout``."""
        out = np.zeros(self.system.n, dtype=np.int64)
        if size <= 0:
            return out
        if isinstance(layout, ExtentMap):
            np.add.at(out, layout.server, layout.length)
            return out
        servers, c = layout.counts(np.array([size], dtype=np.int64))
        out[servers] += c[:, 0]
        return out

    def stat(self, name: str) -> FileStat:
        """Size (as the engine has it: this process's writes included; a crashed extension
        recovered), layout and per-server bytes."""
        h = self.open(name)
        try:
            return FileStat(name, h.size, h.layout, self.server_bytes(h.layout, h.size))
        finally:
            self.close(h)

    def shutdown(self) -> None:
        """Nothing of the plane's own left open (the engine closes the files)."""
