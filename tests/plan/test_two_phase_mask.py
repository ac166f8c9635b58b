"""Which collective requests go through two-phase I/O (pario.plan.collective.two_phase_mask):
ROMIO's rule, as collective/twophase.c applies it, against a brute force written call by call."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as hs

from pario.plan.collective import romio_view, two_phase_mask
from pario.trace import Trace
from pario.trace.core import TraceMeta
from pario.workload import ior


def _brute(rows, hints):
    """rows: (rank, call, op, offset, length); the k-th call (in call order) of every rank on
    one op is one MPI call; ROMIO runs it two-phase unless automatic and, with the ranks in
    order (those with data), none starts before the previous one's last byte."""
    out = [True] * len(rows)
    for op, key in ((0, "romio_cb_read"), (1, "romio_cb_write")):
        mode = hints.get(key, "automatic")
        idx = [i for i, r in enumerate(rows) if r[2] == op]
        if not idx or mode == "enable":
            continue
        if mode == "disable":
            for i in idx:
                out[i] = False
            continue
        calls = {}
        for i in idx:
            calls.setdefault(rows[i][0], set()).add(rows[i][1])
        ranks = sorted(calls)
        if len({len(c) for c in calls.values()}) != 1:
            continue
        for k in range(len(calls[ranks[0]])):
            members, prev, inter = [], None, False
            for r in ranks:
                c = sorted(calls[r])[k]
                mine = [i for i in idx if rows[i][0] == r and rows[i][1] == c]
                members += mine
                data = [(rows[i][3], rows[i][3] + rows[i][4]) for i in mine if rows[i][4] > 0]
                if not data:
                    continue
                lo, hi = min(a for a, _ in data), max(b for _, b in data)
                if prev is not None and lo < prev:
                    inter = True
                prev = hi
            if not inter:
                for i in members:
                    out[i] = False
    return out


def _trace(rows, hints):
    r = np.array(rows, dtype=np.int64).reshape(-1, 5)
    return Trace.from_arrays(r[:, 0], None, r[:, 2].astype(np.int8), r[:, 3], r[:, 4], collective=True,
                             call=r[:, 1], files=["f"],
                             meta=TraceMeta(source="test", nprocs=int(r[:, 0].max()) + 1,
                                            hints=tuple(sorted(hints.items()))))


@settings(max_examples=150, deadline=None)
@given(hs.integers(2, 4), hs.integers(1, 3), hs.data(),
       hs.sampled_from(["automatic", "enable", "disable"]))
def test_mask_is_romios_rule(nranks, ncalls, data, mode):
    rows = []
    for r in range(nranks):
        for c in range(ncalls):
            for _ in range(data.draw(hs.integers(1, 2))):
                rows.append((r, c, data.draw(hs.integers(0, 1)), data.draw(hs.integers(0, 40)) * 512,
                             data.draw(hs.integers(0, 4)) * 512))
    hints = {"romio_cb_read": mode, "romio_cb_write": "automatic"}
    t = _trace(rows, hints)
    assert two_phase_mask(t).tolist() == _brute(rows, hints)


def test_ior_strided_collective_is_independent_unless_enabled():
    """IOR -c: the ranks' k-th transfers are consecutive blocks (no interleaving): ROMIO's
    automatic mode runs them as independent I/O (measured: the served run's order made no
    difference, RESULTS.md), ``enable`` through two-phase."""
    tr = ior(4, 256 << 10, 1 << 20, 4, "strided", collective=True)
    auto = tr.with_meta(TraceMeta(source="t", nprocs=4, hints=()))
    assert not two_phase_mask(auto).any() and not romio_view(auto).collective.any()
    on = tr.with_meta(TraceMeta(source="t", nprocs=4, hints=(("romio_cb_write", "enable"),)))
    assert two_phase_mask(on).all() and romio_view(on) is on
