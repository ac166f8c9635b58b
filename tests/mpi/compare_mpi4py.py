"""Run under mpiexec: the same calls through pario.mpi.File and mpi4py's MPI.File must give identical bytes.

Usage: compare_mpi4py.py DIR [ORDER]
Prints one line "OK <case>" per case on rank 0, or "FAIL <case> ..." and exits 1.
"""
import sys
from pathlib import Path

import numpy as np
from mpi4py import MPI

from pario.mpi import File

comm = MPI.COMM_WORLD
r, p = comm.rank, comm.size
d = Path(sys.argv[1])
order = sys.argv[2] if len(sys.argv) > 2 else "romcio"
rng = np.random.default_rng(1234 + r)


def hints(extra=None):
    h = {"cb_buffer_size": "4096", "pario_order": order}
    h.update(extra or {})
    return h


def vector_type(count, block, stride):
    """IOR strided / HPIO style: vector of ints resized to a full tile (no overlap between ranks)."""
    v = MPI.INT.Create_vector(count, block, stride)
    t = v.Create_resized(0, count * stride * 4).Commit()
    v.Free()
    return t


def subarray_type():
    """MPI-Tile-IO: a 2x2 grid of tiles of 12x10 ints in a 24x20 array, one tile per rank."""
    gx, gy = 2, max(1, p // 2)
    ty, tx = 12, 10
    ry, rx = r // gx, r % gx
    return MPI.INT.Create_subarray([gy * ty, gx * tx], [ty, tx], [ry * ty, rx * tx]).Commit()


def struct_type():
    """hvector of a struct (HPIO-like regions with spacing)."""
    s = MPI.Datatype.Create_struct([3, 2], [0, 20], [MPI.INT, MPI.DOUBLE])
    h = s.Create_hvector(4, 1, 64 * p)
    t = h.Create_resized(0, 4 * 64 * p).Commit()
    return t


CASES = []


def case(fn):
    CASES.append(fn)
    return fn


@case
def independent_contig(fh, impl):
    data = (np.arange(3000, dtype=np.int32) + r * 10**6)
    w = fh.write_at if impl == "pario" else fh.Write_at
    w(r * 3000 * 4 + 7, data)
    comm.Barrier()
    out = np.zeros(2500, dtype=np.int32)
    (fh.read_at if impl == "pario" else fh.Read_at)(((r + 1) % p) * 3000 * 4 + 11, out)
    return out


@case
def collective_contig(fh, impl):
    data = (np.arange(5000, dtype=np.int32) * 3 + r)
    (fh.write_at_all if impl == "pario" else fh.Write_at_all)(r * 5000 * 4, data)
    out = np.zeros(4000, dtype=np.int32)
    (fh.read_at_all if impl == "pario" else fh.Read_at_all)(((r + 2) % p) * 5000 * 4 + 400, out)
    return out


@case
def collective_strided_vector(fh, impl):
    t = vector_type(8, 50, 50 * p)
    (fh.set_view if impl == "pario" else fh.Set_view)(128 + r * 200, MPI.INT, t)
    data = rng.integers(0, 2**31 - 1, 8 * 50 * 3, dtype=np.int32)
    (fh.write_all if impl == "pario" else fh.Write_all)(data)
    (fh.seek if impl == "pario" else fh.Seek)(0)
    out = np.zeros(len(data), dtype=np.int32)
    (fh.read_all if impl == "pario" else fh.Read_all)(out)
    assert np.array_equal(out, data), "read-back differs"
    return out


@case
def independent_strided_vector(fh, impl):
    t = vector_type(5, 7, 7 * p)
    (fh.set_view if impl == "pario" else fh.Set_view)(r * 28, MPI.INT, t)
    data = rng.integers(0, 2**31 - 1, 5 * 7 * 2 + 9, dtype=np.int32)
    (fh.write if impl == "pario" else fh.Write)(data)
    (fh.write_at if impl == "pario" else fh.Write_at)(200, data[:13])
    comm.Barrier()
    out = np.zeros(60, dtype=np.int32)
    (fh.read_at if impl == "pario" else fh.Read_at)(3, out)
    return out


@case
def collective_subarray(fh, impl):
    t = subarray_type()
    (fh.set_view if impl == "pario" else fh.Set_view)(64, MPI.INT, t)
    data = (np.arange(120, dtype=np.int32) + 1000 * r)
    (fh.write_at_all if impl == "pario" else fh.Write_at_all)(0, data)
    out = np.zeros(120, dtype=np.int32)
    (fh.read_at_all if impl == "pario" else fh.Read_at_all)(0, out)
    return out


@case
def collective_struct_noncontig_memory(fh, impl):
    t = struct_type()
    (fh.set_view if impl == "pario" else fh.Set_view)(r * 64, MPI.BYTE, t)
    mem = MPI.INT.Create_vector(10, 3, 5).Commit()   # non-contiguous memory type
    buf = rng.integers(0, 2**31 - 1, 50 * 4, dtype=np.int32)
    (fh.write_at_all if impl == "pario" else fh.Write_at_all)(0, [buf, 4, mem])
    out = np.zeros(50 * 4, dtype=np.int32)
    (fh.read_at_all if impl == "pario" else fh.Read_at_all)(0, [out, 4, mem])
    return out


@case
def collective_interleaved_small(fh, impl):
    # every rank writes 16-byte records interleaved (many small pieces, several cycles)
    t = vector_type(300, 4, 4 * p)
    (fh.set_view if impl == "pario" else fh.Set_view)(r * 16, MPI.INT, t)
    data = rng.integers(0, 2**31 - 1, 1200, dtype=np.int32)
    (fh.write_at_all if impl == "pario" else fh.Write_at_all)(0, data)
    out = np.zeros(1200, dtype=np.int32)
    (fh.read_at_all if impl == "pario" else fh.Read_at_all)(0, out)
    return out


@case
def collective_uneven_and_empty(fh, impl):
    # rank 1 contributes nothing; others different sizes
    n = 0 if r == 1 else 700 * (r + 1)
    data = np.full(n, r + 1, dtype=np.int8)
    (fh.write_at_all if impl == "pario" else fh.Write_at_all)(r * 5000 + 3, data)
    out = np.zeros(n, dtype=np.int8)
    (fh.read_at_all if impl == "pario" else fh.Read_at_all)(r * 5000 + 3, out)
    return out


@case
def collective_large_blocks_many_cycles(fh, impl):
    """8 KiB blocks, cb_buffer_size 128 KiB: many cycles of the C driver's pwritev/preadv
    callback, plus a second write over the first."""
    t = vector_type(40, 2048, 2048 * p)
    (fh.set_view if impl == "pario" else fh.Set_view)(r * 8192, MPI.INT, t)
    data = rng.integers(0, 2**31 - 1, 40 * 2048, dtype=np.int32)
    (fh.write_at_all if impl == "pario" else fh.Write_at_all)(0, data)
    (fh.write_at_all if impl == "pario" else fh.Write_at_all)(20 * 2048, data[:10 * 2048] ^ 0x5A5A)
    out = np.zeros(len(data), dtype=np.int32)
    (fh.read_at_all if impl == "pario" else fh.Read_at_all)(0, out)
    return out


collective_large_blocks_many_cycles.cb = "131072"


def run(impl, fn, path, extra):
    rng.bit_generator.state = np.random.default_rng(1234 + r).bit_generator.state
    if impl == "pario":
        fh = File.open(comm, path, MPI.MODE_CREATE | MPI.MODE_RDWR,
                       hints({**(extra or {}), "cb_buffer_size": getattr(fn, "cb", "4096")}))
    else:
        info = MPI.Info.Create()
        for k, v in {**(extra or {}), "cb_buffer_size": getattr(fn, "cb", "4096")}.items():
            info.Set(k, v)
        fh = MPI.File.Open(comm, path, MPI.MODE_CREATE | MPI.MODE_RDWR, info)
    out = fn(fh, impl)
    size = fh.get_size() if impl == "pario" else fh.Get_size()
    (fh.close if impl == "pario" else fh.Close)()
    return out, size


failed = False
for extra_name, extra in (("auto", None), ("cb", {"romio_cb_write": "enable", "romio_cb_read": "enable", "cb_nodes": "2"})):
    for fn in CASES:
        name = f"{fn.__name__}[{extra_name}]"
        pa, pb = d / f"{name}.pario", d / f"{name}.mpi"
        if r == 0:  # pre-filled: holes inside ROMIO's data-sieving spans stay defined
            fill = (np.arange(48 * 1024, dtype=np.uint32) * 2654435761 % 251).astype(np.uint8).tobytes()
            for q in (pa, pb):
                q.write_bytes(fill)
        comm.Barrier()
        oa, sa = run("pario", fn, str(pa), extra)
        ob, sb = run("mpi", fn, str(pb), extra)
        comm.Barrier()
        same_out = comm.allreduce(int(np.array_equal(oa, ob)), op=MPI.MIN)
        if r == 0:
            ba, bb = pa.read_bytes(), pb.read_bytes()
            ok = ba == bb and same_out and sa == sb
            print(("OK " if ok else "FAIL ") + name + ("" if ok else f" file_equal={ba == bb} reads_equal={bool(same_out)} sizes={sa},{sb}"), flush=True)
            failed |= not ok
failed = comm.bcast(failed, root=0)
sys.exit(1 if failed else 0)
