"""The contract of each registry's role, checked on one registered member at a time (as
scikit-learn's ``check_estimator``): :func:`check_model` (:data:`pario.model.MODELS`),
:func:`check_planner` (:data:`pario.plan.PLANNERS`), :func:`check_emitter`
(:data:`pario.apply.EMITTERS`).  Each takes a registry name and raises ``AssertionError``
naming the property a member breaks.  The properties come from the roles' definitions:

- a cost model (:class:`pario.model.base.CostModel`) prices a trace as Σ over its batches
  (batches run one after another, a batch's requests concurrently): its times are finite and
  non-negative, ``predicted_s`` = Σ ``per_batch``, one per batch; a batch's cost never depends
  on the batches after it (so adding requests in later batches never lowers the cost, and a
  prefix of the batches costs what it costs inside the whole trace); where the model declares
  ``independent_batches()``, the trace costs the sum of its batches priced alone; its
  per-request costs share the batch times (Σ = ``predicted_s``); ``trace_costs`` is
  ``trace_cost`` per candidate; a model declaring the ``compiled`` capability prices as the
  engine (``price``); its parameters rebuild it (``get_params``); deterministic; a layout it
  cannot price or that names a server the system lacks is a one-line ``ParioError``.
- a planner (:class:`pario.plan.base.Planner`) returns a :class:`~pario.plan.base.Plan` of its
  own scheme whose layouts and replicas survive the plan file for the system and name only
  its servers, whose ``predicted_s`` is the trace under the plan priced by the planner's
  declared model (:meth:`~pario.plan.base.Planner.cost_model`) with its batching — routing
  rules applied request by request —, with finite non-negative baselines; the same plan for
  the same (seeded) trace, and from a clone (``get_params``); bad input (unknown parameter,
  negative budget, a system or trace it does not apply to) is a one-line ``ParioError``.
- an emitter (:class:`pario.apply.Emitter`) returns an :class:`~pario.apply.Emission` of its
  target with one item per layout and replica of the plan, in order, each with a status of
  :data:`pario.apply.STATUSES` — ``nearest``: something emitted and what was not said,
  ``not-expressible``: nothing emitted and why —; a shell script whose command lines parse
  and whose comments are one printable line each; deterministic; a hostile file or replica
  name refuses the plan with one line.
"""

from __future__ import annotations

import json
import shlex
import time

import numpy as np

from pario import ParioError
from pario.apply import EMITTERS, STATUSES, Emission, plan_entries
from pario.layout import ExtentMap, Grouped, Region, Regions, Striped, layout_to_dict
from pario.model import MODELS
from pario.model.batches import batch_ids
from pario.plan import PLANNERS
from pario.plan.base import Plan
from pario.system import load_system
from pario.trace import Trace
from pario.workload.ior import ior

KiB = 1024
REL = 1e-9


# ---------------------------------------------------------------------- inputs
def random_trace(seed: int, n: int = 400, nfiles: int = 2, ranks: int = 5, times: bool = False) -> Trace:
    """Reads and writes of several ranks on ``nfiles`` files: random and strided offsets, sizes
    from 0 to 1 MiB (zero-length requests too)."""
    rng = np.random.default_rng(seed)
    rank = rng.integers(0, ranks, n)
    f = rng.integers(0, nfiles, n)
    op = rng.integers(0, 2, n)
    off = rng.integers(0, 1 << 22, n) if seed % 2 else (np.arange(n) * 65536) % (1 << 24)
    ln = rng.choice([0, 512, 4096, 65536, 100000, 1 << 20], n)
    st = np.sort(rng.random(n) * 10) if times else None
    en = st + rng.random(n) * 0.05 if times else None
    return Trace.from_arrays(rank, f, op, off, ln, files=[f"f{i}.dat" for i in range(nfiles)], start=st, end=en)


def fresh(trace: Trace) -> Trace:
    """The same requests in new arrays (no cache keyed by the arrays' identity serves it)."""
    return Trace.checked({k: np.array(v, copy=True) for k, v in trace.cols.items()}, tuple(trace.files))


def one_line_error(fn, what: str) -> str:
    """``fn()`` must raise a :class:`ParioError` whose message is one non-empty line."""
    try:
        fn()
    except ParioError as exc:
        msg = str(exc)
        assert msg.strip() and "\n" not in msg, f"{what}: the error is not one line: {msg!r}"
        return msg
    except Exception as exc:  # noqa: BLE001 - the contract: a ParioError, nothing else
        raise AssertionError(f"{what}: raised {type(exc).__name__} ({exc}), not a one-line ParioError") from exc
    raise AssertionError(f"{what}: accepted")


def _close(a: float, b: float, rel: float = REL) -> bool:
    return abs(a - b) <= rel * max(abs(a), abs(b)) + 1e-300


def every_layout(n: int) -> list:
    """Layouts of every kind on ``n`` servers (fixed, varied, 2-D, regions, a replica extent map)."""
    return [Striped.fixed(65536, range(n)), Striped.fixed(4096, range(min(3, n))),
            Striped(tuple(range(n)), tuple(([32768, 0, 98304] * n)[:n])),
            Grouped(((0, 1), (2, 3)), 16384),
            Regions((Region(0, 1 << 21, Striped.fixed(8192, range(n))),
                     Region(1 << 21, None, Striped.fixed(65536, (1, 2))))),
            ExtentMap(np.array([0, 100000, 1 << 21]), np.array([50000, 300000, 1 << 20]), np.array([1, 2, 0]),
                      np.array([0, 0, 7]), np.array([1, 1, 2]), Striped.fixed(65536, range(n)))]


# ---------------------------------------------------------------------- cost models
def check_model(name: str, params: dict | None = None) -> None:
    """The cost-model contract (module docstring) for ``MODELS[name]`` with ``params``."""
    model = MODELS.create(name, **(params or {}))
    assert model.name == name, f"model {name!r}: its name is {model.name!r}"
    one_line_error(lambda: MODELS.create(name, no_such_parameter=1), f"model {name!r} with an unknown parameter")
    clone = type(model)(**model.get_params())
    for sysname in ("ceda-hdd8", "padp-6h2s"):
        system = load_system(sysname)
        zero = model.trace_cost(Trace.empty(), Striped.fixed(65536, range(system.n)), system)
        assert zero.predicted_s == 0 and zero.batches == 0 and len(zero.servers) == system.n, \
            f"model {name!r}: an empty trace costs {zero!r}"
        one_line_error(lambda: model.trace_cost(random_trace(0, 50), Striped.fixed(65536, range(system.n + 2)),
                                                system), f"model {name!r}: a layout on servers {sysname} lacks")
        for seed in range(3):
            tr = random_trace(seed, times=seed == 2)
            for by in ("auto", "order"):
                bid = batch_ids(tr, by)
                priced = []
                for lay in every_layout(system.n):
                    try:
                        cost = model.trace_cost(tr, lay, system, batches=bid)
                    except ParioError:
                        one_line_error(lambda: model.trace_cost(tr, lay, system, batches=bid),
                                       f"model {name!r}: a {type(lay).__name__} layout it cannot price")
                        continue
                    _check_cost(name, model, cost, tr, lay, system, bid)
                    again = clone.trace_cost(fresh(tr), lay, system, batches=bid.copy())
                    assert again.predicted_s == cost.predicted_s and np.array_equal(again.per_batch, cost.per_batch), \
                        f"model {name!r}: not deterministic (or its get_params do not rebuild it)"
                    priced.append((lay, cost))
                assert priced, f"model {name!r} priced none of the layouts"
                got = model.trace_costs(tr, {k: lay for k, (lay, _) in enumerate(priced)}, system, batches=bid)
                for k, (_, cost) in enumerate(priced):
                    assert _close(got[k].predicted_s, cost.predicted_s, 1e-12), \
                        f"model {name!r}: trace_costs differs from trace_cost"


def _check_cost(name, model, cost, tr, lay, system, bid) -> None:
    what = f"model {name!r} on {system.name}, {type(lay).__name__}"
    nb = len(np.unique(bid))
    per = np.asarray(cost.per_batch, dtype=float)
    assert np.isfinite(cost.predicted_s) and cost.predicted_s >= 0, f"{what}: predicted {cost.predicted_s}"
    assert len(per) == nb == cost.batches, f"{what}: {len(per)} per-batch times, {cost.batches} batches, {nb} in trace"
    assert np.isfinite(per).all() and (per >= 0).all(), f"{what}: a batch time is negative or not finite"
    assert _close(float(per.sum()), cost.predicted_s, 1e-12), f"{what}: predicted_s is not the sum of its batches"
    servers = np.asarray(cost.servers, dtype=float)
    assert servers.shape == (system.n,) and np.isfinite(servers).all() and (servers >= 0).all(), \
        f"{what}: per-server times {servers}"
    for k, v in cost.details.items():
        assert np.isfinite(v) and v >= 0, f"{what}: term {k} = {v}"
    # a batch's cost does not depend on the batches after it: the first half of the batches
    # costs, alone, what it costs inside the whole trace — and no more than the whole trace
    order = np.unique(bid)
    cut = order[len(order) // 2]
    rows = np.flatnonzero(bid < cut)
    if len(rows):
        head = model.trace_cost(tr.take(rows), lay, system, batches=bid[rows])
        np.testing.assert_allclose(head.per_batch, per[:len(head.per_batch)], rtol=1e-12, atol=0,
                                   err_msg=f"{what}: a batch's cost changed with the batches after it")
        assert head.predicted_s <= cost.predicted_s * (1 + 1e-12), f"{what}: adding requests lowered the cost"
    if model.independent_batches():
        alone = sum(model.batch_cost(tr.take(np.flatnonzero(bid == b)), lay, system).predicted_s for b in order)
        assert _close(alone, cost.predicted_s), f"{what}: declares independent batches, but Σ batches alone = {alone}"
    rc = model.request_costs(tr, lay, system, batches=bid)
    assert rc.shape == (len(tr),) and (rc >= 0).all(), f"{what}: request costs"
    assert _close(float(rc.sum()), cost.predicted_s), f"{what}: Σ request costs {rc.sum()} ≠ {cost.predicted_s}"
    if model.compiled:
        pb, _, _, stopped = model.price(tr, lay, system, batches=bid)
        assert not stopped and np.array_equal(pb, per), f"{what}: declares compiled pricing, prices otherwise"


# ---------------------------------------------------------------------- planners
def ior_mix() -> Trace:
    """IOR random reads of 16 ranks and strided reads and writes of 8 (CEDA replicates both)."""
    return Trace.concat([ior(16, 64 * KiB, 1 << 20, 2, pattern="random", op="read", seed=7, file="rand.dat"),
                         ior(8, 64 * KiB, 16 * 64 * KiB, 2, pattern="strided", op="both", seed=1, file="s.dat")])


#: (system, seeded trace) pairs every planner is checked on
PLANNER_CASES = (("ceda-hdd8", lambda: random_trace(0)), ("padp-6h2s", lambda: random_trace(1, times=True)),
                 ("psa-4h4s", lambda: random_trace(2)), ("ceda-hdd8", ior_mix))


def check_planner(name: str) -> None:
    """The planner contract (module docstring) for ``PLANNERS[name]``."""
    planner = PLANNERS.create(name)
    assert planner.name == name, f"planner {name!r}: its name is {planner.name!r}"
    assert planner.get_params() == planner.defaults, f"planner {name!r}: defaults are not its parameters"
    one_line_error(lambda: PLANNERS.create(name, no_such_parameter=1), f"planner {name!r}, unknown parameter")
    one_line_error(lambda: planner.set_params(no_such_parameter=1), f"planner {name!r}, set an unknown parameter")
    planned = 0
    for sysname, make in PLANNER_CASES:
        system = load_system(sysname)
        tr = make()
        one_line_error(lambda: planner.plan(tr, system, budget=-1), f"planner {name!r}, a negative budget")
        try:
            plan = planner.plan(tr, system)
        except ParioError:  # a system or trace the scheme does not apply to: one line
            one_line_error(lambda: planner.plan(tr, system), f"planner {name!r} on {sysname}")
            continue
        planned += 1
        _check_plan(name, planner, plan, tr, system)
        again = type(planner)(**planner.get_params()).plan(fresh(make()), system)
        assert json.dumps(again.to_dict(system), default=str) == json.dumps(plan.to_dict(system), default=str), \
            f"planner {name!r} on {sysname}: another plan for the same trace (or from a clone)"
    assert planned, f"planner {name!r} planned none of the cases"
    system = load_system("ceda-hdd8")
    try:
        plan = planner.plan(Trace.empty(), system)
    except ParioError:
        one_line_error(lambda: planner.plan(Trace.empty(), system), f"planner {name!r}, an empty trace")
    else:
        assert plan.predicted_s == 0, f"planner {name!r}: an empty trace is predicted {plan.predicted_s} s"


def _check_plan(name, planner, plan, tr, system) -> None:
    what = f"planner {name!r} on {system.name}"
    assert isinstance(plan, Plan), f"{what}: returned {type(plan).__name__}"
    assert plan.scheme == name and plan.system_name == system.name, f"{what}: plan of {plan.scheme!r}"
    back = Plan.from_dict(json.loads(json.dumps(plan.to_dict(system))), system)
    for f, lay in plan.layouts.items():
        assert layout_to_dict(back.layouts[f], system) == layout_to_dict(lay, system), f"{what}: layout of {f}"
        assert max(lay.servers_used()) < system.n, f"{what}: layout of {f} names a server {system.name} lacks"
    for f, reps in plan.replicas.items():
        for r, b in zip(reps, back.replicas[f]):
            assert layout_to_dict(b["layout"], system) == layout_to_dict(r["layout"], system), f"{what}: replica"
            assert max(r["layout"].servers_used()) < system.n, f"{what}: a replica names a server the system lacks"
    assert plan.predicted_s is not None and np.isfinite(plan.predicted_s) and plan.predicted_s >= 0, \
        f"{what}: predicted {plan.predicted_s}"
    for k, v in plan.baselines.items():
        assert np.isfinite(v) and v >= 0, f"{what}: baseline {k} = {v}"
    model = planner.cost_model()
    bid = batch_ids(tr, planner.params.get("by", "auto"))
    want = reprice(plan, tr, system, model, bid)
    assert _close(plan.predicted_s, want), \
        f"{what}: predicted {plan.predicted_s} s, but the plan priced by its model {model!r} is {want} s"


def reprice(plan: Plan, trace: Trace, system, model, bid) -> float:
    """The trace's time under ``plan`` priced by ``model``: each request served by the layout
    its routing rule gives it (first matching rule; ``cheapest``: the least ``request_costs``
    among the file's layout and its replicas, the first on ties), the requests of one file
    served by one layout forming one file."""
    ops = ("read", "write")
    layouts: list = []
    served = np.zeros(len(trace), dtype=np.int64)
    for fi, f in enumerate(trace.files):
        own = [plan.layout_for(f)] + [r["layout"] for r in plan.replicas.get(f, plan.replicas.get("*", []))]
        names = [None] + [r.get("name") for r in plan.replicas.get(f, plan.replicas.get("*", []))]
        assert own[0] is not None, f"plan {plan.scheme!r} has no layout for {f}"
        for op in (0, 1):
            rows = np.flatnonzero((trace.file == fi) & (trace.op == op))
            if not len(rows):
                continue
            rule = next((r for r in plan.routing if r.get("file") in (f, "*") and r.get("op") in (ops[op], "*")),
                        {"rule": "original"})
            if rule["rule"] == "original":
                pick = np.zeros(len(rows), dtype=np.int64)
            elif rule["rule"] == "replica":
                pick = np.full(len(rows), names.index(rule["replica"]), dtype=np.int64)
            else:  # cheapest: every request's share of its batch under each of the file's layouts
                costs = np.vstack([model.request_costs(trace, lay, system, batches=bid)[rows] for lay in own])
                pick = np.argmin(costs, axis=0)
            for k in np.unique(pick):
                key = next((i for i, (g, lay) in enumerate(layouts) if g == fi and lay is own[k]), None)
                if key is None:
                    layouts.append((fi, own[k]))
                    key = len(layouts) - 1
                served[rows[pick == k]] = key
    names = tuple(f"{trace.files[g]}#{i}" for i, (g, _) in enumerate(layouts))
    vt = Trace.checked({**trace.cols, "file": served.astype(np.int32)}, names)
    lay = {names[i]: layout for i, (_, layout) in enumerate(layouts)}
    return float(model.trace_cost(vt, lay, system, batches=bid).predicted_s)


# ---------------------------------------------------------------------- emitters
def emitter_plans() -> list[tuple[Plan, object]]:
    """Plans of every registered planner (where it applies), and plans with the layouts the
    small traces may not reach (regions mid-round, varied stripes)."""
    out = []
    for sysname, make in PLANNER_CASES:
        system = load_system(sysname)
        tr = make()
        for name in PLANNERS:
            try:
                out.append((PLANNERS.create(name).plan(tr, system), system))
            except ParioError:
                pass
    p44 = load_system("psa-4h4s")
    out.append((Plan("psa", layouts={"r.dat": Regions((
        Region(0, 192 * KiB, Striped.fixed(64 * KiB, (4, 5, 6, 7))),
        Region(192 * KiB, None, Striped((0, 1, 2, 3, 4), (64 * KiB, 64 * KiB, 128 * KiB, 64 * KiB, 64 * KiB)))))},
        system_name=p44.name), p44))
    return out


def check_emitter(name: str, plans=None) -> None:
    """The emitter contract (module docstring) for ``EMITTERS[name]`` on ``plans``
    (default :func:`emitter_plans`)."""
    emitter = EMITTERS.create(name)
    assert emitter.name == name, f"emitter {name!r}: its name is {emitter.name!r}"
    one_line_error(lambda: EMITTERS.create(name, no_such_parameter=1), f"emitter {name!r}, unknown parameter")
    for plan, system in plans if plans is not None else emitter_plans():
        what = f"emitter {name!r}, plan {plan.scheme!r} on {system.name}"
        em = emitter.emit(plan, system)
        assert isinstance(em, Emission) and em.target == name, f"{what}: returned {em!r}"
        assert em.scheme == plan.scheme and em.system == system.name, f"{what}: emission of another plan"
        assert [(it.file, it.what) for it in em.items] == \
               [(f, w) for f, w, _, _ in plan_entries(plan)], f"{what}: not one item per layout and replica"
        for it in em.items:
            assert it.status in STATUSES, f"{what}: status {it.status!r}"
            if it.status == "nearest":
                assert it.commands and it.inexact, f"{what}: 'nearest' without commands or without saying what"
            if it.status == "not-expressible":
                assert not it.commands and it.inexact, f"{what}: 'not-expressible' with commands or without why"
            for d in it.inexact:
                assert all(str(d.get(k, "")).strip() for k in ("aspect", "why", "instead")), f"{what}: {d}"
        script = em.script()
        assert script.startswith("#!/bin/sh\n"), f"{what}: not a shell script"
        for line in script.splitlines()[1:]:
            if line.startswith("#"):
                assert line.isprintable(), f"{what}: comment {line!r}"
            else:
                shlex.split(line)
        d = em.to_dict()
        json.dumps(d)
        assert sum(d["summary"].values()) == len(em.items), f"{what}: summary"
        assert emitter.emit(plan, system).script() == script, f"{what}: not deterministic"
    system = load_system("ceda-hdd8")
    lay = Striped.fixed(65536, range(system.n))
    for hostile in ("../outside.dat", "a\nrm -rf x", "", "."):
        one_line_error(lambda: emitter.emit(Plan("ci-layout", layouts={hostile: lay}), system),
                       f"emitter {name!r}, a plan naming the file {hostile!r}")
    rep = {"name": "../r", "layout": Striped.fixed(4096, range(system.n))}
    one_line_error(lambda: emitter.emit(Plan("hybrid", layouts={"*": lay}, replicas={"f.dat": [rep]}), system),
                   f"emitter {name!r}, a replica named '../r'")


# ---------------------------------------------------------------------- data planes
def check_plane(name: str, tmp, **options) -> None:
    """The contract of a data plane (:data:`pario.store.PLANES`, a
    :class:`pario.store.base.Backend` subclass), on a new store in the empty directory ``tmp``
    made with the plane's ``options`` (:meth:`~pario.store.base.Backend.configure`):

    - its ``name`` is its key, ``page_cache`` a bool; ``configure`` refuses an option of
      another plane and a server the system lacks with one line; a store it configured opens
      with it and holds nothing (``holds_data`` False, no data file);
    - the bytes of a file striped over every server come back as written (files written
      through the plane and read through a new open of the store), are in data files the
      plane lists under the file's id on the servers the layout names, counted by ``usage``
      (≥ the bytes), and make ``holds_data`` True (where the plane overrides it: it can tell); ``delete`` removes every data file of it.
    """
    from pario.store import PLANES, Store, init_store
    from pario.store.base import Backend

    plane = PLANES.get(name)
    assert issubclass(plane, Backend) and plane.name == name, f"{name}: not a Backend named {name!r}"
    assert isinstance(plane.page_cache, bool), f"{name}: page_cache is not a bool"
    root = tmp / "store"
    # a plane on a cluster takes the cluster's profile (its servers), the others a built-in one
    init_store(root, None if "cluster" in options else "ceda-hdd8", backend=name, **options)
    with Store(root) as st:
        system = st.system
    bad = {"servers": {"NOPE": str(tmp / "x")}} if name != "local" else {"cluster": str(tmp)}
    msg = one_line_error(lambda: plane.configure(system, **bad), f"{name}: an option of another plane")
    assert "pario: error" not in msg
    if name == "local":
        one_line_error(lambda: plane.configure(system, servers={"NOPE": str(tmp / "x")}),
                       f"{name}: a server the system lacks")
    with Store(root) as st:
        assert type(st.backend) is plane, f"{name}: the store opened with {type(st.backend).__name__}"
        opts = plane.options(root, st.system, st.config)
        assert plane.holds_data(**opts) is False, f"{name}: a new store holds data"
        assert st.backend.datafiles() == [], f"{name}: a new store lists data files"
        data = np.random.default_rng(7).integers(0, 256, 3 * 64 * KiB * system.n + 12345, dtype=np.uint8).tobytes()
        st.create("f", f"fixed:{64 * KiB}")
        with st.open("f") as f:
            f.write(0, data)
    with Store(root) as st:
        with st.open("f") as f:
            assert f.read(0, len(data)) == data, f"{name}: the bytes did not come back"
        fid = st.backend.meta.get("f")[0]
        files = st.backend.datafiles()
        ids = {e[2] for e in files}
        assert len(ids) == 1 and -1 not in ids and -2 not in ids, f"{name}: data files of one file: {files}"
        assert ids == {fid}, f"{name}: data files under id {ids}, the file is {fid}"
        assert {e[0] for e in files} == set(range(system.n)), f"{name}: a 64 KiB stripe over every server"
        # usage may lag the writes (RADOS pool statistics reach the monitors every few seconds)
        deadline = time.monotonic() + 60
        while int(st.backend.usage().sum()) < len(data) and time.monotonic() < deadline:
            time.sleep(1)
        assert int(st.backend.usage().sum()) >= len(data), f"{name}: usage below the bytes stored"
        if plane.holds_data.__func__ is not Backend.holds_data.__func__:     # the plane can tell
            assert plane.holds_data(**opts) is True, f"{name}: holds_data is False with a file's data in it"
    with Store(root) as st:
        st.delete("f")
        assert st.backend.datafiles() == [], f"{name}: delete left data files"
