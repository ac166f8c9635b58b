import pytest
from hypothesis import given, strategies as st

from pario import ParioError
from pario.units import format_size, parse_size


@pytest.mark.parametrize("text, value", [
    ("4096", 4096), ("64k", 65536), ("64K", 65536), ("64KiB", 65536), ("4m", 4 << 20), ("4MB", 4 << 20),
    ("1g", 1 << 30), ("2t", 2 << 40), ("0", 0), ("1.5k", 1536), (" 8k ", 8192),
])
def test_parse_size(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("bad", ["", "k", "-4k", "4x", "1.3k", "4 k b", "abc"])
def test_bad_sizes(bad):
    with pytest.raises(ParioError):
        parse_size(bad)


@given(st.integers(0, 1 << 50), st.sampled_from(["", "k", "m", "g"]))
def test_suffix_is_a_power_of_two_multiplier(n, suffix):
    mult = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}[suffix]
    assert parse_size(f"{n}{suffix}") == n * mult


def test_format_size():
    assert format_size(65536) == "64 KiB" and format_size(100) == "100 B" and format_size(1536) == "1.5 KiB"
