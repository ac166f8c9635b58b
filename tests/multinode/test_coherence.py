"""MPI-IO's consistency across nodes (MPI 4.0 §14.6.1) for a store served on a parallel file
system whose client cache is not coherent for files held open (ceph-fuse keeps a kernel page
cache; docs/multinode.md).  Rank 0 on n1 overwrites a region, rank 1 on n2 reads it, four
rounds, the file held open by both (tests/multinode/consistency_peer.py, mpi4py's MPI.File,
served through the preloaded library like any MPI-IO program).

A "pfs" store's data files are cached between sync points (PXS_CACHE_SYNC_POINTS): their
cached pages are dropped at open, at MPI_File_sync, at a change of the RMT by another process,
and before every read of a file in atomic mode.  The oracle is the round's fill byte; the
negative control is the same program on a plain file of the same CephFS, where MPICH reads
the first round's bytes again (the fixture's client cache really is stale, so the served
checks can fail).  The three runs share one store, one after the other from the same nodes:
each must find the store closed cleanly by the previous job's last rank (two ranks closing at
once once left it unmarked, and the next job's other node refused the store until fsck)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from helpers import VENV_BIN
from nodes import by_node

pytestmark = pytest.mark.multinode
PEER = Path(__file__).with_name("consistency_peer.py")
ROUNDS = 4
N = 1 << 20


def _reads(out: str) -> list[int]:
    """Fresh bytes per round as rank 1 printed them."""
    got = [(int(k), int(n)) for k, n in re.findall(r"^round (\d+) (\d+)$", out, re.M)]
    assert [k for k, _ in got] == list(range(ROUNDS)), out[-3000:]
    return [n for _, n in got]


@pytest.fixture(scope="module")
def con(cluster3, lib):
    d = cluster3.pfs / "coherence"
    store = d / "store"
    cluster3.run("n1", f"rm -rf {d} && mkdir -p {d} && {shlex.quote(str(VENV_BIN / 'pario'))} store init {store} "
                       f"--system ceda-hdd8 --coord pfs")
    peer = cluster3.home / "bin" / PEER.name
    peer.parent.mkdir(parents=True, exist_ok=True)
    peer.write_text(PEER.read_text())
    yield d, store, peer
    cluster3.run("n1", f"rm -rf {d}", check=False)


def _run(cluster3, lib, con, mode, served):
    d, store, peer = con
    env = {"LD_PRELOAD": str(lib), "PARIO_STORE": str(store), "PARIO_SERVE": "all"} if served else None
    path = d / f"{'served' if served else 'plain'}.{mode}"
    cp = cluster3.mpi("n1,n2", 2, [VENV_BIN / "python", peer, path, mode, ROUNDS], env=env, timeout=240)
    out = cp.stdout + cp.stderr
    assert cp.returncode == 0 and "Traceback" not in out, out[-3000:]
    return out


def test_plain_mpich_reads_stale_bytes_on_this_file_system(cluster3, lib, con):
    """The negative control: without pario, MPICH's reads on n2 return round 0's bytes in every
    later round even with sync-barrier-sync (fsync does not drop the reader's page cache)."""
    fresh = _reads(_run(cluster3, lib, con, "sbs", served=False))
    assert fresh[0] == N and fresh[1:] == [0] * (ROUNDS - 1), fresh


@pytest.mark.parametrize("mode", ["atomic", "sbs"])
def test_served_reads_see_every_write_at_mpi_sync_points(cluster3, lib, con, mode):
    """Served: every round's read on n2 returns that round's bytes, in atomic mode and with
    sync-barrier-sync; no `pario: serve:` line (the store was not refused after the previous job)."""
    out = _run(cluster3, lib, con, mode, served=True)
    assert "pario: serve:" not in out, out[-3000:]
    assert _reads(out) == [N] * ROUNDS, out[-3000:]
    d, store, _ = con
    _, ls = cluster3.run("n2", f"{shlex.quote(str(VENV_BIN / 'pario'))} store ls --store {store} --json")
    assert f"served.{mode}" in "".join(by_node(ls)["n2"])        # it went to the store
