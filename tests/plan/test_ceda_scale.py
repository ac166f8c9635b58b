"""Issue 18, CEDA at scale: the compiled identifier, planner and analyzer against the
pre-issue-18 vectorised code.

The oracle is that code, kept unchanged in the tests: ``oracles/patterns.py`` (the
identifier's segmentation) and ``oracles/ceda.py`` (identifier, Algorithm 1 placement,
analyzer, combined plan, and the CEDA planner running them, ``ReferenceCEDAPlanner``), priced
by the reference distribution model (``oracles/models.py``), which maps every request with
:func:`pario.layout.map_trace` and sorts the sub-requests.
Every output must be equal: the segmentation's tables, the patterns table and every request's
pattern, the replica extent maps (offsets, lengths, servers, local offsets, data files), the
PBT (floating-point values to 1e-9: summation order), the selections and the plan's JSON.
The traces are random: several files and ranks, overlapping and repeated requests,
zero-length requests, strided / contiguous / random / repeated pieces, with and without
timestamps, unordered ``order`` columns.
"""

from __future__ import annotations

import json

import numpy as np
import oracles.ceda as ceda_reference
import pandas as pd
import pytest
from oracles.ceda import ReferenceCEDAPlanner
from oracles.models import ReferenceDistributionModel
from oracles.patterns import segment as segment_reference

from pario import ParioError
from pario.layout import ExtentMap, Grouped, Striped, map_trace
from pario.layout.extents_kernel import map_in_order
from pario.model import DistributionModel
from pario.model.batches import batch_ids
from pario.plan import ceda_analyze, ceda_combine, ceda_identify, ceda_place
from pario.plan.ceda import CEDAPlanner
from pario.system import load_system
from pario.trace import Trace
from pario.trace.patterns import segment
from pario.trace.sorting import by_key_then_order, counting_order, offset_order
from pario.workload.ior import ior

KiB = 1024
REL = 1e-9


def random_trace(seed: int, n: int | None = None) -> Trace:
    """A random trace mixing every kind of stream (see the module docstring)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400)) if n is None else n
    ranks = int(rng.integers(1, 7))
    nfiles = int(rng.integers(1, 4))
    rank = rng.integers(0, ranks, n)
    f = rng.integers(0, nfiles, n)
    op = rng.integers(0, 2, n)
    unit = int(rng.choice([512, 4 * KiB, 64 * KiB]))
    kind = seed % 6
    if kind == 5:  # every block twice, in random order (a stream revisits its extents)
        off = rng.permutation(np.repeat(np.arange(n // 2 + 1), 2))[:n] * unit
    elif kind == 0:  # random blocks, many overlaps
        off = rng.integers(0, 64, n) * unit
    elif kind == 1:  # strided per position
        off = (np.arange(n) * 3 * unit) % (1 << 24)
    elif kind == 2:  # repeated pieces
        off = np.repeat(rng.integers(0, 200, n // 8 + 1), 8)[:n] * unit
    elif kind == 3:  # contiguous runs
        off = np.cumsum(rng.choice([0, unit, unit, 2 * unit], n))
    else:  # unaligned
        off = rng.integers(0, 1 << 20, n)
    ln = rng.choice([0, unit // 2, unit, unit, 2 * unit, 3 * unit + 7], n)
    times = seed % 3 == 1
    st = np.sort(rng.random(n) * 10) if times else None
    en = st + rng.random(n) * 0.05 if times else None
    order = rng.integers(0, max(n // 4, 1), n) if seed % 7 == 3 else None  # ties and disorder
    return Trace.from_arrays(rank, f, op, off, ln, files=[f"f{i}" for i in range(nfiles)], start=st, end=en,
                             order=order)


def ior_traces():
    return [
        ior(8, 64 * KiB, 16 * 64 * KiB, 3, pattern="random", op="both", seed=3),
        ior(8, 64 * KiB, 64 * KiB, 20, pattern="strided", op="both"),
        ior(4, 32 * KiB, 64 * 32 * KiB, 2, pattern="sequential", op="both"),
        Trace.concat([ior(8, 64 * KiB, 8 * 64 * KiB, 1, pattern="random", op="read", seed=3, file="x"),
                      ior(8, 64 * KiB, 8 * 64 * KiB, 1, pattern="sequential", op="write", file="x"),
                      ior(4, 16 * KiB, 4 * 16 * KiB, 2, pattern="strided", op="both", file="y")]),
        Trace.concat([ior(4, 16 * KiB, 8 * 16 * KiB, 1, pattern="random", op="read", seed=5)] * 2),  # read twice
    ]


SEEDS = range(40)


# --------------------------------------------------------------------------- orders


@pytest.mark.parametrize("seed", range(10))
def test_orders_equal_lexsort(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 3000))
    key = rng.integers(0, 9, n)
    order = rng.integers(0, 40, n) if seed % 2 else np.arange(n)
    off = rng.integers(0, 1 << 40, n) * int(rng.choice([1, 65536]))
    assert np.array_equal(by_key_then_order(key, order), np.lexsort((np.arange(n), order, key)))
    rows = np.flatnonzero(rng.random(n) < 0.5).astype(np.int32)
    assert np.array_equal(by_key_then_order(key, order, rows=rows), rows[np.lexsort((rows, order[rows], key[rows]))])
    assert np.array_equal(counting_order(rows, key), rows[np.argsort(key[rows], kind="stable")])
    assert np.array_equal(offset_order(off), np.argsort(off, kind="stable"))


# --------------------------------------------------------------------------- identifier


def _same_segmentation(a, b):
    assert np.array_equal(a.rows, b.rows)
    assert np.array_equal(a.stream, b.stream)
    assert np.array_equal(a.run, b.run)
    pd.testing.assert_frame_equal(a.streams, b.streams)
    pd.testing.assert_frame_equal(a.runs, b.runs)


@pytest.mark.parametrize("seed", SEEDS)
def test_segment_equals_reference(seed):
    tr = random_trace(seed)
    for by_op in (True, False):
        _same_segmentation(segment(tr, by_op=by_op), segment_reference(tr, by_op=by_op))


def test_segment_equals_reference_on_ior_and_edge_cases():
    cases = ior_traces() + [Trace.empty(), Trace.from_arrays([0], None, [0], [0], [4096]),
                            Trace.from_arrays([0, 0, 0], None, [0, 0, 0], [0, 0, 0], [10, 10, 10])]
    for tr in cases:
        _same_segmentation(segment(tr), segment_reference(tr))


def _same_patterns(a, b):
    pd.testing.assert_frame_equal(a.table, b.table)
    assert np.array_equal(a.of_request, b.of_request)
    pd.testing.assert_frame_equal(a.streams, b.streams)


@pytest.mark.parametrize("seed", SEEDS)
def test_identifier_equals_reference(seed):
    tr = random_trace(seed)
    _same_patterns(ceda_identify.identify_patterns(tr), ceda_reference.identify_patterns(tr))


def test_identifier_equals_reference_on_ior():
    for tr in ior_traces():
        _same_patterns(ceda_identify.identify_patterns(tr), ceda_reference.identify_patterns(tr))


# --------------------------------------------------------------------------- planner


def _emap_key(emap: ExtentMap):
    return tuple(tuple(getattr(emap, k).tolist()) for k in ("offset", "length", "server", "local", "datafile")) + (
        emap.default,)


@pytest.mark.parametrize("seed", SEEDS)
def test_planned_layouts_equal_reference(seed):
    tr = random_trace(seed)
    system = load_system("ceda-hdd8")
    pats = ceda_reference.identify_patterns(tr)
    orig = Striped.fixed(64 * KiB, range(8))
    rng = np.random.default_rng(seed)
    servers = None if seed % 3 else sorted(rng.choice(8, int(rng.integers(1, 5)), replace=False).tolist())
    for mode, stripe in (("ceda", None), ("cida", None), ("cida", int(rng.choice([512, 4096, 100000])))):
        got, space = ceda_place.plan_layouts(tr, pats, system, orig, mode=mode, servers=servers, stripe=stripe)
        ref, rspace = ceda_reference.plan_layouts(tr, pats, system, orig, mode=mode, servers=servers, stripe=stripe)
        assert np.array_equal(space, rspace)
        assert got.keys() == ref.keys()
        for p in got:
            assert _emap_key(got[p]) == _emap_key(ref[p]), (mode, p)


def test_planned_layouts_equal_reference_on_ior():
    system = load_system("ceda-hdd8")
    for tr in ior_traces():
        pats = ceda_identify.identify_patterns(tr)
        for mode in ("ceda", "cida"):
            got, space = ceda_place.plan_layouts(tr, pats, system, "fixed:64K", mode=mode)
            ref, rspace = ceda_reference.plan_layouts(tr, pats, system, "fixed:64K", mode=mode)
            assert np.array_equal(space, rspace)
            assert [_emap_key(got[p]) for p in got] == [_emap_key(ref[p]) for p in ref]


def test_claim_keeps_the_first_claimant():
    """A byte wanted by several requests of a pattern is placed once, in the object of the
    request that comes first (lower rank, then earlier request); an object is the bytes a
    rank keeps, object i on replica file (and server) i mod n.  Three ranks, two strided
    one-block reads each (one pattern): rank 1's first block is rank 0's second, rank 2's
    first is rank 0's first."""
    B = 4096
    tr = Trace.from_arrays([0, 0, 1, 1, 2, 2], None, [0] * 6, np.array([0, 4, 4, 6, 0, 2]) * B, [B] * 6)
    system = load_system("ceda-hdd8")
    pats = ceda_identify.identify_patterns(tr)
    assert len(pats) == 1
    layouts, space = ceda_place.plan_layouts(tr, pats, system, Striped.fixed(B, range(8)))
    emap = layouts[0]
    assert space.tolist() == [4 * B]
    assert emap.offset.tolist() == [0, 2 * B, 4 * B, 6 * B]
    assert emap.server.tolist() == [0, 2, 0, 1]
    assert emap.local.tolist() == [0, 0, B, 0]
    assert emap.datafile.tolist() == [1, 3, 1, 2]


# --------------------------------------------------------------------------- analyzer and plan


def _same_pbt(a: pd.DataFrame, b: pd.DataFrame):
    assert list(a.columns) == list(b.columns)
    for c in a.columns:
        x, y = a[c].to_numpy(), b[c].to_numpy()
        if x.dtype.kind == "f":
            assert np.allclose(x, y, rtol=REL, atol=0, equal_nan=True), c
        else:
            assert x.tolist() == y.tolist(), c


@pytest.fixture
def small_chunks(monkeypatch, request):
    """Extent maps priced a few batches at a time (:func:`pario.model.engine.price_extents_by_chunks`)."""
    from pario.model import engine

    monkeypatch.setattr(engine, "MAP_CHUNK", request.param)
    return request.param


@pytest.mark.parametrize("small_chunks", [5, 1 << 22], indirect=True)
@pytest.mark.parametrize("seed", SEEDS)
def test_analysis_equals_reference(seed, small_chunks):
    tr = random_trace(seed)
    system = load_system(("ceda-hdd8", "padp-6h2s", "psa-4h4s")[seed % 3])
    kw = dict(by=("auto", "order", "all", "request")[seed % 4], with_cida=seed % 2 == 0, flush=seed % 5 != 0,
              model_params={"network": True} if seed % 6 == 1 else None)
    an = ceda_analyze.analyze(tr, system, **kw)
    model = ReferenceDistributionModel(**(kw.pop("model_params") or {}))
    ref = ceda_reference.analyze(tr, system, model=model, **kw)
    _same_patterns(an.patterns, ref.patterns)
    _same_pbt(an.pbt, ref.pbt)
    assert [_emap_key(an.layouts[p]) for p in an.layouts] == [_emap_key(ref.layouts[p]) for p in ref.layouts]
    assert [_emap_key(an.cida_layouts[p]) for p in an.cida_layouts] == [
        _emap_key(ref.cida_layouts[p]) for p in ref.cida_layouts]
    # every chosen set of patterns gives the reference's combined extent maps
    rng = np.random.default_rng(seed)
    for trial in range(3):
        mask = rng.random(len(an.patterns)) < (0.3, 0.7, 1.0)[trial]
        for mode in ("ceda", "cida"):
            got = ceda_combine.combined_replicas(tr, an, mask, system, mode=mode)
            want = ceda_reference.combined_replicas(tr, ref, mask, system, mode=mode)
            assert list(got) == list(want)
            for f in got:
                g, w = dict(got[f]), dict(want[f])
                assert _emap_key(g.pop("layout")) == _emap_key(w.pop("layout"))
                assert g == w


def _plan_json(plan, system):
    d = plan.to_dict(system)
    return json.loads(json.dumps(d, default=str))


def _same_json(a, b, path=""):
    if isinstance(a, float) and isinstance(b, float):
        assert a == pytest.approx(b, rel=REL, abs=1e-300) or (np.isnan(a) and np.isnan(b)), path
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            _same_json(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _same_json(x, y, f"{path}[{i}]")
    else:
        assert a == b, path


@pytest.mark.parametrize("small_chunks", [3, 1 << 22], indirect=True)
@pytest.mark.parametrize("seed", range(24))
def test_plan_equals_reference(seed, small_chunks):
    tr = random_trace(seed)
    system = load_system(("ceda-hdd8", "padp-6h2s")[seed % 2])
    rng = np.random.default_rng(seed)
    params = dict(selection=("paper", "knapsack")[seed % 2], flush=seed % 3 != 0,
                  servers=None if seed % 4 else [0, 1], by=("auto", "order")[seed % 2])
    total = int(tr.length.sum())
    for budget in (None, int(rng.integers(0, total + 1)), 0):
        try:
            plan = CEDAPlanner(**params).plan(tr, system, budget=budget)
        except ParioError:
            with pytest.raises(ParioError):
                ReferenceCEDAPlanner(**params).plan(tr, system, budget=budget)
            continue
        ref = ReferenceCEDAPlanner(**params).plan(tr, system, budget=budget)
        _same_json(_plan_json(plan, system), _plan_json(ref, system))


def test_plan_equals_reference_on_ior():
    system = load_system("ceda-hdd8")
    for tr in ior_traces():
        for flush in (True, False):
            plan = CEDAPlanner(flush=flush).plan(tr, system)
            ref = ReferenceCEDAPlanner(flush=flush).plan(tr, system)
            _same_json(_plan_json(plan, system), _plan_json(ref, system))


# --------------------------------------------------------------------------- extent-map pricing


def random_extent_map(rng, n_servers: int, default, span: int = 1 << 21) -> ExtentMap:
    k = int(rng.integers(0, 60))
    cuts = np.sort(rng.choice(span, 2 * k, replace=False))
    off, end = cuts[0::2], cuts[1::2]
    keep = end > off
    off, end = off[keep], end[keep]
    return ExtentMap(off, end - off, rng.integers(0, n_servers, len(off)), rng.integers(0, 1 << 20, len(off)),
                     rng.integers(1, 4, len(off)), default)


@pytest.mark.parametrize("spare", [1, 1024])
@pytest.mark.parametrize("seed", range(20))
def test_extent_mapping_equals_map_trace(seed, spare, monkeypatch):
    rng = np.random.default_rng(seed)
    tr = random_trace(seed)
    defaults = [Striped.fixed(4096, range(4)), Grouped(((0, 1), (2, 3)), 16384), Striped((1, 2), (8192, 0))]
    per_file = []
    for fi in range(len(tr.files)):
        if rng.random() < 0.25:
            per_file.append(defaults[fi % 3])
        else:
            per_file.append(random_extent_map(rng, 4, defaults[int(rng.integers(0, 3))]))
    if not any(isinstance(x, ExtentMap) for x in per_file):
        per_file[0] = random_extent_map(rng, 4, defaults[0])
    layout = dict(zip(tr.files, per_file))
    want = map_trace(tr, layout)
    monkeypatch.setattr("pario.layout.extents_kernel.SPARE", spare)  # (1: the tables grow, the mapping resumes)
    ptr, srv, loc, ln, df = map_in_order(per_file, np.arange(len(per_file)), tr.file, tr.offset, tr.length)
    assert np.array_equal(np.diff(ptr), np.bincount(want.req, minlength=len(tr)))
    assert np.array_equal(srv, want.server) and np.array_equal(loc, want.local)
    assert np.array_equal(ln, want.length) and np.array_equal(df, want.datafile)
    # priced as the reference, in any batching
    system = load_system("ceda-hdd8")
    for by in ("auto", "order", "all"):
        bid = batch_ids(tr, by)
        got = DistributionModel().trace_cost(tr, layout, system, batches=bid)
        ref = ReferenceDistributionModel().trace_cost(tr, layout, system, batches=bid)
        assert got.predicted_s == pytest.approx(ref.predicted_s, rel=1e-12)
        assert np.allclose(got.per_batch, ref.per_batch, rtol=1e-12, atol=0)
        assert np.allclose(got.servers, ref.servers, rtol=1e-12, atol=0)


def test_extent_mapping_without_default_raises():
    tr = Trace.from_arrays([0], None, [0], [0], [8192])
    emap = ExtentMap(np.array([0]), np.array([4096]), np.array([0]), np.array([0]), np.array([1]), None)
    with pytest.raises(ParioError, match="no default layout"):
        DistributionModel().trace_cost(tr, emap, load_system("ceda-hdd8"))


@pytest.mark.parametrize("seed", range(6))
def test_analysis_by_any_model_equals_the_compiled_path(seed):
    """A model without the compiled capability is priced through its own ``trace_cost`` (a
    virtual trace per call, :class:`pario.plan.ceda_analyze.ModelPricing`): a subclass that
    changes nothing but declares no compiled pricing gives the compiled analyzer's PBT."""

    class Same(DistributionModel):
        compiled = False

    tr = random_trace(100 + seed)
    system = load_system("ceda-hdd8")
    _same_pbt(ceda_analyze.analyze(tr, system, model=Same(), with_cida=True).pbt,
              ceda_analyze.analyze(tr, system, with_cida=True).pbt)


def test_orig_baseline_from_the_analyzer_is_the_model_price():
    """When the analyzer priced the trace's own requests (one pattern a file, in the trace's
    batches), its T_O pricing gives the ORIG baseline: exactly the model's price of the
    whole trace under the original layouts."""
    system = load_system("ceda-hdd8")
    for tr in ior_traces()[:3] + [random_trace(3, 300)]:
        an = ceda_analyze.analyze(tr, system)
        lay = {f: an.per_file[i] for i, f in enumerate(tr.files)}
        want = DistributionModel().trace_cost(tr, lay, system, batches=an.bid).predicted_s
        if an.orig_s is not None:
            assert an.orig_s == want
        plan = CEDAPlanner().plan(tr, system)
        assert plan.baselines["ORIG"] == want
    assert ceda_analyze.analyze(ior_traces()[0], system).orig_s is not None  # (one pattern: the analyzer's)


@pytest.mark.parametrize("seed", range(12))
def test_chunked_extent_pricing_equals_one_pricing(seed):
    """Priced a chunk of batches at a time, each chunk after a primer batch that leaves every
    server where the previous chunk's last sub-request ended: the per-batch times are those
    of one pricing of all the requests (to the bit), and those of the model."""
    from pario.layout.extents_kernel import ExtentSet
    from pario.model import engine

    rng = np.random.default_rng(seed)
    tr = random_trace(seed)
    system = load_system("ceda-hdd8")
    per_file = [random_extent_map(rng, 8, Striped.fixed(int(rng.choice([4096, 65536])), range(8)))
                for _ in tr.files]
    bid = batch_ids(tr, ("auto", "order", "all", "request")[seed % 4])
    prep = engine.prepared(tr, bid)
    es = ExtentSet.of_layouts(per_file)
    alpha = DistributionModel().engine_terms(system)["contiguous_alpha_table"]
    w = prep.op == 1
    variants = [(None, None), (w, np.zeros_like(prep.op))]
    whole = engine.price_extents_by_chunks(prep, es, system, contiguous_alpha_table=alpha, variants=variants,
                                           chunk=len(tr) + 1)
    for chunk in (1, 2, 7, 50):
        got = engine.price_extents_by_chunks(prep, es, system, contiguous_alpha_table=alpha, variants=variants,
                                             chunk=chunk)
        assert all(np.array_equal(a, b) for a, b in zip(got, whole)), chunk
    cost = DistributionModel().trace_cost(tr, dict(zip(tr.files, per_file)), system, batches=bid)
    assert np.array_equal(cost.per_batch, whole[0])
