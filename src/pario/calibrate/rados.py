"""A calibration target on a Ceph cluster: one server's pool, reached through librados.

Pre-estimation (CI-LAYOUT seed 002 §6.2, PADP seed 003 §3.5, PSA seed 001 §3.4) measures what
one request of ``s`` bytes costs a server.  On a :mod:`pario.cluster` a server is one OSD,
reached through its own pool (:mod:`pario.cluster.pools`), and pario's ``rados`` store
(:mod:`pario.store.rados`) turns a server-local range into object ranges: byte ``L`` of the
data file is byte ``L % object_size`` of object ``L // object_size``.  This target issues the
requests exactly so — a scratch "data file" of ``file_size`` bytes as objects of
``object_size`` bytes in a RADOS namespace of its own, a request cut at object boundaries, its
pieces in flight together (librados aio, as the store does) and the request done when all
completed — so the fitted α and β price what the store's requests cost on that OSD, BlueStore,
the messenger and the throttle included.

It has the interface of :class:`pario.calibrate.storage._Target` (``prefill``, ``batch``,
``close``, ``file_size``, ``capacity``, ``direct``), so :func:`pario.calibrate.storage.measure_target`
runs the same batches (queue depth 1, warm-up, repetitions of at least ``min_time``) on it.
RADOS has no page cache on the client; a write is on the OSD's device when it completes
(``direct`` is True).
"""

from __future__ import annotations

import contextlib
import os
import time

import numpy as np

from .. import ParioError
from ..units import format_size
from .storage import ALIGN, READ

OBJECT_SIZE = 4 << 20


class RadosTarget:
    """Scratch objects ``calibrate.<k:08x>`` in ``pool``, namespace ``pario-calibrate-<pid>``."""

    direct = True

    def __init__(self, cluster_dir: str, pool: str, file_size: int, max_size: int, *,
                 object_size: int = OBJECT_SIZE):
        from ..store.rados import _rados, connect, open_pools

        self._mod = _rados()
        self.pool = pool
        self.object_size = int(object_size)
        if self.object_size <= 0:
            raise ParioError(f"object size must be > 0 (got {object_size})")
        self.rados = connect(cluster_dir)
        try:
            self.io = open_pools(self.rados, [pool], f"pario-calibrate-{os.getpid()}")[0]
            self.capacity = self._max_avail()
        except BaseException:
            self.rados.shutdown()
            raise
        avail = int(self.capacity * 0.8) // ALIGN * ALIGN
        self.file_size = min(int(file_size), avail) // ALIGN * ALIGN
        if self.file_size < 2 * max_size:
            self.close()
            raise ParioError(f"pool {pool}: only {format_size(avail)} available; need room for "
                             f"{format_size(2 * max_size)} (twice the largest --sizes)")
        self.data = os.urandom(max(max_size, 1 << 20))
        self.path = f"{pool} (RADOS objects of {format_size(self.object_size)})"

    def _max_avail(self) -> float:
        from ..cluster.client import mon

        df = mon(self.rados, "df")
        for p in df.get("pools", []):
            if p.get("name") == self.pool:
                return float(p["stats"]["max_avail"])
        raise ParioError(f"pool {self.pool} is not in 'ceph df'")

    def _pieces(self, off: int, size: int) -> list[tuple[str, int, int, int]]:
        """(object, offset in it, length, offset in the request) of a request."""
        out = []
        pos = 0
        while pos < size:
            k, o = divmod(off + pos, self.object_size)
            n = min(size - pos, self.object_size - o)
            out.append((f"calibrate.{k:08x}", o, n, pos))
            pos += n
        return out

    def _request(self, op: int, off: int, size: int, data: bytes) -> None:
        rados = self._mod
        pieces = self._pieces(off, size)
        try:
            if len(pieces) == 1:
                obj, o, n, _ = pieces[0]
                if op == READ:
                    got = len(self.io.read(obj, n, o))
                    if got != n:
                        raise ParioError(f"short read from {self.pool}/{obj}: {got} of {n} bytes")
                else:
                    self.io.write(obj, data, o)
                return
            comps = []
            for obj, o, n, p in pieces:
                if op == READ:
                    comps.append((obj, self.io.aio_read(obj, n, o, _ignore)))
                else:
                    comps.append((obj, self.io.aio_write(obj, data[p:p + n], o)))
            for obj, c in comps:
                c.wait_for_complete()
                if c.get_return_value() < 0:
                    raise ParioError(f"rados {'read' if op == READ else 'write'} {self.pool}/{obj}: "
                                     f"error {c.get_return_value()}")
        except rados.Error as exc:
            raise ParioError(f"rados {'read' if op == READ else 'write'} in pool {self.pool}: {exc}") from None

    def prefill(self) -> None:
        """Write every object once, so that reads find data (absent objects read nothing)."""
        chunk = self.object_size
        data = self.data[:chunk] if len(self.data) >= chunk else (self.data * (chunk // len(self.data) + 1))[:chunk]
        for off in range(0, self.file_size, chunk):
            n = min(chunk, self.file_size - off)
            self._request(1, off, n, data[:n])

    def batch(self, op: int, size: int, offsets: np.ndarray, min_time: float, min_count: int) -> tuple[float, int]:
        """Requests of ``size`` at ``offsets`` (cycled) until min_time and min_count are reached;
        (mean seconds per request, requests)."""
        data = self.data[:size]
        k, n = 0, len(offsets)
        clock = time.perf_counter
        t0 = clock()
        while True:
            self._request(op, int(offsets[k % n]), size, data)
            k += 1
            elapsed = clock() - t0
            if k >= min_count and elapsed >= min_time:
                break
        return elapsed / k, k

    def close(self) -> None:
        """Remove the scratch objects, disconnect."""
        io = getattr(self, "io", None)
        if io is not None:
            with contextlib.suppress(Exception):
                for o in list(io.list_objects()):
                    with contextlib.suppress(Exception):
                        io.remove_object(o.key)
            with contextlib.suppress(Exception):
                io.close()
            self.io = None
        if self.rados is not None:
            with contextlib.suppress(Exception):
                self.rados.shutdown()
            self.rados = None


def _ignore(_completion, _data) -> None:
    """aio_read's completion callback (the bytes read are not needed, only the time)."""
