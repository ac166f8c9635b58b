"""Bandwidth of pario's two-phase collective I/O vs MPICH's (mpi4py MPI.File), same files, same run.

    .venv/bin/mpiexec -n 4 .venv/bin/python bench/bench_mpi.py [--dir DIR] [--mib 64] [--xfer 64K] [--reps 3]

1. Collective: IOR-like interleaved segments (each rank writes one transfer per segment,
   ranks interleaved), write_at_all then read_at_all, romio_cb_write/read=enable (two-phase
   in both), pario order romcio on a plain file.  One warm-up call each, then --reps
   repetitions interleaved (MPICH/pario, alternating which goes first).  Prints the median
   (and best) MB/s of each, the ratio pario / MPICH of the medians (target >= 0.8) and the
   per-repetition ratios.
2. Redirection overhead for independent I/O (CEDA Fig. 17): independent write_at/read_at of
   the same pattern through pario on a plain file, and through a pario store file with an
   empty RMT (every request looks up the RMT and goes to the original), vs mpi4py MPI.File.
   Every rank opens the store in its shared multi-process mode.
Times are the max over ranks of the call time (barrier before).
"""
import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
from mpi4py import MPI

from pario.mpi import File
from pario.units import parse_size

comm = MPI.COMM_WORLD
r, p = comm.rank, comm.size
ap = argparse.ArgumentParser()
ap.add_argument("--dir", default=None)
ap.add_argument("--mib", type=float, default=64, help="total MiB per collective call")
ap.add_argument("--xfer", default="64K", help="transfer size per rank per segment")
ap.add_argument("--reps", type=int, default=3)
ap.add_argument("--indep-mib", type=float, default=16)
args = ap.parse_args()
xfer = parse_size(args.xfer)
base = args.dir or (tempfile.mkdtemp(prefix="pario-bench-") if r == 0 else None)
base = Path(comm.bcast(base, root=0))
seg = max(1, int(args.mib * 2**20) // (xfer * p))
nbytes = seg * xfer
data = np.random.default_rng(r).integers(0, 256, nbytes, dtype=np.uint8)
ft = MPI.BYTE.Create_vector(seg, xfer, p * xfer).Commit()
CB = {"romio_cb_write": "enable", "romio_cb_read": "enable"}


def timed(fn):
    comm.Barrier()
    t = time.perf_counter()
    fn()
    dt = time.perf_counter() - t
    return comm.allreduce(dt, op=MPI.MAX)


def open_mpi(path, extra=None):
    info = MPI.Info.Create()
    for k, v in {**CB, **(extra or {})}.items():
        info.Set(k, v)
    return MPI.File.Open(comm, str(path), MPI.MODE_CREATE | MPI.MODE_RDWR, info)


def open_pario(path, extra=None):
    return File.open(comm, str(path), MPI.MODE_CREATE | MPI.MODE_RDWR, {**CB, "pario_order": "romcio", **(extra or {})})


def coll(impl, path):
    out = np.empty_like(data)
    fh = open_pario(path) if impl == "pario" else open_mpi(path)
    (fh.set_view if impl == "pario" else fh.Set_view)(r * xfer, MPI.BYTE, ft)
    w = timed(lambda: (fh.write_at_all if impl == "pario" else fh.Write_at_all)(0, data))
    (fh.sync if impl == "pario" else fh.Sync)()
    rd = timed(lambda: (fh.read_at_all if impl == "pario" else fh.Read_at_all)(0, out))
    (fh.close if impl == "pario" else fh.Close)()
    assert np.array_equal(out, data)
    return w, rd


times = {"mpi": [], "pario": []}
coll("pario", base / "coll_pario.bin")   # warm-up (imports, page cache of both files)
coll("mpi", base / "coll_mpi.bin")
for rep in range(args.reps):
    # interleaved, alternating which goes first, so machine noise hits both alike
    for impl in (("mpi", "pario") if rep % 2 == 0 else ("pario", "mpi")):
        times[impl].append(coll(impl, base / f"coll_{impl}.bin"))
med = {k: np.median(np.array(v), axis=0) for k, v in times.items()}
best = {k: np.min(np.array(v), axis=0) for k, v in times.items()}
same = None
if r == 0:
    same = (base / "coll_mpi.bin").read_bytes() == (base / "coll_pario.bin").read_bytes()
total = nbytes * p / 1e6
if r == 0:
    print(f"collective, {p} ranks, {seg} segments x {args.xfer} per rank, {total:.1f} MB per call, "
          f"median (best) of {args.reps} interleaved reps")
    for i, op in enumerate(("write", "read")):
        m, pa = total / med["mpi"][i], total / med["pario"][i]
        mb, pb = total / best["mpi"][i], total / best["pario"][i]
        print(f"  {op:5s}  MPICH {m:8.1f} ({mb:6.0f}) MB/s   pario(romcio) {pa:8.1f} ({pb:6.0f}) MB/s   "
              f"ratio {pa / m:5.2f} ({pb / mb:4.2f})")
        ratios = [tm[i] / tp[i] for tm, tp in zip(times["mpi"], times["pario"])]
        print(f"         per-rep ratios: {' '.join(f'{x:.2f}' for x in ratios)}")
    print(f"  files identical: {same}")

# ---------------------------------------------------------------- redirection overhead (independent)
iseg = max(1, int(args.indep_mib * 2**20) // (xfer * p))
idata = data[: iseg * xfer]
offs = [(k * p + r) * xfer for k in range(iseg)]


def indep(fh, write, read):
    buf = np.empty(xfer, np.uint8)

    def w():
        for k, o in enumerate(offs):
            write(o, idata[k * xfer:(k + 1) * xfer])

    def rd():
        for o in offs:
            read(o, buf)

    return timed(w), timed(rd)


store = base / "store"
if r == 0 and not store.exists():
    from pario.store import init_store

    init_store(store, "ceda-hdd8")
comm.Barrier()
res = {}
for rep in range(args.reps):
    fh = open_mpi(base / "ind_mpi.bin")
    t = indep(fh, fh.Write_at, fh.Read_at)
    fh.Close()
    res.setdefault("MPICH", []).append(t)
    fh = open_pario(base / "ind_pario.bin")
    res.setdefault("pario plain", []).append(indep(fh, fh.write_at, fh.read_at))
    fh.close()
    fh = open_pario("ind", {"pario_store": str(store)})
    res.setdefault("pario store, all ranks", []).append(indep(fh, fh.write_at, fh.read_at))
    fh.close()
    # the store rank alone: RMT lookup + redirector, no request shipping (CEDA Fig. 17)
    for name, extra, fname in (("store rank only: plain", None, base / "ind_pario.bin"),
                               ("store rank only: store", {"pario_store": str(store)}, "ind")):
        fh = open_pario(fname, extra)
        if r == 0:
            t0 = time.perf_counter()
            buf = np.empty(xfer, np.uint8)
            for k in range(iseg):
                fh.write_at(k * xfer, idata[k * xfer:(k + 1) * xfer])
            t1 = time.perf_counter()
            for k in range(iseg):
                fh.read_at(k * xfer, buf)
            t2 = time.perf_counter()
            res.setdefault(name, []).append((t1 - t0, t2 - t1))
        fh.close()
if r == 0:
    tot = iseg * xfer * p / 1e6
    print(f"independent, {p} ranks, {iseg} x {args.xfer} per rank ({tot:.1f} MB), best of {args.reps}")
    ref = None
    for name, ts in res.items():
        w = min(t[0] for t in ts)
        rd = min(t[1] for t in ts)
        if ref is None or name.endswith(": plain"):
            ref = (w, rd)
        t = tot / p if name.startswith("store rank") else tot
        print(f"  {name:26s} write {t / w:8.1f} MB/s (time {w / ref[0] - 1:+7.1%})  read {t / rd:8.1f} MB/s (time {rd / ref[1] - 1:+7.1%})")
    if not args.dir:
        shutil.rmtree(base, ignore_errors=True)
