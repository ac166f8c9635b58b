"""I/O time of two-phase collective calls on a throttled testbed, cycle by cycle.

``pario simulate --collective`` charges every device request the papers' ``α + β·s``
(seed 004 §2.2–§3.1: a request's time is its startup plus its transfer; Tables 1–3 count
``T`` per block).  A testbed device is a blk-throttle token bucket: it passes ``n``
requests of ``B`` bytes queued in one interval in ``max(n·α, B·β)`` with ``α = 1/IOPS`` and
``β = 1/BPS`` (see :mod:`pario.testbed` and docs/calibration.md, "The throttle is a max,
not a sum").  This module prices the *same* schedule both ways, so that the difference
between the simulator's and the testbed's order of ROMCIO / CACIO / HACIO can be traced
to the cost shape and not to the schedule:

- the schedule is the simulator's own (:func:`pario.simulate.twophase.plan_call`: file
  domains, the order from :func:`pario.plan.collective.request_order`, cycles of
  ``cb_buffer`` bytes, sub-requests merged per (cycle, aggregator, server) where they are
  contiguous on the server — seed 004 §2.1 and Algorithm 1);
- per cycle and server: ``n`` requests (each split into ``⌈s / split⌉`` device requests
  when ``split`` is given: the kernel's largest bio) of ``B`` bytes take
  ``n·α + B·β`` (``shape="additive"``, the simulator's shape, queue at one server) or
  ``max(n·α, B·β)`` (``shape="max"``, the token bucket);
- every cycle ends when its slowest server is done (the aggregators synchronise each
  cycle, seed 004 §2.2), and the I/O time of a call is the sum of its cycles.

Only the I/O phases are priced (no data exchange, no client overhead): it is a lower
bound of a measured wall time and an explanation of orders, not a replacement for the
simulator.  α per server = its random-access α of the call's op, β = its β of that op.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import ParioError

SHAPES = ("max", "additive")


@dataclass
class CycleEstimate:
    """Per-call cycle times and per-server totals of :func:`collective_io_estimate`."""

    total_s: float
    cycle_s: np.ndarray          # every cycle of every call, in call order
    server_requests: np.ndarray  # device requests per server (after ``split``)
    server_bytes: np.ndarray
    server_busy_s: np.ndarray    # Σ over cycles of the server's time in that cycle
    shape: str


def collective_io_estimate(trace, system, layout, *, order: str, aggregators: int, cb_buffer: int = 4 << 20,
                           shape: str = "max", split: int | None = None) -> CycleEstimate:
    """Price the two-phase schedule of ``trace`` (one call per file and op) with cost ``shape``."""
    from ..simulate.twophase import plan_call

    if shape not in SHAPES:
        raise ParioError(f"unknown cost shape {shape!r} (expected {' | '.join(SHAPES)})")
    if split is not None and int(split) < 1:
        raise ParioError("split must be >= 1 byte")
    if len(trace) == 0:
        raise ParioError("the trace has no requests")
    n = system.n
    reqs = np.zeros(n, dtype=np.int64)
    nbytes = np.zeros(n, dtype=np.int64)
    busy = np.zeros(n)
    cycles: list[float] = []
    fo = trace.file.astype(np.int64) * 2 + trace.op.astype(np.int64)
    for key in dict.fromkeys(fo[np.lexsort((np.arange(len(trace)), trace.order))].tolist()):
        rows = np.flatnonzero(fo == key)
        op = key % 2
        cp = plan_call(trace.offset[rows], trace.length[rows], trace.rank[rows], op, layout, system,
                       aggregators=int(aggregators), cb_buffer=int(cb_buffer), order=order, align=None, obj_base=0)
        alpha = np.array([s.alpha_for(op, False) for s in system.servers])
        beta = np.array([s.beta_for(op) for s in system.servers])
        cnt = np.ones(len(cp.io_len), dtype=np.int64) if split is None else -(-cp.io_len // int(split))
        for c in range(cp.n_cycles):
            sel = cp.io_cycle == c
            k = np.bincount(cp.io_server[sel], weights=cnt[sel], minlength=n)
            b = np.bincount(cp.io_server[sel], weights=cp.io_len[sel], minlength=n)
            t = np.maximum(k * alpha, b * beta) if shape == "max" else k * alpha + b * beta
            cycles.append(float(t.max()))
            busy += t
            reqs += k.astype(np.int64)
            nbytes += b.astype(np.int64)
    cyc = np.array(cycles)
    return CycleEstimate(total_s=float(cyc.sum()), cycle_s=cyc, server_requests=reqs, server_bytes=nbytes,
                         server_busy_s=busy, shape=shape)
