"""An IOR-like MPI-IO program (shared file, strided or random) running on pario.mpi.File.

    mpiexec -n 4 python examples/ior_like.py FILE [--store DIR] [--trace T.parquet] [--plan PLAN.json]
        [--pattern strided|random] [--xfer 16K] [--segments 64] [--collective] [--order romcio|cacio|hacio]
        [--write-only | --read-only] [--reads K] [--digest]

Each rank moves --segments transfers of --xfer bytes.  strided: transfer k of rank r is at
(k·p + r)·xfer (IOR -s segments, interleaved); random: the same slots in a per-rank random
permutation (seeded), so the file content is the same.  Writes then reads back and checks
the bytes; prints the wall time of each phase (open included) and, with --digest, a SHA-256
of the file as the program sees it after the close (read through an untraced second
handle), so two runs can be compared.  ``--read-only`` reads (and checks) a file an earlier
``--write-only`` run wrote with the same options; ``--reads K`` reads it K times (a
read-mostly analysis: CEDA's case).  With no pario hints this is a plain MPI-IO program on
a plain file.  The PARIO_STORE / PARIO_TRACE / PARIO_PLAN / PARIO_SYSTEM / PARIO_DIRECT
environment variables set the same hints without options (that is how ``pario run`` drives
it; ``pario run`` also reads the phase times of the last line, ``… open S s  write S s (…)
read S s (…)  close S s``, to say how much of a wall-time difference is in ``close``).
"""
import argparse
import hashlib

import numpy as np
from mpi4py import MPI

from pario.mpi import File
from pario.units import parse_size

ap = argparse.ArgumentParser()
ap.add_argument("file")
ap.add_argument("--store")
ap.add_argument("--trace")
ap.add_argument("--plan")
ap.add_argument("--system")
ap.add_argument("--pattern", choices=("strided", "random"), default="strided")
ap.add_argument("--xfer", default="16K")
ap.add_argument("--segments", type=int, default=64)
ap.add_argument("--collective", action="store_true")
ap.add_argument("--order", choices=("romcio", "cacio", "hacio"))
g = ap.add_mutually_exclusive_group()
g.add_argument("--write-only", action="store_true")
g.add_argument("--read-only", action="store_true")
ap.add_argument("--reads", type=int, default=1, help="read the file K times (default 1)")
ap.add_argument("--digest", action="store_true")
args = ap.parse_args()
if args.reads < 1:
    ap.error("--reads must be >= 1")

comm = MPI.COMM_WORLD
r, p = comm.rank, comm.size
xfer = parse_size(args.xfer)
hints = {}
for key, val in (("pario_store", args.store), ("pario_trace", args.trace), ("pario_plan", args.plan),
                 ("pario_order", args.order), ("pario_system", args.system)):
    if val:
        hints[key] = val
slots = np.arange(args.segments) * p + r
if args.pattern == "random":
    slots = np.random.default_rng(r).permutation(slots)
data = np.random.default_rng(12345 + r).integers(0, 256, (args.segments, xfer), dtype=np.uint8)
# data of slot s is data[k] where slots[k] == s: content independent of the pattern
data = data[np.argsort(np.argsort(slots))] if args.pattern == "random" else data


def phase(fn):
    comm.Barrier()
    t = MPI.Wtime()
    fn()
    comm.Barrier()
    return MPI.Wtime() - t


amode = MPI.MODE_RDONLY if args.read_only else MPI.MODE_CREATE | MPI.MODE_RDWR
comm.Barrier()
t_open = MPI.Wtime()
fh = File.open(comm, args.file, amode, hints)
comm.Barrier()
times = {"open": MPI.Wtime() - t_open}


def write():
    if args.collective:
        ft = MPI.BYTE.Create_vector(args.segments, xfer, p * xfer).Commit()
        order = np.argsort(slots)
        fh.set_view(r * xfer, MPI.BYTE, ft)
        fh.write_at_all(0, np.ascontiguousarray(data[order]).reshape(-1))
        fh.set_view(0, MPI.BYTE, None)
    else:
        for k, s in enumerate(slots):
            fh.write_at(int(s) * xfer, data[k])


def read():
    buf = np.empty(xfer, np.uint8)
    bad = 0
    if args.collective:
        ft = MPI.BYTE.Create_vector(args.segments, xfer, p * xfer).Commit()
        order = np.argsort(slots)
        fh.set_view(r * xfer, MPI.BYTE, ft)
        out = np.empty(args.segments * xfer, np.uint8)
        fh.read_at_all(0, out)
        fh.set_view(0, MPI.BYTE, None)
        bad = int(not np.array_equal(out, np.ascontiguousarray(data[order]).reshape(-1)))
    else:
        for k, s in enumerate(slots):
            fh.read_at(int(s) * xfer, buf)
            bad += int(not np.array_equal(buf, data[k]))
    # buffer-based Allreduce: mpi4py's pickled lowercase collectives keep the GIL while they
    # wait, which would stall the store rank's service thread (docs/mpi.md, Limits)
    tot = np.zeros(1, np.int64)
    comm.Allreduce(np.array([bad], np.int64), tot)
    if tot[0] and r == 0:
        print("ior_like: READ CHECK FAILED", flush=True)
        comm.Abort(3)


if not args.read_only:
    times["write"] = phase(write)
if not args.write_only:
    times["read"] = sum(phase(read) for _ in range(args.reads))
comm.Barrier()
t0 = MPI.Wtime()
fh.close()
times["close"] = MPI.Wtime() - t0
digest = None
if args.digest:
    # after the close (dirty replica data flushed), through a second handle that is not traced
    # (an empty pario_trace hint overrides PARIO_TRACE), so the digest's reads do not become
    # part of the access pattern that pario advise plans for
    dh = File.open(comm, args.file, MPI.MODE_RDONLY, {**hints, "pario_trace": ""})
    size = dh.get_size()
    if r == 0:
        h = hashlib.sha256()
        buf = np.empty(1 << 20, np.uint8)
        pos = 0
        while pos < size:
            n = dh.read_at(pos, buf[: min(len(buf), size - pos)])
            h.update(buf[:n].tobytes())
            pos += n
        digest = h.hexdigest()
    dh.close()
if r == 0:
    mb = args.segments * xfer * p / 1e6
    mbs = {"write": mb, "read": mb * args.reads}
    parts = "  ".join(f"{k} {v:.3f} s" + (f" ({mbs[k] / v:.1f} MB/s)" if k in mbs else "") for k, v in times.items())
    print(f"ior_like {args.pattern} {'collective' if args.collective else 'independent'} {p}x{args.segments}x{args.xfer}: {parts}")
    if digest:
        print(f"sha256 {digest}")
