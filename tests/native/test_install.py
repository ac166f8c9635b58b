"""pario installed as a new user installs it (issue 25).

The build definition (src/pario/native/build.py, fast, default suite): every C source is in
one layer's list, the library's run path is the one asked for, error hints fit a checkout.

The install (``-m install``, run by .ci/run after ./test: a few minutes): an sdist and a
wheel built from this checkout with ``python -m build`` (setup.py builds ``_rmt``,
``_collective`` and ``libpario_trace.so``, the last two with the ``mpich`` build requirement's ``mpicc``), each installed into
a fresh virtual environment outside the checkout; from there the store (put, get, bytes
compared), ``pario trace run`` of a C MPI program compiled with that environment's
``mpicc``, and a served run (the installed library preloaded, ``PARIO_SERVE=all``, the file
read back with ``pario store get``).  The requirements are downloaded from PyPI once into a
wheelhouse, everything after that runs with ``--no-index``; without PyPI it is skipped with
the reason.  The times of the build and of each install are printed (``-s``).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib
import zipfile
from pathlib import Path

import pytest
from helpers import C_DIR, ROOT

from pario.native import build, build_hint
from pario.trace.io import load

PROG = C_DIR / "reboot_check.c"
BLOCK = 65536


# ---------------------------------------------------------------- the build definition
def test_every_c_source_is_in_one_layer_list():
    layers = [build.CORE_SOURCES, build.PYTHON_SOURCES, build.PYTHON_MPI_SOURCES, build.STORE_SOURCES,
              build.COLLECTIVE_SOURCES, build.INTERPOSE_SOURCES]
    listed = [s for layer in layers for s in layer]
    on_disk = sorted(p.relative_to(build.NATIVE).as_posix() for p in build.NATIVE.rglob("*.c"))
    assert sorted(listed) == on_disk                       # each once, none missing
    products = set(build.RMT_SOURCES) | set(build.TRACER_LIB_SOURCES) | set(build.COLLECTIVE_MODULE_SOURCES)
    assert products == set(listed)                                                  # every source in a product
    bindings = set(build.PYTHON_SOURCES) | set(build.PYTHON_MPI_SOURCES)
    assert not bindings & set(build.TRACER_LIB_SOURCES)                             # no binding in the library
    assert not set(build.PYTHON_MPI_SOURCES) & set(build.RMT_SOURCES)               # _rmt links no MPI


def test_the_library_gets_the_run_path_asked_for_not_mpiccs(monkeypatch):
    assert build.without_runpath(["-I/m/include", "-L/m/lib", "-Wl,-rpath", "-Wl,/m/lib", "-Wl,--enable-new-dtags",
                                  "-Wl,-rpath,/a", "-Wl,-rpath=/b", "-lmpi"]) == \
        ["-I/m/include", "-L/m/lib", "-Wl,--enable-new-dtags", "-lmpi"]
    monkeypatch.setattr(build, "mpicc_show", lambda: ["cc", "-I/m/include", "-L/m/lib", "-Wl,-rpath", "-Wl,/m/lib",
                                                      "-lmpi"])
    cmd = build.tracer_command(Path("out.so"), build.RUNPATH_INSTALLED)
    assert cmd[0] == "cc" and "-Werror" in cmd and "-std=c11" in cmd and "-lmpi" in cmd
    assert [a for a in cmd if "rpath" in a] == ["-Wl,-rpath,$ORIGIN/../../../.."]
    cmd = build.collective_command(Path("out.so"), build.RUNPATH_INSTALLED)   # pario.native._collective
    assert cmd[0] == "cc" and "-Werror" in cmd and "-lmpi" in cmd and any(a.endswith("pycollective.c") for a in cmd)
    assert [a for a in cmd if "rpath" in a] == ["-Wl,-rpath,$ORIGIN/../../../.."]
    monkeypatch.setattr(build, "mpicc_show", lambda: [])
    with pytest.raises(build.BuildError, match="needs an MPI C compiler"):
        build.tracer_command(Path("out.so"), "/x")
    with pytest.raises(build.BuildError, match="needs an MPI C compiler"):
        build.collective_command(Path("out.so"), "/x")


def test_a_checkout_is_told_its_set_up_script():
    assert "scripts/setup.sh" in build_hint()


# ---------------------------------------------------------------- the install
def _env(venv: Path | None = None, **extra: str) -> dict[str, str]:
    """This environment less what would make a subprocess see the checkout or pario's
    settings; ``venv``'s bin first on the PATH."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "LD_PRELOAD", "LD_LIBRARY_PATH")
           and not k.startswith(("PARIO_", "PIP_"))}
    if venv is not None:
        env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', os.defpath)}"
    return {**env, **extra}


def _run(cmd, cwd: Path, env: dict[str, str], timeout: float = 900) -> subprocess.CompletedProcess:
    cmd = [str(c) for c in cmd]
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        pytest.fail(f"{shlex.join(cmd)} exited {r.returncode}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory):
    """The build and run requirements (pyproject.toml's) downloaded from PyPI once."""
    wh = tmp_path_factory.mktemp("wheelhouse")
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    reqs = meta["build-system"]["requires"] + meta["project"]["dependencies"]
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "-d", str(wh), *reqs], env=_env(),
                       capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["(no message)"])[-1]
        pytest.skip(f"pario's requirements cannot be downloaded (no PyPI?): {last}")
    print(f"\n[install] requirements downloaded in {time.monotonic() - t0:.1f} s", flush=True)
    yield wh
    shutil.rmtree(wh, ignore_errors=True)


@pytest.fixture(scope="module")
def dists(wheelhouse, tmp_path_factory) -> dict[str, Path]:
    """{"sdist": …, "wheel": …} built from the checkout (the wheel from the sdist)."""
    pytest.importorskip("build", reason="the build front end (test extra) is not installed: scripts/setup.sh test")
    out = tmp_path_factory.mktemp("dist")
    t0 = time.monotonic()
    _run([sys.executable, "-m", "build", "--outdir", out, ROOT], cwd=out,
         env=_env(PIP_NO_INDEX="1", PIP_FIND_LINKS=str(wheelhouse)))
    print(f"[install] sdist and wheel built in {time.monotonic() - t0:.1f} s", flush=True)
    sdist, wheel = sorted(out.glob("pario-*.tar.gz")), sorted(out.glob("pario-*.whl"))
    assert len(sdist) == 1 and len(wheel) == 1
    return {"sdist": sdist[0], "wheel": wheel[0]}


@pytest.fixture(scope="module", params=["sdist", "wheel"])
def venv(request, dists, wheelhouse, tmp_path_factory):
    """A fresh virtual environment outside the checkout with the sdist or the wheel installed."""
    where = tmp_path_factory.mktemp(f"venv-{request.param}")
    v = where / "venv"
    t0 = time.monotonic()
    _run([sys.executable, "-m", "venv", v], cwd=where, env=_env())
    _run([v / "bin" / "python", "-m", "pip", "install", "-q", "--no-index", "--find-links", wheelhouse,
          dists[request.param]], cwd=where, env=_env(v))
    print(f"[install] {request.param} installed into a fresh venv in {time.monotonic() - t0:.1f} s", flush=True)
    yield v
    shutil.rmtree(where, ignore_errors=True)                   # about 1 GB each


@pytest.mark.install
def test_the_sdist_has_the_sources_and_the_wheel_the_products(dists):
    with tarfile.open(dists["sdist"]) as tf:
        names = {n.split("/", 1)[1] for n in tf.getnames() if "/" in n}
    want = {f"src/pario/native/{s}" for s in build.RMT_SOURCES + build.TRACER_LIB_SOURCES
            + build.COLLECTIVE_MODULE_SOURCES}
    want |= {p.relative_to(ROOT).as_posix() for p in build.headers()}
    assert want <= names and {"setup.py", "MANIFEST.in", "src/pario/native/build.py"} <= names
    assert not [n for n in names if n.endswith((".so", ".o"))]
    with zipfile.ZipFile(dists["wheel"]) as zf:
        native = sorted(n for n in zf.namelist() if n.startswith("pario/native/") and not n.endswith(".py"))
    assert len(native) == 3 and native[2] == f"pario/native/{build.LIB_NAME}"
    assert native[0].startswith("pario/native/_collective.") and native[0].endswith(".so")
    assert native[1].startswith("pario/native/_rmt.") and native[1].endswith(".so")


@pytest.mark.install
@pytest.mark.timeout(1800)
def test_installed_store_puts_and_gets_the_same_bytes(venv, tmp_path):
    py = _run([venv / "bin" / "python", "-c", "import pario.store.rmt as r, pario; r._core_module(); "
               "print(pario.__file__)"], cwd=tmp_path, env=_env(venv)).stdout.strip()
    assert Path(py).is_relative_to(venv) and not Path(py).is_relative_to(ROOT)
    data = os.urandom(300_000)
    (tmp_path / "data.bin").write_bytes(data)
    pario = venv / "bin" / "pario"
    _run([pario, "store", "init", "st", "--system", "ceda-hdd8"], cwd=tmp_path, env=_env(venv))
    _run([pario, "store", "put", "--store", "st", "--layout", "fixed:64k", "data.bin", "d"], cwd=tmp_path,
         env=_env(venv))
    _run([pario, "store", "get", "--store", "st", "d", "back.bin"], cwd=tmp_path, env=_env(venv))
    assert (tmp_path / "back.bin").read_bytes() == data


@pytest.fixture
def prog(venv, tmp_path) -> Path:
    """tests/c/reboot_check.c compiled with the installed environment's mpicc."""
    exe = tmp_path / "reboot_check"
    _run([venv / "bin" / "mpicc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-O2", PROG, "-o", exe], cwd=tmp_path,
         env=_env(venv))
    return exe


@pytest.mark.install
def test_installed_tracer_traces_a_c_mpi_program(venv, prog, tmp_path):
    r = _run([venv / "bin" / "pario", "trace", "run", "--procs", "2", "-o", "t.parquet", "--", prog, "f.dat", 1,
              BLOCK, "run"], cwd=tmp_path, env=_env(venv))
    assert "rank 0 wrong 0" in r.stdout and "rank 1 wrong 0" in r.stdout
    tr = load(tmp_path / "t.parquet")
    assert len(tr) == 4 and tr.meta.nprocs == 2                  # a write and a read per rank
    assert sorted(tr.cols["offset"].tolist()) == [0, 0, BLOCK, BLOCK] and set(tr.cols["length"].tolist()) == {BLOCK}


@pytest.mark.install
def test_installed_library_serves_an_unmodified_program(venv, prog, tmp_path):
    lib = Path(_run([venv / "bin" / "python", "-c", "from pario.trace.launch import tracer_library as t; print(t())"],
                    cwd=tmp_path, env=_env(venv)).stdout.strip())
    assert lib.is_relative_to(venv) and lib.name == build.LIB_NAME
    pario, mpiexec = venv / "bin" / "pario", venv / "bin" / "mpiexec"
    _run([pario, "store", "init", "st", "--system", "ceda-hdd8"], cwd=tmp_path, env=_env(venv))
    r = _run([mpiexec, "-n", 2, prog, "served.dat", 3, BLOCK, "run"], cwd=tmp_path,
             env=_env(venv, LD_PRELOAD=str(lib), PARIO_STORE=str(tmp_path / "st"), PARIO_SERVE="all"))
    assert "rank 0 wrong 0" in r.stdout and "rank 1 wrong 0" in r.stdout
    assert not (tmp_path / "served.dat").exists()                # in the store, not beside the program
    _run([mpiexec, "-n", 2, prog, "plain.dat", 3, BLOCK, "run"], cwd=tmp_path, env=_env(venv))
    _run([pario, "store", "get", "--store", "st", "served.dat", "got.bin"], cwd=tmp_path, env=_env(venv))
    plain = (tmp_path / "plain.dat").read_bytes()
    assert len(plain) == 2 * BLOCK and (tmp_path / "got.bin").read_bytes() == plain


@pytest.mark.install
def test_installed_mpi_file_collective_round_trip(venv, tmp_path):
    """pario.mpi.File's collective calls (pario.native._collective, libmpi through its run
    path) in the installed environment, under its mpiexec."""
    code = ("import numpy as np; from mpi4py import MPI; from pario.mpi import File\n"
            "c = MPI.COMM_WORLD; d = np.full(4096, c.rank + 1, np.uint8)\n"
            "f = File.open(c, 'c.dat', MPI.MODE_CREATE | MPI.MODE_RDWR, {'romio_cb_write': 'enable', "
            "'romio_cb_read': 'enable'})\n"
            "f.write_at_all(c.rank * 4096, d); b = np.zeros(8192, np.uint8); f.read_at_all(0, b); f.close()\n"
            "ok = c.gather(bool((b == np.repeat([1, 2], 4096)).all()))\n"
            "print(' '.join(f'rank {r} ok {v}' for r, v in enumerate(ok)) if c.rank == 0 else '', flush=True)\n")
    r = _run([venv / "bin" / "mpiexec", "-n", 2, venv / "bin" / "python", "-c", code], cwd=tmp_path, env=_env(venv))
    assert "rank 0 ok True" in r.stdout and "rank 1 ok True" in r.stdout


@pytest.mark.install
def test_installed_package_is_told_to_reinstall(venv, tmp_path):
    """Either product missing (here made to look missing): the message fits an installed pario."""
    code = ("import pathlib, sys, pario.trace.launch as l, pario.store.rmt as r\n"
            "l.NATIVE = pathlib.Path('no-such-folder')\n"
            "sys.modules['pario.native._rmt'] = None\n"
            "for f in (l.tracer_library, r._core_module):\n"
            "    try:\n        f()\n    except Exception as e:\n        print(e)\n")
    lib, rmt = _run([venv / "bin" / "python", "-c", code], cwd=tmp_path, env=_env(venv)).stdout.splitlines()
    assert lib.startswith("the pario tracer is not built (libpario_trace.so): reinstall pario with pip")
    assert rmt.startswith("pario's C extension is not built (") and ": reinstall pario with pip" in rmt
    assert "scripts/setup.sh" not in lib + rmt


@pytest.mark.install
@pytest.mark.timeout(1800)
def test_installed_kernels_compile_once_and_stay_cached(venv, tmp_path):
    """python -m pario.jit in the installed environment: the first run compiles pario's numba
    kernels (numba's cache beside the installed modules, or its per-user directory), the
    second finds every one cached -- what a pip-installed pario's first command that plans
    would otherwise pay (docs/mpi.md, "The whole job")."""
    py = venv / "bin" / "python"
    first = _run([py, "-m", "pario.jit"], cwd=tmp_path, env=_env(venv)).stdout
    # (the tests before may have compiled some of them: a served run plans)
    assert first.startswith("pario: compiled ") or "already compiled" in first, first
    site = Path(_run([py, "-c", "import pario, os; print(os.path.dirname(pario.__file__))"], cwd=tmp_path,
                     env=_env(venv)).stdout.strip())
    assert site.is_relative_to(venv) and list(site.rglob("*.nbi")), "numba's cache is not beside the modules"
    again = _run([py, "-m", "pario.jit"], cwd=tmp_path, env=_env(venv)).stdout
    assert again.strip() == "pario: every kernel was already compiled (numba's cache)", again
