"""Per-server concurrency of large requests, the one-piece mapper, and interleaved replica extents.

Every check compares bytes with an in-memory bytearray reference (or a brute-force
overlap test); nothing is timed.  The concurrency threshold is lowered in most tests so
that small, fast requests take the parallel path; one test uses the real threshold.
"""

import multiprocessing
import os
import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st_

from pario import ParioError
from pario.layout import ExtentMap, Grouped, Striped
from pario.store import Store, init_store
from pario.store import local as local_mod
from pario.store.pieces import one_piece, pieces


def _calls() -> int:
    return local_mod._pool().calls


def _random_io(f, rng, ref: bytearray, span: int, rounds: int, maxlen: int, align: int = 1):
    """Random writes (leaving holes) and reads against ``ref``; reads also past the end."""
    for _ in range(rounds):
        off = int(rng.integers(0, span // align)) * align
        n = int(rng.integers(1, maxlen // align + 1)) * align
        d = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        assert f.write(off, d) == n
        if off + n > len(ref):
            ref.extend(bytes(off + n - len(ref)))
        ref[off:off + n] = d
        o = int(rng.integers(0, (len(ref) + maxlen) // align)) * align
        m = int(rng.integers(1, maxlen // align + 1)) * align
        buf = bytearray(b"\xee" * m)
        inside = f.readinto(o, buf)
        want = bytes(ref[o:o + m])
        assert inside == len(want)
        assert bytes(buf) == want + bytes(m - len(want))


@pytest.mark.parametrize("layout", ["fixed:4k", "var:H0=3k,H2=5k,H5=1k,H7=7k", "2d:2:4k"])
def test_parallel_runs_match_reference(store, monkeypatch, layout):
    monkeypatch.setattr(local_mod, "PARALLEL_MIN", 1)     # every multi-server request goes parallel
    store.create("f", layout)
    rng = np.random.default_rng(len(layout))
    ref = bytearray()
    before = _calls()
    with store.open("f") as f:
        _random_io(f, rng, ref, 200_000, 60, 60_000)
        assert f.size == len(ref)
        # the vectored paths (numpy pieces, several runs per server) too
        offs = np.array([3, 70_000, 9000, 150_000], dtype=np.int64)
        lens = np.array([5000, 40_000, 1, 33_333], dtype=np.int64)
        bo = np.concatenate(([0], np.cumsum(lens)[:-1]))
        buf = bytearray(int(lens.sum()))
        f.readv(offs, lens, buf, bo)
        assert bytes(buf) == b"".join(bytes(ref[o:o + n]) for o, n in zip(offs.tolist(), lens.tolist()))
        data = rng.integers(0, 256, int(lens.sum()), dtype=np.uint8).tobytes()
        f.writev(offs, lens, data, bo)
        for o, n, b in zip(offs.tolist(), lens.tolist(), bo.tolist()):
            ref[o:o + n] = data[b:b + n]
    assert _calls() > before
    store.close()
    with Store(store.root) as st2, st2.open("f") as g:         # size bookkeeping survives reopen
        assert g.size == len(ref)
        assert g.read(0, g.size) == bytes(ref)


def test_large_request_real_threshold_and_threads(store):
    """A 4 MiB request over 8 servers uses the pool (at the default threshold); a 64 KiB one
    spanning two servers does not; the workers are named threads of the pool."""
    assert local_mod.PARALLEL_MIN == 1 << 20
    store.create("f", "fixed:256k")
    data = np.random.default_rng(3).integers(0, 256, 4 << 20, dtype=np.uint8).tobytes()
    with store.open("f") as f:
        c0 = _calls()
        f.write(100, data)                        # unaligned: 17 pieces over 8 servers
        c1 = _calls()
        assert c1 == c0 + 1
        assert f.read(100, len(data)) == data
        assert _calls() == c1 + 1
        small = f.read((256 << 10) - 1000, 64 << 10)  # two servers, below the threshold: sequential
        assert small == data[(256 << 10) - 1100:(256 << 10) - 1100 + (64 << 10)]
        assert _calls() == c1 + 1
        names = [t.name for t in threading.enumerate() if t.name.startswith("pario-io-")]
        assert 1 <= len(names) <= local_mod.IO_THREADS


def test_holes_and_short_reads_in_parallel(store, monkeypatch):
    """Data files of different lengths (sparse writes): bytes past a data file's end read 0."""
    monkeypatch.setattr(local_mod, "PARALLEL_MIN", 1)
    store.create("f", "fixed:8k")
    ref = bytearray(300_000)
    with store.open("f") as f:
        for off in (0, 8192 * 9 + 5, 250_000):         # only a few servers get bytes
            d = os.urandom(3000)
            f.write(off, d)
            ref[off:off + len(d)] = d
        f.truncate(300_000)
        buf = bytearray(b"\xff" * 300_000)
        assert f.readinto(0, buf) == 300_000
        assert buf == ref


def test_worker_error_surfaces_as_same_exception(store, monkeypatch):
    monkeypatch.setattr(local_mod, "PARALLEL_MIN", 1)
    store.create("f", "fixed:4k")
    data = os.urandom(64 << 10)
    with store.open("f") as f:
        f.write(0, data)
        boom = OSError(5, "injected EIO in a worker")
        real = os.preadv
        main = threading.main_thread()

        def failing(fd, bufs, pos):
            if threading.current_thread() is not main:
                raise boom
            return real(fd, bufs, pos)
        monkeypatch.setattr(os, "preadv", failing)
        with pytest.raises(OSError) as ei:
            f.read(0, len(data))
        assert ei.value is boom
        monkeypatch.setattr(os, "preadv", real)
        assert f.read(0, len(data)) == data           # the pool is intact afterwards


def test_caller_error_waits_for_workers(monkeypatch):
    """An error in the calling thread still waits for the workers before re-raising."""
    done = []

    def job(i):
        if i == 0:
            raise ValueError("caller part")
        threading.Event().wait(0.05)
        done.append(i)
    with pytest.raises(ValueError, match="caller part"):
        local_mod._parallel(job, [(0,), (1,), (2,)])
    assert sorted(done) == [1, 2]


def _direct_ok(d: Path) -> bool:
    p = d / ".probe"
    try:
        fd = os.open(p, os.O_RDWR | os.O_CREAT | getattr(os, "O_DIRECT", 0), 0o644)
    except OSError:
        return False
    os.close(fd)
    p.unlink()
    return hasattr(os, "O_DIRECT")


def test_parallel_odirect_matches_reference(tmp_path, monkeypatch):
    if not _direct_ok(tmp_path):
        pytest.skip("the tmp file system refuses O_DIRECT")
    monkeypatch.setattr(local_mod, "PARALLEL_MIN", 1)
    init_store(tmp_path / "s", "ceda-hdd8")
    rng = np.random.default_rng(7)
    ref = bytearray()
    with Store(tmp_path / "s", direct=True) as st:
        st.create("f", "fixed:8k")
        before = _calls()
        with st.open("f") as f:
            _random_io(f, rng, ref, 400_000, 25, 80_000, align=4096)
        assert _calls() > before
    with Store(tmp_path / "s", direct=True) as st, st.open("f") as f:
        assert f.size == len(ref)
        assert f.read(0, len(ref)) == bytes(ref)


def _child(root, q):
    try:
        with Store(root) as st, st.open("f") as f:
            q.put(f.read(0, 3 << 20) == bytes(range(256)) * (3 << 12))
    except BaseException as exc:   # pragma: no cover - reported to the parent
        q.put(repr(exc))


def test_forked_child_gets_its_own_pool(tmp_path):
    """The parent has pool threads; a forked child (no threads) must not wait on them."""
    init_store(tmp_path / "s", "ceda-hdd8")
    with Store(tmp_path / "s") as st:
        st.create("f", "fixed:256k")
        with st.open("f") as f:
            f.write(0, bytes(range(256)) * (3 << 12))
            f.read(0, 3 << 20)                     # parent pool started
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(str(tmp_path / "s"), q))
    p.start()
    p.join(60)
    assert p.exitcode == 0
    assert q.get(timeout=5) is True


def test_negative_offset_is_clear_error(store):
    store.create("f", "fixed:4k")
    with store.open("f") as f:
        f.write(0, b"x" * 100)
        with pytest.raises(ParioError, match="offset"):
            f.readinto(-1, bytearray(10))
        with pytest.raises(ParioError, match="offset"):
            f.write(-5, b"y")


LAYOUTS = {
    "fixed": Striped.fixed(4096, range(8)),
    "varied": Striped((0, 1, 2, 5), (3000, 0, 10000, 777)),
    "grouped": Grouped(((0, 1), (2, 3, 4)), 2048),
    "extents": ExtentMap(np.array([1000, 30_000]), np.array([5000, 20_000]), np.array([6, 7]),
                         np.array([0, 100]), np.array([1, 2]), Striped.fixed(5000, (0, 3))),
}


@settings(max_examples=300, deadline=None)
@given(st_.sampled_from(sorted(LAYOUTS)), st_.integers(0, 200_000), st_.integers(0, 20_000))
def test_one_piece_equals_pieces(kind, x, n):
    """one_piece gives the data file and local offset of pieces() when the range is one piece, else None."""
    lay = LAYOUTS[kind]
    got = one_piece(lay)(x, n)
    if n == 0:
        assert got is None
        return
    srv, df, loc, ln, _ = [a.tolist() for a in pieces(lay, [x], [n], [0])]
    # pieces() may cut at extra points: merge the pieces contiguous in one data file
    runs = [[srv[0], df[0], loc[0], ln[0]]]
    for k in range(1, len(srv)):
        r = runs[-1]
        if (srv[k], df[k]) == (r[0], r[1]) and loc[k] == r[2] + r[3]:
            r[3] += ln[k]
        else:
            runs.append([srv[k], df[k], loc[k], ln[k]])
    if got is None:
        assert len(srv) > 1            # None (the general path) only for several pieces
    else:
        assert len(runs) == 1 and got == ((runs[0][0], runs[0][1]), runs[0][2])
    if kind != "extents":              # striped / 2-D: exactly the single-piece ranges
        assert (got is not None) == (len(runs) == 1)


def test_interleaved_extents_are_served_right(store):
    """Interleaved replica extents: requests between them go to the original (bytes equal),
    requests on them are served by the replica (bytes equal as well)."""
    from pario.store.replicator import ReplicaSpec, Replicator

    store.create("g", "fixed:64k")
    size = 4 << 20
    data = os.urandom(size)
    with store.open("g") as f:
        f.write(0, data)
    k = 64
    offs = np.arange(k, dtype=np.int64) * (size // k) + 40_000
    em = ExtentMap(offs, np.full(k, 4096, dtype=np.int64), np.full(k, 3), np.arange(k) * 4096,
                   np.ones(k, dtype=np.int64))
    Replicator(store, [ReplicaSpec("g", "r1", em)]).run()
    ent = store.rmt.entries("g")
    assert ent.n == k
    rng = np.random.default_rng(5)
    with store.open("g") as f:
        for _ in range(200):
            x = int(rng.integers(0, size - 1))
            n = int(rng.integers(1, min(70_000, size - x) + 1))
            assert f.read(x, n) == data[x:x + n]
