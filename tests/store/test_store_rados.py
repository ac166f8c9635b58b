"""The ``rados`` store backend on a real Ceph cluster (one cluster for the module).

Bytes are compared with an independent reference (a bytearray written alongside); placement
is checked with Ceph's own tools: ``rados ls`` of each server's pool must list exactly the
objects every stripe unit of the file maps to, and ``ceph osd map`` of each of them must give
that server's OSD id from cluster.json alone, never with pario's mapping alone; a CEDA
plan is replicated with ``pario replicate`` and reads are redirected; a ``pario replicate``
killed with SIGKILL leaves a store that recovers and fscks clean with its bytes intact.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from ceph_fixture import ceph_cluster  # noqa: F401  (the fixture)
from helpers import on_path, random_io

from pario.cli import main
from pario.layout import ExtentMap, Grouped, Region, Regions, Striped, map_requests
from pario.store import Store, init_store
from pario.store.fsck import fsck

pytestmark = [pytest.mark.ceph]

OBJ = 64 << 10          # small objects: every test crosses object boundaries

# H0 H1 S0 S1 = servers 0 1 2 3 of the cluster's nominal profile
LAYOUTS = {
    "fixed": Striped.fixed(4096, range(4)),
    "varied": Striped((0, 1, 2, 3), (3000, 5000, 28000, 777)),       # PADP: a stripe size per server
    "grouped": Grouped(((0, 1), (2, 3)), 2048),
    "regions": Regions((Region(0, 50_000, Striped.fixed(8192, (0, 1))),           # PSA regions
                        Region(50_000, None, Grouped(((2,), (3,)), 4096)))),
    "extents": ExtentMap(np.array([1000, 30_000]), np.array([5000, 20_000]), np.array([2, 3]),
                         np.array([0, 100]), np.array([1, 2]), Striped.fixed(5000, (0, 1))),
}


def _store(tmp_path, cl, name="s") -> Path:
    root = tmp_path / name
    init_store(root, None, backend="rados", cluster=cl.dir, object_size=OBJ)
    return root


def _osd_map(cl, pool: str, obj: str, nspace: str) -> list[int]:
    out = subprocess.run(["ceph", "-c", cl.conf, "osd", "map", pool, obj, nspace, "--format", "json"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    return [int(x) for x in json.loads(out)["acting"]]


def test_without_the_rados_module_one_line_naming_it(ceph_cluster, tmp_path, monkeypatch, capsys):
    """A pip-installed pario without Debian's rados module: ``store init --backend rados`` says
    so in one line pointing at docs/cluster.md's recipe -- not "is the cluster down?" of a
    running cluster -- and makes nothing."""
    monkeypatch.setitem(sys.modules, "rados", None)          # import rados -> ImportError
    rc = main(["store", "init", str(tmp_path / "s"), "--backend", "rados", "--cluster", str(ceph_cluster.dir),
               "--coord", "rados"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and err.startswith("pario: error: "), err
    assert "'rados'" in err and "docs/cluster.md" in err and "cluster down" not in err, err
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("kind", sorted(LAYOUTS))
def test_put_get_every_layout_and_placement(ceph_cluster, tmp_path, kind):
    cl = ceph_cluster
    root = _store(tmp_path, cl)
    rng = np.random.default_rng(sum(map(ord, kind)))
    with Store(root) as st:
        assert st.backend.name == "rados"
        st.create("f", LAYOUTS[kind])
        f = st.open("f")
        ref = random_io(f, rng, 25, 300_000, 90_000, 120_000)
        f.write(0, bytes(ref))  # the same bytes again: every stripe unit written (no hole)
        f.close()
        fid = st.backend.meta.get("f")[0]
        ns = st.id
        pools = st.backend.pools
    # reopened: size from the metadata, bytes from the OSDs
    with Store(root) as st, st.open("f") as f:
        assert f.size == len(ref)
        assert f.read(0, len(ref)) == bytes(ref)
    # every stripe unit's object: the objects every byte of the file maps to, server by
    # server, are exactly the file's objects Ceph lists in that server's pool, and Ceph's
    # own mapping puts each of them on that server's OSD alone
    lay = LAYOUTS[kind]
    names = [s.name for s in load_servers(cl)]
    every = map_requests(lay, np.arange(len(ref), dtype=np.int64), np.ones(len(ref), dtype=np.int64))
    want: dict[int, set[str]] = {}
    for s, df, k in set(zip(every.server.tolist(), every.datafile.tolist(), (every.local // OBJ).tolist())):
        want.setdefault(s, set()).add(f"{fid:08d}.{df}.{k:08x}")
    for s in range(len(names)):
        server = cl.server(names[s])
        listed = subprocess.run(["rados", "-c", cl.conf, "-p", server.pool, "-N", ns, "ls"], capture_output=True,
                                text=True, timeout=60, check=True).stdout.split()
        mine = {o for o in listed if o.startswith(f"{fid:08d}.")}
        assert mine == want.get(s, set()), (names[s], sorted(mine ^ want.get(s, set())))
        for obj in sorted(mine):
            assert _osd_map(cl, server.pool, obj, ns) == [server.osd], (names[s], obj)
    # a sample of bytes read back from the objects Ceph holds, where pario's mapping says
    xs = rng.integers(0, len(ref), 12)
    sub = map_requests(lay, xs, np.ones(len(xs), dtype=np.int64))
    with Store(root) as st:
        for x, s, df, loc in zip(xs.tolist(), sub.server.tolist(), sub.datafile.tolist(), sub.local.tolist()):
            obj = f"{fid:08d}.{df}.{loc // OBJ:08x}"
            server = cl.server(names[s])
            assert server.pool == pools[s]
            assert _osd_map(cl, server.pool, obj, ns) == [server.osd]
            # the byte at logical offset x is byte loc % OBJ of that object of that pool
            assert st.backend.ioctx[s].read(obj, 1, loc % OBJ) == bytes(ref[x:x + 1])
        rep = fsck(st)
        assert rep["ok"], rep["problems"]
        st.delete("f")
        assert not [d for d in st.backend.datafiles() if d[2] == fid]


def load_servers(cl):
    from pario.system import load_system

    sysm = load_system(Path(cl.dir) / "nominal.toml")
    return [cl.server(n) for n in sysm.names]


def test_size_recovered_from_objects_after_crash(ceph_cluster, tmp_path):
    """An extending write marks the file dirty; without a close (a crash) the next open takes
    the size from the objects (last object's index and size)."""
    cl = ceph_cluster
    root = _store(tmp_path, cl)
    with Store(root) as st:
        st.create("f", LAYOUTS["varied"])
    code = ("import sys, os; from pario.store import Store\n"
            f"st = Store({str(root)!r}); f = st.open('f')\n"
            "f.write(123_457, bytes(range(256)) * 1000)\n"
            "os._exit(0)\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120,
                   env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    with Store(root) as st, st.open("f") as f:
        assert f.size == 123_457 + 256_000
        assert f.read(123_457, 256_000) == bytes(range(256)) * 1000
        assert f.read(0, 123_457) == bytes(123_457)
        f.truncate(200_000)
    with Store(root) as st, st.open("f") as f:
        assert f.size == 200_000
        assert f.read(123_457, 76_543) == (bytes(range(256)) * 1000)[:76_543]
        assert fsck(st)["ok"]


def test_cli_init_and_errors(ceph_cluster, tmp_path, capsys):
    cl = ceph_cluster
    src = tmp_path / "in.bin"
    src.write_bytes(np.random.default_rng(1).integers(0, 256, 700_000, dtype=np.uint8).tobytes())
    root = tmp_path / "cli"
    assert main(["store", "init", str(root), "--backend", "rados", "--cluster", cl.dir, "--object-size", "128k"]) == 0
    cfg = json.loads((root / "store.json").read_text())
    assert cfg["backend"] == "rados" and cfg["object_size"] == 128 << 10 and cfg["cluster"] == str(Path(cl.dir).resolve())
    assert cfg["pools"] == {s.name: s.pool for s in cl.servers}
    assert main(["store", "put", str(src), "a", "--store", str(root), "--layout", "var:hdd=28K,ssd=100K"]) == 0
    assert main(["store", "get", "a", str(tmp_path / "out.bin"), "--store", str(root)]) == 0
    assert (tmp_path / "out.bin").read_bytes() == src.read_bytes()
    capsys.readouterr()
    # bad input: one line, exit 2
    for argv, want in ((["--cluster", str(tmp_path / "nocluster")], "not a pario cluster"),
                       ([], "needs --cluster")):
        rc = main(["store", "init", str(tmp_path / "bad"), "--backend", "rados", *argv])
        err = capsys.readouterr().err.strip()
        assert rc == 2 and err.startswith("pario: error:") and want in err and "\n" not in err
    # a pool that is missing
    bad = json.loads((root / "store.json").read_text())
    bad["pools"]["H0"] = "pario-nopool"
    (root / "store.json").write_text(json.dumps(bad))
    rc = main(["store", "ls", "--store", str(root)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "pool pario-nopool does not exist" in err


def _ceda(tmp_path, cl, n=6 << 20):
    from pario.plan.ceda import CEDAPlanner
    from pario.system import load_system
    from pario.workload import ior

    system = load_system(Path(cl.dir) / "nominal.toml")
    root = _store(tmp_path, cl)
    init = np.random.default_rng(5).integers(0, 256, n, dtype=np.uint8).tobytes()
    with Store(root) as st:
        st.create("f", "fixed:64K@H0,H1")
        with st.open("f") as f:
            f.write(0, init)
    trace = ior(8, 16 << 10, 8 * (16 << 10), 2, pattern="random", op="read", seed=3, file="f")
    plan = CEDAPlanner(original="fixed:64K@H0,H1").plan(trace, system)
    assert list(plan.replicas) == ["f"]
    pp = tmp_path / "plan.json"
    plan.save(pp, system)
    return root, init, pp, trace


def test_ceda_replicate_and_redirect(ceph_cluster, tmp_path):
    cl = ceph_cluster
    root, init, pp, trace = _ceda(tmp_path, cl)
    assert main(["replicate", str(pp), "--store", str(root), "--json"]) == 0
    with Store(root) as st:
        reps = st.rmt.replicas()
        assert reps, "no replica registered"
        rname = reps[0]["r_file"]
        f = st.open("f")
        offs = np.asarray(trace.offset)[:32].tolist() if hasattr(trace, "offset") else []
        redirected = 0
        for x in offs:
            segs = f.served_by(x, x + (16 << 10))
            redirected += sum(e - s for s, e, r in segs if r == rname)
            assert f.read(x, 16 << 10) == init[x:x + (16 << 10)]
        assert redirected > 0
        assert f.read(0, len(init)) == init
        # the replica's objects are on the servers of its layout (Ceph's mapping)
        rlay = st.backend.stat(rname).layout
        rid = st.backend.meta.get(rname)[0]
        used = rlay.servers_used()
        assert used
        names = st.system.names
        for d in st.backend.datafiles():
            if d[2] == rid:
                s = cl.server(names[d[0]])
                assert d[0] in used
                assert _osd_map(cl, s.pool, f"{rid:08d}.{d[3]}.00000000", st.id) == [s.osd]
        f.close()
        rep = fsck(st)
        assert rep["ok"], rep["problems"]


def _replica_rows(root: Path) -> int:
    try:
        con = sqlite3.connect(f"file:{root / 'meta.db'}?mode=ro", uri=True, timeout=5)
        try:
            return con.execute("SELECT count(*) FROM files WHERE name LIKE '.replica/%'").fetchone()[0]
        finally:
            con.close()
    except sqlite3.Error:
        return 0


@pytest.mark.parametrize("delay", [0.0, 0.4])
def test_sigkill_during_replicate_then_fsck_clean(ceph_cluster, tmp_path, delay):
    """``pario replicate`` on the rados store killed (SIGKILL) once its replica file exists
    (plus ``delay``): the next open recovers; fsck is clean; the original's bytes are intact;
    a second replicate completes."""
    cl = ceph_cluster
    root, init, pp, _ = _ceda(tmp_path, cl, n=12 << 20)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    p = subprocess.Popen([sys.executable, "-c", "import sys; from pario.cli import main; sys.exit(main(sys.argv[1:]))",
                          "replicate", str(pp), "--store", str(root), "--chunk", "256k"], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    t0 = time.monotonic()
    while p.poll() is None and _replica_rows(root) == 0 and time.monotonic() - t0 < 120:
        time.sleep(0.01)
    time.sleep(delay)
    killed = p.poll() is None
    if killed:
        os.kill(p.pid, signal.SIGKILL)
    p.wait(timeout=60)
    assert killed or p.returncode == 0, p.stderr.read()
    print(f"replicate {'killed' if killed else 'finished'} {time.monotonic() - t0:.2f} s after start")
    p.stderr.close()
    with Store(root) as st:
        rep = fsck(st)
        assert rep["ok"], rep["problems"]
        with st.open("f") as f:
            assert f.size == len(init)
            assert f.read(0, len(init)) == init
    assert main(["replicate", str(pp), "--store", str(root)]) == 0
    with Store(root) as st:
        assert fsck(st)["ok"]
        with st.open("f") as f:
            assert f.read(0, len(init)) == init


def test_hybrid_replicas_on_rados(ceph_cluster, tmp_path):
    """Hybrid replication (CI-LAYOUT seed 002 §5) on RADOS: two full replicas with other layouts;
    a write leaves the other copies STALE and no read returns stale bytes; after the sync every
    copy equals the reference (read through each copy's own handle) and fsck is clean."""
    from pario.store import STALE
    from pario.store.replicator import ReplicaSpec, Replicator

    root = _store(tmp_path, ceph_cluster)
    n = 300_000
    ref = bytearray(np.random.default_rng(7).integers(0, 256, n, dtype=np.uint8).tobytes())
    with Store(root) as st:
        st.engine.set_lazy(False)                    # keep the synchronisation pending
        st.create("f", "fixed:4k")
        with st.open("f") as f:
            f.write(0, bytes(ref))
        Replicator(st, [ReplicaSpec("f", "dv", Striped.fixed(1 << 16, range(4))),
                        ReplicaSpec("f", "2d", Grouped(((0, 1), (2, 3)), 16 << 10))]).run()
        f = st.open("f")
        rng = np.random.default_rng(8)
        for _ in range(12):
            o, m = int(rng.integers(0, n - 20_000)), int(rng.integers(1, 20_000))
            data = rng.integers(0, 256, m, dtype=np.uint8).tobytes()
            f.write(o, data)
            ref[o:o + m] = data
            assert STALE in [fl for *_, fl in st.rmt.all_rows()]
            x = int(rng.integers(0, n - 30_000))
            assert f.read(x, 30_000) == bytes(ref[x:x + 30_000])
        f.flush()
        assert st.rmt.files_with_unclean() == []
        assert f.read(0, n) == bytes(ref)
        f.close()
        for r in st.rmt.replicas():
            h = st.backend.open(r["r_file"])
            try:
                assert st.backend.read_at(h, 0, n) == bytes(ref), r["r_file"]
            finally:
                st.backend.close(h)
        rep = fsck(st)
        assert rep["ok"], rep["problems"]


def test_pario_mpi_file_on_rados(ceph_cluster, tmp_path):
    """pario.mpi.File under mpiexec -n 4 on a rados store (tests/mpi/store_redirect.py, the
    local store's test program unchanged): independent and collective reads through a CEDA
    replica of every odd record, rewrites while replicas are DIRTY, read-your-writes, and at
    close the original holds the new bytes and every RMT entry is clean and equal to it."""
    on_path("mpi")   # tests/mpi/'s test modules, from this folder
    from test_mpi import _check, run_mpi
    from test_mpi_store import REC, RECORDS, _raw_original, _replicas_match_original, content

    from pario.store.replicator import ReplicaSpec, replicate

    root = _store(tmp_path, ceph_cluster)
    src = tmp_path / "data.bin"
    src.write_bytes(content(0).tobytes())
    with Store(root) as st:
        st.put(src, "data", "fixed:64K")
        odd = np.arange(1, RECORDS, 2)
        idx = np.arange(len(odd))
        lay = ExtentMap(offset=odd * REC, length=np.full(len(odd), REC), server=2 + idx % 2,
                        local=(idx // 2) * REC, datafile=np.ones(len(odd), dtype=np.int64))
        replicate(st, [ReplicaSpec("data", "r1", lay)])
        assert len(st.rmt.entries("data").flag) > 0
    cp = run_mpi("store_redirect.py", root, "run", timeout=300)
    _check(cp)
    dirty = [ln for ln in cp.stdout.splitlines() if ln.startswith("dirty")]
    assert dirty and int(dirty[0].split()[1]) > 0, cp.stdout
    assert np.array_equal(_raw_original(root), content(1))
    n, bad = _replicas_match_original(root)
    assert n > 0 and bad == 0


def test_read_past_an_objects_end_is_zeros(ceph_cluster, tmp_path):
    """A request whose piece starts inside an existing object but past its end (a hole at the
    end of a data file) reads zeros.  The ``rados`` binding's aio_read hands over its whole,
    uninitialised buffer when 0 bytes were read; found by stress/crash_stress.py --cluster
    (replicas synchronised with those bytes).  Here with 4 KiB stripes over 4 servers and
    64 KiB objects: after writes at 0, 199 999 and 299 999, server 0's object 0 ends at local
    byte 52 544, and [200 000, 299 999) reads it from local byte 53 248 on."""
    root = _store(tmp_path, ceph_cluster)
    with Store(root) as st:
        st.create("g", Striped.fixed(4096, range(4)))
        with st.open("g") as f:
            f.write(0, b"\x01" * 1000)
            f.write(199_999, b"\x02")
            f.write(299_999, b"\x03")
            for _ in range(3):
                assert f.read(200_000, 99_999) == bytes(99_999)
            want = b"\x01" * 1000 + bytes(198_999) + b"\x02" + bytes(99_999) + b"\x03"
            assert f.read(0, 300_000) == want
