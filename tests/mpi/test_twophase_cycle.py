"""One aggregator cycle's file I/O (pario.mpi.twophase) without MPI, against a bytearray."""

import os
from types import SimpleNamespace

import numpy as np
import pytest

from pario.mpi import twophase
from pario.mpi.backend import PosixBackend


class _F:   # the attributes of pario.mpi.File that a cycle uses
    def __init__(self):
        self.hints = SimpleNamespace(cb_buffer_size=1 << 20)


def _blocks(rng, n_blocks, span):
    """Disjoint blocks (file offset, length) in shuffled order, back to back in the buffer."""
    cuts = np.sort(rng.choice(np.arange(1, span), size=2 * n_blocks, replace=False))
    off, end = cuts[0::2], cuts[1::2]
    perm = rng.permutation(n_blocks)
    off, ln = off[perm].astype(np.int64), (end - off)[perm].astype(np.int64)
    rpos = np.concatenate(([0], np.cumsum(ln)[:-1])).astype(np.int64)
    return off, ln, rpos


@pytest.mark.parametrize("span", [80_000, 800_000])   # mean block < 4 KiB: cycle-buffer path; else iovecs
def test_cycle_read_past_eof_zero_fills_and_write_round_trips(tmp_path, span):
    rng = np.random.default_rng(3)
    path = tmp_path / "f"
    size = span * 5 // 8
    content = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
    path.write_bytes(content)
    be = PosixBackend(str(path), os.O_RDWR)
    f = _F()
    assert twophase._iov_ok(np.array([span // 24])) == (span > 100_000)
    for trial in range(20):
        off, ln, rpos = _blocks(rng, 12, span)          # many blocks end past EOF
        rbuf = np.full(int(ln.sum()), 0xEE, dtype=np.uint8)
        twophase._read_cycle(f, be, True, rbuf, rpos, off, ln)
        padded = content + bytes(span)
        for o, n, p in zip(off.tolist(), ln.tolist(), rpos.tolist()):
            assert rbuf[p:p + n].tobytes() == padded[o:o + n], trial
    # write a cycle and read the file back
    off, ln, rpos = _blocks(rng, 12, span * 3 // 4)
    data = rng.integers(0, 256, int(ln.sum()), dtype=np.uint8)
    twophase._write_cycle(f, be, True, data, rpos, off, ln)
    ref = bytearray(content)
    for o, n, p in zip(off.tolist(), ln.tolist(), rpos.tolist()):
        ref[len(ref):o + n] = bytes(max(0, o + n - len(ref)))
        ref[o:o + n] = data[p:p + n].tobytes()
    be.close()
    assert path.read_bytes() == bytes(ref)
