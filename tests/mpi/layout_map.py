"""Run under mpiexec -n 1: the C layout callback of pario.mpi.File (the store engine's
layout, cut into pieces in pycollective.c) cuts and places pieces as the independent numpy
mapping says (tests/oracles/layout.py), for every layout kind.

Usage: layout_map.py
For striped (varied, a zero stripe), 2-D, regions and extent-map layouts (with and
without a default; ranges inside the extents for the latter), random disjoint ranges are
written collectively (ROMCIO, one aggregator, io a no-op) with the report on: the
aggregator's pieces (offset, length, server, kind), sorted by offset, must be the maximal
runs of bytes of each range that sit on one server back to back (each byte's server and
server-local offset from the oracle mapping, byte by byte; a piece ends where the server
changes or the next byte is not the next local byte).  Prints "ok".
"""
import sys
from pathlib import Path

import numpy as np
from mpi4py import MPI

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # tests/: the oracles
from oracles.layout import map_requests  # noqa: E402

from pario.layout import ExtentMap, Grouped, Region, Regions, Striped  # noqa: E402
from pario.mpi import twophase  # noqa: E402
from pario.mpi.placement import Placement  # noqa: E402


def runs(layout, off, ln):
    """The oracle's pieces of ranges (off, ln): (offset, length, server), by offset."""
    out = []
    for o, n in sorted(zip(off.tolist(), ln.tolist())):
        x = np.arange(o, o + n, dtype=np.int64)
        sub = map_requests(layout, x, np.ones_like(x))
        srv, loc = sub.server.astype(np.int64), sub.local
        cut = np.r_[True, (srv[1:] != srv[:-1]) | (loc[1:] != loc[:-1] + 1)]
        starts = np.flatnonzero(cut)
        ends = np.r_[starts[1:], n]
        out += [(o + a, b - a, int(srv[a])) for a, b in zip(starts.tolist(), ends.tolist())]
    return np.array(out, np.int64).reshape(-1, 3)
from pario.native import _collective as tp  # noqa: E402

comm = MPI.COMM_WORLD.Dup()
rng = np.random.default_rng(11)
KINDS = np.array([0, 1, 0, 1, 1], np.int64)
striped = Striped((0, 1, 2, 3), (4096, 0, 8192, 1000))
grouped = Grouped(((0, 1), (2, 3, 4)), 3000)
regions = Regions((Region(0, 50_000, Striped.fixed(4096, (0, 1))), Region(50_000, 90_000, grouped),
                   Region(90_000, 97_000, Striped.fixed(500, (4, 2))), Region(97_000, None, striped)))
ext = dict(offset=np.array([1000, 20_000, 20_500, 70_000]), length=np.array([5000, 500, 9000, 30_000]),
           server=np.array([4, 1, 0, 2]), local=np.zeros(4, np.int64), datafile=np.ones(4, np.int64))
LAYOUTS = {"striped": (striped, 150_000), "grouped": (grouped, 150_000), "regions": (regions, 200_000),
           "extents": (ExtentMap(**ext, default=striped), 150_000), "extents-only": (ExtentMap(**ext), None)}


def ranges(span, inside=None):
    if inside is not None:   # inside the extents of an extent map without a default
        k = rng.integers(0, len(inside["offset"]), 20)
        o = inside["offset"][k] + rng.integers(0, inside["length"][k] // 2)
        ln = rng.integers(1, inside["length"][k] - (o - inside["offset"][k]) + 1)
        off, lens, end = [], [], -1
        for a, b in sorted(zip(o.tolist(), ln.tolist())):
            if a >= end:
                off.append(a)
                lens.append(b)
                end = a + b
        return np.array(off, np.int64), np.array(lens, np.int64)
    cuts = np.sort(rng.choice(np.arange(1, span), size=40, replace=False))
    perm = rng.permutation(20)
    return cuts[0::2][perm].astype(np.int64), (cuts[1::2] - cuts[0::2])[perm].astype(np.int64)


for name, (layout, span) in LAYOUTS.items():
    pl = Placement(layout, KINDS)
    table = twophase.compile_layout(pl)
    for trial in range(10):
        off, ln = ranges(span, ext if span is None else None)
        buf = np.zeros(int(ln.sum()), np.uint8)
        code, moved, indep, rep, exc = tp.collective(MPI._handleof(comm), 1, off, ln, buf, 0, 1 << 20, 0, None,
                                                     tp.CB_ENABLE, table, -1, lambda *a: 0, True)
        assert exc is None and code == tp.OK, (name, code, exc)
        s = twophase._schedule(rep, 1 << 20)
        r = runs(layout, off, ln)
        by = np.argsort(s.offset, kind="stable")
        got = np.stack([s.offset[by], s.length[by], s.server[by], s.kind[by]])
        want = np.stack([r[:, 0], r[:, 1], r[:, 2], KINDS[r[:, 2]]])
        assert got.shape == want.shape and (got == want).all(), (name, trial, got, want)
comm.Free()
print("ok")
