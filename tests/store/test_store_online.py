"""Online replication beside readers and writers, recovery after a simulated power loss,
and what fsck and ``store get`` say about lost metadata and lost coverage."""

import json
import os
import signal
import struct
import subprocess
import sys
import time
import zlib

import numpy as np
import pytest
from helpers import PARIO

from pario import ParioError
from pario.layout import ExtentMap, Striped
from pario.plan.base import Plan
from pario.store import Store, init_store
from pario.store import rmt_journal as J
from pario.store.fsck import fsck
from pario.store.replicator import Replicator, ReplicaSpec
from pario.system import load_system

MiB = 1 << 20


def data(seed: int, n: int) -> bytes:
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()


def _store_with(root, files: dict) -> None:
    init_store(root, "ceda-hdd8")
    with Store(root) as st:
        for name, b in files.items():
            st.create(name, "fixed:64k")
            with st.open(name) as f:
                f.write(0, b)


def _pario(*args, **kw):
    return subprocess.Popen([*PARIO, *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def test_replicate_runs_online_beside_get_and_writers(tmp_path):
    """`pario replicate` in its own process, on a store other processes use: while it is
    stopped in the middle of the copy, `store get` of another file works; while it runs,
    writes to the very file being replicated go on (replicated and not-replicated ranges);
    afterwards every byte is the newest, the replica is complete and fsck is clean."""
    root = tmp_path / "s"
    size = 64 * MiB
    f0, g0 = data(1, size), data(2, MiB)
    _store_with(root, {"f": f0, "g": g0})
    k = 512
    offs = np.arange(k, dtype=np.int64) * (size // k)
    em = ExtentMap(offs, np.full(k, 64 << 10), np.arange(k) % 8, (np.arange(k) // 8) * (64 << 10),
                   np.ones(k, dtype=np.int64))
    plan = tmp_path / "plan.json"
    Plan("ceda", replicas={"f": [{"name": "r1", "layout": em}]}, system_name="ceda-hdd8").save(
        plan, load_system("ceda-hdd8"))
    proc = _pario("replicate", plan, "--store", root, "--chunk", "64k", "--json")
    try:
        st = Store(root, shared=True, lock_timeout=30)
        t0 = time.monotonic()
        while not st.rmt.jobs(pending_only=True):            # the replicator has started copying
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() - t0 < 60
            time.sleep(0.005)
        os.kill(proc.pid, signal.SIGSTOP)                     # frozen mid-copy, maybe holding a range of f
        try:
            out = tmp_path / "g.out"
            assert st.get("g", out) == MiB and out.read_bytes() == g0
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        ref = bytearray(f0)
        rng = np.random.default_rng(3)
        f = st.open("f")
        writes = 0
        while proc.poll() is None or writes < 64:
            x = int(rng.integers(0, size - 20_000))
            if writes % 2:                                    # into a replicated extent
                x = int(offs[rng.integers(0, k)]) + int(rng.integers(0, 40_000))
            b = data(100 + writes, int(rng.integers(1, 20_000)))
            f.write(x, b)
            ref[x:x + len(b)] = b
            writes += 1
        f.close()
        rc = proc.wait(timeout=120)
        stdout, stderr = proc.communicate()
        assert rc == 0, stderr
        rep = json.loads(stdout)
        assert rep["copied_bytes"] == k * (64 << 10)
        with st.open("f") as f:
            assert f.read(0, size) == bytes(ref)
        st.close()
    finally:
        if proc.poll() is None:
            proc.kill()
    with Store(root) as st:
        r = fsck(st)
        assert r["ok"], r["problems"]
        assert r["pending_jobs"] == [] and sum(n for _, n in st.rmt.covered(".replica/f/r1")) == k * (64 << 10)
        with st.open("f") as f:
            assert f.read(0, size) == bytes(ref)


def test_replicated_extents_are_fresh_until_their_bytes_are_durable(tmp_path):
    """The replicator publishes what it copied at once, FRESH (read like CLEAN, as cp leaves
    its copy in the page cache); an fsync of the original's file (or the last close) makes
    the replica durable and the entries CLEAN; a write into a FRESH extent goes to the
    replica like into a CLEAN one."""
    from pario.store.rmt import CLEAN, DIRTY, FRESH

    root = tmp_path / "s"
    f0 = data(5, 4 * MiB)
    _store_with(root, {"f": f0})
    em = ExtentMap(np.array([0, 2 * MiB]), np.array([MiB, MiB]), np.array([2, 3]), np.array([0, 0]),
                   np.array([1, 1]))
    with Store(root) as st:
        Replicator(st, [ReplicaSpec("f", "r1", em)], chunk=256 << 10).run()
        fid, rfid = st.rmt.fid("f"), st.rmt.fid(".replica/f/r1")
        assert {e[4] for e in st.rmt.core.entries(fid)} == {FRESH}
        assert st.rmt.core.entries(fid, True) == []            # nothing to synchronise
        with st.open("f") as f:
            assert f.served_by(10, 20) == [(10, 20, ".replica/f/r1")]
            f.write(100, b"new!")
            assert (rfid, 100, 4, 100, DIRTY) in st.rmt.core.entries(fid)
            f.fsync()
            flags = {e[4] for e in st.rmt.core.entries(fid)}
            assert FRESH not in flags and flags <= {CLEAN, DIRTY}
        assert fsck(st)["ok"]
    with Store(root) as st:
        assert {e[4] for e in st.rmt.core.entries(st.rmt.fid("f"))} == {CLEAN}
        assert st.rmt.stats()["prev_clean"] == 1


def _lose_journal_tail(root, settle: bool = True) -> None:
    """A process replicates (and, with ``settle``, makes the replica durable: CLEAN), syncs
    the journal, writes into the replica extent (its MARK record is not synced yet) and
    dies; then the journal loses everything after the last sync (what a power failure may
    do to unsynced pages) while the data files keep the bytes (the worst case)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            em = ExtentMap(np.array([100_000]), np.array([300_000]), np.array([4]), np.array([0]), np.array([1]))
            st = Store(root)
            Replicator(st, [ReplicaSpec("f", "r1", em)]).run()
            if settle:
                st.settle_fresh()
            st.rmt.sync()
            os.write(w, str(st.rmt.stats()["end"]).encode())
            f = st.open("f")
            f.write(150_000, b"W" * 1000)               # → replica DIRTY: a record after the sync
            os.kill(os.getpid(), signal.SIGKILL)
        finally:
            os._exit(1)
    os.close(w)
    synced_end = int(os.read(r, 100))
    os.close(r)
    os.waitpid(pid, 0)
    raw = bytearray((root / "rmt.log").read_bytes())
    assert J.read(root / "rmt.log").records[-1].type == J.MARK
    raw[synced_end:] = bytes(len(raw) - synced_end)
    (root / "rmt.log").write_bytes(bytes(raw))


def test_power_loss_recovery_verifies_clean_entries(tmp_path, monkeypatch):
    """After a simulated power loss (a write's MARK record lost, its bytes in the replica):
    the next opener in another boot compares every CLEAN entry and lets the copy reads came
    from (CEDA: the replica) win where the two differ — the unacknowledged write survives
    whole, the original gets it, fsck is clean.  The control: the same journal opened as if
    in the same boot (where the page cache cannot lose records, so nothing is compared)
    leaves a CLEAN replica that differs from its original, and fsck says so."""
    for boot, ok in (("another-boot", True), (None, False)):
        root = tmp_path / f"s-{ok}"
        f0 = data(7, 2 * MiB)
        _store_with(root, {"f": f0})
        monkeypatch.delenv("PARIO_BOOT_ID", raising=False)
        _lose_journal_tail(root)                            # in this boot
        if boot:
            monkeypatch.setenv("PARIO_BOOT_ID", boot)
        else:
            monkeypatch.delenv("PARIO_BOOT_ID", raising=False)
        with Store(root) as st:
            r = fsck(st)
            if ok:
                assert r["ok"], r["problems"]
                with st.open("f") as f:
                    assert f.read(150_000, 1000) == b"W" * 1000
            else:
                assert not r["ok"] and any("differs" in p for p in r["problems"])
        if ok:
            with Store(root, recover=False) as st:           # the replica's bytes reached the original
                h = st.backend.open("f")
                assert st.backend.read_at(h, 150_000, 1000) == b"W" * 1000
                st.backend.close(h)


def test_power_loss_refreshes_fresh_replicas_from_the_original(tmp_path, monkeypatch):
    """A replica the replicator copied but nobody made durable (FRESH), then a power loss:
    its entries are refreshed from the original (the unacknowledged write into it is lost,
    as POSIX allows), the original keeps its bytes, fsck is clean."""
    root = tmp_path / "s"
    f0 = data(7, 2 * MiB)
    _store_with(root, {"f": f0})
    monkeypatch.delenv("PARIO_BOOT_ID", raising=False)
    _lose_journal_tail(root, settle=False)
    monkeypatch.setenv("PARIO_BOOT_ID", "another-boot")
    with Store(root) as st:
        r = fsck(st)
        assert r["ok"], r["problems"]
        with st.open("f") as f:
            assert f.read(0, 2 * MiB) == f0


def _killed_in_verification(root, boot: str) -> None:
    """A first opener in boot ``boot`` that dies at the start of the byte-for-byte
    verification (after the core stamped ``boot`` into the journal header)."""
    code = ("import os, sys\n"
            "from pario.store import Store\n"
            "Store.verify_clean = lambda self, *a, **k: os._exit(9)\n"
            "Store(sys.argv[1])\n")
    env = {**os.environ, "PARIO_BOOT_ID": boot}
    cp = subprocess.run([sys.executable, "-c", code, str(root)], env=env, capture_output=True, text=True)
    assert cp.returncode == 9, cp.stderr


@pytest.mark.parametrize("clear_flag", [False, True])
def test_power_loss_verification_killed_midway_is_redone(tmp_path, monkeypatch, clear_flag):
    """Issue 28: the first opener after an unclean end in another boot stamps its boot id
    into the journal header before it verifies.  Killed in the verification, the next
    opener (in the same, new boot) must still verify: the decision is the header's
    ``verify`` flag (read here by the independent journal reader), set before the boot id
    changes and cleared only when the verification is done.  Every other opener meanwhile
    refuses the store with one line.  Negative control (``clear_flag``): the flag zeroed
    by hand, as the journal looked before the flag existed — the verification is skipped
    and fsck finds the CLEAN replica that differs from its original."""
    root = tmp_path / "s"
    _store_with(root, {"f": data(7, 2 * MiB)})
    monkeypatch.delenv("PARIO_BOOT_ID", raising=False)
    _lose_journal_tail(root)
    assert J.read(root / "rmt.log").header["verify"] == 0
    _killed_in_verification(root, "boot-2")
    hdr = J.read(root / "rmt.log").header
    assert hdr["boot_id"] == "boot-2" and hdr["clean"] == 0 and hdr["verify"] == 1
    monkeypatch.setenv("PARIO_BOOT_ID", "boot-2")
    if clear_flag:
        raw = bytearray((root / "rmt.log").read_bytes())
        struct.pack_into("<I", raw, 52, 0)
        (root / "rmt.log").write_bytes(bytes(raw))
    else:
        # a shared opener that is not first (another holds the store) refuses it
        from pario.store.locks import StoreLock

        hold = StoreLock(root / ".lock")
        assert hold.try_shared()
        try:
            with pytest.raises(ParioError, match="verified byte for byte") as ei:
                Store(root, shared=True, lock_timeout=2)
            assert "\n" not in str(ei.value)
            with Store(root, shared=True, lock_timeout=2, unverified_ok=True) as st:   # what fsck does
                r = fsck(st)
                assert not r["ok"] and r["verification"] == "pending"
                assert any("not verified yet" in p for p in r["problems"])
        finally:
            hold.close()
        assert J.read(root / "rmt.log").header["verify"] == 1
    with Store(root) as st:
        r = fsck(st)
        if clear_flag:
            assert not r["ok"] and any("differs" in p for p in r["problems"])
            return
        assert r["ok"], r["problems"]
        # the replica's one CLEAN entry [100000, 400000), compared as one chunk, differed
        assert r["verification"] == {"differed": [{"file": "f", "offset": 100_000, "bytes": 300_000}]}
        with st.open("f") as f:
            assert f.read(150_000, 1000) == b"W" * 1000
    assert J.read(root / "rmt.log").header["verify"] == 0
    with Store(root, recover=False) as st:           # the replica's bytes reached the original
        h = st.backend.open("f")
        assert st.backend.read_at(h, 150_000, 1000) == b"W" * 1000
        st.backend.close(h)


def test_a_refused_opener_that_closes_last_leaves_the_store_unverified(tmp_path, monkeypatch):
    """A Python opener that did not verify (not first: another process held the store) and
    closes last must leave the store as it is: a last close that flushed, made the FRESH
    replica entries CLEAN (settle) and marked the journal clean would let the verification
    trust a replica whose copy never reached the disk.  Here the copy is "lost" (the
    replica's bytes zeroed, as after a power failure before writeback); afterwards the
    verification refreshes the replica from the original, which keeps every byte."""
    root = tmp_path / "s"
    f0 = data(7, 2 * MiB)
    _store_with(root, {"f": f0})
    monkeypatch.delenv("PARIO_BOOT_ID", raising=False)
    _lose_journal_tail(root, settle=False)                          # FRESH entries [100000, 400000)
    _killed_in_verification(root, "boot-2")
    monkeypatch.setenv("PARIO_BOOT_ID", "boot-2")
    with Store(root, recover=False, unverified_ok=True) as st:     # the copy never reached the disk
        h = st.backend.open(".replica/f/r1")
        st.backend.write_at(h, 100_000, bytes(300_000))            # the extent, at its logical offsets
        st.backend.close(h)
    from pario.store.locks import StoreLock

    hold = StoreLock(root / ".lock")
    assert hold.try_shared()
    st = Store(root, shared=True, lock_timeout=2, unverified_ok=True)
    hold.close()                                                   # ... so this one closes last
    end = J.read(root / "rmt.log").header["end"]
    st.close()
    hdr = J.read(root / "rmt.log").header
    assert hdr["verify"] == 1 and hdr["clean"] == 0 and hdr["end"] == end     # nothing appended, nothing marked
    with Store(root) as st:
        assert st.verified_ranges == []
        assert fsck(st)["ok"]
        with st.open("f") as f:
            assert f.read(0, 2 * MiB) == f0


def test_lost_size_is_reported_and_get_refuses(tmp_path):
    """Bytes past a clean file's recorded size (the metadata lost a committed size, e.g. its
    write-ahead log deleted): fsck reports it, `store get` refuses it with one line."""
    root = tmp_path / "s"
    _store_with(root, {"f": data(8, 300_000)})
    with Store(root) as st:
        st.backend.meta.set_size("f", 100_000, 0)            # what a lost WAL leaves behind
    with Store(root) as st:
        r = fsck(st)
        assert not r["ok"] and any("past its recorded size 100000" in p for p in r["problems"])
        with pytest.raises(ParioError, match="past its recorded size") as ei:
            st.get("f", tmp_path / "out")
        assert "\n" not in str(ei.value)
    cp = subprocess.run([*PARIO, "store", "get", "f", str(tmp_path / "o2"),
                         "--store", str(root)], capture_output=True, text=True)
    assert cp.returncode == 2 and cp.stderr.startswith("pario: error:") and cp.stderr.count("\n") == 1


def _rewrite(path, keep) -> None:
    """Rewrite the journal with the records ``keep(record)`` returns (None: drop), renumbered
    and with fresh CRCs (an independent encoder, docs/store.md)."""
    j = J.read(path)
    raw = bytearray(path.read_bytes()[:J.HDR_SIZE])
    out = bytearray()
    seq = 0
    for rec in j.records:
        rec = keep(rec)
        if rec is None:
            continue
        seq += 1
        body = struct.pack("<QHHI", seq, rec.type, rec.a16, len(rec.data) if rec.type in (J.REGISTER, J.JOB) else 0)
        pad = (len(rec.data) + 7) & ~7
        body += struct.pack(f"<{len(rec.u)}Q", *rec.u) + rec.data + bytes(pad - len(rec.data))
        out += struct.pack("<II", 8 + len(body), zlib.crc32(body)) + body
    end = J.HDR_SIZE + len(out)
    struct.pack_into("<QQ", raw, 24, end, seq)
    path.write_bytes(bytes(raw + out + bytes(4096)))


@pytest.mark.parametrize("how", ["drop", "shrink", "none"])
def test_fsck_finds_coverage_lost_from_the_journal(tmp_path, how):
    """Coverage a finished replicator job copied, lost from the journal (an ADD record dropped
    or shortened, the journal otherwise valid): fsck fails, against the job's own record of
    the layout and size; the same rewrite keeping everything (the control) stays clean."""
    root = tmp_path / "s"
    _store_with(root, {"f": data(9, 2 * MiB)})
    em = ExtentMap(np.array([0, MiB]), np.array([200_000, 300_000]), np.array([1, 2]), np.array([0, 0]),
                   np.array([1, 1]))
    with Store(root) as st:
        Replicator(st, [ReplicaSpec("f", "r1", em), ReplicaSpec("f", "h", Striped.fixed(MiB, range(8)))]).run()
        assert fsck(st)["ok"]
    adds = [r for r in J.read(root / "rmt.log").records if r.type == J.ADD]
    victim = adds[len(adds) // 2].seq

    def keep(rec):
        if how == "none" or rec.seq != victim:
            return rec
        if how == "drop":
            return None
        u = list(rec.u)
        u[4] = max(1, u[4] // 2)
        rec.u = tuple(u)
        return rec
    _rewrite(root / "rmt.log", keep)
    with Store(root) as st:
        r = fsck(st)
    if how == "none":
        assert r["ok"], r["problems"]
    else:
        assert not r["ok"] and any("lost coverage" in p for p in r["problems"]), r["problems"]
