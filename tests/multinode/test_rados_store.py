"""A store on the RADOS data plane coordinated in RADOS itself (coordination "rados":
leased cls_lock locks, the RMT journal as an object with version-fenced writes, the metadata
through Ceph's SQLite VFS; docs/multinode.md, "rados") served to one MPI job whose ranks run
on several emulated nodes: every rank's librados client reaches the cluster of the fixture
(its ceph.conf in the host-shared home) from inside its node.  The oracle of the bytes is IOR
itself: the same command on a plain file of the nodes' CephFS.  The store directory (on the
CephFS, for the served runtime's shadow files: ROMIO's file and the shared file pointer) holds
store.json and nothing of the store's state."""

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

# -C: each rank reads another node's blocks; -z: shuffled offsets (IOR refuses -C with it)
ACCESS = {"independent": ["-C"], "random": ["-z", "--random-offset-seed=7"], "romcio": ["-C", "-c"],
          "cacio": ["-C", "-c"], "hacio": ["-C", "-c"]}


@pytest.fixture
def rdir(cluster3, request):
    """A fresh directory on the CephFS (as the nodes see it), removed after the test."""
    d = cluster3.pfs / ("r_" + re.sub(r"\W", "_", request.node.name))[:80]
    cluster3.run("n1", f"rm -rf {d} && mkdir -p {d}")
    yield d
    cluster3.run("n1", f"rm -rf {d}", check=False)


def _init(cluster3, store):
    cluster3.run("n1", f"{PARIO} store init {store} --backend rados --cluster {cluster3.home / 'ceph'} --coord rados")
    return json.loads(cluster3.run("n1", f"cat {store}/store.json")[1].replace("[n1] ", ""))


def _env(lib, store):
    return {"LD_PRELOAD": str(lib), "PARIO_STORE": str(store), "PARIO_SERVE": "all"}


def _fsck_everywhere(cluster3, store, nodes=("n1", "n2", "n3")):
    for n in nodes:                                      # one after the other (fsck holds the store alone)
        rc, fs = cluster3.run(n, f"{PARIO} store fsck --store {store}", check=False)
        assert rc == 0 and any(ln.startswith("clean:") for ln in by_node(fs)[n]), fs


def _sha_of_store_file(cluster3, node, store, name, tmp):
    _, out = cluster3.run(node, f"{PARIO} store get {shlex.quote(name)} {tmp} --store {store} >/dev/null && "
                                f"sha256sum {tmp} && rm -f {tmp}")
    return by_node(out)[node][-1].split()[0]


@pytest.mark.parametrize("hosts", ["n1,n2", "n1,n2,n3"])
@pytest.mark.parametrize("access", list(ACCESS))
def test_rados_store_serves_ior_across_nodes(cluster3, ior_mn, lib, rdir, hosts, access):
    """IOR write then read (-W/-R: IOR's own checks) served from a rados-coordinated store by
    ranks on 2 and 3 nodes, sequential, random offsets and collective in each order: no error,
    the store file's bytes equal the plain run's, fsck clean from every node, and the store
    directory holds nothing but store.json and the served runtime's shadow directory."""
    nodes = hosts.split(",")
    np = len(nodes)
    store = rdir / "store"
    _init(cluster3, store)
    plain, served = rdir / "plain.dat", rdir / "served.dat"
    base = ["-a", "MPIIO", "-w", "-r", "-e", "-W", "-R", "-k", "-G", "5", "-b", "512k", "-t", "64k", "-s", "3",
            *ACCESS[access]]
    env = _env(lib, store)
    if "-c" in ACCESS[access]:
        env["PARIO_ORDER"] = access
    cp = cluster3.mpi(hosts, np, [ior_mn, *base, "-o", plain], timeout=180)
    assert cp.returncode == 0, (cp.stdout + cp.stderr)[-3000:]
    cp = cluster3.mpi(hosts, np, [ior_mn, *base, "-o", served], env=env, timeout=300)
    out = cp.stdout + cp.stderr
    assert cp.returncode == 0 and not re.search(r"incorrect data|error|pario: serve", out, re.I), out[-3000:]
    _, st = cluster3.run(nodes[-1], f"test ! -e {served} && echo not-on-plain-path; sha256sum {plain}; "
                                    f"ls -A {store} | tr '\\n' ' '")
    got = by_node(st)[nodes[-1]]
    assert got[0] == "not-on-plain-path", got
    assert set(got[2].split()) <= {"store.json", ".pario-shadow"}, got      # nothing of the store's state
    assert _sha_of_store_file(cluster3, nodes[0], store, str(served), f"/tmp/x.{np}") == got[1].split()[0]
    _fsck_everywhere(cluster3, store, nodes)


def _zero_original(cluster3, cfg, fid):
    """Overwrite the data objects of file ``fid`` with zeros behind pario's back (from the
    host, a client of the same cluster): only reads routed to a replica return the bytes."""
    from pario.cluster.client import session

    zeroed = 0
    with session(str(cluster3.home / "ceph" / "ceph.conf")) as r:
        for pool in sorted(set(cfg["pools"].values())):
            io = r.open_ioctx(pool)
            io.set_namespace(cfg["id"])
            for o in list(io.list_objects()):
                if o.key.startswith(f"{fid:08d}."):
                    io.write_full(o.key, bytes(io.stat(o.key)[0]))
                    zeroed += 1
            io.close()
    return zeroed


def _fid(cluster3, store, name):
    code = ("import sys; from pario.store import Store\n"
            "with Store(sys.argv[1]) as st: print('FID', st.backend.meta.get(sys.argv[2])[0])")
    _, out = cluster3.run("n1", f"{shlex.quote(str(VENV_BIN / 'python'))} -c {shlex.quote(code)} {store} "
                                f"{shlex.quote(name)}")
    return int(next(ln.split()[-1] for ln in by_node(out)["n1"] if "FID" in ln))


def test_replica_reads_are_redirected_on_every_node(cluster3, ior_mn, lib, rdir):
    """A CEDA replica of the whole file on H1, copied by `pario replicate` on n1; the
    original's data objects then zeroed: IOR's read-back check passes on ranks of n2 and n3
    (every node routes through the RMT it follows in the journal object); fsck from n3 then
    finds the original differing from its clean replica (what was done behind its back)."""
    store = rdir / "store"
    cfg = _init(cluster3, store)
    data = str(rdir / "ior.dat")
    base = ["-a", "MPIIO", "-k", "-G", "5", "-b", "512k", "-t", "64k", "-s", "3", "-o", data]
    cp = cluster3.mpi("n1,n2", 2, [ior_mn, "-w", *base], env=_env(lib, store), timeout=180)
    assert cp.returncode == 0, (cp.stdout + cp.stderr)[-3000:]
    size = 2 * 3 * 512 * 1024
    system = cfg["system"]
    plan = {"pario_plan": 1, "scheme": "ceda", "system": system, "layouts": {},
            "replicas": {data: [{"name": "ior.r1",
                                 "layout": {"type": "extents", "extents": [[0, size, "H1", 0, 1]], "default": None}}]}}
    (cluster3.home / "rplan.json").write_text(json.dumps(plan))
    _, out = cluster3.run("n1", f"{PARIO} replicate {cluster3.home}/rplan.json --store {store}")
    assert "ior.r1" in out, out
    assert _zero_original(cluster3, cfg, _fid(cluster3, store, data)) > 0
    cp = cluster3.mpi("n2,n3", 2, [ior_mn, "-r", "-R", "-E", *base], env=_env(lib, store), timeout=180)
    out = cp.stdout + cp.stderr
    assert cp.returncode == 0 and not re.search(r"incorrect data|error", out, re.I), out[-3000:]
    # and fsck, from a third node, sees what was done behind pario's back: the original no
    # longer equals its CLEAN replica
    rc, fs = cluster3.run("n3", f"{PARIO} store fsck --store {store}", check=False)
    assert rc != 0 and "differs from" in fs and "NOT clean" in fs, fs


def test_replicate_on_one_node_while_a_job_reads_on_two_others(cluster3, ior_mn, lib, rdir):
    """`pario replicate` on n1 while a served IOR job reads (-R, 20 iterations) on n2 and n3:
    no failed request, IOR's check passes every iteration, fsck clean from every node."""
    store = rdir / "store"
    cfg = _init(cluster3, store)
    data = str(rdir / "ior.dat")
    ior = [ior_mn, "-a", "MPIIO", "-k", "-G", "5", "-b", "1m", "-t", "64k", "-s", "4", "-o", data]
    env = _env(lib, store)
    cp = cluster3.mpi("n2,n3", 2, [*ior, "-w"], env=env, timeout=240)
    assert cp.returncode == 0, (cp.stdout + cp.stderr)[-3000:]
    size = 2 * 4 << 20
    plan = {"pario_plan": 1, "scheme": "ceda", "system": cfg["system"], "layouts": {},
            "replicas": {data: [{"name": "ior.r1",
                                 "layout": {"type": "extents", "extents": [[0, size, "H1", 0, 1]], "default": None}}]}}
    (cluster3.home / "oplan.json").write_text(json.dumps(plan))
    res = {}

    def run_job():
        res["cp"] = cluster3.mpi("n2,n3", 2, [*ior, "-r", "-R", "-i", "20"], env=env, timeout=600)

    t = threading.Thread(target=run_job)
    t.start()
    try:
        _, out = cluster3.run("n1", f"until [ -n \"$(ls {store}/.pario-shadow 2>/dev/null)\" ]; do sleep 0.05; done; "
                                    f"{PARIO} replicate {cluster3.home}/oplan.json --store {store}", timeout=300)
        during = t.is_alive()
    finally:
        t.join()
    assert during, "the job ended before the replication did: nothing was shown"
    assert "ior.r1" in out and "copied" in out, out
    o = res["cp"].stdout + res["cp"].stderr
    assert res["cp"].returncode == 0 and not re.search(r"error|incorrect|pario: serve", o, re.I), o[-3000:]
    _fsck_everywhere(cluster3, store)
