"""A served program after an unclean end in another boot (issue 28).

tests/c/reboot_check.c: every rank writes its block of a served file (``PARIO_SERVE=all``),
syncs, and (run mode) reopens the file and reads the block back.  A first run ends
uncleanly — during writes (``MPI_Abort`` with an unacknowledged rewrite in flight), in the
flush of DIRTY replica bytes at ``MPI_Finalize`` (SIGKILL), or while ``pario replicate``
copies (SIGKILL) — then the machine "reboots" (``PARIO_BOOT_ID``).  Oracles:

* the program itself: every rank reads back exactly what it wrote ("wrong 0"), with the
  store refused for the whole job (every rank, every open: one line, the file passes
  through to MPI-IO) and then, after ``pario store fsck`` verified the store, served again;
* the journal header's ``verify`` flag read by the independent journal reader
  (pario.store.rmt_journal): 1 from the refused run until the verification, then 0;
* the store's data files untouched by the refused run (bytes compared);
* the bytes of the first run, computed here from the program's own formula: acknowledged
  bytes intact after the verification, bytes of the unacknowledged rewrite old or new.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import C_DIR, PARIO

from pario.store import rmt_journal as J
from test_serve_mpi import VENV_BIN, _env, _mpiexec, compile_mpi

SRC = C_DIR / "reboot_check.c"
SYSTEM = "ceda-hdd8"
REBOOT = "boot-after-the-crash"


def val(gen: int, rank: int, n: int) -> np.ndarray:
    """reboot_check.c's val(gen, rank, i) for i < n (its own formula, restated)."""
    i = np.arange(n, dtype=np.int64)
    return ((gen * 131 + rank * 29 + i * 7 + (i >> 8)) & 0xFF).astype(np.uint8)


@pytest.fixture(scope="module")
def exe(lib, tmp_path_factory):
    return compile_mpi(SRC, tmp_path_factory.mktemp("reboot") / "reboot_check")


def _cli(*args, boot=None, check=True):
    env = {k: v for k, v in os.environ.items() if k != "PARIO_BOOT_ID"}
    if boot:
        env["PARIO_BOOT_ID"] = boot
    cp = subprocess.run([*PARIO,
                         *map(str, args)], capture_output=True, text=True, env=env, timeout=300)
    if check:
        assert cp.returncode == 0, cp.stderr
    return cp


def _run(lib, exe, store, name, gen, block, mode, n, tmp, boot=None, plan=None, check=True):
    extra = {"PARIO_BOOT_ID": boot} if boot else {}
    return _mpiexec([exe, name, gen, block, mode], _env(lib, store=store, serve="all", plan=plan, extra=extra), tmp,
                    n=n, check=check)


def _wrong(cp) -> dict[int, int]:
    out = {}
    for ln in cp.stdout.splitlines():
        _, r, _, w = ln.split()
        out[int(r)] = int(w)
    return out


def _data_files(store: Path) -> dict[str, bytes]:
    return {str(p.relative_to(store)): p.read_bytes() for p in sorted((store / "servers").rglob("*")) if p.is_file()}


def _store_file(store: Path, name: str, boot: str) -> np.ndarray:
    code = ("import sys\nfrom pario.store import Store\n"
            "with Store(sys.argv[1]) as st, st.open(sys.argv[2]) as f:\n"
            "    sys.stdout.buffer.write(bytes(f.read(0, int(f.size))))\n")
    cp = subprocess.run([sys.executable, "-c", code, str(store), name], capture_output=True,
                        env={**os.environ, "PARIO_BOOT_ID": boot}, timeout=120)
    assert cp.returncode == 0, cp.stderr.decode(errors="replace")
    return np.frombuffer(cp.stdout, np.uint8)


def _ceda_plan(tmp: Path, name: str, block: int, n: int) -> Path:
    """A CEDA plan with one partial replica over the second half of every rank's block
    (writes there go to the replica: DIRTY until the flush at MPI_Finalize)."""
    ext = [[r * block + block // 2, block // 2, f"H{(r * 3 + 1) % 8}", 0, 1] for r in range(n)]
    plan = {"pario_plan": 1, "scheme": "ceda", "system": SYSTEM, "layouts": {name: {"type": "striped",
            "servers": [f"H{i}" for i in range(8)], "stripes": [65536] * 8}},
            "replicas": {name: [{"name": "r1", "layout": {"type": "extents", "extents": ext, "default": None}}]}}
    p = tmp / "plan.json"
    p.write_text(json.dumps(plan))
    return p


def _kill_replicator(store: Path, plan: Path) -> None:
    """`pario replicate`'s engine, SIGKILLed after its first 64 KiB chunk."""
    code = ("import os, signal, sys\n"
            "from pario.plan.base import Plan\n"
            "from pario.store import Store\n"
            "from pario.store.replicator import Replicator, specs_from_plan\n"
            "st = Store(sys.argv[1], shared=True)\n"
            "specs = specs_from_plan(Plan.load(sys.argv[2], st.system), st)\n"
            "Replicator(st, specs, chunk=65536, idle=0,\n"
            "           progress=lambda done, total: os.kill(os.getpid(), signal.SIGKILL)).run()\n")
    cp = subprocess.run([sys.executable, "-c", code, str(store), str(plan)], capture_output=True, text=True)
    assert cp.returncode == -signal.SIGKILL, cp.stderr


CASES = [  # (crash, ranks of the crashed run, ranks after the reboot, block)
    ("writes", 1, 2, 65536),          # the reproduction
    ("writes", 3, 2, 65536),
    ("writes", 2, 4, 300_000),
    ("flush", 2, 3, 1 << 20),
    ("flush", 3, 1, 1 << 20),
    ("replication", 2, 2, 1 << 20),
    ("replication", 1, 3, 1 << 20),
]


@pytest.mark.parametrize("crash,n1,n2,block", CASES, ids=[f"{c[0]}-{c[1]}to{c[2]}" for c in CASES])
def test_unclean_end_then_reboot_never_serves_wrong_bytes(lib, exe, tmp_path, crash, n1, n2, block):
    store = tmp_path / "store"
    _cli("store", "init", store, "--system", SYSTEM)
    name = str(tmp_path / "f.dat")
    plan = None
    lo = {r: val(1, r, block) for r in range(n1)}          # the acknowledged bytes of the crashed run
    hi = dict(lo)                                           # ... and what an unacknowledged write may leave
    if crash == "writes":
        cp = _run(lib, exe, store, name, 1, block, "abort", n1, tmp_path, check=False)
        assert cp.returncode != 0
        for r in range(n1):
            hi[r] = lo[r].copy()
            hi[r][:block // 2] = val(101, r, block // 2)
    else:
        assert _wrong(_run(lib, exe, store, name, 1, block, "run", n1, tmp_path)) == {r: 0 for r in range(n1)}
        plan = _ceda_plan(tmp_path, name, block, n1)
        if crash == "flush":
            _cli("replicate", plan, "--store", store)
            # writes into the replica (DIRTY), killed at once in MPI_Finalize (the flush)
            cp = _run(lib, exe, store, name, 2, block, "kill:0", n1, tmp_path, plan=plan, check=False)
            assert cp.returncode != 0
            model, _ = J.replay(store / "rmt.log")
            assert any(f == J.DIRTY for o in model.originals() for *_, f in model.entries(o))   # not flushed
            lo = hi = {r: val(2, r, block) for r in range(n1)}
        else:
            _kill_replicator(store, plan)
    assert not Path(name).exists()                                      # everything went to the store
    hdr = J.read(store / "rmt.log").header
    assert hdr["clean"] == 0 and hdr["verify"] == 0
    before = _data_files(store)

    # after the reboot: every rank, every open refuses the store; the program sees its own writes
    cp = _run(lib, exe, store, name, 5, block, "run", n2, tmp_path, boot=REBOOT, plan=plan)
    assert _wrong(cp) == {r: 0 for r in range(n2)}
    said = [ln for ln in cp.stderr.splitlines() if ln.startswith("pario:")]
    assert len(said) == 1 and "not closed cleanly before the machine rebooted" in said[0], cp.stderr
    assert "passes through to MPI-IO" in said[0]
    assert np.array_equal(np.frombuffer(Path(name).read_bytes(), np.uint8),
                          np.concatenate([val(5, r, block) for r in range(n2)]))
    assert J.read(store / "rmt.log").header["verify"] == 1
    assert _data_files(store) == before                                 # nothing served, nothing written
    Path(name).unlink()

    # the verification (any first opener: here fsck), then the crashed run's bytes
    cp = _cli("store", "fsck", "--store", store, "--json", boot=REBOOT)
    rep = json.loads(cp.stdout)
    assert rep["ok"] and rep["unclean"] == 0 and isinstance(rep["verification"], dict), rep
    assert J.read(store / "rmt.log").header["verify"] == 0
    got = _store_file(store, name, REBOOT)
    assert len(got) == n1 * block
    for r in range(n1):
        b = got[r * block:(r + 1) * block]
        assert np.all((b == lo[r]) | (b == hi[r])), f"rank {r}'s block: {int(np.sum((b != lo[r]) & (b != hi[r])))} wrong"

    # served again, in the same (new) boot
    cp = _run(lib, exe, store, name, 6, block, "run", n2, tmp_path, boot=REBOOT, plan=plan)
    assert _wrong(cp) == {r: 0 for r in range(n2)} and "pario:" not in cp.stderr, cp.stderr
    assert not Path(name).exists()
    got = _store_file(store, name, REBOOT)
    for r in range(n2):
        assert np.array_equal(got[r * block:(r + 1) * block], val(6, r, block))


def test_fsck_during_a_refused_job_reports_and_leaves_it(lib, exe, tmp_path):
    """While a job that was refused the store runs (it holds the store shared, so that
    nobody verifies it under the job), fsck reports the pending verification (exit 1) and
    changes nothing; the job's later opens still pass through; afterwards fsck verifies."""
    store = tmp_path / "store"
    _cli("store", "init", store, "--system", SYSTEM)
    name = str(tmp_path / "f.dat")
    assert _run(lib, exe, store, name, 1, 65536, "abort", 2, tmp_path, check=False).returncode != 0
    stop = tmp_path / "go-on"
    env = _env(lib, store=store, serve="all", extra={"PARIO_BOOT_ID": REBOOT})
    job = subprocess.Popen([str(VENV_BIN / "mpiexec"), "-n", "2", str(exe), name, "5", "65536", f"pause:{stop}"],
                           env=env, cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        t0 = time.monotonic()
        while not Path(f"{stop}.ready").exists():
            assert job.poll() is None, job.communicate()
            assert time.monotonic() - t0 < 120
            time.sleep(0.05)
        cp = _cli("store", "fsck", "--store", store, "--json", boot=REBOOT, check=False)
        rep = json.loads(cp.stdout)
        assert cp.returncode == 1 and rep["verification"] == "pending"
        assert any("not verified yet" in p for p in rep["problems"])
        assert J.read(store / "rmt.log").header["verify"] == 1
    finally:
        stop.touch()
        out, err = job.communicate(timeout=120)
    assert job.returncode == 0, err
    assert sorted(out.split("\n")[:-1]) == ["rank 0 wrong 0", "rank 1 wrong 0"]
    assert len([ln for ln in err.splitlines() if ln.startswith("pario:")]) == 1
    rep = json.loads(_cli("store", "fsck", "--store", store, "--json", boot=REBOOT).stdout)
    assert rep["ok"] and isinstance(rep["verification"], dict)
    assert J.read(store / "rmt.log").header["verify"] == 0
