"""Shared (multi-process) store: several processes write and read one store at once.

Oracles: the bytes each process wrote (seeded, so every process and the parent rebuild the
reference independently), fsck, and the raw original read without the redirector after the
last close.  Processes are forked (the parent holds no store while they run) and every
wait has a timeout.
"""

from __future__ import annotations

import multiprocessing as mp
import os

import numpy as np
import pytest

from pario import ParioError
from pario.layout import ExtentMap, Striped
from pario.store import Store, init_store
from pario.store.fsck import fsck
from pario.store.replicator import ReplicaSpec, Replicator

N = 1 << 20              # initial file size
P = 4                    # writer processes
BLK = 24_000             # block of the interleaved write pattern (not stripe-aligned)
GROW = 200_000           # the processes also extend the file by this much
CTX = mp.get_context("fork")
TIMEOUT = 60


def initial() -> bytes:
    return np.random.default_rng(0).integers(0, 256, N, dtype=np.uint8).tobytes()


def block_data(k: int, n: int) -> bytes:
    return np.random.default_rng(10_000 + k).integers(0, 256, n, dtype=np.uint8).tobytes()


def blocks():
    """(k, offset, length) of the write pattern; block k is written by process k % P."""
    end = N + GROW
    return [(k, o, min(BLK, end - o)) for k, o in enumerate(range(0, end, BLK))]


def reference() -> bytes:
    ref = bytearray(initial())
    ref.extend(bytes(GROW))
    for k, o, n in blocks():
        ref[o:o + n] = block_data(k, n)
    return bytes(ref)


CEDA = ExtentMap(np.array([50_000, 300_000, 700_000]), np.array([90_000, 150_000, 200_000]),
                 np.array([2, 5, 2]), np.array([0, 0, 90_000]), np.array([1, 1, 1]))


def _make(root, replicas):
    init_store(root, "ceda-hdd8")
    with Store(root) as st:
        st.create("f", "fixed:16k")
        with st.open("f") as f:
            f.write(0, initial())
        Replicator(st, replicas).run()


def _raw(root) -> bytes:
    with Store(root, recover=False) as st:
        h = st.backend.open("f")
        try:
            return st.backend.read_at(h, 0, h.size)
        finally:
            st.backend.close(h)


def _join(procs, q):
    errs = []
    for p in procs:
        p.join(TIMEOUT)
        if p.is_alive():
            p.kill()
            errs.append(f"process {p.pid} hung")
        elif p.exitcode != 0:
            errs.append(f"process {p.pid} exit code {p.exitcode}")
    while not q.empty():
        errs.append(q.get())
    return errs


# ---------------------------------------------------------------------- disjoint writers
def _writer(root, me, barrier, q):
    try:
        st = Store(root, shared=True, lock_timeout=TIMEOUT)
        f = st.open("f")
        barrier.wait(TIMEOUT)
        for k, o, n in blocks():
            if k % P == me:
                f.write(o, block_data(k, n))
        f.fsync()
        barrier.wait(TIMEOUT)                     # everyone's writes are done
        ref = reference()
        assert f.current_size() == len(ref), (f.current_size(), len(ref))
        got = f.read(0, len(ref))
        if got != ref:
            i = int(np.flatnonzero(np.frombuffer(got, np.uint8) != np.frombuffer(ref, np.uint8)[:len(got)])[0])
            raise AssertionError(f"process {me}: byte {i} differs ({len(got)} bytes read)")
        # small reads across replica boundaries and the end of the file
        rng = np.random.default_rng(me)
        for _ in range(200):
            o = int(rng.integers(0, len(ref) + 1000))
            n = int(rng.integers(1, 70_000))
            assert f.read(o, n) == ref[o:o + n], (me, o, n)
        barrier.wait(TIMEOUT)
        f.close()
        st.close()
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        q.put(f"process {me}: {type(exc).__name__}: {exc}")
        raise SystemExit(1)


@pytest.mark.parametrize("kind", ["ceda", "hybrid"])
def test_concurrent_disjoint_writes_then_reads(tmp_path, kind):
    root = tmp_path / "s"
    reps = ([ReplicaSpec("f", "r1", CEDA)] if kind == "ceda" else
            [ReplicaSpec("f", "dv", Striped.fixed(1 << 20, range(8)))])
    _make(root, reps)
    barrier, q = CTX.Barrier(P), CTX.Queue()
    procs = [CTX.Process(target=_writer, args=(str(root), me, barrier, q)) for me in range(P)]
    for p in procs:
        p.start()
    errs = _join(procs, q)
    assert not errs, errs
    ref = reference()
    with Store(root) as st:                      # exclusive: nobody else is left
        rep = fsck(st)
        assert rep["ok"], rep["problems"]
        assert rep["unclean"] == 0               # the last process out flushed everything
        assert st.backend.meta.get("f")[3] == 0  # ... and committed the final size
        with st.open("f") as f:
            assert f.size == len(ref)
            assert f.read(0, f.size) == ref
        if kind == "hybrid":                     # the full replica grew with the file
            assert sum(n for _, n in st.rmt.covered(".replica/f/dv")) == len(ref)
    assert _raw(root) == ref                     # dirty replica data reached the original


# ---------------------------------------------------------------------- reader vs dirty-marker
REC = 256 << 10          # writer records: big, served by the 1 MiB-stripe replica
SMALL = 4096             # reader requests: small, served by the original while all is clean


def size_cost(layout, offset, length):
    """Big requests are cheapest on the 1 MiB-stripe replica, small ones on the original, so a
    reader that missed the writer's RMT change would read the (stale) original."""
    big = isinstance(layout, Striped) and layout.stripes[0] >= (1 << 20)
    if length >= (64 << 10):
        return 1.0 if big else 2.0
    return 2.0 if big else 1.0


def new_record(k: int) -> bytes:
    return np.random.default_rng(50_000 + k).integers(0, 256, REC, dtype=np.uint8).tobytes()


def _hy_writer(root, todo, done, q):
    try:
        st = Store(root, shared=True, cost=size_cost, lock_timeout=TIMEOUT)
        st.engine.set_lazy(False)           # keep the other copies STALE: no background repair
        f = st.open("f")
        for k in range(N // REC):
            todo.get(timeout=TIMEOUT)           # the reader is ready for record k
            f.write(k * REC, new_record(k))     # → replica DIRTY, original STALE
            done.put(k)
        todo.get(timeout=TIMEOUT)
        f.close()
        st.close()
    except BaseException as exc:  # noqa: BLE001
        q.put(f"writer: {type(exc).__name__}: {exc}")
        raise SystemExit(1)


def _hy_reader(root, todo, done, q, check_gen, result):
    try:
        st = Store(root, shared=True, cost=size_cost, lock_timeout=TIMEOUT)
        st.engine.set_lazy(False)
        if not check_gen:
            st.rmt.core.follow = False          # the negative control: reads never apply the writer's records
        f = st.open("f")
        init = initial()
        stale = 0
        for k in range(N // REC):
            o = k * REC
            for p in range(o, o + REC, 64 * SMALL):          # cache loaded, all copies clean: old bytes
                assert f.read(p, SMALL) == init[p:p + SMALL]
            todo.put(k)
            assert done.get(timeout=TIMEOUT) == k
            new = new_record(k)
            for p in range(0, REC, 16 * SMALL):
                got = f.read(o + p, SMALL)
                if got != new[p:p + SMALL]:
                    stale += 1
                    if check_gen:
                        raise AssertionError(f"stale bytes at {o + p} after the writer's write returned")
        todo.put(-1)
        result.put(stale)
        f.close()
        st.close()
    except BaseException as exc:  # noqa: BLE001
        q.put(f"reader: {type(exc).__name__}: {exc}")
        todo.put(-1)
        raise SystemExit(1)


def _run_reader_writer(tmp_path, check_gen):
    root = tmp_path / "s"
    _make(root, [ReplicaSpec("f", "dv", Striped.fixed(1 << 20, range(8)))])
    todo, done, q, result = CTX.Queue(), CTX.Queue(), CTX.Queue(), CTX.Queue()
    procs = [CTX.Process(target=_hy_writer, args=(str(root), todo, done, q)),
             CTX.Process(target=_hy_reader, args=(str(root), todo, done, q, check_gen, result))]
    for p in procs:
        p.start()
    errs = _join(procs, q)
    return root, errs, (result.get(timeout=5) if not errs else None)


def test_reader_follows_rmt_changes_of_another_process(tmp_path):
    root, errs, stale = _run_reader_writer(tmp_path, check_gen=True)
    assert not errs, errs
    assert stale == 0
    ref = bytearray(initial())
    for k in range(N // REC):
        ref[k * REC:(k + 1) * REC] = new_record(k)
    with Store(root) as st:
        rep = fsck(st)
        assert rep["ok"] and rep["unclean"] == 0, rep
        with st.open("f") as f:
            assert f.read(0, f.size) == ref
    assert _raw(root) == ref


def test_without_invalidation_the_reader_would_see_stale_bytes(tmp_path):
    """Negative control: the same run with the reader's core not following the journal (its
    reads route by what it saw at open) reads stale bytes, so the test above can fail."""
    root, errs, stale = _run_reader_writer(tmp_path, check_gen=False)
    assert not errs, errs
    assert stale > 0


# ---------------------------------------------------------------------- writers, readers and a flusher
def _dirty_writer(root, me, q, rounds):
    try:
        st = Store(root, shared=True, lock_timeout=TIMEOUT)
        f = st.open("f")
        ext = list(zip(CEDA.offset.tolist(), CEDA.length.tolist()))
        for r in range(rounds):
            for o, n in ext:                       # my quarter of every replicated extent
                a = o + me * (n // 2)
                f.write(a, block_data(1000 * r + 10 * me + o % 7, n // 2))
        f.close()
        st.close()
    except BaseException as exc:  # noqa: BLE001
        q.put(f"writer {me}: {type(exc).__name__}: {exc}")
        raise SystemExit(1)


def _flusher(root, q, stop):
    try:
        st = Store(root, shared=True, lock_timeout=TIMEOUT)
        f = st.open("f")
        n = 0
        while not stop.is_set():
            f.flush()
            n += 1
        f.close()
        st.close()
    except BaseException as exc:  # noqa: BLE001
        q.put(f"flusher: {type(exc).__name__}: {exc}")
        raise SystemExit(1)


def test_concurrent_dirty_writes_and_flushes(tmp_path):
    """Two processes keep rewriting (disjoint halves of) replicated extents, marking them
    DIRTY, while a third flushes in a loop: after all close, the original holds the last
    bytes of every writer and every entry is clean and equal."""
    root = tmp_path / "s"
    _make(root, [ReplicaSpec("f", "r1", CEDA)])
    q, stop = CTX.Queue(), CTX.Event()
    rounds = 30
    fl = CTX.Process(target=_flusher, args=(str(root), q, stop))
    fl.start()
    ws = [CTX.Process(target=_dirty_writer, args=(str(root), me, q, rounds)) for me in range(2)]
    for p in ws:
        p.start()
    errs = _join(ws, q)
    stop.set()
    errs += _join([fl], q)
    assert not errs, errs
    ref = bytearray(initial())
    for o, n in zip(CEDA.offset.tolist(), CEDA.length.tolist()):
        for me in range(2):
            a = o + me * (n // 2)
            ref[a:a + n // 2] = block_data(1000 * (rounds - 1) + 10 * me + o % 7, n // 2)
    assert _raw(root) == ref
    with Store(root) as st:
        rep = fsck(st)
        assert rep["ok"] and rep["unclean"] == 0, rep


# ---------------------------------------------------------------------- modes, structure, crash
def test_shared_and_exclusive_modes(tmp_path):
    root = tmp_path / "s"
    _make(root, [ReplicaSpec("f", "r1", CEDA)])
    a = Store(root, shared=True, lock_timeout=1)
    b = Store(root, shared=True, lock_timeout=1)          # two shared openers: fine
    with pytest.raises(ParioError, match="in use"):
        Store(root)                                       # exclusive refused while shared
    for what, fn in (("delet", lambda: a.delete("f")), ("replica", lambda: a.delete_replica(".replica/f/r1"))):
        with pytest.raises(ParioError, match="exclusively"):
            fn()
    fa, fb = a.open("f"), b.open("f")
    fa.write(N, b"x" * 5000)                              # a extends the file
    assert fb.size == N and fb.current_size() == N + 5000  # b learns it from the store
    assert fb.read(N, 5000) == b"x" * 5000
    fa.write(60_000, b"y" * 10)                           # into the replica: DIRTY
    assert fb.read(59_995, 20) == initial()[59_995:60_000] + b"y" * 10 + initial()[60_010:60_015]
    fa.close()
    a.close()
    assert b.backend.meta.get("f")[3] == 1                # b still open: size stays "dirty"
    fb.close()
    b.close()                                             # last one out: flush, final sizes
    with Store(root) as st:
        assert st.backend.meta.get("f")[3] == 0 and st.stat("f").size == N + 5000
        assert st.rmt.files_with_unclean() == []
        c = None
        with pytest.raises(ParioError, match="timed out .*exclusively"):
            c = Store(root, shared=True, lock_timeout=0.2)  # shared refused while exclusive
        assert c is None


def _crasher(root, q):
    try:
        st = Store(root, shared=True, lock_timeout=TIMEOUT)
        f = st.open("f")
        f.write(60_000, b"\x05" * 1000)                  # replica → DIRTY
        f.write(N + 10, b"\x06" * 100)                   # extends (size not committed)
        os._exit(0)                                       # "crash": no flush, no close
    except BaseException as exc:  # noqa: BLE001
        q.put(f"crasher: {exc}")
        os._exit(1)


def test_first_shared_opener_recovers_a_crash(tmp_path):
    root = tmp_path / "s"
    _make(root, [ReplicaSpec("f", "r1", CEDA)])
    q = CTX.Queue()
    p = CTX.Process(target=_crasher, args=(str(root), q))
    p.start()
    assert not _join([p], q)
    with Store(root, recover=False) as st:               # what the crash left
        assert st.rmt.files_with_unclean() == ["f"] and st.backend.meta.get("f")[3] == 1
    st = Store(root, shared=True, lock_timeout=5)         # first opener: recovers, then shares
    try:
        assert st.rmt.files_with_unclean() == []
        assert st.backend.meta.get("f")[3] == 0
        with st.open("f") as f:
            assert f.size == N + 110
            assert f.read(60_000, 1000) == b"\x05" * 1000 and f.read(N + 10, 100) == b"\x06" * 100
    finally:
        st.close()
    raw = _raw(root)
    assert raw[60_000:61_000] == b"\x05" * 1000
