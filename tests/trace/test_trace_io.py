"""Trace core (pario.trace.core) and the CSV / Parquet formats (pario.trace.io)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pario import ParioError
from pario.trace import READ, WRITE, Trace, load, save


def small_trace() -> Trace:
    return Trace.from_arrays(
        rank=[1, 0, 0, 1, 0],
        file=["b", "a", "a", "b", "b"],
        op=["write", "read", "w", "R", "write"],
        offset=[0, 4096, 0, 100, 8192],
        length=[10, 4096, 4096, 20, 30],
        start=[0.5, 0.3, 0.1, 0.2, 0.2],
        end=[0.6, 0.4, 0.2, 0.3, 0.25],
    )


# ---------------------------------------------------------------- core
def test_from_arrays_names_codes_and_order():
    t = small_trace()
    assert t.files == ("b", "a")  # order of first appearance
    assert t.file.tolist() == [0, 1, 1, 0, 0]
    assert t.op.tolist() == [WRITE, READ, WRITE, READ, WRITE]
    # order = rank of start time within each rank (brute force)
    for r in (0, 1):
        rows = np.flatnonzero(t.rank == r)
        expect = np.argsort(np.argsort(t.start[rows], kind="stable"), kind="stable")
        assert t.order[rows].tolist() == expect.tolist()
    assert t.nranks == 2
    assert t.bytes_read == 4096 + 20
    assert t.bytes_written == 10 + 4096 + 30
    assert t.has_times


def test_order_falls_back_to_row_order_without_times():
    t = Trace.from_arrays([0, 1, 0, 0], None, None, [0, 0, 5, 9], [1, 1, 1, 1])
    assert t.order.tolist() == [0, 0, 1, 2]
    assert not t.has_times
    assert t.files == ("file",)


def test_where_sorted_take_concat():
    t = small_trace()
    w = t.where(rank=0, op="write")
    assert len(w) == 2 and set(w.offset.tolist()) == {0, 8192}
    assert len(t.where(file="a")) == 2
    s = t.sorted()
    keys = list(zip(s.rank.tolist(), s.order.tolist()))
    assert keys == sorted(keys)
    other = Trace.from_arrays([0, 2], ["c", "a"], ["read", "read"], [0, 0], [5, 6])
    c = Trace.concat([t, other])
    assert c.files == ("b", "a", "c")
    assert len(c) == len(t) + 2
    assert c.bytes_read == t.bytes_read + 11
    # rank 0 of `other` continues after the 3 requests rank 0 has in `t`
    tail = c.take(np.arange(len(t), len(c)))
    assert tail.order.tolist() == [3, 0]
    assert [c.files[i] for i in tail.file] == ["c", "a"]


@pytest.mark.parametrize("bad, msg", [
    (dict(offset=[-1]), "negative offset"),
    (dict(length=[-5]), "negative length"),
    (dict(rank=[-1]), "negative rank"),
    (dict(op=["delete"]), "bad op"),
    (dict(op=[3]), "bad op"),
])
def test_from_arrays_rejects_bad_values(bad, msg):
    kw = dict(rank=[0], file=[0], op=["read"], offset=[0], length=[1])
    kw.update(bad)
    with pytest.raises(ParioError, match=msg):
        Trace.from_arrays(kw.pop("rank"), kw.pop("file"), kw.pop("op"), kw.pop("offset"), kw.pop("length"))


def test_checked_rejects_file_index_out_of_range_and_wrong_shape():
    t = small_trace()
    with pytest.raises(ParioError, match="out of range"):
        Trace.checked(dict(t.cols), ("only-one",))
    cols = dict(t.cols)
    cols["offset"] = cols["offset"][:2]
    with pytest.raises(ParioError, match="rows"):
        Trace.checked(cols, t.files)


def test_frame_round_trip_keeps_everything():
    t = small_trace()
    u = Trace.from_frame(t.to_frame())
    assert u.files == t.files
    for k in t.cols:
        np.testing.assert_array_equal(u.cols[k], t.cols[k])


# ---------------------------------------------------------------- files
def assert_same(a: Trace, b: Trace):
    assert [a.files[i] for i in a.file] == [b.files[i] for i in b.file]
    for k in ("rank", "op", "offset", "length", "collective", "order"):
        np.testing.assert_array_equal(a.cols[k], b.cols[k], err_msg=k)
    for k in ("start", "end"):
        np.testing.assert_allclose(a.cols[k], b.cols[k], rtol=0, atol=0, equal_nan=True, err_msg=k)


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_round_trip(tmp_path, suffix):
    t = small_trace().with_columns(collective=np.array([True, False, False, True, False]))
    p = save(t, tmp_path / f"t{suffix}")
    assert p.exists()
    assert not list(tmp_path.glob(".*tmp*"))  # atomic write leaves no temporary file
    assert_same(load(p), t)


def test_csv_size_suffixes_and_optional_columns(tmp_path):
    p = tmp_path / "s.csv"
    p.write_text("rank, file, op, offset, length, collective\n"
                 "0, f, read, 0, 64k, True\n"
                 "0, f, read, 64k, 64KiB, False\n"
                 "1, f, write, 1m, 4m, True\n"
                 "1, g, w, 1g, 512, False\n")
    t = load(p)
    assert t.offset.tolist() == [0, 65536, 1 << 20, 1 << 30]
    assert t.length.tolist() == [65536, 65536, 4 << 20, 512]
    assert t.collective.tolist() == [True, False, True, False]
    assert t.op.tolist() == [READ, READ, WRITE, WRITE]
    assert t.files == ("f", "g")
    assert np.isnan(t.start).all() and t.order.tolist() == [0, 1, 0, 1]


@pytest.mark.parametrize("text, msg", [
    ("rank,file,op,offset\n0,f,read,0\n", "missing column"),
    ("rank,file,op,offset,length\n0,f,delete,0,1\n", "bad op"),
    ("rank,file,op,offset,length\n0,f,read,-4,1\n", "negative offset"),
    ("rank,file,op,offset,length\n0,f,read,0,1.5\n", "non-integer"),
    ("rank,file,op,offset,length\n0,f,read,0,64q\n", "bad length"),
    ("rank,file,op,offset,length\n,f,read,0,1\n", "rank"),
    ("rank,file,op,offset,length\nx,f,read,0,1\n", "rank"),
    ("rank,file,op,offset,length\n0,f,read,,1\n", "empty"),
    ("rank,file,op,offset,length\n-1,f,read,0,1\n", "negative rank"),
    ("rank,file,op,offset,length\n0,f,read,0,1\n0,f,read,0,1,9\n", "not a readable csv"),
])
def test_bad_csv_is_one_line_pario_error(tmp_path, text, msg):
    p = tmp_path / "bad.csv"
    p.write_text(text)
    with pytest.raises(ParioError, match=msg) as exc:
        load(p)
    assert "\n" not in str(exc.value)
    assert str(p) in str(exc.value)


def test_bad_paths_and_formats(tmp_path):
    with pytest.raises(ParioError, match="no such file"):
        load(tmp_path / "missing.csv")
    with pytest.raises(ParioError, match="unknown trace format"):
        load(tmp_path / "x.darshan")
    junk = tmp_path / "junk.parquet"
    junk.write_bytes(b"not parquet at all")
    with pytest.raises(ParioError, match="not a readable parquet"):
        load(junk)
    with pytest.raises(ParioError, match="unknown trace format"):
        save(small_trace(), tmp_path / "t.json")


def test_csv_keeps_awkward_file_names(tmp_path):
    t = Trace.from_arrays([0, 0], ["NA", " lead"], ["read", "read"], [0, 1], [1, 1])
    assert load(save(t, tmp_path / "n.csv")).files == ("NA", " lead")


def test_csv_collective_words(tmp_path):
    p = tmp_path / "c.csv"
    p.write_text("rank,file,op,offset,length,collective\n0,f,read,0,1,yes\n0,f,read,1,1,no\n0,f,read,2,1,0\n")
    assert load(p).collective.tolist() == [True, False, False]


# ---------------------------------------------------------------- property
names = st.text(alphabet="abcXYZ019_-./, \"'", min_size=1, max_size=12).filter(
    lambda s: s == s.strip() and s.lower() not in {"na", "nan", "null", "none", "n/a"})


@st.composite
def traces(draw):
    n = draw(st.integers(1, 30))
    files = draw(st.lists(names, min_size=1, max_size=4, unique=True))
    ints = st.integers(0, 2**62)
    rank = draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))
    fidx = draw(st.lists(st.integers(0, len(files) - 1), min_size=n, max_size=n))
    op = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    off = draw(st.lists(ints, min_size=n, max_size=n))
    ln = draw(st.lists(st.integers(0, 2**40), min_size=n, max_size=n))
    with_times = draw(st.booleans())
    start = draw(st.lists(st.floats(0, 1e6, allow_nan=False), min_size=n, max_size=n)) if with_times else None
    coll = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    return Trace.from_arrays(rank, np.array(fidx, dtype=np.int32), op, off, ln, files=files,
                             start=start, end=None if start is None else np.array(start) + 1.0,
                             collective=coll)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(t=traces(), fmt=st.sampled_from([".csv", ".parquet"]))
def test_round_trip_property(tmp_path, t, fmt):
    u = load(save(t, tmp_path / f"p{fmt}"))
    assert len(u) == len(t)
    if len(t):
        assert_same(u, t)
    assert u.bytes_read == t.bytes_read and u.bytes_written == t.bytes_written


def test_empty_trace_round_trips_through_parquet(tmp_path):
    t = Trace.empty()
    u = load(save(t, tmp_path / "e.parquet"))
    assert len(u) == 0 and u.nranks == 0


def test_empty_trace_round_trips_through_csv(tmp_path):
    assert len(load(save(Trace.empty(), tmp_path / "e.csv"))) == 0


def test_to_frame_columns():
    df = small_trace().to_frame()
    assert list(df.columns) == ["rank", "file", "op", "offset", "length", "start", "end", "collective", "order", "call"]
    assert isinstance(df["file"].dtype, pd.CategoricalDtype)
    assert df["op"].tolist() == ["write", "read", "write", "read", "write"]


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_metadata_and_calls_survive_save_load_and_transforms(tmp_path, suffix):
    """A trace's job facts (process count, aggregators, hints, partial, command line) and its
    call numbers survive a file round trip and every transform: the issue-15 bug was a
    partial flag and an nprocs lost on the way to Parquet."""
    from pario.trace.core import TraceMeta

    meta = TraceMeta(source="pario tracer", nprocs=16, aggregators=(0, 4, 8, 12),
                     hints=(("cb_buffer_size", "4194304"), ("romio_cb_write", "enable")),
                     command="ior -a MPIIO -c", partial=True, notes=("a note",))
    tr = Trace.from_arrays([0, 0, 0, 3], [0, 0, 0, 0], ["write"] * 4, [0, 100, 200, 50], [10, 10, 10, 10],
                           files=("f",), call=[0, 0, 1, 0], meta=meta)
    p = save(tr, tmp_path / f"t{suffix}")
    back = load(p)
    assert back.meta == meta
    assert back.call.tolist() == [0, 0, 1, 0]
    assert back.nprocs == 16 and back.nranks == 4
    assert back.meta.cb_nodes == 4 and back.meta.cb_buffer_size == 4 << 20
    assert back.take(back.rank == 0).meta == meta
    both = Trace.concat([back, back])
    assert both.meta.nprocs == 16
    # the second copy's calls follow the first's per rank: rank 0 had calls 0,1 → 2,3
    assert both.call[both.rank == 0].tolist() == [0, 0, 1, 2, 2, 3]
    # without call numbers every request is its own call
    plain = Trace.from_arrays([0, 0], None, ["read", "read"], [0, 5], [5, 5])
    assert plain.call.tolist() == plain.order.tolist() == [0, 1]
    assert plain.meta == TraceMeta()


def test_metadata_bad_json_is_one_line(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("#pario-meta {not json\nrank,file,op,offset,length\n0,f,read,0,1\n")
    with pytest.raises(ParioError, match="metadata"):
        load(p)
    p.write_text('#pario-meta {"nprocs": -3}\nrank,file,op,offset,length\n0,f,read,0,1\n')
    with pytest.raises(ParioError, match="metadata"):
        load(p)
