"""``pario workload ior|hpio|tile|btio [options] -o OUT``: generate a benchmark trace.

Sizes accept IOR suffixes (``64k``, ``4m``).  The trace is written with
:func:`pario.trace.save` (``.parquet`` or ``.csv``) and a one-line summary is printed.
Offset formulas: :mod:`pario.workload` and ``docs/workloads.md``.
"""

from __future__ import annotations

import itertools
from pathlib import Path

from ..units import format_size
from ..workload import GENERATORS
from .common import console, size_arg

_OPS = ("write", "read", "both")


def register(sub) -> None:
    p = sub.add_parser("workload", help="generate IOR / HPIO / MPI-Tile-IO / BTIO traces")
    w = p.add_subparsers(dest="workload", metavar="NAME")
    w.required = True

    ior = w.add_parser("ior", help="IOR: sequential, strided (segmented) or random (-z) transfers")
    ior.add_argument("--procs", "-n", type=int, required=True, help="number of processes (-N)")
    ior.add_argument("--xfer", "-t", type=size_arg, required=True, help="transfer size (-t), e.g. 64k")
    ior.add_argument("--block", "-b", type=size_arg, required=True, help="block size (-b), e.g. 4m")
    ior.add_argument("--segments", "-s", type=int, default=1, help="segment count (-s), default 1")
    ior.add_argument("--pattern", choices=("sequential", "strided", "random"), default="sequential",
                     help="sequential: every process walks its own contiguous region; strided: IOR's segmented "
                          "layout, the processes' blocks interleaved segment by segment; random: IOR -z on a "
                          "shared file (default sequential)")
    ior.add_argument("--file-per-proc", "-F", action="store_true", help="one file per process (-F)")
    ior.add_argument("--seed", type=int, default=0, help="srandom() seed for --pattern random (IOR's random seed)")
    ior.add_argument("--collective", "-c", action="store_true", help="mark requests collective (-c)")
    ior.add_argument("--file", default="ior.dat", help="file name in the trace (default ior.dat)")
    _common(ior)
    ior.set_defaults(func=_run, build=lambda a: dict(
        procs=a.procs, xfer=a.xfer, block=a.block, segments=a.segments, pattern=a.pattern, op=a.op,
        file_per_proc=a.file_per_proc, seed=a.seed, collective=a.collective, file=a.file))

    hp = w.add_parser("hpio", help="HPIO c-nc: interleaved regions with spacing")
    hp.add_argument("--procs", "-n", type=int, required=True, help="number of processes")
    hp.add_argument("--region-count", type=int, required=True, help="regions per process (-c)")
    hp.add_argument("--region-size", type=size_arg, required=True, help="bytes per region (-s)")
    hp.add_argument("--region-spacing", type=size_arg, default=0, help="gap after each region (-p), default 0")
    hp.add_argument("--collective", action="store_true", help="mark requests collective (-m 01)")
    hp.add_argument("--file", default="hpio.dat", help="file name in the trace (default hpio.dat)")
    _common(hp)
    hp.set_defaults(func=_run, build=lambda a: dict(
        procs=a.procs, region_count=a.region_count, region_size=a.region_size,
        region_spacing=a.region_spacing, op=a.op, collective=a.collective, file=a.file))

    ti = w.add_parser("tile", help="MPI-Tile-IO: one 2-D tile per process, one request per tile row")
    ti.add_argument("--tiles-x", type=int, required=True, help="tiles per row of the 2-D array (processes in x)")
    ti.add_argument("--tiles-y", type=int, required=True, help="tiles per column (processes in y)")
    ti.add_argument("--elements-x", type=int, required=True, help="tile width in elements")
    ti.add_argument("--elements-y", type=int, required=True, help="tile height in elements")
    ti.add_argument("--element-size", type=size_arg, required=True, help="bytes per element")
    ti.add_argument("--overlap-x", type=int, default=0, help="elements shared with the x neighbour (default 0)")
    ti.add_argument("--overlap-y", type=int, default=0, help="elements shared with the y neighbour (default 0)")
    ti.add_argument("--independent", action="store_true", help="non-collective MPI_File_write/read")
    ti.add_argument("--file", default="tile.dat", help="file name in the trace (default tile.dat)")
    _common(ti)
    ti.set_defaults(func=_run, build=lambda a: dict(
        tiles_x=a.tiles_x, tiles_y=a.tiles_y, elements_x=a.elements_x, elements_y=a.elements_y,
        element_size=a.element_size, overlap_x=a.overlap_x, overlap_y=a.overlap_y, op=a.op,
        collective=not a.independent, file=a.file))

    bt = w.add_parser("btio", help="NAS BTIO full (collective) or simple (independent)")
    bt.add_argument("--class", dest="cls", default="S", type=str.upper,
                    choices=("S", "W", "A", "B", "C", "D", "E"), help="NAS problem class (default S)")
    bt.add_argument("--subtype", choices=("full", "simple"), default="full",
                    help="full: collective write_at_all / read_at_all (mpi_io_full); simple: independent "
                         "write_at / read_at of one x-row each (mpi_io_simple) (default full)")
    bt.add_argument("--procs", "-n", type=int, required=True, help="a square number of processes")
    bt.add_argument("--niter", type=int, default=None, help="time steps (default: the class's)")
    bt.add_argument("--file", default=None, help="file name (default btio.<subtype>.out)")
    _common(bt)
    bt.set_defaults(func=_run, build=lambda a: dict(
        cls=a.cls, subtype=a.subtype, procs=a.procs, op=a.op, niter=a.niter, file=a.file))


def _common(p) -> None:
    p.add_argument("--op", choices=_OPS, default="write",
                   help="write, read, or both (write phase then read phase)")
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="output trace (.parquet or .csv)")


def _run(args) -> int:
    from ..trace import save

    if args.workload == "ior" and Path(args.output).suffix.lower() in (".parquet", ".pq"):
        return _run_ior_streaming(args)
    trace = GENERATORS[args.workload](**args.build(args))
    path = save(trace, args.output)
    _report(args.workload, len(trace), trace.nranks, len(trace.files), trace.bytes_written, trace.bytes_read, path)
    return 0


def _report(name, n, nranks, nfiles, written, read, path) -> None:
    console.print(
        f"{name}: {n} requests, {nranks} ranks, {nfiles} "
        f"file{'s' if nfiles != 1 else ''}, {format_size(written)} written, "
        f"{format_size(read)} read -> {path}",
        soft_wrap=True,
    )


def _run_ior_streaming(args) -> int:
    """IOR to Parquet in chunks (:func:`pario.workload.ior.ior_chunks`): the same file as
    generating the whole trace and saving it, in bounded memory (10^8 requests and more)."""
    from ..trace import READ, WRITE
    from ..trace.io import ParquetTraceWriter, progress_bar
    from ..workload.ior import ior_chunks

    gen = ior_chunks(**args.build(args))
    total = next(gen)
    first = next(gen, None)
    files = first.files if first is not None else ()
    n = nranks = written = read = 0
    with progress_bar(f"writing {Path(args.output).name}", total) as bar, \
            ParquetTraceWriter(args.output, files) as w:
        for t in (itertools.chain([first], gen) if first is not None else ()):
            w.write(t)
            n += len(t)
            nranks = max(nranks, t.nranks)
            op, ln = t.op, t.length
            written += int(ln[op == WRITE].sum())
            read += int(ln[op == READ].sum())
            bar.update(n, total)
    _report("ior", n, nranks, len(files), written, read, w.path)
    return 0
