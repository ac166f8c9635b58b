"""Node-death stress of a store served across nodes (issue 26): every process of one emulated
node -- its MPI ranks and its ceph-fuse client -- SIGKILLed at a random point of served
writes (and, in half of the trials, of a `pario replicate` running on another node), then the
store checked from a surviving node.

    python stress/node_kill.py --trials 200 --seed 1 [--lease 30] [--coord pfs|rados|both] [--keep]

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

``--coord both``: one store of each kind, one job on each in every trial (each with its own
blocks, passes and replication draw), and n3's death a random time after both jobs' ranks on
n3 opened their files: one node's death is a trial of each store.

Prints one line per trial and store and a summary; exit 1 if any trial failed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
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


class _Store:
    """One store of the stress and its trials: the job on n2 and n3, the replicator on n1, the
    judgement from n1 after the kill."""

    def __init__(self, coord, d, store, acks, env, lease_env, bound, system, a):
        self.coord, self.d, self.store, self.acks = coord, d, store, acks
        self.env, self.lease_env, self.bound, self.system, self.a = env, lease_env, bound, system, a
        self.leases: list[float] = []

    def start(self, t, rng, cl, py, peer, pario, home):
        self.nblocks, k = rng.randint(16, 96), rng.randint(1, 4)
        self.path = str(self.d / f"f{t}.dat")
        self.res, self.rt = {}, None
        replicate = rng.random() < self.a.replicate

        def job():
            self.res["cp"] = cl.mpi("n2,n3", 2, [py, peer, "write", self.path, t, self.nblocks, BS, k, 60, self.acks],
                                    env=self.env, timeout=300)

        self.jt = threading.Thread(target=job)
        self.jt.start()
        if replicate:
            size = 2 * self.nblocks * BS
            plan = {"pario_plan": 1, "scheme": "ceda", "system": self.system, "layouts": {},
                    "replicas": {self.path: [{"name": f"f{t}.r1", "layout": {
                        "type": "extents", "extents": [[0, size, "H1", 0, 1]], "default": None}}]}}
            pf = home / f"plan.{self.coord}.{t}.json"
            pf.write_text(json.dumps(plan))
            store = self.store

            def rep():
                # once the job created the file (its shadow exists), at most 20 s
                self.res["rep"] = cl.run("n1", f"for i in $(seq 400); do [ -n \"$(ls {store}/.pario-shadow 2>/dev/null)\" ] "
                                               f"&& break; sleep 0.05; done; "
                                               f"{self.lease_env}{pario} replicate {pf} --store {store} 2>&1 | tail -1",
                                         check=False, timeout=300)

            self.rt = threading.Thread(target=rep)
            self.rt.start()

    def opened(self, t) -> bool:
        return (self.acks / f"{t}.1.open").exists()

    def join(self):
        self.jt.join()
        if self.rt:
            self.rt.join()

    def judge(self, t, cl, py, peer, pario, t_kill, t_ended, killed, delay) -> None:
        """fsck from n1 (after the rados lease), the blocks checked: self.verdict = (ok, lines)."""
        from nodes import by_node

        self.verdict = None

        a, store = self.a, self.store
        fsck_wait = 0.0
        if self.coord == "rados":
            fsck_wait = max(0.0, t_kill + a.rados_lease + 1 - time.monotonic())
            # the dead node's leased locks: an opener before they expire shares the store with
            # them (it cannot tell a dead holder from a live one) and is not the recovering first
            time.sleep(fsck_wait)
        t_fsck = time.monotonic()
        rc, out = cl.run("n1", f"{self.lease_env}PARIO_STORE_TIMEOUT={a.lease * 3 + 30} {pario} store fsck --store {store} "
                               f"2>&1 | tail -2", check=False, timeout=a.lease * 4 + 120)
        lease = time.monotonic() - t_kill
        fsck_s = time.monotonic() - t_fsck
        fs_lines = by_node(out).get("n1", [])
        clean = rc == 0 and any(ln.startswith("clean:") for ln in fs_lines)
        rc2, chk = cl.run("n1", f"{self.lease_env}{py} {peer} check {store} {self.path} {t} 2 {self.nblocks} {BS} "
                                f"{self.acks}", check=False, timeout=300)
        line = (by_node(chk).get("n1") or ["?"])[-1]
        parts = line.split()
        ok = (clean and rc2 == 0 and len(parts) == 8 and parts[5] == "0" and parts[7] == "0"
              and lease <= self.bound)
        self.leases.append(lease)
        rep_out = self.res.get("rep", (0, ""))[1].strip().splitlines()[-1:] if self.rt else []
        out = [f"trial {t} ({self.coord}): killed {killed} processes of n3 after {delay:.1f} s; {line}; fsck "
              f"{'clean' if clean else 'NOT CLEAN: ' + ' | '.join(fs_lines)} after {lease:.1f} s "
              f"(the jobs{' and the replicator' if self.rt else ''} ended {t_ended - t_kill:.1f} s after the kill, "
              f"fsck took {fsck_s:.1f} s)"
              f"{'; replicate: ' + rep_out[0] if rep_out else ''} -> {'ok' if ok else 'FAILED'}"]
        if not ok:
            rc3, why = cl.run("n1", f"{py} {peer} explain {store} {self.path} {t} 2 {self.nblocks} {BS} {self.acks}",
                              check=False, timeout=300)
            out += ["    " + ln for ln in by_node(why).get("n1", [])]
        self.verdict = (ok, out)


def _make_store(cl, home, coord, lib, pario, a) -> _Store:
    """The store of one coordination, in its own directory of the CephFS (SSD pool)."""
    from nodes import by_node

    d = cl.pfs / f"nk-{coord}"
    store = d / "store"
    acks = home / f"acks-{coord}"
    acks.mkdir()
    made = ("--system ceda-hdd8 --coord pfs" if coord == "pfs"
            else f"--backend rados --cluster {home / 'ceph'} --coord rados")
    cl.run("n1", f"mkdir -p {d} && setfattr -n ceph.dir.layout.pool -v pario-fs-ssd {d} && "
                 f"{pario} store init {store} {made} >/dev/null")
    system = json.loads("\n".join(by_node(cl.run("n1", f"cat {store}/store.json")[1])["n1"]))["system"]
    env = {"LD_PRELOAD": str(lib), "PARIO_STORE": str(store), "PARIO_SERVE": "all"}
    lease_env = ""
    bound = a.lease + 30            # seconds after the kill the store must be usable again
    if coord == "rados":
        env["PARIO_RADOS_LEASE"] = str(a.rados_lease)
        lease_env = f"PARIO_RADOS_LEASE={a.rados_lease} "
        # the store directory (store.json, the shadow files) stays on the CephFS: an opener
        # also waits for the dead client's session there
        bound = max(a.lease, a.rados_lease) + 30
    return _Store(coord, d, store, acks, env, lease_env, bound, system, a)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--lease", type=int, default=30,
                    help="the file system's session_timeout and session_autoclose (seconds, at least 30)")
    ap.add_argument("--keep", action="store_true", help="leave the cluster up at the end (its MN_DIR is printed)")
    ap.add_argument("--replicate", type=float, default=0.5, help="share of the trials with a replication")
    ap.add_argument("--stop", action="store_true", help="stop at the first failed trial (with --keep: to look at it)")
    ap.add_argument("--coord", choices=("pfs", "rados", "both"), default="pfs",
                    help="the store: 'pfs' on the CephFS (default), 'rados' (the rados plane, coordinated in RADOS) "
                         "or 'both' (one job on each store in every trial, the same node killed under both)")
    ap.add_argument("--rados-lease", type=float, default=10.0, help="with --coord rados: PARIO_RADOS_LEASE (seconds)")
    a = ap.parse_args(argv)

    from ceph_fixture import HDD, SSD, free_port_base
    from helpers import VENV_BIN
    from nodes import Nodes, project_main, skip_reason

    names = ["n1", "n2", "n3"]
    why = skip_reason(names)
    if why:
        print(f"node_kill: skipped: {why}")
        return 0
    rng = random.Random(a.seed)
    home = Path(tempfile.mkdtemp(prefix="pario-nk-"))
    cl = Nodes(home, project_main(), names, free_port_base(HDD + SSD))
    cl.up()
    failed = {"pfs": 0, "rados": 0}
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
        stores = [_make_store(cl, home, coord, lib, pario, a) for coord in
                  (("pfs", "rados") if a.coord == "both" else (a.coord,))]
        for t in range(a.trials):
            delay = rng.uniform(0.0, 3.0)
            for s in stores:
                s.start(t, rng, cl, py, peer, pario, home)
            t0 = time.monotonic()       # the kill a random time after n3's ranks opened their files
            while (not all(s.opened(t) for s in stores) and time.monotonic() - t0 < 30
                   and any(s.jt.is_alive() for s in stores)):
                time.sleep(0.02)
            time.sleep(delay)
            killed = kill_node("n3")
            t_kill = time.monotonic()
            for s in stores:
                s.join()
            t_ended = time.monotonic()
            # every store judged at once (its own fsck from n1 as soon as it may: one store's
            # recovery time never includes the other's check)
            judges = [threading.Thread(target=s.judge, args=(t, cl, py, peer, pario, t_kill, t_ended, killed, delay))
                      for s in stores]
            for j in judges:
                j.start()
            for j in judges:
                j.join()
            bad = False
            for s in stores:
                ok, out = s.verdict or (False, [f"trial {t} ({s.coord}): the judgement failed (above)"])
                print("\n".join(out), flush=True)
                failed[s.coord] += not ok
                bad = bad or not ok
            if bad and a.stop:
                break
            cl._call(["remount"], 180, merge=True)
        for s in stores:
            what = (f"session timeout and autoclose {a.lease} s" if s.coord == "pfs"
                    else f"rados locks {a.rados_lease} s, the store's directory on the CephFS")
            print(f"node_kill ({s.coord}): {len(s.leases)} trials, {failed[s.coord]} failed; store usable again "
                  f"{min(s.leases):.1f}-{max(s.leases):.1f} s after the kill (lease: {what})")
    finally:
        if a.keep:
            print(f"cluster left up: MN_DIR={home}")
        else:
            cl.down()
    return 1 if any(failed.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
