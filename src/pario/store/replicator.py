"""The replicator (CEDA seed 000 §4.5 Algorithm 2): copy planned replicas into the store.

Input: a plan (:class:`pario.plan.Plan` JSON: ``"replicas": {FILE: [{"name", "layout", …}]}``)
or a list of :class:`ReplicaSpec`.  A replica whose layout is an ``extents`` layout
(:class:`~pario.layout.ExtentMap`) is a CEDA *partial* replica: only its extents are copied,
reads of them are redirected to it (route ``replica``).  Any other layout is a *full*
replica of the whole file (hybrid replication, seed 002 §5, route ``cheapest``).

Admission (Algorithm 2 line 8): replicas are taken in plan order (the planner orders them by
benefit) while they fit in the free replica space (``space`` budget minus the bytes already
in the RMT) and in the free space of every server they use; the rest are skipped.  All
checks run before any byte is written.

Online (seed 000 §4: replication is background work while the application runs): the
store may be open in other processes (shared mode) that read and write the original
meanwhile.  Per chunk (default 8 MiB: a long extent split, short ones grouped) of a
replica: hold the chunk's byte range of the original exclusive (writers of *that* range
wait for one chunk's copy, writers elsewhere never), write back any DIRTY bytes of other
replicas there, add the chunk's RMT entries as COPYING (never read), copy the original's
bytes into the replica (``copy_file_range``, data file to data file), publish them FRESH
(read like CLEAN), release the range.  The replicator does not wait for the disk, as ``cp``
does not: FRESH entries become CLEAN when the replica's data files are fsync'ed (an fsync of
the original's file, or the last process closing the store), and after a power failure
they are refreshed from the original (docs/store.md) — a reader never gets a replica byte
older than the original, and a copy is trusted after a power loss only once it was durable.

A killed replicator leaves COPYING entries (the next recovery refreshes them from the
original) or bytes no entry points to; its job stays pending in the RMT, and
``pario replicate --resume`` (or the same plan again) continues from what is covered.
Within one process the copy also yields to foreground I/O of the store (it waits until no
foreground request came for ``idle`` seconds, at most ``max_wait``).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import ParioError
from ..layout import ExtentMap, Layout, layout_from_dict, layout_to_dict
from .copies import COPY_CHUNK, copy_groups, replica_extents, replica_file_layout
from ..units import format_size
from .rmt import COPYING
from .root import Store, replica_name

CHUNK = COPY_CHUNK   # bytes per chunk (8 MiB): the range a writer of the original may wait for


@dataclass
class ReplicaSpec:
    """One replica to build: ``original`` file, replica ``name``, ``layout``.

    ``layout``: an :class:`ExtentMap` (its extents are the replicated bytes; default ignored)
    or any layout (a full replica).  ``route``: ``"replica"`` or ``"cheapest"`` (None: by kind).
    """

    original: str
    name: str
    layout: Layout
    route: str | None = None

    @property
    def mode(self) -> str:
        return "partial" if isinstance(self.layout, ExtentMap) else "full"

    @property
    def r_file(self) -> str:
        return replica_name(self.original, self.name)

    def routing(self) -> str:
        return self.route or ("replica" if self.mode == "partial" else "cheapest")

    def replica_layout(self) -> Layout:
        """The replica file's own layout (an extent map without default;
        :func:`pario.plan.setup_cost.replica_file_layout`)."""
        return replica_file_layout(self.layout)

    def extents(self, size: int) -> tuple[np.ndarray, np.ndarray]:
        """(offsets, lengths) of the bytes to copy, clipped to the original's size
        (:func:`pario.plan.setup_cost.replica_extents`, what ``pario advise`` prices)."""
        return replica_extents(self.layout, size)

    def to_dict(self, system) -> dict:
        return {"original": self.original, "name": self.name, "route": self.route,
                "layout": layout_to_dict(self.layout, system)}

    @classmethod
    def from_dict(cls, d: dict, system) -> "ReplicaSpec":
        return cls(d["original"], d["name"], layout_from_dict(d["layout"], system), d.get("route"))


def specs_from_plan(plan, store: Store) -> list[ReplicaSpec]:
    """Replica specs of a plan (path, dict or Plan), checked against the store."""
    from ..names import check_name
    from ..plan.base import Plan, read_plan_json

    if isinstance(plan, (str, Path)):
        plan = read_plan_json(plan)
    if isinstance(plan, dict):
        sysname = plan.get("system")
        if sysname and sysname != store.system.name:
            raise ParioError(f"plan is for system {sysname!r} but store {store.root} is on {store.system.name!r}")
        plan = Plan.from_dict(plan, store.system)
    if plan.system_name and plan.system_name != store.system.name:
        raise ParioError(f"plan is for system {plan.system_name!r} but store {store.root} is on {store.system.name!r}")
    routes = {}
    for rule in plan.routing:
        if rule.get("op", "read") in ("read", "any", None):
            routes.setdefault(rule.get("file", "*"), rule.get("rule"))
    specs = []
    for fname, reps in plan.replicas.items():
        if not store.exists(fname):
            raise ParioError(f"plan replicates {fname!r}, which is not in store {store.root} (a plan for another store?)")
        rule = routes.get(fname, routes.get("*"))
        for k, r in enumerate(reps):
            name = check_name(str(r.get("name") or f"r{k + 1}"), "replica name", component=True)
            lay = r["layout"]
            route = {"cheapest": "cheapest", "replica": "replica"}.get(rule) if rule else None
            specs.append(ReplicaSpec(fname, name, lay, route))
    return specs


def _subtract(offs, lens, covered: list[tuple[int, int]]):
    """Ranges of (offs, lens) not inside the sorted ``covered`` ranges."""
    out = []
    cov = sorted(covered)
    for o, n in zip(np.asarray(offs).tolist(), np.asarray(lens).tolist()):
        pos, end = o, o + n
        for c, cn in cov:
            if c + cn <= pos:
                continue
            if c >= end:
                break
            if c > pos:
                out.append((pos, c - pos))
            pos = max(pos, c + cn)
            if pos >= end:
                break
        if pos < end:
            out.append((pos, end - pos))
    return out


class Replicator:
    """Copies replicas into a store; :meth:`run` in the caller's thread or :meth:`start`
    a background thread.  ``progress(done_bytes, total_bytes)`` is called after each chunk."""

    def __init__(self, store: Store, specs: list[ReplicaSpec], *, space: int | None = None, chunk: int = CHUNK,
                 idle: float = 0.002, max_wait: float = 0.5, progress=None):
        self.store, self.chunk = store, int(chunk)
        self.idle, self.max_wait = idle, max_wait
        if self.chunk <= 0:
            raise ParioError("replicate: the chunk size must be > 0")
        self.progress = progress
        self.space = space
        self.specs = list(specs)
        self.skipped: list[tuple[ReplicaSpec, str]] = []
        self.work: list[tuple[ReplicaSpec, list[tuple[int, int]], int]] = []
        self.total = 0
        self.done = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._admit()

    # ------------------------------------------------------------------ admission (no data touched)
    def _admit(self) -> None:
        st = self.store
        seen = set()
        for s in self.specs:
            if s.r_file in seen:
                raise ParioError(f"plan names replica {s.name!r} of {s.original!r} twice")
            seen.add(s.r_file)
            if not st.exists(s.original):
                raise ParioError(f"replica of {s.original!r}: no such file in store {st.root}")
            bad = [j for j in s.layout.servers_used() if j >= st.system.n]
            if bad:
                raise ParioError(f"replica {s.name!r} uses server index {bad[0]}; store has {st.system.n} servers")
            existing = [r for r in st.rmt.replicas(s.original) if r["r_file"] == s.r_file]
            if existing and st.exists(s.r_file):
                old = layout_to_dict(st.stat(s.r_file).layout, st.system)
                if old != layout_to_dict(s.replica_layout(), st.system):
                    raise ParioError(f"replica {s.name!r} of {s.original!r} exists with another layout; delete it first")
        used = st.rmt.replica_bytes()
        free_space = st.backend.free_space()
        per_server = np.zeros(st.system.n, dtype=np.int64)
        budget = None if self.space is None else int(self.space) - used
        for s in self.specs:
            size = st.stat(s.original).size
            offs, lens = s.extents(size)
            todo = _subtract(offs, lens, self._done_ranges(s))
            need = sum(n for _, n in todo)
            if need == 0:
                self.work.append((s, [], size))
                continue
            if budget is not None and need > budget:
                self.skipped.append((s, f"needs {format_size(need)}, {format_size(max(budget, 0))} of replica space left"))
                continue
            srv = self._server_need(s, todo)
            if ((per_server + srv) > free_space).any():
                j = int(np.argmax((per_server + srv) - free_space))
                raise ParioError(f"replica space full: server {st.system.names[j]} has {format_size(int(free_space[j]))} "
                                 f"free, replica {s.name!r} of {s.original!r} needs {format_size(int(per_server[j] + srv[j]))}")
            per_server += srv
            if budget is not None:
                budget -= need
            self.work.append((s, todo, size))
            self.total += need
        if self.specs and not any(t for _, t, _ in self.work) and self.skipped:
            s, why = self.skipped[0]
            raise ParioError(f"replica space full: no replica fits (replica {s.name!r} of {s.original!r} {why})")

    def _done_ranges(self, s: ReplicaSpec) -> list[tuple[int, int]]:
        """What the replica covers already, except COPYING entries (a killed replicator's:
        copied again)."""
        e = self.store.rmt.entries(s.original)
        keep = [k for k in range(e.n) if e.r_file[k] == s.r_file and int(e.flag[k]) != COPYING]
        return [(int(e.o_off[k]), int(e.length[k])) for k in keep]

    def _server_need(self, s: ReplicaSpec, todo) -> np.ndarray:
        from ..layout import map_requests

        if not todo:
            return np.zeros(self.store.system.n, dtype=np.int64)
        a = np.array(todo, dtype=np.int64)
        sub = map_requests(s.replica_layout(), a[:, 0], a[:, 1])
        return np.bincount(sub.server, weights=sub.length, minlength=self.store.system.n).astype(np.int64)

    # ------------------------------------------------------------------ copying
    def _wait_idle(self) -> None:
        t0 = time.monotonic()
        while not self._stop.is_set():
            quiet = time.monotonic() - self.store.fg_last
            if quiet >= self.idle or time.monotonic() - t0 >= self.max_wait:
                return
            time.sleep(min(self.idle, 0.001))

    def run(self) -> "Replicator":
        st = self.store
        for s, todo, size in self.work:
            spec = {**s.to_dict(st.system), "size": int(size)}
            # the replica file first (the RMT names files by id), then its job, then its registration;
            # its size once (the copies then never extend it: no size commit per chunk, no fsync
            # of its data at close — the replica is FRESH until something makes it durable)
            st.backend.create(s.r_file, s.replica_layout(), exist_ok=True)
            if todo:
                rh = st.backend.open(s.r_file)
                try:
                    end = max(x + n for x, n in todo)
                    if rh.size < end:
                        st.backend.truncate(rh, end)
                finally:
                    st.backend.close(rh)
            st.rmt.set_job(s.r_file, spec, 0)
            st.rmt.register(s.r_file, s.original, s.name, s.mode, s.routing())
            f = st.open(s.original)
            try:
                complete = self._copy(f, s, todo)
                if complete:
                    st.rmt.set_job(s.r_file, spec, 1)
            finally:
                f.close()
            if self._stop.is_set():
                break
        return self

    def _chunks(self, todo):
        """The ranges to copy in groups of at most ``chunk`` bytes (a long range split, short
        ones together: one lock, one transaction and one vectored copy per group;
        :func:`pario.plan.setup_cost.copy_groups`, the steps ``pario advise`` prices)."""
        return copy_groups(todo, self.chunk)

    def _copy(self, f, s: ReplicaSpec, todo) -> bool:
        """Copy ``todo`` into the replica group by group, each group one step of the engine
        (``pxs_replicate``: under the group's exclusive range lock, the original up to date
        there, the entries COPYING, the bytes copied data file to data file, the entries
        FRESH); True when all of it was copied and published."""
        r = self.store.rmt.fid(s.r_file)
        for group in self._chunks(todo):
            if self._stop.is_set():
                return False
            self._wait_idle()
            try:
                f.ef.replicate(r, np.array([x for x, _ in group], np.int64), np.array([n for _, n in group], np.int64))
            except ParioError as exc:
                raise ParioError(f"replica {s.name!r} of {s.original!r}: {exc}") from None
            self.done += sum(n for _, n in group)
            if self.progress:
                self.progress(self.done, self.total)
        return True

    def _run_bg(self) -> None:
        try:
            self.run()
        except BaseException as exc:  # noqa: BLE001 - re-raised by join()
            self.error = exc

    def start(self) -> "Replicator":
        self._thread = threading.Thread(target=self._run_bg, name="pario-replicator", daemon=True)
        self._thread.start()
        return self

    def join(self, timeout: float | None = None) -> "Replicator":
        if self._thread is not None:
            self._thread.join(timeout)
        if self.error is not None:
            raise self.error
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def resume_specs(store: Store) -> list[ReplicaSpec]:
    """Specs of replicator jobs that did not finish (from the RMT's jobs table)."""
    return [ReplicaSpec.from_dict(spec, store.system) for _, spec, _ in store.rmt.jobs(pending_only=True)]


def replicate(store: Store, plan, *, space: int | None = None, progress=None, chunk: int = CHUNK) -> Replicator:
    """Build a plan's replicas in the calling thread; returns the finished replicator."""
    specs = specs_from_plan(plan, store) if not isinstance(plan, list) else plan
    return Replicator(store, specs, space=space, progress=progress, chunk=chunk).run()
