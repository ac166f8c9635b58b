"""Run under mpiexec -n 2: errors of pario.mpi.File's collective calls (the C driver).

Usage: collective_errors.py DIR
A back end whose writes fail on rank 1 (a store-like back end without a descriptor: the
driver's Python io callback): a collective write with both ranks aggregating raises
ParioError with rank 1's message on both ranks; with romio_cb_write=disable (independent
path) only rank 1 raises; a later collective call on the file still works.  An
EINVAL-class argument (a buffer too short) is not reachable through File, so the driver's
own codes are checked through a cb_buffer_size the driver refuses (1 GiB + 1 bypassing the
hint check): every rank raises the driver's line.  Prints "ok" on rank 0.
"""
import sys
from pathlib import Path

import numpy as np
from mpi4py import MPI

from pario import ParioError
from pario.mpi import File

comm = MPI.COMM_WORLD
r = comm.rank
d = Path(sys.argv[1])


class Failing:
    def __init__(self, be):
        self.be = be

    def pwrite(self, offset, data):
        if r == 1:
            raise ParioError("boom on rank 1")
        return self.be.pwrite(offset, data)

    def pread_into(self, buf, offset):
        return self.be.pread_into(buf, offset)


def attempt(fh, data):
    try:
        fh.write_at_all(r * 8192, data)
        return None
    except ParioError as exc:
        return str(exc)


for mode in ("enable", "disable"):
    fh = File.open(comm, str(d / f"e_{mode}.bin"), MPI.MODE_CREATE | MPI.MODE_RDWR,
                   {"romio_cb_write": mode, "romio_cb_read": "enable", "cb_nodes": "2", "cb_buffer_size": "4096"})
    good = fh.backend
    fh.backend = Failing(good)
    data = np.full(8192, r + 1, np.uint8)
    got = attempt(fh, data)
    if mode == "enable":
        assert got == "boom on rank 1", (r, got)
    else:
        assert got == ("boom on rank 1" if r == 1 else None), (r, got)
    fh.backend = good
    fh.write_at_all(r * 8192, data)
    back = np.zeros(16384, np.uint8)
    fh.read_at_all(0, back)
    assert (back == np.repeat([1, 2], 8192)).all()
    fh.hints.cb_buffer_size = (1 << 30) + 1
    got = attempt(fh, data)
    assert got is not None and "collective I/O: bad argument" in got, (r, got)
    fh.close()
comm.Barrier()
if r == 0:
    print("ok")
