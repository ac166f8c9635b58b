"""The coordination interface (src/pario/native/store/coord.h; docs/store.md, "Coordination"):
the member store.json names, the default "host", an unknown member refused with one line,
and the store lock Python takes being the engine's (pario.store.locks.StoreLock)."""

import json

import pytest

from pario import ParioError
from pario.store import Store, init_store
from pario.store.locks import StoreLock


def _set_coord(root, value):
    p = root / "store.json"
    cfg = json.loads(p.read_text())
    if value is None:
        cfg.pop("coord", None)
    else:
        cfg["coord"] = value
    p.write_text(json.dumps(cfg))


def test_default_and_named_host_member(tmp_path):
    root = init_store(tmp_path / "s", "ceda-hdd8")
    with Store(root) as st:                      # no "coord": host, as every store made before
        st.create("f", "fixed:64k")
        with st.open("f") as f:
            f.write(0, b"x" * 1000)
    _set_coord(root, "host")
    with Store(root, shared=True) as st:
        with st.open("f") as f:
            assert f.read(0, 1000) == b"x" * 1000


def test_unknown_member_is_one_line_error_and_cli_exit_2(tmp_path, capsys):
    from pario.cli import main

    root = init_store(tmp_path / "s", "ceda-hdd8")
    _set_coord(root, "rados-omap")
    with pytest.raises(ParioError, match="coordination 'rados-omap' is not available") as ei:
        Store(root)
    assert "\n" not in str(ei.value)
    capsys.readouterr()
    assert main(["store", "ls", "--store", str(root)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("pario: error: ") and "\n" not in err and "rados-omap" in err
    _set_coord(root, 3)
    with pytest.raises(ParioError, match='"coord" must be the name of a coordination member'):
        Store(root)


def test_python_store_lock_is_the_engines(tmp_path):
    root = init_store(tmp_path / "s", "ceda-hdd8")
    Store(root).close()                                       # the journal made (a first opener)
    lock = StoreLock(root / ".lock")
    assert lock.member == "host" and lock.mode is None
    assert lock.try_exclusive() and lock.mode == "ex"
    with pytest.raises(ParioError, match="in use"):            # the engine sees the same lock
        Store(root)
    assert lock.downgrade() and lock.mode == "sh"
    with pytest.raises(ParioError, match="in use"):            # shared: an exclusive opener still waits
        Store(root)
    with Store(root, shared=True, lock_timeout=2):            # ... a shared one does not
        other = StoreLock(root)
        assert not other.try_exclusive() and other.try_shared()
        other.close()
    lock.close()
    assert lock.mode is None
    with Store(root):                                         # released: exclusive again
        assert not StoreLock(root).try_shared()


def test_store_lock_never_follows_a_planted_link(tmp_path):
    root = init_store(tmp_path / "s", "ceda-hdd8")
    (root / ".lock").unlink(missing_ok=True)
    (root / ".lock").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ParioError, match="symbolic link"):
        StoreLock(root / ".lock")


def _other_machine(root, code, boot="another-machine-boot-id"):
    """``code`` run by a process that looks like it runs on another machine (its boot id is
    ``boot``: PARIO_BOOT_ID, as the reboot stresses use it), with ``st`` the store opened shared
    and a ParioError printed as its one line; (exit status, output)."""
    import os
    import subprocess
    import sys
    import textwrap

    prog = textwrap.dedent(f"""
        import sys
        from pario import ParioError
        from pario.store import Store
        try:
            with Store({str(root)!r}, shared=True) as st:
    """) + textwrap.indent(textwrap.dedent(code), " " * 8) + textwrap.dedent("""
        except ParioError as exc:
            print("ERROR", exc)
            sys.exit(2)
    """)
    env = dict(os.environ, PARIO_BOOT_ID=boot)
    r = subprocess.run([sys.executable, "-c", prog], env=env, capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout + r.stderr


def test_host_member_refuses_a_store_another_machine_has_open(tmp_path):
    """A "host" store (the journal a shared mapping, its lock a process-shared mutex: neither
    works between machines) open on this machine is refused to a process of another machine
    with one line, before it maps anything; once nothing is open here, that machine may open
    it (the name it finds in DIR/.host is then stale, not a holder)."""
    root = init_store(tmp_path / "s", "ceda-hdd8")
    with Store(root) as st:
        st.create("f", "fixed:64k")
        with st.open("f") as f:
            f.write(0, b"a" * 5000)
    with Store(root, shared=True) as here:
        rc, out = _other_machine(root, "print('OPENED')")
        assert rc == 2 and "OPENED" not in out, out
        line = out.strip()
        assert "\n" not in line and "is open on another machine" in line and "--coord pfs" in line
        with here.open("f") as f:                       # this machine's use goes on unharmed
            assert f.read(0, 5000) == b"a" * 5000
    rc, out = _other_machine(root, "with st.open('f') as f: print('READ', f.read(0, 5000) == b'a' * 5000)")
    assert rc == 0 and "READ True" in out, out


def test_pfs_member_serves_processes_of_several_machines(tmp_path):
    """The same two "machines" on a "pfs" store (fcntl locks, the journal read and written with
    pread/pwrite, SQLite with a rollback journal): both have it open at once, a file the other
    machine creates and writes is read here byte for byte, and its replica's RMT entries are
    seen here through the journal."""
    root = init_store(tmp_path / "s", "ceda-hdd8", coord="pfs")
    assert json.loads((root / "store.json").read_text())["coord"] == "pfs"
    data = bytes(range(256)) * 64
    with Store(root, shared=True) as here:
        rc, out = _other_machine(root, f"""
            from pario.store.replicator import ReplicaSpec, replicate
            st.create("g", "fixed:64k")
            with st.open("g") as f:
                f.write(0, {data!r})
            replicate(st, [ReplicaSpec("g", "g.r1", st.layout("fixed:4k"))])
            print("WROTE", len(st.rmt.entries("g").flag))
        """)
        assert rc == 0 and "WROTE" in out, out
        theirs = int(out.split("WROTE")[1].split()[0])
        assert theirs > 0 and len(here.rmt.entries("g").flag) == theirs      # followed through the journal
        with here.open("g") as f:                       # served from the replica (CLEAN) and the original
            assert f.read(0, len(data)) == data
    import sqlite3

    mode = sqlite3.connect(root / "meta.db").execute("PRAGMA journal_mode").fetchone()[0]
    assert mode != "wal" and not (root / "meta.db-wal").exists()      # (a rollback journal is per connection)


def test_unknown_coord_at_init_is_refused(tmp_path):
    with pytest.raises(ParioError, match="unknown coordination 'paxos'"):
        init_store(tmp_path / "s", "ceda-hdd8", coord="paxos")
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("coord", ["host", "pfs"])
def test_reads_follow_another_processes_replica_at_once(tmp_path, coord):
    """A reader with a file open while another process replicates it (a whole-file replica on
    one server), the original's data files then zeroed behind pario's back, so that only a read
    routed to the replica returns the bytes: on both members the reader's next read follows the
    journal (host: one load of the mapped header; pfs: a re-read of the header) and is the
    replica's, before any sync point.  (Following only at MPI sync points was tried for pfs and
    undone: the crash stress's readers, which expect every acknowledged write of another
    process, read stale bytes in 29 of 60 trials.)"""
    root = init_store(tmp_path / "s", "ceda-hdd8", coord=coord)
    data = bytes(range(256)) * 2048     # 8 stripes of 64 KiB: a data file on every server
    with Store(root) as st:
        st.create("g", "fixed:64k")
        with st.open("g") as f:
            f.write(0, data)
    boot = open("/proc/sys/kernel/random/boot_id").read().strip()     # this machine ("host" allows it)
    originals = [p for p in (root / "servers").rglob("*") if p.is_file()]      # the original's data files
    assert len(originals) == 8
    with Store(root, shared=True) as here, here.open("g") as f:
        assert f.read(0, len(data)) == data
        rc, out = _other_machine(root, """
            from pario.store.replicator import ReplicaSpec, replicate
            lay = {"type": "extents", "extents": [[0, %d, "H1", 0, 1]], "default": None}
            replicate(st, [ReplicaSpec("g", "g.r1", st.layout(lay))])
            print("COPIED")
        """ % len(data), boot=boot)
        assert rc == 0 and "COPIED" in out, out
        for p in originals:
            p.write_bytes(bytes(p.stat().st_size))
        assert f.read(0, len(data)) == data
