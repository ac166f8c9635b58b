"""A store on the RADOS data plane coordinated in RADOS itself (coordination "rados":
leased cls_lock locks, the RMT journal as an object with version-fenced writes, the metadata
through Ceph's SQLite VFS; docs/multinode.md, "rados") served to ranks on several emulated
nodes, whose librados clients reach the fixture's cluster (its ceph.conf in the host-shared
home) from inside their nodes: replica reads redirected on every node.  (IOR in every mode,
`pario replicate` during a job and the access-style program on this store: test_served.py,
test_online.py, test_views.py, parametrized by the coordination.)"""

from __future__ import annotations

import json
import re
import shlex

import pytest
from helpers import VENV_BIN
from nodes import by_node

pytestmark = pytest.mark.multinode
PARIO = shlex.quote(str(VENV_BIN / "pario"))

def _init(cluster3, store):
    cluster3.run("n1", f"{PARIO} store init {store} --backend rados --cluster {cluster3.home / 'ceph'} --coord rados")
    return json.loads(cluster3.run("n1", f"cat {store}/store.json")[1].replace("[n1] ", ""))


def _env(lib, store):
    return {"LD_PRELOAD": str(lib), "PARIO_STORE": str(store), "PARIO_SERVE": "all"}


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


def test_replica_reads_are_redirected_on_every_node(cluster3, ior_mn, lib, sdir):
    """A CEDA replica of the whole file on H1, copied by `pario replicate` on n1; the
    original's data objects then zeroed: IOR's read-back check passes on ranks of n2 and n3
    (every node routes through the RMT it follows in the journal object); fsck from n3 then
    finds the original differing from its clean replica (what was done behind its back)."""
    store = sdir / "store"
    cfg = _init(cluster3, store)
    data = str(sdir / "ior.dat")
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
