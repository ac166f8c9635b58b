"""Fixtures shared by the tests: an empty store, and the project's C build script."""

import importlib.util
from pathlib import Path

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
