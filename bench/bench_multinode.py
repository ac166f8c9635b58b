"""Served MPI-IO against plain MPI-IO with the ranks on several emulated nodes, side by side
in one run on one CephFS (docs/multinode.md, "What it costs"; issue 26's floors: served reads
and writes at least 0.9x plain, redirected reads at least the single-host ratios).

    python bench/bench_multinode.py [--nodes 2] [--repeat 3] [--block 4m] [--segments 16]
                                    [--pool ssd|hdd] [--keep]

Brings up its own emulated cluster (../shared/tools/multinode.sh through
tests/multinode/nodes.py: namespaces per node, one ceph-fuse per node; root and Ceph needed;
about 15 s), builds IOR (../shared/clients/ior) with the wheel's mpicc, and runs, alternated
in pairs so that drifts of the shared machine hit both sides alike:

- plain   IOR -w -r -C -e (each rank reads another node's blocks) on a file of the CephFS;
- served  the same command, the file in a "pfs" store on the same CephFS directory, created
          with stripes of the transfer size over the profile's servers (striping_unit), so
          that a request is one piece, as on the plain file;
- redirected  IOR -r -C of the served file after `pario replicate` put a full-size CEDA
          replica of it on one server: every read goes to the replica (vs plain reads).

IOR's own bandwidths (MiB/s, open to close, max over ranks) and two ratios served / plain of
every pair: of those bandwidths ("ratio", the open included) and of the I/O phase alone
("phase": IOR's wr/rd seconds, between the open and the close), with both sides' open
seconds beside them.  Every timed run starts cold: each node's ceph-fuse restarted (its
object cache lives in the client: drop_caches leaves it full, and plain reads of a file a
node had read came from it at 1.5 GB/s) and the page cache dropped; an untimed first pair
before.  The last lines: min and median ratios, median open times.  The directory's data pool is the SSD
pool (--pool hdd: the HDD one, 250 IOPS per OSD).  Not a test.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "multinode")]


def _size(s: str) -> int:
    m = re.fullmatch(r"(\d+)([kmg]?)", s.lower())
    if not m:
        raise SystemExit(f"bench_multinode: error: bad size {s!r}")
    return int(m.group(1)) << {"": 0, "k": 10, "m": 20, "g": 30}[m.group(2)]


def _bw(out: str) -> dict[str, dict[str, float]]:
    """IOR's result line per operation (one iteration): its bandwidth (MiB/s, open to close,
    max over ranks) and the seconds of the open, of the transfers (IOR's "wr/rd" column: the
    I/O phase between the open and the close) and of the close."""
    got = {}
    for op in ("write", "read"):
        m = re.search(rf"^{op}\s+([\d.]+)\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s",
                      out, re.M)
        if m:
            got[op] = {"bw": float(m.group(1)), "open": float(m.group(2)), "io": float(m.group(3)),
                       "close": float(m.group(4))}
    return got


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--block", default="4m")
    ap.add_argument("--transfer", default="1m")
    ap.add_argument("--segments", type=int, default=16)
    ap.add_argument("--pool", choices=("ssd", "hdd"), default="ssd")
    ap.add_argument("--keep", action="store_true", help="leave the cluster up (its home is printed)")
    a = ap.parse_args(argv)

    from ceph_fixture import HDD, SSD, free_port_base
    from helpers import IOR_SRC, VENV_BIN
    from nodes import Nodes, project_main, skip_reason

    names = [f"n{i + 1}" for i in range(a.nodes)]
    why = skip_reason(names)
    if why:
        print(f"bench_multinode: cannot run: {why}", file=sys.stderr)
        return 2
    home = Path(tempfile.mkdtemp(prefix="pario-mnb-"))
    cl = Nodes(home, project_main(), names, free_port_base(HDD + SSD))
    cl.up()
    try:
        r = subprocess.run(["bash", str(IOR_SRC / "build.sh"), str(home / "bin"), str(VENV_BIN / "mpicc")],
                           capture_output=True, text=True, timeout=300, check=True)
        ior = r.stdout.strip().splitlines()[-1]
        lib = ROOT / "src" / "pario" / "native" / "libpario_trace.so"
        pario = VENV_BIN / "pario"
        d = cl.pfs / "bench"
        store = d / "store"
        cl.run("n1", f"mkdir -p {d} && setfattr -n ceph.dir.layout.pool -v pario-fs-{a.pool} {d} && "
                     f"{pario} store init {store} --system ceda-hdd8 --coord pfs")
        hosts, np = ",".join(names), a.nodes
        xfer = _size(a.transfer)
        served_env = {"LD_PRELOAD": str(lib), "PARIO_STORE": str(store), "PARIO_SERVE": "all",
                      "PARIO_HINTS": f"striping_unit={xfer}"}
        base = ["-a", "MPIIO", "-C", "-e", "-k", "-b", a.block, "-t", a.transfer, "-s", str(a.segments)]
        size = np * a.segments * _size(a.block)
        print(f"{np} nodes, 1 rank each, IOR {' '.join(base)}, {size >> 20} MiB a run, "
              f"CephFS data pool pario-fs-{a.pool}")
        print(f"{'pair':>4} {'op':>10} {'plain':>8} {'served':>8} {'ratio':>6} {'phase':>6} "
              f"{'open p':>7} {'open s':>7}")
        ratios = {op: {"whole": [], "phase": []} for op in ("write", "read", "redirected")}
        opens = {"plain": [], "served": []}

        def cold():
            """Every run from the file system: each node's ceph-fuse restarted (its object cache
            is in the client process: drop_caches does not empty it) and the page cache dropped."""
            cl._call(["remount"], 180, merge=True)
            subprocess.run(["sh", "-c", "sync; echo 3 > /proc/sys/vm/drop_caches"], check=True)

        def row(k, op, p, s):
            whole, phase = s["bw"] / p["bw"], p["io"] / s["io"]
            ratios[op]["whole"].append(whole)
            ratios[op]["phase"].append(phase)
            opens["plain"].append(p["open"])
            opens["served"].append(s["open"])
            print(f"{k + 1:>4} {op:>10} {p['bw']:>8.1f} {s['bw']:>8.1f} {whole:>6.2f} {phase:>6.2f} "
                  f"{p['open']:>7.3f} {s['open']:>7.3f}", flush=True)

        for name, env in (("warm.plain", None), ("warm.served", served_env)):      # first-time costs, untimed
            cl.mpi(hosts, np, [ior, "-w", "-r", *base, "-o", d / name], env=env, timeout=900)
        for k in range(a.repeat):
            plain, served = d / f"plain.{k}", d / f"served.{k}"
            cold()
            cp = cl.mpi(hosts, np, [ior, "-w", "-r", *base, "-o", plain], timeout=900)
            p = _bw(cp.stdout)
            cold()
            cp = cl.mpi(hosts, np, [ior, "-w", "-r", *base, "-o", served], env=served_env, timeout=900)
            s = _bw(cp.stdout)
            if cp.returncode or "pario: serve" in cp.stdout + cp.stderr or len(s) < 2 or len(p) < 2:
                print((cp.stdout + cp.stderr)[-3000:], file=sys.stderr)
                return 1
            plan = {"pario_plan": 1, "scheme": "ceda", "system": "ceda-hdd8", "layouts": {},
                    "replicas": {str(served): [{"name": f"served.{k}.r1", "layout": {
                        "type": "extents", "extents": [[0, size, "H1", 0, 1]], "default": None}}]}}
            (home / "plan.json").write_text(json.dumps(plan))
            cl.run("n1", f"{pario} replicate {home}/plan.json --store {store} >/dev/null")
            cold()
            cp = cl.mpi(hosts, np, [ior, "-r", *base, "-o", plain], timeout=900)
            pr = _bw(cp.stdout)
            cold()
            cp = cl.mpi(hosts, np, [ior, "-r", *base, "-o", served], env=served_env, timeout=900)
            rr = _bw(cp.stdout)
            if cp.returncode or "read" not in rr or "read" not in pr:
                print((cp.stdout + cp.stderr)[-3000:], file=sys.stderr)
                return 1
            row(k, "write", p["write"], s["write"])
            row(k, "read", p["read"], s["read"])
            row(k, "redirected", pr["read"], rr["read"])
            cl.run("n1", f"rm -f {plain}; {pario} store rm {served} --store {store} >/dev/null 2>&1 || true",
                   check=False)
        for op, v in ratios.items():
            print(f"served/plain {op:>10}: open to close min {min(v['whole']):.2f} median "
                  f"{statistics.median(v['whole']):.2f}; I/O phase min {min(v['phase']):.2f} median "
                  f"{statistics.median(v['phase']):.2f}  (n={len(v['whole'])})")
        print(f"open (s): plain median {statistics.median(opens['plain']):.3f}, served median "
              f"{statistics.median(opens['served']):.3f}")
    finally:
        if a.keep:
            print(f"cluster left up: MN_DIR={home}", file=sys.stderr)
        else:
            cl.down()
    return 0


if __name__ == "__main__":
    sys.exit(main())
