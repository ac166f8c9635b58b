"""Collective replay program for ``pario bench run --collective`` (run under ``mpiexec``).

``mpiexec -n N python -m pario.testbed.collective SPEC.json`` — every MPI rank replays
the requests of the trace ranks ``r`` with ``r mod N == rank`` through
:class:`pario.mpi.File` on a pario store file, as *one* collective call per (file, op)
(``write_at_all`` / ``read_at_all`` with an ``hindexed`` file view of the rank's pieces,
sorted by offset as MPI requires), which is what ``pario simulate --collective`` models
(one two-phase call per file and op, seed 004 §2.1).  Hints: ``pario_store``,
``pario_order`` (romcio | cacio | hacio), ``cb_nodes``, ``cb_buffer_size``,
``romio_cb_read/write = enable`` and ``pario_direct = true``.

The files must already exist in the store with their layout (``pario bench run`` creates
and prefills them).  ``pario_direct`` makes every rank open the store's data files with
``O_DIRECT``, so the I/O reaches the throttled devices from the MPI processes (buffered
writes would be written back by the kernel's flusher threads, outside the testbed's
cgroup).  After each call every rank checks what it really has open: the file
descriptors that point into the store's server directories and how many of them carry
``O_DIRECT`` (``/proc/self/fdinfo``), and its block-I/O cgroup (``/proc/self/cgroup``);
rank 0 reports the sums and the distinct cgroups.  The wall time of each call is measured
between two barriers; before the first of them, when ``spec["restart_throttle"]`` is set
(the ranks run inside the testbed's cgroup), rank 0 restarts the testbed's throttles
(:func:`pario.testbed.core.restart_throttle`), so that no call inherits throttle credit
from the I/O of the previous call or of the program's start-up.  On a testbed
(``spec["testbed"]``) rank 0 also reads the requests per server that passed the throttle
(cgroup ``io_serviced``) and that the loop devices completed (``/sys/block/loopN/stat``)
right after the first and the second barrier, so they count the timed call only.
Rank 0 prints one JSON line ``{"calls": [...]}``.
"""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np

_O_DIRECT = getattr(os, "O_DIRECT", 0)


def data_fds(dirs: list[str]) -> tuple[int, int]:
    """(open file descriptors of this process under ``dirs``, how many of them have O_DIRECT)."""
    roots = [os.path.realpath(d).rstrip("/") + "/" for d in dirs]
    n = direct = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
            if not any(target.startswith(r) for r in roots):
                continue
            with open(f"/proc/self/fdinfo/{fd}") as f:
                flags = next(int(line.split()[1], 8) for line in f if line.startswith("flags:"))
        except (OSError, StopIteration, ValueError):
            continue  # closed meanwhile
        n += 1
        direct += bool(flags & _O_DIRECT)
    return n, direct


def io_cgroup() -> str:
    """This process's block-I/O cgroup path (v1 ``blkio`` line, else the v2 line)."""
    v2 = "/"
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                hid, ctrls, path = line.rstrip("\n").split(":", 2)
                if "blkio" in ctrls.split(","):
                    return path
                if hid == "0" and ctrls == "":
                    v2 = path
    except OSError:
        pass
    return v2


def _server_dirs(fh) -> list[str]:
    store = getattr(fh.backend, "store", None)
    return [str(p) for p in getattr(getattr(store, "backend", None), "server_dirs", [])]


def _counters(spec):
    """Rank 0's reader of the testbed's request counters (``spec["testbed"]``), else None:
    returns (requests passed by the throttle, requests completed by the devices) per server."""
    if not spec.get("testbed"):
        return None
    from pario.testbed.bench import device_ios, device_stat_ios
    from pario.testbed.core import load_state

    tb = load_state(spec["testbed"])
    names = spec["servers"]

    def read():
        a, b = device_ios(tb, names), device_stat_ios(tb, names)
        return None if a is None or b is None else np.stack((a, b))

    return read


def _restarter(spec):
    """Rank 0's restart of the testbed's throttles before each call (``spec["restart_throttle"]``), else None."""
    if not (spec.get("testbed") and spec.get("restart_throttle")):
        return None
    from pario.testbed.core import load_state, restart_throttle

    tb = load_state(spec["testbed"])
    return lambda: restart_throttle(tb)


def main(argv: list[str]) -> int:
    from mpi4py import MPI

    from pario.mpi import File
    from pario.trace import load

    spec = json.loads(open(argv[0]).read())
    comm = MPI.COMM_WORLD
    rank, size = comm.rank, comm.size
    trace = load(spec["trace"])
    mine = (trace.rank.astype(np.int64) % size) == rank
    hints = {"pario_store": spec["store"], "pario_order": spec["order"], "cb_buffer_size": str(spec["cb_buffer"]),
             "romio_cb_write": "enable", "romio_cb_read": "enable",
             "pario_direct": "true" if spec.get("direct", True) else "false"}
    if spec.get("cb_nodes"):
        hints["cb_nodes"] = str(spec["cb_nodes"])
    counters = _counters(spec) if rank == 0 else None
    restart = _restarter(spec) if rank == 0 else None
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
                if restart:  # no credit from earlier I/O: the call starts like one on idle devices
                    restart()
                comm.Barrier()
                ios0 = counters() if counters else None
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
                ios1 = counters() if counters else None
                ft.Free()
                sched = fh.last_schedule
                ncyc = comm.allreduce(int(getattr(sched, "ncycles", 0) or 0), op=MPI.MAX)
                naggr = len(fh.aggregators)
                nfd, ndirect = data_fds(_server_dirs(fh))
                fds = comm.allreduce(np.array([nfd, ndirect], dtype=np.int64), op=MPI.SUM)
                cgroups = sorted(set(comm.allgather(io_cgroup())))
            finally:
                fh.close()
            calls.append({"file": fname, "op": "write" if op == 1 else "read", "wall_s": wall,
                          "bytes": int(trace.length[sel_all].sum()), "cycles": ncyc, "aggregators": naggr,
                          "data_fds": int(fds[0]), "direct_fds": int(fds[1]), "cgroups": cgroups})
            if ios0 is not None and ios1 is not None:   # requests inside the timed call, per server
                calls[-1]["throttle_ios"] = (ios1[0] - ios0[0]).tolist()
                calls[-1]["device_ios"] = (ios1[1] - ios0[1]).tolist()
    if rank == 0:
        print(json.dumps({"calls": calls, "procs": size, "order": spec["order"]}), flush=True)
    return 0


if __name__ == "__main__":  # pragma: no cover - run under mpiexec
    sys.exit(main(sys.argv[1:]))
