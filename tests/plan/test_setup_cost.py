"""A plan's setup (:mod:`pario.plan.setup_cost`): the copies ``pario replicate`` makes, priced by
the distribution model, and the break-even runs.

Oracles: a copy priced by hand from CEDA seed 000 eq. 3–4 (one process, one server each side,
stripes larger than the file: one sub-request per step); random copies rebuilt step by step
with a Python loop over the bytes (the replicator's grouping as its docstring states it) and
priced by the reference distribution model of ``tests/oracles/models.py`` (every request
mapped, sub-requests sorted); the break-even runs by counting n = 1, 2, … until
n·run1 ≥ setup + n·run2; the copies' bytes against what ``pario replicate`` copies into a
real store (its JSON report and the RMT)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from oracles.models import ReferenceDistributionModel

from pario.layout import ExtentMap, parse_layout
from pario.plan.base import Plan
from pario.plan.setup_cost import (Copy, break_even_runs, copy_cost, copy_costs, copy_groups, plan_copies, plan_setup,
                                   replica_extents, whole_job_ratio)
from pario.plan.setup_cost import _steps
from pario.system import System
from pario.trace import Trace

MiB = 1 << 20

PROFILE = {
    "name": "two-kinds", "network": {"e": 0.0, "t": 0.0}, "clients": {"procs_per_node": 1},
    "server": [
        {"name": "A", "kind": "hdd", "alpha": 0.5, "beta": 1e-9, "alpha_read_rand": 0.01, "alpha_read_seq": 0.001,
         "alpha_write_rand": 0.02, "alpha_write_seq": 0.002, "beta_read": 1e-9, "beta_write": 2e-9},
        {"name": "B", "kind": "ssd", "alpha": 0.5, "beta": 1e-9, "alpha_read_rand": 0.003, "alpha_read_seq": 0.0003,
         "alpha_write_rand": 0.005, "alpha_write_seq": 0.0005, "beta_read": 3e-10, "beta_write": 6e-10},
    ],
}


@pytest.fixture(scope="module")
def system():
    return System.from_dict(PROFILE)


def test_copy_priced_by_hand(system):
    """20 MiB from server A to server B in 8 MiB steps (8, 8, 4 MiB): each step's read on A and
    write on B are one sub-request each (stripes of 32 MiB), the first of each server random
    (α_rand), the next ones start where the previous sub-request on that server ended
    (α_seq): T = Σ (α + s·β) of the reads plus of the writes (eq. 3 with p = 1; one server per
    batch, so eq. 4's max is that server).  Read back (relayout), every read-back starts where
    the step's write began, not where it ended: random; the next write follows the read-back's
    end: sequential."""
    a = parse_layout("fixed:32M@A", system)
    b = parse_layout("fixed:32M@B", system)
    size = 20 * MiB
    steps = [8 * MiB, 8 * MiB, 4 * MiB]
    reads = 0.01 + 2 * 0.001 + size * 1e-9
    writes = 0.005 + 2 * 0.0005 + size * 6e-10
    assert copy_cost(a, b, [0], [size], system) == pytest.approx(reads + writes, rel=1e-12)
    backs = sum(0.003 + s * 3e-10 for s in steps)
    assert copy_cost(a, b, [0], [size], system, verify=True) == pytest.approx(reads + writes + backs, rel=1e-12)
    # the other way round: A's write costs
    assert copy_cost(b, a, [0], [size], system) == pytest.approx(
        0.003 + 2 * 0.0003 + size * 3e-10 + 0.02 + 2 * 0.002 + size * 2e-9, rel=1e-12)
    assert copy_cost(a, b, [0], [0], system) == 0.0


def _groups_by_bytes(ranges, chunk):
    """The replicator's grouping from its definition: the ranges' bytes end to end, cut every
    ``chunk`` bytes; each group's pieces as (offset, length), one Python step per byte run."""
    out, cur, room = [], [], chunk
    for x, n in ranges:
        while n > 0:
            c = min(room, n)
            cur.append((x, c))
            x, n, room = x + c, n - c, room - c
            if room == 0:
                out.append(cur)
                cur, room = [], chunk
    if cur:
        out.append(cur)
    return out


@pytest.mark.parametrize("seed", range(6))
def test_steps_are_the_replicators_groups(seed):
    rng = np.random.default_rng(seed)
    for _ in range(50):
        n = int(rng.integers(0, 10))
        offs, lens = rng.integers(0, 4000, n), rng.integers(0, 300, n)
        chunk = int(rng.integers(1, 700))
        ranges = [(int(o), int(ln)) for o, ln in zip(offs, lens) if ln > 0]
        want = _groups_by_bytes(ranges, chunk)
        assert [list(g) for g in copy_groups(ranges, chunk)] == want
        o, ln, g = _steps(offs, lens, chunk)
        assert [(int(gi), int(a), int(b)) for gi, a, b in zip(g, o, ln)] == \
            [(k, a, b) for k, grp in enumerate(want) for a, b in grp]


def _reference_copy(src, dst, offs, lens, system, chunk, verify):
    """A copy rebuilt from the grouping's definition and priced by the reference model: a group
    is one vectored read and one vectored write, so its pieces that touch are one request."""
    groups = _groups_by_bytes([(int(o), int(n)) for o, n in zip(offs, lens) if n > 0], chunk)
    rows = []
    for g, pieces in enumerate(groups):
        grp = []
        for x, n in pieces:
            if grp and grp[-1][0] + grp[-1][1] == x:
                grp[-1] = (grp[-1][0], grp[-1][1] + n)
            else:
                grp.append((x, n))
        passes = [(0, 0), (1, 1)] + ([(1, 0)] if verify else [])
        for step, (f, op) in enumerate(passes):
            rows += [(f, op, x, n, g * len(passes) + step) for x, n in grp]
    if not rows:
        return 0.0
    f, op, x, n, b = map(np.array, zip(*rows))
    tr = Trace.from_arrays(np.zeros(len(f)), f, op, x, n, files=("s", "d"), order=np.arange(len(f)))
    return ReferenceDistributionModel().trace_cost(tr, {"s": src, "d": dst}, system, batches=b).predicted_s


def _random_extent_map(rng, system, size):
    """Extents between random cuts: every other gap left out, or (half the time) all of them
    side by side (a strided pattern's replica covers its file end to end)."""
    cuts = np.unique(rng.integers(0, size, 12))
    offs, lens, srv, loc = [], [], [], []
    pos = {j: 0 for j in range(system.n)}
    pairs = zip(cuts[:-1:2], cuts[1::2]) if rng.random() < 0.5 else zip(cuts[:-1], cuts[1:])
    for a, b in pairs:
        j = int(rng.integers(0, system.n))
        offs.append(int(a)), lens.append(int(b - a)), srv.append(j), loc.append(pos[j])
        pos[j] += int(b - a)
    return ExtentMap(np.array(offs), np.array(lens), np.array(srv), np.array(loc), np.ones(len(offs), np.int64), None)


@pytest.mark.parametrize("seed", range(4))
def test_copies_against_the_reference_model(system, seed):
    """Random copies (striped source, extent-map or striped destination, read-back or not, small
    chunks so that groups mix ranges) priced in one call: each equals the reference model's price
    of the copy rebuilt by hand, and pricing them together equals pricing each alone."""
    rng = np.random.default_rng(100 + seed)
    copies = []
    for _ in range(5):
        size = int(rng.integers(1, 3 * MiB))
        src = parse_layout(f"fixed:{int(rng.choice([4, 64, 1024]))}K", system)
        dst = _random_extent_map(rng, system, size) if rng.random() < 0.6 else \
            parse_layout(f"fixed:{int(rng.choice([16, 256]))}K@B", system)
        offs, lens = replica_extents(dst, size) if isinstance(dst, ExtentMap) else ([0], [size])
        copies.append(Copy("f", "replica", "r", src, dst, np.asarray(offs), np.asarray(lens), bool(rng.random() < 0.5)))
    chunk = int(rng.integers(64 << 10, 1 * MiB))
    got = copy_costs(copies, system, chunk=chunk)
    for c, g in zip(copies, got):
        want = _reference_copy(c.src, c.dst, c.offsets, c.lengths, system, chunk, c.verify)
        assert g == pytest.approx(want, rel=1e-9)
        assert copy_cost(c.src, c.dst, c.offsets, c.lengths, system, verify=c.verify, chunk=chunk) == \
            pytest.approx(g, rel=1e-12)


def _brute_break_even(r1, r2, s, limit=100_000):
    for n in range(1, limit):
        if n * r1 >= s + n * r2:
            return n
    return None


def test_break_even_runs_by_counting():
    rng = np.random.default_rng(7)
    for _ in range(2000):
        r1, r2 = float(rng.uniform(0.01, 5)), float(rng.uniform(0.01, 5))
        s = float(rng.choice([0.0, rng.uniform(0, 50), rng.uniform(0, 0.01)]))
        want = _brute_break_even(r1, r2, s) if r1 > r2 and (s / (r1 - r2)) < 90_000 else None
        got = break_even_runs(r1, r2, s)
        if r1 <= r2:
            assert got is None
        elif want is not None:
            assert got == want, (r1, r2, s)
    # exact multiples: the setup paid exactly after n runs
    assert break_even_runs(3.0, 1.0, 4.0) == 2 and break_even_runs(3.0, 1.0, 4.000001) == 3
    assert break_even_runs(1.0, 1.0, 0.0) is None and break_even_runs(None, 1.0, 0.0) is None
    assert break_even_runs(2.0, 1.0, 0.0) == 1
    assert whole_job_ratio(3.0, 1.0, 1.0) == 1.5 and whole_job_ratio(3.0, None, 1.0) is None


def _ceda_plan(system, size):
    rep = ExtentMap(np.array([0, 3 * MiB]), np.array([MiB, 2 * MiB]), np.array([1, 1]), np.array([0, MiB]),
                    np.array([1, 1]), parse_layout("fixed:64K", system))
    return Plan(scheme="ceda", layouts={"b": parse_layout("fixed:1M@B", system), "*": parse_layout("fixed:64K", system)},
                replicas={"a": [{"name": "ceda", "layout": rep}], "b": [{"name": "ceda", "layout": rep}],
                          "gone": [{"name": "x", "layout": rep}]},
                system_name=system.name)


def test_plan_copies_as_pario_replicate_applies_them(system):
    """Relayout only for a file the plan names whose layout differs (``*`` is for new files);
    replicas read from the file's layout after relayout, their extents clipped to the file; a
    replica of a file not in the store is left; the setup is the sum of the copies, each as
    priced alone."""
    orig = parse_layout("fixed:64K", system)
    plan = _ceda_plan(system, 4 * MiB)
    files = {"a": (4 * MiB, orig), "b": (4 * MiB - 100, orig), "c": (MiB, orig)}
    copies, left = plan_copies(plan, system, files)
    assert [(c.file, c.kind) for c in copies] == [("b", "relayout"), ("a", "replica"), ("b", "replica")]
    assert copies[0].nbytes == 4 * MiB - 100 and copies[0].verify
    assert copies[1].nbytes == 2 * MiB and copies[2].nbytes == 2 * MiB - 100     # clipped to each file
    assert copies[2].src == plan.layouts["b"] and copies[1].src == orig
    assert [x["file"] for x in left] == ["gone"]
    st = plan_setup(plan, system, files)
    assert st["relaid"] == ["b"] and st["bytes"] == sum(c.nbytes for c in copies)
    alone = [copy_cost(c.src, c.dst, c.offsets, c.lengths, system, verify=c.verify) for c in copies]
    assert [r["seconds"] for r in st["copies"]] == pytest.approx(alone, rel=1e-12)
    assert st["seconds"] == pytest.approx(sum(alone), rel=1e-12)
    # a file already on the plan's layout is not copied again
    same = plan_copies(plan, system, {"b": (MiB, plan.layouts["b"])})[0]
    assert [(c.file, c.kind) for c in same] == [("b", "replica")]


def test_setup_bytes_are_what_pario_replicate_copies(tmp_path, system):
    """A store holding two files: ``pario replicate`` relays one out and copies the replicas;
    the bytes it reports (relayout's moved bytes, the replicator's copied bytes) and the RMT's
    replica bytes are the plan's predicted copies."""
    from pario.cli import main
    from pario.store import Store, init_store

    prof = tmp_path / "p.json"
    store = tmp_path / "store"
    init_store(store, system)
    rng = np.random.default_rng(3)
    with Store(store) as st:
        for name, size in (("a", 4 * MiB), ("b", 4 * MiB - 100)):
            st.create(name, "fixed:64K")
            with st.open(name) as f:
                f.write(0, rng.integers(1, 255, size, dtype=np.uint8).tobytes())
        files = {n: (st.stat(n).size, st.stat(n).layout) for n in ("a", "b")}
    plan = _ceda_plan(system, 4 * MiB)
    plan.replicas.pop("gone")
    plan.save(prof, system)
    setup = plan_setup(plan, system, files)
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["replicate", str(prof), "--store", str(store), "--json"]) == 0
    out = json.loads(buf.getvalue())
    moved = {x["file"]: x["moved_bytes"] for x in out["layouts"] if x["file"] != "*"}
    assert moved == {c["file"]: c["bytes"] for c in setup["copies"] if c["kind"] == "relayout"}
    assert out["copied_bytes"] == sum(c["bytes"] for c in setup["copies"] if c["kind"] == "replica")
    with Store(store) as st:
        assert st.rmt.replica_bytes() == out["copied_bytes"]
    assert math.isfinite(setup["seconds"]) and setup["seconds"] > 0
