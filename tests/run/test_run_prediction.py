"""``pario run``'s prediction of both runs (pario.run.predict, issue 27): the plan as run 2 runs
it — its collective order, and the aggregators and buffer of the trace's own hints — priced by
the model ``pario advise`` chose the order with, so the two cannot disagree on a plan.

Oracles, none of them the function under test: seed 004's worked example (Tables 1–3: ROMCIO
24T, CACIO 20T, HACIO 12T); the simulator called with the two-phase settings written out by
hand (not resolved from the trace); ``pario advise --json``'s own figures for the plan it
wrote; ROMIO's aggregator placement (``ADIOI_cb_config_list_parse``) enumerated host by host.
No MPI run: the prediction is a function of run 1's trace, the plan and the profile.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from pario.cli import main
from pario.layout import Striped, parse_layout
from pario.plan.base import Plan
from pario.plan.collective import aggregator_view, romio_cb_nodes, two_phase
from pario.plan.order_select import choose_order
from pario.run.compare import judge, planned_view
from pario.run.predict import order_hint, orders, predict
from pario.simulate import simulate
from pario.system import Network, Server, System, load_system
from pario.trace import Trace, save
from pario.trace.core import TraceMeta
from pario.workload import ior

K, M = 1 << 10, 1 << 20


# ---------------------------------------------------------------- seed 004's worked example
def _worked_example():
    """Seed 004 §2.2: H0 S0 H1 S1 round robin, an HServer request costs 5T and an SServer
    request 1T, 4 processes writing blocks (0, 4), (1, 5), (2, 6), (3, 7), 2 aggregators, a
    one-block buffer — here as the trace's own hints (the aggregator ranks it recorded and
    its cb_buffer_size), as a traced job records them."""
    servers = (Server("H0", "hdd", 5.0, 0.0), Server("S0", "ssd", 1.0, 0.0),
               Server("H1", "hdd", 5.0, 0.0), Server("S1", "ssd", 1.0, 0.0))
    system = System("hacio-example", servers, Network(0.0, 0.0), procs_per_node=2)
    blk = 4096
    meta = TraceMeta(source="pario.mpi", nprocs=4, aggregators=(0, 2),
                     hints=(("cb_buffer_size", str(blk)), ("cb_nodes", "2")))
    # one collective call per rank (its two blocks through a file view: call 0), whose ranges
    # interleave, so that ROMIO runs it through two-phase I/O (pario.plan.collective.two_phase_mask)
    trace = Trace.from_arrays([0, 0, 1, 1, 2, 2, 3, 3], None, np.ones(8, dtype=np.int8),
                              np.array([0, 4, 1, 5, 2, 6, 3, 7]) * blk, [blk] * 8, collective=True,
                              files=["ex.dat"], meta=meta, call=np.zeros(8, dtype=np.int64))
    return trace, system, Striped.fixed(blk, (0, 1, 2, 3))


def _plan(tmp_path, system, layout, order, name="plan"):
    p = tmp_path / f"{name}-{order}.json"
    Plan("padp", layouts={"*": layout}, collective_order=order).save(p, system)
    return p


def test_order_only_plan_predicts_the_papers_tables(tmp_path):
    """A plan that keeps the layout and changes only the collective order: run 1 runs ROMCIO
    (24T), run 2 the plan's order — HACIO 12T (2.00×), CACIO 20T, ROMCIO 24T (no change)."""
    trace, system, lay = _worked_example()
    want = {"romcio": 24.0, "cacio": 20.0, "hacio": 12.0}
    for order, t in want.items():
        pred, _ = predict(trace, _plan(tmp_path, system, lay, order), system, {"ex.dat": lay})
        assert pred["ORIG"] == pytest.approx(24.0) and pred["plan"] == pytest.approx(t)
        assert pred["ratio"] == pytest.approx(24.0 / t)
        assert pred["order"] == {"run1": "romcio", "run2": order}
        assert pred["two_phase"]["aggregators"] == 2 and pred["two_phase"]["ranks"] == [0, 2]
        assert pred["two_phase"]["cb_buffer"] == 4096 and pred["two_phase"]["cb_source"] == "trace"
    # advise's order choice prices the same plan with the same function: the same figures
    plan = Plan.load(_plan(tmp_path, system, lay, "hacio"), system)
    assert choose_order(trace, system, plan=plan).times == pytest.approx(want)


def test_forced_order_wins_over_the_plan(tmp_path):
    """PARIO_ORDER (or a pario_order hint the trace recorded) runs both runs in that order, as
    pario.mpi and the served runtime do: the plan's HACIO is then not what run 2 runs."""
    trace, system, lay = _worked_example()
    p = _plan(tmp_path, system, lay, "hacio")
    assert order_hint(trace, {"PARIO_ORDER": "cacio"}) == "cacio"
    assert order_hint(trace, {"PARIO_ORDER": "nonsense"}) is None
    hinted = trace.with_meta(hints={**dict(trace.meta.hints), "pario_order": "HACIO"})
    assert order_hint(hinted, {}) == "hacio"
    pred, _ = predict(trace, p, system, {"ex.dat": lay}, hint="cacio")
    assert pred["order"] == {"run1": "cacio", "run2": "cacio"}
    assert pred["ORIG"] == pytest.approx(20.0) and pred["plan"] == pytest.approx(20.0)
    assert orders(Plan.load(p, system)) == {"run1": "romcio", "run2": "hacio"}


# ---------------------------------------------------------------- hacio-6h2s, against advise
def _ior_trace(hints: dict, procs=4, segments=4):
    """IOR -c, strided: the k-th calls of the ranks write consecutive blocks, which do not
    interleave, so ROMIO's automatic mode would run them as independent I/O; with
    ``romio_cb_write = enable`` (as seed 004's experiments ran them) they go through two-phase
    I/O (pario.plan.collective.two_phase_mask)."""
    tr = ior(procs, 256 * K, 256 * K, segments, "strided", collective=True)
    hints = {"romio_cb_write": "enable", **hints}
    return tr.with_meta(TraceMeta(source="pario tracer", nprocs=procs, hints=tuple(sorted(hints.items()))))


def _advise(tmp_path, trace, system_name, *extra):
    """``pario advise --json -o PLAN`` on the trace (in this process): (JSON, plan path)."""
    import contextlib
    import io

    tp, pp = tmp_path / "t.parquet", tmp_path / "advised.json"
    save(trace, tp)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(["advise", str(tp), "--system", system_name, "--schemes", "padp", "--json", "-o", str(pp),
                   *extra])
    assert rc == 0
    return json.loads(buf.getvalue()), pp


@pytest.mark.parametrize("order", ["hacio", "romcio"])
def test_prediction_equals_advise_for_the_plans_order(tmp_path, order):
    """On hacio-6h2s with the trace's hints (cb_nodes 2 on every node: cb_config_list *:*,
    128 KiB buffer, one node): advise prices every order on its plan; run 2's prediction for
    that plan run in ORDER is advise's figure for ORDER, and HACIO's differs from ROMCIO's."""
    system = load_system("hacio-6h2s")
    trace = _ior_trace({"cb_nodes": "2", "cb_config_list": "*:*", "cb_buffer_size": str(128 * K)})
    adv, advised = _advise(tmp_path, trace, "hacio-6h2s", "--nodes", "1")
    sim = adv["collective_order"]["simulated_s"]
    assert sim["hacio"] != pytest.approx(sim["romcio"], rel=1e-3)
    assert adv["collective_view"]["two_phase"]["aggregators"] == 2
    d = json.loads(advised.read_text())
    d["collective_order"] = order       # advise's plan, run in ORDER
    pp = tmp_path / f"plan-{order}.json"
    pp.write_text(json.dumps(d))
    pred, _ = predict(trace, pp, system, None, nodes=1)
    assert pred["plan"] == pytest.approx(sim[order], rel=1e-12)
    assert pred["two_phase"]["aggregators"] == 2 and pred["two_phase"]["cb_buffer"] == 128 * K
    # the same number from the simulator with the settings written out
    plan = Plan.load(pp, system)
    coll = simulate(trace, system, plan.layout_for("ior.dat"), collective=True, order=order, cb_buffer=128 * K,
                    aggregators=2)
    assert pred["plan"] == pytest.approx(coll.makespan_s, rel=1e-12)
    if order == "romcio":   # the plan keeps run 1's order: only the layout changes the time
        assert pred["order"] == {"run1": "romcio", "run2": "romcio"}


def test_traced_hints_not_the_old_defaults(tmp_path):
    """A trace whose files were opened with cb_nodes 2 and a 1 MiB buffer, run on one node:
    ROMIO's cb_config_list *:1 makes that one aggregator, with the 1 MiB buffer.  The
    prediction of a layout plan uses exactly that, equals advise's figure, and is not what
    the former defaults (16 MiB, one aggregator) give; with cb_config_list *:* it is 2."""
    system = load_system("hacio-6h2s")
    orig = parse_layout("fixed:64K", system)
    trace = _ior_trace({"cb_nodes": "2", "cb_buffer_size": str(M)}, procs=8, segments=8)
    adv, pp = _advise(tmp_path, trace, "hacio-6h2s", "--nodes", "1", "--original", "fixed:64K")
    assert adv["collective_view"]["two_phase"]["aggregators"] == 1
    assert adv["collective_view"]["cb_buffer"] == M and adv["collective_view"]["aggregators"] == 1
    order = adv["collective_order"]["order"]
    pred, servers = predict(trace, pp, system, {"ior.dat": orig}, nodes=1)
    assert pred["plan"] == pytest.approx(adv["collective_order"]["simulated_s"][order], rel=1e-12)
    # run 1: the original layout in ROMCIO, as advise printed it
    assert adv["collective_order"]["original"] == {"order": "romcio", "simulated_s": pytest.approx(pred["ORIG"])}
    new = Plan.load(pp, system).layout_for("ior.dat")

    def sim(lay, o, cb, a):
        return simulate(trace, system, lay, collective=True, order=o, cb_buffer=cb, aggregators=a).makespan_s

    assert pred["ORIG"] == pytest.approx(sim(orig, "romcio", M, 1), rel=1e-12)
    assert pred["plan"] == pytest.approx(sim(new, order, M, 1), rel=1e-12)
    old = sim(orig, "romcio", 16 * M, 1) / sim(new, order, 16 * M, 1)
    assert pred["ratio"] != pytest.approx(old, rel=0.01)
    # the per-server evidence: the aggregators' requests with the traced 1 MiB cycles
    view = planned_view(trace, system, nodes=1)
    assert np.array_equal(view.length, aggregator_view(trace, system.procs_per_node, M, 1).length)
    assert len(view) != len(aggregator_view(trace, system.procs_per_node, 16 * M, 1))
    assert servers is not None
    # cb_config_list *:* lets both aggregators be on the one node: another prediction
    both = trace.with_meta(hints={"cb_nodes": "2", "cb_buffer_size": str(M), "cb_config_list": "*:*",
                                  "romio_cb_write": "enable"})
    pred2, _ = predict(both, pp, system, {"ior.dat": orig}, nodes=1)
    assert pred2["two_phase"]["aggregators"] == 2
    assert pred2["plan"] == pytest.approx(sim(new, order, M, 2), rel=1e-12)
    assert pred2["plan"] != pytest.approx(pred["plan"], rel=1e-3)


# ---------------------------------------------------------------- ROMIO's aggregator count
def _romio_brute(cb_nodes, nodes, nprocs, config):
    """ADIOI_cb_config_list_parse for '*:k' lists: the ranks dealt to the nodes evenly (one
    at a time, round robin), walk the nodes taking up to k ranks of each ('*': all), stop at
    cb_nodes (ROMIO's default cb_nodes: every process)."""
    hosts = [[] for _ in range(nodes)]
    for r in range(nprocs):
        hosts[r % nodes].append(r)
    k = config.split(":")[1] if config and ":" in config else "1"
    limit = nprocs if k == "*" else int(k)
    picked = [r for h in hosts for r in h[:limit]]
    return min(len(picked), cb_nodes if cb_nodes is not None else nprocs)


@pytest.mark.parametrize("cb_nodes", [None, 1, 2, 3, 5, 8, 64])
@pytest.mark.parametrize("nodes, nprocs", [(1, 1), (1, 4), (2, 4), (3, 12), (4, 10), (16, 32)])
@pytest.mark.parametrize("config", [None, "*:1", "*:2", "*:*", "*"])
def test_romio_cb_nodes_against_host_by_host(cb_nodes, nodes, nprocs, config):
    assert romio_cb_nodes(cb_nodes, nodes, nprocs, config) == _romio_brute(cb_nodes, nodes, nprocs, config)


def test_two_phase_places_the_hint_only_when_nodes_are_known():
    tr = _ior_trace({"cb_nodes": "2", "cb_buffer_size": str(M)})
    assert two_phase(tr).aggregators == 2                       # the hint as recorded
    tp = two_phase(tr, nodes=1)
    assert tp.aggregators == 1 and "1 node" in tp.agg_source    # ROMIO's *:1 on one node
    assert two_phase(tr, aggregators=3, nodes=1).aggregators == 3        # given wins
    # recorded aggregator ranks are what ran: never re-placed
    ranked = tr.with_meta(aggregators=(0, 1))
    assert two_phase(ranked, nodes=1).ranks == (0, 1)
    # nothing recorded: one aggregator per node
    assert two_phase(tr.with_meta(TraceMeta()), nodes=2).aggregators == 2
    # a list naming hosts cannot be placed without the host names: the hint as recorded
    named = tr.with_meta(hints={"cb_nodes": "2", "cb_config_list": "n1:2,*:1"})
    assert two_phase(named, nodes=1).aggregators == 2


# ---------------------------------------------------------------- the verdict's reasons
def test_judge_names_the_order_change_instead_of_variation():
    """No replica and no RMT hit, but run 2 runs HACIO where run 1 ran ROMCIO: the reason is
    the order change (with the simulated times), not 'run-to-run variation'."""
    base = {"predicted": {"ORIG": 0.389, "plan": 0.245, "order": {"run1": "romcio", "run2": "hacio"},
                          "two_phase": {"aggregators": 2, "cb_buffer": M},
                          "parts": {"collective": {"ORIG": 0.389, "plan": 0.245}, "independent": None}},
            "io_s": {"run1": 0.34, "run2": 0.2}, "direct": True, "testbed": "/tb", "replicas_planned": 0,
            "redirected": {"requests": 8, "hit_requests": 0}, "collective_requests_run1": 8}
    v = judge(base)
    kinds = [r["kind"] for r in v["reasons"]]
    assert "collective_order" in kinds and "not_redirected" not in kinds
    text = next(r["text"] for r in v["reasons"] if r["kind"] == "collective_order")
    assert "ROMCIO" in text and "HACIO" in text and "0.245 s against 0.389 s" in text and "2 aggregator(s)" in text
    assert v["predicted_ratio"] == pytest.approx(0.389 / 0.245) and v["verdict"] == "as predicted"
    same = {**base, "predicted": {**base["predicted"], "plan": 0.389, "order": {"run1": "romcio", "run2": "romcio"}}}
    kinds = [r["kind"] for r in judge(same)["reasons"]]
    assert "not_redirected" in kinds and "collective_order" not in kinds


def test_advise_bad_nodes_is_one_line(tmp_path, capsys):
    tp = tmp_path / "t.parquet"
    save(_ior_trace({"cb_nodes": "2"}), tp)
    rc = main(["advise", str(tp), "--system", "hacio-6h2s", "--schemes", "padp", "--nodes", "0"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("pario: error:") and "--nodes must be >= 1" in err[0]
