"""Build pario's C code (src/pario/native/) in place; run by scripts/setup.sh.

Builds ``pario.native._rmt`` (the RMT core as a Python extension: core/, python/) from the
C11 sources, ``-Wall -Wextra`` with warnings as errors, and ``libpario_trace.so`` (the MPI-IO
tracer and server, LD_PRELOADed into MPI programs: interpose/, store/, collective/, core/)
with ``mpicc`` (skipped, with a
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
CFLAGS = ["-std=c11", "-O2", "-g", "-Wall", "-Wextra", "-Werror", "-fPIC", "-fvisibility=hidden"]
# The sources by layer (docs/design.md, "native/"), paths under NATIVE; every file includes
# its headers as "layer/name.h" with -I NATIVE.
# core/: the RMT (core/rmt.h: the journal, the table, transactions, range locks)
CORE_SOURCES = ["core/crc32.c", "core/rmt_index.c", "core/rmt_log.c", "core/locks.c", "core/rmt.c"]
# python/: the bindings; pario.native._rmt (the RMT core as a Python extension, and the
# collective orders' table of collective/order.c for pario.plan.collective: python/pyorder.c)
RMT_SOURCES = CORE_SOURCES + ["collective/order.c", "python/pyrmt.c", "python/pyorder.c"]
# store/: pario's store data path (docs/serve.md: store.json and meta.db, layouts, data files
# behind store/planes/plane.h -- local.c server directories, rados.c RADOS objects with
# librados loaded by dlopen --, CEDA redirection and hybrid routing with the core); no MPI
# (tests/c/serve_driver.c links them with the system compiler)
STORE_SOURCES = ["store/json.c", "store/meta.c", "store/layout.c", "store/planes/local.c", "store/planes/rados.c",
                 "store/storefile.c", "store/redirect.c", "store/lazysync.c"]
# collective/: two-phase collective I/O (docs/serve-twophase.md; MPI): the driver, file
# domains, the exchange; and the request orders (order.c, no MPI: also in the bindings)
COLLECTIVE_SOURCES = ["collective/twophase.c", "collective/domains.c", "collective/exchange.c", "collective/order.c"]
# interpose/: the PMPI front end (docs/traces.md, "Tracer: MPI-IO interposition"; serving:
# docs/serve-mpi.md); its datatype flattening and file-view mapping (interpose/flatten.h) are
# also linked into tests/c/flatten_driver.c
INTERPOSE_FLATTEN_SOURCES = ["interpose/flatten.c", "interpose/view.c"]
INTERPOSE_SOURCES = ["interpose/runtime.c", "interpose/mpiio.c", "interpose/posix.c", "interpose/records.c",
                     "interpose/handles.c", "interpose/jsonbuf.c", "interpose/serve.c"] + INTERPOSE_FLATTEN_SOURCES
# libpario_trace.so, LD_PRELOADed into MPI programs: every layer but the bindings
TRACER_LIB = NATIVE / "libpario_trace.so"
TRACER_LIB_SOURCES = INTERPOSE_SOURCES + STORE_SOURCES + COLLECTIVE_SOURCES + CORE_SOURCES


def native(sources: list[str]) -> list[Path]:
    return [NATIVE / s for s in sources]


def headers() -> list[Path]:
    return list(NATIVE.rglob("*.h"))


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
    """Compile INTERPOSE_FLATTEN_SOURCES with ``mpicc`` into objects in ``out_dir``; their paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    objs = []
    for src in native(INTERPOSE_FLATTEN_SOURCES):
        obj = out_dir / (src.stem + ".o")
        cmd = [*mpicc(), *CFLAGS, f"-I{NATIVE}", "-c", str(src), "-o", str(obj)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.stderr.write(" ".join(cmd) + "\n" + r.stdout + r.stderr)
            raise SystemExit(f"build_native: compiling {src.relative_to(NATIVE)} failed")
        objs.append(obj)
    return objs


def serve_driver_command(driver_src: Path, exe: Path) -> list[str]:
    """The command that builds a non-MPI C program linked with the store and the core
    (tests/c/serve_driver.c), with the C compiler of :func:`compiler`."""
    return [*compiler(), *CFLAGS, f"-I{NATIVE}", str(driver_src), *map(str, native(STORE_SOURCES + CORE_SOURCES)),
            "-o", str(exe), "-ldl", "-lpthread", "-lm"]


def collective_driver_command(driver_src: Path, exe: Path) -> list[str]:
    """The command that builds an MPI program linked with collective/ (tests/c/twophase_driver.c)."""
    return [*mpicc(), *CFLAGS, f"-I{NATIVE}", str(driver_src), *map(str, native(COLLECTIVE_SOURCES)), "-o", str(exe)]


class Unavailable(Exception):
    """What a build needs is not on this machine (the message says what)."""


# IOR with its HDF5 backend (tests/test_run_variation.py): Debian's parallel HDF5 for MPICH
# (libhdf5-mpich-dev, found through its pkg-config file), linked statically so that the only
# MPI the program loads is the wheel's libmpi.so.12 (the static library calls MPI through the
# MPICH ABI both share).
HDF5_PKG = "hdf5-mpich"
IOR_SOURCES = ["ior-main.c", "ior.c", "mdtest.c", "utilities.c", "parse_options.c", "ior-output.c", "option.c",
               "md-workbench.c", "aiori.c", "aiori-DUMMY.c", "aiori-POSIX.c", "aiori-MPIIO.c", "aiori-HDF5.c"]
# what IOR's configure defines for these backends (its build.sh's list, plus HDF5's)
IOR_CONFIG = {"META_VERSION": '"4.1.0+dev"', "PACKAGE": '"ior"', "PACKAGE_VERSION": '"4.1.0+dev"',
              "USE_POSIX_AIORI": "1", "USE_MPIIO_AIORI": "1", "USE_HDF5_AIORI": "1", "HAVE_SYS_PARAM_H": "1",
              "HAVE_SYS_MOUNT_H": "1", "HAVE_SYS_STATFS_H": "1", "HAVE_SYS_STATVFS_H": "1", "HAVE_STATVFS": "1",
              "HAVE_MPI_COUNT": "1", "HAVE_MPI_FILE_READ_C": "1", "HAVE_STRINGS_H": "1", "HAVE_UNISTD_H": "1",
              "HAVE_FCNTL_H": "1", "HAVE_LIBGEN_H": "1", "HAVE_STRING_H": "1", "HAVE_STDLIB_H": "1"}
# HDF5 functions aiori-HDF5.c uses when configure found them (AC_CHECK_FUNCS): probed by linking
IOR_HDF5_PROBES = ["H5Pset_all_coll_metadata_ops", "H5Fdelete", "H5Pget_vol_id", "H5Fis_accessible"]


def hdf5_mpich_static() -> tuple[Path, Path, list[str]]:
    """Debian's parallel HDF5 for MPICH: (the folder of ``hdf5.h``, the static ``libhdf5.a``,
    the libraries it needs: its ``libhdf5.settings``' "Extra libraries"), from ``pkg-config
    HDF5_PKG`` (not its ``Requires: mpich``: Debian's MPICH is not what the program links);
    :class:`Unavailable` when it is not installed."""
    def dirs(flag: str, prefix: str) -> list[Path]:
        try:
            r = subprocess.run(["pkg-config", flag, HDF5_PKG], capture_output=True, text=True, timeout=30)
        except OSError:
            raise Unavailable("no pkg-config: apt-get install pkg-config libhdf5-mpich-dev") from None
        if r.returncode != 0:
            raise Unavailable(f"no parallel HDF5 for MPICH (pkg-config {HDF5_PKG}): apt-get install "
                              "libhdf5-mpich-dev")
        return [Path(w[len(prefix):]) for w in r.stdout.split() if w.startswith(prefix)]

    inc = next((d for d in dirs("--cflags-only-I", "-I") if (d / "hdf5.h").exists()), None)
    libdir = next((d for d in dirs("--libs-only-L", "-L") if (d / "libhdf5.a").exists()), None)
    if inc is None or libdir is None:
        raise Unavailable(f"pkg-config {HDF5_PKG} names no hdf5.h and static libhdf5.a: apt-get install "
                          "libhdf5-mpich-dev")
    extra = ["-lz", "-ldl", "-lm"]
    settings = libdir / "libhdf5.settings"
    if settings.exists():
        for line in settings.read_text(errors="replace").splitlines():
            if line.strip().startswith("Extra libraries:"):
                extra = line.split(":", 1)[1].split()
    return inc, libdir / "libhdf5.a", extra


def build_ior_hdf5(ior_src: Path, out_dir: Path) -> Path:
    """IOR from ``ior_src`` (IOR's ``src`` folder, unmodified) with its POSIX, MPIIO and HDF5
    backends, built with the wheel's ``mpicc`` into ``out_dir``; HDF5 linked statically
    (:func:`hdf5_mpich_static`) and checked not to need any other libmpi than the wheel's.
    Returns the path of ``ior``.  :class:`Unavailable` when the source or HDF5 is missing;
    a failed compile raises RuntimeError with the compiler's first error."""
    ior_src, out_dir = Path(ior_src), Path(out_dir)
    if not (ior_src / "aiori-HDF5.c").exists():
        raise Unavailable(f"no IOR source with its HDF5 backend in {ior_src}")
    inc, lib, extra = hdf5_mpich_static()
    out_dir.mkdir(parents=True, exist_ok=True)
    cc = [*mpicc(), "-O2", "-D_GNU_SOURCE", f"-I{out_dir}", f"-I{ior_src}", f"-I{inc}"]
    libs = ["-Wl,--as-needed", str(lib), *extra, "-lm"]
    config = dict(IOR_CONFIG)
    for fn in IOR_HDF5_PROBES:
        probe = out_dir / "probe.c"
        probe.write_text(f"#include <hdf5.h>\nint main(void) {{ return (int)(long)&{fn} & 0; }}\n")
        r = subprocess.run([*cc, str(probe), "-o", str(out_dir / "probe"), *libs], capture_output=True, text=True)
        if r.returncode == 0:
            config[f"HAVE_{fn.upper()}"] = "1"
    (out_dir / "config.h").write_text("/* IOR's configure, for pario's build (scripts/build_native.py) */\n"
                                      + "".join(f"#define {k} {v}\n" for k, v in config.items()))
    exe = out_dir / "ior"
    r = subprocess.run([*cc, "-DHAVE_CONFIG_H", "-o", str(exe), *[str(ior_src / s) for s in IOR_SOURCES], *libs],
                       capture_output=True, text=True)
    if r.returncode != 0:
        first = next((ln for ln in r.stderr.splitlines() if "error" in ln), r.stderr.strip()[-300:])
        raise RuntimeError(f"IOR with HDF5 did not build: {first}")
    needed = subprocess.run(["readelf", "-d", str(exe)], capture_output=True, text=True).stdout
    other = [ln.split("[")[-1].rstrip("]") for ln in needed.splitlines()
             if "(NEEDED)" in ln and "mpi" in ln.lower() and "libmpi.so.12" not in ln]
    if other:
        raise RuntimeError(f"IOR with HDF5 needs another MPI library besides the wheel's: {', '.join(other)}")
    return exe


def build(force: bool = False, quiet: bool = False) -> Path:
    target = NATIVE / ("_rmt" + sysconfig.get_config_var("EXT_SUFFIX"))
    deps = native(RMT_SOURCES) + headers()
    if not force and target.exists() and all(d.stat().st_mtime <= target.stat().st_mtime for d in deps):
        return target
    inc = sysconfig.get_paths()["include"]
    tmp = target.with_name(target.name + ".tmp")
    # PyInit__rmt must stay visible: -fvisibility=hidden hides only the core's own symbols
    cmd = [*compiler(), *CFLAGS, "-shared", f"-I{inc}", f"-I{NATIVE}", *map(str, native(RMT_SOURCES)), "-o", str(tmp),
           "-lpthread"]
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
    srcs = native(TRACER_LIB_SOURCES)
    deps = srcs + headers()
    if not force and TRACER_LIB.exists() and all(d.stat().st_mtime <= TRACER_LIB.stat().st_mtime for d in deps):
        return TRACER_LIB
    tmp = TRACER_LIB.with_name(f"libpario_trace.{os.getpid()}.so.tmp")  # concurrent builds (pytest -n)
    cmd = [*mpicc(), *CFLAGS, "-shared", f"-I{NATIVE}", *map(str, srcs), "-o", str(tmp), "-ldl", "-lpthread", "-lm"]
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
