"""MPI-IO calls through file views in Darshan logs (pario.trace.darshan_views): the view
rule, the footprint rebuilt from DXT_POSIX, aggregators, hints file, metadata and the CLI.

Expected numbers come from outside the importer: the benchmarks' parameters in each log's
``exe`` line, the log's own MPI-IO counters and DXT records read with PyDarshan directly,
the MANIFEST, and brute-force loops.
"""

from __future__ import annotations

import json
import re
import struct
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from helpers import TRACES

from pario import ParioError
from pario.cli import main
from pario.trace import READ, WRITE, Trace, load, save
from pario.trace.core import TraceMeta
from pario.trace.darshan import ParioWarning, import_darshan, read_darshan
from pario.trace.darshan_views import detect_views, epochs, union_bytes

LOGS = sorted(TRACES.glob("*.darshan")) + sorted(TRACES.glob("real/*.darshan"))
NONCONTIG = [p for p in LOGS if p.name.startswith(("hpio-", "tile-", "btio-full-"))]
DXT_POSIX_IDX = 10  # Darshan 3.41 module index (header partial mask bit, region map slot)


def log(name: str) -> Path:
    p = TRACES / name
    if not p.exists():
        pytest.skip(f"{name} not available")
    return p


def quiet_import(path, **kw):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = read_darshan(path, **kw)
    return res, [str(w.message) for w in caught if issubclass(w.category, ParioWarning)]


def footprint(t: Trace, op: int) -> int:
    """Union of the extents of one op: a plain sort-and-sweep loop."""
    m = t.op == op
    pairs = sorted(zip(t.offset[m].tolist(), t.end_offset[m].tolist()))
    total, cur_s, cur_e = 0, None, None
    for s, e in pairs:
        if e <= s:
            continue
        if cur_e is None or s > cur_e:
            total += (cur_e - cur_s) if cur_e is not None else 0
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + ((cur_e - cur_s) if cur_e is not None else 0)


def raw(path: Path):
    """(job nprocs, exe, MPI-IO counter sums, {module: DXT frame}) read with PyDarshan directly."""
    from darshan.report import DarshanReport

    rep = DarshanReport(str(path), read_all=False)
    try:
        job, exe = rep.metadata["job"], rep.metadata["exe"]
        counters = {}
        if "MPI-IO" in rep.modules:
            rep.mod_read_all_records("MPI-IO", dtype="pandas", warnings=False)
            c = pd.concat([r["counters"] for r in rep.records["MPI-IO"]])
            counters = {k: int(c[k].sum()) for k in ("MPIIO_BYTES_WRITTEN", "MPIIO_BYTES_READ")}
        dxt = {}
        for mod in ("DXT_POSIX", "DXT_MPIIO"):
            if mod not in rep.modules:
                continue
            rep.mod_read_all_dxt_records(mod, dtype="pandas", warnings=False)
            rows = [(int(r["rank"]), rep.name_records[r["id"]], op, int(o), int(n))
                    for r in rep.records[mod] for key, op in (("write_segments", WRITE), ("read_segments", READ))
                    if len(r[key]) for o, n in zip(r[key]["offset"], r[key]["length"])]
            dxt[mod] = pd.DataFrame(rows, columns=["rank", "file", "op", "offset", "length"])
        return int(job["nprocs"]), exe, counters, dxt
    finally:
        rep._cleanup()


def app_bytes(exe: str, nprocs: int) -> tuple[int, int, int | None]:
    """(bytes written, bytes read, file span or None) from the benchmark's own parameters."""
    if "hpio" in exe:
        c, s, p = (int(re.search(rf"-{k} (\d+)", exe).group(1)) for k in "csp")
        n = nprocs * c * s
        return n, n, nprocs * c * (s + p) - p  # regions of s bytes, p apart, ranks interleaved
    if "mpi-tile-io" in exe:
        kv = dict(re.findall(r"--(\w+) (\d+)", exe))
        n = np.prod([int(kv[k]) for k in ("nr_tiles_x", "nr_tiles_y", "sz_tile_x", "sz_tile_y", "sz_element")])
        return (int(n), 0, None) if "--write_file" in exe else (0, int(n), None)
    m = re.search(r"bt\.([SWA])\.\d+\.mpi_io_full", exe)
    assert m, exe
    # NPB 3.3 BT classes: grid n^3, steps; BTIO dumps 5 doubles per point every 5 steps, then reads back
    n, steps = {"S": (12, 60), "W": (24, 200), "A": (64, 200)}[m.group(1)]
    b = n ** 3 * 5 * 8 * (steps // 5)
    return b, b, None


# ------------------------------------------------------------------ helpers against brute force
@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 60), st.integers(0, 12)), max_size=40))
def test_union_bytes_matches_byte_sets(rows):
    g = np.array([r[0] for r in rows], dtype=np.int64)
    o = np.array([r[1] for r in rows], dtype=np.int64)
    e = o + np.array([r[2] for r in rows], dtype=np.int64)
    got = union_bytes(g, o, e, 4)
    want = [len({b for gg, oo, ln in rows if gg == k for b in range(oo, oo + ln)}) for k in range(4)]
    assert got.tolist() == want


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 30), st.integers(0, 6)), min_size=1, max_size=30))
def test_epochs_are_time_overlap_components(rows):
    key = np.array([r[0] for r in rows])
    s = np.array([float(r[1]) for r in rows])
    e = s + np.array([float(r[2]) for r in rows])
    ep = epochs(key, s, e)
    # brute force: rows i, j share an epoch iff a chain of time-overlapping rows of one key joins them
    n = len(rows)
    parent = list(range(n))

    def find(i):
        while parent[i] != i:
            i = parent[i]
        return i

    for i in range(n):
        for j in range(n):
            if key[i] == key[j] and s[j] <= e[i] and s[i] <= e[j]:
                parent[find(i)] = find(j)
    # a row starting exactly when an earlier one ends still touches it (closed intervals)
    for i in range(n):
        for j in range(n):
            assert (ep[i] == ep[j]) == (find(i) == find(j)), (i, j)


def frame(rows, collective=False) -> pd.DataFrame:
    """rows: (rank, op, offset, length, start, end) on one file (id 7)."""
    df = pd.DataFrame(rows, columns=["rank", "op", "offset", "length", "start", "end"])
    return df.assign(rec_id=np.uint64(7), collective=collective)


EMPTY = frame([])


@pytest.mark.parametrize("rows, views, posix, want_ops, ambiguous", [
    # two ranks write overlapping ranges at the same time through a view: writes are view-based
    ([(0, WRITE, 0, 100, 0.0, 1.0), (1, WRITE, 50, 100, 0.5, 1.5)], 2, [], (WRITE,), False),
    # ... but never through a view (MPIIO_VIEWS = 0): the default view makes the ranges exact
    ([(0, WRITE, 0, 100, 0.0, 1.0), (1, WRITE, 50, 100, 0.5, 1.5)], 0, [], (), False),
    # overlap one after the other (different epochs): a later rewrite, not a view
    ([(0, WRITE, 0, 100, 0.0, 1.0), (1, WRITE, 50, 100, 2.0, 3.0)], 2, [], (), False),
    # one rank overlapping itself: not two ranks sharing bytes
    ([(0, WRITE, 0, 100, 0.0, 1.0), (0, WRITE, 50, 100, 0.5, 1.5)], 2, [], (), False),
    # disjoint concurrent writes (IOR)
    ([(0, WRITE, 0, 100, 0.0, 1.0), (1, WRITE, 100, 100, 0.0, 1.0)], 2, [], (), False),
    # overlapping reads alone: shared reads or a view? no writes, no POSIX data: ambiguous
    ([(0, READ, 0, 100, 0.0, 1.0), (1, READ, 50, 100, 0.0, 1.0)], 2, [], (), True),
    # ... POSIX read bytes outside every MPI-IO read range: the reads went through a view
    ([(0, READ, 0, 100, 0.0, 1.0), (1, READ, 50, 100, 0.0, 1.0)], 2, [(0, READ, 0, 400, 0.1, 0.2)], (READ,), False),
    # ... POSIX reads inside the MPI-IO ranges: shared reads
    ([(0, READ, 0, 100, 0.0, 1.0), (1, READ, 50, 100, 0.0, 1.0)], 2, [(0, READ, 0, 150, 0.1, 0.2)], (), False),
    # overlapping reads of a file whose writes go through a view
    ([(0, WRITE, 0, 100, 0.0, 1.0), (1, WRITE, 50, 100, 0.0, 1.0),
      (0, READ, 0, 100, 2.0, 3.0), (1, READ, 50, 100, 2.0, 3.0)], 1, [], (READ, WRITE), False),
])
def test_view_rule_cases(rows, views, posix, want_ops, ambiguous):
    found = detect_views(frame(rows), frame(posix) if posix else EMPTY, {7: views}, {7: "f"})
    assert found[7].view_ops == want_ops
    assert found[7].ambiguous_reads == ambiguous


# ------------------------------------------------------------------ the shared logs
pytestmark_logs = pytest.mark.skipif(not LOGS, reason="shared Darshan logs not available")


@pytestmark_logs
@pytest.mark.parametrize("path", LOGS, ids=lambda p: p.name)
def test_view_rule_on_every_shared_log(path):
    """HPIO c-nc (vector filetype), MPI-Tile-IO (subarray) and BTIO full (subarray) go
    through views (MANIFEST); IOR, BTIO simple and the real logs do not."""
    try:
        res, warned = quiet_import(path)
    except ParioError as exc:
        assert "\n" not in str(exc)
        return
    expected = path.name.startswith(("hpio-", "tile-", "btio-full-"))
    assert bool(res.views) == expected
    assert any("file views" in w for w in warned) == expected
    assert (res.module == "DXT_MPIIO+DXT_POSIX") == expected


@pytestmark_logs
@pytest.mark.parametrize("path", NONCONTIG, ids=lambda p: p.name)
def test_footprint_is_what_the_application_wrote_and_read(path):
    nprocs, exe, counters, _ = raw(path)
    want_w, want_r, span = app_bytes(exe, nprocs)
    # the benchmark's parameters and Darshan's MPI-IO counters agree on the bytes moved
    assert (want_w, want_r) == (counters["MPIIO_BYTES_WRITTEN"], counters["MPIIO_BYTES_READ"])
    res, warned = quiet_import(path)
    t = res.trace
    fw, fr = footprint(t, WRITE), footprint(t, READ)
    holes = span is not None and span > want_w
    if not holes:
        assert (fw, fr) == (want_w, want_r)
        assert not any("holes" in w for w in warned)
    elif "coll" in path.name:
        # two-phase read-modify-write: the aggregator's windows cover the holes between regions
        assert (fw, fr) == (span, span)
        assert any("holes" in w for w in warned)
    else:
        # data sieving: each rank's windows run from its first to its last byte
        assert want_w < fw <= span and want_r < fr <= span
        assert any("holes" in w for w in warned)
    # forcing DXT_MPIIO imports the calls' ranges: the overlapping, shrunken footprint, with a warning
    forced, fwarn = quiet_import(path, module="DXT_MPIIO")
    assert forced.trace.bytes_written == want_w and forced.trace.bytes_read == want_r
    for op, want in ((WRITE, want_w), (READ, want_r)):
        if want:
            assert footprint(forced.trace, op) < want
    assert len(fwarn) == 1 and "footprint" in fwarn[0]


@pytestmark_logs
@pytest.mark.parametrize("name, aggs", [
    ("hpio-coll-c-nc-16r-c512-s16k-sp0.darshan", [0]),
    ("hpio-coll-cb4-c-nc-16r-c512-s16k-sp0.darshan", [0, 1, 2, 3]),
    ("tile-coll-cb4-write-16r-e4k-32x32.darshan", [0, 1, 2, 3]),
    ("btio-full-cb4-W-4r.darshan", [0, 1, 2, 3]),
    ("btio-full-A-4r.darshan", [0]),
])
def test_aggregators_issue_the_requests(name, aggs):
    """Default hints on one node: ROMIO's one aggregator (rank 0); ROMIO_HINTS cb_nodes 4: four
    (MANIFEST).  The rebuilt trace's requests are the aggregators' DXT_POSIX requests of the
    data file, marked collective, and the job's process count is kept."""
    path = log(name)
    nprocs, exe, _, dxt = raw(path)
    t = quiet_import(path)[0].trace
    data = dxt["DXT_POSIX"][~dxt["DXT_POSIX"]["file"].str.contains("romio-hints")]
    assert sorted(data["rank"].unique().tolist()) == aggs
    assert list(t.meta.aggregators) == aggs and t.meta.hints == (("cb_nodes", str(len(aggs))),)
    assert sorted(np.unique(t.rank).tolist()) == aggs and t.collective.all()
    assert t.meta.nprocs == nprocs and t.nprocs == nprocs and t.meta.command == exe
    # the DXT_POSIX requests themselves, less the read-modify-write reads inside write calls
    got = sorted(zip(t.rank.tolist(), t.op.tolist(), t.offset.tolist(), t.length.tolist()))
    want = sorted(zip(data["rank"], data["op"], data["offset"], data["length"]))
    assert set(got) <= set(want) and len(got) == len(want)  # these logs have no holes: no RMW


def test_ior_collective_without_two_phase_has_no_aggregators():
    # ROMIO's automatic cb skipped two-phase (MANIFEST): every rank's POSIX I/O is its own call
    t = quiet_import(log("ior-mpiio-strided-coll-16r-64k.darshan"))[0].trace
    assert t.collective.all() and t.meta.aggregators is None and t.meta.hints == ()
    assert t.meta.nprocs == 16 and t.meta.source == "darshan DXT_MPIIO"


@pytestmark_logs
@pytest.mark.parametrize("name, writes, reads", [
    # MANIFEST: DXT_POSIX 17w+34r; a read-modify-write read before each of the 17 writes
    ("hpio-coll-c-nc-16r-c1024-s16k-sp1k.darshan", 17, 34 - 17),
    # MANIFEST: 4096w+4608r; data sieving reads each 512 KiB window before writing it back
    ("hpio-indep-c-nc-16r-c512-s16k-sp0.darshan", 4096, 4608 - 4096),
])
def test_read_modify_write_reads_are_not_application_reads(name, writes, reads):
    t = quiet_import(log(name))[0].trace
    assert int((t.op == WRITE).sum()) == writes and int((t.op == READ).sum()) == reads
    assert any(f"{writes} read-modify-write reads" in n for n in t.meta.notes)


def test_rebuilt_requests_share_their_mpi_call():
    # hpio collective, default hints: each rank made 1 write_all and 1 read_all (16 + 16 calls,
    # MPI-IO counters); rank 0 did all 8 + 8 POSIX requests (MANIFEST)
    t = quiet_import(log("hpio-coll-c-nc-16r-c512-s16k-sp0.darshan"))[0].trace
    assert len(t) == 16 and set(t.rank.tolist()) == {0}
    calls = {op: set(t.call[t.op == op].tolist()) for op in (WRITE, READ)}
    assert len(calls[WRITE]) == 1 and len(calls[READ]) == 1 and calls[WRITE] != calls[READ]
    assert any("ranks 0-15 made 16 write calls (16 collective" in n for n in t.meta.notes)


# ------------------------------------------------------------------ refusing
def _copy_with(src: Path, dst: Path, edit) -> Path:
    data = bytearray(src.read_bytes())
    edit(data)
    dst.write_bytes(bytes(data))
    return dst


def test_partial_posix_refuses_unless_mpiio_is_forced(tmp_path, capsys):
    src = log("hpio-coll-c-nc-16r-c512-s16k-sp0.darshan")
    dst = _copy_with(src, tmp_path / "p.darshan", lambda d: struct.pack_into("<Q", d, 24, 1 << DXT_POSIX_IDX))
    with pytest.raises(ParioError, match=r"file view.*partial.*--module DXT_MPIIO") as exc:
        import_darshan(dst)
    assert "\n" not in str(exc.value)
    res, warned = quiet_import(dst, module="DXT_MPIIO")
    assert len(res.trace) == 32 and len(warned) == 1 and "footprint" in warned[0]
    assert main(["trace", "import", str(dst), "-o", str(tmp_path / "o.parquet")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("pario: error:")
    assert not (tmp_path / "o.parquet").exists()


def test_missing_posix_refuses(tmp_path):
    src = log("tile-coll-write-16r-e32k-8x8.darshan")
    dst = _copy_with(src, tmp_path / "np.darshan",
                     lambda d: struct.pack_into("<QQ", d, 32 + 16 * (1 + DXT_POSIX_IDX), 0, 0))
    with pytest.raises(ParioError, match="DXT_POSIX has no segments"):
        import_darshan(dst)
    assert len(quiet_import(dst, module="DXT_MPIIO")[0].trace) == 16


# ------------------------------------------------------------------ CLI: warnings and show
def test_cli_import_warns_in_one_line_and_keeps_meta(tmp_path, capsys):
    out = tmp_path / "t.parquet"
    assert main(["trace", "import", str(log("hpio-coll-cb4-c-nc-16r-c512-s16k-sp0.darshan")), "-o", str(out)]) == 0
    cap = capsys.readouterr()
    lines = cap.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pario: warning:") and "file views" in lines[0]
    assert "from 4 ranks of 16 processes" in cap.out
    t = load(out)
    assert t.meta.nprocs == 16 and t.meta.aggregators == (0, 1, 2, 3) and t.meta.cb_nodes == 4
    assert main(["trace", "show", str(out), "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["nprocs"] == 16 and s["ranks_with_io"] == 4 and s["hints"] == {"cb_nodes": "4"}
    assert s["bytes_written"] == 128 << 20 and s["collective"] == 64 and any("hints file" in n for n in s["notes"])
    assert main(["trace", "show", str(out)]) == 0
    text = capsys.readouterr().out
    assert "4 with I/O of 16 processes" in text and "0-3" in text and "cb_nodes=4" in text
    assert "APPROXIMATE" not in text


def test_cli_show_marks_partial_and_approximate(tmp_path, capsys):
    meta = TraceMeta(source="darshan counters", nprocs=16, partial=True,
                     approximate="synthesized from counters: offsets modelled")
    p = save(Trace.from_arrays([0, 0], ["f", "f"], ["write", "write"], [0, 10], [10, 10], meta=meta),
             tmp_path / "a.parquet")
    assert main(["trace", "show", str(p)]) == 0
    text = capsys.readouterr().out
    assert "(APPROXIMATE)" in text and "synthesized from counters: offsets modelled" in text
    assert "1 with I/O of 16 processes" in text and "partial" in text and "yes" in text


def test_cli_counters_flag(tmp_path, capsys):
    pytest.importorskip("pario.trace.darshan_counters")
    out = tmp_path / "c.parquet"
    assert main(["trace", "import", str(log("ior-mpiio-seq-16r-b4m-t64k.darshan")), "--counters",
                 "-o", str(out)]) == 0
    assert "(approximate)" in capsys.readouterr().out
    t = load(out)
    assert t.meta.approximate and t.bytes_written == 64 << 20  # counters keep the byte totals exact
    with pytest.raises(SystemExit) as exc:  # argparse: the two options exclude each other
        main(["trace", "import", str(log("ior-mpiio-seq-16r-b4m-t64k.darshan")), "--counters",
              "--module", "posix", "-o", str(out)])
    assert exc.value.code == 2 and "not allowed with" in capsys.readouterr().err
