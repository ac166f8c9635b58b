"""pario.mpi on a pario store: CEDA redirection through replicas under mpiexec -n 4, and crash safety."""

from __future__ import annotations

import numpy as np
import pytest

from test_mpi import _check, run_mpi

store_mod = pytest.importorskip("pario.store")
REC, RECORDS = 4096, 64


def content(gen: int) -> np.ndarray:
    return np.random.default_rng(1000 * gen + 5).integers(0, 256, REC * RECORDS, dtype=np.uint8)


def _prepare(tmp_path):
    """A store with "data" (fixed 64 KiB striping on 8 HDD servers) and a CEDA partial replica of every odd record."""
    from pario.layout import ExtentMap
    from pario.store import Store, init_store
    from pario.store.replicator import ReplicaSpec, replicate

    root = tmp_path / "store"
    init_store(root, "ceda-hdd8")
    src = tmp_path / "data.bin"
    src.write_bytes(content(0).tobytes())
    with Store(root) as st:
        st.put(src, "data", "fixed:64K")
        odd = np.arange(1, RECORDS, 2)
        n = len(odd)
        lay = ExtentMap(offset=odd * REC, length=np.full(n, REC), server=odd % 8,
                        local=(odd // 8) * REC, datafile=np.ones(n, dtype=np.int64))
        replicate(st, [ReplicaSpec("data", "r1", lay)])
        assert len(st.rmt.entries("data").flag) > 0
    return root


def _raw_original(root):
    """Bytes of the original file read without the redirector."""
    from pario.store import Store

    with Store(root, recover=False) as st:
        h = st.backend.open("data")
        try:
            return np.frombuffer(st.backend.read_at(h, 0, REC * RECORDS), np.uint8)
        finally:
            st.backend.close(h)


def _replicas_match_original(root):
    """For every CLEAN RMT entry the replica bytes equal the original bytes (a minimal fsck)."""
    from pario.store import Store

    with Store(root) as st:
        ent = st.rmt.entries("data")
        h = st.backend.open("data")
        bad = 0
        for j in range(ent.n):
            rh = st.backend.open(ent.r_file[j])
            a = st.backend.read_at(h, int(ent.o_off[j]), int(ent.length[j]))
            b = st.backend.read_at(rh, int(ent.r_off[j]), int(ent.length[j]))
            st.backend.close(rh)
            bad += (a != b) or int(ent.flag[j]) != 0
        st.backend.close(h)
        return ent.n, bad


def test_redirected_reads_writes_and_flush(tmp_path):
    root = _prepare(tmp_path)
    cp = run_mpi("store_redirect.py", root, "run")
    _check(cp)
    dirty = [l for l in cp.stdout.splitlines() if l.startswith("dirty")]
    assert dirty and int(dirty[0].split()[1]) > 0, cp.stdout   # writes went to replicas (marked dirty)
    assert "closed" in cp.stdout
    # after close: dirty replica data is in the original, every entry clean and equal to the original
    assert np.array_equal(_raw_original(root), content(1))
    n, bad = _replicas_match_original(root)
    assert n > 0 and bad == 0


def test_store_rank_killed_mid_collective_leaves_consistent_rmt(tmp_path):
    root = _prepare(tmp_path)
    cp = run_mpi("store_redirect.py", root, "crash", timeout=120)
    assert cp.returncode != 0
    # reopening recovers (flushes dirty entries); then every entry is clean and matches the original
    n, bad = _replicas_match_original(root)
    assert n > 0 and bad == 0
    # every record is either wholly old or wholly new: no torn or garbage record
    raw = _raw_original(root).reshape(RECORDS, REC)
    old, new = content(0).reshape(RECORDS, REC), content(1).reshape(RECORDS, REC)
    for k in range(RECORDS):
        assert np.array_equal(raw[k], old[k]) or np.array_equal(raw[k], new[k]), f"record {k} torn"


def test_set_size_voids_an_earlier_extension_of_another_rank(tmp_path):
    """A rank extends the file, then a collective set_size shrinks it (rank 0 truncates): the
    extending rank's handle learns the size, so its close does not commit its old end."""
    root = _prepare(tmp_path)
    cp = run_mpi("store_redirect.py", root, "resize")
    _check(cp)
    assert [ln for ln in cp.stdout.splitlines() if ln.startswith("size")] == [f"size {REC // 2}"]
