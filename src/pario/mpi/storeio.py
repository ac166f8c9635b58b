"""A pario store file as the back end of :class:`pario.mpi.File` (hint ``pario_store=DIR``).

The embedded store (:mod:`pario.store`) is used by one process at a time (it holds an
exclusive lock on its directory, and its RMT cache is per process).  So under MPI one rank
— the *store rank*, rank 0 of the file's communicator — opens the store and the file;
every byte goes through its redirector (RMT lookups, CEDA replicas, hybrid routing, lazy
synchronisation):

- collective requests: the store rank is the only aggregator (two-phase I/O ships the
  data to it anyway, so the redirection happens once per merged run, in the order the
  chosen policy gives);
- independent requests of the other ranks are shipped to a service thread on the store
  rank (MPI point-to-point on a private communicator, ``MPI_THREAD_MULTIPLE``);
- close is collective: the service thread stops, then the store rank flushes dirty
  replica data back to the original and finishes lazy synchronisation (the store file's
  close), and closes the store.

A later multi-process store (shared lock, RMT cache invalidation) would let every
aggregator open the store itself; only this module changes.
"""

from __future__ import annotations

import threading
import time

import numpy as np

from .. import ParioError
from .placement import Placement

STORE_RANK = 0
_TAG_REQ, _TAG_REP = 7101, 7102


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


class StoreBackend:
    forced_aggregators = [STORE_RANK]

    def __init__(self, f, MPI):
        self.MPI = MPI
        self.comm = f.comm.Dup()
        self.rank = self.comm.rank
        self.name = f.path
        self.store = self.sf = None
        self._placement = None
        self._lock = threading.Lock()
        self._thread = None
        err, payload = None, None
        if self.rank == STORE_RANK:
            try:
                from ..store import Store

                self.store = Store(f.hints.store)
                create = bool(f.amode & MPI.MODE_CREATE)
                exists = self.store.exists(self.name)
                if not exists and not create:
                    raise ParioError(f"no file {self.name!r} in store {f.hints.store}")
                if exists and create and f.amode & MPI.MODE_EXCL:
                    raise ParioError(f"file {self.name!r} exists in the store (MODE_EXCL)")
                self.sf = self.store.open(self.name, create_layout=None if exists else _layout_for_create(f, self.store))
                self._placement = Placement(self.sf.layout, np.asarray(self.store.system.kinds, dtype=np.int64))
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
        err, val = self.comm.recv(source=STORE_RANK, tag=_TAG_REP)
        if err:
            raise ParioError(err)
        return val

    def _local_read(self, buf, offset):
        with self._lock:
            return self.sf.readinto(int(offset), memoryview(buf))

    def _local_write(self, offset, data):
        with self._lock:
            return self.sf.write(int(offset), data)

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
            self._thread.join()
            self._thread = None
        if self.rank == STORE_RANK:
            self.store.drain()
            with self._lock:
                self.sf.flush()

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

    def placement(self):
        return self._placement


def open_store_backend(f, MPI) -> StoreBackend:
    return StoreBackend(f, MPI)
