"""Replication throughput: the replicator against ``cp`` of the same bytes between the same
directories.

    python bench/bench_replicate.py [--size 1g] [--repeat 5] [--dir DIR] [--shared]

A store of 8 servers (directories on this machine's disk) holds one file of SIZE bytes
(fixed 1 MiB striping, so each server's data file holds SIZE/8).  Each repetition runs,
in rotating order:

* ``cp``: ``cp`` of each server's data file to a new file in the same server directory
  (SIZE bytes in all; GNU cp copies with ``copy_file_range``);
* ``cp+fsync``: the same followed by an fsync of every copy (``sync FILE…``): the durability
  the replicator gives before it publishes a replica (docs/store.md);
* ``full``: the replicator copying a full replica of the file (1 MiB stripes, another
  server order), as ``pario replicate`` does, in this process (no interpreter start-up);
* ``partial``: a CEDA partial replica of 1,024 extents covering half the file (every other
  SIZE/2048-byte piece), i.e. SIZE/2 bytes.

Between repetitions (untimed) the replicas are dropped and the copies deleted; the page
cache holds the original throughout (warm: the store's overhead, the strict case), unless
``--drop-cache`` evicts the data files before every timed step.  Reported: MB/s, median
[min–max] over repetitions, and each replicator run's throughput over the cp and cp+fsync of
the same repetition.  Not a test.  Target (issue 13): ≥ 0.8 of cp.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np


def drop(paths) -> None:
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def main(argv=None) -> int:
    from pario.layout import ExtentMap, Striped
    from pario.store import Store, init_store
    from pario.store.replicator import ReplicaSpec, Replicator
    from pario.units import parse_size

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="1g")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--shared", action="store_true", help="open the store shared (range locks, journal lock)")
    ap.add_argument("--drop-cache", action="store_true")
    a = ap.parse_args(argv)
    size = parse_size(a.size)
    base = Path(a.dir or tempfile.mkdtemp(prefix="pario-bench-replicate-"))
    root = base / "store"
    init_store(root, "ceda-hdd8")
    st = Store(root, shared=a.shared)
    st.create("f", "fixed:1m")
    chunk = 16 << 20
    with st.open("f") as f:
        for pos in range(0, size, chunk):
            n = min(chunk, size - pos)
            f.write(pos, np.random.default_rng(pos).integers(0, 256, n, dtype=np.uint8).tobytes())
    fid = st.rmt.fid("f")
    srcs = [d / f"{fid:08d}.0" for d in st.backend.server_dirs]
    k = 1024
    piece = size // (2 * k)
    part = ExtentMap(np.arange(k, dtype=np.int64) * 2 * piece, np.full(k, piece), np.arange(k) % 8,
                     (np.arange(k) // 8) * piece, np.ones(k, dtype=np.int64))
    specs = {"full": (ReplicaSpec("f", "full", Striped.fixed(1 << 20, list(range(7, -1, -1)))), size),
             "partial": (ReplicaSpec("f", "part", part), k * piece)}

    def run_cp(sync: bool) -> float:
        outs = [p.with_name(p.name + ".cp") for p in srcs]
        t0 = time.perf_counter()
        for s, o in zip(srcs, outs):
            subprocess.run(["cp", str(s), str(o)], check=True)
        if sync:
            subprocess.run(["sync", *map(str, outs)], check=True)
        dt = time.perf_counter() - t0
        for o in outs:
            o.unlink()
        return dt

    def run_rep(kind: str) -> float:
        spec, _ = specs[kind]
        t0 = time.perf_counter()
        r = Replicator(st, [spec]).run()
        dt = time.perf_counter() - t0
        assert r.done == specs[kind][1]
        if st.shared:                       # delete_replica needs the store alone
            st.close()
            with Store(root) as s2:
                s2.delete_replica(spec.r_file)
        else:
            st.delete_replica(spec.r_file)
        return dt

    steps = {"cp": lambda: run_cp(False), "cp+fsync": lambda: run_cp(True),
             "full": lambda: run_rep("full"), "partial": lambda: run_rep("partial")}
    nbytes = {"cp": size, "cp+fsync": size, "full": size, "partial": specs["partial"][1]}
    res = {k_: [] for k_ in steps}
    rel = {f"{r}/{c}": [] for r in ("full", "partial") for c in ("cp", "cp+fsync")}
    print(f"replication bench: {size >> 20} MiB file on 8 server directories ({base}), "
          f"{'shared' if a.shared else 'exclusive'} store, load average {os.getloadavg()[0]:.1f}")
    order = list(steps)
    try:
        for rep in range(a.repeat + 1):
            got = {}
            for name in order[rep % 4:] + order[:rep % 4]:
                if a.drop_cache:
                    drop(srcs)
                if st.shared and st.closed:
                    st = Store(root, shared=True)
                got[name] = nbytes[name] / steps[name]() / 1e6
            if rep == 0:
                continue                       # warm-up
            for name, v in got.items():
                res[name].append(v)
            for r in ("full", "partial"):
                for c in ("cp", "cp+fsync"):
                    rel[f"{r}/{c}"].append(got[r] / got[c])
    finally:
        if not st.closed:
            st.close()
        if not a.dir:
            shutil.rmtree(base, ignore_errors=True)

    def f(xs, unit=""):
        return f"{statistics.median(xs):7.2f}{unit} [{min(xs):.2f}-{max(xs):.2f}]"
    for name, v in res.items():
        print(f"  {name:>9}: {f(v)} MB/s")
    for name, v in rel.items():
        print(f"  {name:>17}: {f(v)}")
    print(f"load average at the end {os.getloadavg()[0]:.1f}; target (issue 13): replicator ≥ 0.8 × cp")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
