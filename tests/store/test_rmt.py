"""The RMT: the C core against an independent Python replay of its journal, routing against
brute force, crash and power-loss behaviour of the journal, several processes, migration."""

import os
import sqlite3
import struct
import zlib

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st_

from pario import ParioError
from pario.store import rmt_journal as J
from pario.store.rmt import _core_module

_rmt = _core_module()
CLEAN, DIRTY, STALE, COPYING, FRESH = J.CLEAN, J.DIRTY, J.STALE, J.COPYING, J.FRESH
HYP = dict(deadline=None, suppress_health_check=list(HealthCheck))


def core(path, shared=False, first=True, sync=None, timeout=2.0, coord=None):
    """The RMT of a journal file through a coordination member: "host" (the journal mapped,
    core/journal_map.c) or "pfs" (pread/pwrite and a byte-range lock, core/journal_file.c)."""
    return _rmt.Core(str(path), str(sync) if sync else None, shared, first, timeout, coord)


# the journal's storages, through the members that use them (core/rmt.h, rmt_journal_ops)
MEMBERS = pytest.mark.parametrize("coord", ["host", "pfs"])


# ---------------------------------------------------------------------- operations
_off, _len, _flag = st_.integers(0, 300), st_.integers(1, 120), st_.integers(0, 4)
_o, _r = st_.sampled_from([1, 2]), st_.sampled_from([11, 12, 21, 13])
OPS = st_.one_of(
    st_.tuples(st_.just("add"), _o, _r, _off, _off, _len, _flag),
    st_.tuples(st_.just("mark"), _o, st_.sampled_from([0, 11, 12, 21]), _off, _len),
    st_.tuples(st_.just("write"), _o, _off, _len),
    st_.tuples(st_.just("set_flag"), _o, _r, _off, _len, _flag, _flag),
    st_.tuples(st_.just("trim"), _o, st_.integers(0, 400)),
    st_.tuples(st_.just("grow"), _o, _r, st_.integers(0, 500)),
    st_.tuples(st_.just("drop"), _r),
    st_.tuples(st_.just("register"), _r, _o, st_.integers(0, 1), st_.integers(0, 1)),
    st_.tuples(st_.just("job"), _r, st_.integers(0, 1)),
)


def apply_op(c, op) -> bool:
    """One operation on a core; False when the core refuses it (the state does not allow it)."""
    k = op[0]
    try:
        if k == "add":
            c.add(op[1], op[2], op[3], op[4], op[5], op[6])
        elif k == "mark":
            c.mark(op[1], op[2], op[3], op[3] + op[4])
        elif k == "write":
            c.write(op[1], op[2], op[2] + op[3])
        elif k == "set_flag":
            c.set_flag(op[1], op[2], op[3], op[3] + op[4], op[5], op[6])
        elif k == "trim":
            c.trim(op[1], op[2])
        elif k == "grow":
            c.grow(op[1], op[2], op[3])
        elif k == "drop":
            c.drop(op[1])
        elif k == "register":
            c.register(op[1], op[2], op[3], op[4], f"n{op[1]}")
        elif k == "job":
            c.job(op[1], op[2], '{"r": %d}' % op[1])
    except ParioError as exc:
        assert "refused" in str(exc) and "\n" not in str(exc)
        return False
    return True


def check_invariant(model: J.Model) -> None:
    """A byte has at most one DIRTY entry, and then every other entry there is STALE."""
    for o in model.originals():
        ents = model.entries(o)
        pts = sorted({x for _, off, n, _, _ in ents for x in (off, off + n)})
        for a in pts:
            cov = [e for e in ents if e[1] <= a < e[1] + e[2]]
            dirty = [e for e in cov if e[4] == DIRTY]
            assert len(dirty) <= 1, cov
            if dirty:
                assert all(e[4] == STALE for e in cov if e is not dirty[0]), cov


@settings(max_examples=250, **HYP)
@given(st_.lists(OPS, max_size=40))
def test_core_equals_independent_replay(tmp_path_factory, ops):
    """Random changes through the C core; the journal replayed by the Python reader (CRCs by
    zlib) gives the same table entry for entry, refuses nothing the core accepted, keeps the
    invariant; a checkpoint rewrites it to the same table; reopening replays it again."""
    p = tmp_path_factory.mktemp("j") / "rmt.log"
    c = core(p)
    for op in ops:
        apply_op(c, op)
    model, journal = J.replay(p)
    assert journal.stop_reason == "end" and not model.refused
    assert model.diff(c) == []
    check_invariant(model)
    c.checkpoint()
    m2, j2 = J.replay(p)
    # one record per registration, job and entry
    n_ent = sum(len(model.entries(o)) for o in model.originals())
    assert m2.diff(c) == [] and len(j2.records) == sum(x[2] for x in model.replicas()) + len(model.jobs) + n_ent
    c.close()
    c2 = core(p)
    assert model.diff(c2) == []
    c2.close()


@MEMBERS
@settings(max_examples=150, **HYP)
@given(ops=st_.lists(st_.tuples(st_.booleans(), OPS), max_size=40))
def test_two_processes_interleaved_agree(tmp_path_factory, ops, coord):
    """Two processes' cores on one journal (shared), changes from either in any interleaving:
    each change is decided on the state after everything published before it (the journal
    lock, then catch-up), so both tables equal the independent replay and keep the invariant
    — no change is lost or applied to a stale view (the old SQLite table's compaction read
    rows before its transaction and could delete another process's DIRTY entry)."""
    d = tmp_path_factory.mktemp("j")
    p, s = d / "rmt.log", d / ".sync.lock"
    a = core(p, coord=coord, shared=True, first=True, sync=s)
    b = core(p, coord=coord, shared=True, first=False, sync=s)
    for use_b, op in ops:
        apply_op(b if use_b else a, op)
    model, _ = J.replay(p)
    assert not model.refused and model.diff(a) == [] and model.diff(b) == []
    check_invariant(model)
    a.close()
    b.close()


def serving(model: J.Model, o: int, x: int) -> tuple:
    """Brute force of the routing rule (rmt.h): the copy that serves byte x."""
    cov = [e for e in model.entries(o) if e[1] <= x < e[1] + e[2]]
    cheapest = any(p.route == 1 and p.registered for _, p in model.reps_of(o))
    dirty = [e for e in cov if e[4] == DIRTY]
    if dirty:
        return dirty[0][0], dirty[0][3] - dirty[0][1], 0
    clean = sorted(e for e in cov if e[4] in (CLEAN, FRESH))
    if not clean:
        return 0, 0, 0
    if cheapest:
        return None, None, 1
    return clean[0][0], clean[0][3] - clean[0][1], 0


@settings(max_examples=200, **HYP)
@given(st_.lists(OPS, max_size=30), st_.lists(st_.tuples(st_.integers(0, 450), st_.integers(1, 200)),
                                            min_size=1, max_size=8))
def test_route_equals_brute_force(tmp_path_factory, ops, reqs):
    """route() cuts a request into segments whose copy and shift are, byte for byte, the
    brute-force rule's (DIRTY replica, else the CLEAN replica of least id or, route
    'cheapest', the caller's choice, else the original); None exactly when the original
    serves every byte."""
    p = tmp_path_factory.mktemp("j") / "rmt.log"
    c = core(p)
    for op in ops:
        apply_op(c, op)
    model, _ = J.replay(p)
    for o in (1, 2):
        for x, n in reqs:
            r = c.route(o, x, x + n)
            if r is None:
                segs = [(x, x + n, 0, 0, 0)]
            elif isinstance(r, tuple):
                segs = [(x, x + n, r[0], r[1], 0)]
            else:
                segs = r
            assert segs[0][0] == x and segs[-1][1] == x + n
            assert all(a[1] == b[0] for a, b in zip(segs, segs[1:]))
            for s, t, rr, d, choice in segs:
                for b in {s, (s + t) // 2, t - 1}:
                    want = serving(model, o, b)
                    if want[2]:
                        assert choice == 1
                    else:
                        assert (choice, rr, d) == (0, want[0], want[1]), (b, segs, model.entries(o))
            if r is None:
                assert all(serving(model, o, b)[:2] == (0, 0) and not serving(model, o, b)[2]
                           for b in range(x, x + n, 7))


def test_write_marks_once_and_only_when_needed(tmp_path):
    """A write to a CLEAN replica extent: one MARK record (replica DIRTY, the other replica
    STALE); the same write again: no record; a write to the original where a replica is
    COPYING: that replica STALE."""
    c = core(tmp_path / "rmt.log")
    c.register(11, 1, 0, 0, "a")
    c.register(12, 1, 0, 0, "b")
    c.add(1, 11, 0, 1000, 100, CLEAN)
    c.add(1, 12, 50, 50, 100, CLEAN)
    seq = c.stats()["seq"]
    assert c.write(1, 60, 80) == (11, 1000)          # the CLEAN replica of least id serves
    assert c.stats()["seq"] == seq + 1
    model, _ = J.replay(tmp_path / "rmt.log")
    assert model.diff(c) == []
    flags = {(r, off): f for r, off, n, ro, f in c.entries(1)}
    assert flags[(11, 60)] == DIRTY and flags[(12, 60)] == STALE
    assert c.write(1, 65, 75) == (11, 1000)          # already DIRTY: nothing to record
    assert c.stats()["seq"] == seq + 1
    c.add(1, 12, 200, 200, 50, COPYING)
    assert c.write(1, 210, 220) is None              # the original serves ...
    assert [f for r, off, n, ro, f in c.entries(1) if off <= 210 < off + n] == [STALE]   # ... COPYING is now STALE
    c.set_flag(1, 12, 200, 250, COPYING, CLEAN)      # the replicator's publication: not for the written part
    assert [(off, n, f) for r, off, n, ro, f in c.entries(1) if r == 12 and off >= 200] == \
        [(200, 10, CLEAN), (210, 10, STALE), (220, 30, CLEAN)]
    c.close()


def test_replicas_choice_and_covers(tmp_path):
    """Route 'cheapest' (a hybrid replica registered): the caller chooses among the copies
    covers() lists; a DIRTY copy is never a choice."""
    c = core(tmp_path / "rmt.log")
    c.register(11, 1, 1, 1, "full")
    c.add(1, 11, 0, 0, 1000, CLEAN)
    assert c.route(1, 0, 100) == [(0, 100, 0, 0, 1)]
    assert c.covers(1, 10) == [(11, 0, CLEAN)]
    c.mark(1, 11, 0, 50)
    assert c.route(1, 0, 100) == [(0, 50, 11, 0, 0), (50, 100, 0, 0, 1)]
    c.close()


# ---------------------------------------------------------------------- journal file
def _record(seq, typ, u, a16=0, data=b""):
    """An independent encoder of one record (docs/store.md)."""
    pad = (len(data) + 7) & ~7
    size = 24 + 8 * len(u) + pad
    body = struct.pack("<QHHI", seq, typ, a16, len(data) if typ in (J.REGISTER, J.JOB) else 0)
    body += struct.pack(f"<{len(u)}Q", *u) + data + bytes(pad - len(data))
    return struct.pack("<II", size, zlib.crc32(body)) + body


def test_published_records_survive_and_a_torn_tail_is_ignored(tmp_path):
    """Records are in the shared mapping as soon as they are published (no close, no sync:
    what a SIGKILL leaves); a torn record after them (a crash mid-append) is not replayed,
    and the next first opener cuts the journal there."""
    p = tmp_path / "rmt.log"
    c = core(p)
    c.register(11, 1, 0, 0, "a")
    c.add(1, 11, 0, 0, 4096, CLEAN)
    c.mark(1, 11, 100, 200)
    end = c.stats()["end"]
    del c                                   # no close: the mapping's pages are the page cache
    raw = bytearray(p.read_bytes())
    rec = _record(4, J.MARK, (1, 0, 300, 400))
    raw[end:end + 20] = rec[:20]           # the first 20 bytes of a record: torn
    p.write_bytes(bytes(raw))
    c = core(p)
    assert c.stats()["seq"] == 3 and c.stats()["end"] == end
    assert [f for *_, f in c.entries(1)] == [CLEAN, DIRTY, CLEAN]
    assert p.read_bytes()[end:end + 24] == bytes(24)      # the tail was cut
    c.add(1, 11, 5000, 5000, 10, CLEAN)                   # and new records follow on
    c.close()
    m, j = J.replay(p)
    assert m.diff(core(p)) == [] and len(j.records) == 4


def test_a_bad_crc_ends_the_journal_there(tmp_path):
    """Power loss can keep later pages and lose earlier ones: replay stops at the first
    record whose CRC does not match; nothing after it is applied."""
    p = tmp_path / "rmt.log"
    c = core(p)
    c.register(11, 1, 0, 0, "a")
    c.add(1, 11, 0, 0, 100, CLEAN)
    pos = c.stats()["end"]
    c.mark(1, 11, 10, 20)
    c.mark(1, 0, 30, 40)
    c.close()
    raw = bytearray(p.read_bytes())
    raw[pos + 40] ^= 0xFF                   # inside the first MARK
    p.write_bytes(bytes(raw))
    j = J.read(p, limit=0)
    assert "bad crc" in j.stop_reason and len(j.records) == 2
    c = core(p)
    assert c.stats()["seq"] == 2 and [f for *_, f in c.entries(1)] == [CLEAN]
    c.close()


def test_damaged_journal_is_a_one_line_error(tmp_path):
    p = tmp_path / "rmt.log"
    p.write_bytes(b"this is not a journal" * 400)
    with pytest.raises(ParioError, match="damaged or not an RMT journal") as ei:
        core(p)
    assert "\n" not in str(ei.value)
    p.write_bytes(b"PARIORMT")
    with pytest.raises(ParioError):
        core(p)


@MEMBERS
def test_shared_cores_follow_each_other_incrementally(tmp_path, coord):
    """Two processes' views (two cores on one journal, shared): each sees the other's changes
    at its next lookup by applying the new records; with following switched off (the
    negative control) the second keeps routing by what it saw before."""
    p, s = tmp_path / "rmt.log", tmp_path / ".sync.lock"
    a = core(p, coord=coord, shared=True, first=True, sync=s)
    b = core(p, coord=coord, shared=True, first=False, sync=s)
    a.register(11, 1, 0, 0, "a")
    a.add(1, 11, 0, 0, 100, CLEAN)
    assert b.route(1, 0, 10) == (11, 0)
    b.mark(1, 0, 0, 10)                            # b writes the original: a's replica STALE there
    assert a.route(1, 0, 10) is None
    a.set_flag(1, 11, 0, 100, STALE, CLEAN)
    b.follow = False
    assert b.route(1, 0, 10) is None               # stale view (the control)
    b.follow = True
    assert b.route(1, 0, 10) == (11, 0)
    m, _ = J.replay(p)
    assert m.diff(a) == [] and m.diff(b) == []
    a.close()
    b.close()


@MEMBERS
def test_journal_lock_and_range_locks_wait_with_a_limit(tmp_path, coord):
    """A change waits for another process's transaction at most the timeout (one-line error);
    range locks exclude exclusive against shared holders only where the ranges overlap."""
    p, s = tmp_path / "rmt.log", tmp_path / ".sync.lock"
    a = core(p, coord=coord, shared=True, first=True, sync=s)
    b = core(p, coord=coord, shared=True, first=False, sync=s, timeout=0.2)
    a.begin()
    with pytest.raises(ParioError, match="timed out after 0.2 s") as ei:
        b.add(1, 11, 0, 0, 10, CLEAN)
    assert "\n" not in str(ei.value)
    a.commit()
    b.add(1, 11, 0, 0, 10, CLEAN)
    a.lock(1, 0, 8192, False)                       # a writer holds [0, 8 KiB) of file 1
    b.lock(1, 8192, 16384, True)                    # a flush of the next blocks: no conflict
    b.unlock(1, 8192, 16384)
    with pytest.raises(ParioError, match="timed out"):
        b.lock(1, 4096, 5000, True)                 # the same block: waits, then gives up
    b.lock(2, 0, 8192, True)                        # another file: no conflict
    a.unlock(1, 0, 8192)
    b.lock(1, 4096, 5000, True)
    a.close()
    b.close()


@MEMBERS
def test_a_process_killed_holding_the_journal_lock_does_not_block_the_others(tmp_path, coord):
    """SIGKILL while holding the journal lock (in a transaction, a record appended but not
    published): the next process gets the lock at once (robust mutex), the unpublished
    record is not applied and is overwritten."""
    import signal

    p, s = tmp_path / "rmt.log", tmp_path / ".sync.lock"
    a = core(p, coord=coord, shared=True, first=True, sync=s)
    a.register(11, 1, 0, 0, "a")
    a.add(1, 11, 0, 0, 100, CLEAN)
    pid = os.fork()
    if pid == 0:                                    # the child: its own view, then dies mid-transaction
        try:
            c = core(p, coord=coord, shared=True, first=False, sync=s)
            c.begin()
            c.mark(1, 11, 0, 10)
            os.kill(os.getpid(), signal.SIGKILL)
        finally:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status)
    b = core(p, coord=coord, shared=True, first=False, sync=s, timeout=5)
    b.mark(1, 0, 50, 60)                           # takes over the lock, appends over the dead record
    # the mapped journal's robust mutex tells a dead holder; a byte-range lock is just released
    assert b.stats()["dead_holders"] == (1 if coord == "host" else 0)
    assert [f for *_, f in b.entries(1)] == [CLEAN, STALE, CLEAN]
    m, _ = J.replay(p)
    assert m.diff(a) == [] and m.diff(b) == []
    a.close()
    b.close()


@MEMBERS
def test_checkpoint_keeps_the_state_and_shrinks_the_journal(tmp_path, coord):
    p = tmp_path / "rmt.log"
    c = core(p, coord=coord)
    c.register(11, 1, 0, 0, "a")
    c.add(1, 11, 0, 0, 1 << 20, CLEAN)
    for k in range(2000):
        x = (k * 7919) % ((1 << 20) - 64)
        c.write(1, x, x + 64)
        c.set_flag(1, 11, x, x + 64, DIRTY, CLEAN)
    before = c.stats()["end"]
    model, _ = J.replay(p)
    c.checkpoint()
    assert c.stats()["end"] - 4096 < (before - 4096) / 100    # two records (REGISTER, ADD) of 4,000
    assert model.diff(c) == []
    c.close()
    assert J.replay(p)[0].diff(core(p, coord=coord)) == []


def test_old_sqlite_rmt_is_migrated(tmp_path):
    """A store written before the journal (rmt.db) opens with the same entries, flags,
    registrations and jobs; the old files are gone."""
    from pario.store import Store, init_store

    root = tmp_path / "s"
    init_store(root, "ceda-hdd8")
    with Store(root) as st:
        st.create("f", "fixed:64k")
        st.backend.create(".replica/f/r1", st.layout("fixed:64k"))
        with st.open("f") as f:
            f.write(0, b"\1" * 1000)
    os.unlink(root / "rmt.log")
    con = sqlite3.connect(root / "rmt.db")
    con.executescript("""
      CREATE TABLE rmt(id INTEGER PRIMARY KEY, o_file TEXT, o_offset INTEGER, r_file TEXT, r_offset INTEGER,
                       length INTEGER, r_flag INTEGER);
      CREATE TABLE replicas(r_file TEXT PRIMARY KEY, o_file TEXT, name TEXT, mode TEXT, route TEXT);
      CREATE TABLE jobs(r_file TEXT PRIMARY KEY, spec TEXT, done INTEGER);
      INSERT INTO replicas VALUES ('.replica/f/r1', 'f', 'r1', 'partial', 'replica');
      INSERT INTO rmt VALUES (1, 'f', 0, '.replica/f/r1', 0, 100, 0), (2, 'f', 100, '.replica/f/r1', 100, 50, 1);
      INSERT INTO jobs VALUES ('.replica/f/r1', '{"x": 1}', 1);
    """)
    con.commit()
    con.close()
    with Store(root, recover=False) as st:
        assert [(o, n, f) for _, _, o, _, _, n, f in st.rmt.all_rows()] == [(0, 100, CLEAN), (100, 50, DIRTY)]
        assert st.rmt.replicas("f")[0]["name"] == "r1" and st.rmt.jobs(False)[0][1] == {"x": 1}
    assert not (root / "rmt.db").exists() and (root / "rmt.log").exists()
