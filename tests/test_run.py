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
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
PARIO = [sys.executable, "-c", "import sys; from pario.cli import main; sys.exit(main())"]
IOR = ROOT / "examples" / "ior_like.py"


def _mpiexec() -> str | None:
    cand = Path(sys.executable).parent / "mpiexec"
    return str(cand) if cand.exists() else shutil.which("mpiexec")


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
    if _mpiexec() is None:
        pytest.skip("mpiexec not found (pip install mpich mpi4py)")
    pytest.importorskip("mpi4py")
    d = tmp_path_factory.mktemp("run")
    cp = pario("run", "--procs", 2, "--store", d / "store", "--system", "ceda-hdd8", "--out", d / "out",
               "--timeout", 60, "--json", IOR, "data", "--pattern", "strided", "--xfer", "16K", "--segments", 16)
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
        assert res["io_s"][run] == pytest.approx(float(df["end"].max() - df["start"].min()))
    assert res["io_s"]["ratio"] == pytest.approx(res["io_s"]["run1"] / res["io_s"]["run2"])
    assert res["testbed"] is None and res["devices"] is None and res["direct"] is False
    assert len(res["loadavg"]["start"]) == 3 and res["dropped_replicas"] == []
    assert res["collective_requests_run1"] == 0


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


def _need_mpi():
    if _mpiexec() is None:
        pytest.skip("mpiexec not found (pip install mpich mpi4py)")
    pytest.importorskip("mpi4py")


# HDD-like servers as the testbed emulates them (4 ms per request, 120 MiB/s): with transfers
# larger than the 64 KiB stripe, CEDA's replica (one request per transfer, rank r on server r)
# beats the striping under any batching of the trace, so the plan always has a replica
HDD4 = """name = "test-hdd4"
description = "4 HDD-like servers: 4 ms per request, 120 MiB/s"
[network]
e = 0.0
t = 0.0
[clients]
procs_per_node = 1
[[server]]
name = "H"
count = 4
kind = "hdd"
alpha = 0.004
beta = 7.947285970052083e-09
alpha_read_seq = 0.004
alpha_read_rand = 0.004
alpha_write_seq = 0.004
alpha_write_rand = 0.004
"""


def test_run_prepare_read_only_direct_and_rerun(tmp_path):
    """--prepare writes the input untraced, runs 1 and 2 only read it (O_DIRECT); a second
    pario run on the same store drops the first one's replicas before its run 1."""
    _need_mpi()
    store, out = tmp_path / "store", tmp_path / "out"
    (tmp_path / "hdd4.toml").write_text(HDD4)
    args = ["run", "--procs", 2, "--store", store, "--system", tmp_path / "hdd4.toml", "--out", out,
            "--timeout", 90, "--direct", "--json", "--prepare", "data --write-only --xfer 256K --segments 8",
            IOR, "data", "--read-only", "--xfer", "256K", "--segments", 8]
    cp = pario(*args)
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    res = json.loads(cp.stdout)
    import hashlib

    assert res["identical"] and res["fsck_ok"] and res["direct"] is True and res["prepare_s"] > 0
    assert res["files"] == {"data": hashlib.sha256(expected_file(2, 8, 256 << 10)).hexdigest()}
    from pario.trace import load

    t1, t2 = load(Path(res["traces"][0])), load(Path(res["traces"][1]))
    assert set(t1.op.tolist()) == {0} and len(t1) == 2 * 8    # run 1 traced the reads only
    assert res["replicas_planned"] >= 1
    n, b = brute_hits(store, "data", t2)
    assert res["redirected"]["hit_requests"] == n == len(t2) and res["redirected"]["hit_bytes"] == b
    assert res["redirected"]["hit_write_requests"] == 0
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
    assert res["identical"] and res["files"] == {"data": __import__("hashlib").sha256(expected_file(2, 16, 16384)).hexdigest()}


def _testbed_ok() -> bool:
    try:
        from pario.testbed import check_support

        check_support()
        return True
    except Exception:  # noqa: BLE001 - any reason means: skip
        return False


@pytest.mark.skipif(not _testbed_ok(), reason="needs root, loop devices and a blkio/io cgroup")
def test_run_on_testbed(tmp_path):
    """pario run --testbed: store servers on the testbed, O_DIRECT, ranks in the cgroup; run 2's
    reads reach only the replica's servers (rank r → server r), with the bytes the program reads."""
    _need_mpi()
    from pario.testbed import down, up

    tbdir = tmp_path / "tb"
    up(tbdir, hdd=4, ssd=0, size=32 << 20)
    try:
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
        # the model predicts the gain that made CEDA replicate
        assert res["predicted"]["plan"] < res["predicted"]["ORIG"]
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
])
def test_run_bad_input_one_line(tmp_path, args, message):
    cp = pario("run", *args, cwd=tmp_path, timeout=60)
    assert cp.returncode == 2
    lines = cp.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pario: error:") and message in lines[0], cp.stderr
    assert not (tmp_path / "S").exists()   # nothing created on bad input


def test_run_program_failure_is_one_line(tmp_path):
    if _mpiexec() is None:
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
