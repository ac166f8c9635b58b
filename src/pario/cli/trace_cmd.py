"""``pario trace``: import Darshan DXT logs and show traces.

* ``pario trace import LOG.darshan -o OUT.parquet [--module DXT_MPIIO|DXT_POSIX | --counters]``
* ``pario trace show TRACE [--json] [--module ...]`` — TRACE is ``.parquet``, ``.csv`` or a
  ``.darshan`` log (imported on the fly).
* ``pario trace run [--procs N] [-o TRACE] [--mpiexec PATH] -- PROGRAM ARGS`` — run an MPI
  program under the pario MPI-IO tracer (pario.trace.launch) and save its trace.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from contextlib import contextmanager
from pathlib import Path

from .. import ParioError
from .common import add_placement_args, placement_of
from ..units import format_size

_MODULE_CHOICES = ("DXT_MPIIO", "DXT_POSIX")


@contextmanager
def _warnings_as_lines():
    """Show every warning raised inside as one ``pario: warning: …`` line on stderr."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        finally:
            for w in caught:
                msg = " ".join(str(w.message).split())
                print(f"pario: warning: {msg}", file=sys.stderr)


def _module_arg(text: str) -> str:
    t = text.strip().upper().replace("-", "_")
    if t in ("MPIIO", "MPI_IO"):
        t = "DXT_MPIIO"
    if t == "POSIX":
        t = "DXT_POSIX"
    if t not in _MODULE_CHOICES:
        raise argparse.ArgumentTypeError(f"invalid module {text!r} (choose DXT_MPIIO or DXT_POSIX)")
    return t


def register(subparsers) -> None:
    p = subparsers.add_parser("trace", help="import Darshan logs, show traces",
                              description="Import Darshan DXT logs and show request traces.")
    sub = p.add_subparsers(dest="trace_command", metavar="SUBCOMMAND")
    sub.required = True

    imp = sub.add_parser("import", help="convert a Darshan DXT log to a trace file",
                         description="Convert a Darshan DXT log (.darshan) to a Parquet or CSV trace.")
    imp.add_argument("log", metavar="LOG.darshan", help="Darshan log recorded with DXT_ENABLE_IO_TRACE=1")
    imp.add_argument("-o", "--output", required=True, metavar="OUT",
                     help="output trace (.parquet or .csv)")
    src = imp.add_mutually_exclusive_group()
    src.add_argument("--module", type=_module_arg, default=None, metavar="DXT_MPIIO|DXT_POSIX",
                     help="DXT module to import (default: DXT_MPIIO when it has data, with files accessed "
                          "through MPI file views taken from DXT_POSIX; else DXT_POSIX)")
    src.add_argument("--counters", action="store_true",
                     help="synthesize an approximate trace from the log's counters even when it has DXT data")
    imp.set_defaults(func=_cmd_import)

    show = sub.add_parser("show", help="summarise a trace: totals, request sizes, access patterns",
                          description="Summarise a trace (.parquet, .csv or a .darshan log).")
    show.add_argument("trace", metavar="TRACE", help="trace file (.parquet, .csv) or Darshan log (.darshan)")
    show.add_argument("--json", action="store_true", help="print the summary as JSON")
    show.add_argument("--module", type=_module_arg, default=None, metavar="DXT_MPIIO|DXT_POSIX",
                      help="for a .darshan TRACE: DXT module to import")
    show.set_defaults(func=_cmd_show)
    _register_run(sub)


def _load_any(path: str, module: str | None):
    from ..trace import load
    from ..trace.darshan import import_darshan

    if Path(path).suffix.lower() == ".darshan":
        return import_darshan(path, module=module).require_requests(path)
    if module is not None:
        raise ParioError("--module applies only to .darshan logs")
    return load(path).require_requests(path)


def _cmd_import(args) -> int:
    from ..trace import save
    from ..trace.darshan import read_darshan
    from ..trace.io import _fmt

    from ..trace.io import progress_bar

    _fmt(Path(args.output), write=True)  # fail on a bad output name before reading the log
    with progress_bar(f"importing {Path(args.log).name}") as bar:
        with _warnings_as_lines():
            res = read_darshan(args.log, module=args.module, counters=args.counters)
        tr = res.trace
        bar.stage(f"writing {Path(args.output).name}")
        bar.tick()
        out = save(tr, args.output)
    nfiles = len(tr.files)
    nio = len(set(tr.rank.tolist())) if len(tr) else 0
    procs = f" of {tr.meta.nprocs} processes" if tr.meta.nprocs else ""
    print(f"{Path(args.log).name}: {len(tr)} requests ({res.module}) from {nio} ranks{procs} on "
          f"{nfiles} file{'s' if nfiles != 1 else ''}, {format_size(tr.bytes_written)} written, "
          f"{format_size(tr.bytes_read)} read{' (partial)' if res.partial else ''}"
          f"{' (approximate)' if tr.meta.approximate else ''} -> {out}")
    return 0


def _cmd_show(args) -> int:
    from ..trace.io import progress_bar
    from ..trace.summary import summarize, summarize_file
    from .common import print_json

    s = None
    if args.module is None and Path(args.trace).suffix.lower() in (".parquet", ".pq") and Path(args.trace).is_file():
        # Parquet: stream the row groups (bounded memory); the same summary as the whole trace's
        with progress_bar(f"reading {Path(args.trace).name}") as bar:
            got = summarize_file(args.trace, where=str(args.trace), progress=bar.update)
        if got is not None:
            s, meta_nprocs = got
    if s is None:
        with _warnings_as_lines():
            trace = _load_any(args.trace, args.module)
        s, meta_nprocs = summarize(trace), trace.meta.nprocs
    if args.json:
        print_json(s)
        return 0
    print_summary(s, str(args.trace), meta_nprocs)
    return 0


def show_summary(trace, title: str = "trace") -> None:
    """Print the summary tables of a trace (totals, files, request sizes, patterns)."""
    from ..trace.summary import summarize

    print_summary(summarize(trace), title, trace.meta.nprocs)


def print_summary(s: dict, title: str = "trace", meta_nprocs: int | None = None) -> None:
    """Print the summary tables of :func:`pario.trace.summary.summarize`'s dictionary ``s``;
    ``meta_nprocs``: the process count the trace's metadata records (or None)."""
    from ..trace.summary import rank_ranges
    from .common import console
    from rich.markup import escape
    from rich.table import Table

    approx = s["approximate"]
    tot = Table(title=escape(title) + (" [bold red](APPROXIMATE)[/]" if approx else ""), show_header=False,
                title_justify="left")
    tot.add_column("what")
    tot.add_column("value")
    if approx:
        tot.add_row("[bold red]APPROXIMATE[/]", escape(approx))
    if s["source"]:
        tot.add_row("source", escape(s["source"]))
    if meta_nprocs:
        tot.add_row("ranks", f"{s['ranks_with_io']} with I/O of {s['nprocs']} processes")
    else:
        tot.add_row("ranks", f"{s['ranks']} ({s['ranks_with_io']} with I/O)")
    if s["aggregators"]:
        tot.add_row("aggregators", f"{len(s['aggregators'])} (ranks {rank_ranges(s['aggregators'])})")
    if s["hints"]:
        tot.add_row("hints", escape(", ".join(f"{k}={v}" for k, v in s["hints"].items())))
    if s["partial"]:
        tot.add_row("partial", "yes: the source lost requests (DXT buffer full)")
    tot.add_row("files", str(len(s["files"])))
    tot.add_row("requests", f"{s['requests']} ({s['writes']} writes, {s['reads']} reads)")
    tot.add_row("bytes written", format_size(s["bytes_written"]))
    tot.add_row("bytes read", format_size(s["bytes_read"]))
    tot.add_row("collective requests", str(s["collective"]))
    if s["time"]:
        tot.add_row("time span", f"{s['time']['start']:.6f} .. {s['time']['end']:.6f} s")
    if s["command"]:
        tot.add_row("command", escape(s["command"]))
    console.print(tot)
    for note in s["notes"]:
        console.print(f"note: {escape(note)}", highlight=False)

    files = s["files"]
    if len(files) > 1:
        ft = Table(title="files", title_justify="left")
        for col, just in (("file", "left"), ("ranks", "right"), ("requests", "right"),
                          ("written", "right"), ("read", "right")):
            ft.add_column(col, justify=just)
        shown = sorted(files, key=lambda f: -(f["bytes_read"] + f["bytes_written"]))
        for f in shown[:20]:
            ft.add_row(escape(f["name"]), str(f["ranks"]), str(f["requests"]),
                       format_size(f["bytes_written"]), format_size(f["bytes_read"]))
        if len(shown) > 20:
            ft.caption = f"{len(shown) - 20} more files not shown (see --json)"
        console.print(ft)

    if s["size_histogram"]:
        ht = Table(title="request sizes", title_justify="left")
        for col in ("size", "requests", "writes", "reads", "bytes"):
            ht.add_column(col, justify="left" if col == "size" else "right")
        for b in s["size_histogram"]:
            ht.add_row(b["bin"], str(b["count"]), str(b["writes"]), str(b["reads"]), format_size(b["bytes"]))
        console.print(ht)

    # patterns, condensed: one row per (file, kind, stride) with the ranks that share it
    groups: dict[tuple, dict] = {}
    for r, per_file in s["patterns"].items():
        for fname, p in per_file.items():
            key = (fname, p["kind"], p["stride"])
            g = groups.setdefault(key, {"ranks": [], "requests": 0, "bytes": 0})
            g["ranks"].append(int(r))
            g["requests"] += p["requests"]
            g["bytes"] += p["bytes"]
    if groups:
        pt = Table(title="access patterns per rank and file (CEDA §4.2)", title_justify="left")
        for col, just in (("ranks", "left"), ("file", "left"), ("pattern", "left"), ("stride", "right"),
                          ("requests", "right"), ("bytes", "right")):
            pt.add_column(col, justify=just)
        rows = sorted(groups.items(), key=lambda kv: (kv[0][0], min(kv[1]["ranks"])))
        for (fname, kind, stride), g in rows[:50]:
            pt.add_row(rank_ranges(g["ranks"]), escape(fname), kind,
                       "" if stride is None else format_size(stride) if stride >= 0 else f"-{format_size(-stride)}",
                       str(g["requests"]), format_size(g["bytes"]))
        if len(rows) > 50:
            pt.caption = f"{len(rows) - 50} more rows not shown (see --json)"
        console.print(pt)


def _register_run(sub) -> None:
    run = sub.add_parser("run", help="run an MPI program under the pario MPI-IO tracer and save its trace",
                         description="Run PROGRAM on N MPI processes with the pario tracer preloaded: every "
                                     "MPI-IO call, its file extents through the file view, its times, the "
                                     "hints and the two-phase aggregators (docs/traces.md).")
    run.add_argument("--procs", "-n", default="1", metavar="N", help="number of MPI processes (default 1)")
    run.add_argument("-o", "--output", default=None, metavar="TRACE",
                     help="output trace, .parquet or .csv (default: PROGRAM.parquet here)")
    run.add_argument("--mpiexec", default=None, metavar="PATH",
                     help="mpiexec to use (default: the one beside this Python, else the first on PATH)")
    add_placement_args(run)
    run.add_argument("program", nargs=argparse.REMAINDER, metavar="-- PROGRAM ARGS",
                     help="the MPI program and its arguments (a .py program runs with this Python)")
    run.set_defaults(func=_cmd_run)


def _cmd_run(args) -> int:
    from ..trace.launch import run_traced

    argv = args.program[1:] if args.program[:1] == ["--"] else args.program
    if not argv:
        raise ParioError("pario trace run: no PROGRAM given (pario trace run [OPTIONS] -- PROGRAM ARGS)")
    out = Path(args.output or f"{Path(argv[0]).stem}.parquet")
    tr = run_traced(argv, args.procs, out, mpiexec=args.mpiexec, place=placement_of(args))
    import numpy as np

    nfiles, ranks = len(tr.files), len(np.unique(tr.rank))
    calls = len(np.unique(np.stack([tr.rank.astype(np.int64), tr.call], axis=1), axis=0)) if len(tr) else 0
    print(f"{Path(argv[0]).name}: {len(tr)} requests in {calls} calls from {ranks} of {tr.nprocs} ranks on "
          f"{nfiles} file{'s' if nfiles != 1 else ''}, {format_size(tr.bytes_written)} written, "
          f"{format_size(tr.bytes_read)} read{' (partial)' if tr.meta.partial else ''} -> {out}")
    return 0
