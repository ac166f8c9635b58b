"""Collective replay program for ``pario bench run --collective`` (run under ``mpiexec``).

``mpiexec -n N python -m pario.testbed.collective SPEC.json`` — every MPI rank replays
the requests of the trace ranks ``r`` with ``r mod N == rank`` through
:class:`pario.mpi.File` on a pario store file, as *one* collective call per (file, op)
(``write_at_all`` / ``read_at_all`` with an ``hindexed`` file view of the rank's pieces,
sorted by offset as MPI requires), which is what ``pario simulate --collective`` models
(one two-phase call per file and op, seed 004 §2.1).  Hints: ``pario_store``,
``pario_order`` (romcio | cacio | hacio), ``cb_nodes``, ``cb_buffer_size``,
``romio_cb_read/write = enable``.

The files must already exist in the store with their layout (``pario bench run`` creates
and prefills them).  The MPI runtime opens the store without O_DIRECT; on a testbed the
page cache would absorb the writes outside the throttle, so this program makes the store
open its data files with ``O_DIRECT`` (``direct=True``) — by default argument only, through
a subclass installed as ``pario.store.Store`` in this process.  The wall time of each call
is measured between two barriers; rank 0 prints one JSON line ``{"calls": [...]}``.
``pario.plan.collective`` is imported before the timed calls (the runtime imports it lazily
on the first cacio/hacio call, which costs seconds when 8 ranks import scipy at once).
"""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np


def _direct_store() -> None:
    import pario.store as ps

    base = ps.Store
    if getattr(base, "_pario_bench_direct", False):
        return

    class DirectStore(base):  # type: ignore[misc, valid-type]
        _pario_bench_direct = True

        def __init__(self, root, **kw):
            kw.setdefault("direct", True)
            super().__init__(root, **kw)

    ps.Store = DirectStore


def main(argv: list[str]) -> int:
    from mpi4py import MPI

    from pario.mpi import File
    from pario.trace import load

    spec = json.loads(open(argv[0]).read())
    comm = MPI.COMM_WORLD
    rank, size = comm.rank, comm.size
    if spec.get("direct", True):
        _direct_store()
    trace = load(spec["trace"])
    # twophase imports pario.plan (and so scipy) lazily on the first cacio/hacio call: a one-off
    # cost of seconds on a loaded machine that is not part of any collective call; pay it here
    import pario.plan.collective  # noqa: F401
    mine = (trace.rank.astype(np.int64) % size) == rank
    hints = {"pario_store": spec["store"], "pario_order": spec["order"], "cb_buffer_size": str(spec["cb_buffer"]),
             "romio_cb_write": "enable", "romio_cb_read": "enable"}
    if spec.get("cb_nodes"):
        hints["cb_nodes"] = str(spec["cb_nodes"])
    calls = []
    for fi, fname in enumerate(trace.files):
        for op in (1, 0) if spec.get("writes_first", True) else (0, 1):
            sel_all = (trace.file == fi) & (trace.op == op)
            if not sel_all.any():
                continue
            sel = sel_all & mine
            off = trace.offset[sel].astype(np.int64)
            ln = trace.length[sel].astype(np.int64)
            order = np.argsort(off, kind="stable")
            off, ln = off[order], ln[order]
            total = int(ln.sum())
            buf = np.full(max(total, 1), rank & 0xFF, dtype=np.uint8)
            fh = File.open(comm, spec["names"][fi], MPI.MODE_RDWR, hints)
            try:
                if len(off):
                    ft = MPI.BYTE.Create_hindexed(ln.tolist(), off.tolist()).Commit()
                else:
                    ft = MPI.BYTE.Create_contiguous(0).Commit()
                fh.set_view(0, MPI.BYTE, ft)
                comm.Barrier()
                prof = None
                if rank == 0 and os.environ.get("PARIO_BENCH_PROFILE"):  # diagnosis: cProfile of rank 0's call
                    import cProfile

                    prof = cProfile.Profile()
                    prof.enable()
                t0 = time.perf_counter()
                if op == 1:
                    fh.write_at_all(0, buf[:total])
                else:
                    fh.read_at_all(0, buf[:total])
                if prof is not None:
                    prof.disable()
                    prof.dump_stats(os.environ["PARIO_BENCH_PROFILE"])
                comm.Barrier()
                wall = time.perf_counter() - t0
                ft.Free()
                sched = fh.last_schedule
                ncyc = comm.allreduce(int(getattr(sched, "ncycles", 0) or 0), op=MPI.MAX)
                naggr = len(fh.aggregators)
            finally:
                fh.close()
            calls.append({"file": fname, "op": "write" if op == 1 else "read", "wall_s": wall,
                          "bytes": int(trace.length[sel_all].sum()), "cycles": ncyc, "aggregators": naggr})
    if rank == 0:
        print(json.dumps({"calls": calls, "procs": size, "order": spec["order"]}), flush=True)
    return 0


if __name__ == "__main__":  # pragma: no cover - run under mpiexec
    sys.exit(main(sys.argv[1:]))
