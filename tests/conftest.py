"""Fixtures shared by the tests in every folder of tests/: an empty store, the project's C
build script and the library it builds.  tests/ itself is put on sys.path here, so the shared
support (helpers.py, contracts.py, ceph_fixture.py, oracles/) imports the same way from every
folder (``from helpers import ROOT``)."""

import sys
from pathlib import Path

_TESTS = str(Path(__file__).resolve().parent)
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

import pytest  # noqa: E402
from helpers import load_script  # noqa: E402

from pario.store import Store, init_store  # noqa: E402


@pytest.fixture
def store(tmp_path):
    """An empty store of the ceda-hdd8 profile (8 HDD servers) in a temporary directory."""
    init_store(tmp_path / "s", "ceda-hdd8")
    st = Store(tmp_path / "s")
    yield st
    st.close()


@pytest.fixture(scope="session")
def build_native():
    """scripts/build_native.py as a module: the C builds the tests need (the tracer and
    serving library, the drivers)."""
    return load_script("scripts/build_native.py", "build_native")


@pytest.fixture(scope="session")
def lib(build_native):
    """libpario_trace.so, built if stale (the tests of unmodified MPI programs preload it);
    skipped without the MPICH wheel's mpicc and mpiexec."""
    venv_bin = Path(sys.executable).parent
    if not (venv_bin / "mpicc").exists() or not (venv_bin / "mpiexec").exists():
        pytest.skip("the MPICH wheel's mpicc/mpiexec are not installed (scripts/setup.sh test)")
    path = build_native.build_tracer(quiet=True)
    if path is None:
        pytest.skip("no mpicc: the pario library is not built")
    return path

