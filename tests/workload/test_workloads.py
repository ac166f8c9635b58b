"""Workload generators against the real Darshan DXT logs in ../shared/traces, plus
conservation / partition properties that follow from each benchmark's definition.

Logs are read with :func:`pario.trace.darshan.import_darshan` (DXT_MPIIO = the
application's own MPI-IO calls).  Where a DXT segment is one *call* over a noncontiguous
view (HPIO, Tile-IO, BTIO full), a trace request is one contiguous piece of it, so the tests
compare per call: the call's first byte and its byte count (and, for data-sieving runs,
the POSIX extent per rank).  IOR and BTIO simple issue one contiguous call per request and
are compared request by request, in order.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from helpers import TRACES

from pario import ParioError
from pario.cli import main
from pario.trace import READ, WRITE, Trace, load
from pario.workload import GENERATORS, btio, generate, hpio, ior, tile
from pario.workload.btio import CLASSES, dump_count
from pario.workload.ior import glibc_random

K, M = 1024, 1024 * 1024


def _log(name: str, module: str = "DXT_MPIIO") -> Trace:
    path = TRACES / name
    if not path.exists():
        pytest.skip(f"shared trace {name} not available")
    from pario.trace.darshan import import_darshan

    return import_darshan(path, module=module)


def _job_window(name: str) -> tuple[int, int]:
    import darshan

    rep = darshan.DarshanReport(str(TRACES / name), read_all=False)
    job = rep.metadata["job"]
    return int(job["start_time_sec"]), int(job["end_time_sec"])


def _streams(t: Trace) -> dict[int, np.ndarray]:
    """Per rank, the (op, offset, length) rows in issue order."""
    t = t.sorted()
    return {int(r): np.stack([t.op[t.rank == r].astype(np.int64), t.offset[t.rank == r],
                              t.length[t.rank == r]], axis=1)
            for r in np.unique(t.rank)}


def _assert_same_streams(gen: Trace, log: Trace) -> None:
    a, b = _streams(gen), _streams(log)
    assert sorted(a) == sorted(b)
    for r in a:
        assert a[r].shape == b[r].shape, f"rank {r}: {len(a[r])} requests vs {len(b[r])} in the log"
        assert np.array_equal(a[r], b[r]), f"rank {r}: request stream differs from the log"


def _union_is_interval(offset, length, lo: int, hi: int) -> bool:
    """True iff the extents are pairwise disjoint and exactly cover [lo, hi)."""
    idx = np.argsort(offset, kind="stable")
    o, e = offset[idx], offset[idx] + length[idx]
    return bool(len(o) and o[0] == lo and e[-1] == hi and np.array_equal(o[1:], e[:-1]))


# =============================================================================== IOR
def test_glibc_random_known_values():
    # glibc: srandom(1) (the default state) gives rand() = 1804289383, 846930886, 1681692777,
    # 1714636915, 1957747793; srandom(0) is treated as srandom(1).
    want = [1804289383, 846930886, 1681692777, 1714636915, 1957747793]
    assert glibc_random(1, 5).tolist() == want
    assert glibc_random(0, 5).tolist() == want


@pytest.mark.parametrize("name, kw", [
    ("ior-mpiio-seq-16r-b4m-t64k.darshan", dict(procs=16, xfer=64 * K, block=4 * M, segments=1, pattern="sequential")),
    ("ior-mpiio-strided-16r-64k.darshan", dict(procs=16, xfer=64 * K, block=64 * K, segments=64, pattern="strided")),
    ("ior-mpiio-strided-16r-256k.darshan", dict(procs=16, xfer=256 * K, block=256 * K, segments=64, pattern="strided")),
    ("ior-mpiio-strided-coll-16r-64k.darshan",
     dict(procs=16, xfer=64 * K, block=64 * K, segments=64, pattern="strided", collective=True)),
    ("real/local_ior_mpiio_2rank_dxt.darshan",  # -c -b 256k -t 64k -s 2: segmented, block > xfer
     dict(procs=2, xfer=64 * K, block=256 * K, segments=2, pattern="strided", collective=True)),
])
def test_ior_matches_log_request_by_request(name, kw):
    log = _log(name)
    gen = ior(op="both", **kw)
    _assert_same_streams(gen, log)
    assert bool(gen.collective.all()) == bool(kw.get("collective", False))
    assert bool(log.collective.all()) == bool(kw.get("collective", False))


@pytest.mark.parametrize("name, procs, seed", [
    ("ior-mpiio-random-16r-64k.darshan", 16, 1795239449),
    ("ior-mpiio-random-8r-64k.darshan", 8, 1795239515),
])
def test_ior_random_matches_log_exactly(name, procs, seed):
    # IOR -z seeds srandom() with rank 0's time(NULL): the seed that reproduces every rank's
    # offset sequence must lie inside the job's own run time (an independent check), and it
    # must be the only one there.
    log = _log(name)
    start, end = _job_window(name)
    hits = [s for s in range(start - 1, end + 2)
            if all(np.array_equal(v, _streams(log)[r]) for r, v in
                   _streams(ior(procs, 64 * K, 4 * M, pattern="random", op="both", seed=s)).items())]
    assert hits == [seed]
    gen = ior(procs, 64 * K, 4 * M, pattern="random", op="both", seed=seed)
    _assert_same_streams(gen, log)
    # the slots of the whole shared file are dealt to ranks at random: uneven counts ...
    counts = np.bincount(gen.where(op="write").rank)
    assert counts.sum() == procs * 64 and counts.min() < 64 < counts.max()
    # ... offsets span the whole file, not just the rank's 4 MiB block
    w = gen.where(op="write", rank=0)
    assert w.offset.max() >= 4 * M and w.offset.min() < w.offset.max()


@pytest.mark.parametrize("pattern", ["sequential", "strided", "random"])
@pytest.mark.parametrize("procs, xfer, block, segments", [(4, 4 * K, 16 * K, 3), (3, 1 * K, 5 * K, 1), (5, 8, 64, 7)])
def test_ior_shared_file_is_a_partition(pattern, procs, xfer, block, segments):
    t = ior(procs, xfer, block, segments, pattern=pattern, seed=7)
    total = procs * block * segments
    assert t.bytes_written == total and t.bytes_read == 0
    assert _union_is_interval(t.offset, t.length, 0, total)   # no overlap between ranks, no hole
    assert np.all(t.length == xfer)
    if pattern != "random":
        assert np.array_equal(np.bincount(t.rank), np.full(procs, segments * block // xfer))


def test_ior_sequential_segments_contiguous_per_rank():
    t = ior(4, 1 * K, 4 * K, segments=3, pattern="sequential")
    for r in range(4):
        s = t.where(rank=r).sorted()
        assert s.offset[0] == r * 12 * K
        assert np.array_equal(s.offset[1:], s.offset[:-1] + s.length[:-1])


def test_ior_strided_segments_interleave():
    # IOR -b 4k -t 1k -s 2 on 3 ranks: segment i, rank r block at (i*3 + r)*4k
    t = ior(3, 1 * K, 4 * K, segments=2, pattern="strided")
    s = t.where(rank=1).sorted()
    assert s.offset.tolist() == [4 * K, 5 * K, 6 * K, 7 * K, 16 * K, 17 * K, 18 * K, 19 * K]


def test_ior_random_repeats_list_per_segment_and_read_order():
    t = ior(4, 1 * K, 8 * K, segments=3, pattern="random", op="both", seed=11)
    for r in range(4):
        s = t.where(rank=r).sorted()
        w, rd = s.take(s.op == WRITE), s.take(s.op == READ)
        assert np.array_equal(w.offset, rd.offset)               # reads repeat the write order
        n = len(w) // 3
        base = w.offset[:n]
        for i in range(3):
            assert np.array_equal(w.offset[i * n:(i + 1) * n], base + i * 4 * 8 * K)
        assert np.array_equal(rd.cols["order"], np.arange(len(w), 2 * len(w)))


def test_ior_file_per_proc():
    for pattern in ("sequential", "strided", "random"):
        t = ior(3, 1 * K, 4 * K, segments=2, pattern=pattern, file_per_proc=True, seed=5)
        assert t.files == ("ior.dat.00000000", "ior.dat.00000001", "ior.dat.00000002")
        for r in range(3):
            s = t.where(rank=r)
            assert np.all(s.file == r)
            assert _union_is_interval(s.offset, s.length, 0, 8 * K)
    # random per-proc: srandom(seed + rank) -> ranks shuffle differently
    t = ior(2, 1 * K, 16 * K, pattern="random", file_per_proc=True, seed=5)
    assert not np.array_equal(t.where(rank=0).sorted().offset, t.where(rank=1).sorted().offset)


@pytest.mark.parametrize("kw, msg", [
    (dict(procs=4, xfer=48 * K, block=4 * M), "must divide"),
    (dict(procs=4, xfer=64 * K, block=64 * K, pattern="random"), "block > xfer"),
    (dict(procs=4, xfer=8 * K, block=4 * K), "smaller than the transfer"),
    (dict(procs=0, xfer=8 * K, block=8 * K), "procs"),
    (dict(procs=4, xfer=8 * K, block=8 * K, pattern="zigzag"), "pattern"),
    (dict(procs=4, xfer=8 * K, block=8 * K, op="append"), "op"),
])
def test_ior_bad_parameters(kw, msg):
    with pytest.raises(ParioError, match=msg):
        ior(**kw)


# =============================================================================== HPIO
_HPIO = re.compile(r"hpio-(indep|coll)(?:-cb4)?-c-nc-(\d+)r-c(\d+)-s(\d+)k-sp(\d+)(k?)\.darshan")
HPIO_LOGS = [
    "hpio-indep-c-nc-16r-c512-s16k-sp0.darshan", "hpio-coll-c-nc-16r-c512-s16k-sp0.darshan",
    "hpio-indep-c-nc-16r-c1024-s16k-sp1k.darshan", "hpio-coll-c-nc-16r-c1024-s16k-sp1k.darshan",
    "hpio-indep-c-nc-8r-c4096-s16k-sp8k.darshan", "hpio-coll-c-nc-8r-c4096-s16k-sp8k.darshan",
    "hpio-coll-cb4-c-nc-16r-c512-s16k-sp0.darshan",
]


def _hpio_params(name):
    m = _HPIO.fullmatch(name)
    mode, procs, count, size, sp, kk = m.groups()
    return dict(procs=int(procs), region_count=int(count), region_size=int(size) * K,
                region_spacing=int(sp) * (K if kk else 1), collective=mode == "coll")


def _per_call(gen: Trace) -> dict[tuple[int, int], tuple[int, int]]:
    """(rank, op) -> (first offset in issue order, byte sum): one call per rank and op."""
    out = {}
    s = gen.sorted()
    for r in np.unique(s.rank):
        for op in (WRITE, READ):
            m = (s.rank == r) & (s.op == op)
            if m.any():
                out[(int(r), op)] = (int(s.offset[m][0]), int(s.length[m].sum()))
    return out


@pytest.mark.parametrize("name", HPIO_LOGS)
def test_hpio_matches_log_per_call(name):
    kw = _hpio_params(name)
    log = _log(name)
    gen = hpio(op="both", **kw)
    # DXT_MPIIO: one segment per rank and op (one call over the vector view)
    assert np.array_equal(np.bincount(log.rank[log.op == WRITE]), np.ones(kw["procs"]))
    want = {(int(r), int(o)): (int(off), int(ln)) for r, o, off, ln in zip(log.rank, log.op, log.offset, log.length)}
    assert _per_call(gen) == want
    assert np.array_equal(np.bincount(gen.rank[gen.op == WRITE]), np.full(kw["procs"], kw["region_count"]))
    assert bool(gen.collective.all()) == kw["collective"] == bool(log.collective.all())


@pytest.mark.parametrize("name", [n for n in HPIO_LOGS if "indep" in n])
def test_hpio_posix_data_sieving_extent(name):
    # ROMIO data sieving touches, per rank, exactly from its first region's first byte to
    # its last region's last byte: a check of the interleaving formula at both ends.
    kw = _hpio_params(name)
    posix = _log(name, module="DXT_POSIX")
    gen = hpio(**kw)
    for r in range(kw["procs"]):
        p = posix.where(rank=r, op="write")
        g = gen.where(rank=r)
        assert (p.offset.min(), p.end_offset.max()) == (g.offset.min(), g.end_offset.max())


def test_hpio_properties():
    t = hpio(4, 10, 100, 30)
    assert t.bytes_written == 4 * 10 * 100
    o = np.sort(t.offset)
    assert np.all(np.diff(o) == 130)                    # regions of all ranks round-robin, gap 30
    assert t.where(rank=2).sorted().offset.tolist() == [(4 * i + 2) * 130 for i in range(10)]
    # spacing 0: regions tile the file without overlap
    t0 = hpio(3, 7, 64, 0)
    assert _union_is_interval(t0.offset, t0.length, 0, 3 * 7 * 64)
    # one rank, no gaps: one contiguous extent of one call = one request
    one = hpio(1, 8, 64, 0, op="both")
    assert len(one) == 2 and one.length.tolist() == [512, 512]


# =============================================================================== Tile-IO
TILE_LOGS = [
    ("tile-coll-write-16r-e32k-8x8.darshan", dict(elements_x=8, elements_y=8, element_size=32 * K), "write", True),
    ("tile-coll-read-16r-e32k-8x8.darshan", dict(elements_x=8, elements_y=8, element_size=32 * K), "read", True),
    ("tile-coll-cb4-write-16r-e4k-32x32.darshan", dict(elements_x=32, elements_y=32, element_size=4 * K), "write", True),
    ("tile-coll-cb4-read-16r-e4k-32x32.darshan", dict(elements_x=32, elements_y=32, element_size=4 * K), "read", True),
    ("tile-indep-read-16r-e4k-32x32.darshan", dict(elements_x=32, elements_y=32, element_size=4 * K), "read", False),
]


@pytest.mark.parametrize("name, kw, op, coll", TILE_LOGS)
def test_tile_matches_log_per_call(name, kw, op, coll):
    log = _log(name)
    gen = tile(4, 4, op=op, collective=coll, **kw)
    want = {(int(r), int(o)): (int(off), int(ln)) for r, o, off, ln in zip(log.rank, log.op, log.offset, log.length)}
    assert len(want) == len(log) == 16                  # one DXT_MPIIO segment per rank (one call)
    assert _per_call(gen) == want
    assert np.array_equal(np.bincount(gen.rank), np.full(16, kw["elements_y"]))  # one request per tile row
    assert bool(log.collective.all()) == coll == bool(gen.collective.all())


def test_tile_indep_read_posix_extent():
    posix = _log("tile-indep-read-16r-e4k-32x32.darshan", module="DXT_POSIX")
    posix = posix.take(np.array(["hints" not in posix.files[f] for f in posix.file]))
    gen = tile(4, 4, 32, 32, 4 * K, op="read", collective=False)
    for r in range(16):
        p, g = posix.where(rank=r), gen.where(rank=r)
        assert (p.offset.min(), p.end_offset.max()) == (g.offset.min(), g.end_offset.max())


@pytest.mark.parametrize("tx, ty, ex, ey, ox, oy", [(4, 4, 8, 8, 0, 0), (3, 2, 5, 4, 0, 0), (3, 2, 5, 4, 2, 1), (1, 3, 6, 2, 0, 1)])
def test_tile_coverage_brute_force(tx, ty, ex, ey, ox, oy):
    # Oracle: paint every tile into a W x H element grid; each byte of the file must be
    # covered by as many requests as tiles cover its element.
    e = 3
    t = tile(tx, ty, ex, ey, e, overlap_x=ox, overlap_y=oy)
    W, H = tx * ex - (tx - 1) * ox, ty * ey - (ty - 1) * oy
    grid = np.zeros((H, W), dtype=int)
    for r in range(tx * ty):
        x0, y0 = (r % tx) * (ex - ox), (r // tx) * (ey - oy)
        grid[y0:y0 + ey, x0:x0 + ex] += 1
    cover = np.zeros(W * H * e, dtype=int)
    for o, n in zip(t.offset, t.length):
        cover[o:o + n] += 1
    assert np.array_equal(cover, np.repeat(grid.reshape(-1), e))
    assert t.bytes_written == tx * ty * ex * ey * e
    if ox == oy == 0:
        assert _union_is_interval(t.offset, t.length, 0, W * H * e)


def test_tile_single_column_is_one_request_per_rank():
    t = tile(1, 4, 16, 8, 512)
    assert len(t) == 4 and np.all(t.length == 16 * 8 * 512)


def test_tile_bad_overlap():
    with pytest.raises(ParioError, match="overlap"):
        tile(2, 2, 4, 4, 8, overlap_x=4)


# =============================================================================== BTIO
@pytest.mark.parametrize("name, cls, procs", [
    ("btio-simple-S-4r.darshan", "S", 4), ("btio-simple-S-16r.darshan", "S", 16), ("btio-simple-W-4r.darshan", "W", 4),
])
def test_btio_simple_matches_log_request_by_request(name, cls, procs):
    log = _log(name)
    gen = btio(cls, "simple", procs, op="both")
    _assert_same_streams(gen, log)
    assert not gen.collective.any() and not log.collective.any()


@pytest.mark.parametrize("name, cls, procs", [
    ("btio-full-S-4r.darshan", "S", 4), ("btio-full-S-16r.darshan", "S", 16), ("btio-full-W-4r.darshan", "W", 4),
    ("btio-full-A-4r.darshan", "A", 4), ("btio-full-cb4-W-4r.darshan", "W", 4),
])
def test_btio_full_matches_log_per_call(name, cls, procs):
    # DXT_MPIIO: one segment per rank per dump (MPI_File_write_at_all / read_at_all over the
    # struct-of-subarrays view) at the view's first byte, length = the call's bytes.
    log = _log(name)
    gen = btio(cls, "full", procs, op="both")
    ps = CLASSES[cls][0]
    dump_bytes = ps ** 3 * 40
    want, got = {}, {}
    for r, o, off, ln in zip(log.rank, log.op, log.offset, log.length):
        want[(int(r), int(o), int(off) // dump_bytes)] = (int(off), int(ln))
    s = gen.sorted()
    d = s.offset // dump_bytes
    for r, o, dd, off, ln in zip(s.rank, s.op, d, s.offset, s.length):
        key = (int(r), int(o), int(dd))
        if key not in got:
            got[key] = [int(off), 0]
        got[key][1] += int(ln)
    assert len(want) == len(log) == procs * 2 * dump_count(CLASSES[cls][1])
    assert {k: tuple(v) for k, v in got.items()} == want
    assert gen.collective.all() and log.collective.all()


@pytest.mark.parametrize("cls, procs", [("S", 1), ("S", 4), ("S", 9), ("S", 16), ("W", 25), ("B", 16), ("C", 49)])
def test_btio_each_dump_is_a_partition(cls, procs):
    # The multi-partition decomposition gives every grid point to exactly one (rank, cell):
    # every dump is written exactly once, without overlap or hole (uneven cells for B/C).
    ps = CLASSES[cls][0]
    t = btio(cls, "simple", procs, niter=10)             # 2 dumps keep it fast
    assert _union_is_interval(t.offset, t.length, 0, 2 * ps ** 3 * 40)
    p = int(round(procs ** 0.5))
    if ps % p == 0:
        # equal cells: every rank writes PS^3/procs points per dump, in p*(PS/p)^2 rows
        assert np.array_equal(np.bincount(t.rank, weights=t.length), np.full(procs, 2 * ps ** 3 * 40 / procs))
        assert np.array_equal(np.bincount(t.rank), np.full(procs, 2 * p * (ps // p) ** 2))
    f = btio(cls, "full", procs, niter=10)
    assert f.bytes_written == t.bytes_written
    if procs == 1:
        assert len(f) == 2                                  # one cell = the whole grid: 1 request per dump
    if ps <= 24:
        # full = the same rows in one call per dump; rows that abut in the file (e.g. the last
        # row of one cell and the first of the next, rank 3 of S/4) are one piece of the view
        for r in range(procs):
            merged = []
            for o, n in zip(t.where(rank=r).sorted().offset, t.where(rank=r).sorted().length):
                if merged and merged[-1][0] + merged[-1][1] == o and o % (ps ** 3 * 40) != 0:
                    merged[-1][1] += int(n)
                else:
                    merged.append([int(o), int(n)])
            fr = f.where(rank=r).sorted()
            assert [[int(o), int(n)] for o, n in zip(fr.offset, fr.length)] == merged


def test_btio_dump_counts_and_request_sizes():
    assert [dump_count(CLASSES[c][1]) for c in "SWABC"] == [12, 40, 40, 40, 40]
    assert dump_count(12, 5) == 3                           # steps 5, 10 and the last (12)
    t = btio("S", "simple", 4)
    assert len(t) == 4 * 12 * 2 * 6 * 6 and np.all(t.length == 6 * 40)  # 864 per rank, as in the log
    t16 = btio("S", "simple", 16)
    assert len(t16) == 16 * 12 * 4 * 3 * 3 and np.all(t16.length == 3 * 40)


@pytest.mark.parametrize("kw, msg", [
    (dict(cls="S", subtype="full", procs=6), "square"),
    (dict(cls="S", subtype="full", procs=36), "smaller than 3"),
    (dict(cls="Q", subtype="full", procs=4), "class"),
    (dict(cls="S", subtype="epio", procs=4), "subtype"),
])
def test_btio_bad_parameters(kw, msg):
    with pytest.raises(ParioError, match=msg):
        btio(**kw)


# =============================================================================== registry + CLI
def test_registry():
    assert set(GENERATORS) == {"ior", "hpio", "tile", "btio"}
    t = generate("IOR", procs=2, xfer=4, block=8)
    assert len(t) == 4
    with pytest.raises(ParioError, match="unknown workload"):
        generate("nope")


def test_order_continues_into_read_phase():
    t = hpio(2, 3, 10, 5, op="both")
    for r in range(2):
        s = t.where(rank=r).sorted()
        assert s.op.tolist() == [WRITE] * 3 + [READ] * 3
        assert s.cols["order"].tolist() == list(range(6))


@pytest.mark.parametrize("argv, lib", [
    (["ior", "--procs", "4", "--xfer", "64k", "--block", "256k", "--segments", "2", "--pattern", "strided",
      "--op", "both"], lambda: ior(4, 64 * K, 256 * K, 2, pattern="strided", op="both")),
    (["ior", "--procs", "4", "--xfer", "64k", "--block", "256k", "--pattern", "random", "--seed", "3",
      "--file-per-proc"], lambda: ior(4, 64 * K, 256 * K, pattern="random", seed=3, file_per_proc=True)),
    (["hpio", "--procs", "4", "--region-count", "8", "--region-size", "16k", "--region-spacing", "1k"],
     lambda: hpio(4, 8, 16 * K, 1 * K)),
    (["tile", "--tiles-x", "2", "--tiles-y", "2", "--elements-x", "4", "--elements-y", "3",
      "--element-size", "1k", "--overlap-x", "1", "--op", "read"],
     lambda: tile(2, 2, 4, 3, 1 * K, overlap_x=1, op="read")),
    (["btio", "--class", "s", "--subtype", "simple", "--procs", "4", "--op", "both"],
     lambda: btio("S", "simple", 4, op="both")),
])
def test_cli_generates_and_saves(tmp_path, capsys, argv, lib):
    want = lib()
    for ext in ("parquet", "csv"):
        out = tmp_path / f"t.{ext}"
        assert main(["workload", *argv, "-o", str(out)]) == 0
        line = capsys.readouterr().out
        assert line.count("\n") == 1 and f"{len(want)} requests" in line
        got = load(out)
        assert got.files == want.files
        for col in ("rank", "file", "op", "offset", "length", "collective", "order"):
            assert np.array_equal(got.cols[col], want.cols[col]), col


@pytest.mark.parametrize("argv, msg", [
    (["ior", "--procs", "4", "--xfer", "48k", "--block", "4m"], "must divide"),
    (["btio", "--class", "S", "--procs", "6"], "square"),
])
def test_cli_bad_parameters_one_line(tmp_path, capsys, argv, msg):
    assert main(["workload", *argv, "-o", str(tmp_path / "x.csv")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and msg in err
    assert not (tmp_path / "x.csv").exists()
