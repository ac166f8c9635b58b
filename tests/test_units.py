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


@given(st.integers(0, 1 << 50), st.sampled_from(["", "k", "m", "g", "t", "p", "e"]))
def test_suffix_is_a_power_of_two_multiplier(n, suffix):
    """Exact (no float rounding) up to 2^63 - 1 bytes; beyond, one line naming the limit."""
    mult = 1024 ** "_kmgtpe".index(suffix or "_")
    if n * mult <= (1 << 63) - 1:
        assert parse_size(f"{n}{suffix}") == n * mult
    else:
        with pytest.raises(ParioError, match="beyond 2\\^63-1") as ei:
            parse_size(f"{n}{suffix}")
        assert "\n" not in str(ei.value)


def test_sizes_near_the_limit_are_exact():
    assert parse_size("9223372036854775807") == (1 << 63) - 1
    assert parse_size("8191p") == 8191 << 50
    assert parse_size("1.5k") == 1536 and parse_size("0.5m") == 1 << 19
    for bad in ("9223372036854775808", "8e", "99999999999999999999999", "0.3k"):
        with pytest.raises(ParioError):
            parse_size(bad)


def test_format_size():
    assert format_size(65536) == "64 KiB" and format_size(100) == "100 B" and format_size(1536) == "1.5 KiB"
