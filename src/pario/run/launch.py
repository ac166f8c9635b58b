"""Launching an MPI program for ``pario run``: which ``mpiexec``, the command line, and one
run in its own process group (killed as a whole on timeout).

``mpiexec`` is the one next to the Python interpreter (the ``mpich`` wheel puts it in the
venv's ``bin``), else the first on ``PATH``.  A ``.py`` program runs with this interpreter,
as ``python -m mpi4py PROGRAM``: an uncaught exception in one rank calls ``MPI_Abort``
instead of leaving the other ranks in a collective forever (the raising rank's
``MPI_Finalize`` blocks).  A failed run is one :class:`pario.ParioError` line naming the
program's last meaningful output line (hydra's banner lines are skipped).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from .. import ParioError


def find_mpiexec(explicit: str | None = None) -> str:
    """``explicit`` (checked to be executable), else the mpiexec next to this Python, else PATH's."""
    if explicit:
        if not (Path(explicit).is_file() and os.access(explicit, os.X_OK)):
            raise ParioError(f"--mpiexec {explicit}: not an executable file")
        return explicit
    cand = Path(sys.executable).parent / "mpiexec"
    if cand.exists():
        return str(cand)
    found = shutil.which("mpiexec")
    if found is None:
        raise ParioError("mpiexec not found (pip install mpich mpi4py, or pass --mpiexec)")
    return found


def parse_procs(text) -> int:
    """The number of MPI processes (``--procs``): an integer >= 1."""
    try:
        n = int(text)
    except (TypeError, ValueError):
        raise ParioError(f"--procs {text!r}: not an integer") from None
    if n < 1:
        raise ParioError(f"--procs {n}: need at least 1 process")
    return n


_HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(:[0-9]+)?")
_LAUNCHER = re.compile(r"[a-z][a-z0-9_-]*")


def placement(hosts: str | None = None, hostfile: str | None = None, launcher: str | None = None,
              launcher_exec: str | None = None) -> list[str]:
    """The ``mpiexec`` (hydra) options that place the ranks on nodes, each checked first:
    ``hosts`` "n1,n2" or "n1:4,n2:4" (``-hosts``), ``hostfile`` (``-f``), ``launcher``
    ("ssh", "slurm", ...: ``-launcher``), ``launcher_exec`` (the launcher's program:
    ``-launcher-exec``).  Empty: the ranks run on this machine."""
    out: list[str] = []
    if hosts is not None and hostfile is not None:
        raise ParioError("--hosts and --hostfile: give one of them")
    if hosts is not None:
        names = hosts.split(",")
        if not all(_HOST.fullmatch(h) for h in names):
            raise ParioError(f"--hosts {hosts!r}: expected host names separated by commas (NAME or NAME:SLOTS)")
        out += ["-hosts", hosts]
    if hostfile is not None:
        if not Path(hostfile).is_file():
            raise ParioError(f"--hostfile {hostfile}: no such file")
        out += ["-f", str(Path(hostfile).resolve())]
    if launcher is not None:
        if not _LAUNCHER.fullmatch(launcher):
            raise ParioError(f"--launcher {launcher!r}: not a launcher name (ssh, rsh, slurm, ...)")
        out += ["-launcher", launcher]
    if launcher_exec is not None:
        p = Path(launcher_exec)
        if not (p.is_file() and os.access(p, os.X_OK)):
            raise ParioError(f"--launcher-exec {launcher_exec}: not an executable file")
        out += ["-launcher-exec", str(p.resolve())]
    return out


def mpi_command(mpiexec: str, n: int, program: str, args: list[str], place: list[str] | tuple = ()) -> list[str]:
    """``mpiexec [PLACE] -n N PROGRAM ARGS`` (``python -m mpi4py PROGRAM`` for a ``.py``
    program; PLACE: :func:`placement`'s options)."""
    path = Path(program)
    if not path.exists():
        found = shutil.which(program)
        if found is None:
            raise ParioError(f"program {program!r} not found")
        path = Path(found)
    elif path.is_dir():
        raise ParioError(f"program {program!r} is a directory")
    if path.suffix == ".py":
        import importlib.util

        runner = ["-m", "mpi4py"] if importlib.util.find_spec("mpi4py") is not None else []
        prog = [sys.executable, *runner, str(path.resolve())]
    else:
        prog = [str(path.absolute())]     # not resolve(): a venv's python is a link out of the venv
    return [mpiexec, *place, "-n", str(n), *prog, *args]


def launch(cmd: list[str], env: dict, log: Path, timeout: float | None, label: str) -> tuple[float, str]:
    """Run ``cmd`` (mpiexec) in its own process group; (wall seconds, combined output), the
    output also written to ``log``.  On timeout the whole group (mpiexec, its proxies and the
    ranks) is killed, so that no rank is left behind."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=5)
                break
            except subprocess.TimeoutExpired:
                continue
        out, _ = proc.communicate()
        log.write_text(out or "")
        raise ParioError(f"{label} timed out after {timeout:g} s (output in {log})") from None
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    wall = time.perf_counter() - t0
    log.write_text(out)
    if proc.returncode != 0:
        tail = [l for l in out.strip().splitlines() if l.strip() and not mpiexec_noise(l)][-1:] or ["(no output)"]
        raise ParioError(f"{label} failed (exit {proc.returncode}): {tail[0].strip()[:200]} (full output in {log})")
    return wall, out


_NOISE = ("BAD TERMINATION", "YOUR APPLICATION", "This typically", "Please see the FAQ", "PID ", "EXIT CODE",
          "CLEANING UP", "YOU CAN IGNORE", "Abort(")


def mpiexec_noise(line: str) -> bool:
    """mpiexec's (hydra's) banner lines around a failed run."""
    t = line.strip()
    return t.startswith("=") and (set(t) == {"="} or any(k in t for k in _NOISE)) or any(t.startswith(k) for k in _NOISE)
