"""pario.jsonutil.dumps (plan files): the same JSON value as json.dumps, rows on their lines;
and the extent rows' fast reader against the value-by-value one."""

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from pario import ParioError
from pario.jsonutil import dumps
from pario.layout import ExtentMap, layout_from_dict, layout_to_dict
from pario.layout.spec import _int_extents
from pario.system import load_system

scalars = (st.none() | st.booleans() | st.integers(-2**70, 2**70)
           | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8)
           | st.sampled_from(["], [", "[", "]", "a], [b", "\n", "\"", "\\"]))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=5)
                      | st.dictionaries(st.text(max_size=5) | st.sampled_from(["], ["]), inner, max_size=5),
                      max_leaves=40)


@settings(max_examples=400, deadline=None)
@given(values)
def test_dumps_gives_back_what_json_dumps_gives_back(v):
    assert json.loads(dumps(v)) == json.loads(json.dumps(v, indent=2))


def test_dumps_layout_and_its_refusals():
    rows = [[0, 65536, "H7", 1507328, 8], [65536, 65536, "H6", 0, 7], [1, 2, "a], [b", 3, 4]]
    text = dumps({"extents": rows[:2], "stripes": [1, 2], "empty": [], "none": {}})
    assert text == ('{\n  "extents": [\n    [0, 65536, "H7", 1507328, 8],\n    [65536, 65536, "H6", 0, 7]\n  ],\n'
                    '  "stripes": [1, 2],\n  "empty": [],\n  "none": {}\n}')
    # a string holding the row separator: element by element, still the same value
    assert json.loads(dumps({"x": rows})) == {"x": rows}
    assert json.loads(dumps({1: "a", None: "b", 2.5: "c", True: "d"})) == json.loads(
        json.dumps({1: "a", None: "b", 2.5: "c", True: "d"}))
    with pytest.raises(ValueError):
        dumps({"x": [1.0, math.nan]})
    with pytest.raises(TypeError):
        dumps({(1, 2): 3})


def test_extent_rows_fast_reader_equals_the_value_by_value_reader():
    sysp = load_system("ceda-hdd8")
    rng = np.random.default_rng(5)
    n = 2000
    length = rng.integers(1, 1 << 20, n)
    offset = np.concatenate([[0], np.cumsum(length)[:-1]])
    emap = ExtentMap(offset, length, rng.integers(0, sysp.n, n), rng.integers(0, 1 << 40, n),
                     rng.integers(1, 9, n), None)
    d = layout_to_dict(emap, sysp)
    fast = layout_from_dict(d, sysp)
    cols = ("offset", "length", "server", "local", "datafile")

    def same(a, b):
        return a.default == b.default and all(np.array_equal(getattr(a, c), getattr(b, c)) for c in cols)

    assert same(fast, emap)
    # the same rows, each in a form only the general reader takes (4 fields, a size string,
    # a server by index): same layout
    slow_rows = [[o, n_, s, l] if f == 1 else [o, str(n_), sysp.index(s), l, f] for o, n_, s, l, f in d["extents"]]
    assert _int_extents(d["extents"], sysp) is not None and _int_extents(slow_rows, sysp) is None
    slow = layout_from_dict({**d, "extents": slow_rows}, sysp)
    assert same(slow, emap)
    for col in cols:
        assert getattr(fast, col).dtype == getattr(slow, col).dtype == np.int64
    # bad values still get the general reader's one-line errors
    for bad in ([[-1, 5, "H0", 0, 1]], [[0, 5, "H99", 0, 1]], [[0, True, "H0", 0, 1]], [[0, 2**64, "H0", 0, 1]]):
        with pytest.raises(ParioError):
            layout_from_dict({"type": "extents", "extents": bad}, sysp)


def _plan_with_extents(n=3000):
    from pario.layout import parse_layout
    from pario.plan.base import Plan

    sysp = load_system("ceda-hdd8")
    rng = np.random.default_rng(9)
    length = rng.integers(1, 1 << 16, n)
    emap = ExtentMap(np.concatenate([[0], np.cumsum(length)[:-1]]), length, rng.integers(0, sysp.n, n),
                     rng.integers(0, 1 << 40, n), rng.integers(1, 9, n), parse_layout("fixed:64k", sysp))
    plan = Plan(scheme="ceda", layouts={"*": parse_layout("fixed:64k", sysp)},
                replicas={"a.dat": [{"name": "ceda", "bytes": int(length.sum()), "layout": emap}]},
                predicted_s=1.5, baselines={"orig": 2.0}, details={"x": np.arange(3)})
    return plan, sysp, emap


def test_plan_file_streams_rows_as_the_list_form_writes_them(tmp_path, monkeypatch):
    from pario.layout.spec import ExtentRows
    from pario.plan.base import Plan

    plan, sysp, emap = _plan_with_extents()
    eager = dumps(plan.to_dict(sysp)) + "\n"
    for chunk in (7, 1000, 1 << 20):  # many chunks, a ragged last one, one chunk
        monkeypatch.setattr(ExtentRows, "CHUNK", chunk)
        plan.save(tmp_path / "p.json", sysp)
        assert (tmp_path / "p.json").read_text() == eager
    back = Plan.load(tmp_path / "p.json", sysp).replicas["a.dat"][0]["layout"]
    for col in ("offset", "length", "server", "local", "datafile"):
        assert np.array_equal(getattr(back, col), getattr(emap, col))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.json"]


def test_plan_file_write_that_fails_keeps_the_old_file(tmp_path, monkeypatch):
    import pario.plan.base as base

    plan, sysp, _ = _plan_with_extents()
    target = tmp_path / "p.json"
    target.write_text("old plan\n")

    def broken(obj, fp, **kw):
        fp.write("{\n  \"pario_plan\": 1,")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(base, "dump", broken)
    with pytest.raises(OSError):
        plan.save(target, sysp)
    assert target.read_text() == "old plan\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.json"]
