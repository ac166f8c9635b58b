"""``pario bench run`` / :func:`pario.testbed.bench.replay` with a plan that has replicas:
the replicas are copied before the timed part, and the timed reads are redirected to them.

Checked independently of the replay: the bytes copied equal the plan's replica extents
(their lengths summed, clipped to the file); the bytes the timed reads took from replica
files equal the overlap of the trace's requests with those extents (numpy), counted by
wrapping the backend's reads; the replica files hold those bytes.
"""

from __future__ import annotations

import numpy as np

from pario.layout import ExtentMap, parse_layout
from pario.plan.ceda import CEDAPlanner
from pario.store import init_store
from pario.system import load_system
from pario.testbed.bench import replay
from pario.workload.ior import ior


def _overlap(off, ln, eo, el) -> int:
    """Bytes of the requests [off, off+ln) inside the union of disjoint extents [eo, eo+el)."""
    tot = 0
    for a, b in zip(eo.tolist(), (eo + el).tolist()):
        tot += int(np.clip(np.minimum(off + ln, b) - np.maximum(off, a), 0, None).sum())
    return tot


def test_replay_places_the_plans_replicas_and_reads_through_them(tmp_path, monkeypatch):
    system = load_system("padp-6h2s")
    dirs = {n: str(tmp_path / n) for n in system.names}
    for p in dirs.values():
        (tmp_path / p).mkdir(parents=True, exist_ok=True)
    init_store(tmp_path / "store", system, dirs)
    hdds = [s.name for s in system.servers if s.kind == "hdd"]
    orig = f"fixed:64K@{','.join(hdds)}"
    trace = ior(4, 16 << 10, 1 << 20, 1, pattern="random", op="read", seed=3)
    plan = CEDAPlanner(original=orig).plan(trace, system)
    reps = plan.replicas.get(trace.files[0], [])
    assert reps, "CEDA replicates this random small-read workload"
    size = int((trace.offset + trace.length).max())
    want = 0
    for r in reps:
        lay = r["layout"]
        assert isinstance(lay, ExtentMap)
        want += int(np.minimum(lay.offset + lay.length, size).clip(min=lay.offset).sum() - lay.offset.sum())
    from pario.store.redirect import File

    got = {"original": 0, "replica": 0}          # bytes read, by copy (the engine's per-file counters)
    real_close = File._close_now

    def close_now(self):
        st = self.stats
        got["original"] += st["read_original"]
        got["replica"] += st["read_replica"]
        return real_close(self)

    monkeypatch.setattr(File, "_close_now", close_now)
    res = replay(trace, tmp_path / "store", procs=4, layout=parse_layout(orig, system), plan=plan, direct=False,
                 keep=True)
    monkeypatch.undo()
    assert res.replica_bytes == want
    eo = np.concatenate([r["layout"].offset for r in reps])
    el = np.concatenate([r["layout"].length for r in reps])
    assert got["replica"] == _overlap(trace.offset, trace.length, eo, el) > 0
    assert got["original"] + got["replica"] == int(trace.length.sum())
    # the replica files exist in the store next to the kept bench file, with those bytes
    from pario.store import Store

    with Store(tmp_path / "store") as st:
        names = [n for n in st.backend.list() if n.startswith(".replica/")]
        assert names, st.backend.list()
        assert sum(int(st.stat(n).server_bytes.sum()) for n in names) == want
    plain = replay(trace, tmp_path / "store", procs=4, layout=parse_layout(orig, system), direct=False)
    assert plain.replica_bytes == 0
