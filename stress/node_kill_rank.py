"""The two sides of stress/node_kill.py, run on emulated nodes.

    python node_kill_rank.py write PATH TRIAL NBLOCKS BS K SECONDS ACKDIR     (an MPI job)
    python node_kill_rank.py check STORE PATH TRIAL NRANKS NBLOCKS BS ACKDIR  (one process)

write: every rank overwrites its blocks of PATH in passes, through MPI-IO (mpi4py's
MPI.File: the preloaded library serves it from the store): block b of rank r is BS bytes at
(b * NRANKS + r) * BS, each 8-byte word the value word(trial, r, b, pass).  Every K blocks the
ranks call MPI_File_sync (collective) and only then append "PASS FIRST LAST" to
ACKDIR/TRIAL.RANK and fsync it: those bytes are acknowledged (ACKDIR/TRIAL.RANK.open tells the
harness the file is open).  Passes go on for SECONDS (the
harness kills a node before that).

check: from the store directly (pario.store, as `pario store get` reads it, after the
recovery): for every block, every word must be the block's word of a pass at least the last
acknowledged pass of that block (an unacknowledged later pass may have landed, in part);
a word of an older pass is a stale read, any other word (zeros included) a lost byte.  Prints
one line "blocks B acked A lost L stale S" and exits 0.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np


def word(trial: int, rank: int, block: int, npass: int) -> np.uint64:
    return np.uint64((trial & 0xFFFF) << 48 | (npass & 0xFFFF) << 32 | (rank & 0xFF) << 24 | (block & 0xFFFFFF))


def write(path, trial, nblocks, bs, k, seconds, ackdir):
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    r, n = comm.rank, comm.size
    fh = MPI.File.Open(comm, path, MPI.MODE_CREATE | MPI.MODE_RDWR)
    ack = open(Path(ackdir) / f"{trial}.{r}", "a")
    (Path(ackdir) / f"{trial}.{r}.open").touch()          # the harness's sign that writes begin
    t0 = time.monotonic()
    npass = 0
    while time.monotonic() - t0 < seconds:
        first = 0
        for b in range(nblocks):
            fh.Write_at((b * n + r) * bs, np.full(bs // 8, word(trial, r, b, npass), dtype=np.uint64))
            if (b + 1) % k == 0 or b == nblocks - 1:
                fh.Sync()
                ack.write(f"{npass} {first} {b}\n")
                ack.flush()
                os.fsync(ack.fileno())
                first = b + 1
        npass += 1
    fh.Close()


def check(store, path, trial, nranks, nblocks, bs, ackdir):
    from pario.store import Store

    acked = np.full((nranks, nblocks), -1, dtype=np.int64)
    for r in range(nranks):
        p = Path(ackdir) / f"{trial}.{r}"
        if not p.exists():
            continue
        for line in p.read_text().splitlines():
            parts = line.split()
            if len(parts) != 3:             # a line cut by the kill: not acknowledged
                continue
            npass, a, b = map(int, parts)
            acked[r, a:b + 1] = np.maximum(acked[r, a:b + 1], npass)
    lost = stale = 0
    with Store(store, shared=True) as st:
        names = set(st.files())
        f = st.open(path) if path in names else None
        try:
            for r in range(nranks):
                for b in range(nblocks):
                    a = int(acked[r, b])
                    got = (np.frombuffer(f.read((b * nranks + r) * bs, bs), dtype=np.uint64) if f
                           else np.zeros(0, dtype=np.uint64))
                    if a < 0:
                        continue
                    if got.size != bs // 8:
                        lost += bs
                        continue
                    base = int(word(trial, r, b, 0))
                    ok_key = (got & np.uint64(0xFFFF0000FFFFFFFF)) == np.uint64(base)
                    passes = ((got >> np.uint64(32)) & np.uint64(0xFFFF)).astype(np.int64)
                    lost += int((~ok_key).sum()) * 8
                    stale += int((ok_key & (passes < a)).sum()) * 8
        finally:
            if f:
                f.close()
    print(f"blocks {nranks * nblocks} acked {int((acked >= 0).sum())} lost {lost} stale {stale}")


def explain(store, path, trial, nranks, nblocks, bs, ackdir):
    """After a failed trial: the RMT entries of the file, and where a readable (CLEAN or FRESH)
    entry's replica bytes differ from the original's, both sides' words decoded."""
    from pario.store import Store

    def dec(w):
        w = int(w)
        return f"trial {w >> 48} pass {(w >> 32) & 0xFFFF} rank {(w >> 24) & 0xFF} block {w & 0xFFFFFF}"

    with Store(store, shared=True) as st:
        be = st.backend
        ent = st.rmt.entries(path)
        oh = be.open(path)
        for o, n, rn, ro, fl in zip(ent.o_off, ent.length, ent.r_file, ent.r_off, ent.flag):
            print(f"entry {rn} [{int(o)}, +{int(n)}) -> {int(ro)} flag {int(fl)}")
            if int(fl) not in (0, 4):
                continue
            a, b = bytearray(int(n)), bytearray(int(n))
            be.readv(oh, (int(o),), (int(n),), a, (0,))
            be.readv(be.open(rn), (int(ro),), (int(n),), b, (0,))
            x, y = np.frombuffer(a[:len(a) // 8 * 8], np.uint64), np.frombuffer(b[:len(b) // 8 * 8], np.uint64)
            diff = np.nonzero(x != y)[0]
            for k in diff[:: max(1, len(diff) // 6)][:6]:
                print(f"  byte {int(o) + int(k) * 8}: original {dec(x[k])} | replica {dec(y[k])}")
            print(f"  {len(diff) * 8} bytes differ")


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "write":
        write(args[0], *map(int, args[1:5]), float(args[5]), args[6])
    else:
        (check if cmd == "check" else explain)(args[0], args[1], *map(int, args[2:6]), args[6])
