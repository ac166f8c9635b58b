"""Spatial pattern identifier (CEDA seed 000 §4.2) and the trace summary."""

from __future__ import annotations


import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from helpers import TRACES

from pario.trace import READ, WRITE, Trace
from pario.trace.patterns import MIN_RUN_TRANSITIONS, MIXED_MIN_REGULAR, identify, pattern_map, runs, segment
from pario.trace.summary import size_histogram, summarize


def stream(offsets, lengths=1, rank=0, file=0, op=READ) -> Trace:
    n = len(offsets)
    return Trace.from_arrays(np.full(n, rank), np.full(n, file), np.full(n, op), offsets,
                             np.broadcast_to(lengths, (n,)), files=("f", "g"))


def one(t: Trace, **kw) -> dict:
    st_ = identify(t, **kw)
    assert len(st_) == 1
    row = st_.iloc[0]
    return {"kind": str(row["kind"]), "stride": None if pd.isna(row["stride"]) else int(row["stride"]),
            "regular": float(row["regular"]),
            "runs": int(row["runs"]), "main_kind": row["main_kind"], "size": row["size"]}


# ------------------------------------------------------------------ hand-built streams
def test_contiguous_with_varying_sizes():
    r = one(stream([0, 10, 30, 60], [10, 20, 30, 5]))
    assert r["kind"] == "contiguous" and r["stride"] is None and r["runs"] == 1


def test_single_request_is_contiguous():
    assert one(stream([12345], 7))["kind"] == "contiguous"


@pytest.mark.parametrize("offsets, stride", [
    ([0, 100, 200, 300, 400], 100),
    ([400, 300, 200, 100, 0], -100),   # backward scan
    ([0, 4096], 4096),                 # two non-adjacent requests
])
def test_strided(offsets, stride):
    r = one(stream(offsets, 10))
    assert r["kind"] == "strided" and r["stride"] == stride and r["regular"] == 1.0


def test_strided_with_varying_lengths_keeps_constant_distance():
    r = one(stream([0, 1000, 2000, 3000], [10, 20, 30, 40]))
    assert r["kind"] == "strided" and r["stride"] == 1000 and str(r["size"]) == "<NA>"


@pytest.mark.parametrize("lengths", [10, [10, 4, 10, 7]])
def test_same_range_again_is_repeated_not_stride_0(lengths):
    r = one(stream([4096] * 4, lengths))
    assert r["kind"] == "repeated" and r["stride"] is None and r["regular"] == 1.0
    assert runs(stream([4096] * 4, lengths))["kind"].astype(str).tolist() == ["repeated"]
    assert pattern_map(stream([4096] * 4, lengths))[0]["f"] == {"kind": "repeated", "stride": None,
                                                                 "requests": 4, "bytes": int(np.broadcast_to(lengths, (4,)).sum())}


def test_repeated_run_then_strided_run():
    # 3 re-reads of offset 0 (distance 0), then a strided run of 3 (distance 100)
    rr = runs(stream([0, 0, 0, 100, 200, 300], 8))
    assert rr["kind"].astype(str).tolist() == ["repeated", "strided"]
    assert rr["requests"].tolist() == [3, 3] and pd.isna(rr["stride"].iloc[0]) and int(rr["stride"].iloc[1]) == 100
    # a zero-length request followed by one at its offset is contiguous (gap 0), not repeated
    assert one(stream([50, 50], [0, 8]))["kind"] == "contiguous"


def test_random():
    rng = np.random.default_rng(7)
    offs = rng.permutation(64) * 65536
    # make sure the draw really has no two equal successive templates
    d = np.diff(offs)
    assert not ((d[1:] == d[:-1]).any() or (d == 65536).sum() > 3)
    r = one(stream(offs, 65536))
    assert r["kind"] == "random" and r["regular"] < MIXED_MIN_REGULAR


def test_mixed_runs_and_main_template():
    # 10 contiguous requests, then a strided run of 4, then 3 stray ones
    offs = list(range(10)) + [100, 200, 300, 400] + [57, 1003, 31]
    t = stream(offs, 1)
    r = one(t)
    assert r["kind"] == "mixed" and r["main_kind"] == "contiguous"
    assert r["regular"] == pytest.approx(14 / 17)
    rr = runs(t)
    assert rr["kind"].astype(str).tolist() == ["contiguous", "strided", "random"]
    assert rr["requests"].tolist() == [10, 4, 3]
    assert rr["first"].tolist() == [0, 10, 14]
    assert rr["offset"].tolist() == [0, 100, 57]
    assert int(rr["stride"].iloc[1]) == 100


def test_mostly_random_with_a_short_run_is_random():
    offs = [900, 10, 500, 501, 502, 77, 3000, 40, 1200, 5]
    t = stream(offs, 1)
    assert one(t)["kind"] == "random"
    assert runs(t)["kind"].astype(str).tolist() == ["random", "contiguous", "random"]


def test_boundary_request_stays_with_the_run_it_ends():
    # 0,1,2,3 contiguous; then 13,23,33 strided by 10 (3 -> 13 is also a distance of 10)
    rr = runs(stream([0, 1, 2, 3, 13, 23, 33], 1))
    assert rr["requests"].tolist() == [4, 3]
    assert rr["kind"].astype(str).tolist() == ["contiguous", "strided"]


def test_streams_split_by_rank_file_op_and_use_order_not_rows():
    a = stream([0, 100, 200, 300], 10, rank=0, op=WRITE)
    b = stream([0, 100, 200, 300], 10, rank=0, op=READ)
    c = stream([5, 6, 7], 1, rank=1, file=1)
    t = Trace.concat([a, b, c])
    perm = np.random.default_rng(1).permutation(len(t))
    shuffled = t.take(perm)  # same requests, rows out of order; `order` still chronological
    st_ = identify(shuffled)
    assert len(st_) == 3
    assert st_["kind"].astype(str).tolist() == ["strided", "strided", "contiguous"]
    pm = pattern_map(shuffled)
    assert pm[0]["f"] == {"kind": "strided", "stride": 100, "requests": 8, "bytes": 80}
    assert pm[1]["g"]["kind"] == "contiguous"
    # one stream per (rank, file): the jump back from the last write to the first read
    both = identify(shuffled, by_op=False)
    row = both[both["rank"] == 0].iloc[0]
    assert str(row["kind"]) == "mixed" and row["main_kind"] == "strided" and int(row["main_stride"]) == 100
    assert int(row["runs"]) == 2


def test_pattern_map_disagreeing_ops_is_mixed():
    t = Trace.concat([stream([0, 1, 2], 1, op=WRITE), stream([0, 10, 20], 1, op=READ)])
    assert pattern_map(t)[0]["f"]["kind"] == "mixed"


def test_empty_trace():
    t = Trace.empty()
    assert identify(t).empty and runs(t).empty and pattern_map(t) == {}
    s = summarize(t)
    assert s["requests"] == 0 and s["size_histogram"] == [] and s["patterns"] == {}


# ------------------------------------------------------------------ brute-force oracle
def oracle(offsets, lengths):
    """Straight loop implementation of the module docstring's definitions for one stream."""
    n = len(offsets)
    if n == 1:
        return "contiguous", None, [("contiguous", 1)]
    tmpl = []
    for i in range(n - 1):
        gap = offsets[i + 1] - (offsets[i] + lengths[i])
        dist = offsets[i + 1] - offsets[i]
        tmpl.append(("c", 0) if gap == 0 else ("r", 0) if dist == 0 else ("s", dist))
    blocks = []  # [template, first transition, length]
    for i, k in enumerate(tmpl):
        if blocks and blocks[-1][0] == k:
            blocks[-1][2] += 1
        else:
            blocks.append([k, i, 1])
    block_of = {}
    for b, (k, first, ln) in enumerate(blocks):
        for i in range(first, first + ln):
            block_of[i] = b
    regular = [ln >= MIN_RUN_TRANSITIONS or ln == n - 1 for _, _, ln in blocks]
    labels = []
    for i in range(n):
        inc = block_of.get(i - 1) if i > 0 else None
        out = block_of.get(i) if i < n - 1 else None
        if inc is not None and regular[inc]:
            labels.append(inc)
        elif out is not None and regular[out]:
            labels.append(out)
        else:
            labels.append(-1)
    run_list = []
    for lab in labels:
        if run_list and run_list[-1][0] == lab:
            run_list[-1][1] += 1
        else:
            run_list.append([lab, 1])
    names = {"c": "contiguous", "r": "repeated", "s": "strided"}
    kinds = [("random" if lab < 0 else names[blocks[lab][0][0]], cnt) for lab, cnt in run_list]
    if len(blocks) == 1:
        k = blocks[0][0]
        return names[k[0]], (k[1] if k[0] == "s" else None), kinds
    frac = sum(lab >= 0 for lab in labels) / n
    return ("mixed" if frac >= MIXED_MIN_REGULAR else "random"), None, kinds


@st.composite
def multi_stream_traces(draw):
    nstreams = draw(st.integers(1, 5))
    parts = []
    for s in range(nstreams):
        n = draw(st.integers(1, 25))
        base = draw(st.sampled_from([0, 1000]))
        step = draw(st.sampled_from([1, 2, 8, -3]))
        # a mix of regular pieces and noise, built from a small alphabet to force repeats
        offs = [base]
        lens = draw(st.lists(st.sampled_from([1, 2, 8]), min_size=n, max_size=n))
        for i in range(1, n):
            move = draw(st.sampled_from(["contig", "step", "same", "noise"]))
            if move == "contig":
                offs.append(offs[-1] + lens[i - 1])
            elif move == "same":
                offs.append(offs[-1])
            elif move == "step":
                offs.append(max(offs[-1] + step, 0))
            else:
                offs.append(draw(st.integers(0, 60)))
        parts.append((s % 3, s, draw(st.sampled_from([READ, WRITE])), offs, lens))
    rank = np.concatenate([[p[0]] * len(p[3]) for p in parts])
    file = np.concatenate([[p[1]] * len(p[3]) for p in parts])
    op = np.concatenate([[p[2]] * len(p[3]) for p in parts])
    offs = np.concatenate([p[3] for p in parts])
    lens = np.concatenate([p[4] for p in parts])
    order = np.concatenate([np.arange(len(p[3])) + 100 * i for i, p in enumerate(parts)])
    t = Trace.from_arrays(rank, file, op, offs, lens, files=[f"f{i}" for i in range(nstreams)], order=order)
    return t, parts


@settings(max_examples=150, deadline=None)
@given(multi_stream_traces())
def test_vectorised_identifier_matches_loop_oracle(data):
    t, parts = data
    perm = np.random.default_rng(len(t)).permutation(len(t))
    seg = segment(t.take(perm))
    streams = seg.streams.set_index(["rank", "file", "op"])
    for rank, file, op, offs, lens in parts:
        kind, stride, run_kinds = oracle(offs, lens)
        row = streams.loc[(rank, file, op)]
        assert str(row["kind"]) == kind
        assert (None if pd.isna(row["stride"]) else int(row["stride"])) == stride
        got = seg.runs[(seg.runs["rank"] == rank) & (seg.runs["file"] == file) & (seg.runs["op"] == op)]
        assert list(zip(got["kind"].astype(str), got["requests"])) == run_kinds
        assert int(row["requests"]) == len(offs) == int(got["requests"].sum())
    # runs partition every stream: each trace row belongs to exactly one run
    r = seg.run_of_row(len(t))
    assert np.bincount(r).tolist() == seg.runs["requests"].tolist()


# ------------------------------------------------------------------ real logs
def darshan(name):
    p = TRACES / name
    if not p.exists():
        pytest.skip(f"{name} not available")
    from pario.trace.darshan import import_darshan
    return import_darshan(p)


def test_ior_strided_log_is_strided_16x64k():
    t = darshan("ior-mpiio-strided-16r-64k.darshan")
    st_ = identify(t)
    assert len(st_) == 32  # 16 ranks x {write, read}
    assert set(st_["kind"].astype(str)) == {"strided"}
    assert set(st_["stride"].astype(int)) == {16 * 64 * 1024}
    pm = pattern_map(t)
    assert all(v == {"kind": "strided", "stride": 16 * 65536, "requests": 128, "bytes": 128 * 65536}
               for per in pm.values() for v in per.values())


def test_ior_seq_log_is_contiguous_and_random_log_is_random():
    seq = identify(darshan("ior-mpiio-seq-16r-b4m-t64k.darshan"))
    assert set(seq["kind"].astype(str)) == {"contiguous"} and (seq["requests"] == 64).all()
    rnd = identify(darshan("ior-mpiio-random-16r-64k.darshan"))
    assert set(rnd["kind"].astype(str)) == {"random"}


def test_summary_of_ior_strided_log():
    t = darshan("ior-mpiio-strided-16r-64k.darshan")
    s = summarize(t)
    assert s["ranks"] == 16 and s["requests"] == 2048
    assert s["bytes_read"] == s["bytes_written"] == 64 << 20
    assert s["size_histogram"] == [{"bin": "64 KiB-128 KiB", "lo": 65536, "hi": 131072, "count": 2048,
                                    "reads": 1024, "writes": 1024, "bytes": 128 << 20}]
    assert s["files"][0]["ranks"] == 16 and s["files"][0]["requests"] == 2048
    assert set(s["patterns"]) == {str(r) for r in range(16)}
    assert s["patterns"]["0"][t.files[0]]["stride"] == 1 << 20


def test_real_log_rewrites_are_repeated():
    """treddy_mpi-io-test (real/): through POSIX every rank writes its Open MPI shared-memory
    file ``*.sm`` twice at the same offset (PyDarshan's raw DXT records, below); the 3.1.6
    mpi-io-test logs read back the 16 MiB block each rank wrote (one stream per rank with
    ``by_op=False``)."""
    import warnings

    from pario.trace.darshan import ParioWarning, import_darshan

    name = "real/treddy_mpi-io-test_id4373053_6-2-60198-9815401321915095332_1.darshan"
    p = TRACES / name
    if not p.exists():
        pytest.skip(f"{name} not available")
    from darshan.report import DarshanReport

    rep = DarshanReport(str(p), read_all=False)
    rep.mod_read_all_dxt_records("DXT_POSIX", dtype="pandas", warnings=False)
    same = {rep.name_records[r["id"]] for r in rep.records["DXT_POSIX"]
            if len(r["write_segments"]) >= 2 and r["write_segments"]["offset"].nunique() == 1}
    rep._cleanup()
    assert len(same) == 32 and all(f.endswith(".sm") for f in same)
    t = import_darshan(p, module="DXT_POSIX")
    st_ = identify(t)
    rep_files = {t.files[f] for f in st_[st_["kind"].astype(str) == "repeated"]["file"]}
    assert rep_files == same
    assert not ((st_["kind"].astype(str) == "strided") & (st_["stride"].fillna(1) == 0)).any()
    old = TRACES / "real/mpi-io-test-x86_64-3.1.6.darshan"
    if old.exists():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ParioWarning)
            both = identify(import_darshan(old), by_op=False)
        assert both["kind"].astype(str).tolist() == ["repeated"] * 4


# ------------------------------------------------------------------ summary pieces
def test_size_histogram_bins_against_brute_force():
    rng = np.random.default_rng(3)
    lengths = np.r_[0, 1, 2, 3, 4, 1023, 1024, 1025, (1 << 62) - 1, 1 << 62, rng.integers(0, 1 << 40, 500)]
    ops = rng.integers(0, 2, len(lengths))
    hist = size_histogram(lengths, ops)
    for b in hist:
        inbin = [(ln, o) for ln, o in zip(lengths.tolist(), ops.tolist()) if b["lo"] <= ln < b["hi"]]
        assert b["count"] == len(inbin) and b["bytes"] == sum(ln for ln, _ in inbin)
        assert b["reads"] == sum(o == READ for _, o in inbin)
        assert b["hi"] == (1 if b["lo"] == 0 else 2 * b["lo"])
    assert sum(b["count"] for b in hist) == len(lengths)


def test_summary_totals_and_json_keys():
    import json

    t = Trace.from_arrays([0, 0, 3, 3], ["a", "a", "b", "a"], ["read", "write", "write", "read"],
                          [0, 10, 0, 500], [10, 20, 30, 40], collective=[True, False, True, False])
    s = summarize(t)
    assert s["ranks"] == 4 and s["ranks_with_io"] == 2
    assert s["bytes_read"] == 50 and s["bytes_written"] == 50 and s["collective"] == 2
    assert {f["name"]: f["requests"] for f in s["files"]} == {"a": 3, "b": 1}
    assert set(s["patterns"]) == {"0", "3"} and s["time"] is None
    assert s["nprocs"] == 4 and s["aggregators"] is None and s["approximate"] == "" and s["notes"] == []
    json.dumps(s, allow_nan=False)  # plain types only
    m = summarize(t.with_meta(nprocs=64, aggregators=[3, 0], hints={"cb_nodes": "2"}, partial=True, notes=("x",)))
    assert (m["nprocs"], m["ranks"], m["aggregators"], m["hints"], m["partial"], m["notes"]) == (
        64, 4, [0, 3], {"cb_nodes": "2"}, True, ["x"])
    json.dumps(m, allow_nan=False)
