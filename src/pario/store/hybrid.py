"""Hybrid replication (CI-LAYOUT seed 002 §5): per-request cost and lazy synchronisation.

A file may have several full replicas with different layouts (1-DH, 1-DV, 2-D …).  Each
read goes to the up-to-date copy with the least cost; each write goes to the cheapest
up-to-date copy and the other copies are queued for *lazy synchronisation* by a background
thread (:class:`LazySync`); close synchronises everything.  Routing itself lives in
:mod:`pario.store.redirect`; this module supplies the cost function and the thread.

The cost is a callable ``cost(layout, offset, length) -> seconds``.  The default
(:func:`profile_cost`) is the simple per-request model of the system profile: every server
touched costs ``alpha_j + bytes_j * beta_j`` and the request takes the maximum over servers
(servers work in parallel; SPEC §1 with α, β of the profile).  A distribution-aware model
can be passed instead.
"""

from __future__ import annotations

import threading
from typing import Callable

import numpy as np

from ..layout import Layout, map_requests

Cost = Callable[[Layout, int, int], float]


def profile_cost(system, op: int = 0, sequential: bool = False) -> Cost:
    """``cost(layout, offset, length) = max_j (alpha_j + bytes_j · beta_j)`` over servers touched."""
    alpha = system.alpha_table()[:, int(op), int(bool(sequential))]
    beta = system.beta_table()[:, int(op)]

    def cost(layout: Layout, offset: int, length: int) -> float:
        sub = map_requests(layout, np.array([offset], dtype=np.int64), np.array([length], dtype=np.int64))
        if len(sub) == 0:
            return 0.0
        per = np.bincount(sub.server, weights=sub.length, minlength=len(alpha))
        touched = np.bincount(sub.server, minlength=len(alpha)) > 0
        return float(np.max(np.where(touched, alpha + per * beta, 0.0)))

    return cost


class LazySync(threading.Thread):
    """Background thread that synchronises replicas of open files, one chunk at a time.

    ``enqueue(file)`` (called by a write that left stale copies) wakes it; it calls
    ``file.sync_step()`` (one chunk under the file's lock, so foreground I/O interleaves)
    until the file is clean.  Errors are kept in ``errors`` and re-raised by ``drain``.
    """

    def __init__(self):
        super().__init__(name="pario-lazy-sync", daemon=True)
        self.cond = threading.Condition()
        self.queue: list = []
        self.stopping = False
        self.busy = False
        self.errors: list[BaseException] = []

    def enqueue(self, f) -> None:
        with self.cond:
            if f not in self.queue:
                self.queue.append(f)
            self.cond.notify_all()

    def run(self) -> None:
        while True:
            with self.cond:
                while not self.queue and not self.stopping:
                    self.cond.wait()
                if self.stopping and not self.queue:
                    return
                f = self.queue[0]
                self.busy = True
            try:
                more = f.sync_step() if not f.closed else False
            except BaseException as exc:  # noqa: BLE001 - reported by drain()
                self.errors.append(exc)
                more = False
            with self.cond:
                if not more and self.queue and self.queue[0] is f:
                    self.queue.pop(0)
                self.busy = False
                self.cond.notify_all()

    def drain(self, f=None) -> None:
        """Wait until ``f`` (or every file) has no queued synchronisation."""
        with self.cond:
            while (f in self.queue) if f is not None else (self.queue or self.busy):
                self.cond.wait(0.05)
        if self.errors:
            raise self.errors.pop(0)

    def forget(self, f) -> None:
        with self.cond:
            if f in self.queue and not (self.busy and self.queue[0] is f):
                self.queue.remove(f)

    def stop(self) -> None:
        with self.cond:
            self.stopping = True
            self.cond.notify_all()
        self.join()
