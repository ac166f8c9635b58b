"""``pario run``: the full loop (traced run, advise, replicate, redirected run) under ``mpiexec -n 2``.

Oracles: the bytes the IOR-like program writes are fixed by its seeds (``examples/ior_like.py``
checks every read itself and the test recomputes the file independently); run 2's requests
are checked against the RMT entries the replicator created (the redirector serves exactly
the requests that overlap an entry, seed 000 §4.6), and the plan is checked to contain a
CEDA replica.  Bad input gives one-line errors.
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


@pytest.mark.parametrize("args, message", [
    (["--procs", "2", "--store", "S", "--system", "ceda-hdd8", "no/such/program.py"], "program 'no/such/program.py' not found"),
    (["--procs", "two", "--store", "S", "--system", "ceda-hdd8", str(IOR)], "--procs 'two': not an integer"),
    (["--procs", "0", "--store", "S", "--system", "ceda-hdd8", str(IOR)], "--procs 0: need at least 1 process"),
    (["--procs", "2", "--store", "S", "--system", "no-such-system", str(IOR)], "no-such-system"),
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
