"""The coordination member ``rados`` (docs/multinode.md, "rados"; store/coord/rados.c): a store
on the rados data plane whose metadata (Ceph's SQLite VFS), RMT journal (an object with
version-fenced writes) and locks (leased cls_lock locks) live in RADOS, so that any client of
the cluster needs only the store's store.json.  Without the rados plane it is refused with one
line before anything is written.  The cluster tests (marker ``ceph``) check bytes against the
bytes written, the catalog against the metadata, locks between processes, a dead holder's
lease, and a reader following another process's replica."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
import time

import pytest

from ceph_fixture import ceph_cluster  # noqa: F401  (the fixture)

from helpers import PARIO

from pario import ParioError
from pario.store import Store, init_store
from pario.store.locks import StoreLock, check_coord, coord_members, shared_record
from pario.store.rmt_journal import HDR_SIZE, MAGIC

LEASE = 2.0      # PARIO_RADOS_LEASE of these tests' processes (seconds)


@pytest.fixture(autouse=True)
def _short_lease(monkeypatch):
    monkeypatch.setenv("PARIO_RADOS_LEASE", str(LEASE))


def _pario(*args):
    return subprocess.run([*PARIO, *map(str, args)], capture_output=True, text=True, timeout=300)


def _one_line_error(r, *words):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("pario: error: "), r.stderr
    assert "Traceback" not in r.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])


def test_rados_without_the_rados_plane_is_refused(tmp_path):
    d = tmp_path / "s"
    r = _pario("store", "init", d, "--system", "nominal", "--coord", "rados")
    _one_line_error(r, "--coord rados", "rados data plane")
    assert not d.exists()                                   # nothing written


def test_check_coord():
    assert coord_members() == ("host", "pfs", "rados")
    check_coord("host")
    check_coord("pfs")
    check_coord("rados", "rados")
    with pytest.raises(ParioError, match="rados data plane"):
        check_coord("rados")                                # pario run's stores: the local plane
    with pytest.raises(ParioError, match="unknown coordination 'nfs'"):
        check_coord("nfs", "rados")


def test_rados_member_named_by_hand_on_a_local_store_is_one_line(tmp_path):
    d = tmp_path / "s"
    init_store(d, "ceda-hdd8")
    cfg = json.loads((d / "store.json").read_text())
    cfg["coord"] = "rados"
    (d / "store.json").write_text(json.dumps(cfg))
    _one_line_error(_pario("store", "ls", "--store", d), "coordination 'rados'", "rados data plane")


# ------------------------------------------------------------------ on a cluster
def _rados_store(ceph_cluster, path):
    return init_store(path, None, backend="rados", cluster=ceph_cluster.dir, coord="rados")


def _child(code: str, *args, boot: str | None = None) -> subprocess.Popen:
    """A Python process running ``code`` (stdout line-buffered: the test waits for its lines);
    ``boot``: it looks like a process of another machine (PARIO_BOOT_ID)."""
    env = {**os.environ, "PARIO_RADOS_LEASE": str(LEASE), "PYTHONUNBUFFERED": "1"}
    if boot:
        env["PARIO_BOOT_ID"] = boot
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *map(str, args)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def _expect(p: subprocess.Popen, word: str) -> None:
    line = p.stdout.readline()
    assert word in line, line + p.stdout.read() if p.poll() is not None else line


@pytest.mark.ceph
def test_a_store_in_rados_holds_nothing_in_its_directory(ceph_cluster, tmp_path):
    """put / get / fsck on a rados-coordinated store: the bytes come back; the directory holds
    store.json alone (metadata, journal, catalog and locks are objects); the catalog object
    names the file with the id the metadata gave it."""
    root = _rados_store(ceph_cluster, tmp_path / "s")
    data = os.urandom(3 * 65536 + 1234)
    with Store(root) as st:
        st.create("f", "fixed:64k")
        with st.open("f") as f:
            f.write(0, data)
        fid = st.backend.meta.get("f")[0]
    assert sorted(p.name for p in root.iterdir()) == ["store.json"]
    with Store(root) as st, st.open("f") as f:
        assert f.read(0, len(data)) == data
    lines = [json.loads(x) for x in shared_record(root, "catalog.log").decode().splitlines()]
    assert [(r["op"], r["id"], r["name"]) for r in lines] == [("create", fid, "f")]
    journal = shared_record(root, "rmt.log")
    assert journal[:len(MAGIC)] == MAGIC and len(journal) >= HDR_SIZE      # the journal object
    r = _pario("store", "fsck", "--store", root)
    assert r.returncode == 0 and r.stdout.startswith("clean:"), r.stdout + r.stderr


@pytest.mark.ceph
def test_another_client_needs_only_store_json(ceph_cluster, tmp_path):
    """A copy of store.json in an empty directory (another node's view) is the same store:
    it lists and reads what the first wrote, and its writes are read through the first."""
    root = _rados_store(ceph_cluster, tmp_path / "a")
    other = tmp_path / "b"
    other.mkdir()
    (other / "store.json").write_text((root / "store.json").read_text())
    a, b = os.urandom(200_000), os.urandom(150_000)
    with Store(root) as st:
        st.create("x", "fixed:64k")
        with st.open("x") as f:
            f.write(0, a)
    with Store(other) as st:
        assert st.files() == ["x"]
        with st.open("x") as f:
            assert f.read(0, len(a)) == a
        st.create("y", "fixed:64k")
        with st.open("y") as f:
            f.write(0, b)
    with Store(root) as st, st.open("y") as f:
        assert sorted(st.files()) == ["x", "y"] and f.read(0, len(b)) == b


@pytest.mark.ceph
def test_store_lock_between_processes_and_a_dead_holders_lease(ceph_cluster, tmp_path):
    """The store lock across processes: an exclusive holder excludes shared and exclusive
    takers; after its downgrade shared takers get in and exclusive ones still do not; once the
    holder is SIGKILLed (no release) its lock is gone one lease after its last renewal -- not
    at once, and within lease + a margin."""
    root = _rados_store(ceph_cluster, tmp_path / "s")
    holder = _child("""
        import sys, time
        from pario.store.locks import StoreLock
        l = StoreLock(sys.argv[1])
        assert l.try_exclusive(); print("EX", flush=True)
        time.sleep(1.5 * float(sys.argv[2]))      # renewed meanwhile (every third of the lease)
        print("STILL", flush=True)
        sys.stdin.readline()                      # the test looked
        l.downgrade(); print("SH", flush=True)
        time.sleep(3600)
        """, root, LEASE)
    me = StoreLock(root)
    try:
        _expect(holder, "EX")
        assert not me.try_shared() and not me.try_exclusive()
        _expect(holder, "STILL")
        assert not me.try_shared()                # renewed past its first lease
        holder.stdin.write("go\n")
        holder.stdin.flush()
        _expect(holder, "SH")
        assert me.try_shared()
        me.close()
        me = StoreLock(root)
        assert not me.try_exclusive()
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        t0 = time.monotonic()
        assert not me.try_exclusive()             # the dead holder's shared lock outlives it ...
        while not me.try_exclusive():
            assert time.monotonic() - t0 < LEASE + 10, "the dead holder's lease never expired"
            time.sleep(0.05)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
        me.close()


@pytest.mark.ceph
def test_reads_follow_another_processes_replica_at_once(ceph_cluster, tmp_path):
    """As tests/store/test_coord.py for host and pfs: a reader with the file open while another
    process replicates it onto one server, the original's data objects then overwritten with
    zeros behind pario's back: the reader's next read follows the journal object and returns
    the replica's bytes."""
    from pario.cluster.client import session

    root = _rados_store(ceph_cluster, tmp_path / "s")
    data = bytes(range(256)) * 2048     # 8 stripes of 64 KiB
    cfg = json.loads((root / "store.json").read_text())
    with Store(root) as st:
        st.create("g", "fixed:64k")
        with st.open("g") as f:
            f.write(0, data)
        fid = st.backend.meta.get("g")[0]
    with Store(root, shared=True) as here, here.open("g") as f:
        assert f.read(0, len(data)) == data
        p = _child("""
            import sys
            from pario.store import Store
            from pario.store.replicator import ReplicaSpec, replicate
            with Store(sys.argv[1], shared=True) as st:
                lay = {"type": "extents", "extents": [[0, int(sys.argv[2]), "H1", 0, 1]], "default": None}
                replicate(st, [ReplicaSpec("g", "g.r1", st.layout(lay))])
            print("COPIED")
            """, root, len(data))
        out, _ = p.communicate(timeout=300)
        assert p.returncode == 0 and "COPIED" in out, out
        zeroed = 0
        with session(os.path.join(ceph_cluster.dir, "ceph.conf")) as r:
            for pool in set(cfg["pools"].values()):
                io = r.open_ioctx(pool)
                io.set_namespace(cfg["id"])
                for o in list(io.list_objects()):
                    if o.key.startswith(f"{fid:08d}."):
                        size = io.stat(o.key)[0]
                        io.write_full(o.key, bytes(size))
                        zeroed += size
                io.close()
        assert zeroed == len(data)
        assert f.read(0, len(data)) == data


@pytest.mark.ceph
def test_two_processes_create_and_write_at_once(ceph_cluster, tmp_path):
    """Two processes with the store open shared create and write files at the same time: the
    metadata's transactions through Ceph's VFS are serialised (no lost row, distinct ids),
    every file reads back its writer's bytes, fsck is clean."""
    root = _rados_store(ceph_cluster, tmp_path / "s")
    code = """
        import sys
        from pario.store import Store
        tag, n = sys.argv[2], int(sys.argv[3])
        with Store(sys.argv[1], shared=True) as st:
            for i in range(n):
                name = f"{tag}{i}"
                st.create(name, "fixed:64k")
                with st.open(name) as f:
                    f.write(0, (name.encode() * 40000)[:100000])
        print("DONE")
        """
    ps = [_child(code, root, tag, 5) for tag in ("p", "q")]
    for p in ps:
        out, _ = p.communicate(timeout=300)
        assert p.returncode == 0 and "DONE" in out, out
    with Store(root) as st:
        names = sorted(st.files())
        assert names == sorted(f"{t}{i}" for t in "pq" for i in range(5))
        ids = {st.backend.meta.get(n)[0] for n in names}
        assert len(ids) == 10
        for n in names:
            with st.open(n) as f:
                assert f.read(0, 100000) == (n.encode() * 40000)[:100000]
    r = _pario("store", "fsck", "--store", root)
    assert r.returncode == 0 and r.stdout.startswith("clean:"), r.stdout + r.stderr


def _coord_ioctx(r, root):
    """The ioctx of the store's coordination objects (namespace "<id>.coord")."""
    cfg = json.loads((root / "store.json").read_text())
    for pool in sorted(set(cfg["pools"].values())):
        io = r.open_ioctx(pool)
        io.set_namespace(cfg["id"] + ".coord")
        try:
            io.stat("store.lock")
            return io, pool, cfg["id"] + ".coord"
        except Exception:  # noqa: BLE001  (rados.ObjectNotFound: another pool)
            io.close()
    raise AssertionError("no coordination objects")


@pytest.mark.ceph
def test_a_wait_outlasts_a_dead_processes_metadata_lock(ceph_cluster, tmp_path):
    """A process dies inside a metadata transaction: libcephsqlite's lock on meta.db is held
    until its own lease runs out (30 s, not PARIO_RADOS_LEASE).  A writer that needs meta.db
    meanwhile waits for it with its range lock held; a synchroniser's exclusive wait for that
    range, asked for with a 1 s timeout, must outlast both leases (store/coord/rados.c,
    wait_bound) and get the lock once the writer is through -- before the fix it gave up
    (crash stress shared-hybrid --coord rados, seed 13000002)."""
    from pario.cluster.client import session

    sysp = "/usr/bin/python3"
    probe = subprocess.run([sysp, "-c", "import sqlite3; sqlite3.connect(':memory:').enable_load_extension(True)"],
                           capture_output=True) if os.path.exists(sysp) else None
    if probe is None or probe.returncode != 0:
        pytest.skip("needs Debian's python3 with SQLite extension loading (libcephsqlite, scripts/setup.sh ceph)")
    root = _rados_store(ceph_cluster, tmp_path / "s")
    with Store(root) as st:
        st.create("g", "fixed:64k")
        with st.open("g") as f:
            f.write(0, bytes(65536))
        fid = st.backend.meta.get("g")[0]
    waiter = _child("""
        import sys, time
        from pario.store import Store
        st = Store(sys.argv[1], shared=True, lock_timeout=1)
        # the bound the engine keeps, not the 1 s asked for: at least 30 s + the lease + 5 s
        lease = float(__import__("os").environ.get("PARIO_RADOS_LEASE", "10"))
        assert st.lock_timeout >= 30 + lease + 5, st.lock_timeout
        print("READY", flush=True)
        sys.stdin.readline()
        t = time.monotonic()
        st.rmt.core.lock(int(sys.argv[2]), 0, 1 << 20, True)
        print("LOCKED %.1f" % (time.monotonic() - t), flush=True)
        st.rmt.core.unlock(int(sys.argv[2]), 0, 1 << 20)
        st.close()
        """, root, fid)
    writer = _child("""
        import sys, time
        from pario.store import Store
        with Store(sys.argv[1], shared=True) as st, st.open("g") as f:
            print("READY", flush=True)
            sys.stdin.readline()
            f.write(65536, b"w" * 4096)          # past the end: the size is in meta.db
            print("WROTE", flush=True)
        """, root)
    with session(os.path.join(ceph_cluster.dir, "ceph.conf")) as r:
        io, pool, ns = _coord_ioctx(r, root)
        dead = None
        try:
            _expect(waiter, "READY")
            _expect(writer, "READY")
            env = {**os.environ, "CEPH_CONF": os.path.join(ceph_cluster.dir, "ceph.conf"), "PYTHONUNBUFFERED": "1"}
            dead = subprocess.Popen([sysp, "-c", textwrap.dedent("""
                import sqlite3, sys, time
                c = sqlite3.connect(":memory:"); c.enable_load_extension(True); c.load_extension("libcephsqlite.so")
                d = sqlite3.connect(sys.argv[1], uri=True, isolation_level=None)
                d.execute("BEGIN EXCLUSIVE"); d.execute("SELECT count(*) FROM sqlite_master").fetchall()
                print("HELD", flush=True); time.sleep(3600)
                """), f"file:///{pool}:{ns}/meta.db?vfs=ceph"], stdout=subprocess.PIPE, text=True, env=env)
            _expect(dead, "HELD")
            dead.send_signal(signal.SIGKILL)        # inside the transaction: meta.db stays locked
            dead.wait()
            t0 = time.monotonic()
            writer.stdin.write("go\n")
            writer.stdin.flush()
            # the writer holds the file's range lock (shared) while it waits for meta.db: an
            # exclusive probe of ours is refused (taken, it is given back at once)
            import rados

            while True:
                try:
                    io.lock_exclusive(f"range.{fid}", "range", "probe", duration=5)
                    io.unlock(f"range.{fid}", "range", "probe")
                except rados.ObjectBusy:
                    break
                assert time.monotonic() - t0 < 20, "the writer never took its range lock"
                time.sleep(0.05)
            assert writer.poll() is None
            waiter.stdin.write("go\n")
            waiter.stdin.flush()
            line = waiter.stdout.readline()
            assert line.startswith("LOCKED"), line + waiter.stdout.read()
            waited = float(line.split()[1])
            assert waited > 1 + LEASE, waited        # it did wait, beyond its own timeout and the lease
            _expect(writer, "WROTE")
            assert writer.wait(timeout=60) == 0
            assert waiter.wait(timeout=60) == 0
        finally:
            for p in (waiter, writer, dead):
                if p is not None and p.poll() is None:
                    p.kill()
                    p.wait()
            io.close()
    with Store(root) as st, st.open("g") as f:
        assert f.read(0, 65536 + 4096) == bytes(65536) + b"w" * 4096


@pytest.mark.ceph
def test_a_journal_holder_stalled_past_its_lease_cannot_write(ceph_cluster, tmp_path):
    """Fencing: a process holds the journal lock (a transaction begun) and is stopped
    (SIGSTOP: its renewals stop too) for longer than the lease; another process takes the
    journal lock over and appends.  Resumed, the first one's append is refused (its write
    asserts the journal object's version its own last write left; the new holder changed it)
    and its renewal does not take the lock again; the journal stays whole (the independent
    reader replays it to its end, with the new holder's entry and not the stalled one's)."""
    root = _rados_store(ceph_cluster, tmp_path / "s")
    with Store(root) as st:
        st.create("g", "fixed:64k")
        with st.open("g") as f:
            f.write(0, bytes(65536 * 4))
    stalled = _child("""
        import sys
        from pario.store import Store
        st = Store(sys.argv[1], shared=True)
        c = st.rmt.core
        c.register(11, 1, 0, 0, "r")
        c.begin(); print("HELD", flush=True)
        sys.stdin.readline()
        try:
            c.add(1, 11, 0, 0, 4096, 0)
            c.commit()
            print("WROTE", flush=True)
        except Exception as exc:  # noqa: BLE001
            print("REFUSED", type(exc).__name__, exc, flush=True)
        """, root)
    try:
        _expect(stalled, "HELD")
        stalled.send_signal(signal.SIGSTOP)
        time.sleep(LEASE + 2)
        with Store(root, shared=True) as st:
            st.rmt.core.register(12, 1, 0, 0, "q")      # the journal lock, taken over
            st.rmt.core.add(1, 12, 0, 8192, 4096, 0)
        stalled.send_signal(signal.SIGCONT)
        stalled.stdin.write("go\n")
        stalled.stdin.flush()
        out = stalled.stdout.readline()
        assert out.startswith("REFUSED"), out + stalled.stdout.read()
    finally:
        stalled.kill()
        stalled.wait()
    # the journal object, replayed by the independent reader: whole to its published end, the
    # new holder's entry there, the stalled one's not
    from pario.store import rmt_journal

    model, journal = rmt_journal.replay("rmt.log", raw=shared_record(root, "rmt.log"))
    assert journal.stop_reason == "end" and not model.refused, journal.stop_reason
    assert [e[0] for e in model.entries(1)] == [12], model.entries(1)


@pytest.mark.ceph
def test_the_last_shared_closer_marks_the_journal_clean_for_the_next_machine(ceph_cluster, tmp_path):
    """A process that opened the store shared and closes it last converts its shared lock
    to exclusive (as fcntl converts one in place) and marks the journal clean; a process of
    another machine (another boot id) then opens it without the power-loss verification.
    Before the conversion, the member refused a shared holder's exclusive try: every served
    job left the journal unclean, and the next job on another node passed through to MPI-IO
    ("not closed cleanly before the machine rebooted"; found by stress/node_kill.py --coord
    rados)."""
    from pario.store.rmt_journal import HEADER

    root = _rados_store(ceph_cluster, tmp_path / "s")
    with Store(root, shared=True) as st:
        st.create("f", "fixed:64k")
        with st.open("f") as f:
            f.write(0, b"x" * 70000)
    clean = HEADER.unpack_from(shared_record(root, "rmt.log"), 0)[7]
    assert clean == 1
    p = _child("""
        import sys
        from pario.store import Store
        with Store(sys.argv[1], shared=True) as st:
            print("UNVERIFIED" if st.unverified else "SERVES", flush=True)
        """, root, boot="another-machine-boot-id")
    out, _ = p.communicate(timeout=120)
    assert "SERVES" in out, out


@pytest.mark.ceph
def test_served_shared_pointers_live_in_rados(ceph_cluster, lib, tmp_path):
    """A store coordinated in RADOS keeps the served runtime's shared file pointers in RADOS
    (objects shfp.<token> of the coordination namespace), not beside the shadow files, so its
    directory may be one per node: 4 ranks (4 processes with no memory in common) write through
    shared and ordered pointers, every file holds what the run's trace says (shared-pointer
    files as multisets, the ranks' order being free), no counter outlives the run, and the
    store's directory holds store.json and an empty shadow directory.  A counter a killed run
    left is removed by the next first opener (from the list of the tokens made, not a listing)."""
    import shutil

    import numpy as np
    from helpers import C_DIR, VENV_BIN, expected_from_trace

    from pario.cluster.client import session
    from pario.trace.native import read_native

    exe = tmp_path / "tracer_styles"
    r = subprocess.run([str(VENV_BIN / "mpicc"), "-std=c11", "-Wall", "-Wextra", "-Werror",
                        str(C_DIR / "tracer_styles.c"), "-o", str(exe)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    root = _rados_store(ceph_cluster, tmp_path / "s")
    cfg = json.loads((root / "store.json").read_text())
    with Store(root):        # its coordination objects made
        pass
    with session(os.path.join(ceph_cluster.dir, "ceph.conf")) as cl:
        io, _, _ = _coord_ioctx(cl, root)

        def counters():
            return sorted(o.key for o in io.list_objects() if o.key.startswith("shfp.") and o.key != "shfp.live")

        try:
            for style in ("shared", "ordered"):
                data, tdir = tmp_path / f"data-{style}", tmp_path / f"trace-{style}"
                data.mkdir()
                tdir.mkdir()
                env = {**os.environ, "LD_PRELOAD": str(lib), "PARIO_STORE": str(root), "PARIO_SERVE": "all",
                       "PARIO_TRACE_DIR": str(tdir)}
                cp = subprocess.run([str(VENV_BIN / "mpiexec"), "-n", "4", str(exe), style, str(data), "48", "8"],
                                    capture_output=True, text=True, env=env, timeout=300)
                assert cp.returncode == 0 and "pario:" not in cp.stdout + cp.stderr, (cp.stdout + cp.stderr)[-3000:]
                assert counters() == []
                trace = read_native(tdir)
                names = [n for n in trace.files if n.startswith(str(data) + "/")]
                assert names and not any(data.iterdir())             # served: nothing on the plain path
                with Store(root) as st:
                    for n in names:
                        with st.open(n) as f:
                            got = np.frombuffer(f.read(0, f.size), np.uint8)
                        want = expected_from_trace(trace, n)
                        if style == "shared":
                            got, want = np.sort(got), np.sort(want)
                        assert np.array_equal(got, want), n
                shutil.rmtree(tdir)
            assert sorted(p.name for p in root.iterdir()) == [".pario-shadow", "store.json"]
            assert not any((root / ".pario-shadow").iterdir())
            # a killed run's counter (its token on the list of those made, as counter_make puts
            # it there first): gone at the next first open, and the list with it
            import struct

            io.append("shfp.live", struct.pack("=Q", 0xDEADBEEF))
            io.write_full("shfp.00000000deadbeef", bytes(8))
            assert counters() == ["shfp.00000000deadbeef"]
            with Store(root):
                pass
            assert counters() == []
            assert "shfp.live" not in {o.key for o in io.list_objects()}
        finally:
            io.close()
    assert cfg["coord"] == "rados"


@pytest.mark.ceph
@pytest.mark.parametrize("damage", ["header", "index"])
def test_fsck_repair_rebuilds_the_metadata_in_rados(ceph_cluster, tmp_path, damage):
    """meta.db of a store coordinated in RADOS damaged in place (its first object overwritten
    through librados): every command says so in one line naming fsck --repair; the repair
    copies the database's pages out (the damaged copy beside store.json when they read),
    salvages its rows, takes the rest from the catalog, replaces the database in RADOS, and
    every file reads back its bytes, sizes included; a new file gets an id no file had.
    header: SQLite's header garbled -- no page reads, every file from the catalog; index: the
    name index's page garbled -- the table reads, every row kept."""
    import sqlite3

    from pario.cluster.client import session

    root = _rados_store(ceph_cluster, tmp_path / "s")
    data = {n: os.urandom(s) for n, s in (("a", 300_000), ("b", 100_000), ("c", 70_001))}
    with Store(root) as st:
        for n, b in data.items():
            st.create(n, "fixed:16k" if n == "b" else "fixed:64k")
            with st.open(n) as f:
                f.write(0, b)
        ids = {n: st.backend.meta.get(n)[0] for n in data}
    with session(os.path.join(ceph_cluster.dir, "ceph.conf")) as cl:
        io, _, _ = _coord_ioctx(cl, root)
        try:
            obj = "meta.db.0000000000000000"
            raw = bytearray(io.read(obj, 1 << 22))
            page = 65536                                   # the store's page size (store/meta.c)
            assert raw[:16] == b"SQLite format 3\0" and int.from_bytes(raw[16:18], "big") == 1
            if damage == "header":
                raw[:100] = b"X" * 100
            else:                                          # page 3: the autoindex of files(name)
                raw[2 * page:2 * page + 300] = b"\xff" * 300
            io.write_full(obj, bytes(raw))
        finally:
            io.close()
    _one_line_error(_pario("store", "ls", "--store", root), "damaged", "fsck --store DIR", "--repair")
    r = _pario("store", "fsck", "--store", root, "--repair", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    rep = json.loads(r.stdout)
    meta = rep["meta"]
    kept, rebuilt = (0, 3) if damage == "header" else (3, 0)
    assert (meta["kept_files"], meta["rebuilt_files"], meta["lost_files"]) == (kept, rebuilt, 0), meta
    assert meta["next_id"] == max(ids.values()) + 1
    if damage == "header":
        assert meta["damaged_copy"] is None
        assert sorted(p.name for p in root.iterdir()) == ["store.json"]
    else:                                                  # the copy holds the damaged pages, its rows read
        copy = Path(meta["damaged_copy"])
        assert copy.parent == root and copy.name.startswith("meta.db.damaged-")
        con = sqlite3.connect(f"file:{copy}?mode=ro", uri=True)
        rows = con.execute("SELECT id, name, size FROM files").fetchall()      # the table (the index is the damage)
        assert sorted(rows) == sorted((i, n, len(data[n])) for n, i in ids.items())
        assert con.execute("PRAGMA quick_check").fetchone()[0] != "ok"
        con.close()
    assert rep["fsck"]["ok"] is True
    with Store(root) as st:
        for n, b in data.items():
            with st.open(n) as f:
                assert f.size == len(b) and f.read(0, len(b)) == b, n
            assert st.backend.meta.get(n)[0] == ids[n]
        st.create("d", "fixed:64k")
        assert st.backend.meta.get("d")[0] == max(ids.values()) + 1
