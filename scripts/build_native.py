"""Build pario's C code (src/pario/native/) in place; run by scripts/setup.sh.

The sources, flags and commands are src/pario/native/build.py's (the one build definition,
also the packaging build's: setup.py); this script adds the developer's side: it builds
``pario.native._rmt``, ``pario.native._collective`` and ``libpario_trace.so`` into src/pario/native/ when a source or
header is newer than the built file (or ``--force``), the library with its run path in this
Python's environment (``build.runpath_inplace``); without ``mpicc`` the library is skipped
with a message.  The tests load it (tests/conftest.py, ``build_native``) for the C builds
they need: the library, the drivers (build.py's) and IOR with its HDF5 backend (here).

    python scripts/build_native.py [--force] [--quiet]
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _load_build():
    """src/pario/native/build.py, by path (no install of pario needed)."""
    spec = importlib.util.spec_from_file_location("pario_native_build", ROOT / "src" / "pario" / "native" / "build.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_build = _load_build()
# build.py's definitions, as this module's too (the tests use them through the build_native fixture)
NATIVE, CFLAGS, BuildError = _build.NATIVE, _build.CFLAGS, _build.BuildError
native, headers, mpicc, compiler, compile_to = _build.native, _build.headers, _build.mpicc, _build.compiler, \
    _build.compile_to
compile_tracer_flatten = _build.compile_tracer_flatten
serve_driver_command, collective_driver_command = _build.serve_driver_command, _build.collective_driver_command
TRACER_LIB = NATIVE / _build.LIB_NAME


class Unavailable(Exception):
    """What a build needs is not on this machine (the message says what)."""


# IOR with its HDF5 backend (tests/run/test_run_variation.py): Debian's parallel HDF5 for MPICH
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


def _stale(target: Path, sources: list[str]) -> bool:
    deps = native(sources) + headers()
    return not target.exists() or any(d.stat().st_mtime > target.stat().st_mtime for d in deps)


def build(force: bool = False, quiet: bool = False) -> Path:
    """Build ``pario.native._rmt`` in place (when stale); its path."""
    target = NATIVE / ("_rmt" + sysconfig.get_config_var("EXT_SUFFIX"))
    if force or _stale(target, _build.RMT_SOURCES):
        if not quiet:
            print("building", target.relative_to(ROOT), flush=True)
        compile_to(_build.rmt_command(target), target)
    return target


def _build_mpi(target: Path, sources: list[str], command, what: str, force: bool, quiet: bool) -> Path | None:
    """Build ``target`` in place with ``mpicc`` (``command(target, runpath)``) when stale; None
    when there is no ``mpicc`` (``what`` says what is missing then)."""
    if force or _stale(target, sources):
        if not _build.mpicc_show():
            print(f"build_native: no {' '.join(mpicc())}: {target.name} ({what}) not built", file=sys.stderr)
            return None
        if not quiet:
            print("building", target.relative_to(ROOT), flush=True)
        compile_to(command(target, _build.runpath_inplace()), target)
    return target


def build_collective(force: bool = False, quiet: bool = False) -> Path | None:
    """Build ``pario.native._collective`` in place with ``mpicc`` (when stale); None when there
    is no ``mpicc``."""
    target = NATIVE / ("_collective" + sysconfig.get_config_var("EXT_SUFFIX"))
    return _build_mpi(target, _build.COLLECTIVE_MODULE_SOURCES, _build.collective_command,
                      "pario.mpi collective I/O", force, quiet)


def build_tracer(force: bool = False, quiet: bool = False) -> Path | None:
    """Build TRACER_LIB in place with ``mpicc`` (when stale); None when there is no ``mpicc``."""
    return _build_mpi(TRACER_LIB, _build.TRACER_LIB_SOURCES, _build.tracer_command, "pario trace run", force, quiet)


if __name__ == "__main__":
    try:
        build(force="--force" in sys.argv, quiet="--quiet" in sys.argv)
        build_collective(force="--force" in sys.argv, quiet="--quiet" in sys.argv)
        build_tracer(force="--force" in sys.argv, quiet="--quiet" in sys.argv)
    except BuildError as exc:
        raise SystemExit(f"build_native: {exc}") from None
