"""The simulator's Python API: build the event core's arrays from a trace, run, report.

>>> res = simulate(trace, system, layout)                         # independent I/O
>>> res = simulate(trace, system, layout, collective=True, order="hacio", cb_buffer=4 << 20)
>>> res.makespan_s, res.bandwidth_MBps, res.to_dict(system)

See ``docs/simulator.md`` for the model and :mod:`pario.simulate.engine` for the core.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .. import ParioError
from ..layout import Layout
from ..plan.collective import order_for
from ..units import parse_size
from .engine import simulate_core
from .routing import OBJ_DATAFILES, Routing, route
from .twophase import plan_call
from ..arrays import unique

MB = float(1 << 20)  # bandwidth unit: MiB/s, as the profiles' β (1/120 MiB/s)
TIMINGS = ("blocking", "trace")


@dataclass
class SimResult:
    """What one simulated run reports (all times in seconds)."""

    makespan_s: float
    bytes: int
    server_names: list[str]
    server_busy_s: np.ndarray
    server_bytes: np.ndarray
    server_subrequests: np.ndarray
    server_sequential: np.ndarray
    client_ranks: np.ndarray
    client_time_s: np.ndarray  # per rank: completion of its last request
    link_busy_s: np.ndarray  # client-node links, then server links
    n_events: int
    n_subrequests: int
    wall_s: float
    collective: bool = False
    order: str | None = None
    cycles: np.ndarray | None = None  # [cycle, server] device busy time in each cycle's I/O phase
    cycle_s: np.ndarray | None = None  # duration of each cycle (exchange + I/O + synchronisation)
    cost_s: float | None = None  # total time of the collective calls
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def bandwidth_MBps(self) -> float:
        return self.bytes / MB / self.makespan_s if self.makespan_s > 0 else 0.0

    @property
    def events_per_s(self) -> float:
        return self.n_events / self.wall_s if self.wall_s > 0 else float("inf")

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "makespan_s": float(self.makespan_s),
            "bandwidth_MBps": float(self.bandwidth_MBps),
            "bytes": int(self.bytes),
            "servers": {
                name: {"busy_s": float(self.server_busy_s[j]), "bytes": int(self.server_bytes[j]),
                       "subrequests": int(self.server_subrequests[j]),
                       "sequential": int(self.server_sequential[j]),
                       "utilisation": float(self.server_busy_s[j] / self.makespan_s) if self.makespan_s > 0 else 0.0}
                for j, name in enumerate(self.server_names)
            },
            "clients": {"ranks": int(len(self.client_ranks)),
                        "time_s": {str(int(r)): float(t) for r, t in zip(self.client_ranks, self.client_time_s)}},
            "events": int(self.n_events),
            "subrequests": int(self.n_subrequests),
            "wall_s": float(self.wall_s),
        }
        if self.collective:
            d["order"] = self.order
            d["cycles"] = [{name: float(row[j]) for j, name in enumerate(self.server_names)}
                           for row in self.cycles]
            d["cycle_s"] = [float(x) for x in self.cycle_s]
            d["cost_s"] = float(self.cost_s)
        if self.details:
            d["details"] = self.details
        return d


def _as_routing(system, layout, plan, routing) -> Routing:
    if routing is not None:
        return routing if isinstance(routing, Routing) else Routing(layouts=routing)
    if plan is not None:
        return Routing.from_plan(plan, layout)
    if layout is None:
        raise ParioError("simulate needs a layout or a plan")
    if isinstance(layout, str):
        from ..layout import parse_layout

        layout = parse_layout(layout, system)
    return Routing(layouts=layout)


def simulate(trace, system, layout: Layout | dict | str | None = None, *, plan=None, routing: Routing | None = None,
             collective: bool = False, aggregators: int | None = None, cb_buffer: int | str | None = None,
             order: str | None = None, align: int | str | None = None, timing: str = "blocking",
             elevator: bool = False, jitter: float = 0.0, seed: int = 0, progress=None,
             nodes: int | None = None) -> SimResult:
    """Simulate ``trace`` on ``system`` under a layout (or a plan / a :class:`Routing`).

    Independent I/O (default): every rank issues its requests in ``order``, one at a time
    (``timing="blocking"``), or not before its trace time stamp (``timing="trace"``:
    request k starts at ``max(start_k − start_min, completion of request k−1)``).
    ``jitter``: every request waits an extra uniform random ``[0, jitter)`` seconds after
    its predecessor (client-side noise that breaks lock-step convoys; default 0).
    ``collective=True``: every request is part of a two-phase collective call (one call per
    file and op, in trace order), see :mod:`pario.simulate.twophase`; ``order`` defaults to
    the plan's collective order, else ``romcio``.  ``aggregators`` / ``cb_buffer`` left None
    come from the trace's metadata when it recorded them (the aggregator ranks and the
    ``cb_buffer_size`` hint of the job that was traced), else ROMIO's defaults (one
    aggregator per client node, 16 MiB): :func:`pario.plan.collective.two_phase` (``nodes``:
    the client nodes the traced job ran on, when known: a ``cb_nodes`` hint is then placed as
    ROMIO's ``cb_config_list`` places aggregators).
    ``seed`` only breaks ties between simultaneous events and draws the jitter (see
    ``docs/simulator.md``).  ``progress``: a :class:`pario.trace.io.progress_bar` to move.

    Memory: independent runs map the requests to sub-requests :data:`CHUNK` requests at a
    time straight into compact arrays (int32 indices, no whole-trace temporaries), and the
    event heap holds the events that can be pending at once (:func:`heap_bound`) rather
    than one slot per sub-request.
    """
    t0 = time.perf_counter()
    if timing not in TIMINGS:
        raise ParioError(f"unknown timing {timing!r} (expected {' or '.join(TIMINGS)})")
    rt = _as_routing(system, layout, plan, routing)
    from ..plan.collective import two_phase

    cb = parse_size(cb_buffer, "collective buffer size") if isinstance(cb_buffer, str) else cb_buffer
    tp = two_phase(trace, cb, aggregators, nodes=nodes) if collective else None
    cb = tp.cb_buffer if tp is not None else cb
    al = None if align is None else (parse_size(align, "alignment") if isinstance(align, str) else int(align))
    order = order_for(plan, order)
    if len(trace) == 0:
        raise ParioError("the trace has no requests")
    ppn = int(system.procs_per_node)
    ranks = unique(trace.rank)
    if ranks.min() < 0:
        raise ParioError("trace has negative ranks")
    n_nodes = int(ranks.max()) // ppn + 1
    if collective:
        if tp.ranks is not None:
            n_nodes = max(n_nodes, max(tp.ranks) // ppn + 1)
        arrays, meta = _build_collective(trace, system, rt, n_nodes, tp, cb, order, al)
    else:
        arrays, meta = _build_independent(trace, system, rt, n_nodes, timing, progress)
    n_links = n_nodes + system.n
    n_req = len(arrays[1])
    if jitter < 0:
        raise ParioError("jitter must be >= 0")
    think = np.random.default_rng(seed).uniform(0.0, jitter, n_req) if jitter > 0 else np.zeros(0)
    arrays = _compact(arrays[:3] + (think,) + arrays[3:])
    cap = heap_bound(arrays[0], arrays[4], arrays[6], system.n)
    tables = (system.alpha_table(), system.beta_table(), system.cost_table(), float(system.network.e),
              float(system.network.t), n_links, bool(elevator), int(seed))
    if progress is not None:
        progress.stage(f"simulating {n_req:,} requests, {len(arrays[8]):,} sub-requests")
        progress.tick()
    out = simulate_core(*arrays, *tables, cap)
    if out[-1]:  # the bound was too small (it never should be): the worst case, same result
        out = simulate_core(*arrays, *tables, 0)
    req_issue, req_done, busy, nbytes, nsub, nseq, link_busy, phase_end, phase_busy, n_events, _ = out
    del arrays
    makespan = float(np.nanmax(req_done)) if len(req_done) else 0.0
    if collective:
        makespan = max(makespan, float(phase_end.max()) if len(phase_end) else 0.0)
    # per-rank completion time
    if collective:
        cr, ct = meta["client_ranks"], meta["client_time_fn"](phase_end)
    else:
        rr = meta["req_rank"]
        cr = unique(rr).astype(np.int64)
        ct = np.zeros(len(cr))
        np.maximum.at(ct, np.searchsorted(cr, rr), np.nan_to_num(req_done))
    res = SimResult(
        makespan_s=makespan, bytes=int(trace.length.sum()) if not collective else int(meta["bytes"]),
        server_names=list(system.names), server_busy_s=busy, server_bytes=nbytes, server_subrequests=nsub,
        server_sequential=nseq, client_ranks=cr, client_time_s=ct, link_busy_s=link_busy, n_events=int(n_events),
        n_subrequests=int(meta["n_sub"]), wall_s=0.0, collective=collective,
        order=order if collective else None,
    )
    if collective:
        io_phase = meta["io_phase"]  # phase index of each cycle's I/O phase
        res.cycles = phase_busy[io_phase] if len(io_phase) else np.zeros((0, system.n))
        last = meta["cycle_last_phase"]
        ends = phase_end[last]
        starts = np.r_[0.0, ends[:-1]]
        res.cycle_s = ends - starts
        res.cost_s = float(res.cycle_s.sum())
        res.details = {"aggregators": meta["aggregators"], "cb_buffer": cb, "calls": meta["calls"],
                       "two_phase": tp.describe()}
    res.wall_s = time.perf_counter() - t0
    return res


# --------------------------------------------------------------------------- memory
CHUNK = 1 << 18  # requests mapped to sub-requests at a time
_I32 = np.iinfo(np.int32).max


def _compact(arrays: tuple) -> tuple:
    """The event core's arrays in their compact dtypes: request indices (pred, succ, the
    sub-requests' request) and phases as int32 when they fit (int64 beyond 2^31 requests),
    links and servers int32, offsets, lengths and objects int64."""
    (ptr, op, release, think, pred, succ, phase, phase_ptr, sreq, la, lb, srv, local, ln, obj) = arrays
    idx = np.int32 if len(op) < _I32 and len(phase_ptr) < _I32 else np.int64
    c = np.ascontiguousarray
    return (c(ptr, np.int64), c(op, np.int8), c(release, np.float64), c(think, np.float64), c(pred, idx),
            c(succ, idx), c(phase, idx), c(phase_ptr, np.int64), c(sreq, idx), c(la, np.int32), c(lb, np.int32),
            c(srv, np.int32), c(local, np.int64), c(ln, np.int64), c(obj, np.int64))


def _consecutive(pred: np.ndarray) -> bool:
    """Every linked request's predecessor is the request just before it (pario's streams)."""
    for a in range(1, len(pred), CHUNK):  # in pieces: no whole-length temporaries
        p = pred[a:a + CHUNK]
        if not np.all((p < 0) | (p == np.arange(a - 1, a - 1 + len(p)))):
            return False
    return True


def heap_bound(sub_ptr: np.ndarray, pred: np.ndarray, phase: np.ndarray, n_srv: int) -> int:
    """An upper bound on the events pending at once in the event core.

    Only the open phase has events; in it, a stream (requests linked by ``pred``) has at most
    one request issued or waiting to be, and each of its sub-requests has at most one event
    pending (a request without sub-requests: its issue event); every server at most one
    elevator event.  So the bound is the largest, over phases, of the sum over the phase's
    streams of the most sub-requests (at least 1) of one of their requests, plus the
    servers and a margin."""
    n = len(pred)
    if n == 0:
        return n_srv + 16
    w = np.maximum(np.diff(sub_ptr), 1)
    one_phase = len(phase) == 0 or not phase.any()
    if not (pred >= 0).any():  # no streams (collective): the largest phase
        if one_phase:
            return int(w.sum()) + n_srv + 16
        return int(np.bincount(phase, weights=w).max()) + n_srv + 16
    starts = np.flatnonzero(pred < 0)
    if one_phase and starts[0] == 0 and _consecutive(pred):  # one stream per rank (independent I/O)
        return int(np.maximum.reduceat(w, starts).sum()) + n_srv + 16
    if len(phase) == 0:
        phase = np.zeros(n, dtype=np.int64)
    # stream of each request: the first request of its pred chain (pred < own index here)
    head = np.arange(n, dtype=np.int64)
    linked = np.flatnonzero(pred >= 0)
    if len(linked):
        if np.all(pred[linked] == linked - 1):  # chains of consecutive requests (by rank)
            start = np.r_[True, pred[1:] < 0] if n > 1 else np.ones(1, dtype=bool)
            head = np.maximum.accumulate(np.where(start, np.arange(n), 0))
        else:
            for i in linked.tolist():  # general chains (not built by pario): rare
                head[i] = head[pred[i]]
    key = phase.astype(np.int64) * n + head
    order = np.lexsort((w, key))
    k = key[order]
    last = np.r_[k[1:] != k[:-1], True]
    per_stream = w[order][last]  # the largest w of each (phase, stream)
    per_phase = np.bincount(phase[order][last].astype(np.int64), weights=per_stream)
    return int(per_phase.max()) + n_srv + 16


# --------------------------------------------------------------------------- independent I/O
def _build_independent(trace, system, rt, n_nodes, timing, progress=None):
    """The event core's arrays of independent I/O: requests in (rank, order) order, their
    sub-requests mapped :data:`CHUNK` requests at a time (see :func:`_build_independent_whole`
    for the one-pass form, which a per-request choice callable still needs)."""
    if callable(rt.choice):
        return _build_independent_whole(trace, system, rt, n_nodes, timing)
    n_req = len(trace)
    perm = np.lexsort((np.arange(n_req), trace.order, trace.rank))
    rank = trace.rank[perm].astype(np.int64)
    same = np.r_[False, rank[1:] == rank[:-1]]
    idx = np.int32 if n_req < _I32 else np.int64
    pred = np.where(same, np.arange(n_req, dtype=idx) - 1, -1).astype(idx)
    succ = np.r_[np.where(same[1:], np.arange(1, n_req, dtype=idx), -1), -1].astype(idx)
    del same
    if timing == "trace":
        st = trace.start[perm]
        if np.isnan(st).all():
            raise ParioError("--timing trace needs time stamps; this trace has none")
        release = np.nan_to_num(st - np.nanmin(st), nan=0.0)
        del st
    else:
        release = np.zeros(0)  # all zero (the core's convention for an empty array)
    node = (rank // system.procs_per_node).astype(np.int32)
    rank = rank.astype(np.int32) if n_req and rank[-1] <= _I32 else rank
    op = trace.op[perm].astype(np.int8)
    choice = rt.choice
    counts = np.zeros(n_req, dtype=np.int64)
    parts: dict[str, list] = {k: [] for k in ("req", "server", "local", "length", "obj")}
    n_sub = 0
    for a in range(0, n_req, CHUNK):
        b = min(n_req, a + CHUNK)
        rows = perm[a:b]
        part = trace.take(rows)
        r = rt if choice is None or isinstance(choice, str) else replace(rt, choice=np.asarray(choice)[rows])
        sub, obj = route(part, system, r)  # sub.req: row of `part` = position - a, sorted
        counts[a:b] = np.bincount(sub.req, minlength=b - a)
        parts["req"].append((sub.req + a).astype(idx))
        parts["server"].append(sub.server.astype(np.int32))
        parts["local"].append(sub.local.astype(np.int64))
        parts["length"].append(sub.length.astype(np.int64))
        parts["obj"].append(obj.astype(np.int64))
        n_sub += len(sub)
        del part, sub, obj
        if progress is not None:
            progress.update(b, n_req)
    del perm

    def cat(name, dt):
        lst = parts.pop(name)
        out = np.concatenate(lst).astype(dt, copy=False) if lst else np.zeros(0, dtype=dt)
        lst.clear()
        return out

    sreq = cat("req", idx)
    server = cat("server", np.int32)
    sub_ptr = np.zeros(n_req + 1, dtype=np.int64)
    np.cumsum(counts, out=sub_ptr[1:])
    del counts
    arrays = (
        sub_ptr, op, release, pred, succ, np.zeros(0, dtype=idx), np.array([0, n_req], dtype=np.int64),
        sreq, node[sreq], np.add(server, n_nodes, dtype=np.int32), server,
        cat("local", np.int64), cat("length", np.int64), cat("obj", np.int64),
    )
    return arrays, {"req_rank": rank, "n_sub": n_sub}


def _build_independent_whole(trace, system, rt, n_nodes, timing):
    perm = np.lexsort((np.arange(len(trace)), trace.order, trace.rank))
    inv = np.empty_like(perm)
    inv[perm] = np.arange(len(perm))
    sub, obj = route(trace, system, rt)
    pos = inv[sub.req]
    so = np.argsort(pos, kind="stable")
    sreq = pos[so]
    n_req = len(trace)
    counts = np.bincount(sreq, minlength=n_req)
    sub_ptr = np.r_[0, np.cumsum(counts)].astype(np.int64)
    rank = trace.rank[perm].astype(np.int64)
    same = np.r_[False, rank[1:] == rank[:-1]]
    pred = np.where(same, np.arange(n_req) - 1, -1).astype(np.int64)
    succ = np.r_[np.where(same[1:], np.arange(1, n_req), -1), -1].astype(np.int64)
    if timing == "trace":
        st = trace.start[perm]
        if np.isnan(st).all():
            raise ParioError("--timing trace needs time stamps; this trace has none")
        release = np.nan_to_num(st - np.nanmin(st), nan=0.0)
    else:
        release = np.zeros(0)  # all zero (the core's convention for an empty array)
    node = (rank // system.procs_per_node).astype(np.int32)
    rank = rank.astype(np.int32) if n_req and rank[-1] <= _I32 else rank
    server = sub.server[so].astype(np.int32)
    arrays = (
        sub_ptr, trace.op[perm].astype(np.int8), release, pred, succ, np.zeros(n_req, dtype=np.int64),
        np.array([0, n_req], dtype=np.int64),
        sreq.astype(np.int64), node[sreq], (n_nodes + server).astype(np.int32), server,
        sub.local[so].astype(np.int64), sub.length[so].astype(np.int64), obj[so].astype(np.int64),
    )
    return arrays, {"req_rank": rank, "n_sub": len(sub)}


# --------------------------------------------------------------------------- collective I/O
def _build_collective(trace, system, rt, n_nodes, tp, cb, order, align):
    ppn = system.procs_per_node
    A = int(tp.aggregators) if tp.aggregators else n_nodes
    if tp.ranks is not None and len(tp.ranks) == A:
        # the aggregator ranks the traced job really used: their nodes
        agg_node = (np.asarray(tp.ranks, dtype=np.int64) // ppn).astype(np.int64)
    else:
        agg_node = (np.arange(A) % n_nodes).astype(np.int64)
    # replicas: every request goes to the replica its routing chooses; the requests of one
    # (file, replica, op) form one collective call on that replica's layout
    n_rep_obj = 1 + max((len(v) for v in rt.replicas.values()), default=0)
    if n_rep_obj > 1 or rt.choice is not None:
        from .routing import replica_choice

        rchoice, cands_of = replica_choice(trace, system, rt)
    else:
        rchoice, cands_of = np.zeros(len(trace), dtype=np.int64), None
    lay = rt.layouts
    # calls: one per (file, replica, op), in order of first appearance in the trace (by rank order position)
    first_pos = {}
    key = (trace.file.astype(np.int64) * n_rep_obj + rchoice) * 2 + trace.op.astype(np.int64)
    ordpos = np.lexsort((np.arange(len(trace)), trace.order))
    for i in ordpos:
        k = int(key[i])
        if k not in first_pos:
            first_pos[k] = len(first_pos)
    calls = sorted(first_pos, key=first_pos.get)
    req_ops, req_phase, req_sub_counts = [], [], []
    s_link_a, s_link_b, s_server, s_local, s_len, s_obj = [], [], [], [], [], []
    io_phase, cycle_last, call_info = [], [], []
    phase = 0
    nbytes = 0
    n_sub = 0
    call_end_phase = []
    for k in calls:
        fr, op = divmod(k, 2)
        fi, rep = divmod(fr, n_rep_obj)
        rows = np.flatnonzero(key == k)
        fname = trace.files[fi]
        if cands_of is not None:
            layout = cands_of[fi][rep]
        else:
            layout = lay if isinstance(lay, Layout) else (lay.get(fname, lay.get("*")) if isinstance(lay, dict) else None)
        if layout is None:
            raise ParioError(f"no layout for file {fname!r}")
        cp = plan_call(trace.offset[rows], trace.length[rows], trace.rank[rows], op, layout, system,
                       aggregators=A, cb_buffer=cb, order=order, align=align,
                       obj_base=(fi * n_rep_obj + rep) * OBJ_DATAFILES)
        nbytes += int(trace.length[rows].sum())
        src_node = cp.ex_rank // ppn
        dst_node = agg_node[cp.ex_agg]
        remote = src_node != dst_node
        exc, exa, exs, exd, exl = cp.ex_cycle[remote], cp.ex_agg[remote], src_node[remote], dst_node[remote], cp.ex_len[remote]
        for c in range(cp.n_cycles):
            stages = ("ex", "io") if op == 1 else ("io", "ex")
            for stg in stages:
                if stg == "io":
                    sel = np.flatnonzero(cp.io_cycle == c)
                    aggs = cp.io_agg[sel]
                    for a in unique(aggs):
                        ss = sel[aggs == a]
                        req_ops.append(op)
                        req_phase.append(phase)
                        req_sub_counts.append(len(ss))
                        s_link_a.append(np.full(len(ss), agg_node[a], dtype=np.int64))
                        s_link_b.append(n_nodes + cp.io_server[ss])
                        s_server.append(cp.io_server[ss])
                        s_local.append(cp.io_local[ss])
                        s_len.append(cp.io_len[ss])
                        s_obj.append(cp.io_obj[ss])
                    io_phase.append(phase)
                else:
                    sel = np.flatnonzero(exc == c)
                    aggs = exa[sel]
                    for a in unique(aggs):
                        ss = sel[aggs == a]
                        req_ops.append(op)
                        req_phase.append(phase)
                        req_sub_counts.append(len(ss))
                        # write: rank node → aggregator node; read: the reverse (same links)
                        s_link_a.append(exs[ss])
                        s_link_b.append(exd[ss])
                        s_server.append(np.full(len(ss), -1, dtype=np.int64))
                        s_local.append(np.zeros(len(ss), dtype=np.int64))
                        s_len.append(exl[ss])
                        s_obj.append(np.full(len(ss), -1, dtype=np.int64))
                phase += 1
            cycle_last.append(phase - 1)
        call_end_phase.append((rows, phase - 1))
        call_info.append({"file": fname, "replica": int(rep), "op": ("read", "write")[op], "cycles": int(cp.n_cycles),
                          "domains": [int(x) for x in cp.domains]})
        n_sub += len(cp.io_len)
    n_req = len(req_ops)
    cat = (lambda lst, dt: np.concatenate(lst).astype(dt) if lst else np.zeros(0, dtype=dt))
    counts = np.array(req_sub_counts, dtype=np.int64)
    sub_ptr = np.r_[0, np.cumsum(counts)].astype(np.int64)
    rphase = np.array(req_phase, dtype=np.int64)
    phase_ptr = np.r_[0, np.cumsum(np.bincount(rphase, minlength=phase))].astype(np.int64) if phase else np.zeros(1, dtype=np.int64)
    arrays = (
        sub_ptr, np.array(req_ops, dtype=np.int8), np.zeros(n_req), np.full(n_req, -1, dtype=np.int64),
        np.full(n_req, -1, dtype=np.int64), rphase, phase_ptr,
        np.repeat(np.arange(n_req), counts).astype(np.int64), cat(s_link_a, np.int32), cat(s_link_b, np.int32),
        cat(s_server, np.int32), cat(s_local, np.int64), cat(s_len, np.int64), cat(s_obj, np.int64),
    )
    ranks = unique(trace.rank)

    def client_time(phase_end):
        t = np.zeros(len(ranks))
        for rows, last in call_end_phase:
            if last < 0:
                continue
            idx = np.searchsorted(ranks, unique(trace.rank[rows]))
            t[idx] = np.maximum(t[idx], phase_end[last])
        return t

    meta = {"io_phase": np.array(io_phase, dtype=np.int64), "cycle_last_phase": np.array(cycle_last, dtype=np.int64),
            "aggregators": A, "calls": call_info, "bytes": nbytes, "n_sub": n_sub, "client_ranks": ranks,
            "client_time_fn": client_time}
    return arrays, meta
