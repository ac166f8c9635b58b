"""`pario run` across emulated nodes, end to end (issue 26: "every part of the loop across
nodes"): from n1, with the placement options a user gives mpiexec (`--hosts n1,n2 --launcher
ssh --launcher-exec nodeexec`) and a store it makes for nodes (`--coord pfs`) on the CephFS:
run 1 traced with the ranks on both nodes (IOR strided 16 KiB reads of a file a prepare run
wrote), `pario advise`, `pario replicate` (on n1), run 2 served with the plan on both nodes.
The oracle: `pario run`'s own byte comparison with a run without pario (identical), IOR's own
count of the nodes in both runs, fsck clean from the other node, and, where the plan has CEDA
replicas, run 2's reads redirected to them (on this homogeneous profile the distribution
model finds IOR's evenly spread reads not worth a replica; redirection across nodes is
test_served.py's test_replica_reads_are_redirected_on_every_node)."""

from __future__ import annotations

import json
import re
import shlex

import pytest
from helpers import SHARED, VENV_BIN
from nodes import by_node

pytestmark = pytest.mark.multinode
NET = "MPIR_CVAR_CH4_NETMOD=ofi FI_PROVIDER=tcp FI_TCP_IFACE=eth0"


def test_pario_run_across_two_nodes(cluster3, ior_mn):
    d = cluster3.pfs / "run"
    store, out = d / "store", cluster3.home / "run-out"
    pario = shlex.quote(str(VENV_BIN / "pario"))
    ior = ["-a", "MPIIO", "-k", "-G", "5", "-b", "16k", "-t", "16k", "-s", "128", "-o", str(d / "ior.dat")]
    cmd = (f"rm -rf {d} && mkdir -p {d} && {NET} {pario} run --procs 2 --store {store} --system ceda-hdd8 "
           f"--coord pfs --hosts n1,n2 --launcher ssh --launcher-exec {SHARED / 'tools' / 'nodeexec'} "
           f"--out {out} --timeout 300 --json --paper-benefit --prepare={shlex.quote(' '.join(['-w', *ior]))} "
           f"{ior_mn} -r -E {' '.join(ior)}")
    rc, o = cluster3.run("n1", cmd, check=False, timeout=900)
    lines = by_node(o).get("n1", [])
    assert rc == 0, o[-4000:]
    res = json.loads("\n".join(lines[next(i for i, ln in enumerate(lines) if ln.startswith("{")):]))
    assert res["identical"] is True and res["fsck_ok"] is True, res
    for log in ("run1.log", "run2.log"):                       # IOR itself counted the ranks' nodes
        assert re.search(r"^nodes\s+:\s+2$", (out / log).read_text(), re.M), log
    plan = json.loads((out / "plan.json").read_text())
    if plan.get("replicas"):                                   # CEDA replicated: run 2 was redirected
        assert res["redirected"]["hit_requests"] > 0, res["redirected"]
    rc, fs = cluster3.run("n2", f"{pario} store fsck --store {store}", check=False)
    assert rc == 0 and any(ln.startswith("clean:") for ln in by_node(fs)["n2"]), fs
