"""Store throughput vs plain file I/O on the same directories, and redirection overhead.

    python bench/bench_store.py [--dir DIR] [--size 256m] [--repeat 9] [--drop-cache] [--modes exclusive,shared]

Measures in one run, for 64 KiB, 1 MiB and 16 MiB random requests over half the file:

* plain:      os.preadv/os.pwrite of one flat file in the store's server-0 directory
* store:      the same requests through Store/File (fixed 1 MiB stripes over 8 servers)
* miss:       the same requests through a file whose RMT has 2,000 replica extents, none of
              which the requests hit (CEDA Fig. 17: the lookup overhead)
* hit:        a file fully covered by a partial (extent-map) replica: every request is served
              by the replica (reads) or goes to it and keeps it DIRTY (writes; flushed and
              compacted after each request size, untimed)

Methodology: the variants run interleaved inside each repetition (rotating their order, so
drift and background load hit all alike); every ratio is taken *within* a repetition
(paired) and the report gives the median and the spread (min–max) over repetitions, plus
the ratios of the best times ("best": least disturbed by other load on a shared machine).
Page cache warm by default, so the ratios show the store's CPU overhead (the strictest
case); ``--drop-cache`` calls ``posix_fadvise(DONTNEED)`` on every data file (after an
fsync) before each timed run, so reads come from the device.  ``--modes`` runs the store
exclusive (one process) and/or shared (``Store(shared=True)``: the multi-process mode used
under MPI: per-write record lock, generation check per lookup).

Targets (issue 5): store ≥ 90 % of plain for large requests, miss overhead ≤ 3 % at 64 KiB.
Not a test: no assertions.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np


def _drop(paths) -> None:
    for p in paths:
        try:
            fd = os.open(p, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def _data_files(root: Path, plain: Path) -> list[Path]:
    return [plain] + [p for p in (root / "servers").rglob("*") if p.is_file() and p != plain]


def _build(root: Path, size: int, data: bytes) -> Path:
    from pario.layout import ExtentMap
    from pario.store import Store, init_store
    from pario.store.replicator import ReplicaSpec, Replicator

    init_store(root, "ceda-hdd8")
    plain = root / "servers" / "H0" / "plain.bin"
    with open(plain, "wb") as fh:
        fh.write(data)
    with Store(root) as st:
        for n in ("f", "g", "h"):
            st.create(n, "fixed:1m")
            with st.open(n) as f:
                f.write(0, data)
        # g: a CEDA replica of many small extents in the upper half; requests go to the lower half
        k = 2000
        offs = size // 2 + np.arange(k, dtype=np.int64) * (size // 2 // k)
        em = ExtentMap(offs, np.full(k, 4096, dtype=np.int64), np.full(k, 3), np.arange(k) * 4096,
                       np.ones(k, dtype=np.int64))
        Replicator(st, [ReplicaSpec("g", "r1", em)]).run()
        # h: fully covered by a partial replica (every request served by the replica)
        full = ExtentMap(np.array([0]), np.array([size]), np.array([5]), np.array([0]), np.array([1]))
        Replicator(st, [ReplicaSpec("h", "r1", full)]).run()
    return plain


def _fmt(xs, scale=1.0, pct=False) -> str:
    xs = [x * scale for x in xs]
    m = statistics.median(xs)
    if pct:
        return f"{m:+6.1f}% [{min(xs):+.1f},{max(xs):+.1f}]"
    return f"{m:6.2f} [{min(xs):.2f}-{max(xs):.2f}]"


def run_mode(root: Path, plain: Path, size: int, mode: str, repeat: int, drop: bool) -> None:
    from pario.store import Store

    st = Store(root, shared=(mode == "shared"))
    files = {n: st.open(n) for n in ("f", "g", "h")}
    fd = os.open(plain, os.O_RDWR)
    dfiles = _data_files(root, plain)
    print(f"\n[{mode} store]  median [min-max] over {repeat} interleaved repetitions"
          f"{', page cache dropped before each run' if drop else ', page cache warm'}")
    print(f"{'request':>8} {'op':>5} {'plain MB/s':>16} {'store/plain':>18} {'miss overhead':>22} "
          f"{'hit/plain':>18} {'best: s/p':>9} {'miss':>7} {'µs/req store':>12} {'µs/req hit':>10}")
    for req in (64 << 10, 1 << 20, 16 << 20):
        lo = size // 2
        count = min(lo // req, 2048)
        positions = (np.random.default_rng(1).permutation(lo // req)[:count] * req).tolist()
        mv = memoryview(bytearray(req))
        nbytes = count * req
        for op in ("read", "write"):
            if op == "read":
                runs = {"plain": lambda: [os.preadv(fd, [mv], p) for p in positions]}
                for n in ("f", "g", "h"):
                    runs[n] = (lambda f: lambda: [f.readinto(p, mv) for p in positions])(files[n])
            else:
                runs = {"plain": lambda: [os.pwrite(fd, mv, p) for p in positions]}
                for n in ("f", "g", "h"):
                    runs[n] = (lambda f: lambda: [f.write(p, mv) for p in positions])(files[n])
            order = list(runs)
            times = {k: [] for k in runs}
            for r in range(repeat + 1):
                for k in order[r % len(order):] + order[:r % len(order)]:
                    if drop:
                        _drop(dfiles)
                    t0 = time.perf_counter()
                    runs[k]()
                    dt = time.perf_counter() - t0
                    if r:                      # repetition 0 warms up (and makes h's range DIRTY)
                        times[k].append(dt)
            if op == "write":       # back to one clean replica entry for the next request size
                files["h"].flush()
            tp, ts, tg, th = (times[k] for k in ("plain", "f", "g", "h"))
            print(f"{req >> 10:>7}K {op:>5} "
                  f"{statistics.median([nbytes / t / 1e6 for t in tp]):7.0f} "
                  f"[{min(nbytes / t / 1e6 for t in tp):.0f}-{max(nbytes / t / 1e6 for t in tp):.0f}] "
                  f"{_fmt([a / b for a, b in zip(tp, ts)]):>18} "
                  f"{_fmt([g / s - 1 for g, s in zip(tg, ts)], 100, pct=True):>22} "
                  f"{_fmt([a / b for a, b in zip(tp, th)]):>18} "
                  f"{min(tp) / min(ts):9.2f} {100 * (min(tg) / min(ts) - 1):+6.1f}% "
                  f"{statistics.median(ts) / count * 1e6:12.1f} {statistics.median(th) / count * 1e6:10.1f}")
    for f in files.values():
        f.close()
    os.close(fd)
    st.close()


def main(argv=None) -> int:
    from pario.units import parse_size

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=None)
    ap.add_argument("--size", default="256m")
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--drop-cache", action="store_true")
    ap.add_argument("--modes", default="exclusive,shared")
    a = ap.parse_args(argv)
    size = parse_size(a.size)
    base = Path(a.dir or tempfile.mkdtemp(prefix="pario-bench-"))
    root = base / "store"
    if root.exists():
        shutil.rmtree(root)
    data = np.random.default_rng(0).integers(0, 256, size, dtype=np.uint8).tobytes()
    plain = _build(root, size, data)
    del data
    print(f"store bench: {size >> 20} MiB files, fixed 1 MiB stripes × 8 servers, dir {base}, "
          f"load average {os.getloadavg()[0]:.1f}")
    try:
        for mode in a.modes.split(","):
            run_mode(root, plain, size, mode.strip(), a.repeat, a.drop_cache)
    finally:
        if not a.dir:
            shutil.rmtree(base)
    print("\nstore/plain, hit/plain = throughput ratios (paired per repetition); miss overhead = time of "
          "the no-hit redirected file vs the store file without replicas; best = ratio of the fastest runs; "
          "µs/req = median time per request")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
