"""pario.mpi under real MPI: programs in tests/mpi/ run with ``mpiexec -n 4`` (MPICH from PyPI).

Checks against independent oracles: mpi4py's own MPI.File (ROMIO) on the same calls, seed
004's worked example (Fig. 2-7, Tables 1-3: 24T / 20T / 12T), a brute-force recomputation
of each aggregator's schedule from the pario_trace through pario.plan.collective, and the
pattern each rank wrote.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from helpers import MPI_DIR, ROOT, mpiexec_path

MPIDIR = MPI_DIR


def run_mpi(script: str, *args, n: int = 4, timeout: float = 120, env: dict | None = None) -> subprocess.CompletedProcess:
    exe = mpiexec_path()
    if exe is None:
        pytest.skip("mpiexec not found (pip install mpich mpi4py)")
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        pytest.skip("mpi4py not installed")
    cmd = [exe, "-n", str(n), sys.executable, str(MPIDIR / script), *map(str, args)]
    try:
        cp = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=str(ROOT),
                            env=None if env is None else {**os.environ, **env})
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{script} timed out after {timeout}s: {exc.stdout}")
    return cp


def _check(cp):
    assert cp.returncode == 0, f"rc={cp.returncode}\nstdout:\n{cp.stdout[-3000:]}\nstderr:\n{cp.stderr[-3000:]}"


# ---------------------------------------------------------------------- bytes vs mpi4py
def test_bytes_identical_to_mpi4py(tmp_path):
    """Independent and collective, with and without views (vector, subarray, struct, non-contiguous memory),
    small pieces and 8 KiB blocks over many cycles (the C driver's pwritev/preadv callback).
    (The former numpy runtime's writer-thread variant, PARIO_CB_OVERLAP, is gone with it.)"""
    cp = run_mpi("compare_mpi4py.py", tmp_path)
    lines = [l for l in cp.stdout.splitlines() if l.startswith(("OK", "FAIL"))]
    assert len(lines) == 18, cp.stdout + cp.stderr
    assert all(l.startswith("OK") for l in lines), "\n".join(lines)
    _check(cp)


# ---------------------------------------------------------------------- collective orders
@pytest.fixture(scope="module")
def orders_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("orders")
    cp = run_mpi("orders.py", d)
    _check(cp)
    return d


def test_worked_example_sequences(orders_run):
    """seed 004 Fig. 3, 5, 7: A0/A1 block sequences under ROMCIO, CACIO, HACIO (Algorithm 1)."""
    res = json.loads((orders_run / "example.json").read_text())
    seq = {o: [a["blocks"] for a in res[o]] for o in res}
    assert seq["romcio"] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert seq["cacio"] == [[0, 1, 2, 3], [5, 6, 7, 4]]        # "5,6,7,4 instead of 4,5,6,7"
    assert seq["hacio"] == [[0, 2, 1, 3], [6, 4, 7, 5]]        # HServers first, from server (a+i) mod count


def test_worked_example_costs(orders_run):
    """Tables 1-3: per cycle, the most loaded server sets the cost; HServer request 5T, SServer 1T → 24T/20T/12T."""
    res = json.loads((orders_run / "example.json").read_text())
    unit = {0: 5, 1: 1}
    totals = {}
    for order, aggs in res.items():
        ncyc = max(max(a["cycle"]) for a in aggs) + 1
        total = 0
        for c in range(ncyc):
            load = {}
            for a in aggs:
                for s, k, cy in zip(a["server"], a["kind"], a["cycle"]):
                    if cy == c:
                        load[s] = load.get(s, 0) + unit[k]
            total += max(load.values())
        totals[order] = total
    assert totals == {"romcio": 24, "cacio": 20, "hacio": 12}


def test_orders_write_identical_files(orders_run):
    files = [(orders_run / f"example_{o}.bin").read_bytes() for o in ("romcio", "cacio", "hacio")]
    assert files[0] == files[1] == files[2]
    expect = np.concatenate([np.full(4096, v, np.uint8) for v in (1, 3, 5, 7, 2, 4, 6, 8)])
    assert files[0] == expect.tobytes()
    b = [(orders_run / f"b_{o}.bin").read_bytes() for o in ("romcio", "cacio", "hacio")]
    assert b[0] == b[1] == b[2]
    # and equal to what each rank wrote (oracle: rebuild the file from the pattern)
    ref = np.zeros(100 + 6 * 4 * 5000, np.uint8)
    for r in range(4):
        data = np.random.default_rng(7 + r).integers(0, 256, 30000, dtype=np.uint8)
        for k in range(6):
            o = 100 + (k * 4 + r) * 5000
            ref[o:o + 5000] = data[k * 5000:(k + 1) * 5000]
    assert b[0] == ref.tobytes()


def _oracle_schedule(trace, order, agg, naggr, stripe, system, B):
    """Recompute one aggregator's pieces from the trace with plain Python, order them with the
    numpy reference orders (tests/oracles/order.py)."""
    from oracles.order import request_order

    w = trace.where(op="write")
    st, en = int(w.offset.min()), int((w.offset + w.length).max())
    fd = -(-(en - st) // naggr)
    lo, hi = st + agg * fd, min(en, st + (agg + 1) * fd)
    offs, lens, procs = [], [], []
    for rk, o, l in zip(w.rank.tolist(), w.offset.tolist(), w.length.tolist()):
        a, b = max(o, lo), min(o + l, hi)
        while a < b:  # cut at stripe units
            cut = min(b, (a // stripe + 1) * stripe)
            offs.append(a), lens.append(cut - a), procs.append(rk)
            a = cut
    offs, lens, procs = np.array(offs), np.array(lens), np.array(procs)
    server = (offs // stripe) % system.n
    kinds = np.asarray(system.kinds, dtype=np.int64)
    kind = kinds[server]
    idx = request_order(order, offs, server, kind, agg, proc=procs, servers=np.arange(system.n), server_kinds=kinds)
    cyc = (np.concatenate(([0], np.cumsum(lens[idx])[:-1])) // B)
    return offs[idx], lens[idx], server[idx], cyc


@pytest.mark.parametrize("order", ["romcio", "cacio", "hacio"])
def test_schedule_equals_plan_collective_on_trace(orders_run, order):
    """Heterogeneous placement (6 HDD + 2 SSD, 8 KiB stripes): each aggregator's per-cycle order equals
    what pario.plan.collective produces for the recorded trace."""
    from pario.system import load_system
    from pario.trace import load

    system = load_system("hacio-6h2s")
    trace = load(orders_run / f"b_{order}.parquet")
    for agg in (0, 1):
        s = np.load(orders_run / f"b_{order}_agg{agg}.npz")
        o, l, srv, cyc = _oracle_schedule(trace, order, agg, 2, 8192, system, 12 * 1024)
        assert np.array_equal(s["offset"], o)
        assert np.array_equal(s["length"], l)
        assert np.array_equal(s["server"], srv)
        assert np.array_equal(s["cycle"], cyc)


def test_profiler_trace_rows(orders_run):
    """pario_trace: one row per file piece, per rank, with op and collective flag, times ordered."""
    from pario.trace import load

    tr = load(orders_run / "b_hacio.parquet")
    assert len(tr) == 4 * 6 * 2
    for r in range(4):
        t = tr.where(rank=r, op="write")
        assert sorted(t.offset.tolist()) == [100 + (k * 4 + r) * 5000 for k in range(6)]
        assert set(t.length.tolist()) == {5000}
        assert t.collective.all()
    assert tr.bytes_written == tr.bytes_read == 4 * 30000
    assert np.all(tr.end >= tr.start)
    # one write_all and one read_all per rank: the 6 pieces of each call share its number
    for r in range(4):
        t = tr.where(rank=r)
        assert t.call[t.op == 1].tolist() == [0] * 6 and t.call[t.op == 0].tolist() == [1] * 6
    # the job's facts (the program's own hints: cb_nodes 2, cb_buffer_size 12K; 4 ranks)
    assert tr.meta.source == "pario.mpi" and tr.meta.nprocs == 4
    assert tr.meta.cb_nodes == 2 and len(tr.meta.aggregators) == 2
    assert tr.meta.cb_buffer_size == 12 * 1024 and tr.meta.hint("romio_cb_write") == "enable"
    assert "orders.py" in tr.meta.command


def test_collective_io_callbacks_read_past_eof_and_write_round_trip(tmp_path):
    """The C driver's file accesses for pario.mpi.File (pario.native._collective): the POSIX
    callback (pwritev/preadv in C) and the Python callback of a back end without a
    descriptor read shuffled blocks (many past the end of the file: zeros) and write them
    back, in one cycle and in many (tests/mpi/cycle_io.py)."""
    cp = run_mpi("cycle_io.py", tmp_path, n=1)
    assert cp.returncode == 0, cp.stderr[-3000:]
    assert "ok" in cp.stdout


def test_collective_layout_callback_places_pieces_as_placement(tmp_path):
    """The C layout callback of pario.mpi.File (the store engine's layout of the file, cut into
    pieces in C) cuts and places an aggregator's pieces as the independent numpy mapping
    (tests/oracles/layout.py) says -- maximal runs of bytes on one server back to back -- for
    striped, 2-D, region and extent-map layouts (tests/mpi/layout_map.py)."""
    cp = run_mpi("layout_map.py", n=1)
    assert cp.returncode == 0, cp.stderr[-3000:]
    assert "ok" in cp.stdout


def test_collective_errors_are_raised_on_every_rank(tmp_path):
    """A back end's failure on one aggregator raises its ParioError on every rank of a
    collective call (only on the failing rank when the access was independent), the driver's
    own codes as their one line, and the file works afterwards (tests/mpi/collective_errors.py)."""
    cp = run_mpi("collective_errors.py", tmp_path, n=2)
    assert cp.returncode == 0, cp.stderr[-3000:]
    assert "ok" in cp.stdout
