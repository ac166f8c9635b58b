"""Helpers shared by the CLI command modules: loading inputs, printing JSON and tables."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console

from .. import ParioError
from ..jsonutil import dump, dumps as jsonutil_dumps
from ..units import parse_size

import os as _os

# Wide enough for per-server tables when output is not a terminal (pipes, CI logs).
console = Console(highlight=False, width=None if sys.stdout.isatty() or _os.environ.get("COLUMNS") else 132)


def size_arg(text: str) -> int:
    """argparse ``type=`` for sizes with IOR suffixes (``64k``, ``4m``)."""
    try:
        return parse_size(text)
    except ParioError as exc:
        import argparse

        raise argparse.ArgumentTypeError(str(exc)) from None


def _default(o: Any):
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.bool_):
        return bool(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def print_json(obj: Any) -> None:
    """``obj`` as indented JSON on stdout (:func:`pario.jsonutil.dump`: lists of numbers on
    one line, rows a line each, fast for a plan's millions of replica extents)."""
    dump(obj, sys.stdout, default=_default)
    sys.stdout.write("\n")


def dumps(obj: Any) -> str:
    """``obj`` as the same JSON text :func:`print_json` prints."""
    return jsonutil_dumps(obj, default=_default)


def load_trace_arg(path: str):
    """A trace named on the command line: readable, and with requests that move bytes (a
    progress bar on a terminal when reading takes long)."""
    from ..trace import load
    from ..trace.io import progress_bar

    with progress_bar(f"reading {Path(path).name}") as bar:
        trace = load(path, progress=bar.update) if str(path).lower().endswith((".parquet", ".pq")) else load(path)
    return trace.require_requests(str(path))


def add_server_args(p) -> None:
    """--hdd/--ssd and their throttles: the servers of ``pario testbed up`` and ``pario cluster up``."""
    p.add_argument("--hdd", type=int, default=2, metavar="N", help="HDD-like servers H0.. (default 2)")
    p.add_argument("--ssd", type=int, default=2, metavar="M", help="SSD-like servers S0.. (default 2)")
    p.add_argument("--hdd-iops", type=int, default=None, metavar="X", help="HDD IOPS limit (default 250)")
    p.add_argument("--hdd-bps", type=size_arg, default=None, metavar="Y", help="HDD bytes/s limit (default 120m)")
    p.add_argument("--ssd-iops", type=int, default=None, metavar="X", help="SSD IOPS limit (default 2000)")
    p.add_argument("--ssd-bps", type=size_arg, default=None, metavar="Y", help="SSD bytes/s limit (default 400m)")


def add_placement_args(p) -> None:
    """The options users give mpiexec to place ranks on nodes (passed to hydra, checked first:
    pario.run.launch.placement)."""
    p.add_argument("--hosts", default=None, metavar="H1,H2", help="nodes for the ranks (mpiexec -hosts; NAME or NAME:SLOTS)")
    p.add_argument("--hostfile", default=None, metavar="FILE", help="a hydra host file (mpiexec -f)")
    p.add_argument("--launcher", default=None, metavar="NAME", help="how mpiexec starts ranks on nodes (ssh, slurm, ...)")
    p.add_argument("--launcher-exec", default=None, metavar="PATH", help="the launcher's program (mpiexec -launcher-exec)")


def placement_of(args) -> list[str]:
    from ..run.launch import placement

    return placement(args.hosts, args.hostfile, args.launcher, args.launcher_exec)
