"""Relayout: a file already in the store rewritten with another layout (pario.store.relayout,
``pario replicate`` applying a plan's "layouts").

Oracles, independent of the store's own mapping code: the source bytes (numpy, seeded);
the numpy mapping of tests/oracles/layout.py (independent of the engine's) for where every 512-byte block must sit on which server's data
file (read raw from the server directories) and how many bytes each server holds; fsck;
for killed relayouts, the layouts before and after; for other processes, the bytes they
read and the writes they had acknowledged.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import select
import signal
import time

import numpy as np
import pytest
from oracles.layout import map_requests

from pario import ParioError
from pario.layout import (
    ExtentMap,
    Striped,
    describe,
    layout_from_dict,
    layout_to_dict,
)
from pario.store import Store, init_store
from pario.store.fsck import fsck
from pario.store.relayout import RETIRED_PREFIX
from pario.store.replicator import ReplicaSpec, Replicator
from pario.store.rmt import DIRTY

SYSTEM = "padp-6h2s"          # 6 HDD servers H0-H5, 2 SSD servers S0, S1
CTX = mp.get_context("fork")
TIMEOUT = 60

# every layout kind; stripes and region bounds are multiples of 512 B, so that each 512-byte
# block lies on one server (the placement oracle below reads it there)
PSA = {"type": "regions", "regions": [
    {"start": 0, "end": 393_216, "layout": {"type": "striped", "servers": ["S0", "S1"], "stripes": [4096, 8192]}},
    {"start": 393_216, "end": 917_504, "layout": {"type": "striped", "servers": ["H0", "H1", "H2", "H3", "H4", "H5"],
                                                  "stripes": [12_288] * 6}},
    {"start": 917_504, "end": None, "layout": {"type": "striped",
                                               "servers": ["H0", "H1", "H2", "H3", "H4", "H5", "S0", "S1"],
                                               "stripes": [0, 0, 0, 0, 0, 0, 32_768, 32_768]}}]}
LAYOUTS = {"fixed": "fixed:64k", "padp": "var:hdd=28K,ssd=100K", "grouped": "2d:2:64k", "psa": PSA}
KINDS = list(LAYOUTS)


def source(n: int, seed: int = 0) -> bytes:
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()


def _lay(st, spec):
    return st.layout(spec)


def _ldict(st, spec) -> dict:
    return layout_to_dict(_lay(st, spec), st.system)


def _make(root, data: bytes, spec, name="f") -> None:
    init_store(root, SYSTEM)
    src = root.parent / f"{root.name}.src"
    src.write_bytes(data)
    with Store(root) as st:
        st.put(src, name, spec, chunk=1 << 20)


def _get(st, name, tmp) -> bytes:
    out = tmp / f"get-{os.getpid()}-{time.monotonic_ns()}.bin"
    st.get(name, out, chunk=1 << 20)
    b = out.read_bytes()
    out.unlink()
    return b


def check_placement(st, name: str, data: bytes, *, only_file: bool = True) -> None:
    """The file's bytes sit where map_requests says, per 512-byte block, in its data files
    (read raw), and each server's data file holds exactly the bytes the layout gives it."""
    fid, lay_d, size, dirty = st.backend.meta.get(name)
    assert size == len(data) and dirty == 0
    lay = layout_from_dict(lay_d, st.system)
    whole = map_requests(lay, np.array([0]), np.array([size]))
    need = np.bincount(whole.server, weights=whole.length, minlength=st.system.n).astype(np.int64)
    have = np.zeros(st.system.n, dtype=np.int64)
    raw = {}
    for j, path, i, df in st.backend.datafiles():
        if only_file:
            assert (i, df) == (fid, 0), f"data file {path} of another file (old copy not removed?)"
        if (i, df) == (fid, 0):
            have[j] = path.stat().st_size
            raw[j] = path.read_bytes()
    assert have.tolist() == need.tolist()
    offs = np.arange(0, size, 512, dtype=np.int64)
    lens = np.minimum(512, size - offs)
    sub = map_requests(lay, offs, lens)
    assert len(sub) == len(offs)                   # one server per block
    src = np.frombuffer(data, dtype=np.uint8)
    for q, j, loc, n in zip(sub.req.tolist(), sub.server.tolist(), sub.local.tolist(), sub.length.tolist()):
        o = int(offs[q])
        assert raw[j][loc:loc + n] == data[o:o + n], f"block at {o} not at {st.system.names[j]}:{loc}"
    assert int(src.size) == size


# ---------------------------------------------------------------------- every kind to every kind
@pytest.mark.parametrize("a", KINDS)
def test_every_kind_to_every_other(tmp_path, a):
    """From layout kind ``a`` to each other kind and back: bytes identical (Store.get), each
    512-byte block where map_requests puts it, per-server bytes as the layout says, the old
    copy's data files gone, fsck clean."""
    data = source(1_300_000 + KINDS.index(a) * 777, seed=KINDS.index(a))
    root = tmp_path / "s"
    _make(root, data, LAYOUTS[a])
    with Store(root) as st:
        check_placement(st, "f", data)
        ids = {st.backend.meta.get("f")[0]}
        for b in [k for k in KINDS if k != a] + [a]:
            r = st.relayout("f", LAYOUTS[b], chunk=200_000)
            assert r.changed and r.size == len(data) and r.moved == len(data) and r.old_removed
            assert layout_to_dict(st.stat("f").layout, st.system) == _ldict(st, LAYOUTS[b])
            fid = st.backend.meta.get("f")[0]
            assert fid not in ids                   # a new file id each time
            ids.add(fid)
            assert _get(st, "f", tmp_path) == data
            check_placement(st, "f", data)
            rep = fsck(st)
            assert rep["ok"], rep["problems"]
            assert st.backend.list() == ["f"]
            assert describe(r.old, st.system) in r.describe(st.system)


def test_same_layout_is_left_alone_and_holes_stay(tmp_path):
    data = bytearray(source(600_000, 3))
    data[100_000:300_000] = bytes(200_000)         # a hole in the middle (never written)...
    root = tmp_path / "s"
    init_store(root, SYSTEM)
    with Store(root) as st:
        st.create("f", "fixed:64k")
        with st.open("f") as f:
            f.write(0, data[:100_000])
            f.write(300_000, data[300_000:])
            f.truncate(700_000)                     # ... and one at the end
        data = bytes(data) + bytes(100_000)
        fid = st.backend.meta.get("f")[0]
        r = st.relayout("f", "fixed:64k")
        assert not r.changed and st.backend.meta.get("f")[0] == fid     # nothing done
        r = st.relayout("f", "fixed:16k", chunk=50_000)
        assert r.changed and r.moved == 400_000    # the all-zero chunks were not written
        assert _get(st, "f", tmp_path) == data
        check_placement(st, "f", data)
        assert fsck(st)["ok"]


def test_bad_input_is_one_line_and_touches_nothing(tmp_path):
    data = source(200_000, 4)
    root = tmp_path / "s"
    _make(root, data, "fixed:64k")
    with Store(root) as st:
        before = (st.backend.meta.get("f"), [p.name for _, p, _, _ in st.backend.datafiles()])
        bad = [({"type": "striped", "servers": ["H0", "X9"], "stripes": [4096, 4096]}, "X9"),
               (Striped.fixed(4096, range(9)), "server index 8"),
               ("fixed:64k@H0,Q1", "Q1"),
               ("2d:3:64k", "3 equal groups"),
               (ExtentMap(np.array([0]), np.array([10]), np.array([1]), np.array([0]), np.array([1])), "extents")]
        for spec, why in bad:
            with pytest.raises(ParioError) as e:
                st.relayout("f", spec)
            assert why in str(e.value) and "\n" not in str(e.value)
        with pytest.raises(ParioError, match="no file 'nope'"):
            st.relayout("nope", "fixed:16k")
        with pytest.raises(ParioError, match="not a user file"):
            st.relayout(".incoming/x", "fixed:16k")
        with st.open("f"), pytest.raises(ParioError, match="open in this process"):
            st.relayout("f", "fixed:16k")
        assert (st.backend.meta.get("f"), [p.name for _, p, _, _ in st.backend.datafiles()]) == before
        assert _get(st, "f", tmp_path) == data


def test_failures_leave_the_file_unchanged(tmp_path, monkeypatch):
    """A full disk in the middle of the copy, and a failing switch after the replicas were
    dropped: one line saying the file is unchanged, the new copy gone, fsck clean."""
    import errno

    import pario.store.relayout as rl

    data = source(900_000, 8)
    root = tmp_path / "s"
    _make(root, data, "fixed:64k")
    with Store(root) as st:
        Replicator(st, [ReplicaSpec("f", "r1", EXT)]).run()
        before = st.backend.meta.get("f")
        real = type(st.backend).writev
        calls = []

        def full(self, h, *a, **kw):
            if h.name.startswith(rl.RELAYOUT_PREFIX):
                calls.append(1)
                if len(calls) == 3:
                    raise OSError(errno.ENOSPC, "No space left on device")
            return real(self, h, *a, **kw)
        monkeypatch.setattr(type(st.backend), "writev", full)
        with pytest.raises(ParioError) as e:
            st.relayout("f", "fixed:16k", chunk=100_000)
        assert str(e.value) == "relayout 'f': No space left on device (the file is unchanged)"
        monkeypatch.setattr(type(st.backend), "writev", real)
        assert st.backend.meta.get("f") == before and st.backend.list() == [".replica/f/r1", "f"]
        assert [r["name"] for r in st.rmt.replicas("f")] == ["r1"]
        assert {i for _, _, i, _ in st.backend.datafiles()} == {before[0], st.rmt.fid(".replica/f/r1")}
        assert _get(st, "f", tmp_path) == data and fsck(st)["ok"]

        def broken(*a, **kw):
            raise ParioError("metadata database: disk I/O error")
        monkeypatch.setattr(rl, "_switch", broken)
        with pytest.raises(ParioError) as e:
            st.relayout("f", "fixed:16k", chunk=100_000)
        assert str(e.value) == ("relayout 'f': metadata database: disk I/O error "
                                "(the file is unchanged; its replicas were dropped)")
        assert st.backend.meta.get("f") == before and st.rmt.replicas() == []
        assert not [n for n in st.backend.list() if n.startswith(".replica/")]
        assert _get(st, "f", tmp_path) == data
        rep = fsck(st)
        assert rep["ok"], rep["problems"]


def test_announcement_cut_by_a_kill_is_dropped_at_the_next_open(tmp_path):
    """The journal keeps a killed transaction's records one by one: a REGISTER of the
    relayout's placeholder without its DROP (replica file gone, no entry) is inert — reads,
    writes and extensions of the file never touch it — and the next open drops it."""
    from pario.store.rmt import PARTIAL

    data = source(200_000, 12)
    root = tmp_path / "s"
    _make(root, data, "fixed:64k")
    with Store(root) as st:
        o = st.rmt.fid("f")
        st.rmt.core.register(10_000, o, PARTIAL, 0, "relayout")     # id 10000: no such file
        with st.open("f") as f:
            f.write(150_000, source(100_000, 13))                     # extends the file
            assert f.read(0, 10) == data[:10]
        assert [r["name"] for r in st.rmt.replicas("f")] == ["relayout"] and st.rmt.core.entries(o) == []
    with Store(root) as st:
        assert st.rmt.replicas() == [] and st.rmt.core.replicas() == []
        want = data[:150_000] + source(100_000, 13)
        assert _get(st, "f", tmp_path) == want
        assert fsck(st)["ok"]


def test_unfinished_replicator_job_is_refused(tmp_path):
    data = source(300_000, 5)
    root = tmp_path / "s"
    _make(root, data, "fixed:64k")
    ext = ExtentMap(np.array([10_000]), np.array([100_000]), np.array([6]), np.array([0]), np.array([1]))
    with Store(root) as st:
        rep = Replicator(st, [ReplicaSpec("f", "r1", ext)], chunk=20_000)
        rep.progress = lambda done, total: rep._stop.set()     # stopped after one chunk: the job stays pending
        rep.run()
        assert st.rmt.jobs(pending_only=True)
        with pytest.raises(ParioError, match="unfinished replicator job.*--resume"):
            st.relayout("f", "fixed:16k")
        assert layout_to_dict(st.stat("f").layout, st.system) == _ldict(st, "fixed:64k")


# ---------------------------------------------------------------------- replicas
EXT = ExtentMap(np.array([20_000, 400_000]), np.array([150_000, 90_000]), np.array([6, 7]),
                np.array([0, 150_000]), np.array([1, 1]))


def test_replicas_written_back_then_dropped(tmp_path):
    """A CEDA partial replica holding DIRTY bytes (written through the redirector's record:
    MARK, then the bytes into the replica) and a hybrid full replica: the relaid file has the
    newest bytes, the replicas are gone (RMT and files), fsck clean."""
    data = bytearray(source(700_000, 6))
    root = tmp_path / "s"
    _make(root, bytes(data), "fixed:64k")
    with Store(root) as st:
        Replicator(st, [ReplicaSpec("f", "r1", EXT), ReplicaSpec("f", "h1", _lay(st, "fixed:32k@S0,S1"))]).run()
        o, r = st.rmt.fid("f"), st.rmt.fid(".replica/f/r1")
        new = source(50_000, 7)
        st.rmt.core.mark(o, r, 410_000, 460_000)     # the replica is newest there ...
        rh = st.backend.open(".replica/f/r1")
        st.backend.writev(rh, (410_000,), (50_000,), new, (0,))   # ... with these bytes
        st.backend.close(rh)
        data[410_000:460_000] = new
        assert any(e[4] == DIRTY for e in st.rmt.core.entries(o))
        res = st.relayout("f", "var:hdd=28K,ssd=100K", chunk=64_000)
        assert sorted(res.replicas_dropped) == ["h1", "r1"]
        assert st.rmt.replicas() == [] and st.rmt.core.files() == []
        assert st.backend.list() == ["f"]
        assert _get(st, "f", tmp_path) == bytes(data)
        check_placement(st, "f", bytes(data))
        rep = fsck(st)
        assert rep["ok"] and rep["entries"] == 0, rep["problems"]
        # the plan's replicas again, against the new file id
        Replicator(st, [ReplicaSpec("f", "r1", EXT)]).run()
        assert [x["r_file"] for x in st.rmt.replicas("f")] == [".replica/f/r1"]
        with st.open("f") as f:
            assert f.read(0, len(data)) == bytes(data)
            assert f.served_by(30_000, 40_000) == [(30_000, 40_000, ".replica/f/r1")]
        rep = fsck(st)
        assert rep["ok"] and rep["checked_bytes"] == 240_000, rep


# ---------------------------------------------------------------------- SIGKILL at random points
def _kill_child(root, spec, shared, wfd):
    def mark(c: bytes):
        os.write(wfd, c)
    try:
        mark(b"o")
        st = Store(root, shared=shared)
        mark(b"O")
        st.relayout("f", spec, chunk=32_768,
                    progress=lambda stage, d, t: mark({"copy": b"c", "copied": b"C", "dropped": b"D",
                                                       "switched": b"S", "removed": b"R"}[stage]))
        st.close()
        mark(b"X")
        os._exit(0)
    except BaseException as exc:  # noqa: BLE001
        os.write(2, f"relayout child: {exc}\n".encode())
        os._exit(3)


TRIALS = int(os.environ.get("PARIO_RELAYOUT_TRIALS", "36"))


def test_sigkill_leaves_old_or_new_complete(tmp_path):
    """36 relayouts SIGKILLed (PARIO_RELAYOUT_TRIALS for more): after a marker of the relayout's progress (a copied chunk, the
    copy complete, the replicas dropped, the switch, the old copy removed, the store closed)
    plus 0-1.5 ms, or at a random time.  The next open recovers: the file has the old layout
    or the new one, its bytes are the source's, nothing hidden is left, fsck is clean; a
    relaid file has no replicas, a file killed before its copy was complete keeps every
    replica."""
    rng = np.random.default_rng(2024)
    outcomes = {"old": 0, "new": 0}
    stages = set()
    for k in range(TRIALS):
        a, b = rng.choice(len(KINDS), 2, replace=False)
        root = tmp_path / f"t{k}"
        data = source(int(rng.integers(250_000, 600_000)), 100 + k)
        _make(root, data, LAYOUTS[KINDS[a]])
        with_reps = k % 3 == 0
        if with_reps:
            with Store(root) as st:
                Replicator(st, [ReplicaSpec("f", "r1", EXT), ReplicaSpec("f", "h1", _lay(st, "fixed:16k@S0"))]).run()
        shared = k % 2 == 1
        rfd, wfd = os.pipe()
        p = CTX.Process(target=_kill_child, args=(root, LAYOUTS[KINDS[b]], shared, wfd))
        p.start()
        os.close(wfd)
        seen = b""
        if k % 4 == 3:                           # a random time
            time.sleep(float(rng.uniform(0, 0.06)))
        else:                                    # after the n-th marker (k % 4 == 1: one of the last steps)
            n_events = 2 + -(-len(data) // 32_768) + (4 if shared else 5)
            target = int(rng.integers(max(1, n_events - 4) if k % 4 == 1 else 1, n_events + 1))
            t0 = time.monotonic()
            while len(seen) < target and time.monotonic() - t0 < TIMEOUT:
                ready, _, _ = select.select([rfd], [], [], 1.0)
                if ready:
                    chunk = os.read(rfd, 64)
                    if not chunk:
                        break
                    seen += chunk
            time.sleep(float(rng.uniform(0, 0.0015)))
        os.kill(p.pid, signal.SIGKILL)
        p.join(TIMEOUT)
        while True:
            ready, _, _ = select.select([rfd], [], [], 0)
            chunk = os.read(rfd, 64) if ready else b""
            if not chunk:
                break
            seen += chunk
        os.close(rfd)
        assert p.exitcode in (-signal.SIGKILL, 0), f"trial {k}: child failed ({p.exitcode})"
        stages.add(seen[-1:])
        with Store(root) as st:                  # the next open recovers
            lay = layout_to_dict(st.stat("f").layout, st.system)
            old, new = _ldict(st, LAYOUTS[KINDS[a]]), _ldict(st, LAYOUTS[KINDS[b]])
            assert lay in (old, new), f"trial {k}: layout {lay}"
            outcome = "new" if lay == new else "old"
            outcomes[outcome] += 1
            assert _get(st, "f", tmp_path) == data, f"trial {k}: bytes differ ({outcome} layout)"
            rep = fsck(st)
            assert rep["ok"], f"trial {k} ({outcome}, markers {seen}): {rep['problems']}"
            assert not [n for n in st.backend.list() if n.startswith(".incoming/")]
            reps = sorted(r["name"] for r in st.rmt.replicas("f"))
            if outcome == "new" or not with_reps:
                assert reps == []
            elif b"C" not in seen:                 # the drop comes after the copy's marker
                assert reps == ["h1", "r1"]
            if outcome == "new" and not reps:
                check_placement(st, "f", data)
            if b"S" in seen:
                assert outcome == "new"
            if seen and b"D" not in seen:
                assert outcome == "old"
    print(f"relayout kills: {outcomes}, last markers seen {sorted(stages)}")
    assert outcomes["old"] and outcomes["new"], outcomes
    assert len(stages) >= 4, stages              # the kills landed in different steps


# ---------------------------------------------------------------------- other processes
N_RD = 3 << 20


def _reader(root, stop, out, ready):
    """Reads random ranges until told to stop: through a handle kept open across every
    relayout, and through handles opened afresh (read up to 20 ms after the open); every
    byte compared with the source."""
    data = source(N_RD, 9)
    rng = np.random.default_rng(os.getpid())
    res = {"reads": 0, "bad": 0, "errors": [], "fresh": 0}
    try:
        with Store(root, shared=True) as st:
            keep = st.open("f")
            ready.set()
            while not stop.is_set():
                x = int(rng.integers(0, N_RD))
                n = int(rng.integers(1, 300_000))
                fresh = rng.random() < 0.3
                try:
                    if fresh:
                        with st.open("f") as f:
                            # opened, then read a little later: often across a switch, with
                            # data files of the old copy this handle has not opened yet
                            time.sleep(float(rng.uniform(0, 0.02)))
                            got = f.read(x, n)
                        res["fresh"] += 1
                    else:
                        got = keep.read(x, n)
                except ParioError as exc:
                    res["errors"].append(str(exc))
                    continue
                res["reads"] += 1
                if got != data[x:x + n]:
                    res["bad"] += 1
            keep.close()
    except BaseException as exc:  # noqa: BLE001
        res["errors"].append(f"{type(exc).__name__}: {exc}")
    out.put(res)


def test_concurrent_reader_sees_correct_bytes(tmp_path):
    """A second process (store open shared) reads while the file is relaid out 8 times by a
    shared opener: every read returns the source's bytes or a one-line error; after both
    are gone no old copy is left and fsck is clean."""
    data = source(N_RD, 9)
    root = tmp_path / "s"
    _make(root, data, "fixed:64k")
    stop, ready, out = CTX.Event(), CTX.Event(), CTX.Queue()
    p = CTX.Process(target=_reader, args=(root, stop, out, ready))
    p.start()
    try:
        assert ready.wait(TIMEOUT)
        with Store(root, shared=True) as st:
            for k in range(8):
                r = st.relayout("f", LAYOUTS[KINDS[(k + 1) % len(KINDS)]], chunk=256 << 10)
                assert r.changed and not r.old_removed       # another process may read the old copy
                time.sleep(0.02)
            retired = [n for n in st.backend.list() if n.startswith(RETIRED_PREFIX)]
            assert len(retired) == 8
    finally:
        stop.set()
        res = out.get(timeout=TIMEOUT)
        p.join(TIMEOUT)
    assert res["bad"] == 0, res
    assert res["reads"] > 0 and res["fresh"] > 0, res
    assert all("\n" not in e for e in res["errors"]), res["errors"]
    with Store(root) as st:
        assert st.backend.list() == ["f"]          # the last one out removed the old copies
        assert _get(st, "f", tmp_path) == data
        check_placement(st, "f", data)
        assert fsck(st)["ok"]


BLK = 10_000


def _writer(root, out, ready, go):
    """Writes block after block (own seeded bytes) through one handle; a write refused
    because the file was relaid out reopens the file and goes on.  Logs every block's fate."""
    res = {"ok": [], "refused": [], "errors": []}
    try:
        with Store(root, shared=True) as st:
            f = st.open("f")
            f.write(0, source(BLK, 1000))             # DIRTY in the replica: written back by the relayout
            res["ok"].append(0)
            ready.set()
            go.wait(TIMEOUT)
            for k in range(1, N_RD // BLK):
                try:
                    f.write(k * BLK, source(BLK, 1000 + k))
                    res["ok"].append(k)
                except ParioError as exc:
                    assert "relaid out" in str(exc) and "\n" not in str(exc)
                    res["refused"].append(k)
                    f.close()
                    f = st.open("f")
                time.sleep(0.0005)
            f.close()
    except BaseException as exc:  # noqa: BLE001
        res["errors"].append(f"{type(exc).__name__}: {exc}")
    out.put(res)


def test_concurrent_writer_loses_nothing(tmp_path):
    """A writer in another process keeps the file open across relayouts (and holds DIRTY
    bytes in a CEDA replica at the first one): every acknowledged write is in the file,
    every refused one left the old bytes, fsck clean."""
    data = source(N_RD, 9)
    root = tmp_path / "s"
    _make(root, data, "fixed:64k")
    ext = ExtentMap(np.array([0]), np.array([50_000]), np.array([7]), np.array([0]), np.array([1]))
    with Store(root) as st:
        Replicator(st, [ReplicaSpec("f", "r1", ext)]).run()
    ready, go, out = CTX.Event(), CTX.Event(), CTX.Queue()
    p = CTX.Process(target=_writer, args=(root, out, ready, go))
    p.start()
    try:
        assert ready.wait(TIMEOUT)
        with Store(root, shared=True) as st:
            o = st.rmt.fid("f")
            assert any(e[4] == DIRTY for e in st.rmt.core.entries(o))
            st.relayout("f", "var:hdd=28K,ssd=100K", chunk=256 << 10)
            go.set()
            for k in range(4):
                time.sleep(0.05)
                st.relayout("f", LAYOUTS[KINDS[k % len(KINDS)]], chunk=256 << 10)
    finally:
        go.set()
        res = out.get(timeout=TIMEOUT)
        p.join(TIMEOUT)
    assert not res["errors"], res
    assert res["ok"] and res["refused"], res      # the writer met a relayout mid-way
    want = bytearray(data)
    for k in res["ok"]:
        want[k * BLK:(k + 1) * BLK] = source(BLK, 1000 + k)
    with Store(root) as st:
        assert _get(st, "f", tmp_path) == bytes(want)
        check_placement(st, "f", bytes(want))
        rep = fsck(st)
        assert rep["ok"], rep["problems"]


def _paused_relayout(root, paused, go, out):
    """Relays f out in a shared store, pausing after its first copied chunk until ``go``."""
    def progress(stage, done, total):
        if stage == "copy" and not paused.is_set():
            paused.set()
            go.wait(TIMEOUT)
    try:
        with Store(root, shared=True) as st:
            r = st.relayout("f", "2d:2:64k", chunk=256 << 10, progress=progress)
            out.put(("ok", sorted(r.replicas_dropped)))
    except BaseException as exc:  # noqa: BLE001
        out.put(("error", f"{type(exc).__name__}: {exc}"))


def test_replicator_started_during_a_relayout_stops_cleanly(tmp_path):
    """A replicator of another process registers a replica (against the old file id) while
    the file is being relaid out: the relayout drops it with the others, the replicator
    stops at its next chunk with one line, and the store is clean."""
    data = source(N_RD, 9)
    root = tmp_path / "s"
    _make(root, data, "fixed:64k")
    paused, go, out = CTX.Event(), CTX.Event(), CTX.Queue()
    p = CTX.Process(target=_paused_relayout, args=(root, paused, go, out))
    p.start()
    try:
        assert paused.wait(TIMEOUT)
        with Store(root, shared=True) as st:
            rep = Replicator(st, [ReplicaSpec("f", "r1", EXT)], chunk=64_000).start()
            t0 = time.monotonic()
            while not st.rmt.replicas("f") and time.monotonic() - t0 < TIMEOUT:
                time.sleep(0.002)
            assert [r["name"] for r in st.rmt.replicas("f")] == ["r1"]
            go.set()
            status = out.get(timeout=TIMEOUT)
            with pytest.raises(ParioError) as e:
                rep.join(TIMEOUT)
            assert "relaid out by another process" in str(e.value) and "\n" not in str(e.value)
    finally:
        go.set()
        p.join(TIMEOUT)
    assert status == ("ok", ["r1"]), status
    with Store(root) as st:
        assert layout_to_dict(st.stat("f").layout, st.system) == _ldict(st, "2d:2:64k")
        assert st.backend.list() == ["f"] and st.rmt.replicas() == [] and st.rmt.core.files() == []
        assert _get(st, "f", tmp_path) == data
        rep = fsck(st)
        assert rep["ok"], rep["problems"]
        Replicator(st, [ReplicaSpec("f", "r1", EXT)]).run()      # the plan again: against the new id
        rep = fsck(st)
        assert rep["ok"] and rep["checked_bytes"] == 240_000, rep


# ---------------------------------------------------------------------- pario replicate with advised plans
def test_replicate_applies_advised_padp_and_psa_layouts(tmp_path, capsys):
    """`pario workload ior` → `pario advise` (PADP, PSA) → `pario replicate PLAN --store`:
    the file written before the plan gets the plan's layout, its bytes unchanged; a file the
    plan names but the store lacks is a note; --no-layouts leaves the layout alone."""
    from pario.cli import main

    trace = tmp_path / "ior.parquet"
    assert main(["workload", "ior", "-n", "4", "-t", "64k", "-b", "1m", "-s", "2", "--pattern", "strided",
                 "-o", str(trace)]) == 0
    plans = {}
    for scheme in ("padp", "psa"):
        plans[scheme] = tmp_path / f"{scheme}.json"
        assert main(["advise", str(trace), "--system", SYSTEM, "--schemes", scheme, "-o", str(plans[scheme])]) == 0
    capsys.readouterr()
    data = source(8 << 20, 11)
    root = tmp_path / "s"
    _make(root, data, "fixed:64k", name="ior.dat")
    with Store(root) as st:
        before = describe(st.stat("ior.dat").layout, st.system)

    plan = json.loads(plans["padp"].read_text())
    assert plan["layouts"]["ior.dat"] != _ldict_sys("fixed:64k")
    assert main(["replicate", str(plans["padp"]), "--store", str(root)]) == 0
    line = capsys.readouterr().out.strip().splitlines()[0]
    with Store(root) as st:
        after = describe(st.stat("ior.dat").layout, st.system)
        assert layout_to_dict(st.stat("ior.dat").layout, st.system) == plan["layouts"]["ior.dat"]
        assert line.startswith(f"ior.dat: {before} → {after}: 8 MiB moved")
        assert _get(st, "ior.dat", tmp_path) == data
        if _blocks_ok(plan["layouts"]["ior.dat"]):
            check_placement(st, "ior.dat", data)
        assert st.backend.list() == ["ior.dat"] and fsck(st)["ok"]

    plan = json.loads(plans["psa"].read_text())
    plan["layouts"]["missing.dat"] = plan["layouts"]["ior.dat"]
    plans["psa"].write_text(json.dumps(plan))
    assert main(["replicate", str(plans["psa"]), "--store", str(root), "--no-layouts", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["layouts"] == []
    with Store(root) as st:
        assert describe(st.stat("ior.dat").layout, st.system) == after
    assert main(["replicate", str(plans["psa"]), "--store", str(root), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    by = {e["file"]: e for e in out["layouts"]}
    assert by["missing.dat"]["status"] == "missing"
    assert by["ior.dat"]["status"] == "relaid" and by["ior.dat"]["moved_bytes"] == len(data)
    assert by["ior.dat"]["from"] == after and by["ior.dat"]["old_copy"] in ("removed", "retired")
    with Store(root) as st:
        assert layout_to_dict(st.stat("ior.dat").layout, st.system) == plan["layouts"]["ior.dat"]
        assert _get(st, "ior.dat", tmp_path) == data
        assert st.backend.list() == ["ior.dat"] and fsck(st)["ok"]
    assert main(["replicate", str(plans["psa"]), "--store", str(root)]) == 0
    out = capsys.readouterr().out
    assert "ior.dat: layout" in out and "already" in out
    assert "missing.dat: not in the store, skipped" in out


def _ldict_sys(spec):
    from pario.layout import parse_layout
    from pario.system import load_system

    s = load_system(SYSTEM)
    return layout_to_dict(parse_layout(spec, s), s)


def _blocks_ok(lay_d) -> bool:
    """Whether every 512-byte block of the layout lies on one server (the placement oracle's
    premise): stripes and region bounds multiples of 512."""
    def ok(d):
        if d["type"] == "regions":
            return all(r["start"] % 512 == 0 and (r["end"] is None or r["end"] % 512 == 0) and ok(r["layout"])
                       for r in d["regions"])
        if d["type"] == "striped":
            return all(s % 512 == 0 for s in d["stripes"])
        return d["type"] == "grouped" and d["stripe"] % 512 == 0
    return ok(lay_d)


def test_a_relaid_file_is_rebuilt_from_the_catalog(tmp_path):
    """After a relayout the catalog names the new copy's id (the switch's renames are in it):
    with meta.db lost, `fsck --repair` rebuilds the file with its new layout and every byte."""
    from pario.store.repair import repair

    root = tmp_path / "s"
    init_store(root, "ceda-hdd8")
    data = np.random.default_rng(5).integers(0, 256, 900_000, dtype=np.uint8).tobytes()
    with Store(root) as st:
        st.create("f", "fixed:64k")
        with st.open("f") as f:
            f.write(0, data)
        st.relayout("f", "fixed:16k")
        want = st.stat("f").layout
    (root / "meta.db").unlink()
    rep = repair(root)
    assert rep["meta"]["rebuilt_files"] >= 1 and rep["fsck"]["ok"], rep
    with Store(root) as st:
        assert st.stat("f").layout == want
        with st.open("f") as f:
            assert f.read(0, len(data)) == data
