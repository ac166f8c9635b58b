"""``pario run``: the full loop (traced run, advise, replicate, redirected run) under ``mpiexec -n 2``.

Oracles: the bytes the IOR-like program writes are fixed by its seeds (``examples/ior_like.py``
checks every read itself and the test recomputes the file independently); run 2's requests
are checked against the RMT entries the replicator created (the redirector serves exactly
the requests that overlap an entry, seed 000 §4.6), and the plan is checked to contain a
CEDA replica; the traced I/O times against the trace files read with pandas, the predicted
times against the plan file.  A collective run, for which CEDA's model finds no benefit,
is not redirected.  On a testbed (root, loop devices, blkio cgroup; skipped otherwise): the
store's servers are the testbed's, and the device statistics of the testbed's cgroup show
run 2's reads served by the replica's servers only (rank r's object on server r), with the
byte counts the program's parameters give.  No timings are asserted.  Bad input gives
one-line errors.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import PARIO, ROOT, mpiexec_path

IOR = ROOT / "examples" / "ior_like.py"


def pario(*args, timeout=120, cwd=None):
    return subprocess.run([*PARIO, *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          cwd=str(cwd or ROOT))


def expected_file(p: int, segments: int, xfer: int) -> bytes:
    """The file ior_like.py writes: slot k·p + r holds row k of rank r's seeded data."""
    rows = [np.random.default_rng(12345 + r).integers(0, 256, (segments, xfer), dtype=np.uint8) for r in range(p)]
    out = np.empty((segments, p, xfer), np.uint8)
    for r in range(p):
        out[:, r, :] = rows[r]
    return out.tobytes()


@pytest.fixture(scope="module")
def loop(tmp_path_factory):
    if mpiexec_path() is None:
        pytest.skip("mpiexec not found (pip install mpich mpi4py)")
    pytest.importorskip("mpi4py")
    d = tmp_path_factory.mktemp("run")
    # the paper's benefit test: the example writes then reads the same bytes, which pario's
    # default test (the copy back of written bytes priced) declines to replicate; this loop
    # exercises the redirected run (test_run_prices_the_copy_back_by_default: the default)
    cp = pario("run", "--procs", 2, "--store", d / "store", "--system", "ceda-hdd8", "--out", d / "out",
               "--timeout", 60, "--json", "--paper-benefit", IOR, "data", "--pattern", "strided", "--xfer", "16K",
               "--segments", 16)
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    return d, json.loads(cp.stdout)


def test_run_identical_bytes(loop):
    d, res = loop
    assert res["identical"] is True and res["fsck_ok"] is True
    assert res["run1_s"] > 0 and res["run2_s"] > 0
    import hashlib

    want = hashlib.sha256(expected_file(2, 16, 16384)).hexdigest()
    assert res["files"] == {"data": want}
    # the original's own bytes (replicas flushed at close): read with the store, bypassing no one
    from pario.store import Store

    with Store(d / "store") as st, st.open("data") as f:
        assert hashlib.sha256(f.read(0, f.size)).hexdigest() == want


def test_run_reports_predicted_and_traced_times(loop):
    import pandas as pd

    d, res = loop
    plan = json.loads(Path(res["plan"]).read_text())
    pred = res["predicted"]
    assert pred["scheme"] == "ceda" and pred["system"] == "ceda-hdd8"
    assert pred["ORIG"] == plan["baselines"]["ORIG"] and pred["plan"] == plan["predicted_s"]
    assert pred["plan"] < pred["ORIG"] and pred["ratio"] == pytest.approx(pred["ORIG"] / pred["plan"])
    for k, run in enumerate(("run1", "run2")):
        df = pd.read_parquet(res["traces"][k])
        assert res["span_s"][run] == pytest.approx(float(df["end"].max() - df["start"].min()))
        # the busy time, recounted with pandas: requests sorted by start, a new busy period
        # where one starts after everything before it ended
        df = df.sort_values("start")
        reach = df["end"].cummax().shift(1, fill_value=-np.inf)
        period = (df["start"] > reach).cumsum()
        busy = df.groupby(period).agg(a=("start", "min"), b=("end", "max"))
        assert res["io_s"][run] == pytest.approx(float((busy["b"] - busy["a"]).sum()))
        assert res["io_s"][run] <= res["span_s"][run]
    assert res["io_s"]["ratio"] == pytest.approx(res["io_s"]["run1"] / res["io_s"]["run2"])
    assert res["testbed"] is None and res["devices"] is None and res["direct"] is False
    assert len(res["loadavg"]["start"]) == 3 and res["dropped_replicas"] == []
    assert res["collective_requests_run1"] == 0


def test_run_json_steps(loop):
    """--json: every step of the loop, in order, as {name, start, seconds, compile_s}; the steps
    follow one another from the run's start, and run 1's and run 2's hold their mpiexec's wall
    time; numba's compile inside a step is part of it."""
    d, res = loop
    steps = res["steps"]
    assert [s["name"] for s in steps] == ["setup", "run 1", "advise", "replicate", "run 2", "check", "compare"]
    t = 0.0
    for s in steps:
        assert set(s) == {"name", "start", "seconds", "compile_s"}
        assert s["start"] == pytest.approx(t, abs=1e-3) and s["seconds"] >= 0
        assert 0 <= s["compile_s"] <= s["seconds"] + 1e-6
        t = s["start"] + s["seconds"]
    by = {s["name"]: s for s in steps}
    assert by["run 1"]["seconds"] >= res["run1_s"] and by["run 2"]["seconds"] >= res["run2_s"]


def _brute_break_even(r1, r2, setup):
    """Smallest n >= 1 with n·r1 >= setup + n·r2, by counting (None: not within 10^6 runs)."""
    for n in range(1, 1_000_000):
        if n * r1 >= setup + n * r2:
            return n
    return None


def test_run_whole_job(loop):
    """--json whole_job: the measured ratio from the JSON's own step seconds and wall times,
    run 1 / (advise + relayout + replicate + run 2); the predicted one from the prediction and
    the setup, ORIG / (setup + plan); break-even runs counted; the setup's copies are the
    replica's bytes the store's RMT holds; the flush at the program's end copied exactly run 2's
    redirected writes back (every rank reported it, at pario.mpi's close); the whole job's verdict
    follows the documented rule."""
    d, res = loop
    w, steps = res["whole_job"], res["steps"]
    # each step's seconds without numba's compile of pario's kernels (once per installation)
    secs = {name: sum(s["seconds"] - s["compile_s"] for s in steps if s["name"] == name)
            for name in ("advise", "relayout", "replicate")}
    assert w["costs"]["compile_s"] == pytest.approx(sum(s["compile_s"] for s in steps
                                                        if s["name"] in ("advise", "relayout", "replicate")))
    assert (w["first_use"] is None) == (w["costs"]["compile_s"] == 0)
    assert secs["advise"] > 0 and secs["replicate"] > 0 and secs["relayout"] == 0
    assert w["costs"]["advise_s"] == pytest.approx(secs["advise"])
    assert w["costs"]["replicate_s"] == pytest.approx(secs["replicate"])
    setup_m = sum(secs.values())
    assert w["setup_s"]["measured"] == pytest.approx(setup_m)
    assert w["ratio"]["measured"] == pytest.approx(res["run1_s"] / (setup_m + res["run2_s"]))
    assert w["break_even_runs"]["measured"] == _brute_break_even(res["run1_s"], res["run2_s"], setup_m)
    pred = res["predicted"]
    # predicted in the measured units: advise as it ran + the copies as advise prices them; each
    # run its modelled I/O + run 1's wall time outside its measured I/O (the program's own time)
    sp = w["setup_s"]["predicted"]
    copies = sum(c["seconds"] for c in w["setup"]["copies"])
    assert copies > 0 and sp == pytest.approx(secs["advise"] + copies)
    out = res["run1_s"] - res["io_s"]["run1"]
    assert w["outside_io_s"] == pytest.approx(out) and out > 0
    p1, p2 = pred["ORIG"] + out, pred["plan"] + out
    assert (w["run1_s"]["predicted"], w["run2_s"]["predicted"]) == (pytest.approx(p1), pytest.approx(p2))
    assert w["ratio"]["predicted"] == pytest.approx(p1 / (sp + p2))
    assert w["break_even_runs"]["predicted"] == _brute_break_even(p1, p2, sp)
    from pario.store import Store

    with Store(d / "store") as st:
        assert [c["bytes"] for c in w["setup"]["copies"]] == [st.rmt.replica_bytes()]
    f2 = w["costs"]["flush"]["run2"]
    hit_written = res["redirected"]["hit_bytes"] // 2         # write then read of the same bytes: half are writes
    assert f2["flushed_bytes"] == hit_written == 2 * 16 * 16384 and f2["ranks"] == 2 and f2["at"] == ["close"]
    assert w["costs"]["flush"]["run1"]["flushed_bytes"] == 0
    assert w["costs"]["trace_overhead_s"] is None      # pario.mpi.File: no run without pario
    # pario advise on run 1's trace, as the loop ran it, prints the same setup and break-even
    from helpers import run_cli

    out = Path(res["out"])
    adv = ["advise", res["traces"][0], "--system", "ceda-hdd8", "--schemes", "ceda", "--nodes", "1",
           "--paper-benefit", "--json"]
    if (out / "original-layout.json").exists():
        adv += ["--original", str(out / "original-layout.json")]
    assert res["batching"] == "order"       # the page cache served the runs: lock-step batches
    assert json.loads(Path(res["plan"]).read_text())["params"]["by"] == "order"
    adv += ["--by", res["batching"]]
    rc, text, err = run_cli(*adv)
    assert rc == 0, err
    a = json.loads(text)["whole_job"]
    # (advise knows the I/O and the copies, not the program's other time nor its own)
    assert a["setup"]["seconds"] == pytest.approx(copies, rel=1e-12) and a["setup"]["bytes"] == w["setup"]["bytes"]
    assert (a["run1_s"], a["run2_s"]) == (pytest.approx(pred["ORIG"]), pytest.approx(pred["plan"]))
    assert a["break_even_runs"] == w["advised"]["break_even_runs"] == _brute_break_even(pred["ORIG"], pred["plan"],
                                                                                          copies)
    assert a["ratio"] == pytest.approx(w["advised"]["ratio"]) and w["advised"]["setup_s"] == pytest.approx(copies)
    wv = res["verdict"]["whole_job"]
    q = w["ratio"]["measured"] / w["ratio"]["predicted"]
    want = "as predicted" if 0.8 <= q <= 1.25 else "faster than predicted" if q > 1.25 else "contradicts the prediction"
    assert wv["verdict"] == want and wv["q"] == pytest.approx(q)
    assert wv["break_even_runs"] == w["break_even_runs"]


def test_run_fresh_empties_the_store(tmp_path):
    """--fresh: a store holding the program's file with another layout (as an earlier plan left
    it) and another file: both deleted before run 1, so run 1 creates the file with the store's
    default layout (without --fresh the earlier layout stays: run 1 would run on it)."""
    _need_mpi()
    from pario.store import Store, init_store

    store = tmp_path / "store"
    init_store(store, "ceda-hdd8")
    with Store(store) as st:
        st.create("data", "fixed:16K@H0")
        st.create("other", "fixed:16K@H1")
    cp = pario("run", "--procs", 2, "--store", store, "--out", tmp_path / "o", "--timeout", 90, "--fresh",
               IOR, "data", "--xfer", "16K", "--segments", 4)
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    assert "--fresh: deleted 2 file(s) of the store" in " ".join(cp.stdout.split())
    from pario.layout import parse_layout

    with Store(store) as st:
        assert st.files() == ["data"]
        assert st.stat("data").layout == parse_layout("fixed:64K", st.system)


def brute_hits(store, name, t2):
    """(requests, bytes) of the trace that overlap an RMT entry of ``name``: one loop per request."""
    from pario.store import Store

    with Store(store) as st:
        ent = st.rmt.entries(name)
        lo, hi = ent.o_off, ent.o_off + ent.length
        hit = np.array([bool(((lo < e) & (hi > s)).any())
                        for s, e in zip(t2.offset.tolist(), (t2.offset + t2.length).tolist())])
    return int(hit.sum()), int(t2.length[hit].sum()) if len(hit) else 0


def test_run_two_was_redirected(loop):
    d, res = loop
    plan = json.loads(Path(res["plan"]).read_text())
    reps = plan["replicas"]["data"]
    assert reps and reps[0]["name"] == "ceda"
    # run 2's trace against the RMT: requests overlapping an entry are the redirected ones
    from pario.store import Store
    from pario.trace import load

    t2 = load(Path(res["traces"][1]))
    with Store(d / "store") as st:
        ent = st.rmt.entries("data")
        assert ent.n > 0
        covered = sum(int(l) for l in ent.length)
        x = t2.offset
        hit = np.array([bool(((ent.o_off < e) & (ent.o_off + ent.length > s)).any())
                        for s, e in zip(x.tolist(), (x + t2.length).tolist())])
    assert res["redirected"]["hit_requests"] == int(hit.sum()) > 0
    assert res["redirected"]["hit_bytes"] == int(t2.length[hit].sum())
    assert covered > 0
    # run 2 did the same requests as run 1 (same program), only routed differently
    t1 = load(Path(res["traces"][0]))
    assert sorted(zip(t1.offset.tolist(), t1.length.tolist(), t1.op.tolist())) == \
        sorted(zip(t2.offset.tolist(), t2.length.tolist(), t2.op.tolist()))


def test_run_verdict_consistent_with_its_own_measurements(loop):
    """The verdict of a real run follows from the run's own numbers by the documented rule:
    q = (io run 1 / io run 2) / (ORIG / plan), 'as predicted' iff 1/1.25 <= q <= 1.25; no timing
    is asserted, only consistency.  The ranks did not use O_DIRECT: the page-cache reason is there."""
    import pandas as pd

    d, res = loop
    v, io, pred = res["verdict"], res["io_s"], res["predicted"]
    assert v["tolerance"] == 0.25
    assert v["measured_ratio"] == pytest.approx(io["run1"] / io["run2"])
    assert v["predicted_ratio"] == pytest.approx(pred["ORIG"] / pred["plan"])
    q = (io["run1"] / io["run2"]) / (pred["ORIG"] / pred["plan"])
    assert v["q"] == pytest.approx(q)
    want = "as predicted" if 0.8 <= q <= 1.25 else "faster than predicted" if q > 1.25 else "contradicts the prediction"
    assert v["verdict"] == want and v["agrees"] is (want == "as predicted")
    assert v["sentence"].lower().startswith(want)
    assert v["runs"]["run1"] == {"predicted_s": pred["ORIG"], "measured_s": io["run1"],
                                 "measured_over_predicted": pytest.approx(io["run1"] / pred["ORIG"])}
    assert v["runs"]["run2"]["measured_over_predicted"] == pytest.approx(io["run2"] / pred["plan"])
    kinds = [r["kind"] for r in v["reasons"]]
    assert "page_cache" in kinds and "not_redirected" not in kinds
    pc = v["reasons"][kinds.index("page_cache")]["evidence"]
    df1 = pd.read_parquet(res["traces"][0])
    lat1 = (df1["end"] - df1["start"]) * 1e6
    assert pc["run1_bytes"] == int(df1["length"].sum()) == 2 * 2 * 16 * 16384    # written, read back
    assert pc["run1_bytes_per_s"] == pytest.approx(pc["run1_bytes"] / io["run1"])
    assert pc["median_latency_us"] == pytest.approx(float(lat1.median()))
    # the cheapest modelled request of 16 KiB on ceda-hdd8: α_seq 0.1 ms + 16 KiB · 7.947e-9 s/B
    assert pc["model_request_s"] == pytest.approx(1e-4 + 16384 * 7.947e-9)
    # run 2's redirected writes against the same writes in run 1 (one request per (rank, offset, op) here)
    df2 = pd.read_parquet(res["traces"][1])
    m = df2.merge(df1, on=["rank", "file", "op", "offset", "length"], suffixes=("2", "1"))
    assert len(m) == len(df2) == len(df1)
    w = m[m["op"] == "write"]
    cls = res["evidence"]["requests"]["classes"]["hit_write"]     # every request is a hit here
    assert cls["n"] == cls["matched"] == len(w) == res["redirected"]["hit_write_requests"]
    assert cls["run1_median_us"] == pytest.approx(float(((w["end1"] - w["start1"]) * 1e6).median()))
    assert cls["run2_median_us"] == pytest.approx(float(((w["end2"] - w["start2"]) * 1e6).median()))
    extra = ((w["end2"] - w["start2"]) - (w["end1"] - w["start1"])).groupby(w["rank"]).sum()
    assert cls["extra_s_max"] == pytest.approx(float(extra.max()))
    lat_kinds = [r["evidence"]["cls"] for r in v["reasons"] if r["kind"] == "request_latency"]
    # exactly the classes whose own speed-up (total = mean latency run 1 / run 2) is off the
    # prediction by more than the tolerance, the same way as the whole run
    assert cls["run2_mean_us"] == pytest.approx(float(((w["end2"] - w["start2"]) * 1e6).mean()))
    rows = [(c, row["run1_mean_us"] / row["run2_mean_us"])
            for c, row in res["evidence"]["requests"]["classes"].items() if row["matched"]]
    pr = pred["ORIG"] / pred["plan"]
    off = {"contradicts the prediction": [c for c, g in rows if g < pr / 1.25],
           "faster than predicted": [c for c, g in rows if g > pr * 1.25]}.get(v["verdict"], [])
    assert sorted(lat_kinds) == sorted(off)
    # the slowest rank's span split into time inside and between its requests, from the traces
    for k, run in enumerate(("run1", "run2")):
        df = pd.read_parquet(res["traces"][k])
        g = df.groupby("rank").agg(first=("start", "min"), last=("end", "max"))
        g["busy"] = (df["end"] - df["start"]).groupby(df["rank"]).sum()
        r = int((g["last"] - g["first"]).idxmax())
        got = res["evidence"]["ranks"][run]
        assert got["rank"] == r and got["span_s"] == pytest.approx(g.loc[r, "last"] - g.loc[r, "first"])
        assert got["in_requests_s"] == pytest.approx(g.loc[r, "busy"])
        assert got["between_s"] == pytest.approx(got["span_s"] - got["in_requests_s"])
    g1, g2 = res["evidence"]["ranks"]["run1"], res["evidence"]["ranks"]["run2"]
    d = g2["between_s"] - g1["between_s"]
    big = abs(d) >= 0.25 * abs(io["run2"] - io["run1"])
    assert ("between_requests" in kinds) == (big and (v["verdict"] == "contradicts the prediction" and d > 0
                                                      or v["verdict"] == "faster than predicted" and d < 0))
    # writes to replicas: the copy back at close, with the program's own close times
    assert "dirty_copy_back" in kinds
    cb = v["reasons"][kinds.index("dirty_copy_back")]["evidence"]
    ph = res["evidence"]["phases"]
    assert set(ph["run1"]) == set(ph["run2"]) == {"open", "write", "read", "close"}
    assert cb["close_run1_s"] == ph["run1"]["close"] and cb["close_run2_s"] == ph["run2"]["close"]
    for run in ("run1", "run2"):
        log = (Path(res["out"]) / f"{run}.log").read_text()
        assert f"close {ph[run]['close']:.3f} s" in log


def test_run_model_per_server_prediction(loop):
    """evidence.model_servers: run 1's trace priced per server under ORIG (= `pario layout map`
    with fixed:64K, and the plan's ORIG baseline) and under the plan (rank r's data on server r)."""
    d, res = loop
    ms = res["evidence"]["model_servers"]
    plan = json.loads(Path(res["plan"]).read_text())
    assert ms["ORIG"]["predicted_s"] == pytest.approx(plan["baselines"]["ORIG"])
    assert ms["plan"]["predicted_s"] == pytest.approx(plan["predicted_s"])
    cp = pario("layout", "map", res["traces"][0], "--system", "ceda-hdd8", "--layout", "fixed:64K", "--json")
    assert cp.returncode == 0, cp.stderr
    lm = json.loads(cp.stdout)["servers"]
    assert {k: {"requests": v["requests"], "bytes": v["bytes"]} for k, v in ms["ORIG"]["servers"].items()} == \
        {k: {"requests": v["subrequests"], "bytes": v["bytes"]} for k, v in lm.items()}
    from pario.trace import load

    t1 = load(Path(res["traces"][0]))
    for r, name in enumerate(("H0", "H1")):
        assert ms["plan"]["servers"][name]["requests"] == int((t1.rank == r).sum())
        assert ms["plan"]["servers"][name]["bytes"] == int(t1.length[t1.rank == r].sum())
    assert all(ms["plan"]["servers"][f"H{j}"]["requests"] == 0 for j in range(2, 8))


def _summary(**kw):
    """A synthetic pario run summary with the keys compare.judge reads."""
    s = {"predicted": {"ORIG": 0.2, "plan": 0.1}, "io_s": {"run1": 0.01, "run2": 0.1}, "direct": False,
         "testbed": None, "replicas_planned": 1, "procs": 2, "collective_requests_run1": 0,
         "redirected": {"requests": 4, "hit_requests": 4, "hit_bytes": 4096, "bytes": 4096, "hit_write_requests": 0},
         "run1_s": 1.0, "run2_s": 1.5, "devices": None, "loadavg": {"start": [0.5, 0, 0], "end": [0.5, 0, 0]},
         "evidence": {"run1": {"bytes": 4096, "requests": 4, "median_request_bytes": 1024, "median_latency_us": 5.0},
                      "model_request_s": 1e-3, "server_mb_s": 100.0, "servers": 4, "store_devices": 1, "cpus": 2,
                      "phases": None, "requests": None, "model_servers": None}}
    for k, v in kw.items():
        s[k] = v
    return s


def test_verdict_rule_and_tolerance():
    from pario.run.compare import classify

    # predicted 2× faster; q = measured / 2 against the fixed factor 1.25 either way
    assert classify(2.0, 2.0) == ("as predicted", 1.0)
    assert classify(2.0, 2.5)[0] == "as predicted" and classify(2.0, 1.6)[0] == "as predicted"   # q = 1.25, 0.8
    assert classify(2.0, 2.6)[0] == "faster than predicted"
    assert classify(2.0, 1.5)[0] == "contradicts the prediction"
    assert classify(2.0, 0.5) == ("contradicts the prediction", 0.25)
    assert classify(1.0, 1.0)[0] == "as predicted"
    assert classify(None, 1.0) == ("not comparable", None) and classify(2.0, None)[0] == "not comparable"


def test_judge_page_cache_iff_not_direct_and_sentence():
    from pario.run.compare import judge

    v = judge(_summary())
    assert v["verdict"] == "contradicts the prediction" and v["agrees"] is False
    assert v["predicted_ratio"] == pytest.approx(2.0) and v["measured_ratio"] == pytest.approx(0.1)
    assert v["q"] == pytest.approx(0.05)
    assert "10.00× slower" in v["sentence"] and "2.00× faster" in v["sentence"]
    kinds = [r["kind"] for r in v["reasons"]]
    assert kinds == ["page_cache"]
    ev = v["reasons"][0]["evidence"]
    assert ev["run1_bytes_per_s"] == pytest.approx(4096 / 0.01)
    assert ev["faster_than_model"] == pytest.approx(1e-3 / 5e-6)    # 200× faster than the cheapest modelled request
    assert "200× faster" in v["reasons"][0]["text"] and "page cache" in v["reasons"][0]["text"]
    # O_DIRECT: no page-cache reason; the store's 4 servers on 1 device is said instead
    v = judge(_summary(direct=True))
    assert [r["kind"] for r in v["reasons"]] == ["shared_device"]
    v = judge(_summary(direct=True, evidence={**_summary()["evidence"], "store_devices": 4}))
    assert v["reasons"] == []
    # agreement and 'faster than predicted'
    v = judge(_summary(io_s={"run1": 0.2, "run2": 0.09}))
    assert v["verdict"] == "as predicted" and v["agrees"] is True and "within the tolerance" in v["sentence"]
    v = judge(_summary(io_s={"run1": 0.4, "run2": 0.1}))
    assert v["verdict"] == "faster than predicted" and v["agrees"] is False
    v = judge(_summary(io_s={"run1": None, "run2": 0.1}))
    assert v["verdict"] == "not comparable" and v["agrees"] is None


def test_judge_not_redirected_and_busy_machine():
    from pario.run.compare import judge

    v = judge(_summary(replicas_planned=0, predicted={"ORIG": 0.1, "plan": 0.1},
                       redirected={"requests": 4, "hit_requests": 0, "hit_bytes": 0, "bytes": 4096,
                                   "hit_write_requests": 0},
                       loadavg={"start": [1.0, 0, 0], "end": [4.5, 0, 0]}))
    kinds = [r["kind"] for r in v["reasons"]]
    assert "not_redirected" in kinds and "busy_machine" in kinds
    assert "predicts no change" in v["reasons"][kinds.index("not_redirected")]["text"]
    assert v["reasons"][kinds.index("busy_machine")]["evidence"] == {"load": 4.5, "cpus": 2}


def test_request_latencies_match_same_requests():
    """Run 2's requests matched with run 1's by (rank, file, op, offset, length, k-th occurrence),
    in any row order; per-class medians and per-rank sums against a hand computation."""
    from pario.run.measure import match_requests, request_latencies
    from pario.trace import Trace

    # rank 0 reads offset 0 twice (k = 0, 1) and writes offset 4096; rank 1 reads 8192
    t1 = Trace.from_arrays([0, 0, 0, 1], ["data"] * 4, [0, 0, 1, 0], [0, 0, 4096, 8192], [4096] * 4,
                           start=[0.0, 1.0, 2.0, 0.0], end=[0.1, 1.2, 2.3, 0.4])
    # run 2: rows shuffled; the write and rank 0's second read are RMT hits
    t2 = Trace.from_arrays([1, 0, 0, 0], ["data"] * 4, [0, 1, 0, 0], [8192, 4096, 0, 0], [4096] * 4,
                           start=[0.0, 2.0, 1.0, 0.0], end=[0.5, 3.0, 1.7, 0.1])
    assert match_requests(t1, t2).tolist() == [3, 2, 1, 0]
    hit = np.array([False, True, True, False])
    r = request_latencies(t1, t2, hit)
    c = r["classes"]
    assert r["matched"] == 4
    assert c["hit_write"]["n"] == 1 and c["hit_write"]["run1_median_us"] == pytest.approx(0.3e6)
    assert c["hit_write"]["run2_median_us"] == pytest.approx(1.0e6)
    assert c["hit_read"]["run1_median_us"] == pytest.approx(0.2e6) and c["hit_read"]["run2_median_us"] == pytest.approx(0.7e6)
    assert c["miss_read"]["n"] == 2 and c["miss_read"]["run1_median_us"] == pytest.approx(0.25e6)
    assert c["miss_read"]["extra_s_max"] == pytest.approx(0.1) and c["miss_read"]["extra_s_min"] == pytest.approx(0.0)
    assert c["miss_write"]["n"] == 0 and c["miss_write"]["run1_median_us"] is None
    # judged: run 2 contradicts the prediction; the classes that got > 1.25× slower are named,
    # the one that cost most first
    from pario.run.compare import judge

    v = judge(_summary(direct=True, evidence={**_summary()["evidence"], "store_devices": 4, "requests": r}))
    lat = [x["evidence"] for x in v["reasons"] if x["kind"] == "request_latency"]
    # predicted 2× faster; each class's speed-up (mean latency run 1 / run 2) 0.3, 0.29, 0.83 is below
    # 2 / 1.25: all three,
    # the one that cost most (+0.7 s on rank 0) first
    assert [e["cls"] for e in lat] == ["hit_write", "hit_read", "miss_read"]
    assert [e["extra_s"] for e in lat] == pytest.approx([0.7, 0.5, 0.1])
    assert lat[0]["speedup"] == pytest.approx(0.3) and lat[2]["speedup"] == pytest.approx(0.25 / 0.3)
    text = [x for x in v["reasons"] if x["kind"] == "request_latency"][0]["text"]
    assert "1 redirected writes (RMT hits) took 1.000 s each (median; mean 1.000 s) against 300.00 ms " \
           "(mean 300.00 ms) for the same requests in run 1: in total 3.33× slower where 2.00× faster was " \
           "predicted" in text
    # a run that gained as predicted names none; one faster than predicted names the classes that gained more
    assert not [x for x in judge(_summary(io_s={"run1": 0.2, "run2": 0.1},
                                          evidence={**_summary()["evidence"], "requests": r}))["reasons"]
                if x["kind"] == "request_latency"]
    fast = {**r, "classes": {**r["classes"], "miss_write": {**r["classes"]["hit_write"], "run1_median_us": 5e5,
                                                            "run2_median_us": 1e5, "run1_mean_us": 5e5,
                                                            "run2_mean_us": 1e5, "extra_s_min": -0.4}}}
    v = judge(_summary(io_s={"run1": 0.4, "run2": 0.1}, evidence={**_summary()["evidence"], "requests": fast}))
    assert [x["evidence"]["cls"] for x in v["reasons"] if x["kind"] == "request_latency"] == ["miss_write"]


def test_time_in_requests_and_between_requests_reason():
    from pario.run.compare import judge
    from pario.run.measure import time_in_requests
    from pario.trace import Trace

    # rank 0: 0.0–0.1, 0.5–0.6 (span 0.6, in requests 0.2); rank 1: 0.0–0.3 (span 0.3)
    t = Trace.from_arrays([0, 0, 1], ["data"] * 3, [0, 0, 0], [0, 4096, 8192], [4096] * 3,
                          start=[0.0, 0.5, 0.0], end=[0.1, 0.6, 0.3])
    g = time_in_requests(t)
    assert g == {"rank": 0, "span_s": pytest.approx(0.6), "in_requests_s": pytest.approx(0.2),
                 "between_s": pytest.approx(0.4)}
    ev = {**_summary()["evidence"], "ranks": {"run1": {"rank": 1, "span_s": 0.01, "in_requests_s": 0.008, "between_s": 0.002},
                                            "run2": g}}
    v = judge(_summary(evidence=ev))      # contradicts: the time between requests grew by 0.398 s
    r = [x for x in v["reasons"] if x["kind"] == "between_requests"][0]
    assert r["evidence"]["between_change_s"] == pytest.approx(0.398)
    assert "spent 200.0 ms inside its requests and 400.0 ms between them in run 2 (rank 0)" in r["text"]
    v = judge(_summary(io_s={"run1": 0.2, "run2": 0.1}, evidence=ev))     # as predicted: not a reason
    assert "between_requests" not in [x["kind"] for x in v["reasons"]]
    v = judge(_summary(io_s={"run1": 0.01, "run2": 2.0}, evidence=ev))    # 0.398 s < a quarter of +1.99 s
    assert "between_requests" not in [x["kind"] for x in v["reasons"]]


def test_judge_copy_back_and_devices():
    from pario.run.compare import judge

    red = {"requests": 4, "hit_requests": 4, "hit_bytes": 4096, "bytes": 4096, "hit_write_requests": 2}
    ev = {**_summary()["evidence"], "phases": {"run1": {"close": 0.2}, "run2": {"close": 0.5}}}
    v = judge(_summary(redirected=red, evidence=ev, run1_s=1.0, run2_s=1.5))
    r = [x for x in v["reasons"] if x["kind"] == "dirty_copy_back"][0]
    assert "close 0.200 s → 0.500 s (+0.300 s), 60 % of the wall-time difference (+0.500 s)" in r["text"]
    v = judge(_summary(redirected=red, evidence=ev, run1_s=1.0, run2_s=0.9))
    r = [x for x in v["reasons"] if x["kind"] == "dirty_copy_back"][0]
    assert "(+0.300 s), while the wall time changed by -0.100 s" in r["text"]
    # without the program's phase times: the untraced part of the wall time
    v = judge(_summary(redirected=red))
    r = [x for x in v["reasons"] if x["kind"] == "dirty_copy_back"][0]
    assert "went 0.990 s → 1.400 s" in r["text"]
    # testbed: measured device requests per server against the model's; H1 in run 2 is off most
    dev = lambda reads: {n: {"read_ios": k, "write_ios": 0, "read_bytes": k * 4096, "write_bytes": 0}
                         for n, k in reads.items()}
    model = {"ORIG": {"servers": {"H0": {"requests": 10, "bytes": 40960, "busy_s": 0.04},
                                  "H1": {"requests": 10, "bytes": 40960, "busy_s": 0.05}}},
             "plan": {"servers": {"H0": {"requests": 5, "bytes": 20480, "busy_s": 0.03},
                                  "H1": {"requests": 0, "bytes": 0, "busy_s": 0.0}}}}
    v = judge(_summary(direct=True, testbed="/tb", devices={"run1": dev({"H0": 11, "H1": 10}),
                                                            "run2": dev({"H0": 5, "H1": 40})},
                       evidence={**_summary()["evidence"], "model_servers": model}))
    r = [x for x in v["reasons"] if x["kind"] == "devices"][0]
    assert r["evidence"]["worst"] == {"run": "run2", "server": "H1"}
    assert r["evidence"]["servers"]["run2"]["H1"] == {"measured_requests": 40, "predicted_requests": 0,
                                                      "measured_bytes": 40 * 4096, "predicted_bytes": 0}
    assert "run 1 served 21 requests (model: 20 sub-requests under ORIG), run 2 45 (model: 5" in r["text"]
    assert "H1 in run 2" in r["text"]
    # per device request on the busiest modelled server: run 1 H1 0.01 s / 10 requests, model 0.05 s / 10;
    # run 2 H0 0.1 s / 5 requests, model 0.03 s / 5
    assert r["evidence"]["per_request"] == {"run1": {"server": "H1", "measured_s": pytest.approx(0.001),
                                                     "model_s": pytest.approx(0.005)},
                                            "run2": {"server": "H0", "measured_s": pytest.approx(0.02),
                                                     "model_s": pytest.approx(0.006)}}


def test_program_phases():
    from pario.run.measure import program_phases

    out = ("noise\nior_like strided independent 4x64x16K: open 0.110 s  write 0.007 s (623.4 MB/s)  "
           "read 0.004 s (1049.9 MB/s)  close 0.479 s\nsha256 abc\n")
    assert program_phases(out) == {"open": 0.110, "write": 0.007, "read": 0.004, "close": 0.479}
    assert program_phases("no phases here\n") is None


def _need_mpi():
    if mpiexec_path() is None:
        pytest.skip("mpiexec not found (pip install mpich mpi4py)")
    pytest.importorskip("mpi4py")


# Two HDD-like servers as the testbed emulates them (H0, H1: 4 ms per request, 120 MiB/s) and
# two slower disks (S0, S1: 8 ms, 60 MiB/s); on each server every α (read/write, seq/rand) is
# the same.  Why CEDA replicates run 1 of the test below under *any* batching of its trace:
# run 1 is 2 ranks × 8 reads of 256 KiB at (2k + r)·256 KiB, and pario advise cuts the trace
# into batches of requests that overlap in time (pario.model.batches), which depends on how
# the ranks happened to be scheduled.  Under the original layout (fixed:64K over 4 servers)
# every read is one 64 KiB sub-request on each of the 4 servers, so a batch of q reads keeps
# S0 busy q·(8 ms + 64 KiB / 60 MiB/s) = q·9.04 ms (distribution model: T_s = q·α for any
# p and k when all α are equal; T_t = q·64 KiB·β), and the batch costs at least that.  CEDA's
# replica puts rank r's object on server r (object i → server i mod 4, i ∈ {0, 1}), i.e. on
# H0 and H1 only: a batch costs at most q·(4 ms + 256 KiB / 120 MiB/s) = q·6.08 ms.  So every
# batch is cheaper on the replica, every pattern's benefit B = T_O − T_N is > 0 and the
# plan's total is below ORIG, however the reads overlapped.  (With four equal 4 ms servers,
# the profile used before, a read alone costs 4.52 ms striped but 6.08 ms on the replica: T_O
# is 72.3 ms whatever the timing, T_N = 6.08 ms × Σ_batches max(reads of rank 0, of rank 1),
# so a run whose ranks' reads overlapped in fewer than 5 pairs (Σ max ≥ 12) got no replica.)
# test_hdd2_slow2_replicates_under_any_batching checks the claim on the planner itself.
HDD2_SLOW2 = """name = "test-hdd2-slow2"
description = "2 HDD-like servers (4 ms per request, 120 MiB/s) and 2 slower ones (8 ms, 60 MiB/s)"
[network]
e = 0.0
t = 0.0
[clients]
procs_per_node = 1
[[server]]
name = "H"
count = 2
kind = "hdd"
alpha = 0.004
beta = 7.947285970052083e-09
alpha_read_seq = 0.004
alpha_read_rand = 0.004
alpha_write_seq = 0.004
alpha_write_rand = 0.004
[[server]]
name = "S"
count = 2
kind = "hdd"
alpha = 0.008
beta = 1.5894571940104166e-08
alpha_read_seq = 0.008
alpha_read_rand = 0.008
alpha_write_seq = 0.008
alpha_write_rand = 0.008
"""


def _read_trace(starts, ends, procs=2, segments=8, xfer=256 << 10):
    from pario.trace import Trace

    rank = np.repeat(np.arange(procs), segments)
    k = np.tile(np.arange(segments), procs)
    return Trace.from_arrays(rank, np.zeros(len(rank), int), np.zeros(len(rank), int), (k * procs + rank) * xfer,
                             np.full(len(rank), xfer), files=("data",), start=starts, end=ends)


def test_hdd2_slow2_replicates_under_any_batching(tmp_path):
    """The claim above, on the planner: run 1's reads under extreme and random timings and every
    batching rule (each read alone, all in one batch, lock-step pairs, by time) give a plan with
    a replica, T_N ≤ 6.08 ms × reads per batch < 9.04 ms × reads ≤ T_O."""
    from pario.plan.ceda import CEDAPlanner
    from pario.system import load_system

    (tmp_path / "p.toml").write_text(HDD2_SLOW2)
    system = load_system(tmp_path / "p.toml")
    k = np.arange(8.0)
    timings = {"pairs": (np.r_[k, k + 0.5], np.r_[k + 0.9, k + 1.4]),      # rank r's k-th reads overlap
               "serial": (np.r_[k, k + 100], np.r_[k + 0.9, k + 100.9]),   # rank 0 done before rank 1 starts
               "alternate": (np.r_[2 * k, 2 * k + 1], np.r_[2 * k + 0.9, 2 * k + 1.9])}   # never overlapping
    rng = np.random.default_rng(7)
    for i in range(20):
        d = rng.uniform(0.1, 2, 16)
        st = np.r_[np.cumsum(d[:8] + rng.uniform(0, 1, 8)), rng.uniform(0, 10) + np.cumsum(d[8:] + rng.uniform(0, 1, 8))]
        timings[f"random{i}"] = (st, st + d)
    one_read = 4e-3 + (256 << 10) * 7.947285970052083e-09
    striped_read = 8e-3 + (64 << 10) * 1.5894571940104166e-08
    for name, (st, en) in timings.items():
        t = _read_trace(st, en)
        for by in ("time", "request", "all", "order"):
            plan = CEDAPlanner(by=by).plan(t, system)
            assert plan.replicas and plan.predicted_s < plan.baselines["ORIG"], (name, by)
            assert all(row["B"] > 0 for row in plan.details["pbt"]), (name, by)
            assert plan.baselines["ORIG"] == pytest.approx(16 * striped_read)     # q·9.04 ms summed over batches
            assert plan.predicted_s <= 16 * one_read + 1e-12


def test_run_prepare_read_only_direct_and_rerun(tmp_path):
    """--prepare writes the input untraced, runs 1 and 2 only read it (O_DIRECT); a second
    pario run on the same store drops the first one's replicas before its run 1."""
    _need_mpi()
    store, out = tmp_path / "store", tmp_path / "out"
    (tmp_path / "hdd2s2.toml").write_text(HDD2_SLOW2)
    args = ["run", "--procs", 2, "--store", store, "--system", tmp_path / "hdd2s2.toml", "--out", out,
            "--timeout", 90, "--direct", "--json", "--prepare", "data --write-only --xfer 256K --segments 8",
            IOR, "data", "--read-only", "--xfer", "256K", "--segments", 8]
    cp = pario(*args)
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    res = json.loads(cp.stdout)
    import hashlib

    assert res["identical"] and res["fsck_ok"] and res["direct"] is True and res["prepare_s"] > 0
    # O_DIRECT: the traced overlaps are the servers', so the plan batches by them
    assert res["batching"] == "auto" and json.loads(Path(res["plan"]).read_text())["params"]["by"] == "auto"
    assert res["files"] == {"data": hashlib.sha256(expected_file(2, 8, 256 << 10)).hexdigest()}
    from pario.trace import load

    t1, t2 = load(Path(res["traces"][0])), load(Path(res["traces"][1]))
    assert set(t1.op.tolist()) == {0} and len(t1) == 2 * 8    # run 1 traced the reads only
    assert res["replicas_planned"] >= 1    # whatever the ranks' timing (HDD2_SLOW2's comment)
    n, b = brute_hits(store, "data", t2)
    assert res["redirected"]["hit_requests"] == n == len(t2) and res["redirected"]["hit_bytes"] == b
    assert res["redirected"]["hit_write_requests"] == 0
    # O_DIRECT: no page-cache reason; the profile's 4 servers share this machine's one device
    kinds = [r["kind"] for r in res["verdict"]["reasons"]]
    ev = res["evidence"]
    assert "page_cache" not in kinds and "dirty_copy_back" not in kinds
    assert ev["servers"] == 4 and ("shared_device" in kinds) == (ev["store_devices"] < 4)
    assert res["verdict"]["measured_ratio"] == pytest.approx(res["io_s"]["run1"] / res["io_s"]["run2"])
    # again on the same store: the replicas of the first run are dropped before run 1
    cp = pario(*args)
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    res2 = json.loads(cp.stdout)
    assert res2["dropped_replicas"] and res2["identical"]
    assert res2["files"] == res["files"]


def test_run_collective_not_redirected(tmp_path):
    """Collective IOR-strided 16 KiB: CEDA's model finds no benefit, so run 2 is not redirected."""
    _need_mpi()
    cp = pario("run", "--procs", 2, "--store", tmp_path / "store", "--system", "ceda-hdd8", "--out", tmp_path / "o",
               "--timeout", 90, "--json", IOR, "data", "--collective", "--xfer", "16K", "--segments", 16)
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    res = json.loads(cp.stdout)
    assert res["replicas_planned"] == 0 and res["redirected"]["hit_requests"] == 0
    assert res["collective_requests_run1"] == res["redirected"]["requests"] > 0
    assert res["predicted"]["plan"] == pytest.approx(res["predicted"]["ORIG"])
    # priced as two-phase I/O with what pario.mpi recorded: its one aggregator (one node), its buffer
    pr = res["predicted"]
    assert pr["model"].startswith("two-phase") and pr["two_phase"]["ranks"] == [0]
    assert pr["two_phase"]["cb_buffer"] == 16 << 20 and pr["order"] == {"run1": "romcio", "run2": "romcio"}
    v = res["verdict"]
    assert v["predicted_ratio"] == pytest.approx(1.0)
    assert [r["kind"] for r in v["reasons"]][:2] == ["not_redirected", "page_cache"]
    assert res["identical"] and res["files"] == {"data": __import__("hashlib").sha256(expected_file(2, 16, 16384)).hexdigest()}


def test_run_prices_the_copy_back_by_default(tmp_path):
    """The example writes then reads back the same strided bytes.  pario's default benefit
    test counts the copy of the replica's dirty bytes back to the original at the program's
    end (pario.plan.ceda_analyze.flush_costs): the PBT's flush is > 0, B = T_O − T_N − flush, and no
    pattern with B ≤ 0 is replicated; the report's prediction equals ORIG when none is."""
    _need_mpi()
    cp = pario("run", "--procs", 2, "--store", tmp_path / "store", "--system", "ceda-hdd8", "--out", tmp_path / "o",
               "--timeout", 90, "--json", IOR, "data", "--pattern", "strided", "--xfer", "16K", "--segments", 16)
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    res = json.loads(cp.stdout)
    plan = json.loads(Path(res["plan"]).read_text())
    pbt = plan["details"]["pbt"]
    assert pbt and all(r["flush"] > 0 for r in pbt)
    for r in pbt:
        assert r["B"] == pytest.approx(r["T_O"] - r["T_N"] - r["flush"])
    replicated = res["replicas_planned"] > 0
    assert replicated == any(r["B"] > 0 for r in pbt)
    if not replicated:
        assert res["predicted"]["plan"] == pytest.approx(res["predicted"]["ORIG"])
    assert res["identical"]


def _testbed_missing() -> str | None:
    """Why this machine cannot build a testbed (check_support's one-line ParioError: not root, no
    loop devices, a missing tool, no blkio/io cgroup), else None.  Any other exception is a bug
    and propagates (the module fails to collect) instead of turning into a skip."""
    from pario import ParioError
    from pario.testbed import check_support

    try:
        check_support()
    except ParioError as exc:
        return str(exc)
    return None


_TESTBED_MISSING = _testbed_missing()


@pytest.mark.skipif(_TESTBED_MISSING is not None,
                    reason=f"needs root, loop devices and a blkio/io cgroup: {_TESTBED_MISSING}")
def test_run_on_testbed(tmp_path):
    """pario run --testbed: store servers on the testbed, O_DIRECT, ranks in the cgroup; run 2's
    reads reach only the replica's servers (rank r → server r), with the bytes the program reads.
    H2 and H3 are throttled to the slower disks of HDD2_SLOW2 (125 requests/s, 60 MiB/s) and the
    nominal profile rewritten to match: four equal servers made the plan depend on how the
    ranks' reads overlapped in time (no replica in 1 of 4 runs here, see HDD2_SLOW2)."""
    _need_mpi()
    from pario.testbed import down, load_state, up
    from pario.testbed.core import set_limits, write_nominal_profile

    tbdir = tmp_path / "tb"
    up(tbdir, hdd=4, ssd=0, size=32 << 20)
    try:
        tb = load_state(tbdir)
        for name in ("H2", "H3"):
            set_limits(tb, name, {"read_iops": 125, "write_iops": 125, "read_bps": 60 << 20, "write_bps": 60 << 20})
        write_nominal_profile(tb)
        store = tmp_path / "store"
        xfer, seg = 256 << 10, 32
        cp = pario("run", "--procs", 2, "--testbed", tbdir, "--store", store, "--out", tmp_path / "out",
                   "--timeout", 120, "--json", "--prepare", f"data --write-only --xfer 256K --segments {seg}",
                   IOR, "data", "--read-only", "--xfer", "256K", "--segments", seg, timeout=300)
        assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
        res = json.loads(cp.stdout)
        import hashlib

        assert res["identical"] and res["fsck_ok"] and res["direct"] is True
        assert res["testbed"] == str(tbdir.resolve())
        assert res["files"] == {"data": hashlib.sha256(expected_file(2, seg, xfer)).hexdigest()}
        cfg = json.loads((store / "store.json").read_text())
        assert sorted(cfg["servers"]) == ["H0", "H1", "H2", "H3"]
        for name, d in cfg["servers"].items():
            assert Path(d).parent == tbdir.resolve() / name
        assert cfg["system"] == "testbed-tb-nominal"
        from pario.trace import load

        t2 = load(Path(res["traces"][1]))
        n, b = brute_hits(store, "data", t2)
        assert res["redirected"]["hit_requests"] == n == len(t2) == 2 * seg
        # devices (block layer, testbed cgroup): run 1 read the stripes of every server, run 2
        # read rank r's object from server r only (CEDA: object i -> replica file i mod n)
        per_rank = seg * xfer
        dev1, dev2 = res["devices"]["run1"], res["devices"]["run2"]
        for name in ("H0", "H1", "H2", "H3"):
            assert dev1[name]["read_bytes"] >= 2 * per_rank // 4
        slack = 256 << 10   # ext4 metadata the kernel may read on the way
        for name in ("H0", "H1"):
            assert per_rank <= dev2[name]["read_bytes"] <= per_rank + slack
        for name in ("H2", "H3"):
            assert dev2[name]["read_bytes"] <= slack
        # the replication ran inside the testbed's cgroup with O_DIRECT: its copies reached the
        # devices (rank r's object written once to server r's replica file)
        devs = res["devices"]["setup"]
        for name in ("H0", "H1"):
            assert devs[name]["write_bytes"] >= per_rank
        assert sum(d["read_bytes"] for d in devs.values()) >= 2 * per_rank
        # the model predicts the gain that made CEDA replicate
        assert res["predicted"]["plan"] < res["predicted"]["ORIG"]
        # the verdict compares the measured device load per server with the model's
        dv = [r for r in res["verdict"]["reasons"] if r["kind"] == "devices"]
        assert len(dv) == 1 and "page_cache" not in [r["kind"] for r in res["verdict"]["reasons"]]
        ms = res["evidence"]["model_servers"]
        for run, key in (("run1", "ORIG"), ("run2", "plan")):
            for name in ("H0", "H1", "H2", "H3"):
                row = dv[0]["evidence"]["servers"][run][name]
                assert row["measured_requests"] == res["devices"][run][name]["read_ios"] + res["devices"][run][name]["write_ios"]
                assert row["predicted_requests"] == ms[key]["servers"][name]["requests"]
        for run, pr_ in dv[0]["evidence"]["per_request"].items():
            row = dv[0]["evidence"]["servers"][run][pr_["server"]]
            assert pr_["measured_s"] == pytest.approx(res["io_s"][run] / row["measured_requests"])
        # model: run 1 reads 64 KiB stripes on all 4 servers, run 2 rank r's object from server r
        assert [ms["plan"]["servers"][n]["bytes"] for n in ("H0", "H1", "H2", "H3")] == [per_rank, per_rank, 0, 0]
    finally:
        down(tbdir)
    assert str(tbdir) not in subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout


@pytest.mark.parametrize("args, message", [
    (["--procs", "2", "--store", "S", "--system", "ceda-hdd8", "no/such/program.py"], "program 'no/such/program.py' not found"),
    (["--procs", "two", "--store", "S", "--system", "ceda-hdd8", str(IOR)], "--procs 'two': not an integer"),
    (["--procs", "0", "--store", "S", "--system", "ceda-hdd8", str(IOR)], "--procs 0: need at least 1 process"),
    (["--procs", "2", "--store", "S", "--system", "no-such-system", str(IOR)], "no-such-system"),
    (["--procs", "2", "--store", "S", str(IOR)], "--system is required"),
    (["--procs", "2", "--store", "S", "--testbed", "no-such-testbed", str(IOR)], "is not a pario testbed"),
    (["--procs", "2", "--store", "S", "--system", "ceda-hdd8", "--prepare", "data 'unbalanced", str(IOR)],
     "--prepare"),
    (["--procs", "2", "--store", "S", "--system", "ceda-hdd8", "--repeat", "0", str(IOR)], "--repeat 0: give 1 to 100"),
    (["--procs", "2", "--store", "S", "--system", "ceda-hdd8", "--repeat", "x", str(IOR)], "--repeat 'x': not an integer"),
])
def test_run_bad_input_one_line(tmp_path, args, message):
    cp = pario("run", *args, cwd=tmp_path, timeout=60)
    assert cp.returncode == 2
    lines = cp.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pario: error:") and message in lines[0], cp.stderr
    assert not (tmp_path / "S").exists()   # nothing created on bad input


def test_run_repeat_compares_medians(tmp_path):
    """--repeat 3: run 1 and run 2 three times each, every one traced and checked; the
    compared I/O times are the medians of the runs' own trace spans."""
    if mpiexec_path() is None:
        pytest.skip("mpiexec not found")
    from pario.trace import load

    out = tmp_path / "out"
    cp = pario("run", "--procs", 2, "--store", tmp_path / "store", "--system", "ceda-hdd8", "--out", out,
               "--timeout", 90, "--json", "--repeat", 3, IOR, "data", "--xfer", "16K", "--segments", 8)
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    res = json.loads(cp.stdout)
    assert res["repeat"] == 3 and res["identical"] and res["fsck_ok"]
    from pario.run.measure import io_busy, io_span

    for run in (1, 2):
        traces = [load(out / f"run{run}{'' if k == 0 else f'-{k + 1}'}.parquet") for k in range(3)]
        busy, spans = [io_busy(t) for t in traces], [io_span(t) for t in traces]
        assert [r["io_s"] for r in res["repetitions"][f"run{run}"]] == pytest.approx(busy)
        assert [r["span_s"] for r in res["repetitions"][f"run{run}"]] == pytest.approx(spans)
        assert res["io_s"][f"run{run}"] == pytest.approx(float(np.median(busy)))
        assert res["span_s"][f"run{run}"] == pytest.approx(float(np.median(spans)))
        assert all(0 < b <= sp for b, sp in zip(busy, spans))
    assert res["verdict"]["measured_ratio"] == pytest.approx(res["io_s"]["run1"] / res["io_s"]["run2"])


def test_run_program_failure_is_one_line(tmp_path):
    if mpiexec_path() is None:
        pytest.skip("mpiexec not found")
    prog = tmp_path / "boom.py"
    prog.write_text("import sys\nprint('boom: cannot go on')\nsys.exit(3)\n")
    cp = pario("run", "--procs", 1, "--store", tmp_path / "S", "--system", "ceda-hdd8", "--out", tmp_path / "o",
               prog, cwd=tmp_path, timeout=60)
    assert cp.returncode == 2
    lines = cp.stderr.strip().splitlines()
    assert len(lines) == 1 and "run 1 failed" in lines[0] and "boom: cannot go on" in lines[0], cp.stderr


def test_run_rank_exception_aborts_instead_of_hanging(tmp_path):
    """One rank raising while the other waits in a collective: the job aborts (python -m mpi4py),
    pario run reports the exception in one line well before --timeout."""
    _need_mpi()
    prog = tmp_path / "raiser.py"
    prog.write_text("from mpi4py import MPI\ncomm = MPI.COMM_WORLD\ncomm.Barrier()\n"
                    "if comm.rank == 1:\n    raise ValueError('rank 1 fails in the middle')\ncomm.Barrier()\n")
    cp = pario("run", "--procs", 2, "--store", tmp_path / "S", "--system", "ceda-hdd8", "--out", tmp_path / "o",
               "--timeout", 100, prog, cwd=tmp_path, timeout=150)
    assert cp.returncode == 2
    lines = cp.stderr.strip().splitlines()
    assert len(lines) == 1 and "run 1 failed" in lines[0] and "rank 1 fails in the middle" in lines[0], cp.stderr
    assert "timed out" not in lines[0]


def test_original_layout_is_the_stores(tmp_path):
    """advise's ORIG is the layout the traced files have in the store (a file created with
    striping hints over 2 of 8 servers is not 'fixed:64K' over all 8): written for advise
    as a JSON layout that parses back to the same layout; none when files differ or are absent."""
    from pario.layout import parse_layout
    from pario.run.loop import _original_arg
    from pario.system import load_system

    prof = load_system("ceda-hdd8")
    two = parse_layout("fixed:64K@H0,H1", prof)
    p = _original_arg({"/a": two, "/b": two}, prof, tmp_path)
    assert p is not None and parse_layout(str(p), prof) == two
    assert parse_layout(str(p), prof) != parse_layout("fixed:64K", prof)
    assert _original_arg({"/a": two, "/b": parse_layout("fixed:1m", prof)}, prof, tmp_path) is None
    assert _original_arg({"/a": None}, prof, tmp_path) is None
