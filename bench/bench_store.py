"""Store throughput vs plain file I/O on the same directories, and redirection overhead.

    python bench/bench_store.py [--dir DIR] [--size 256m] [--repeat 10] [--drop-cache] [--modes exclusive,shared]
                                [--sizes 64k,1m,16m] [--ops read,write]

Measures in one run, for 64 KiB, 1 MiB and 16 MiB random requests (request-aligned: the
file is cut into request-sized slots and the requests go to the even slots, at most 2,048):

* plain:  os.preadv/os.pwrite of one flat file in the store's server-0 directory
* store:  the same requests through Store/File (fixed 1 MiB stripes over 8 servers) of a
          file whose RMT has no entries
* miss:   the same requests through a file whose RMT has 2,000 CEDA replica extents
          (4 KiB each, spread over the odd slots: *between* the requests, every request has
          entries right before and after it; one replica per request size, only the one
          of the current size is in the RMT), none of which a request hits: the lookup
          overhead of CEDA seed 000 §6.4.1, Fig. 17 (stricter than the paper's, which
          measured a file with no replicas at all)
* hit:    a file fully covered by a partial (extent-map) replica: every request is served by
          the replica (reads) or goes to it and keeps it DIRTY (writes; flushed and
          compacted after each request size, untimed)

Fair lookup measurement.  Two files ``f`` and ``g`` are built identically (same layout,
same bytes, written the same way, each with its own replica data file) and swap roles
half-way: in the first half of the repetitions ``f`` has the 2,000 RMT entries and ``g``
none, in the second half the reverse (entries removed and re-added through the RMT API,
untimed; once per half because re-adding 2,000 entries takes seconds).  So the "miss
overhead" compares the *same requests on the same files* with and without entries: for
repetition i of the first half and i of the second, ``L = sqrt(r_1 · r_2)`` with
``r = t(with entries) / t(without)`` (each paired within its repetition) cancels any
difference between the two files themselves (page-cache placement of their pages), and
``F = sqrt((t_f/t_g)_1 · (t_f/t_g)_2)`` measures that difference ("file bias").  Before,
``g`` always had the entries and ``f`` never, and the entries sat in the upper half of the
file while the requests went to the lower half: file placement and lookup were
confounded, and no request ever fell between entries.

Methodology: inside each repetition the variants run interleaved in chunks of about 4 MiB
of requests (64 × 64 KiB, 4 × 1 MiB, 1 × 16 MiB), rotating their order per chunk, so drift
and other processes' load hit all variants alike.  Every ratio is paired twice: per chunk
(variants back to back, a few ms apart), and a repetition's ratio is the median of its
chunk ratios (robust to a burst of other load hitting one chunk); the report gives the
median and the spread (min–max) of the repetitions' ratios (of the role pairs' for the
miss overhead), plus the ratio of the best repetition times ("best": least disturbed by
other load on a shared machine).  The load average is printed
per line.  Page cache warm by default, so the ratios show the store's CPU overhead (the
strictest case); ``--drop-cache`` calls ``posix_fadvise(DONTNEED)`` on every data file
(after an fsync) before each timed chunk, so reads come from the device.  ``--modes`` runs
the store exclusive (one process) and/or shared (``Store(shared=True)``: the multi-process
mode used under MPI: per-write record lock, generation check per lookup).

Large requests spanning several servers (here 16 MiB = 8 × 2 MiB) are issued to the
servers concurrently by the local backend (a small thread pool, ``pario.store.local``);
requests below 1 MiB or on one server run in the calling thread.

Targets (issue 5): store ≥ 90 % of plain for large requests, miss overhead ≤ 3 % at 64 KiB.
Not a test: no assertions.

Measured (2-core VM, other sessions' load; ``--size 256m --repeat 10``, medians [min–max];
docs/store.md "Speed" has all cells).  Warm, two runs at load average 1.0–1.9:
64 KiB read miss overhead +2.8 % [+2.0, +3.1] and +2.1 % [−1.7, +4.9] exclusive, +2.5 %
[+0.7, +6.7] and +3.7 % [+2.4, +4.8] shared (100–350 ns per request); 64 KiB write +0.6 …
+1.1 %; store/plain 0.94–0.96 (1 MiB read), 0.90–1.14 (1 MiB write), 0.96–1.32 (16 MiB
read), 0.91–1.41 (16 MiB write).  ``--drop-cache`` (load 1.0–1.5): 16 MiB read 1.03 / 0.82
(exclusive / shared) in the full run, 0.96–1.01 in two 16 MiB-only runs.  The same bench
on the code before (old no-hit bisect, no per-server concurrency): 64 KiB read miss
overhead +15.0 % / +12.9 %, cold 16 MiB read 0.76–0.84.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

CHUNK_BYTES = 4 << 20
N_EXTENTS = 2000


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


def _extents(size: int, req: int):
    """2,000 4 KiB extents interleaved with ``req``-sized requests: the file is cut into
    ``req``-sized slots, requests go to the even slots, the extents are spread evenly over the
    odd slots (one in the middle of each odd 64 KiB slot; 16 per odd 1 MiB slot, one every
    64 KiB; 250 per odd 16 MiB slot).  So every request has entries right before and after it."""
    odd = range(1, size // req, 2)
    per = -(-N_EXTENTS // len(odd))
    step = req // per
    pad = max(0, (step - 4096) // 2) // 4096 * 4096
    offs = np.array([s * req + i * step + pad for s in odd for i in range(per)], dtype=np.int64)
    offs = offs[np.round(np.linspace(0, len(offs) - 1, min(N_EXTENTS, len(offs)))).astype(np.int64)]
    return offs, np.full(len(offs), 4096, dtype=np.int64)


def _build(root: Path, size: int, data: bytes, reqs) -> Path:
    """Files f, g (identical; one CEDA replica ``r<req>`` per request size, see :func:`_extents`)
    and h (fully covered by one partial replica)."""
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
        specs = []
        for req in reqs:
            offs, lens = _extents(size, req)
            k = len(offs)
            em = ExtentMap(offs, lens, np.full(k, 3), np.arange(k) * 4096, np.ones(k, dtype=np.int64))
            specs += [ReplicaSpec("f", f"r{req}", em), ReplicaSpec("g", f"r{req}", em)]
        Replicator(st, specs).run()
        # h: fully covered by a partial replica (every request served by the replica)
        full = ExtentMap(np.array([0]), np.array([size]), np.array([5]), np.array([0]), np.array([1]))
        Replicator(st, [ReplicaSpec("h", "r1", full)]).run()
    return plain


class Roles:
    """Which replica of f or g is in the RMT (the other file has none), switched through the
    RMT API (unregister; register + add), untimed."""

    def __init__(self, st):
        self.st = st
        self.rows: dict[str, list] = {}
        self.reg: dict[str, dict] = {}
        rows = st.rmt.all_rows()
        for n in ("f", "g"):
            for r in st.rmt.replicas(n):
                self.reg[r["r_file"]] = r
                self.rows[r["r_file"]] = [(o, ro, ln) for _id, o_file, o, r_file, ro, ln, _flag in rows
                                          if o_file == n and r_file == r["r_file"]]
        self.on = set(self.reg)

    def _unregister(self, r_file: str) -> None:
        if r_file in self.on:
            self.st.rmt.unregister(r_file)
            self.on.discard(r_file)

    def _register(self, r_file: str) -> None:
        reg = self.reg[r_file]
        self.st.rmt.register(r_file, reg["o_file"], reg["name"], reg["mode"], reg["route"])
        o, r, ln = zip(*self.rows[r_file])
        self.st.rmt.add(reg["o_file"], r_file, o, r, ln)
        self.on.add(r_file)

    def restore(self) -> None:
        """Every replica registered again (before the store closes: the next lone opener's
        recovery removes replica files that no registration owns)."""
        for r_file in self.reg:
            if r_file not in self.on:
                self._register(r_file)

    def give(self, n: str, req: int) -> None:
        """Only file ``n``'s replica for request size ``req`` is in the RMT."""
        from pario.store.root import replica_name

        want = replica_name(n, f"r{req}")
        for r_file in list(self.on):
            if r_file != want:
                self._unregister(r_file)
        if want not in self.on:
            self._register(want)
        other = "g" if n == "f" else "f"
        assert self.st.rmt.entries(n).n == len(self.rows[want]) and self.st.rmt.entries(other).n == 0



def _fmt(xs, scale=1.0, pct=False) -> str:
    xs = [x * scale for x in xs]
    m = statistics.median(xs)
    if pct:
        return f"{m:+5.1f}% [{min(xs):+.1f},{max(xs):+.1f}]"
    return f"{m:5.2f} [{min(xs):.2f}-{max(xs):.2f}]"


def run_mode(root: Path, plain: Path, size: int, mode: str, repeat: int, drop: bool, reqs, ops, roles) -> None:
    from pario.store import Store

    st = Store(root, shared=(mode == "shared"))
    roles.st = st
    files = {n: st.open(n) for n in ("f", "g", "h")}
    fd = os.open(plain, os.O_RDWR)
    dfiles = _data_files(root, plain)
    print(f"\n[{mode} store]  median [min-max] over {repeat} interleaved repetitions (miss: over "
          f"{repeat // 2} role pairs){', page cache dropped before each chunk' if drop else ', page cache warm'}")
    print(f"{'request':>8} {'op':>5} {'load':>4} {'plain MB/s':>17} {'store/plain':>17} {'miss overhead':>21} "
          f"{'ns/req':>6} {'file bias':>9} {'hit/plain':>17} {'best s/p':>8} {'µs/req store':>12} {'hit':>7}")
    for req in reqs:
        slots = list(range(0, size - req + 1, 2 * req))   # the even slots (extents: in the odd ones)
        count = min(len(slots), 2048)
        positions = [slots[i] for i in np.random.default_rng(1).permutation(len(slots))[:count].tolist()]
        per_chunk = max(1, CHUNK_BYTES // req)
        chunks = [positions[i:i + per_chunk] for i in range(0, count, per_chunk)]
        mv = memoryview(bytearray(req))
        nbytes = count * req
        for op in ops:
            def mk(name):
                if name == "plain":
                    if op == "read":
                        return lambda ps: [os.preadv(fd, [mv], p) for p in ps]
                    return lambda ps: [os.pwrite(fd, mv, p) for p in ps]
                f = files[name]
                if op == "read":
                    return lambda ps: [f.readinto(p, mv) for p in ps]
                return lambda ps: [f.write(p, mv) for p in ps]
            runs = {k: mk(k) for k in ("plain", "f", "g", "h")}
            order = list(runs)
            rec = {k: [] for k in ("plain", "with", "without", "h", "f", "g")}
            load0 = os.getloadavg()[0]
            half = repeat // 2
            for r in range(repeat + 1):
                miss = "f" if r <= half else "g"     # first half: f has the entries, then g
                roles.give(miss, req)
                t = {k: [] for k in runs}          # per chunk
                for c, ps in enumerate(chunks):
                    k0 = (r + c) % len(order)
                    for k in order[k0:] + order[:k0]:
                        if drop:
                            _drop(dfiles)
                        t0 = time.perf_counter()
                        runs[k](ps)
                        t[k].append(time.perf_counter() - t0)
                if r == 0:                      # repetition 0 warms up (and makes h's range DIRTY)
                    continue
                other = "g" if miss == "f" else "f"
                for key, src in (("plain", "plain"), ("h", "h"), ("with", miss), ("without", other),
                                 ("f", "f"), ("g", "g")):
                    rec[key].append(t[src])
            if op == "write":       # back to one clean replica entry for the next request size
                files["h"].flush()
            tot = {k: [sum(x) for x in v] for k, v in rec.items()}
            tp, to, th = tot["plain"], tot["without"], tot["h"]

            def paired(a, b):
                """Per repetition: the median over its chunks of the chunk-paired ratio a/b."""
                return [statistics.median(x / y for x, y in zip(ra, rb)) for ra, rb in zip(rec[a], rec[b])]
            ratio = paired("with", "without")
            fg = paired("f", "g")
            # pair repetition i of the first half (f holds the entries) with i of the second (g does)
            lookup = [math.sqrt(ratio[i] * ratio[i + half]) - 1 for i in range(half)]
            bias = [math.sqrt(fg[i] * fg[i + half]) - 1 for i in range(half)]
            ns_req = statistics.median([statistics.median(
                (x - y) / len(ps) * 1e9 for x, y, ps in zip(ra, rb, chunks)) for ra, rb in zip(rec["with"], rec["without"])])
            load = (load0 + os.getloadavg()[0]) / 2
            print(f"{req >> 10:>7}K {op:>5} {load:4.1f} "
                  f"{statistics.median([nbytes / t / 1e6 for t in tp]):6.0f} "
                  f"[{min(nbytes / t / 1e6 for t in tp):.0f}-{max(nbytes / t / 1e6 for t in tp):.0f}] "
                  f"{_fmt(paired('plain', 'without')):>17} "
                  f"{_fmt(lookup, 100, pct=True):>21} {ns_req:6.0f} "
                  f"{100 * statistics.median(bias):+8.1f}% "
                  f"{_fmt(paired('plain', 'h')):>17} "
                  f"{min(tp) / min(to):8.2f} "
                  f"{statistics.median(to) / count * 1e6:12.1f} {statistics.median(th) / count * 1e6:7.1f}")
    for f in files.values():
        f.close()
    os.close(fd)
    roles.restore()
    st.close()


def main(argv=None) -> int:
    from pario.units import parse_size

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=None)
    ap.add_argument("--size", default="256m")
    ap.add_argument("--repeat", type=int, default=10, help="repetitions (even: role pairs for the miss overhead)")
    ap.add_argument("--drop-cache", action="store_true")
    ap.add_argument("--modes", default="exclusive,shared")
    ap.add_argument("--sizes", default="64k,1m,16m", help="request sizes")
    ap.add_argument("--ops", default="read,write")
    a = ap.parse_args(argv)
    size = parse_size(a.size)
    reqs = [parse_size(s) for s in a.sizes.split(",")]
    repeat = max(2, a.repeat + (a.repeat % 2))
    base = Path(a.dir or tempfile.mkdtemp(prefix="pario-bench-"))
    root = base / "store"
    if root.exists():
        shutil.rmtree(root)
    data = np.random.default_rng(0).integers(0, 256, size, dtype=np.uint8).tobytes()
    plain = _build(root, size, data, reqs)
    del data
    print(f"store bench: {size >> 20} MiB files, fixed 1 MiB stripes × 8 servers, dir {base}, "
          f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} CPUs")
    from pario.store import Store

    with Store(root) as st:
        roles = Roles(st)            # the replicas' RMT rows, kept to switch them in and out
    try:
        for mode in a.modes.split(","):
            run_mode(root, plain, size, mode.strip(), repeat, a.drop_cache, reqs,
                     [o.strip() for o in a.ops.split(",")], roles)
    finally:
        if not a.dir:
            shutil.rmtree(base)
    print("\nstore/plain, hit/plain = throughput ratios (paired per repetition); miss overhead = time with "
          "2,000 RMT entries vs without, same files, roles swapped half-way (sqrt of a pair's ratios); "
          "ns/req = median extra time per request with entries; file bias = f vs g themselves (not the lookup); "
          "best s/p = ratio of the fastest runs; µs/req = median time per request (store without entries, hit)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
