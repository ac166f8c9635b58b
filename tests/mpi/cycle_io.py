"""Run under mpiexec -n 1: the file accesses of pario.native._collective's io callbacks.

Usage: cycle_io.py DIR
The rank (its own aggregator) collectively reads and writes blocks (disjoint, shuffled, back
to back in its buffer; many past the end of the file) of DIR/f.<mode>.<span> through the C
driver, once with the
POSIX io callback (pwritev/preadv in C on the file descriptor) and once with the Python
callback of a back end without a descriptor (pario.mpi.twophase's, over pread/pwrite only),
with a buffer of one cycle and of many.  Checks: a read returns the file's bytes and zeros
past its end; a write leaves exactly the former bytes with the blocks applied (zeros in a
hole it created past the end).  Prints "ok" on rank 0.
"""
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
from mpi4py import MPI

from pario.mpi import twophase
from pario.mpi.backend import PosixBackend
from pario.native import _collective as tp

comm = MPI.COMM_WORLD.Dup()
d = Path(sys.argv[1])
rng = np.random.default_rng(3 + comm.rank)


class NoFd:
    """A back end with pread_into / pwrite only (as the store's RPC back end)."""

    def __init__(self, be):
        self.be = be

    def pread_into(self, buf, offset):
        return self.be.pread_into(buf, offset)

    def pwrite(self, offset, data):
        return self.be.pwrite(offset, data)


def blocks(n_blocks, span):
    """Disjoint blocks (file offset, length) in shuffled order, back to back in the buffer."""
    cuts = np.sort(rng.choice(np.arange(1, span), size=2 * n_blocks, replace=False))
    off, end = cuts[0::2], cuts[1::2]
    perm = rng.permutation(n_blocks)
    return off[perm].astype(np.int64), (end - off)[perm].astype(np.int64)


def access(be, write, off, ln, buf, cb):
    fd = be.fd if isinstance(be, PosixBackend) else -1
    f = SimpleNamespace(backend=be, _independent_pieces=None)
    code, moved, indep, _, exc = tp.collective(MPI._handleof(comm), write, off, ln, buf, 0, cb, 0, None,
                                               tp.CB_ENABLE, None, fd, None if fd >= 0 else twophase._backend_io(f),
                                               False)
    assert exc is None and code == tp.OK and indep is None, (code, exc)
    assert moved == int(ln.sum())


for mode in ("posix", "callback"):
    for span in (80_000, 800_000):          # mean block below and above 4 KiB
        path = d / f"f.{mode}.{span}"
        size = span * 5 // 8
        content = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
        path.write_bytes(content)
        be = PosixBackend(str(path), os.O_RDWR)
        io_be = be if mode == "posix" else NoFd(be)
        padded = content + bytes(span)
        for trial in range(20):
            off, ln = blocks(12, span)      # many blocks end past EOF
            cb = (1 << 20) if trial % 2 else 3000
            buf = np.full(int(ln.sum()), 0xEE, dtype=np.uint8)
            access(io_be, 0, off, ln, buf, cb)
            pos = np.concatenate(([0], np.cumsum(ln)[:-1]))
            for o, n, p in zip(off.tolist(), ln.tolist(), pos.tolist()):
                assert buf[p:p + n].tobytes() == padded[o:o + n], (mode, span, trial)
        off, ln = blocks(12, span * 3 // 4)
        data = rng.integers(0, 256, int(ln.sum()), dtype=np.uint8)
        access(io_be, 1, off, ln, data, 5000)
        ref = bytearray(content)
        pos = np.concatenate(([0], np.cumsum(ln)[:-1]))
        for o, n, p in zip(off.tolist(), ln.tolist(), pos.tolist()):
            ref[len(ref):o + n] = bytes(max(0, o + n - len(ref)))
            ref[o:o + n] = data[p:p + n].tobytes()
        be.close()
        assert path.read_bytes() == bytes(ref), (mode, span)
comm.Barrier()
comm.Free()
if MPI.COMM_WORLD.rank == 0:
    print("ok")
