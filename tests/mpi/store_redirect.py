"""Run under mpiexec -n 4 on a store prepared by tests/mpi/test_mpi_store.py.

Usage: store_redirect.py STORE MODE
The store holds "data": RECORDS records of REC bytes, record k written by rank k % 4, with
a CEDA partial replica of every odd record.  MODE:
  run   – read everything back (independent + collective, through the redirector), then every
          rank rewrites its records (half independent, half collective), checks the new bytes
          while replicas are dirty, rank 0 prints "dirty N" (DIRTY RMT entries before close).
  crash – rank 0 (the store rank) is SIGKILLed in the middle of a collective write.
  resize – rank 1 writes a record past the end (extending the file), then a collective
          set_size to half a record; rank 0 prints "size N" as a fresh open sees it.
"""
import os
import signal
import sys

import numpy as np
from mpi4py import MPI

from pario.mpi import File

comm = MPI.COMM_WORLD
r, p = comm.rank, comm.size
store, mode = sys.argv[1], sys.argv[2]
REC, RECORDS = 4096, 64


def content(gen: int) -> np.ndarray:
    return np.random.default_rng(1000 * gen + 5).integers(0, 256, REC * RECORDS, dtype=np.uint8)


old, new = content(0), content(1)
mine = [k for k in range(RECORDS) if k % p == r]
hints = {"pario_store": store, "cb_buffer_size": "8192", "romio_cb_write": "enable", "romio_cb_read": "enable"}
fh = File.open(comm, "data", MPI.MODE_RDWR, hints)
ft = MPI.BYTE.Create_vector(RECORDS // p, REC, p * REC).Commit()

if mode == "run":
    # independent reads of single records (odd ones are served by the replica)
    for k in mine:
        buf = np.zeros(REC, np.uint8)
        fh.read_at(k * REC, buf)
        assert np.array_equal(buf, old[k * REC:(k + 1) * REC]), f"rank {r}: independent read of record {k}"
    # collective read through a strided view
    fh.set_view(r * REC, MPI.BYTE, ft)
    buf = np.zeros(REC * len(mine), np.uint8)
    fh.read_at_all(0, buf)
    assert np.array_equal(buf, np.concatenate([old[k * REC:(k + 1) * REC] for k in mine])), f"rank {r}: collective read"
    # writes: first half of my records independently, second half collectively
    half = len(mine) // 2
    fh.set_view(0, MPI.BYTE, None)
    for k in mine[:half]:
        fh.write_at(k * REC, new[k * REC:(k + 1) * REC].copy())
    fh.set_view(r * REC + half * p * REC, MPI.BYTE, ft)
    data = np.concatenate([new[k * REC:(k + 1) * REC] for k in mine[half:]])
    fh.write_at_all(0, data)
    comm.Barrier()
    # read-your-writes while replicas are dirty: whole file, collectively, from every rank
    fh.set_view(0, MPI.BYTE, None)
    allbuf = np.zeros(REC * RECORDS, np.uint8)
    fh.read_at_all(0, allbuf)
    assert np.array_equal(allbuf, new), f"rank {r}: read after write"
    if r == 0:
        ent = fh.backend.store.rmt.entries("data")
        print("dirty", int((ent.flag == 1).sum()), flush=True)
    comm.Barrier()          # nobody starts closing (flushing the dirty replicas) before rank 0 counted
    fh.close()
    if r == 0:
        print("closed", flush=True)
elif mode == "crash":
    if r == 0:
        count = [0]
        orig = fh.backend._local_write

        def dying_write(offset, data):
            count[0] += 1
            if count[0] == 5:
                os.kill(os.getpid(), signal.SIGKILL)
            return orig(offset, data)

        fh.backend._local_write = dying_write
        orig_v = fh.backend.write_ranges

        def dying_ranges(*a):     # a two-phase cycle's runs in one call
            count[0] += 1
            if count[0] == 5:
                os.kill(os.getpid(), signal.SIGKILL)
            return orig_v(*a)

        fh.backend.write_ranges = dying_ranges
    fh.set_view(r * REC, MPI.BYTE, ft)
    data = np.concatenate([new[k * REC:(k + 1) * REC] for k in mine])
    fh.write_at_all(0, data)
    fh.close()
elif mode == "resize":
    if r == 1 % p:
        fh.write_at(RECORDS * REC, new[:REC].copy())
    fh.set_size(REC // 2)
    fh.close()
    g = File.open(comm, "data", MPI.MODE_RDONLY, hints)
    n = g.get_size()
    g.close()
    if r == 0:
        print("size", n, flush=True)
