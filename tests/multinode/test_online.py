"""`pario replicate` on node n1 while a served IOR job runs on n2 and n3 (issue 26): the
replicator appends to the RMT journal (COPYING, then FRESH) while the job's ranks follow it
on every request.  Reads during the copy: IOR's read-back check passes every iteration; writes
during the copy (IOR -w -W): they turn the COPYING ranges they hit STALE, IOR's own write check
passes, and afterwards the file reads back with IOR's bytes from two other nodes.  fsck is
clean from every node.  Before the journal reader dropped the whole first page of a range it
re-reads (the kernel keeps a partial page), the job's ranks read a stale page of a record the
replicator had just published: "RMT ... is damaged" and IOR failed (3 of 3 runs)."""

from __future__ import annotations

import json
import re
import shlex
import threading

import pytest
from helpers import VENV_BIN
from nodes import by_node

pytestmark = pytest.mark.multinode
PARIO = shlex.quote(str(VENV_BIN / "pario"))
SIZE = 2 * 4 << 20          # 2 ranks x 4 segments x 1 MiB


@pytest.fixture
def odir(cluster3, request):
    """A fresh directory on the CephFS's SSD pool (the HDD pool's 250 IOPS make 64 KiB writes
    of two nodes crawl: about 1 MiB/s), removed after the test."""
    d = cluster3.pfs / ("o_" + re.sub(r"\W", "_", request.node.name))[:80]
    cluster3.run("n1", f"rm -rf {d} && mkdir -p {d} && setfattr -n ceph.dir.layout.pool -v pario-fs-ssd {d}")
    yield d
    cluster3.run("n1", f"rm -rf {d}", check=False)


def _ior(ior, *args, data):
    return [ior, "-a", "MPIIO", "-k", "-G", "5", "-b", "1m", "-t", "64k", "-s", "4", *args, "-o", data]


@pytest.mark.parametrize("coord", ["pfs", "rados"])
@pytest.mark.parametrize("job", ["read", "write"])
def test_replicate_on_one_node_while_a_job_runs_on_two_others(cluster3, ior_mn, lib, odir, job, coord):
    """(coord "rados": the store on the rados plane of the fixture's cluster, coordinated in
    RADOS; its directory on the CephFS.)"""
    store, data = odir / "store", str(odir / "ior.dat")
    made = (f"--backend rados --cluster {cluster3.home / 'ceph'} --coord rados" if coord == "rados"
            else "--system ceda-hdd8 --coord pfs")
    cluster3.run("n1", f"{PARIO} store init {store} {made}")
    system = json.loads("\n".join(by_node(cluster3.run("n1", f"cat {store}/store.json")[1])["n1"]))["system"]
    env = {"LD_PRELOAD": str(lib), "PARIO_STORE": str(store), "PARIO_SERVE": "all"}
    cp = cluster3.mpi("n2,n3", 2, _ior(ior_mn, "-w", data=data), env=env, timeout=240)
    assert cp.returncode == 0, (cp.stdout + cp.stderr)[-3000:]
    plan = {"pario_plan": 1, "scheme": "ceda", "system": system, "layouts": {},
            "replicas": {data: [{"name": "ior.r1",
                                 "layout": {"type": "extents", "extents": [[0, SIZE, "H1", 0, 1]], "default": None}}]}}
    (cluster3.home / "plan.json").write_text(json.dumps(plan))
    args = ["-r", "-R", "-i", "30"] if job == "read" else ["-w", "-W", "-i", "3"]
    res = {}

    def run_job():
        res["cp"] = cluster3.mpi("n2,n3", 2, _ior(ior_mn, *args, data=data), env=env, timeout=600)

    t = threading.Thread(target=run_job)
    t.start()
    try:         # once the job has the file open (its shadow exists), the copy on n1
        _, out = cluster3.run("n1", f"until [ -n \"$(ls {store}/.pario-shadow 2>/dev/null)\" ]; do sleep 0.05; done; "
                                    f"{PARIO} replicate {cluster3.home}/plan.json --store {store}", timeout=300)
        during = t.is_alive()
    finally:
        t.join()
    assert during, "the job ended before the replication did: nothing was shown"
    assert "ior.r1" in out and "copied" in out, out
    cp = res["cp"]
    o = cp.stdout + cp.stderr
    assert cp.returncode == 0 and not re.search(r"error|incorrect|pario: serve", o, re.I), o[-3000:]
    if job == "write":       # what the job wrote, read from two other nodes (redirected where the copy holds)
        cp = cluster3.mpi("n1,n3", 2, _ior(ior_mn, "-r", "-R", data=data), env=env, timeout=240)
        o = cp.stdout + cp.stderr
        assert cp.returncode == 0 and not re.search(r"error|incorrect", o, re.I), o[-3000:]
    for n in ("n1", "n2", "n3"):
        rc, fs = cluster3.run(n, f"{PARIO} store fsck --store {store}", check=False)
        assert rc == 0 and any(ln.startswith("clean:") for ln in by_node(fs)[n]), fs
