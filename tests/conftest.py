"""Fixtures shared by the store tests."""

import pytest

from pario.store import Store, init_store


@pytest.fixture
def store(tmp_path):
    """An empty store of the ceda-hdd8 profile (8 HDD servers) in a temporary directory."""
    init_store(tmp_path / "s", "ceda-hdd8")
    st = Store(tmp_path / "s")
    yield st
    st.close()
