"""Run any MPI program under the pario tracer and keep its trace.

:func:`run_traced` starts ``mpiexec -n PROCS PROGRAM ARGS`` with ``libpario_trace.so``
preloaded (``LD_PRELOAD``, put before any the caller already has) and ``PARIO_TRACE_DIR``
naming a fresh directory beside the output (on a cluster it must be visible to every node,
like the output), waits, reads the directory (:mod:`pario.trace.native`), saves the trace
(Parquet or CSV by the output's suffix) and removes the directory.  The program's output
goes to this process's stdout and stderr as it comes.  ``mpiexec`` and the command line
are :mod:`pario.run.launch`'s (a ``.py`` program runs as ``python -m mpi4py PROGRAM``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections import deque
from pathlib import Path

from .. import ParioError
from ..run.launch import find_mpiexec, mpi_command, parse_procs
from ..native import build_hint
from ..native.build import LIB_NAME, NATIVE
from .core import Trace


def tracer_library() -> Path:
    """The built tracer library (the install builds it; in a checkout ``scripts/setup.sh``),
    or a ParioError."""
    lib = NATIVE / LIB_NAME
    if not lib.exists():
        raise ParioError(f"the pario tracer is not built ({LIB_NAME}): {build_hint()}")
    return lib


def preload_env(env: dict, lib: Path, tdir: Path | None = None) -> dict:
    """``env`` with ``lib`` preloaded (before any library the caller preloads) and, with
    ``tdir``, its trace records going there (without: no tracing, serving only)."""
    out = {k: v for k, v in env.items() if k != "PARIO_TRACE_DIR"}
    out["LD_PRELOAD"] = f"{lib}:{env['LD_PRELOAD']}" if env.get("LD_PRELOAD") else str(lib)
    if tdir is not None:
        out["PARIO_TRACE_DIR"] = str(tdir)
    return out


def _pump(stream, sink, tail: deque) -> None:
    """Copy the program's stderr through, keeping its last lines."""
    for line in iter(stream.readline, b""):
        sink.write(line)
        sink.flush()
        if line.strip():
            tail.append(line)
    stream.close()


def run_traced(argv: list[str], procs: int, out: str | os.PathLike, mpiexec: str | os.PathLike | None = None,
               env: dict[str, str] | None = None, place: list[str] | tuple = ()) -> Trace:
    """Run ``argv`` on ``procs`` MPI processes under the tracer; save and return its trace.

    ``env`` replaces this process's environment for the program (the tracer's two
    variables are added to it).  A program that exits nonzero raises a ParioError with its
    status and last stderr line (the requests it recorded are still saved to ``out``,
    marked partial when the program did not reach MPI_Finalize).  ``place``: mpiexec's
    options placing the ranks on nodes (:func:`pario.run.launch.placement`; the records go
    to a directory beside ``out``, which every node must see)."""
    from .io import _fmt, save
    from .native import read_native

    if not argv:
        raise ParioError("no program to run")
    procs = parse_procs(procs)
    out = Path(out)
    _fmt(out, write=True)
    if not out.parent.is_dir():
        raise ParioError(f"{out.parent}: no such directory for the trace")
    lib = tracer_library()
    cmd = mpi_command(find_mpiexec(None if mpiexec is None else str(mpiexec)), procs, str(argv[0]),
                      [str(a) for a in argv[1:]], place)
    tdir = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    e = preload_env(dict(os.environ if env is None else env), lib, tdir)
    tail: deque = deque(maxlen=1)
    try:
        try:
            proc = subprocess.Popen(cmd, env=e, stderr=subprocess.PIPE)
        except OSError as exc:
            raise ParioError(f"cannot run {cmd[0]}: {exc.strerror or exc}") from None
        pump = threading.Thread(target=_pump, args=(proc.stderr, sys.stderr.buffer if hasattr(sys.stderr, "buffer")
                                                    else _TextSink(sys.stderr), tail), daemon=True)
        pump.start()
        try:
            rc = proc.wait()
        except KeyboardInterrupt:
            proc.kill()
            proc.wait()
            raise
        pump.join()
        if rc != 0:
            last = tail[-1].decode(errors="replace").strip() if tail else "(no message)"
            saved = ""
            try:
                got = read_native(tdir)
                if len(got):
                    save(got, out)
                    saved = f"; the {len(got)} requests it made are saved to {out}"
                    saved += " (a partial trace)" if got.meta.partial else ""
            except ParioError:
                pass
            why = f"was killed by signal {-rc}" if rc < 0 else f"exited with status {rc}"
            raise ParioError(f"{Path(str(argv[0])).name} {why}: {last}{saved}")
        trace = read_native(tdir)
        save(trace, out)
        return trace
    finally:
        shutil.rmtree(tdir, ignore_errors=True)


class _TextSink:
    """A bytes writer over a text stream (stderr replaced by one without ``buffer``)."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, data: bytes) -> None:
        self.stream.write(data.decode(errors="replace"))

    def flush(self) -> None:
        self.stream.flush()
