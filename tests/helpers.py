"""Support shared by the tests in every folder of tests/ (tests/conftest.py puts tests/ on
sys.path, so ``from helpers import ...`` works from tests/trace/, tests/store/, ...): the
repository's paths, the shared data beside it, the MPICH wheel's mpiexec, pario's CLI run in
this process or in a child, and the random-I/O oracle of the store tests."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import shutil
import sys
from pathlib import Path
from types import ModuleType

import numpy as np

ROOT = Path(__file__).resolve().parents[1]          # the repository (the worktree)
TESTS = ROOT / "tests"
C_DIR = TESTS / "c"                                  # the tests' C drivers and MPI programs
MPI_DIR = TESTS / "mpi"                              # the Python programs run under mpiexec
SHARED = ROOT.parent / "shared"                      # ../shared: traces and clients beside the repository
TRACES = SHARED / "traces"
IOR_SRC = SHARED / "clients" / "ior"
VENV_BIN = Path(sys.executable).parent
# ``pario ARGS`` as a child process of this interpreter (the pario this interpreter imports)
PARIO = [sys.executable, "-c", "import sys; from pario.cli import main; sys.exit(main())"]


def load_script(rel: str, name: str, *, register: bool = False) -> ModuleType:
    """The repository's script ``ROOT/REL`` (scripts/, stress/, bench/: not a package) loaded
    as a new module called ``name``; ``register``: also put in sys.modules under that name
    (a script whose dataclasses look their module up there)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / rel)
    mod = importlib.util.module_from_spec(spec)
    if register:
        sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def on_path(folder: str) -> None:
    """Put the test folder ``tests/FOLDER`` on sys.path, as pytest's default (prepend) import
    mode does for the folder of each test file it collects, so that a test of another folder
    can import helpers from one of its test modules (the same module object pytest uses)."""
    d = str(TESTS / folder)
    if d not in sys.path:
        sys.path.insert(0, d)


def mpiexec_path() -> str | None:
    """The MPICH wheel's mpiexec beside this interpreter, else one on PATH, else None."""
    cand = VENV_BIN / "mpiexec"
    return str(cand) if cand.exists() else shutil.which("mpiexec")


def run_cli(*argv) -> tuple[int, str, str]:
    """``pario ARGV`` in this process: (exit status, stdout, stderr)."""
    from pario.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main([str(a) for a in argv])
        except SystemExit as exc:            # argparse
            rc = exc.code if isinstance(exc.code, int) else 2
    return rc, out.getvalue(), err.getvalue()


def random_io(f, rng, steps: int, span: int, maxlen: int, maxread: int) -> bytearray:
    """``steps`` random writes into ``[0, span + maxlen)`` of the open store file ``f``, each
    followed by a random read checked against an in-memory bytearray; returns the bytearray
    (the expected file)."""
    ref = bytearray()
    for _ in range(steps):
        off, n = int(rng.integers(0, span)), int(rng.integers(1, maxlen))
        d = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        f.write(off, d)
        ref.extend(bytes(max(0, off + n - len(ref))))
        ref[off:off + n] = d
        o, m = int(rng.integers(0, len(ref))), int(rng.integers(0, maxread))
        assert f.read(o, m) == bytes(ref[o:o + m])
    return ref


def expected_from_trace(trace, name: str) -> np.ndarray:
    """The file tests/c/tracer_styles.c's writes make, from the run's own trace: each write
    extent of rank r holds the byte r, later calls over earlier ones (in order of start time)."""
    f = trace.files.index(name)
    m = (trace.file == f) & (trace.op == 1)
    off, ln, rank, start = trace.offset[m], trace.length[m], trace.rank[m], trace.start[m]
    size = int((off + ln).max()) if len(off) else 0
    out = np.zeros(size, dtype=np.uint8)
    for k in np.argsort(start, kind="stable"):
        out[off[k]:off[k] + ln[k]] = rank[k]
    return out
