"""Large requests over many servers, holes, O_DIRECT, forked processes and interleaved
replica extents, through the store engine.

Every check compares bytes with an in-memory bytearray reference; nothing is timed.
"""

import multiprocessing
import os
from pathlib import Path

import numpy as np
import pytest

from pario import ParioError
from pario.layout import ExtentMap
from pario.store import Store, init_store


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
def test_multi_server_runs_match_reference(store, layout):
    store.create("f", layout)
    rng = np.random.default_rng(len(layout))
    ref = bytearray()
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
    store.close()
    with Store(store.root) as st2, st2.open("f") as g:         # size bookkeeping survives reopen
        assert g.size == len(ref)
        assert g.read(0, g.size) == bytes(ref)


def test_large_unaligned_request_over_every_server(store):
    """A 4 MiB request, unaligned, over 8 servers (17 pieces), and a small one over two."""
    store.create("f", "fixed:256k")
    data = np.random.default_rng(3).integers(0, 256, 4 << 20, dtype=np.uint8).tobytes()
    with store.open("f") as f:
        f.write(100, data)
        assert f.read(100, len(data)) == data
        small = f.read((256 << 10) - 1000, 64 << 10)
        assert small == data[(256 << 10) - 1100:(256 << 10) - 1100 + (64 << 10)]


def test_holes_and_short_reads(store):
    """Data files of different lengths (sparse writes): bytes past a data file's end read 0."""
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


def _direct_ok(d: Path) -> bool:
    p = d / ".probe"
    try:
        fd = os.open(p, os.O_RDWR | os.O_CREAT | getattr(os, "O_DIRECT", 0), 0o644)
    except OSError:
        return False
    os.close(fd)
    p.unlink()
    return hasattr(os, "O_DIRECT")


def test_odirect_matches_reference(tmp_path):
    if not _direct_ok(tmp_path):
        pytest.skip("the tmp file system refuses O_DIRECT")
    init_store(tmp_path / "s", "ceda-hdd8")
    rng = np.random.default_rng(7)
    ref = bytearray()
    with Store(tmp_path / "s", direct=True) as st:
        st.create("f", "fixed:8k")
        with st.open("f") as f:
            _random_io(f, rng, ref, 400_000, 25, 80_000, align=4096)
    with Store(tmp_path / "s", direct=True) as st, st.open("f") as f:
        assert f.size == len(ref)
        assert f.read(0, len(ref)) == bytes(ref)


def _child(root, q):
    try:
        with Store(root) as st, st.open("f") as f:
            q.put(f.read(0, 3 << 20) == bytes(range(256)) * (3 << 12))
    except BaseException as exc:   # pragma: no cover - reported to the parent
        q.put(repr(exc))


def test_forked_child_reads_what_the_parent_wrote(tmp_path):
    """A child forked after the parent used (and closed) a store opens it and reads its bytes."""
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
