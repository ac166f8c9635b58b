"""Replay a trace through the embedded store and measure it (``pario bench run``).

Every trace rank r is replayed by worker ``r mod N`` (N = ``procs``), its requests in
trace order, one at a time (queue depth 1 per rank, like the simulator's ``blocking``
timing); all workers start together after a barrier and the wall time runs until the
last request completes.  The store (:mod:`pario.store`) is a single-process store (it
holds an exclusive lock), so the N workers are threads of the process that holds the
store: every request is an ``os.preadv``/``os.pwritev`` on the server data files, which
release the GIL, so the servers see N concurrent request streams.

Data files are opened with ``O_DIRECT`` (the store's ``direct=True``), so the I/O reaches
the (throttled) block devices from the measuring process.  When the store's server
directories lie on a :mod:`pario.testbed`, the process joins the testbed's cgroup for
the replay (after restarting its throttles, so that every replay starts like one on
long-idle devices: :func:`pario.testbed.core.restart_throttle`) and the per-device bytes
are read from the cgroup's ``blkio.throttle.io_service_bytes`` (what really reached each
server); otherwise the per-server bytes are the exact mapping of the layout.

The files are created under ``bench/`` in the store with the layout (or the plan's
layout per file), prefilled (not timed) so reads hit written data, and deleted after
the run unless ``keep``.  A plan with replicas (CEDA seed 000 §4, hybrid) has them copied
by the store's replicator after the prefill, also untimed, so that the timed requests are
redirected by the RMT as a served program's are (``BenchResult.replica_bytes``).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import ParioError
from ..plan.collective import ORDERS
from ..cluster.caches import drop_for_store
from .core import Testbed, enter, find_testbed

PREFIX = "bench/"


@dataclass
class BenchResult:
    wall_s: float
    requests: int
    bytes: int
    procs: int
    server_names: list[str]
    mapped_bytes: np.ndarray  # per server, from the layout mapping
    device_bytes: np.ndarray | None  # per server, from the testbed cgroup (None off-testbed)
    replica_bytes: int = 0           # copied into the plan's replicas before the timed replay
    rank_time_s: dict[int, float] = field(default_factory=dict)
    direct: bool = True
    osd_cache: dict | None = None    # on a pario cluster: what each OSD's caches held before the drop

    @property
    def bandwidth_MiBps(self) -> float:
        return self.bytes / 2**20 / self.wall_s if self.wall_s > 0 else 0.0

    def to_dict(self) -> dict:
        return {"wall_s": self.wall_s, "requests": self.requests, "bytes": self.bytes, "procs": self.procs,
                "bandwidth_MiBps": self.bandwidth_MiBps, "servers": self.server_names,
                "mapped_bytes": self.mapped_bytes.tolist(),
                "device_bytes": None if self.device_bytes is None else self.device_bytes.tolist(),
                "direct": self.direct, "replica_bytes": self.replica_bytes}


def _device_bytes(tb: Testbed, names: list[str]) -> np.ndarray | None:
    """Bytes read + written per server device so far, from the testbed cgroup's statistics."""
    if tb is None or not tb.cgroup or tb.cgroup_version != 1:
        if tb is not None and tb.cgroup and tb.cgroup_version == 2:
            return _device_bytes_v2(tb, names)
        return None
    try:
        text = Path(tb.cgroup, "blkio.throttle.io_service_bytes").read_text()
    except OSError:
        return None
    by_dev: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in ("Read", "Write"):
            by_dev[parts[0]] = by_dev.get(parts[0], 0) + int(parts[2])
    majmin = {s.name: s.majmin for s in tb.servers}
    return np.array([by_dev.get(majmin.get(n, ""), 0) for n in names], dtype=np.int64)


def device_ios(tb: Testbed, names: list[str]) -> np.ndarray | None:
    """Requests (reads + writes) completed per server device so far (cgroup v1 ``blkio.throttle.io_serviced``,
    v2 ``io.stat`` rios + wios)."""
    if tb is None or not tb.cgroup:
        return None
    majmin = {s.name: s.majmin for s in tb.servers}
    by_dev: dict[str, int] = {}
    try:
        if tb.cgroup_version == 1:
            for line in Path(tb.cgroup, "blkio.throttle.io_serviced").read_text().splitlines():
                parts = line.split()
                if len(parts) == 3 and parts[1] in ("Read", "Write"):
                    by_dev[parts[0]] = by_dev.get(parts[0], 0) + int(parts[2])
        else:
            for line in Path(tb.cgroup, "io.stat").read_text().splitlines():
                parts = line.split()
                kv = dict(p.split("=") for p in parts[1:] if "=" in p)
                by_dev[parts[0]] = int(kv.get("rios", 0)) + int(kv.get("wios", 0))
    except OSError:
        return None
    return np.array([by_dev.get(majmin.get(n, ""), 0) for n in names], dtype=np.int64)


def device_stat_ios(tb: Testbed, names: list[str]) -> np.ndarray | None:
    """Requests (reads + writes) completed by each server's loop device so far, from
    ``/sys/block/loopN/stat`` (fields 1 and 5): what the block layer really issued after
    splitting and merging, from every process (the collective replay is alone on them)."""
    if tb is None:
        return None
    loops = {s.name: s.loop for s in tb.servers}
    out = []
    for n in names:
        dev = loops.get(n)
        if not dev:
            return None
        try:
            f = Path("/sys/block", os.path.basename(dev), "stat").read_text().split()
        except OSError:
            return None
        out.append(int(f[0]) + int(f[4]))
    return np.array(out, dtype=np.int64)


def _device_bytes_v2(tb: Testbed, names: list[str]) -> np.ndarray | None:
    try:
        text = Path(tb.cgroup, "io.stat").read_text()
    except OSError:
        return None
    by_dev = {}
    for line in text.splitlines():
        parts = line.split()
        kv = dict(p.split("=") for p in parts[1:] if "=" in p)
        by_dev[parts[0]] = int(kv.get("rbytes", 0)) + int(kv.get("wbytes", 0))
    majmin = {s.name: s.majmin for s in tb.servers}
    return np.array([by_dev.get(majmin.get(n, ""), 0) for n in names], dtype=np.int64)


def _bench_name(fname: str) -> str:
    clean = "".join(c if c.isalnum() or c in "._-" else "_" for c in fname.strip("/")) or "file"
    return PREFIX + clean


def _check_replay(trace, procs: int) -> None:
    if procs < 1:
        raise ParioError("--procs must be >= 1")
    if len(trace) == 0:
        raise ParioError("the trace has no requests")


def _store_testbed(store):
    """The testbed whose servers hold the store's data, or None (plain directories)."""
    server_dirs = getattr(store.backend, "server_dirs", [])
    return find_testbed(server_dirs[0]) if server_dirs else None


def replay(trace, store_root, *, procs: int, layout=None, plan=None, prefill: bool = True, direct: bool = True,
           keep: bool = False, progress=None) -> BenchResult:
    """Replay ``trace`` through the store at ``store_root`` with ``procs`` workers (see module doc)."""
    from ..layout import server_load
    from ..store import Store

    _check_replay(trace, procs)
    if layout is None and plan is None:
        raise ParioError("give --layout SPEC or --plan PLAN.json")
    store = Store(store_root, direct=direct)
    try:
        system = store.system
        tb = _store_testbed(store)
        layouts = {}
        for fname in trace.files:
            lay = plan.layout_for(fname) if plan is not None else None
            lay = lay if lay is not None else layout
            if lay is None:
                raise ParioError(f"the plan has no layout for file {fname!r}; give --layout as the default")
            layouts[fname] = lay
        for u in sorted({s for lay in layouts.values() for s in lay.servers_used()}):
            if u >= system.n:
                raise ParioError(f"layout uses server {u} but the store has {system.n} servers")
        # create + prefill (untimed)
        ends = np.zeros(len(trace.files), dtype=np.int64)
        np.maximum.at(ends, trace.file, trace.offset + trace.length)
        chunk = 8 << 20
        buf = mmap.mmap(-1, max(chunk, int(trace.length.max())))
        buf.write(os.urandom(1 << 20) * (len(buf) >> 20))
        files = {}
        for k, fname in enumerate(trace.files):
            name = _bench_name(fname)
            if store.exists(name):
                store.delete(name)
            store.create(name, layouts[fname])
            f = store.open(name)
            files[k] = f
            if prefill:
                if progress:
                    progress(f"prefill {name} ({int(ends[k])} B)")
                for off in range(0, int(ends[k]), chunk):
                    n = min(chunk, int(ends[k]) - off)
                    f.write(off, memoryview(buf)[:n])
                f.fsync()
        replica_bytes = _place_replicas(store, plan, trace, progress) if plan is not None else 0
        os.sync()
        # per-worker request lists, in trace order per rank
        t = trace.sorted() if hasattr(trace, "sorted") else trace
        worker = (t.rank % procs).astype(np.int64)
        mapped = np.zeros(system.n, dtype=np.int64)
        for k, fname in enumerate(trace.files):
            sub = t.take(t.file == k)
            if len(sub):
                mapped += server_load(sub, layouts[fname], system.n)[0].astype(np.int64)
        cols = (t.file.astype(np.int64), t.op.astype(np.int64), t.offset.astype(np.int64),
                t.length.astype(np.int64), t.rank.astype(np.int64))
        per_worker = [np.flatnonzero(worker == w) for w in range(procs)]
        barrier = threading.Barrier(procs + 1)
        errors: list[BaseException] = []
        rank_done: dict[int, float] = {}
        lock = threading.Lock()

        def run(w: int) -> None:
            idx = per_worker[w]
            wb = mmap.mmap(-1, max(4096, int(trace.length.max())))
            mv = memoryview(wb)
            fcol, ocol, offcol, lcol, rcol = (c[idx] for c in cols)
            from ..calibrate.storage import _raise_priority

            _raise_priority()  # this worker thread only; see pario.calibrate.storage
            try:
                barrier.wait(timeout=120)
                for i in range(len(idx)):
                    f = files[int(fcol[i])]
                    n = int(lcol[i])
                    if ocol[i] == 0:
                        f.readinto(int(offcol[i]), mv[:n])
                    else:
                        f.write(int(offcol[i]), mv[:n])
                    with lock:
                        rank_done[int(rcol[i])] = time.perf_counter()
            except BaseException as exc:  # noqa: BLE001 - reported by the main thread
                errors.append(exc)
                barrier.abort()  # never leave the others waiting at the start barrier
            finally:
                mv.release()
                wb.close()

        # on a pario cluster, the OSDs' caches emptied: the timed reads reach the devices
        osd_cache = drop_for_store(store_root)
        # enter() restarts the throttles: the replay gets the credit of idle devices (one slice),
        # not what a previous run that ended a few ms ago left in the still-open slice
        ctx = enter(tb) if tb is not None and tb.cgroup else contextlib.nullcontext()
        with ctx:
            before = _device_bytes(tb, system.names)
            threads = [threading.Thread(target=run, args=(w,), daemon=True) for w in range(procs)]
            for th in threads:
                th.start()
            if progress:
                progress(f"replaying {len(trace)} requests with {procs} workers")
            try:
                barrier.wait(timeout=120)
            except threading.BrokenBarrierError:
                pass  # a worker failed before the start; its error is reported below
            t0 = time.perf_counter()
            for th in threads:
                th.join()
            wall = time.perf_counter() - t0
            for f in files.values():
                f.fsync()
            after = _device_bytes(tb, system.names)
        if errors:
            e = errors[0]
            raise e if isinstance(e, ParioError) else ParioError(f"replay failed: {type(e).__name__}: {e}")
        dev = None if before is None or after is None else after - before
        for f in files.values():
            f.close()
        if not keep:
            for fname in trace.files:
                with contextlib.suppress(ParioError):
                    store.delete(_bench_name(fname))
        buf.close()
        return BenchResult(wall_s=wall, requests=len(trace), bytes=int(trace.length.sum()), procs=procs,
                           server_names=list(system.names), mapped_bytes=mapped, device_bytes=dev,
                           rank_time_s={r: v - t0 for r, v in rank_done.items()}, direct=direct,
                           replica_bytes=replica_bytes, osd_cache=osd_cache)
    finally:
        store.close()


def _place_replicas(store, plan, trace, progress=None) -> int:
    """Copy the plan's replicas of the trace's files (renamed to their ``bench/`` names) with
    the store's replicator; the bytes copied."""
    import dataclasses

    from ..store.replicator import Replicator, specs_from_plan

    names = {f: _bench_name(f) for f in trace.files if plan.replicas.get(f)}
    if not names:
        return 0
    renamed = dataclasses.replace(
        plan, replicas={names[f]: r for f, r in plan.replicas.items() if f in names},
        routing=[{**rule, "file": names.get(rule.get("file"), rule.get("file"))} for rule in plan.routing])
    if progress:
        progress(f"replicating {len(names)} file(s) as the plan says")
    rep = Replicator(store, specs_from_plan(renamed, store)).run()
    if rep.skipped:
        s, why = rep.skipped[0]
        raise ParioError(f"replica {s.name} of {s.original} not placed: {why}")
    return int(rep.done)


# ---------------------------------------------------------------------------- collective replay
@dataclass
class CollectiveResult:
    wall_s: float                 # sum of the collective calls' wall times (barrier to barrier)
    calls: list[dict]
    bytes: int
    procs: int
    order: str
    server_names: list[str]
    device_bytes: np.ndarray | None
    mapped_bytes: np.ndarray
    device_ios: np.ndarray | None = None  # requests per server passed by the throttle (cgroup, testbed only)
    block_ios: np.ndarray | None = None   # requests completed per server loop device (/sys/block, testbed only)
    call_ios: np.ndarray | None = None    # the same two, inside the timed calls only: [throttle, device] × server

    @property
    def bandwidth_MiBps(self) -> float:
        return self.bytes / 2**20 / self.wall_s if self.wall_s > 0 else 0.0

    def to_dict(self) -> dict:
        return {"wall_s": self.wall_s, "calls": self.calls, "bytes": self.bytes, "procs": self.procs,
                "order": self.order, "bandwidth_MiBps": self.bandwidth_MiBps, "servers": self.server_names,
                "mapped_bytes": self.mapped_bytes.tolist(),
                "device_bytes": None if self.device_bytes is None else self.device_bytes.tolist(),
                "device_ios": None if self.device_ios is None else self.device_ios.tolist(),
                "block_ios": None if self.block_ios is None else self.block_ios.tolist(),
                "call_ios": None if self.call_ios is None else self.call_ios.tolist()}


def mpiexec_path() -> str | None:
    """``mpiexec`` of the running venv (MPICH from PyPI), else the one on PATH."""
    import shutil
    import sys

    cand = Path(sys.executable).parent / "mpiexec"
    return str(cand) if cand.exists() else shutil.which("mpiexec")


def replay_collective(trace, store_root, *, procs: int, layout=None, plan=None, order: str = "romcio",
                      cb_buffer: int = 4 << 20, cb_nodes: int | None = None, prefill: bool = True,
                      keep: bool = False, timeout: float = 600.0, throttled: bool = True,
                      progress=None) -> CollectiveResult:
    """Collective replay: ``procs`` MPI ranks run :mod:`pario.testbed.collective` under ``mpiexec``.

    The files are created in the store with their layout and prefilled here (untimed,
    O_DIRECT), the store is closed, and the MPI program opens it through
    :class:`pario.mpi.File` (hints ``pario_store`` and ``pario_direct=true``: every rank's
    data files are opened with O_DIRECT, checked by the program; ParioError otherwise).  On
    a testbed the MPI processes run in its cgroup (they inherit it from this process;
    checked too) and the per-server bytes and requests come from the cgroup's statistics
    (``device_ios``: requests that passed the throttle) and from ``/sys/block/loopN/stat``
    (``block_ios``: requests the loop devices completed), over the whole program and
    (``call_ios``) inside the timed calls only.  Wall time = sum over the
    collective calls (one per file and op).  ``throttled=False`` runs the MPI program
    outside the testbed's cgroup (same devices, O_DIRECT, no throttle): the time the
    runtime needs besides the throttled device time (exchange, copies, Python).
    """
    import json
    import subprocess
    import sys
    import tempfile

    from ..layout import server_load
    from ..store import Store

    if order not in ORDERS:
        raise ParioError(f"unknown collective order {order!r} ({' | '.join(ORDERS)})")
    _check_replay(trace, procs)
    import importlib.util

    if importlib.util.find_spec("mpi4py") is None:
        raise ParioError("--collective replays through the MPI runtime and needs mpi4py (pip install mpi4py mpich)")
    mpiexec = mpiexec_path()
    if mpiexec is None:
        raise ParioError("--collective needs mpiexec (pip install mpich puts it in the venv's bin/)")
    store = Store(store_root, direct=True)
    try:
        system = store.system
        tb = _store_testbed(store)
        names, mapped = [], np.zeros(system.n, dtype=np.int64)
        ends = np.zeros(len(trace.files), dtype=np.int64)
        np.maximum.at(ends, trace.file, trace.offset + trace.length)
        chunk = 8 << 20
        buf = mmap.mmap(-1, chunk)
        buf.write(os.urandom(1 << 20) * (chunk >> 20))
        for k, fname in enumerate(trace.files):
            lay = plan.layout_for(fname) if plan is not None else None
            lay = lay if lay is not None else layout
            if lay is None:
                raise ParioError(f"the plan has no layout for file {fname!r}; give --layout as the default")
            name = _bench_name(fname)
            names.append(name)
            if store.exists(name):
                store.delete(name)
            store.create(name, lay)
            sub = trace.take(trace.file == k)
            if len(sub):
                mapped += server_load(sub, lay, system.n)[0].astype(np.int64)
            if prefill:
                if progress:
                    progress(f"prefill {name} ({int(ends[k])} B)")
                f = store.open(name)
                for off in range(0, int(ends[k]), chunk):
                    n = min(chunk, int(ends[k]) - off)
                    f.write(off, memoryview(buf)[:n])
                f.fsync()
                f.close()
        buf.close()
    finally:
        store.close()
    os.sync()
    with tempfile.TemporaryDirectory(prefix="pario-bench-") as tmp:
        from ..trace import save

        tpath = os.path.join(tmp, "trace.parquet")
        save(trace, tpath)
        spec = {"trace": tpath, "store": str(Path(store_root).resolve()), "names": names, "order": order,
                "cb_buffer": int(cb_buffer), "cb_nodes": cb_nodes, "direct": True,
                "testbed": tb.dir if tb is not None and tb.cgroup else None, "servers": list(system.names)}
        inside = throttled and tb is not None and bool(tb.cgroup)
        spec["restart_throttle"] = inside  # rank 0 restarts the throttles before every call
        spath = os.path.join(tmp, "spec.json")
        Path(spath).write_text(json.dumps(spec))
        cmd = [mpiexec, "-n", str(procs), sys.executable, "-m", "pario.testbed.collective", spath]
        ctx = enter(tb) if inside else contextlib.nullcontext()
        drop_for_store(store_root)      # on a pario cluster: the OSDs' caches emptied first
        if progress:
            progress(f"collective replay ({order}) with {procs} MPI ranks")
        with ctx:
            before = _device_bytes(tb, system.names)
            ios0 = device_ios(tb, system.names)
            blk0 = device_stat_ios(tb, system.names)
            try:
                res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
            except subprocess.TimeoutExpired:
                raise ParioError(f"collective replay did not finish within {timeout:g} s") from None
            after = _device_bytes(tb, system.names)
            ios1 = device_ios(tb, system.names)
            blk1 = device_stat_ios(tb, system.names)
    if res.returncode != 0:
        lines = [ln for ln in (res.stderr + res.stdout).strip().splitlines() if ln.strip()]
        raise ParioError(f"collective replay failed (exit {res.returncode}): {lines[-1] if lines else 'no output'}")
    out = None
    for line in res.stdout.splitlines():
        if line.startswith("{") and '"calls"' in line:
            out = json.loads(line)
    if out is None:
        raise ParioError("collective replay printed no result")
    for c in out["calls"]:  # the measurement is only meaningful with O_DIRECT inside the throttle
        if c.get("direct_fds", 0) < c.get("data_fds", 0):
            raise ParioError(f"collective replay: only {c['direct_fds']} of the {c['data_fds']} data files the ranks "
                             f"had open used O_DIRECT (pario_direct hint not honoured)")
        if inside:
            want = "/" + os.path.relpath(tb.cgroup, tb.cgroup_root or os.path.dirname(tb.cgroup))
            if c.get("cgroups") != [want]:
                raise ParioError(f"collective replay: the MPI ranks ran in cgroup(s) {c.get('cgroups')}, "
                                 f"not in the testbed's {want}")
    if not keep:
        store = Store(store_root)
        try:
            for name in names:
                with contextlib.suppress(ParioError):
                    store.delete(name)
        finally:
            store.close()
    dev = None if before is None or after is None else after - before
    call_ios = None
    if out["calls"] and all("throttle_ios" in c for c in out["calls"]):
        call_ios = np.array([np.sum([c["throttle_ios"] for c in out["calls"]], axis=0),
                             np.sum([c["device_ios"] for c in out["calls"]], axis=0)], dtype=np.int64)
    return CollectiveResult(wall_s=float(sum(c["wall_s"] for c in out["calls"])), calls=out["calls"],
                            bytes=int(trace.length.sum()), procs=procs, order=order,
                            server_names=list(system.names), device_bytes=dev, mapped_bytes=mapped,
                            device_ios=None if ios0 is None or ios1 is None else ios1 - ios0,
                            block_ios=None if blk0 is None or blk1 is None else blk1 - blk0, call_ios=call_ios)
