"""Hint parsing: ROMIO names, pario names, environment defaults, one-line errors."""

import pytest

from pario import ParioError
from pario.mpi.hints import Hints


def test_direct_hint_from_pario_romio_and_environment():
    assert Hints.parse({}, environ={}).direct is False
    assert Hints.parse({"pario_direct": "true"}, environ={}).direct is True
    assert Hints.parse({"direct_write": "true", "direct_read": "false"}, environ={}).direct is True
    assert Hints.parse(None, environ={"PARIO_DIRECT": "1"}).direct is True
    # the program's info wins over the environment
    assert Hints.parse({"pario_direct": "false"}, environ={"PARIO_DIRECT": "1"}).direct is False


def test_bad_hints_are_one_line_errors():
    with pytest.raises(ParioError, match="pario_direct='maybe'"):
        Hints.parse({"pario_direct": "maybe"}, environ={})
    with pytest.raises(ParioError, match="cb_buffer_size"):
        Hints.parse({"cb_buffer_size": "lots"}, environ={})
    with pytest.raises(ParioError, match="cb_buffer_size must be at most 1 GiB"):   # the C driver's limit
        Hints.parse({"cb_buffer_size": "2G"}, environ={})
    with pytest.raises(ParioError, match="expected romcio"):
        Hints.parse({"pario_order": "fastest"}, environ={})
    with pytest.raises(ParioError, match="key=value"):
        Hints.parse(None, environ={"PARIO_HINTS": "cb_nodes"})


def test_sizes_take_units():
    h = Hints.parse({"cb_buffer_size": "4M", "striping_unit": "64K"}, environ={})
    assert (h.cb_buffer_size, h.striping_unit) == (4 << 20, 64 << 10)
