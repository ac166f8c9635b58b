"""The CEDA data path against the same store without replicas: redirected writes, reads served
by a replica, and close (copy-back of dirty replica data).

    python bench/bench_redirect.py [--extents 2048] [--sizes 16k,64k] [--repeat 6]
                                   [--modes exclusive,shared] [--dir DIR]

Per request size S, a fresh store (8 servers, fixed 64 KiB striping) holds two files of
2·N·S bytes with the same bytes, written request by request as an application writes them:
``a`` without replicas, ``b`` with a CEDA partial replica of N extents of S bytes (the even
S-slots; the replica's extents spread over the 8 servers, copied by the replicator).
(Writing the files in one call instead makes the kernel cache them in large folios, which
serve a 16 KiB ``preadv`` ~10 % faster than the small ones a request-sized write or the
replicator's ``copy_file_range`` leave — measured with raw ``preadv`` on the same offsets —
so a/b would compare page-cache layouts rather than the store; ``WRITE_WHOLE`` switches
it.)
The requests are the N extents in one random order, the same for both files.  Each
repetition runs, interleaved in chunks of 64 requests (the order of a and b alternating
per chunk, so drift and other load hit both alike):

* clean writes: every extent of b is CLEAN before its write, so every write to b records a
  flag change (CLEAN → DIRTY in the RMT journal) and goes to the replica; a gets the same
  writes without any RMT entry;
* dirty writes: the same writes again (b's extents DIRTY already: no record);
* reads: the same offsets read back (b: served by the replica);
* close: b's close copies the N dirty extents back to the original (flush: copy, fsync,
  flags CLEAN) — compared with copying the same bytes once, by hand: ``pread`` from the
  replica's data files, ``pwrite`` into a scratch file in the same server directory, one
  fsync per scratch file (the least a durable copy-back must do).

Ratios: throughput of b over a (≥ 1: b is faster), per chunk, median over the chunks of a
repetition; the table gives the median [min–max] over repetitions (the first repetition
warms up and is dropped).  close/copy is time over time (≤ 1: close is faster than the
hand copy).  Not a test: no assertions; the issue's targets are printed beside the ratios.
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

CHUNK = 64
WRITE_WHOLE = False
TARGETS = {"clean write": 0.8, "dirty write": 0.9, "read": 0.9}


def build(root: Path, n: int, size: int, seed: int = 0):
    """Store with files a and b (b: a partial replica of n extents of ``size`` bytes)."""
    from pario.layout import ExtentMap
    from pario.store import Store, init_store
    from pario.store.replicator import ReplicaSpec, Replicator

    init_store(root, "ceda-hdd8")
    data = np.random.default_rng(seed).integers(0, 256, 2 * n * size, dtype=np.uint8).tobytes()
    offs = np.arange(n, dtype=np.int64) * 2 * size
    with Store(root) as st:
        for name in ("a", "b"):
            st.create(name, "fixed:64k")
            with st.open(name) as f:
                if WRITE_WHOLE:
                    f.write(0, data)
                else:                   # as the application wrote it: request by request
                    mv = memoryview(data)
                    for x in range(0, len(data), size):
                        f.write(x, mv[x:x + size])
        server = np.arange(n) % 8
        local = (np.arange(n) // 8) * size
        em = ExtentMap(offs, np.full(n, size), server, local, np.ones(n, dtype=np.int64))
        Replicator(st, [ReplicaSpec("b", "r", em)]).run()
        lay = st.stat(".replica/b/r").layout
        rfid = st.rmt.fid(".replica/b/r")
        dirs = st.backend.server_dirs
    # where each extent's replica bytes are: (data file path, local offset)
    where = [(dirs[int(lay.server[i])] / f"{rfid:08d}.{int(lay.datafile[i])}", int(lay.local[i])) for i in range(n)]
    return offs, where


def copy_once(where, size: int, scratch_dirs) -> float:
    """Seconds to copy the extents' bytes once by hand (pread, pwrite, fsync per scratch file)."""
    fds, outs = {}, {}
    buf = bytearray(size)
    mv = memoryview(buf)
    t0 = time.perf_counter()
    pos = {}
    for path, local in where:
        fd = fds.get(path)
        if fd is None:
            fd = fds[path] = os.open(path, os.O_RDONLY)
            out = path.parent / f"scratch-{path.name}"
            outs[path] = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            pos[path] = 0
        os.preadv(fd, [mv], local)
        os.pwrite(outs[path], mv, pos[path])
        pos[path] += size
    for fd in outs.values():
        os.fsync(fd)
    dt = time.perf_counter() - t0
    for fd in list(fds.values()) + list(outs.values()):
        os.close(fd)
    for path in fds:
        (path.parent / f"scratch-{path.name}").unlink(missing_ok=True)
    return dt


def run_size(base: Path, n: int, size: int, repeat: int, shared: bool) -> dict:
    from pario.store import Store

    root = base / f"s{size}-{'sh' if shared else 'ex'}"
    offs, where = build(root, n, size)
    order = np.random.default_rng(1).permutation(n)
    reqs = [int(offs[i]) for i in order]
    chunks = [reqs[i:i + CHUNK] for i in range(0, n, CHUNK)]
    payload = memoryview(np.random.default_rng(2).integers(0, 256, size, dtype=np.uint8).tobytes())
    rbuf = memoryview(bytearray(size))
    res = {k: [] for k in ("clean write", "dirty write", "read", "close/copy", "close_s", "copy_s")}
    st = Store(root, shared=shared)
    try:
        fa = st.open("a")
        for rep in range(repeat + 1):
            fb = st.open("b")
            assert not st.rmt.core.entries(fb.fid, True), "b must start CLEAN"
            passes = {}
            for name, op in (("clean write", "w"), ("dirty write", "w"), ("read", "r")):
                ratios = []
                for c, ps in enumerate(chunks):
                    t = {}
                    for f in ((fa, fb) if (rep + c) % 2 else (fb, fa)):
                        t0 = time.perf_counter()
                        if op == "w":
                            for p in ps:
                                f.write(p, payload)
                        else:
                            for p in ps:
                                f.readinto(p, rbuf)
                        t[f.name] = time.perf_counter() - t0
                    ratios.append(t["a"] / t["b"])
                passes[name] = statistics.median(ratios)
            dirty = len(st.rmt.core.entries(fb.fid, True))
            t0 = time.perf_counter()
            fb.close()                              # flush: the dirty extents back to the original
            t_close = time.perf_counter() - t0
            t_copy = copy_once(where, size, None)
            if rep == 0:
                continue
            assert dirty > 0
            for k, v in passes.items():
                res[k].append(v)
            res["close/copy"].append(t_close / t_copy)
            res["close_s"].append(t_close)
            res["copy_s"].append(t_copy)
        fa.close()
    finally:
        st.close()
        shutil.rmtree(root)
    return res


def fmt(xs) -> str:
    return f"{statistics.median(xs):5.2f} [{min(xs):.2f}-{max(xs):.2f}]"


def main(argv=None) -> int:
    from pario.units import parse_size

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--extents", type=int, default=2048)
    ap.add_argument("--sizes", default="16k,64k")
    ap.add_argument("--repeat", type=int, default=6)
    ap.add_argument("--modes", default="exclusive,shared")
    ap.add_argument("--dir", default=None)
    a = ap.parse_args(argv)
    base = Path(a.dir or tempfile.mkdtemp(prefix="pario-bench-redirect-"))
    base.mkdir(parents=True, exist_ok=True)
    print(f"CEDA data path bench: {a.extents} replica extents per file, {a.repeat} repetitions (+1 warm-up), "
          f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} CPUs, dir {base}")
    print(f"{'mode':>9} {'size':>5} {'clean write b/a':>18} {'dirty write b/a':>18} {'read b/a':>18} "
          f"{'close/copy':>18} {'close ms':>9} {'copy ms':>8} {'load':>5}")
    try:
        for mode in a.modes.split(","):
            for s in a.sizes.split(","):
                size = parse_size(s)
                l0 = os.getloadavg()[0]
                r = run_size(base, a.extents, size, a.repeat, mode.strip() == "shared")
                print(f"{mode:>9} {s:>5} {fmt(r['clean write']):>18} {fmt(r['dirty write']):>18} {fmt(r['read']):>18} "
                      f"{fmt(r['close/copy']):>18} {1e3 * statistics.median(r['close_s']):9.1f} "
                      f"{1e3 * statistics.median(r['copy_s']):8.1f} {(l0 + os.getloadavg()[0]) / 2:5.1f}", flush=True)
    finally:
        if not a.dir:
            shutil.rmtree(base, ignore_errors=True)
    print(f"targets (issue 13): clean write ≥ {TARGETS['clean write']}, dirty write ≥ {TARGETS['dirty write']}, "
          f"read ≥ {TARGETS['read']} (b/a: throughput of the replicated file over the same file without "
          "replicas), close/copy ≤ 2")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
