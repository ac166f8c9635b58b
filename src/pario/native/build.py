"""The one build definition of pario's C code (this folder): the sources by layer, the flags
and the commands that build its two products.

Used by the packaging build (``setup.py``: ``pip install``, sdist, wheel; the ``mpich``
build requirement provides ``mpicc``), by the developer's in-place build
(``scripts/build_native.py``, run by ``scripts/setup.sh``; an editable install builds in
place through ``setup.py`` too) and by the tests' C drivers.  Standard library only:
``setup.py`` loads this file by path, before pario is installed.

The products:

- ``pario.native._rmt``: the RMT core as a Python extension (core/, python/), built with
  the plain C compiler (:func:`compiler`: the RMT core does not link MPI);
- ``pario.native._collective`` (:data:`COLLECTIVE_MODULE`): two-phase collective I/O
  (collective/ and its binding python/pycollective.c) for ``pario.mpi.File``, built with
  ``mpicc`` and the same run path as the library (:func:`collective_command`);
- ``libpario_trace.so`` (:data:`LIB_NAME`): the MPI-IO tracer and server, LD_PRELOADed into
  MPI programs (every layer but python/), built with ``mpicc``.  It needs ``libmpi`` at run
  time (also in ``mpiexec`` itself, which does not link it), found through its run path
  (:func:`tracer_command`): beside the installed package (:data:`RUNPATH_INSTALLED`) or, built
  in place, in the environment of this Python (:func:`runpath_inplace`).

C11, ``-Wall -Wextra`` with warnings as errors (:data:`CFLAGS`).  Every file includes its
headers as ``"layer/name.h"`` with ``-I`` :data:`NATIVE`.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import sysconfig
from pathlib import Path

NATIVE = Path(__file__).resolve().parent
CFLAGS = ["-std=c11", "-O2", "-g", "-Wall", "-Wextra", "-Werror", "-fPIC", "-fvisibility=hidden"]

# ---------------------------------------------------------------- the sources, one list per layer
# (docs/design.md, "native/"), paths under NATIVE.
# core/: the RMT (core/rmt.h: the journal, the table, transactions, range locks)
CORE_SOURCES = ["core/crc32.c", "core/rmt_index.c", "core/rmt_log.c", "core/journal_posix.c", "core/journal_map.c",
                "core/journal_file.c", "core/locks.c", "core/rmt.c"]
# python/: the bindings; pario.native._rmt (the store engine, its RMT and metadata, the collective orders)
PYTHON_SOURCES = ["python/pyrmt.c", "python/pymeta.c", "python/pystore.c", "python/pycoord.c", "python/pyorder.c",
                  "python/pylayout.c"]
# ... and pario.native._collective (two-phase collective I/O for pario.mpi.File; MPI)
PYTHON_MPI_SOURCES = ["python/pycollective.c"]
# store/: pario's store data path (docs/serve.md: store.json and meta.db, layouts, data files
# behind store/planes/plane.h -- local.c server directories, rados.c RADOS objects with
# librados loaded by dlopen --, CEDA redirection and hybrid routing with the core); no MPI
# (tests/c/serve_driver.c links them with the system compiler)
STORE_SOURCES = ["store/json.c", "store/meta.c", "store/meta_vfs.c", "store/config.c", "store/layout.c", "store/planes/planes.c",
                 "store/planes/local.c", "store/planes/rados.c", "store/rados_api.c", "store/coord.c", "store/coord/posix.c", "store/coord/rados.c", "store/coord/rados_lease.c", "store/coord/journal_rados.c", "store/storefile.c", "store/redirect.c", "store/lazysync.c"]
# collective/: two-phase collective I/O (docs/serve-twophase.md; MPI): the driver, file
# domains, the exchange; and the request orders (order.c, no MPI: also in the bindings)
COLLECTIVE_SOURCES = ["collective/twophase.c", "collective/domains.c", "collective/exchange.c", "collective/order.c"]
# interpose/: the PMPI front end (docs/traces.md, "Tracer: MPI-IO interposition"; serving:
# docs/serve-mpi.md): the core and its module table (runtime.c), the tracing module (trace.c),
# the MPI-IO wrappers (mpiio.c), the serving module (serve.c); its datatype flattening and file-view mapping (interpose/flatten.h) are
# also linked into tests/c/flatten_driver.c
INTERPOSE_FLATTEN_SOURCES = ["interpose/flatten.c", "interpose/view.c"]
INTERPOSE_SOURCES = ["interpose/runtime.c", "interpose/trace.c", "interpose/mpiio.c", "interpose/posix.c",
                     "interpose/records.c", "interpose/handles.c", "interpose/jsonbuf.c",
                     "interpose/serve.c"] + INTERPOSE_FLATTEN_SOURCES

# ---------------------------------------------------------------- the products
# pario.native._rmt: the core and its bindings
RMT_MODULE = "pario.native._rmt"
# + the store engine (the Python store's data path), the collective orders' table (order.c: no MPI)
RMT_SOURCES = CORE_SOURCES + STORE_SOURCES + ["collective/order.c"] + PYTHON_SOURCES
# pario.native._collective: the two-phase driver and its binding (MPI: built with mpicc)
COLLECTIVE_MODULE = "pario.native._collective"
# + the layouts of the store engine (its request mapping gives the collective's pieces)
COLLECTIVE_MODULE_SOURCES = COLLECTIVE_SOURCES + ["store/json.c", "store/layout.c"] + PYTHON_MPI_SOURCES
# libpario_trace.so: every layer but the bindings
LIB_NAME = "libpario_trace.so"
TRACER_LIB_SOURCES = INTERPOSE_SOURCES + STORE_SOURCES + COLLECTIVE_SOURCES + CORE_SOURCES
# The installed library's run path: the MPICH wheel (the ``mpich`` dependency) puts libmpi in
# PREFIX/lib and pario in PREFIX/lib/pythonX.Y/site-packages/pario/native, in a virtual
# environment, a --user or a --prefix install alike.
RUNPATH_INSTALLED = "$ORIGIN/../../../.."


class BuildError(Exception):
    """A compile failed or its compiler is missing (the message says which; the compiler's
    output is on stderr)."""


def native(sources: list[str]) -> list[Path]:
    """The paths of ``sources`` (relative to NATIVE)."""
    return [NATIVE / s for s in sources]


def headers() -> list[Path]:
    return sorted(NATIVE.rglob("*.h"))


def mpicc() -> list[str]:
    """The MPICH wheel's ``mpicc`` beside this Python, else ``$MPICC``, else ``mpicc`` on the
    PATH (in pip's isolated build environment: the ``mpich`` build requirement's)."""
    cand = Path(sys.executable).parent / "mpicc"
    if cand.exists():
        return [str(cand)]
    return shlex.split(os.environ.get("MPICC", "mpicc"))


def mpicc_show() -> list[str]:
    """What :func:`mpicc` runs (``mpicc -show``: the compiler, then its MPI flags); [] when
    there is no ``mpicc``."""
    try:
        return subprocess.run([*mpicc(), "-show"], capture_output=True, text=True, timeout=30).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return []


def compiler() -> list[str]:
    """``$CC`` if set, else the C compiler that :func:`mpicc` wraps, else ``cc``."""
    if os.environ.get("CC"):
        return shlex.split(os.environ["CC"])
    return mpicc_show()[:1] or ["cc"]


def without_runpath(flags: list[str]) -> list[str]:
    """``flags`` less the run path in them (``-Wl,-rpath -Wl,DIR``, ``-Wl,-rpath,DIR``,
    ``-Wl,-rpath=DIR``)."""
    out, skip = [], False
    for f in flags:
        if skip:
            skip = False
        elif f == "-Wl,-rpath":
            skip = True
        elif not f.startswith(("-Wl,-rpath,", "-Wl,-rpath=")):
            out.append(f)
    return out


def runpath_inplace() -> str:
    """The run path of a library built in place: the ``lib`` folder of the environment this
    Python runs in (where its ``mpich`` dependency keeps libmpi; in pip's isolated build of an
    editable install, the environment being installed into)."""
    return str(Path(sys.prefix) / "lib")


def rmt_command(out: Path) -> list[str]:
    """The command that builds ``pario.native._rmt`` as ``out``."""
    inc = sysconfig.get_paths()["include"]
    # PyInit__rmt stays visible: -fvisibility=hidden hides only the core's own symbols
    return [*compiler(), *CFLAGS, "-shared", f"-I{inc}", f"-I{NATIVE}", *map(str, native(RMT_SOURCES)),
            "-o", str(out), "-lpthread", "-ldl", "-lm"]


def tracer_command(out: Path, runpath: str) -> list[str]:
    """The command that builds ``libpario_trace.so`` as ``out``: :func:`mpicc`'s compiler and
    MPI flags with ``runpath`` as the run path instead of its own (the folder it was found in:
    in a build environment, one that is gone at run time)."""
    show = mpicc_show()
    if not show:
        raise BuildError(f"no {' '.join(mpicc())}: {LIB_NAME} needs an MPI C compiler (the mpich package's)")
    return [show[0], *CFLAGS, "-shared", f"-I{NATIVE}", *map(str, native(TRACER_LIB_SOURCES)), "-o", str(out),
            *without_runpath(show[1:]), f"-Wl,-rpath,{runpath}", "-ldl", "-lpthread", "-lm"]


def collective_command(out: Path, runpath: str) -> list[str]:
    """The command that builds ``pario.native._collective`` as ``out``: like
    :func:`tracer_command` (``mpicc``'s compiler and MPI flags, ``runpath`` as the run path of
    libmpi), with Python's headers."""
    show = mpicc_show()
    if not show:
        raise BuildError(f"no {' '.join(mpicc())}: {COLLECTIVE_MODULE} needs an MPI C compiler (the mpich package's)")
    inc = sysconfig.get_paths()["include"]
    return [show[0], *CFLAGS, "-shared", f"-I{inc}", f"-I{NATIVE}", *map(str, native(COLLECTIVE_MODULE_SOURCES)),
            "-o", str(out), *without_runpath(show[1:]), f"-Wl,-rpath,{runpath}", "-lm"]


def compile_to(cmd: list[str], target: Path) -> Path:
    """Run ``cmd``, whose ``-o`` names ``target``, writing a temporary file beside ``target``
    and renaming it (a concurrent reader never sees half a library); its output on stderr and
    a :class:`BuildError` when it fails."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")   # concurrent builds (pytest -n)
    cmd = [str(tmp) if a == str(target) else a for a in cmd]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True)
    except FileNotFoundError:
        raise BuildError(f"no {cmd[0]}: {target.name} not built") from None
    if r.returncode != 0:
        sys.stderr.write(shlex.join(cmd) + "\n" + r.stdout + r.stderr)
        tmp.unlink(missing_ok=True)
        raise BuildError(f"compiling {target.name} failed")
    os.replace(tmp, target)
    return target


# ---------------------------------------------------------------- the tests' C drivers
def compile_tracer_flatten(out_dir: Path) -> list[Path]:
    """Compile INTERPOSE_FLATTEN_SOURCES with ``mpicc`` into objects in ``out_dir``; their paths."""
    objs = []
    for src in native(INTERPOSE_FLATTEN_SOURCES):
        obj = Path(out_dir) / (src.stem + ".o")
        objs.append(compile_to([*mpicc(), *CFLAGS, f"-I{NATIVE}", "-c", str(src), "-o", str(obj)], obj))
    return objs


def serve_driver_command(driver_src: Path, exe: Path) -> list[str]:
    """The command that builds a non-MPI C program linked with the store and the core
    (tests/c/serve_driver.c), with the C compiler of :func:`compiler`."""
    return [*compiler(), *CFLAGS, f"-I{NATIVE}", str(driver_src), *map(str, native(STORE_SOURCES + CORE_SOURCES)),
            "-o", str(exe), "-ldl", "-lpthread", "-lm"]


def collective_driver_command(driver_src: Path, exe: Path) -> list[str]:
    """The command that builds an MPI program linked with collective/ (tests/c/twophase_driver.c)."""
    return [*mpicc(), *CFLAGS, f"-I{NATIVE}", str(driver_src), *map(str, native(COLLECTIVE_SOURCES)), "-o", str(exe)]

