"""Redirector: plain, redirected, partly redirected, dirty, flushed paths against a bytearray."""

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st_

from pario.layout import ExtentMap
from pario.store import DIRTY, Store, init_store
from pario.store.fsck import fsck
from pario.store.replicator import ReplicaSpec, Replicator

N = 300_000
EXT = ExtentMap(np.array([10_000, 100_000, 200_000]), np.array([30_000, 50_000, 60_000]),
                np.array([2, 3, 2]), np.array([0, 0, 30_000]), np.array([1, 1, 1]))


def _store(path):
    init_store(path, "ceda-hdd8")
    st = Store(path)
    st.create("f", "fixed:16k")
    init = np.random.default_rng(0).integers(0, 256, N, dtype=np.uint8).tobytes()
    with st.open("f") as f:
        f.write(0, init)
    Replicator(st, [ReplicaSpec("f", "r1", EXT)], chunk=7_000).run()
    return st, bytearray(init)


class Spy:
    """Bytes read from the original (``"f"``) and from the replica (``".replica/f/r1"``) by
    the reads of file ``f`` since the spy was made (the engine's per-file counters)."""

    def __init__(self, f):
        self.f = f
        self.base = f.stats

    @property
    def n(self) -> dict:
        now = self.f.stats
        out = {"f": now["read_original"] - self.base["read_original"],
               ".replica/f/r1": now["read_replica"] - self.base["read_replica"]}
        return {k: v for k, v in out.items() if v}


def test_reads_are_redirected_to_the_replica(tmp_path):
    st, ref = _store(tmp_path / "s")
    f = st.open("f")
    spy = Spy(f)
    assert f.read(15_000, 10_000) == ref[15_000:25_000]            # fully inside an extent
    assert spy.n == {".replica/f/r1": 10_000}
    assert f.read(0, 50_000) == ref[0:50_000]                      # partly covered
    assert spy.n == {".replica/f/r1": 40_000, "f": 20_000}
    assert f.read(270_000, 10_000) == ref[270_000:280_000]         # no replica
    assert spy.n["f"] == 30_000
    f.close()
    st.close()


def test_write_to_replica_is_dirty_until_flush(tmp_path):
    st, ref = _store(tmp_path / "s")
    f = st.open("f")
    f.write(105_000, b"\x01" * 1000)
    ref[105_000:106_000] = b"\x01" * 1000
    flags = {(o, n): fl for _, _, o, _, _, n, fl in st.rmt.all_rows()}
    assert flags[(105_000, 1000)] == DIRTY
    oh = st.backend.open("f")
    assert st.backend.read_at(oh, 105_000, 1000) != b"\x01" * 1000  # the original is stale
    assert f.read(104_000, 3000) == ref[104_000:107_000]           # ... but never read
    f.flush()
    assert st.backend.read_at(oh, 105_000, 1000) == b"\x01" * 1000
    st.backend.close(oh)
    assert fsck(st)["ok"] and fsck(st)["unclean"] == 0
    f.close()
    st.close()


def test_dirty_flags_survive_a_crash(tmp_path):
    st, ref = _store(tmp_path / "s")
    f = st.open("f")
    f.write(205_000, b"\x07" * 5000)
    import os
    st.engine.abandon()                       # "crash": no close, no flush
    st2 = Store(tmp_path / "s")                # the next open finishes the flush
    assert st2.rmt.files_with_unclean() == []
    oh = st2.backend.open("f")
    assert st2.backend.read_at(oh, 205_000, 5000) == b"\x07" * 5000
    st2.backend.close(oh)
    assert fsck(st2)["ok"]
    st2.close()


def _coverage(rows, flag=None):
    """The union of the RMT entries' original ranges (of one flag) as sorted (start, end)."""
    spans = sorted((o, o + n) for _, _, o, _, _, n, fl in rows if flag is None or fl == flag)
    out = []
    for a, b in spans:
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def test_rewrite_after_truncation_goes_to_the_replica(tmp_path):
    """IOR's write phase truncates the file to 0 (MPI_File_set_size) and writes it again: the
    rewritten bytes inside the replica's extents go to the replica (DIRTY: CEDA redirects a
    write to replicated data), so later reads are redirected as before; past the end too."""
    st, _ = _store(tmp_path / "s")
    f = st.open("f")
    f.truncate(0)
    assert st.rmt.all_rows() == []                                 # the entries went with the bytes
    new = np.random.default_rng(1).integers(0, 256, N, dtype=np.uint8).tobytes()
    for x in range(0, N, 7_000):                                   # sequential, every write extends
        f.write(x, new[x:x + 7_000])
    want = [(int(o), int(o + n)) for o, n in zip(EXT.offset, EXT.length)]   # the slots, from EXT itself
    assert _coverage(st.rmt.all_rows(), DIRTY) == want
    assert f.size == N and f.read(0, N) == new
    oh = st.backend.open("f")
    assert st.backend.read_at(oh, 0, 10_000) == new[:10_000]      # outside the slots: the original
    assert st.backend.read_at(oh, 20_000, 10_000) != new[20_000:30_000]   # inside: not yet
    f.flush()
    assert st.backend.read_at(oh, 10_000, 30_000) == new[10_000:40_000]
    st.backend.close(oh)
    rep = fsck(st)
    assert rep["ok"] and rep["unclean"] == 0, rep["problems"]
    spy = Spy(f)
    assert f.read(100_000, 50_000) == new[100_000:150_000]
    assert spy.n == {".replica/f/r1": 50_000}                       # redirected again
    f.close()
    st.close()


def test_a_write_past_the_end_into_a_slot_survives_a_crash(tmp_path):
    """The original's data files hold the size a slot write reached (its last byte), so the
    size a crashed store recovers from them keeps the DIRTY bytes, which recovery flushes."""
    st, ref = _store(tmp_path / "s")
    f = st.open("f")
    f.truncate(150_000)
    f.write(200_000, b"\x05" * 50_000)                              # past the end, inside [200k, 260k)
    assert _coverage(st.rmt.all_rows(), DIRTY) == [(200_000, 250_000)]
    import os
    st.engine.abandon()                                           # "crash": no close, no flush
    st2 = Store(tmp_path / "s")
    assert st2.rmt.files_with_unclean() == []
    with st2.open("f") as g:
        assert g.size == 250_000
        assert g.read(0, 250_000) == bytes(ref[:150_000]) + bytes(50_000) + b"\x05" * 50_000
    assert fsck(st2)["ok"]
    st2.close()


ops = st_.lists(st_.one_of(
    st_.tuples(st_.just("w"), st_.integers(0, N + 20_000), st_.integers(1, 80_000), st_.integers(0, 255)),
    st_.tuples(st_.just("r"), st_.integers(0, N + 20_000), st_.integers(0, 120_000), st_.just(0)),
    st_.tuples(st_.just("flush"), st_.just(0), st_.just(0), st_.just(0)),
    st_.tuples(st_.just("reopen"), st_.just(0), st_.just(0), st_.just(0)),
    st_.tuples(st_.just("trunc"), st_.integers(0, N + 20_000), st_.just(0), st_.just(0)),
), max_size=25)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops)
def test_random_ops_match_bytearray(tmp_path_factory, seq):
    path = tmp_path_factory.mktemp("h") / "s"
    st, ref = _store(path)
    f = st.open("f")
    try:
        for op, a, b, c in seq:
            if op == "w":
                d = bytes([c]) * b
                f.write(a, d)
                ref.extend(bytes(max(0, a + b - len(ref))))
                ref[a:a + b] = d
            elif op == "r":
                assert f.read(a, b) == bytes(ref[a:a + b])
            elif op == "flush":
                f.flush()
            elif op == "reopen":
                f.close()
                st.close()
                st = Store(path)
                f = st.open("f")
            elif op == "trunc":
                f.truncate(a)
                ref = ref[:a] + bytearray(max(0, a - len(ref)))
        assert f.size == len(ref)
        assert f.read(0, len(ref)) == bytes(ref)
        f.flush()
        rep = fsck(st)
        assert rep["ok"], rep["problems"]
    finally:
        f.close()
        st.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st_.lists(st_.tuples(st_.integers(0, N + 20_000), st_.integers(0, 40_000)), min_size=1, max_size=12),
       st_.booleans())
def test_vectored_io_matches_a_bytearray(tmp_path_factory, ranges, replica_hit):
    """File.writev / readv (the two-phase cycle path): many disjoint ranges in one call, with
    and without RMT hits, past the end, against the in-memory reference."""
    st, ref = _store(tmp_path_factory.mktemp("v") / "s")
    # disjoint ranges from the drawn (start, length) pairs, in a shuffled order
    rs, reach = [], 0
    for x, n in sorted(ranges):
        x = max(x, reach)
        if not replica_hit:        # keep clear of the replicated extents [10k,40k) [100k,150k) [200k,260k)
            x = max(x, 260_000)
        rs.append((x, n))
        reach = x + n
    rs = rs[::-1]
    off = np.array([r[0] for r in rs], dtype=np.int64)
    ln = np.array([r[1] for r in rs], dtype=np.int64)
    bo = np.concatenate(([0], np.cumsum(ln)[:-1])).astype(np.int64)
    data = np.random.default_rng(len(rs)).integers(0, 256, int(ln.sum()), dtype=np.uint8).tobytes()
    f = st.open("f")
    f.writev(off, ln, data, bo)
    for x, n, b in zip(off.tolist(), ln.tolist(), bo.tolist()):
        if n and x + n > len(ref):      # a zero-length write does not extend the file
            ref.extend(bytes(x + n - len(ref)))
        ref[x:x + n] = data[b:b + n]
    assert f.size == len(ref)
    # read the same ranges, each widened by 1 KB (past the end reads as 0)
    wo = np.maximum(off - 1000, 0)
    we = off + ln + 1000
    wl = we - wo
    wbo = np.concatenate(([0], np.cumsum(wl)[:-1])).astype(np.int64)
    out = bytearray(int(wl.sum()))
    f.readv(wo, wl, out, wbo)   # widened ranges may overlap: fine for reads
    padded = bytes(ref) + bytes(int(we.max()))
    for x, n, b in zip(wo.tolist(), wl.tolist(), wbo.tolist()):
        assert out[b:b + n] == padded[x:x + n]
    f.close()
    assert fsck(st)["ok"]
    with st.open("f") as g:
        assert g.read(0, len(ref)) == bytes(ref)
    st.close()


def test_vectored_write_of_one_server_is_one_device_write(tmp_path):
    """A HACIO cycle's blocks: every 8th 16 KiB stripe (all on server 3) → one pwritev (the
    process's write system calls, counted by the kernel: /proc/self/io ``syscw``)."""
    def syscw() -> int:
        with open("/proc/self/io") as fh:
            return int(next(ln for ln in fh if ln.startswith("syscw:")).split()[1])

    st, _ = _store(tmp_path / "s")
    f = st.open("f")
    off = np.arange(3, 8 * 12, 8, dtype=np.int64) * 16384 + 24 * 16384
    ln = np.full(len(off), 16384, dtype=np.int64)
    bo = np.arange(len(off), dtype=np.int64) * 16384
    data = bytes(range(256)) * (16384 * len(off) // 256)
    f.writev(off[:1], ln[:1], data, bo[:1])          # the data file open (and created) already
    before = syscw()
    f.writev(off, ln, data, bo)
    assert syscw() - before == 1
    for k, x in enumerate(off.tolist()):
        assert f.read(x, 16384) == data[k * 16384:(k + 1) * 16384]
    f.close()
    st.close()
