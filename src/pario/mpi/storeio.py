"""A pario store file as the back end of :class:`pario.mpi.File` (hint ``pario_store=DIR``).

Every rank opens the store itself in *shared* mode (``Store(dir, shared=True)``, see
:mod:`pario.store.root` and :mod:`pario.store.locks`) and the file in it: independent
requests go through the rank's own redirector (RMT lookups, CEDA replicas, hybrid routing,
lazy synchronisation), collective requests through pario's two-phase I/O with the usual
aggregators (``cb_nodes``), each aggregator doing its own redirection.  Inter-process
consistency is the store's: writes hold their byte range of the store's range lock shared,
synchronisation holds its ranges exclusive, each rank's RMT follows the others' journal
records before every lookup, sizes go through the metadata and data files.

Open (collective): every rank opens the store (the first one recovers a crashed store
while the others wait); rank 0 creates the file if needed (``MODE_CREATE``/``MODE_EXCL``);
then every rank opens it; an error anywhere is raised on every rank.  Close (collective):
every rank drains its lazy synchronisation and flushes dirty replica data (serialised by
the range locks), closes the file and the store; the last rank out commits the final sizes.

No wait without a limit: store locks and SQLite wait at most ``PARIO_STORE_TIMEOUT``
seconds (default 60), then raise a one-line :class:`pario.ParioError`.

If the store does not support shared mode (``Store.supports_shared`` false) or
``PARIO_STORE_SHIP=1`` is set, the former scheme is used (:class:`ShippedStoreBackend`):
rank 0 alone opens the store, collective requests aggregate on it, independent requests of
other ranks are shipped to a service thread on rank 0 (every reply awaited with a timeout).
"""

from __future__ import annotations

import os
import threading
import time

import numpy as np

from .. import ParioError
from .placement import Placement

STORE_RANK = 0
_TAG_REQ, _TAG_REP = 7101, 7102


def _timeout() -> float:
    from ..store.locks import store_timeout

    return store_timeout()


def _layout_for_create(f, store):
    """Layout for a file created through MPI: plan layout, else striping hints, else 64 KiB on all servers."""
    from ..layout import Striped

    h = f.hints
    if f.plan is not None:
        lay = f.plan.layout_for(f.path)
        if lay is not None:
            return lay
    n = store.system.n
    unit = h.striping_unit or 64 * 1024
    factor = min(h.striping_factor or n, n)
    return Striped.fixed(unit, range(factor))


def _errmsg(exc, root) -> str:
    if isinstance(exc, ParioError):
        return str(exc)
    if isinstance(exc, OSError):
        return f"store {root}: {exc.strerror or exc}"
    return f"store {root}: {type(exc).__name__}: {exc}"


class _StoreBackendBase:
    """What both store backends share: the duplicated communicator, the rank's store file
    (``sf``, used under ``_lock``), and the placement of its layout."""

    forced_aggregators = None

    def __init__(self, f, MPI):
        self.MPI = MPI
        self.comm = f.comm.Dup()
        self.rank = self.comm.rank
        self.name = f.path
        self.store = self.sf = None
        self._placement = None
        self._lock = threading.Lock()

    def _check_mode(self, f, root) -> bool:
        """MPI open-mode checks against the store (rank 0 / the store rank); True if the file exists."""
        MPI = self.MPI
        create = bool(f.amode & MPI.MODE_CREATE)
        exists = self.store.exists(self.name)
        if not exists and not create:
            raise ParioError(f"no file {self.name!r} in store {root}")
        if exists and create and f.amode & MPI.MODE_EXCL:
            raise ParioError(f"file {self.name!r} exists in the store (MODE_EXCL)")
        return exists

    def _set_placement(self) -> None:
        self._placement = Placement(self.sf.layout, np.asarray(self.store.system.kinds, dtype=np.int64))

    def _local_read(self, buf, offset):
        with self._lock:
            return self.sf.readinto(int(offset), memoryview(buf))

    def _local_write(self, offset, data):
        with self._lock:
            return self.sf.write(int(offset), data)

    def placement(self):
        return self._placement


class SharedStoreBackend(_StoreBackendBase):
    """Every rank has the store open (shared mode) and does its own redirection."""

    def __init__(self, f, MPI):
        from ..store import Store

        super().__init__(f, MPI)
        root = f.hints.store
        try:
            # 1. every rank opens the store (shared; the first opener recovers, the others wait)
            err = None
            try:
                self.store = Store(root, shared=True, lock_timeout=_timeout(), direct=f.hints.direct)
            except Exception as exc:  # noqa: BLE001 - every rank must reach the collective below
                err = _errmsg(exc, root)
            self._agree(err)
            # 2. rank 0 checks existence / creates
            err = None
            if self.rank == 0:
                try:
                    if not self._check_mode(f, root):
                        self.store.create(self.name, _layout_for_create(f, self.store), exist_ok=True)
                except Exception as exc:  # noqa: BLE001
                    err = _errmsg(exc, root)
            err = self.comm.bcast(err, root=0)
            if err:
                raise ParioError(err)
            # 3. every rank opens the file
            err = None
            try:
                self.sf = self.store.open(self.name)
                self._set_placement()
            except Exception as exc:  # noqa: BLE001 - every rank must reach the collective below
                err = _errmsg(exc, root)
            self._agree(err)
        except BaseException:
            self._teardown()
            raise
        if f.system is None:
            f.system = self.store.system

    def _agree(self, err) -> None:
        errs = [e for e in self.comm.allgather(err) if e]
        if errs:
            raise ParioError(errs[0])

    def _teardown(self) -> None:
        try:
            if self.sf is not None:
                self.sf.close()
        except (ParioError, OSError):
            pass
        finally:
            self.sf = None
            if self.store is not None:
                try:
                    self.store.close()
                except (ParioError, OSError):
                    pass
                self.store = None
            if self.comm is not None:
                self.comm.Free()
                self.comm = None

    def _local_size(self):
        with self._lock:
            return int(self.sf.current_size())

    # ------------------------------------------------------------------ backend interface
    def pread_into(self, buf: np.ndarray, offset: int) -> int:
        return self._local_read(buf, offset)

    def pwrite(self, offset: int, data) -> int:
        return self._local_write(offset, data)

    def write_ranges(self, offsets, lengths, buf, buf_offsets) -> None:
        """One aggregator cycle's runs in one store call (pieces merged per server run)."""
        with self._lock:
            self.sf.writev(offsets, lengths, memoryview(buf), buf_offsets)

    def read_ranges(self, offsets, lengths, buf, buf_offsets) -> None:
        """Fill ``buf`` from many ranges at once (zeros past the end)."""
        with self._lock:
            self.sf.readv(offsets, lengths, memoryview(buf), buf_offsets)

    def size(self) -> int:
        return self._local_size()

    def set_size(self, n: int) -> None:
        with self._lock:
            self.sf.truncate(int(n))

    def resized(self, n: int) -> None:
        """Rank 0 set the size to ``n``: this rank's handle learns it."""
        with self._lock:
            self.sf.resized(int(n))

    def sync(self) -> None:
        with self._lock:
            self.sf.fsync()

    def flush(self) -> None:
        """Called by File.close on every rank: finish lazy sync, flush dirty replica data."""
        t0, synced0 = time.perf_counter(), self.sf.stats["synced"]
        self.store.drain()
        with self._lock:
            self.sf.flush()
            self.sf.fsync()
        report_flush(self.store.root, self.rank, time.perf_counter() - t0, self.sf.stats["synced"] - synced0)

    def close(self) -> None:
        if self.sf is not None:
            try:
                self.sf.close()
            finally:
                self.sf = None
                try:
                    self.store.close()
                finally:
                    self.store = None
        if self.comm is not None:
            self.comm.Free()
            self.comm = None


class ShippedStoreBackend(_StoreBackendBase):
    """Fallback: rank 0 alone has the store open; other ranks ship independent requests to it."""

    forced_aggregators = [STORE_RANK]

    def __init__(self, f, MPI):
        super().__init__(f, MPI)
        self._thread = None
        err, payload = None, None
        if self.rank == STORE_RANK:
            try:
                from ..store import Store

                self.store = Store(f.hints.store, direct=f.hints.direct)
                exists = self._check_mode(f, f.hints.store)
                self.sf = self.store.open(self.name, create_layout=None if exists else _layout_for_create(f, self.store))
                self._set_placement()
                payload = self.store.system
            except ParioError as exc:
                err = str(exc)
            except OSError as exc:
                err = f"store {f.hints.store}: {exc.strerror or exc}"
            if err and self.store is not None:
                self.store.close()
        err, system = self.comm.bcast((err, payload), root=STORE_RANK)
        if err:
            self.comm.Free()
            raise ParioError(err)
        if f.system is None:
            f.system = system
        if self.rank == STORE_RANK and self.comm.size > 1:
            self._thread = threading.Thread(target=self._serve, name="pario-store-rank", daemon=True)
            self._thread.start()

    # ------------------------------------------------------------------ service (store rank)
    def _serve(self) -> None:
        comm, MPI = self.comm, self.MPI
        status = MPI.Status()
        stopped = 0
        nap = 1e-5
        while stopped < comm.size - 1:
            if not comm.Iprobe(source=MPI.ANY_SOURCE, tag=_TAG_REQ, status=status):
                time.sleep(nap)
                nap = min(nap * 2, 2e-4)
                continue
            nap = 1e-5
            src = status.Get_source()
            req = comm.recv(source=src, tag=_TAG_REQ)
            op = req[0]
            try:
                if op == "stop":
                    stopped += 1
                    continue
                if op == "r":
                    buf = np.empty(req[2], dtype=np.uint8)
                    n = self._local_read(buf, req[1])
                    rep = (None, buf[:n])
                elif op == "w":
                    rep = (None, self._local_write(req[1], req[2]))
                elif op == "size":
                    rep = (None, self._local_size())
                elif op == "sync":
                    with self._lock:
                        self.sf.fsync()
                    rep = (None, 0)
                else:
                    rep = (f"store rank: unknown request {op!r}", None)
            except (ParioError, OSError) as exc:
                rep = (str(exc), None)
            comm.send(rep, dest=src, tag=_TAG_REP)

    def _rpc(self, *req):
        self.comm.send(req, dest=STORE_RANK, tag=_TAG_REQ)
        limit = _timeout()
        t0 = time.monotonic()
        nap = 1e-5
        while not self.comm.Iprobe(source=STORE_RANK, tag=_TAG_REP):
            if time.monotonic() - t0 > limit:
                raise ParioError(f"store rank {STORE_RANK} did not answer a {req[0]!r} request within {limit:g} s")
            time.sleep(nap)
            nap = min(nap * 2, 2e-4)
        err, val = self.comm.recv(source=STORE_RANK, tag=_TAG_REP)
        if err:
            raise ParioError(err)
        return val

    def _local_size(self):
        with self._lock:
            return int(self.sf.size)

    # ------------------------------------------------------------------ backend interface
    def pread_into(self, buf: np.ndarray, offset: int) -> int:
        if self.rank == STORE_RANK:
            return self._local_read(buf, offset)
        data = self._rpc("r", int(offset), len(buf))
        n = len(data)
        buf[:n] = data
        return n

    def pwrite(self, offset: int, data) -> int:
        if self.rank == STORE_RANK:
            return self._local_write(offset, data)
        return self._rpc("w", int(offset), np.asarray(data, dtype=np.uint8).copy())

    def size(self) -> int:
        return self._local_size() if self.rank == STORE_RANK else int(self._rpc("size"))

    def resized(self, n: int) -> None:
        """Only the store rank holds the file: nothing to learn."""

    def set_size(self, n: int) -> None:
        if self.rank != STORE_RANK:
            raise ParioError("set_size on a store file: only the store rank resizes")
        with self._lock:
            self.sf.truncate(int(n))

    def sync(self) -> None:
        if self.rank == STORE_RANK:
            with self._lock:
                self.sf.fsync()
        else:
            self._rpc("sync")

    def flush(self) -> None:
        """Collective (called by File.close): stop the service, flush dirty replicas, lazy sync."""
        if self.rank != STORE_RANK:
            self.comm.send(("stop",), dest=STORE_RANK, tag=_TAG_REQ)
        elif self._thread is not None:
            self._thread.join(_timeout())
            if self._thread.is_alive():
                raise ParioError(f"store rank: the request service did not stop within {_timeout():g} s")
            self._thread = None
        if self.rank == STORE_RANK:
            t0, synced0 = time.perf_counter(), self.sf.stats["synced"]
            self.store.drain()
            with self._lock:
                self.sf.flush()
            report_flush(self.store.root, self.rank, time.perf_counter() - t0, self.sf.stats["synced"] - synced0)

    def close(self) -> None:
        if self.rank == STORE_RANK and self.store is not None:
            try:
                self.sf.close()
            finally:
                self.store.close()
                self.store = None
        if self.comm is not None:
            self.comm.Free()
            self.comm = None


StoreBackend = ShippedStoreBackend   # former name


def report_flush(root, rank: int, seconds: float, nbytes: int) -> None:
    """``PARIO_SERVE_STATS=FILE``: one JSON line per flush at a file's close appended to FILE,
    the fields of the served runtime's lines at ``MPI_Finalize`` (interpose/serve.c,
    ``report_close``) with ``"at": "close"`` — what ``pario run``'s whole-job report reads
    (:func:`pario.run.measure.flush_stats`)."""
    import json

    path = os.environ.get("PARIO_SERVE_STATS")
    if not path:
        return
    line = json.dumps({"rank": int(rank), "pid": os.getpid(), "store": str(root), "at": "close",
                       "flush_s": float(seconds), "last_out_s": 0.0, "close_s": float(seconds),
                       "flushed_bytes": int(nbytes), "last_out": False}) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def open_store_backend(f, MPI):
    """Shared mode when the store supports it (every rank opens it), else shipping to rank 0."""
    from ..store import Store

    if getattr(Store, "supports_shared", False) and os.environ.get("PARIO_STORE_SHIP", "") != "1":
        return SharedStoreBackend(f, MPI)
    return ShippedStoreBackend(f, MPI)
