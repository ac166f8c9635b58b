"""IOR (../shared/clients/ior, unmodified, built with the wheel's mpicc) traced by pario's
MPI-IO tracer: every request's rank, offset and length equal what IOR's own parameters imply
(issue 15).  Expected offsets are computed here in numpy from IOR's documented layout
(``offset = i·P·B + r·B + j·T`` for segment i, rank r, transfer j), and for ``-z`` by pario's
bit-exact emulation of IOR's ``GetOffsetArrayRandom`` (validated against Darshan logs of real
IOR runs in tests/workload/test_workloads.py), plus the law that -z deals every slot out exactly once.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from helpers import IOR_SRC

K = 1024
P = 4


@pytest.fixture(scope="module")
def ior_bin(tmp_path_factory):
    if not (IOR_SRC / "build.sh").exists():
        pytest.skip("../shared/clients/ior is absent")
    from pario import ParioError
    from pario.trace import launch

    try:
        launch.tracer_library()
    except ParioError as exc:
        pytest.skip(str(exc))
    out = tmp_path_factory.mktemp("ior")
    mpicc = Path(__import__("sys").executable).parent / "mpicc"
    r = subprocess.run(["bash", str(IOR_SRC / "build.sh"), str(out), str(mpicc)], capture_output=True, text=True,
                       timeout=300)
    if r.returncode != 0:
        pytest.fail(f"IOR did not build: {r.stderr.strip()}")
    return Path(r.stdout.strip().splitlines()[-1])


def _traced(ior_bin, tmp_path, *ior_args):
    from pario.trace.launch import run_traced

    data = tmp_path / "ior.dat"
    argv = [str(ior_bin), "-a", "MPIIO", *ior_args, "-w", "-r", "-e", "-k", "-o", str(data)]
    tr = run_traced(argv, procs=P, out=tmp_path / "t.parquet")
    f = tr.files.index(str(data)) if str(data) in tr.files else \
        next(i for i, n in enumerate(tr.files) if n.endswith("ior.dat"))
    return tr.take(tr.file == f).sorted(), data


def _strided_expect(B, T, S):
    """IOR's layout for ``-b B -t T -s S``, rank by rank, in issue order: write phase then read phase."""
    n = B // T
    out = {}
    for r in range(P):
        i, j = np.meshgrid(np.arange(S), np.arange(n), indexing="ij")
        off = (i * P * B + r * B + j * T).ravel()
        out[r] = np.r_[off, off]
    return out


def _check(tr, expect, T, collective):
    total = sum(len(v) for v in expect.values())
    assert len(tr) == total
    assert tr.bytes_written == tr.bytes_read == total // 2 * T
    for r, off in expect.items():
        t = tr.take(tr.rank == r)
        assert t.offset.tolist() == off.tolist(), f"rank {r}"
        assert set(t.length.tolist()) == {T}
        half = len(off) // 2
        assert t.op.tolist() == [1] * half + [0] * half
        # IOR issues one MPI call per transfer: every request is its own call
        assert len(np.unique(t.call)) == len(t)
    assert bool(tr.collective.all()) is collective and bool(tr.collective.any()) is collective
    assert tr.meta.nprocs == P and "ior" in tr.meta.command and tr.meta.source == "pario tracer"


def test_ior_strided_independent(ior_bin, tmp_path):
    B = T = 16 * K
    tr, _ = _traced(ior_bin, tmp_path, "-b", "16k", "-t", "16k", "-s", "16")
    _check(tr, _strided_expect(B, T, 16), T, collective=False)


def test_ior_collective(ior_bin, tmp_path):
    B, T = 64 * K, 16 * K
    tr, _ = _traced(ior_bin, tmp_path, "-c", "-b", "64k", "-t", "16k", "-s", "4")
    _check(tr, _strided_expect(B, T, 4), T, collective=True)


def test_ior_file_view_gives_the_same_offsets(ior_bin, tmp_path):
    """--mpiio.useFileView: IOR sets a subarray view and moves its individual file pointer;
    the tracer maps each call through the view to the same absolute offsets."""
    B, T = 64 * K, 16 * K
    tr, _ = _traced(ior_bin, tmp_path, "--mpiio.useFileView", "-b", "64k", "-t", "16k", "-s", "4")
    _check(tr, _strided_expect(B, T, 4), T, collective=False)


def test_ior_random(ior_bin, tmp_path):
    from pario.workload import ior as ior_workload

    B, T, seed = 256 * K, 16 * K, 12345
    tr, _ = _traced(ior_bin, tmp_path, "-z", "--random-offset-seed", str(seed), "-b", "256k", "-t", "16k", "-s", "1")
    ref = ior_workload(P, T, B, 1, pattern="random", op="both", seed=seed).sorted()
    expect = {r: ref.offset[ref.rank == r] for r in range(P)}
    _check(tr, expect, T, collective=False)
    # -z deals the file's P·B/T slots out at random: every slot written exactly once
    w = np.sort(tr.offset[tr.op == 1])
    assert w.tolist() == (np.arange(P * B // T) * T).tolist()
