"""A collective trace that recorded its job's two-phase settings (the aggregator ranks a
tracer or a Darshan log saw, the cb_buffer_size hint) is simulated and advised with them, not
with the profile's defaults (issue 15)."""

from __future__ import annotations

import numpy as np

from pario.plan.collective import aggregator_view, two_phase
from pario.simulate import simulate
from pario.system import load_system
from pario.trace import Trace
from pario.trace.core import TraceMeta

M = 1 << 20


def _coll_trace(meta=None):
    # 16 ranks, each writes 4 MiB contiguous: one 64 MiB collective write
    r = np.arange(16)
    return Trace.from_arrays(r, None, ["write"] * 16, r * 4 * M, np.full(16, 4 * M), collective=True, meta=meta)


def test_recorded_aggregators_and_buffer_drive_the_aggregator_view():
    meta = TraceMeta(source="pario tracer", nprocs=16, aggregators=(0, 4, 8, 12),
                     hints=(("cb_buffer_size", str(4 * M)), ("cb_nodes", "4")))
    view = aggregator_view(_coll_trace(meta), procs_per_node=16)
    # the recorded ranks issue the requests; 4 domains of 16 MiB, 4 MiB per cycle → 4 cycles each
    assert sorted(np.unique(view.rank).tolist()) == [0, 4, 8, 12]
    for a, lo in zip((0, 4, 8, 12), range(0, 64 * M, 16 * M)):
        mine = view.take(view.rank == a)
        assert mine.offset.min() == lo and int(mine.end_offset.max()) == lo + 16 * M
        assert mine.length.tolist() == [4 * M] * 4
    # without metadata: ROMIO's default, one aggregator per node (16 ranks on one node here)
    plain = aggregator_view(_coll_trace(), procs_per_node=16)
    assert np.unique(plain.rank).tolist() == [0]
    assert plain.length.tolist() == [16 * M] * 4          # 16 MiB cycles


def test_simulate_uses_the_traced_settings_unless_given():
    system = load_system("hacio-6h2s")
    meta = TraceMeta(nprocs=16, aggregators=(0, 8), hints=(("cb_buffer_size", str(2 * M)),))
    res = simulate(_coll_trace(meta), system, "fixed:64k", collective=True)
    assert res.details["aggregators"] == 2 and res.details["cb_buffer"] == 2 * M
    # 2 domains of 32 MiB in 2 MiB cycles
    assert res.details["calls"][0]["cycles"] == 16
    given = simulate(_coll_trace(meta), system, "fixed:64k", collective=True, aggregators=4, cb_buffer=8 * M)
    assert given.details["aggregators"] == 4 and given.details["calls"][0]["cycles"] == 2
    tp = two_phase(_coll_trace(meta))
    assert (tp.agg_source, tp.cb_source) == ("trace", "trace")
