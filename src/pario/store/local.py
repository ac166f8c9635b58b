"""The ``local`` backend: every server is a directory, every logical file one data file per server.

As OrangeFS keeps a *datafile* per server, logical file ``F`` (metadata id ``i``) stores
the bytes that its layout puts on server ``j`` in ``<server j dir>/<i:08d>.<d>`` at the
server-local offsets of :func:`pario.layout.map_requests` (``d`` = data file number: 0 for
the file's own data, ≥ 1 for the replica data files of an extent map).  Server directories
may live on different mounts (HDD vs SSD).  Holes stay holes: nothing is preallocated, and
bytes a data file does not have read as 0.

I/O: a request is cut into single-server pieces (:mod:`pario.store.pieces`), pieces of one
data file that are contiguous on the server become one ``os.preadv``/``os.pwritev`` whose
buffers are memoryview slices of the caller's buffer (no copies).  ``direct=True`` opens the
data files with ``O_DIRECT`` and goes through page-aligned ``mmap`` buffers; pieces must then
be 4 KiB aligned, and a file system that refuses ``O_DIRECT`` (tmpfs) is a clear error.

Per-server concurrency: as a parallel file system client sends one sub-request to every
server a request touches and the servers work at the same time (OrangeFS; CEDA seed 000
§3 eq. (4) takes a request's time as the *max* over its servers, not the sum), a request
that spans several servers and moves at least ``PARALLEL_MIN`` (1 MiB) runs each server's
runs in its own thread of a small per-process pool (``os.preadv``/``os.pwritev`` release
the GIL); the caller does one server itself, waits for all (the buffers are the caller's),
and re-raises the first exception of any of them.  Smaller requests, and requests on one
server, stay in the calling thread.  A forked child starts a pool of its own.  A common
request on one server goes through :meth:`LocalBackend.read1`/``write1``: the handle's
precomputed single-piece mapper (:func:`~pario.store.pieces.one_piece`) and one syscall.

Size: kept in memory while a file is open; the first extending write marks the file
``dirty`` in the metadata, close/fsync commit the size; after a crash the next open
recovers the size from the data-file sizes (exact for striped, 2-D and region layouts).

Shared mode (``shared=True``: several processes use the store at once): a process commits
sizes with ``MAX`` and never clears ``dirty`` (another process may be extending the file);
a read that reaches past the size this process knows, and :meth:`LocalBackend.refresh_size`,
take the size from the metadata and, while ``dirty``, from the data files (what every
process has written).  ``dirty`` is cleared by :meth:`LocalBackend.finalize_sizes` when a
process is alone (the last one to close, or the next exclusive open).
"""

from __future__ import annotations

import errno
import mmap
import os
import queue
import re
import struct
import threading
from pathlib import Path

import numpy as np

from .. import ParioError
from ..layout import ExtentMap, Layout, layout_from_dict, layout_to_dict
from .base import Backend, FileStat, Handle
from .meta import Meta
from .pieces import fast_pieces, one_piece, pieces

DATAFILE = re.compile(r"^(\d{8,})\.(\d+)$")    # <id:08d>.<data file>: the only names in a server directory
ALIGN = 4096
IOV_MAX = 1024
FAST_RANGES = 8192   # vectored requests of up to this many ranges are cut by the scalar fast path
COPY_WITH = "kernel"  # LocalBackend.copy: "kernel" (copy_file_range) or "buffer" (preadv + pwritev)
COPY_BUF = 64 << 20
_DIRECT = getattr(os, "O_DIRECT", 0)


def probe_direct(directory: Path) -> None:
    """ParioError if the file system of ``directory`` refuses O_DIRECT."""
    p = Path(directory) / ".pario-direct-probe"
    try:
        fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | _DIRECT, 0o644)
    except OSError as exc:
        if exc.errno == errno.EINVAL:
            raise ParioError(f"{directory}: the file system refuses O_DIRECT (older tmpfs does); "
                             "open the store without direct I/O") from None
        raise ParioError(f"{directory}: cannot probe O_DIRECT ({exc.strerror})") from None
    os.close(fd)
    p.unlink(missing_ok=True)


# ---------------------------------------------------------------------- per-server concurrency
PARALLEL_MIN = 1 << 20    # a request moving at least this many bytes over ≥ 2 servers runs them concurrently
IO_THREADS = 8            # at most this many worker threads per process (they only sit in preadv/pwritev)


def _finish(fd, bufs, pos, done, write: bool) -> None:
    """Complete a short ``pwritev``/``preadv`` of ``bufs`` at ``pos`` that moved ``done``
    bytes: the rest buffer by buffer; a read that hits the end of the data file fills zeros."""
    for b in bufs:
        n = len(b)
        if done >= n:
            done -= n
            pos += n
            continue
        view = b[done:]
        p = pos + done
        while len(view):
            r = os.pwrite(fd, view, p) if write else os.preadv(fd, [view], p)
            if r <= 0 and not write:
                view[:] = bytes(len(view))
                break
            view, p = view[r:], p + r
        pos += n
        done = 0


def _transfer(runs, write: bool) -> None:
    """One server's sub-request: its runs ``(fd, pos, want, bufs)`` one after another."""
    if write:
        for fd, pos, want, bufs in runs:
            done = os.pwritev(fd, bufs, pos)
            if done < want:             # rare partial write: finish piece by piece
                _finish(fd, bufs, pos, done, True)
    else:
        for fd, pos, want, bufs in runs:
            done = os.preadv(fd, bufs, pos)
            if done < want:             # past the data file's end: a hole, reads as 0
                _finish(fd, bufs, pos, done, False)


def _piece_pairs(src, sp, dst, dp, total: int) -> list[tuple[int, int, int, int, int]]:
    """Walk the pieces of both sides (``(server, datafile, local, length, buf_offset)``
    lists in buffer order) together: ``(src fd, src pos, dst fd, dst pos, n)`` runs, the ones
    that continue each other on both sides merged."""
    s_srv, s_df, s_loc, s_ln, s_bo = sp
    d_srv, d_df, d_loc, d_ln, d_bo = dp
    out: list[list[int]] = []
    i = j = 0
    pos = 0
    while pos < total:
        while s_bo[i] + s_ln[i] <= pos:
            i += 1
        while d_bo[j] + d_ln[j] <= pos:
            j += 1
        n = min(s_bo[i] + s_ln[i], d_bo[j] + d_ln[j]) - pos
        sfd = src.fd(s_srv[i], s_df[i])
        dfd = dst.fd(d_srv[j], d_df[j])
        spos = s_loc[i] + pos - s_bo[i]
        dpos = d_loc[j] + pos - d_bo[j]
        if out and out[-1][0] == sfd and out[-1][2] == dfd and out[-1][1] + out[-1][4] == spos \
                and out[-1][3] + out[-1][4] == dpos:
            out[-1][4] += n
        else:
            out.append([sfd, spos, dfd, dpos, n])
        pos += n
    return [tuple(r) for r in out]


_ZEROS = bytes(1 << 20)


def _copy_range(sfd: int, spos: int, dfd: int, dpos: int, n: int) -> None:
    """``n`` bytes from ``sfd`` at ``spos`` to ``dfd`` at ``dpos``: ``copy_file_range``,
    else ``pread``/``pwrite``; bytes past the source's end are zeros."""
    cfr = getattr(os, "copy_file_range", None)
    while n > 0:
        k = -1
        if cfr is not None:
            try:
                k = cfr(sfd, dfd, n, spos, dpos)
            except OSError as exc:
                if exc.errno not in (errno.EXDEV, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EBADF):
                    raise
                cfr = None
        if k < 0:
            data = os.pread(sfd, min(n, 16 << 20), spos)
            k = len(data)
            if k:
                view = memoryview(data)
                w = 0
                while w < k:
                    w += os.pwrite(dfd, view[w:], dpos + w)
        if k == 0:                     # past the end of the source data file: a hole
            while n > 0:
                z = min(n, len(_ZEROS))
                w = os.pwrite(dfd, _ZEROS[:z], dpos)
                dpos += w
                n -= w
            return
        spos += k
        dpos += k
        n -= k


class _Pool:
    """Daemon threads taking ``(fn, args, reply)`` from one queue and putting ``None`` or the
    raised exception on ``reply``.  ``os.preadv``/``os.pwritev`` release the GIL, so the
    sub-requests of different servers overlap on the devices (and in the kernel's copies)."""

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.threads: list[threading.Thread] = []
        self.mu = threading.Lock()
        self.calls = 0           # parallel requests served (tests check that the path is taken)

    def ensure(self, n: int) -> None:
        if len(self.threads) >= n:
            return
        with self.mu:
            while len(self.threads) < min(n, IO_THREADS):
                t = threading.Thread(target=self._work, name=f"pario-io-{len(self.threads)}", daemon=True)
                t.start()
                self.threads.append(t)

    def _work(self) -> None:
        get = self.jobs.get
        while True:
            fn, args, reply = get()
            try:
                fn(*args)
                r = None
            except BaseException as exc:        # handed to the caller, re-raised there
                r = exc
            # drop the views of the caller's buffer *before* replying: the caller may then
            # release the buffer (an O_DIRECT mmap cannot close while views of it exist)
            fn = args = None
            reply.put(r)
            r = reply = None


_POOL: _Pool | None = None
_POOL_MU = threading.Lock()


def _pool() -> _Pool:
    global _POOL
    p = _POOL
    if p is None:
        with _POOL_MU:
            if _POOL is None:
                _POOL = _Pool()
            p = _POOL
    return p


def _forget_pool() -> None:      # a forked child has none of the parent's threads
    global _POOL, _POOL_MU
    _POOL, _POOL_MU = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def _parallel(fn, arglist) -> None:
    """``fn(*args)`` for every ``args`` of ``arglist``: the first in the calling thread, the
    others in the pool.  Returns only when all have finished (the buffers they fill or drain
    belong to the caller), then re-raises the first exception any of them raised."""
    pool = _pool()
    pool.ensure(len(arglist) - 1)
    pool.calls += 1
    reply: queue.SimpleQueue = queue.SimpleQueue()
    put = pool.jobs.put
    for args in arglist[1:]:
        put((fn, args, reply))
    err = None
    try:
        fn(*arglist[0])
    except BaseException as exc:
        err = exc
    pending = len(arglist) - 1
    while pending:
        try:
            r = reply.get()
        except BaseException as exc:     # e.g. KeyboardInterrupt: still wait for the workers
            if err is None:
                err = exc
            continue
        pending -= 1
        if r is not None and err is None:
            err = r
    if err is not None:
        raise err


class LocalHandle(Handle):
    def __init__(self, backend: "LocalBackend", name: str, fid: int, layout: Layout, size: int):
        self.backend, self.name, self.id, self.layout, self.size = backend, name, fid, layout, size
        self.fds: dict[tuple[int, int], int] = {}
        self.size_dirty = False      # extended here, size not committed yet
        self.dirty_marked = False    # shared mode: meta dirty=1 committed for this file
        self.refs = 1
        self.lock = threading.RLock()
        self.one = one_piece(layout)   # (x, L) -> ((server, datafile), local) | None

    def fd(self, server: int, datafile: int) -> int:
        key = (server, datafile)
        fd = self.fds.get(key)
        if fd is None:
            fd = self.backend._open_datafile(self.id, server, datafile)
            self.fds[key] = fd
        return fd


class LocalBackend(Backend):
    """Logical files over server directories (``servers[j]`` = directory of server j)."""

    kind = "local"
    #: :meth:`copy` may move bytes data file to data file in the kernel (``copy_file_range``)
    copy_in_kernel = True

    def __init__(self, root: Path, system, server_dirs: list[Path], *, direct: bool = False, shared: bool = False):
        self.root = Path(root)
        self.shared = bool(shared)
        self.system = system
        self.server_dirs = [Path(p) for p in server_dirs]
        for s, d in zip(system.servers, self.server_dirs):
            if not d.is_dir():
                raise ParioError(f"server {s.name} directory {d} is missing (is its mount there?)")
        self.direct = bool(direct)
        if self.direct and not _DIRECT:
            raise ParioError("O_DIRECT is not available on this platform")
        if self.direct:
            for d in self.server_dirs:
                probe_direct(d)
        self.meta = Meta(self.root / "meta.db", may_create=self.holds_nothing)
        self._lock = threading.RLock()
        self._handles: dict[str, LocalHandle] = {}

    def holds_nothing(self) -> bool:
        """The store holds nothing a missing metadata database would lose: no catalog, no
        journal record, no data file (a new store may create its database)."""
        from .catalog import CATALOG
        from .rmt_journal import HDR_SIZE, HEADER

        if (self.root / CATALOG).exists():
            return False
        try:
            with open(self.root / "rmt.log", "rb") as f:
                if HEADER.unpack(f.read(HEADER.size))[4] > HDR_SIZE:      # end: records were published
                    return False
        except (OSError, ValueError, struct.error):
            pass
        return not any(DATAFILE.match(e.name) for d in self.server_dirs if d.is_dir() for e in os.scandir(d))

    # ------------------------------------------------------------------ data files
    def datafile_path(self, fid: int, server: int, datafile: int) -> Path:
        return self.server_dirs[server] / f"{fid:08d}.{datafile}"

    def _open_datafile(self, fid: int, server: int, datafile: int) -> int:
        """The data file's descriptor: an existing one opened, else created with ``O_EXCL``
        (another process creating it at the same moment: opened); never through a symbolic
        link (``O_NOFOLLOW``: the store never follows a link it did not make)."""
        if server >= len(self.server_dirs):
            raise ParioError(f"layout uses server index {server} but the store has {len(self.server_dirs)} servers")
        path = self.datafile_path(fid, server, datafile)
        flags = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | (_DIRECT if self.direct else 0)
        try:
            try:
                return os.open(path, flags)
            except FileNotFoundError:
                try:
                    return os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o644)
                except FileExistsError:
                    return os.open(path, flags)
        except OSError as exc:
            if self.direct and exc.errno == errno.EINVAL:
                raise ParioError(f"{path.parent}: the file system refuses O_DIRECT (tmpfs does); "
                                 "open the store without direct I/O") from None
            if exc.errno == errno.ELOOP:
                raise ParioError(f"data file {path} is a symbolic link: pario never follows a link it did not make "
                                 f"(see 'pario store fsck --store {self.root}')") from None
            raise ParioError(f"cannot open data file {path}: {exc.strerror}") from None

    # ------------------------------------------------------------------ namespace
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
            stale = self._datafiles_of(fid)
            if stale:       # a new id must have no data: never hand a new file an old one's bytes
                self.meta.delete(name)
                raise ParioError(f"store {self.root}: data file {stale[0]} exists for the new file id {fid} (lost "
                                 f"metadata?); nothing was created: run 'pario store fsck --store {self.root}'")

    def _datafiles_of(self, fid: int) -> list[Path]:
        return [p for d in self.server_dirs for p in d.glob(f"{fid:08d}.*")]

    def exists(self, name: str) -> bool:
        return self.meta.get(name) is not None

    def list(self) -> list[str]:
        return self.meta.names()

    def open(self, name: str) -> LocalHandle:
        with self._lock:
            h = self._handles.get(name)
            if h is not None:
                h.refs += 1
                return h
            rec = self.meta.get(name)
            if rec is None:
                raise ParioError(f"no file {name!r} in the store")
            fid, lay, size, dirty = rec
            layout = layout_from_dict(lay, self.system)
            h = LocalHandle(self, name, fid, layout, size)
            if dirty:
                if self.shared:     # maybe another process is extending it: do not clear dirty
                    h.size = max(size, self._recover_size(h, size))
                    h.dirty_marked = True
                else:
                    h.size = self._recover_size(h, size)
                    self.meta.set_size(name, h.size, 0)
            self._handles[name] = h
            return h

    def close(self, h: LocalHandle) -> None:
        with self._lock:
            h.refs -= 1
            if h.refs > 0:
                return
            if h.size_dirty:
                self._sync_fds(h)
                self._commit_size(h)
            for fd in h.fds.values():
                os.close(fd)
            h.fds.clear()
            self._handles.pop(h.name, None)

    def delete(self, name: str) -> None:
        with self._lock:
            rec = self.meta.get(name)
            if rec is None:
                raise ParioError(f"no file {name!r} in the store")
            if name in self._handles:
                raise ParioError(f"file {name!r} is open")
            self.meta.delete(name)  # committed first: a crash leaves orphan data (fsck), not a broken file
            self._unlink_data(rec[0])

    def discard(self, name: str) -> None:
        """Remove a file nobody reads (an unfinished upload): its data files first — that
        frees space even on a full file system — then its metadata."""
        with self._lock:
            rec = self.meta.get(name)
            if rec is None:
                return
            h = self._handles.pop(name, None)
            if h is not None:
                for fd in h.fds.values():
                    os.close(fd)
                h.fds.clear()
            self._unlink_data(rec[0])
            self.meta.delete(name)

    def _unlink_data(self, fid: int) -> None:
        for p in self._datafiles_of(fid):
            p.unlink(missing_ok=True)

    def rename(self, old: str, new: str) -> None:
        """Give a closed file another name (one metadata update: atomic)."""
        with self._lock:
            if old in self._handles:
                raise ParioError(f"file {old!r} is open")
            self.meta.rename(old, new)

    # ------------------------------------------------------------------ size
    def _local_sizes(self, h: LocalHandle) -> dict[int, int]:
        out = {}
        for j in h.layout.servers_used():
            p = self.datafile_path(h.id, j, 0)
            out[j] = p.stat().st_size if p.exists() else 0
        return out

    def _recover_size(self, h: LocalHandle, committed: int) -> int:
        """Logical size from data-file sizes: max over servers j of min{x : C_j(x) ≥ size_j}."""
        lay = h.layout
        if isinstance(lay, ExtentMap):
            return committed  # extent-map files commit their size on every extending write
        sizes = self._local_sizes(h)
        servers, _ = lay.counts(np.zeros(1, dtype=np.int64))
        target = np.array([sizes.get(int(s), 0) for s in servers], dtype=np.int64)
        lo = np.zeros(len(servers), dtype=np.int64)
        hi = np.full(len(servers), 1 << 61, dtype=np.int64)
        while (lo < hi).any():
            mid = (lo + hi) // 2
            _, c = lay.counts(mid)
            ok = np.diag(c) >= target
            hi = np.where(ok, mid, hi)
            lo = np.where(ok, lo, mid + 1)
        return int(lo.max()) if len(lo) else 0

    def size_problem(self, name: str) -> str | None:
        """A one-line description if the data files of ``name`` hold bytes past its recorded
        size although the metadata calls that size final (``dirty`` = 0) — a committed size
        was lost — else None.  (Every extending write commits ``dirty`` = 1 before its first
        byte, so no crash and no other process leaves such bytes.)"""
        rec = self.meta.get(name)
        if rec is None:
            return None
        fid, lay, size, dirty = rec
        if dirty:
            return None
        layout = layout_from_dict(lay, self.system)
        if isinstance(layout, ExtentMap):
            return None
        with self._lock:
            h = self._handles.get(name)
            if h is not None and (h.size_dirty or h.size != size):
                return None               # open here and extended: the size is not committed yet
        end = self._recover_size(LocalHandle(self, name, fid, layout, size), size)
        if end > size:
            return (f"file {name!r}: its data files hold bytes up to offset {end}, past its recorded size {size} "
                    f"({end - size} bytes; was the metadata's write-ahead log lost?)")
        return None

    def _commit_size(self, h: LocalHandle) -> None:
        if self.shared:
            self.meta.grow_size(h.name, h.size)
        else:
            self.meta.set_size(h.name, h.size, 0)
        h.size_dirty = False

    def _mark_extending(self, h: LocalHandle) -> None:
        """Before the first byte past the committed size reaches a data file: the file is
        ``dirty`` in the metadata (committed), so that a crash from here on recovers the size
        from the data files, and bytes past a clean file's recorded size always mean lost
        metadata (fsck, ``store get``)."""
        if h.size_dirty or isinstance(h.layout, ExtentMap):
            return
        if not self.shared:
            self.meta.set_dirty(h.name, 1)
        elif not h.dirty_marked:
            rec = self.meta.get(h.name)          # another process may have marked it (no commit then)
            if rec is None or not rec[3]:
                self.meta.set_dirty(h.name, 1)
            h.dirty_marked = True
        h.size_dirty = True

    def _extend(self, h: LocalHandle, end: int) -> None:
        if end <= h.size:
            return
        if isinstance(h.layout, ExtentMap):
            h.size = end
            if self.shared:
                self.meta.grow_size(h.name, end)
            else:
                self.meta.set_size(h.name, end, 0)
            return
        self._mark_extending(h)
        h.size = end

    def extend(self, h: LocalHandle, end: int) -> None:
        """The logical size grows to ``end`` (bytes written elsewhere, e.g. to a replica)."""
        with h.lock:
            self._extend(h, int(end))

    def resized(self, h: LocalHandle, size: int) -> None:
        """Another process truncated the file to ``size``: the handle's size is that and an
        extension made here before is not committed (storefile.c ``pxs_sfile_resized``)."""
        with h.lock:
            h.size = int(size)
            h.size_dirty = False

    def reserve(self, h: LocalHandle, end: int) -> None:
        """As :meth:`extend`, and the data file of byte ``end - 1`` is made to hold it
        (``fallocate``: allocates, never overwrites a byte, never shrinks; aligned or not,
        O_DIRECT too), so that the size recovered from the data files after a crash, or read
        by another process, includes ``end``.  (storefile.c ``pxs_sfile_reserve``.)"""
        end = int(end)
        with h.lock:
            if end <= h.size:
                return
            if not isinstance(h.layout, ExtentMap):
                key, pos = h.one(end - 1, 1)          # one byte: one piece
                self._mark_extending(h)
                self._reserve_datafile(h, key, pos + 1)
            self._extend(h, end)

    # data-file primitives (a backend with another data plane overrides these, the size
    # and metadata logic above and below stays the same: pario.store.rados)
    def _truncate_datafile(self, h: LocalHandle, server: int, datafile: int, n: int, sync: bool) -> None:
        """Data file ``(server, datafile)`` of ``h`` holds exactly ``n`` bytes (durable if ``sync``)."""
        fd = h.fd(server, datafile)
        os.ftruncate(fd, n)
        if sync:
            os.fsync(fd)

    def _reserve_datafile(self, h: LocalHandle, key: tuple[int, int], end: int) -> None:
        """Data file ``key`` of ``h`` is at least ``end`` bytes long; no byte is overwritten."""
        fd = h.fds.get(key)
        if fd is None:
            fd = h.fd(*key)
        os.posix_fallocate(fd, end - 1, 1)

    def refresh_size(self, h: LocalHandle) -> int:
        """Shared mode: the file's current size as all processes made it (metadata, and the
        data files while the file is ``dirty``); sets and returns ``h.size``."""
        if not self.shared:
            return h.size
        with h.lock:
            rec = self.meta.get(h.name)
            if rec is None:
                raise ParioError(f"file {h.name!r} was deleted from the store by another process")
            size, dirty = rec[2], rec[3]
            if dirty and not isinstance(h.layout, ExtentMap):
                size = max(size, self._recover_size(h, size))
            if h.size_dirty:
                size = max(size, h.size)
            h.size = size
            return size

    def finalize_sizes(self) -> list[str]:
        """Recover and commit the size of every ``dirty`` file, clearing the flag (only when
        this process is alone in the store)."""
        names = self.meta.dirty_names()
        for name in names:
            with self._lock:
                h = self._handles.get(name)
                own = h is None
                if own:
                    rec = self.meta.get(name)
                    h = LocalHandle(self, name, rec[0], layout_from_dict(rec[1], self.system), rec[2])
                committed = self.meta.get(name)[2]
                size = max(committed, self._recover_size(h, committed), 0 if own else h.size)
                self.meta.set_size(name, size, 0)
                h.size, h.size_dirty, h.dirty_marked = size, False, False
                if own:
                    for fd in h.fds.values():
                        os.close(fd)
        return names

    def truncate(self, h: LocalHandle, size: int) -> None:
        size = int(size)
        if size < 0:
            raise ParioError("truncate: size must be >= 0")
        with h.lock:
            lay = h.layout
            keep = 1 if (self.shared and h.dirty_marked) else 0
            if isinstance(lay, ExtentMap):
                h.size = size
                self.meta.set_size(h.name, size, keep)
                return
            servers, c = lay.counts(np.array([size], dtype=np.int64))
            # data files first, then the committed size: a crash in between recovers the new
            # size; a shrink durable first (bytes past a committed size mean lost metadata),
            # a growth needs no fsync (a data file shorter than the size reads as a hole)
            shrink = size < h.size
            for s, n in zip(servers.tolist(), c[:, 0].tolist()):
                self._truncate_datafile(h, s, 0, n, shrink)
            h.size = size
            self.meta.set_size(h.name, size, keep)
            h.size_dirty = False

    # ------------------------------------------------------------------ I/O
    def _io(self, h: LocalHandle, srv, df, loc, ln, bo, mv: memoryview, write: bool) -> None:
        n = len(srv)
        if n == 0:
            return
        if self.direct:
            if any((v % ALIGN) for arr in (loc, ln, bo) for v in (arr.tolist() if hasattr(arr, "tolist") else arr)):
                raise ParioError(f"O_DIRECT needs {ALIGN}-byte aligned offsets, lengths and stripes")
        if isinstance(srv, list):  # scalar fast path: pieces in logical order
            if n == 1:
                fd = h.fd(srv[0], df[0])
                self._one(fd, mv[bo[0]:bo[0] + ln[0]], loc[0], write)
                return
            # few pieces: merge server-contiguous pieces of one data file in plain Python
            runs_d: dict[tuple[int, int], list] = {}
            for k in range(n):
                key = (srv[k], df[k])
                lst = runs_d.get(key)
                if lst and lst[-1][0] + lst[-1][1] == loc[k]:
                    last = lst[-1]
                    last[1] += ln[k]
                    last[2].append(mv[bo[k]:bo[k] + ln[k]])
                else:
                    runs_d.setdefault(key, []).append([loc[k], ln[k], [mv[bo[k]:bo[k] + ln[k]]]])
            groups: dict[int, list] = {}
            for (s_, d_), lst in runs_d.items():
                fd = h.fd(s_, d_)
                g = groups.setdefault(s_, [])
                for pos, want, bufs in lst:
                    g.append((fd, pos, want, bufs))
            self._run_groups(groups, sum(ln), write)
            return
        if n == 1:
            runs = [(0, 1)]
            srv_l, df_l, loc_l, ln_l, bo_l = srv.tolist(), df.tolist(), loc.tolist(), ln.tolist(), bo.tolist()
        else:
            order = np.lexsort((loc, df, srv))
            srv, df, loc, ln, bo = srv[order], df[order], loc[order], ln[order], bo[order]
            brk = np.flatnonzero((srv[1:] != srv[:-1]) | (df[1:] != df[:-1]) | (loc[1:] != loc[:-1] + ln[:-1])) + 1
            starts = [0, *brk.tolist()]
            runs = list(zip(starts, [*brk.tolist(), n]))
            srv_l, df_l, loc_l, ln_l, bo_l = srv.tolist(), df.tolist(), loc.tolist(), ln.tolist(), bo.tolist()
        groups = {}
        for a, b in runs:
            fd = h.fd(srv_l[a], df_l[a])       # opened here, in the caller: workers only do I/O
            g = groups.setdefault(srv_l[a], [])
            pos = loc_l[a]
            for c in range(a, b, IOV_MAX):
                d = min(b, c + IOV_MAX)
                want = sum(ln_l[c:d])
                g.append((fd, pos, want, [mv[bo_l[k]:bo_l[k] + ln_l[k]] for k in range(c, d)]))
                pos += want
        self._run_groups(groups, sum(ln_l), write)

    def _run_groups(self, groups: dict, total: int, write: bool) -> None:
        """Move the runs of every server: concurrently, one sub-request per server, when the
        request spans several servers and moves at least ``PARALLEL_MIN`` bytes (as a PFS
        client sends its sub-requests to the servers in parallel); else one after another."""
        if len(groups) > 1 and total >= PARALLEL_MIN:
            _parallel(_transfer, [(g, write) for g in groups.values()])
        else:
            for g in groups.values():
                _transfer(g, write)

    def _one(self, fd: int, view: memoryview, pos: int, write: bool) -> None:
        want = len(view)
        if write:
            done = os.pwritev(fd, [view], pos)
            if done < want:
                _finish(fd, [view], pos, done, True)
        else:
            done = os.preadv(fd, [view], pos)
            if done < want:
                _finish(fd, [view], pos, done, False)

    @staticmethod
    def _finish(fd, bufs, pos, done, write: bool):
        _finish(fd, bufs, pos, done, write)

    def _finish_write(self, fd, bufs, pos, done):
        _finish(fd, bufs, pos, done, True)

    def _finish_read(self, fd, bufs, pos, done):
        _finish(fd, bufs, pos, done, False)

    def _aligned(self, n: int) -> mmap.mmap:
        return mmap.mmap(-1, max(ALIGN, -(-n // ALIGN) * ALIGN))

    def _pieces(self, h, offsets, lengths, buf_offsets):
        """Single-server pieces of the ranges: the scalar :func:`fast_pieces` range by range
        (lists) for up to ``FAST_RANGES`` ranges, else (or when a range has no fast path)
        :func:`pieces` (numpy arrays)."""
        n = len(offsets)
        if n == 1:
            fp = fast_pieces(h.layout, int(offsets[0]), int(lengths[0]), int(buf_offsets[0]))
            if fp is not None:
                return fp
        elif n <= FAST_RANGES:
            lay = h.layout
            srv, df, loc, ln, bo = [], [], [], [], []
            o_l = offsets.tolist() if hasattr(offsets, "tolist") else list(offsets)
            n_l = lengths.tolist() if hasattr(lengths, "tolist") else list(lengths)
            b_l = buf_offsets.tolist() if hasattr(buf_offsets, "tolist") else list(buf_offsets)
            for x, L, b in zip(o_l, n_l, b_l):
                if L <= 0:
                    continue
                fp = fast_pieces(lay, x, L, b)
                if fp is None:
                    break
                srv += fp[0]; df += fp[1]; loc += fp[2]; ln += fp[3]; bo += fp[4]
            else:
                return srv, df, loc, ln, bo
        return pieces(h.layout, offsets, lengths, buf_offsets)

    def read1(self, h: LocalHandle, offset: int, length: int, mv: memoryview) -> None:
        """Read ``[offset, +length)`` into ``mv[:length]`` (a byte memoryview): the scalar
        path of the redirector's common case (one range on one server: the handle's
        precomputed :func:`~pario.store.pieces.one_piece` mapper, one ``preadv``), else
        :meth:`readv`."""
        if not self.direct:
            p = h.one(offset, length)
            if p is not None:
                key, pos = p
                fd = h.fds.get(key)
                if fd is None:
                    fd = h.fd(*key)
                view = mv if len(mv) == length else mv[:length]
                done = os.preadv(fd, [view], pos)
                if done < length:
                    _finish(fd, [view], pos, done, False)
                return
        self.readv(h, (offset,), (length,), mv, (0,))

    def write1(self, h: LocalHandle, offset: int, mv: memoryview) -> None:
        """Write the byte memoryview ``mv`` at ``offset``: scalar path of :meth:`writev`."""
        n = len(mv)
        if not self.direct:
            p = h.one(offset, n)
            if p is not None:
                key, pos = p
                with h.lock:
                    fd = h.fds.get(key)
                    if fd is None:
                        fd = h.fd(*key)
                    if offset + n > h.size:
                        self._mark_extending(h)
                    done = os.pwritev(fd, [mv], pos)
                    if done < n:
                        _finish(fd, [mv], pos, done, True)
                    if offset + n > h.size:
                        self._extend(h, offset + n)
                return
        self.writev(h, (offset,), (n,), mv, (0,))

    def readv(self, h: LocalHandle, offsets, lengths, buf, buf_offsets) -> None:
        mv = memoryview(buf).cast("B")
        if self.direct:
            tmp = self._aligned(len(mv))
            self._io(h, *self._pieces(h, offsets, lengths, buf_offsets), memoryview(tmp), False)
            lengths = np.asarray(lengths, dtype=np.int64)
            for b, n in zip(np.asarray(buf_offsets).tolist(), lengths.tolist()):
                mv[b:b + n] = tmp[b:b + n]
            tmp.close()
            return
        self._io(h, *self._pieces(h, offsets, lengths, buf_offsets), mv, False)

    def writev(self, h: LocalHandle, offsets, lengths, buf, buf_offsets) -> None:
        mv = memoryview(buf).cast("B")
        if len(offsets) == 0:
            return
        with h.lock:
            if len(offsets) == 1:
                end = int(offsets[0]) + int(lengths[0])
            else:
                end = int((np.asarray(offsets, dtype=np.int64) + np.asarray(lengths, dtype=np.int64)).max())
            if end > h.size:
                self._mark_extending(h)
            if self.direct:
                tmp = self._aligned(len(mv))
                tmp[:len(mv)] = mv
                self._io(h, *self._pieces(h, offsets, lengths, buf_offsets), memoryview(tmp), True)
                tmp.close()
            else:
                self._io(h, *self._pieces(h, offsets, lengths, buf_offsets), mv, True)
            self._extend(h, end)

    def copy(self, src: LocalHandle, src_offsets, dst: LocalHandle, dst_offsets, lengths) -> None:
        """Copy ranges ``[src_offsets[k], +lengths[k])`` of ``src`` to ``dst_offsets[k]`` of
        ``dst`` (replication, flush).  Both sides are cut into single-server pieces and the
        bytes move data file to data file with ``copy_file_range`` (in the kernel, as
        ``cp`` does; read/write where the file system refuses it); a range of ``src`` past
        its data file's end copies as zeros.  With ``direct`` I/O, through aligned buffers."""
        lens = np.asarray(lengths, dtype=np.int64)
        so = np.asarray(src_offsets, dtype=np.int64)
        do = np.asarray(dst_offsets, dtype=np.int64)
        keep = lens > 0
        lens, so, do = lens[keep], so[keep], do[keep]
        if len(lens) == 0:
            return
        end = int((do + lens).max())
        if self.direct or COPY_WITH == "buffer" or not self.copy_in_kernel:
            # through a buffer of at most COPY_BUF bytes: the source's pieces read with preadv,
            # the destination's server-contiguous runs written with one pwritev each
            i = 0
            while i < len(lens):
                j, tot = i, 0
                while j < len(lens) and (j == i or tot + int(lens[j]) <= COPY_BUF):
                    tot += int(lens[j])
                    j += 1
                bo = np.concatenate(([0], np.cumsum(lens[i:j])[:-1]))
                buf = bytearray(tot)
                self.readv(src, so[i:j], lens[i:j], buf, bo)
                self.writev(dst, do[i:j], lens[i:j], buf, bo)
                i = j
            return
        bo = np.concatenate(([0], np.cumsum(lens)[:-1]))
        sp = [a if isinstance(a, list) else a.tolist() for a in self._pieces(src, so, lens, bo)]
        dp = [a if isinstance(a, list) else a.tolist() for a in self._pieces(dst, do, lens, bo)]
        with dst.lock:
            if end > dst.size:
                self._mark_extending(dst)
            runs = _piece_pairs(src, sp, dst, dp, int(lens.sum()))
            for sfd, spos, dfd, dpos, n in runs:
                _copy_range(sfd, spos, dfd, dpos, n)
            self._extend(dst, end)

    def readinto(self, h: LocalHandle, offset: int, buf) -> int:
        mv = memoryview(buf).cast("B")
        n = len(mv)
        inside = max(0, min(n, h.size - int(offset)))
        if inside < n:
            mv[inside:] = bytes(n - inside)
        if inside:
            self.readv(h, [int(offset)], [inside], mv, [0])
        return inside

    def write_at(self, h: LocalHandle, offset: int, data) -> int:
        mv = memoryview(data).cast("B")
        if len(mv):
            self.writev(h, (int(offset),), (len(mv),), mv, (0,))
        return len(mv)

    def _sync_fds(self, h: LocalHandle) -> None:
        for fd in h.fds.values():
            os.fsync(fd)

    def fsync(self, h: LocalHandle, everything: bool = False) -> None:
        """The bytes this handle wrote and its size durable; ``everything``: every data file
        of the file, whoever wrote it (another handle, another process)."""
        with h.lock:
            if everything:
                for j, d in enumerate(self.server_dirs):
                    for p in d.glob(f"{h.id:08d}.*"):
                        try:
                            h.fd(j, int(p.name.partition(".")[2]))
                        except ValueError:
                            continue
            self._sync_fds(h)
            if h.size_dirty:
                self._commit_size(h)

    # ------------------------------------------------------------------ stat / usage
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
        with self._lock:
            h = self._handles.get(name)
            if h is not None:
                return FileStat(name, h.size, h.layout, self.server_bytes(h.layout, h.size))
            rec = self.meta.get(name)
            if rec is None:
                raise ParioError(f"no file {name!r} in the store")
            h = self.open(name)
            try:
                return FileStat(name, h.size, h.layout, self.server_bytes(h.layout, h.size))
            finally:
                self.close(h)

    def usage(self) -> np.ndarray:
        out = np.zeros(self.system.n, dtype=np.int64)
        for j, d in enumerate(self.server_dirs):
            for p in d.iterdir():
                if p.is_file():
                    out[j] += p.stat().st_blocks * 512
        return out

    def free_space(self) -> np.ndarray:
        out = np.zeros(self.system.n, dtype=np.int64)
        for j, d in enumerate(self.server_dirs):
            st = os.statvfs(d)
            out[j] = st.f_bavail * st.f_frsize
        return out

    def datafiles(self) -> list[tuple[int, Path, int, int]]:
        """All entries of the server directories: (server, path, file id, datafile number);
        names that are not data files' get id -1, symbolic links and anything but a regular
        file id -2 (pario makes neither)."""
        out = []
        for j, d in enumerate(self.server_dirs):
            for e in os.scandir(d):
                p = d / e.name
                if e.is_symlink() or not e.is_file(follow_symlinks=False):
                    out.append((j, p, -2, -2))
                    continue
                m = DATAFILE.match(e.name)
                out.append((j, p, int(m.group(1)), int(m.group(2))) if m else (j, p, -1, -1))
        return out

    def shutdown(self) -> None:
        with self._lock:
            for h in list(self._handles.values()):
                h.refs = 1
                self.close(h)
            self.meta.close()
