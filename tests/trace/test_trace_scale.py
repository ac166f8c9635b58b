"""Traces and simulation at scale (issue 18): the columnar Parquet reader, the streaming
``trace show`` summary, the chunked simulator build and the chunked trace writer give exactly
what the whole-table code gives (the oracles: the general pandas reader, :func:`summarize`
of the loaded trace, the simulator's reference build, the in-memory generator)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import run_cli as run

from pario import ParioError
from pario.trace import Trace, load, save
from pario.trace import io as tio
from pario.trace import summary as tsum
from pario.trace.core import TraceMeta
from pario.trace.summary import summarize, summarize_file
from pario.workload import btio, hpio, ior, tile


def same_trace(a: Trace, b: Trace) -> None:
    assert a.files == b.files
    assert a.meta == b.meta
    assert set(a.cols) == set(b.cols)
    for k in a.cols:
        assert a.cols[k].dtype == b.cols[k].dtype, k
        assert np.array_equal(a.cols[k], b.cols[k], equal_nan=a.cols[k].dtype.kind == "f"), k


def old_save(trace: Trace, path) -> None:
    """How pario wrote Parquet before issue 18: pandas → one arrow table, one row group,
    ``op`` as strings, NaN times as nulls."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(trace.to_frame(), preserve_index=False)
    meta = json.dumps(trace.meta.to_dict(), sort_keys=True).encode()
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), tio.META_KEY: meta})
    pq.write_table(table, path)


def rng_trace(seed: int, n: int = 3000, nfiles: int = 3, ranks: int = 6, times: bool = True,
              shuffle: bool = False, meta: TraceMeta | None = None) -> Trace:
    """Random requests mixing contiguous, strided, repeated and random streams, reads and
    writes, collective flags, several files (one of them never used)."""
    g = np.random.default_rng(seed)
    rank = np.sort(g.integers(0, ranks, n))
    file = g.integers(0, nfiles, n)
    op = g.integers(0, 2, n)
    kind = g.integers(0, 4, n)
    length = g.choice([0, 1, 512, 4096, 65536, 3 << 20], n)
    base = g.integers(0, 1 << 30, n)
    offset = np.where(kind == 0, np.cumsum(length) - length, np.where(kind == 1, np.arange(n) * 8192,
                      np.where(kind == 2, 4096, base)))
    start = np.sort(g.random(n)) * 10 if times else None
    t = Trace.from_arrays(rank, file.astype(np.int32), op, offset, length,
                          files=tuple(f"/d/f{i}" for i in range(nfiles + 1)), start=start,
                          end=None if start is None else start + 0.01, collective=g.random(n) < 0.3, meta=meta)
    if shuffle:  # rows out of chronological order within their streams
        t = t.take(g.permutation(n))
    return t


def cases():
    meta = TraceMeta(source="pario tracer", nprocs=64, aggregators=(0, 8), hints=(("cb_nodes", "2"),),
                     command="ior -w -r", partial=True, notes=("a note",))
    return {
        "ior-random": ior(8, 4096, 64 * 4096, 3, pattern="random", op="both", seed=7),
        "ior-strided-fpp": ior(6, 1024, 4096, 4, pattern="strided", op="both", file_per_proc=True, collective=True),
        "hpio": hpio(4, 20, 100, 30, op="both"),
        "tile": tile(2, 2, 10, 8, 4, overlap_x=1, op="write"),
        "btio": btio("S", "full", 4, op="both"),
        "random-times-meta": rng_trace(1, meta=meta),
        "random-no-times": rng_trace(2, times=False),
        "shuffled": rng_trace(3, shuffle=True),
        "shuffled-no-times": rng_trace(4, times=False, shuffle=True),
    }


CASES = cases()


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("writer", ["new", "old"])
def test_columnar_load_equals_the_general_reader(tmp_path, monkeypatch, name, writer):
    monkeypatch.setattr(tio, "ROW_GROUP", 700)  # several row groups even for small traces
    t = CASES[name]
    p = tmp_path / "t.parquet"
    save(t, p) if writer == "new" else old_save(t, p)
    fast = tio._load_parquet_fast(p)
    same_trace(fast, tio._load_frame(p, "parquet"))
    same_trace(fast, load(p))
    assert fast.files == t.files and fast.meta == t.meta
    for k in t.cols:
        assert np.array_equal(fast.cols[k], t.cols[k], equal_nan=True), k


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("writer", ["new", "old"])
@pytest.mark.parametrize("group_rows", [1 << 22, 100])
def test_streaming_summary_equals_the_whole_table_summary(tmp_path, monkeypatch, name, writer, group_rows):
    monkeypatch.setattr(tio, "ROW_GROUP", 500)
    monkeypatch.setattr(tsum, "PATTERN_GROUP_ROWS", group_rows)  # rank groups of the fallback
    t = CASES[name]
    p = tmp_path / "t.parquet"
    save(t, p) if writer == "new" else old_save(t, p)
    got = summarize_file(p)
    assert got is not None
    s, nprocs = got
    assert nprocs == t.meta.nprocs
    expect = summarize(load(p))
    assert json.dumps(s) == json.dumps(expect)  # equal, keys in the same order
    assert expect == summarize(t)


def test_streaming_patterns_fall_back_to_rank_groups_when_streams_go_back_in_time(tmp_path, monkeypatch):
    from pario.trace.patterns import PatternStream

    t = CASES["shuffled"]
    ps = PatternStream()
    assert not ps.add(t.rank, t.file, t.op, t.offset, t.length, t.order)
    assert ps.result(t.files) is None
    calls = []
    real = tsum._patterns_by_rank_groups
    monkeypatch.setattr(tsum, "_patterns_by_rank_groups", lambda *a: calls.append(1) or real(*a))
    monkeypatch.setattr(tsum, "PATTERN_GROUP_ROWS", 400)
    p = save(t, tmp_path / "s.parquet")
    s, _ = summarize_file(p)
    assert calls and s == summarize(t)


def test_show_cli_output_is_the_same_streamed_or_loaded(tmp_path, monkeypatch):
    """``trace show`` text and JSON: the streamed summary prints what the loaded trace did."""
    t = CASES["random-times-meta"]
    p = save(t, tmp_path / "m.parquet")
    rc, streamed_json, _ = run("trace", "show", p, "--json")
    rc2, streamed_text, _ = run("trace", "show", p)
    assert rc == rc2 == 0
    monkeypatch.setattr(tsum, "summarize_file", lambda *a, **k: None)  # force the whole-table path
    assert run("trace", "show", p, "--json")[1] == streamed_json
    assert run("trace", "show", p)[1] == streamed_text
    assert json.loads(streamed_json)["requests"] == len(t)


def test_bad_values_and_empty_traces_keep_their_one_line_errors(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    t = CASES["ior-random"]
    p = tmp_path / "neg.parquet"
    df = t.to_frame()
    df.loc[5, "rank"] = -1
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False), p)
    assert summarize_file(p) is None
    rc, _, err = run("trace", "show", p)
    assert rc == 2 and err.strip() == f"pario: error: {p}: trace has a negative rank"
    z = save(Trace.from_arrays([0, 1], None, ["read", "read"], [0, 5], [0, 0]), tmp_path / "z.parquet")
    with pytest.raises(ParioError, match="none of them moves a byte"):
        summarize_file(z, where=str(z))
    rc, _, err = run("trace", "show", z)
    assert rc == 2 and "empty trace (2 requests, none of them moves a byte)" in err and len(err.splitlines()) == 1
    e = save(Trace.empty(), tmp_path / "e.parquet")
    rc, _, err = run("trace", "show", e)
    assert rc == 2 and "empty trace (no requests)" in err


def test_parquet_is_written_in_row_groups_and_call_shares_order(tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    monkeypatch.setattr(tio, "ROW_GROUP", 1000)
    t = ior(8, 4096, 64 * 4096, 5, pattern="random", op="both", seed=3)
    p = save(t, tmp_path / "g.parquet")
    md = pq.ParquetFile(p).metadata
    assert md.num_row_groups == -(-len(t) // 1000) and md.num_rows == len(t)
    back = load(p)
    assert back.call is back.order  # one array for both when every request is its own call
    same_trace(back, t)


# ---------------------------------------------------------------------------- simulate
def _reference(monkeypatch):
    """Today's simulator build: the whole-trace builder, int64 arrays, zero arrays for
    release / think / phase, the worst-case event heap."""
    import pario.simulate.core as core

    def old_dtypes(arrays):
        n = len(arrays[1])
        out = []
        for i, a in enumerate(arrays):
            if i in (2, 3, 6) and len(a) == 0:
                a = np.zeros(n, dtype=np.float64 if i != 6 else np.int64)
            if a.dtype.kind in "iu" and i not in (1,):
                a = a.astype(np.int64)
            out.append(a)
        return tuple(out)

    monkeypatch.setattr(core, "_build_independent",
                        lambda trace, system, rt, n_nodes, timing, progress=None:
                        core._build_independent_whole(trace, system, rt, n_nodes, timing))
    monkeypatch.setattr(core, "_compact", old_dtypes)
    monkeypatch.setattr(core, "heap_bound", lambda *a: 0)


def _same_result(a, b) -> None:
    da, db = a.to_dict(), b.to_dict()
    da.pop("wall_s"), db.pop("wall_s")
    assert da == db
    for f in ("server_busy_s", "server_bytes", "server_subrequests", "server_sequential", "client_ranks",
              "client_time_s", "link_busy_s"):
        assert np.array_equal(getattr(a, f), getattr(b, f)), f
    assert a.n_events == b.n_events and a.n_subrequests == b.n_subrequests


SIM_CASES = {
    "ior-random": (lambda: ior(8, 4096, 64 * 4096, 3, pattern="random", op="both", seed=7), {}),
    "hpio-trace-timing": (lambda: rng_trace(5, n=2000), {"timing": "trace"}),
    "elevator-jitter": (lambda: ior(6, 8192, 16 * 8192, 4, pattern="random", op="both", seed=2),
                        {"elevator": True, "jitter": 1e-3, "seed": 3}),
    "multi-file-layouts": (lambda: rng_trace(6, n=1500, times=False), {"layout": "dict"}),
    "collective": (lambda: ior(4, 4096, 8 * 4096, 2, pattern="strided", op="both", collective=True),
                   {"collective": True, "cb_buffer": 16384}),
    "zero-length": (lambda: rng_trace(7, n=800), {}),
}


@pytest.mark.parametrize("name", sorted(SIM_CASES))
def test_chunked_simulation_equals_the_whole_trace_build(monkeypatch, name):
    import pario.simulate.core as core
    from pario.layout import parse_layout
    from pario.simulate import simulate
    from pario.system import load_system

    system = load_system("ceda-hdd8")
    make, kw = SIM_CASES[name]
    t = make()
    kw = dict(kw)
    if kw.pop("layout", None) == "dict":
        layout = {t.files[0]: parse_layout("fixed:4k", system), "*": parse_layout("fixed:64k@H0,H2,H4", system)}
    else:
        layout = parse_layout("fixed:16k", system)
    with monkeypatch.context() as m:
        m.setattr(core, "CHUNK", 97)  # many chunks, chunk edges inside ranks
        new = simulate(t, system, layout, **kw)
    with monkeypatch.context() as m:
        _reference(m)
        ref = simulate(t, system, layout, **kw)
    _same_result(new, ref)


def test_chunked_simulation_with_a_plan_and_replicas(monkeypatch):
    """Replicas chosen per request (cheapest, an array of choices): per-request decisions,
    the same in chunks."""
    import pario.simulate.core as core
    from pario.layout import parse_layout
    from pario.simulate import Routing, simulate
    from pario.system import load_system

    system = load_system("ceda-hdd8")
    t = ior(8, 4096, 64 * 4096, 3, pattern="random", op="both", seed=11)
    orig = parse_layout("fixed:64k", system)
    rep = parse_layout("fixed:4k@H1,H3,H5", system)
    for choice in ("cheapest", np.random.default_rng(0).integers(0, 2, len(t))):
        rt = Routing(layouts=orig, replicas={"*": [("r1", rep)]}, choice=choice)
        with monkeypatch.context() as m:
            m.setattr(core, "CHUNK", 101)
            new = simulate(t, system, routing=rt)
        with monkeypatch.context() as m:
            _reference(m)
            ref = simulate(t, system, routing=rt)
        _same_result(new, ref)


def test_heap_bound_holds_and_a_small_heap_reruns_with_the_worst_case(monkeypatch):
    import pario.simulate.core as core
    from pario.layout import parse_layout
    from pario.simulate import simulate
    from pario.system import load_system

    system = load_system("ceda-hdd8")
    t = ior(8, 65536, 16 * 65536, 2, pattern="random", op="both", seed=5)
    layout = parse_layout("fixed:16k", system)
    ref = simulate(t, system, layout)
    calls = []
    real = core.simulate_core

    def spy(*a):
        out = real(*a)
        calls.append((a[-1], bool(out[-1])))
        return out

    monkeypatch.setattr(core, "simulate_core", spy)
    bound = core.heap_bound
    monkeypatch.setattr(core, "heap_bound", lambda *a: 3)  # far too small: overflow, then the worst case
    _same_result(simulate(t, system, layout), ref)
    assert calls == [(3, True), (0, False)]
    # the real bound: 8 ranks x 4 sub-requests (64 KiB over 16 KiB stripes) + servers + margin
    arrays, _ = core._build_independent(t, system, core.Routing(layouts=layout), 4, "blocking")
    arrays = core._compact(arrays[:3] + (np.zeros(0),) + arrays[3:])
    assert bound(arrays[0], arrays[4], arrays[6], system.n) == 8 * 4 + system.n + 16


# ---------------------------------------------------------------------------- generator
@pytest.mark.parametrize("kw", [
    dict(procs=8, xfer=4096, block=64 * 4096, segments=3, pattern="random", op="both", seed=7),
    dict(procs=5, xfer=1024, block=8 * 1024, segments=4, pattern="random", op="write", file_per_proc=True, seed=1),
    dict(procs=4, xfer=1024, block=4096, segments=6, pattern="strided", op="read", collective=True),
    dict(procs=3, xfer=512, block=2048, segments=2, pattern="sequential", op="both", file_per_proc=True),
])
def test_ior_in_chunks_writes_the_same_trace(tmp_path, monkeypatch, kw):
    from pario.workload.ior import ior_chunks

    whole = ior(**kw)
    gen = ior_chunks(**kw, chunk=37)
    assert next(gen) == len(whole)
    parts = list(gen)
    assert max(len(p) for p in parts) <= 37
    assert all(p.files == whole.files for p in parts)
    joined = Trace({k: np.concatenate([p.cols[k] for p in parts]) for k in whole.cols}, whole.files, whole.meta)
    same_trace(joined, whole)
    # the CLI streams Parquet output chunk by chunk: the file loads as the whole trace
    monkeypatch.setattr(tio, "ROW_GROUP", 50)
    argv = ["workload", "ior", "--procs", kw["procs"], "--xfer", kw["xfer"], "--block", kw["block"],
            "--segments", kw["segments"], "--pattern", kw["pattern"], "--op", kw["op"], "--seed", kw.get("seed", 0)]
    argv += ["-F"] * bool(kw.get("file_per_proc")) + ["-c"] * bool(kw.get("collective"))
    rc, out, _ = run(*argv, "-o", tmp_path / "s.parquet")
    rc2, out2, _ = run(*argv, "-o", tmp_path / "w.csv")
    assert rc == rc2 == 0
    assert out.replace("s.parquet", "X") == out2.replace("w.csv", "X")  # the same summary line
    same_trace(load(tmp_path / "s.parquet"), whole)
    import pyarrow.parquet as pq

    md = pq.ParquetFile(tmp_path / "s.parquet").metadata  # full row groups, whatever the chunks
    assert [md.row_group(i).num_rows for i in range(md.num_row_groups)][:-1] == [50] * (md.num_row_groups - 1)
