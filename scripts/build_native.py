"""Build pario's C code (src/pario/native/) in place; run by scripts/setup.sh.

Builds ``pario.native._rmt`` (the RMT core as a Python extension: rmt.h) from the C11
sources, ``-Wall -Wextra`` with warnings as errors, and ``libpario_trace.so`` (the MPI-IO
tracer, LD_PRELOADed by ``pario trace run``: tracer/) with ``mpicc`` (skipped, with a
message, when there is no ``mpicc``).  Rebuilds only when a source or header
is newer than the built module (or ``--force``).  The compiler is ``$CC`` if set, else the
C compiler that the MPICH wheel's ``mpicc`` wraps (``mpicc -show``: the RMT core does not
link MPI), else ``cc``.

    python scripts/build_native.py [--force] [--quiet]
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NATIVE = ROOT / "src" / "pario" / "native"
RMT_SOURCES = ["crc32.c", "rmt_index.c", "rmt_log.c", "locks.c", "rmt.c", "pyrmt.c"]
CFLAGS = ["-std=c11", "-O2", "-g", "-Wall", "-Wextra", "-Werror", "-fPIC", "-fvisibility=hidden"]
TRACER = NATIVE / "tracer"
# The tracer's datatype flattening and file-view mapping (tracer/flatten.h): linked into
# libpario_trace.so with the interposition layer, and into tests/c/flatten_driver.c.
TRACER_FLATTEN_SOURCES = ["flatten.c", "view.c"]
# The tracer's interposition layers and record stream (docs/traces.md, "Tracer: MPI-IO
# interposition"), linked with TRACER_FLATTEN_SOURCES into TRACER_LIB.
TRACER_SOURCES = ["runtime.c", "mpiio.c", "posix.c", "records.c", "handles.c", "jsonbuf.c", "serve.c"]
TRACER_LIB = NATIVE / "libpario_trace.so"
# pario's store data path in C (docs/serve.md: store.json and meta.db, layouts, data files,
# CEDA redirection and hybrid routing with the RMT core), linked into TRACER_LIB with the
# RMT core (RMT_CORE_SOURCES) so that the ranks of an MPI program serve store files without
# Python; no MPI (tests/c/serve_driver.c links them with the system compiler).  The data files
# are behind serve/datafile.h: datafile_local.c (server directories), datafile_rados.c (RADOS
# objects; librados loaded with dlopen when a rados store is opened: no link dependency).
SERVE = NATIVE / "serve"
SERVE_SOURCES = ["json.c", "meta.c", "layout.c", "datafile_local.c", "datafile_rados.c", "storefile.c", "redirect.c",
                 "lazysync.c"]
# pario's two-phase collective I/O and request orders in C (docs/serve-twophase.md): MPI,
# linked into TRACER_LIB only (tracer/serve.c calls them for collective calls on served files)
SERVE_MPI_SOURCES = ["twophase.c", "order.c"]
RMT_CORE_SOURCES = [s for s in RMT_SOURCES if s != "pyrmt.c"]


def compiler() -> list[str]:
    if os.environ.get("CC"):
        return shlex.split(os.environ["CC"])
    mpicc = Path(sys.executable).parent / "mpicc"
    if mpicc.exists():
        try:
            out = subprocess.run([str(mpicc), "-show"], capture_output=True, text=True, timeout=30).stdout.split()
            if out:
                return [out[0]]
        except (OSError, subprocess.SubprocessError):
            pass
    return ["cc"]


def mpicc() -> list[str]:
    """The MPICH wheel's ``mpicc`` beside this Python, else ``$MPICC``, else ``mpicc``."""
    cand = Path(sys.executable).parent / "mpicc"
    if cand.exists():
        return [str(cand)]
    return shlex.split(os.environ.get("MPICC", "mpicc"))


def compile_tracer_flatten(out_dir: Path) -> list[Path]:
    """Compile TRACER_FLATTEN_SOURCES with ``mpicc`` into objects in ``out_dir``; their paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    objs = []
    for src in TRACER_FLATTEN_SOURCES:
        obj = out_dir / (Path(src).stem + ".o")
        cmd = [*mpicc(), *CFLAGS, f"-I{TRACER}", "-c", str(TRACER / src), "-o", str(obj)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.stderr.write(" ".join(cmd) + "\n" + r.stdout + r.stderr)
            raise SystemExit(f"build_native: compiling tracer/{src} failed")
        objs.append(obj)
    return objs


def serve_driver_command(driver_src: Path, exe: Path) -> list[str]:
    """The command that builds a non-MPI C program linked with SERVE_SOURCES and the RMT core
    (tests/c/serve_driver.c), with the C compiler of :func:`compiler`."""
    srcs = [SERVE / s for s in SERVE_SOURCES] + [NATIVE / s for s in RMT_CORE_SOURCES]
    return [*compiler(), *CFLAGS, f"-I{SERVE}", f"-I{NATIVE}", str(driver_src), *map(str, srcs), "-o", str(exe),
            "-ldl", "-lpthread", "-lm"]


def build(force: bool = False, quiet: bool = False) -> Path:
    target = NATIVE / ("_rmt" + sysconfig.get_config_var("EXT_SUFFIX"))
    deps = [NATIVE / s for s in RMT_SOURCES] + list(NATIVE.glob("*.h"))
    if not force and target.exists() and all(d.stat().st_mtime <= target.stat().st_mtime for d in deps):
        return target
    inc = sysconfig.get_paths()["include"]
    tmp = target.with_name(target.name + ".tmp")
    # PyInit__rmt must stay visible: -fvisibility=hidden hides only the core's own symbols
    cmd = [*compiler(), *CFLAGS, "-shared", f"-I{inc}", f"-I{NATIVE}",
           *[str(NATIVE / s) for s in RMT_SOURCES], "-o", str(tmp), "-lpthread"]
    if not quiet:
        print("building", target.relative_to(ROOT), flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.stderr.write(" ".join(cmd) + "\n" + r.stdout + r.stderr)
        raise SystemExit(f"build_native: compiling {target.name} failed")
    os.replace(tmp, target)
    return target


def build_tracer(force: bool = False, quiet: bool = False) -> Path | None:
    """Build TRACER_LIB with ``mpicc`` (when stale); None when there is no ``mpicc``."""
    srcs = ([TRACER / s for s in TRACER_SOURCES + TRACER_FLATTEN_SOURCES]
            + [SERVE / s for s in SERVE_SOURCES + SERVE_MPI_SOURCES]
            + [NATIVE / s for s in RMT_CORE_SOURCES])
    deps = srcs + list(TRACER.glob("*.h")) + list(SERVE.glob("*.h")) + [NATIVE / "rmt.h"]
    if not force and TRACER_LIB.exists() and all(d.stat().st_mtime <= TRACER_LIB.stat().st_mtime for d in deps):
        return TRACER_LIB
    tmp = TRACER_LIB.with_name(f"libpario_trace.{os.getpid()}.so.tmp")  # concurrent builds (pytest -n)
    cmd = [*mpicc(), *CFLAGS, "-shared", f"-I{TRACER}", f"-I{SERVE}", f"-I{NATIVE}", *map(str, srcs), "-o", str(tmp),
           "-ldl", "-lpthread", "-lm"]
    if not quiet:
        print("building", TRACER_LIB.relative_to(ROOT), flush=True)
    try:
        r = subprocess.run(cmd, capture_output=True, text=True)
    except FileNotFoundError:
        print(f"build_native: no {cmd[0]}: {TRACER_LIB.name} (pario trace run) not built", file=sys.stderr)
        return None
    if r.returncode != 0:
        sys.stderr.write(" ".join(cmd) + "\n" + r.stdout + r.stderr)
        raise SystemExit(f"build_native: compiling {TRACER_LIB.name} failed")
    os.replace(tmp, TRACER_LIB)
    return TRACER_LIB


if __name__ == "__main__":
    build(force="--force" in sys.argv, quiet="--quiet" in sys.argv)
    build_tracer(force="--force" in sys.argv, quiet="--quiet" in sys.argv)
