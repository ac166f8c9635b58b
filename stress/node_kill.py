"""Node-death stress of a store served across nodes (issue 26): every process of one emulated
node -- its MPI ranks and its ceph-fuse client -- SIGKILLed at a random point of served
writes (and, in half of the trials, of a `pario replicate` running on another node), then the
store checked from a surviving node.

    python stress/node_kill.py --trials 200 --seed 1 [--lease 30] [--coord pfs|rados] [--keep]

Brings up 3 emulated nodes (tests/multinode/nodes.py over ../shared/tools/multinode.sh; root
and Ceph needed) with the file system's session_timeout and session_autoclose set to --lease
seconds (Ceph's minimum, 30): the time after which the metadata server drops a dead client's
session, and with it the client's fcntl locks (the store lock, the journal lock, the range
locks) and caps.  That is the store's lease:
a store a dead node had open is usable again within it.  Every trial, on one "pfs" store on
the CephFS:

* a served job of 2 ranks on n2 and n3 (stress/node_kill_rank.py write: 64 KiB blocks
  overwritten in passes, MPI_File_sync every K blocks, then the acknowledgement appended to a
  file of the host-shared home, which outlives the node);
* in half of the trials `pario replicate` on n1 copies a CEDA replica of the file while it is
  written;
* 0-3 s after n3's rank opened the file every process of n3 is SIGKILLed (ranks, hydra's
  proxy, ceph-fuse); n2's rank is then ended by hydra;
* from n1: `pario store fsck` (the first opener after the death: recovery; it waits for the
  store lock while the dead client's session lasts) must be clean, and must succeed within
  lease + 30 s of the kill; node_kill_rank.py check reads every block from the store: 0 lost
  acknowledged bytes, 0 stale reads;
* n3's ceph-fuse is mounted again (multinode.sh remount).

``--coord rados``: the store is on the rados data plane of the same cluster, coordinated in
RADOS (its locks leased for ``--rados-lease`` seconds, PARIO_RADOS_LEASE): a dead node's locks
go with their lease, not with the file system's session; the store directory (store.json and
the shadow files) stays on the CephFS.

Prints one line per trial and a summary; exit 1 if any trial failed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "multinode")]
BS = 64 << 10


def node_pids(node: str) -> list[int]:
    """Every process in the mount namespace of emulated node ``node`` (ceph-fuse included)."""
    from nodes import RUN, _ns_inode

    ino = _ns_inode(RUN / f"{node}.mnt")
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and int(d.name) != os.getpid() and _ns_inode(d / "ns" / "mnt") == ino:
            pids.append(int(d.name))
    return pids


def kill_node(node: str) -> int:
    pids = node_pids(node)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return len(pids)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--lease", type=int, default=30,
                    help="the file system's session_timeout and session_autoclose (seconds, at least 30)")
    ap.add_argument("--keep", action="store_true", help="leave the cluster up at the end (its MN_DIR is printed)")
    ap.add_argument("--replicate", type=float, default=0.5, help="share of the trials with a replication")
    ap.add_argument("--stop", action="store_true", help="stop at the first failed trial (with --keep: to look at it)")
    ap.add_argument("--coord", choices=("pfs", "rados"), default="pfs",
                    help="the store: 'pfs' on the CephFS (default) or 'rados' (the rados plane, coordinated in RADOS)")
    ap.add_argument("--rados-lease", type=float, default=10.0, help="with --coord rados: PARIO_RADOS_LEASE (seconds)")
    a = ap.parse_args(argv)

    from ceph_fixture import HDD, SSD, free_port_base
    from helpers import VENV_BIN
    from nodes import Nodes, by_node, project_main, skip_reason

    names = ["n1", "n2", "n3"]
    why = skip_reason(names)
    if why:
        print(f"node_kill: skipped: {why}")
        return 0
    rng = random.Random(a.seed)
    home = Path(tempfile.mkdtemp(prefix="pario-nk-"))
    cl = Nodes(home, project_main(), names, free_port_base(HDD + SSD))
    cl.up()
    failed = 0
    try:
        conf = home / "ceph" / "ceph.conf"
        fs = json.loads(subprocess.run(["ceph", "-c", str(conf), "fs", "ls", "--format", "json"], check=True,
                                       capture_output=True, text=True).stdout)[0]["name"]
        for key in ("session_timeout", "session_autoclose"):     # Ceph's minimum: 30 s each
            cmd = ["fs", "set", fs, key, str(a.lease)]
            subprocess.run(["ceph", "-c", str(conf), *cmd], check=True, capture_output=True, timeout=60)
        py, pario = VENV_BIN / "python", VENV_BIN / "pario"
        lib = ROOT / "src" / "pario" / "native" / "libpario_trace.so"
        peer = home / "bin" / "node_kill_rank.py"
        peer.parent.mkdir(parents=True, exist_ok=True)
        peer.write_text((ROOT / "stress" / "node_kill_rank.py").read_text())
        d = cl.pfs / "nk"
        store = d / "store"
        acks = home / "acks"
        acks.mkdir()
        made = ("--system ceda-hdd8 --coord pfs" if a.coord == "pfs"
                else f"--backend rados --cluster {home / 'ceph'} --coord rados")
        cl.run("n1", f"mkdir -p {d} && setfattr -n ceph.dir.layout.pool -v pario-fs-ssd {d} && "
                     f"{pario} store init {store} {made} >/dev/null")
        system = json.loads("\n".join(by_node(cl.run("n1", f"cat {store}/store.json")[1])["n1"]))["system"]
        env = {"LD_PRELOAD": str(lib), "PARIO_STORE": str(store), "PARIO_SERVE": "all"}
        lease_env = ""
        bound = a.lease + 30            # seconds after the kill the store must be usable again
        if a.coord == "rados":
            env["PARIO_RADOS_LEASE"] = str(a.rados_lease)
            lease_env = f"PARIO_RADOS_LEASE={a.rados_lease} "
            # the store directory (store.json, the shadow files) stays on the CephFS: an opener
            # also waits for the dead client's session there
            bound = max(a.lease, a.rados_lease) + 30
        leases = []
        for t in range(a.trials):
            nblocks, k = rng.randint(16, 96), rng.randint(1, 4)
            path = str(d / f"f{t}.dat")
            replicate = rng.random() < a.replicate
            delay = rng.uniform(0.0, 3.0)
            res = {}

            def job():
                res["cp"] = cl.mpi("n2,n3", 2, [py, peer, "write", path, t, nblocks, BS, k, 60, acks], env=env,
                                   timeout=300)

            jt = threading.Thread(target=job)
            jt.start()
            rt = None
            if replicate:
                size = 2 * nblocks * BS
                plan = {"pario_plan": 1, "scheme": "ceda", "system": system, "layouts": {},
                        "replicas": {path: [{"name": f"f{t}.r1", "layout": {
                            "type": "extents", "extents": [[0, size, "H1", 0, 1]], "default": None}}]}}
                (home / f"plan{t}.json").write_text(json.dumps(plan))

                def rep():
                    # once the job created the file (its shadow exists), at most 20 s
                    res["rep"] = cl.run("n1", f"for i in $(seq 400); do [ -n \"$(ls {store}/.pario-shadow 2>/dev/null)\" ] "
                                              f"&& break; sleep 0.05; done; "
                                              f"{lease_env}{pario} replicate {home}/plan{t}.json --store {store} "
                                              f"2>&1 | tail -1",
                                        check=False, timeout=300)

                rt = threading.Thread(target=rep)
                rt.start()
            t0 = time.monotonic()       # the kill a random time after n3's rank opened the file
            while not (acks / f"{t}.1.open").exists() and time.monotonic() - t0 < 30 and jt.is_alive():
                time.sleep(0.02)
            time.sleep(delay)
            killed = kill_node("n3")
            t_kill = time.monotonic()
            jt.join()
            if rt:
                rt.join()
            fsck_wait = 0.0
            if a.coord == "rados":
                fsck_wait = max(0.0, t_kill + a.rados_lease + 1 - time.monotonic())
                # the dead node's leased locks: an opener before they expire shares the store with
                # them (it cannot tell a dead holder from a live one) and is not the recovering first
                time.sleep(fsck_wait)
            t_fsck = time.monotonic()
            rc, out = cl.run("n1", f"{lease_env}PARIO_STORE_TIMEOUT={a.lease * 3 + 30} {pario} store fsck --store {store} "
                                   f"2>&1 | tail -2", check=False, timeout=a.lease * 4 + 120)
            lease = time.monotonic() - t_kill
            fsck_s = time.monotonic() - t_fsck
            fs_lines = by_node(out).get("n1", [])
            clean = rc == 0 and any(ln.startswith("clean:") for ln in fs_lines)
            rc2, chk = cl.run("n1", f"{lease_env}{py} {peer} check {store} {path} {t} 2 {nblocks} {BS} {acks}", check=False,
                              timeout=300)
            line = (by_node(chk).get("n1") or ["?"])[-1]
            parts = line.split()
            ok = (clean and rc2 == 0 and len(parts) == 8 and parts[5] == "0" and parts[7] == "0"
                  and lease <= bound)
            failed += not ok
            leases.append(lease)
            rep_out = res.get("rep", (0, ""))[1].strip().splitlines()[-1:] if replicate else []
            print(f"trial {t}: killed {killed} processes of n3 after {delay:.1f} s; {line}; fsck "
                  f"{'clean' if clean else 'NOT CLEAN: ' + ' | '.join(fs_lines)} after {lease:.1f} s "
                  f"(the job{' and the replicator' if rt else ''} ended {t_fsck - t_kill - fsck_wait:.1f} s after the kill, fsck took {fsck_s:.1f} s)"
                  f"{'; replicate: ' + rep_out[0] if rep_out else ''} -> {'ok' if ok else 'FAILED'}", flush=True)
            if not ok:
                rc3, why = cl.run("n1", f"{py} {peer} explain {store} {path} {t} 2 {nblocks} {BS} {acks}", check=False,
                                  timeout=300)
                print("\n".join("    " + ln for ln in by_node(why).get("n1", [])), flush=True)
                if a.stop:
                    break
            cl._call(["remount"], 180, merge=True)
        what = (f"session timeout and autoclose {a.lease} s" if a.coord == "pfs"
                else f"rados locks {a.rados_lease} s")
        print(f"node_kill ({a.coord}): {a.trials} trials, {failed} failed; store usable again {min(leases):.1f}-"
              f"{max(leases):.1f} s after the kill (lease: {what})")
    finally:
        if a.keep:
            print(f"cluster left up: MN_DIR={home}")
        else:
            cl.down()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
