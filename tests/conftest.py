"""Fixtures shared by the tests: an empty store, the project's C build script and the
library it builds."""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from pario.store import Store, init_store


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
    spec = importlib.util.spec_from_file_location(
        "build_native", Path(__file__).resolve().parents[1] / "scripts" / "build_native.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


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
