"""pario's C data plane on a ``rados`` store (store/planes/rados.c, docs/serve.md "Served on
RADOS") on a real Ceph cluster (one cluster for the module).

Oracles, each independent of the C code under test:

* bytes: a numpy reference written alongside, and pario's Python ``RadosBackend`` reading (and
  writing) the same store — C writes → Python reads and Python writes → C reads, every layout
  kind (fixed and PADP varied striping, 2-D groups, PSA regions, a CEDA extent map), objects
  cut at 64 KiB so that every request crosses object boundaries;
* an unmodified MPI program (IOR, ../shared/clients/ior) served on the store through the
  preloaded library writes exactly the bytes the same IOR run writes on a plain file, and
  the objects of its bytes are where Ceph's own ``ceph osd map`` puts the server's pool
  (the acting OSD is the server's OSD of cluster.json), read back with the ``rados`` tool;
* CEDA: the bytes C reads from a replica equal what the Python redirector's ``served_by``
  routes there, C writes into replicated ranges are DIRTY (the independent journal reader
  says so) and reach the original at close;
* sizes: per-server data-file sizes after a C truncate equal ``Layout.counts`` (Python's
  byte-count functions); a reserve grows the object of byte end - 1 to exactly the bytes
  asked (never cuts another writer's bytes); after a C writer is SIGKILLed mid-write the
  size the C store recovers equals the one derived here from the objects (``rados``
  listing and stat, ``Layout.counts``), and ``pario store fsck`` is clean;
* errors: a librados without its functions, direct I/O: one line; an MPI program passes
  through to plain MPI-IO.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from ceph_fixture import ceph_cluster  # noqa: F401  (the fixture)
from helpers import PARIO, on_path
from test_serve_mpi import P, _env, _mpiexec, ior_bin  # noqa: F401  (ior_bin: the fixture; lib: conftest.py)
from test_serve_store import Driver, _blob, _rand_extents, driver  # noqa: F401  (the C driver fixture)
on_path("store")  # tests/store/test_store_rados.py's helpers below, from this folder
from test_store_rados import LAYOUTS, OBJ, _ceda, _osd_map, _store, load_servers  # noqa: E402

from pario.cli import main
from oracles.layout import map_requests
from pario.store import Store
from pario.store import rmt_journal as J
from pario.store.fsck import fsck
from pario.system import System

pytestmark = [pytest.mark.ceph]
KiB, MiB = 1 << 10, 1 << 20


def _put(ref: np.ndarray, x: int, data: np.ndarray) -> np.ndarray:
    if x + len(data) > len(ref):
        ref = np.concatenate([ref, np.zeros(x + len(data) - len(ref), np.uint8)])
    ref[x:x + len(data)] = data
    return ref


def _rados(cl, pool: str, ns: str, *args) -> subprocess.CompletedProcess:
    return subprocess.run(["rados", "-c", cl.conf, "-p", pool, "-N", ns, *args], capture_output=True, text=True,
                          timeout=120)


def _objects(cl, pool: str, ns: str) -> dict[str, int]:
    """Object name → size in ``pool`` / namespace ``ns``, with the ``rados`` tool."""
    names = _rados(cl, pool, ns, "ls").stdout.split()
    out = {}
    for o in names:
        st = _rados(cl, pool, ns, "stat", o)
        assert st.returncode == 0, st.stderr
        out[o] = int(st.stdout.rsplit("size", 1)[1].strip().split()[0])
    return out


def _check_placement(cl, st, name: str, ref, xs) -> None:
    """Byte x (a written one) of ``name`` is byte loc % OBJ of object <id>.<d>.<loc // OBJ> of the server's
    pool, which Ceph maps to the server's OSD; the object is there for the rados tool."""
    fid = st.backend.meta.get(name)[0]
    lay = st.stat(name).layout
    xs = np.asarray(xs, dtype=np.int64)
    sub = map_requests(lay, xs, np.ones(len(xs), dtype=np.int64))
    names = [s.name for s in load_servers(cl)]
    for x, s, df, loc in zip(xs.tolist(), sub.server.tolist(), sub.datafile.tolist(), sub.local.tolist()):
        obj = f"{fid:08d}.{df}.{loc // OBJ:08x}"
        server = cl.server(names[s])
        assert st.config["pools"][names[s]] == server.pool
        assert _osd_map(cl, server.pool, obj, st.id) == [server.osd]
        assert _rados(cl, server.pool, st.id, "stat", obj).returncode == 0, obj
        assert st.backend.ioctx[s].read(obj, 1, loc % OBJ) == bytes(ref[x:x + 1])


# ---------------------------------------------------------------------- (a) C <-> Python
@pytest.mark.parametrize("kind", sorted(LAYOUTS))
def test_c_and_python_write_read_each_other(ceph_cluster, driver, tmp_path, kind):
    cl = ceph_cluster
    root = _store(tmp_path, cl)
    with Store(root) as st:
        st.create("f", LAYOUTS[kind])
    blob, bp = _blob(tmp_path, 1, 2 * MiB)
    rng = np.random.default_rng(sum(map(ord, kind)))
    ref = np.zeros(0, np.uint8)
    # C writes: single extents and one vectored write (pieces of several objects, servers)
    d = Driver(driver)
    d("open", root)
    h = d("fopen", "f")["h"]
    pos = 0
    xs, ns = _rand_extents(rng, 14, 400_000, 90_000)
    for x, n in zip(xs, ns):
        d("write", h, x, n, bp, pos)
        ref = _put(ref, x, blob[pos:pos + n])
        pos += n
    vx, vn = [500_003, 100, 3 * OBJ - 3], [70_001, 9_000, OBJ + 7]
    d("writev", h, bp, pos, 3, *[v for pair in zip(vx, vn) for v in pair])
    for x, n in zip(vx, vn):
        ref = _put(ref, x, blob[pos:pos + n])
        pos += n
    assert d("size", h)["size"] == len(ref)
    d("fclose", h)
    d("close_store")
    d.close()

    with Store(root) as st:
        assert st.backend.name == "rados"
        assert st.stat("f").size == len(ref)
        with st.open("f") as f:
            assert f.read(0, len(ref)) == ref.tobytes()
            xs, ns = _rand_extents(rng, 10, 700_000, 80_000)       # Python writes
            for x, n in zip(xs, ns):
                f.write(x, blob[pos:pos + n].tobytes())
                ref = _put(ref, x, blob[pos:pos + n])
                pos += n
        if kind == "fixed":
            _check_placement(cl, st, "f", ref, rng.choice(np.flatnonzero(ref), 6))
        rep = fsck(st)
        assert rep["ok"], rep["problems"]

    # C reads it back: in pieces (past the end too) and vectored
    out = tmp_path / "out.bin"
    d = Driver(driver)
    d("open", root)
    h = d("fopen", "f")["h"]
    assert d("size", h)["size"] == len(ref)
    chunk = 300_001
    for x in range(0, len(ref) + chunk, chunk):
        assert d("read", h, x, chunk, out, x)["got"] == max(0, min(chunk, len(ref) - x))
    back = np.fromfile(out, np.uint8)
    assert np.array_equal(back[:len(ref)], ref) and not back[len(ref):].any()
    rx, rn = _rand_extents(rng, 16, len(ref) + 1000, 70_000)
    d("readv", h, out, 0, len(rx), *[v for pair in zip(rx, rn) for v in pair])
    back = np.fromfile(out, np.uint8)
    p = 0
    for x, n in zip(rx, rn):
        want = np.zeros(n, np.uint8)
        inside = max(0, min(n, len(ref) - x))
        want[:inside] = ref[x:x + inside]
        assert np.array_equal(back[p:p + n], want), (x, n)
        p += n
    d("fclose", h)
    d("close_store")
    d.close()


# ---------------------------------------------------------------------- (b) MPI, unmodified
def test_ior_served_on_rados_equals_plain_and_objects_are_where_ceph_maps(ceph_cluster, lib, ior_bin, tmp_path):
    """IOR (-a MPIIO, independent and collective) served on the rados store: the store file
    holds the bytes of the same IOR run on a plain file, IOR's own read-back check passes,
    nothing lands on the plain path, and a sample of bytes is in the objects Ceph maps to
    the servers' OSDs."""
    cl = ceph_cluster
    root = _store(tmp_path, cl)
    args = ["-a", "MPIIO", "-G", "4242", "-b", "64k", "-t", "16k", "-s", "4", "-w", "-r", "-R", "-k"]
    plain = tmp_path / "plain.dat"
    _mpiexec([ior_bin, *args, "-o", plain], _env(lib), tmp_path)
    ref = plain.read_bytes()
    assert len(ref) == P * 4 * 64 * KiB
    for mode in ("independent", "collective"):
        name = tmp_path / f"ior-{mode}.dat"
        cp = _mpiexec([ior_bin, *args, *(["-c"] if mode == "collective" else []), "-o", name],
                      _env(lib, store=root, serve="all"), tmp_path)
        assert "pario: serve:" not in cp.stderr, cp.stderr
        assert not name.exists()
        with Store(root) as st:
            with st.open(str(name)) as f:
                assert f.size == len(ref) and f.read(0, len(ref)) == ref, mode
            rng = np.random.default_rng(3)
            refa = np.frombuffer(ref, np.uint8)
            _check_placement(cl, st, str(name), refa, rng.choice(np.flatnonzero(refa), 5))
            assert fsck(st)["ok"]


def test_missing_librados_is_one_line_and_mpi_passes_through(ceph_cluster, driver, lib, ior_bin, tmp_path):
    """A librados.so.2 without librados's functions (found first through LD_LIBRARY_PATH):
    the C store open fails with one line, and a served MPI program writes its file through
    plain MPI-IO (one 'pario: serve:' line per open), as for any store it cannot open."""
    cl = ceph_cluster
    root = _store(tmp_path, cl)
    fake = tmp_path / "fakelib"
    fake.mkdir()
    src = tmp_path / "empty.c"
    src.write_text("int pario_not_librados;\n")
    subprocess.run(["cc", "-shared", "-fPIC", str(src), "-o", str(fake / "librados.so.2")], check=True)
    env = {**os.environ, "LD_LIBRARY_PATH": str(fake)}
    a = run_lines_env(driver, [f"open {root}"], env)
    assert not a[0]["ok"] and "librados.so.2 has no rados_create" in a[0]["error"] and "\n" not in a[0]["error"]
    # direct I/O does not apply
    a = run_lines_env(driver, [f"open {root} direct"], os.environ.copy())
    assert not a[0]["ok"] and "direct" in a[0]["error"] and "rados" in a[0]["error"]
    name = tmp_path / "ior.dat"
    e = _env(lib, store=root, serve="all", extra={"LD_LIBRARY_PATH": str(fake)})
    cp = _mpiexec([ior_bin, "-a", "MPIIO", "-G", "1", "-b", "16k", "-t", "16k", "-w", "-r", "-R", "-k", "-o", name],
                  e, tmp_path)
    lines = [ln for ln in cp.stderr.splitlines() if ln.startswith("pario: serve:")]
    assert lines and all("librados.so.2 has no rados_create" in ln and "passes through" in ln for ln in lines)
    assert name.stat().st_size == P * 16 * KiB


def run_lines_env(exe, lines, env):
    r = subprocess.run([str(exe)], input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    return [json.loads(s) for s in r.stdout.splitlines() if s.strip()]


# ---------------------------------------------------------------------- (c) CEDA in C
def test_ceda_replica_served_and_redirected_in_c(ceph_cluster, driver, tmp_path, capsys):
    cl = ceph_cluster
    root, init, pp, trace = _ceda(tmp_path, cl, n=2 * MiB)
    assert main(["replicate", str(pp), "--store", str(root), "--json"]) == 0
    capsys.readouterr()
    ref = np.frombuffer(init, np.uint8).copy()
    rng = np.random.default_rng(9)
    reads = [(int(x), int(n)) for x, n in zip(rng.integers(0, len(ref), 30), rng.integers(1, 100_000, 30))]
    reads += [(int(x), 16 * KiB) for x in np.asarray(trace.offset)[:16].tolist()]    # CEDA's request extents
    with Store(root) as st:
        with st.open("f") as f:
            want_rep = sum(t - s for x, n in reads for s, t, r in f.served_by(x, min(x + n, len(ref))) if r)
        rfiles = [r["r_file"] for r in st.rmt.replicas("f")]
        fid, rid = st.rmt.fid("f"), st.rmt.fid(rfiles[0])
    assert want_rep > 0
    out = tmp_path / "out.bin"
    d = Driver(driver)
    d("open", root, "shared")
    h = d("fopen", "f")["h"]
    for x, n in reads:
        d("read", h, x, n, out, 0)
        inside = max(0, min(n, len(ref) - x))
        assert np.array_equal(np.fromfile(out, np.uint8)[:inside], ref[x:x + inside])
    s = d("stats", h)
    assert s["replicas"] == 1 and s["read_replica"] == want_rep and s["redirected_reads"] > 0
    # writes into replicated ranges go to the replica, DIRTY
    blob, bp = _blob(tmp_path, 6, MiB)
    writes = [(int(x) + 100, 5000) for x in np.unique(np.asarray(trace.offset))[:6].tolist()]
    writes += [(len(ref) - 10, 30_000)]                     # extending, outside the replica
    pos = 0
    for x, n in writes:
        d("write", h, x, n, bp, pos)
        ref = _put(ref, x, blob[pos:pos + n])
        pos += n
    s = d("stats", h)
    assert s["written_replica"] > 0 and s["redirected_writes"] > 0
    model, _ = J.replay(root / "rmt.log")
    dirty = sum(n for r, off, n, ro, fl in model.entries(fid) if fl == J.DIRTY and r == rid)
    assert dirty == s["written_replica"]
    d("fclose", h)                     # close flushes: DIRTY -> original, CLEAN
    d("close_store")
    d.close()
    model, _ = J.replay(root / "rmt.log")
    assert not [e for e in model.entries(fid) if e[4] != J.CLEAN]
    with Store(root) as st:
        rep = fsck(st)
        assert rep["ok"] and rep["unclean"] == 0, rep
        with st.open("f") as f:
            assert f.size == len(ref) and f.read(0, len(ref)) == ref.tobytes()
        oh = st.backend.open("f")           # the original's own objects hold every byte
        assert st.backend.read_at(oh, 0, len(ref)) == ref.tobytes()
        st.backend.close(oh)


# ---------------------------------------------------------------------- (d) sizes, crash
def _datafile_sizes(cl, root: Path, fid: int) -> dict[int, int]:
    """Server → size of its data file (fid, 0) from the rados tool's listing and stat:
    k_last * OBJ + size(object k_last) (pools and namespace from store.json)."""
    cfg = json.loads((root / "store.json").read_text())
    out = {}
    for j, n in enumerate(System.from_dict(cfg["profile"]).names):
        objs = _objects(cl, cfg["pools"][n], cfg["id"])
        ks = [(int(o.split(".")[2], 16), sz) for o, sz in objs.items() if o.startswith(f"{fid:08d}.0.")]
        out[j] = max(ks)[0] * OBJ + max(ks)[1] if ks else 0
    return out


def _recovered(lay, sizes: dict[int, int]) -> int:
    """max over servers j of min{x : C_j(x) >= size_j} (Layout.counts, bisection)."""
    servers, _ = lay.counts(np.zeros(1, dtype=np.int64))
    best = 0
    for i, j in enumerate(servers.tolist()):
        lo, hi = 0, 1 << 40
        while lo < hi:
            mid = (lo + hi) // 2
            if int(lay.counts(np.array([mid]))[1][i, 0]) >= sizes.get(j, 0):
                hi = mid
            else:
                lo = mid + 1
        best = max(best, lo)
    return best


def test_truncate_and_reserve(ceph_cluster, driver, tmp_path):
    cl = ceph_cluster
    root = _store(tmp_path, cl)
    lay = LAYOUTS["fixed"]                     # 4 KiB stripes over the 4 servers
    with Store(root, shared=True) as st:
        st.create("f", lay)
        fid = st.backend.meta.get("f")[0]
    blob, bp = _blob(tmp_path, 3, MiB)
    d = Driver(driver)
    d("open", root, "shared")
    h = d("fopen", "f")["h"]
    d("write", h, 0, 600_000, bp, 0)
    ref = blob[:600_000].copy()
    # shrink: objects past the end removed, the last one cut (Layout.counts per server)
    for size in (333_333, 4 * OBJ * 2 + 1, 700_001):
        d("trunc", h, size)
        ref = ref[:size] if size <= len(ref) else np.concatenate([ref, np.zeros(size - len(ref), np.uint8)])
        assert d("size", h)["size"] == size
        servers, c = lay.counts(np.array([size]))
        got = _datafile_sizes(cl, root, fid)
        assert {int(j): int(n) for j, n in zip(servers, c[:, 0])} == got, size
    # reserve under another writer: Python (another process of the shared store) wrote past
    # the point; C's reserve of a smaller end (its handle's size is older) cuts nothing
    with Store(root, shared=True) as st:
        with st.open("f") as f:
            f.write(800_000, blob[:150_000].tobytes())
            ref = _put(ref, 800_000, blob[:150_000])
            # the object of byte 899_999 holds more than that already
            d("reserve", h, 900_000)
            assert f.read(800_000, 150_000) == blob[:150_000].tobytes()
    # reserve past everything: the object of byte end - 1 grows to hold exactly it
    end = 1_234_567
    d("reserve", h, end)
    sub = map_requests(lay, np.array([end - 1]), np.array([1]))
    j, loc = int(sub.server[0]), int(sub.local[0])
    cfg = json.loads((root / "store.json").read_text())
    objs = _objects(cl, cfg["pools"][System.from_dict(cfg["profile"]).names[j]], cfg["id"])
    assert objs[f"{fid:08d}.0.{loc // OBJ:08x}"] == loc % OBJ + 1
    ref = np.concatenate([ref, np.zeros(end - len(ref), np.uint8)])
    assert d("size", h)["size"] == end
    d("fclose", h)
    d("close_store")
    d.close()
    with Store(root) as st:
        assert st.stat("f").size == end
        with st.open("f") as f:
            assert f.read(0, end + 100) == ref.tobytes()
        rep = fsck(st)
        assert rep["ok"], rep["problems"]


@pytest.mark.parametrize("kind,delay", [("fixed", 0.01), ("fixed", 0.04), ("varied", 0.02), ("varied", 0.08)])
def test_sigkill_mid_write_recovers_size_and_fsck_clean(ceph_cluster, driver, tmp_path, kind, delay):
    """A C writer killed (SIGKILL) while an extending 10 MiB write is in flight: the next C
    open recovers the size from the objects (equal to the one derived here from the rados
    tool's listing), every acknowledged byte is there, each byte of the killed write is its
    byte or 0 (a hole), and 'pario store fsck' is clean."""
    cl = ceph_cluster
    root = _store(tmp_path, cl)
    lay = LAYOUTS[kind]
    with Store(root) as st:
        st.create("f", lay)
        fid = st.backend.meta.get("f")[0]
    blob, bp = _blob(tmp_path, 4, 12 * MiB)
    d = Driver(driver)
    d("open", root)
    h = d("fopen", "f")["h"]
    ref = np.zeros(0, np.uint8)
    pos = 0
    for x, n in ((0, 200_000), (150_000, 100_000), (400_000, 77_777)):     # acknowledged
        d("write", h, x, n, bp, pos)
        ref = _put(ref, x, blob[pos:pos + n])
        pos += n
    acked = len(ref)
    x, n = acked + 5000, 10 * MiB
    d.p.stdin.write(f"write {h} {x} {n} {bp} {pos}\n")
    d.p.stdin.flush()
    time.sleep(delay)                 # in flight (the HDD pools take 16 MiB/s)
    d.p.kill()
    d.p.wait()
    d.p.stdin.close(), d.p.stdout.close(), d.p.stderr.close()
    want = _recovered(lay, _datafile_sizes(cl, root, fid))
    print(f"acked {acked}, killed write [{x}, {x + n}), recovered size {want}")
    assert acked <= want <= x + n
    d = Driver(driver)
    d("open", root)
    h = d("fopen", "f")["h"]
    assert d("size", h)["size"] == want
    out = tmp_path / "out.bin"
    d("read", h, 0, want, out, 0)
    got = np.fromfile(out, np.uint8)[:want]
    assert np.array_equal(got[:acked], ref)
    assert not got[acked:x].any()
    tail, new = got[x:want], blob[pos:pos + (want - x)]
    assert ((tail == new) | (tail == 0)).all()
    print(f"{kind}: {int((tail != new).sum())} bytes of the killed write not written (read as 0)")
    d("fclose", h)
    d("close_store")
    d.close()
    assert main(["store", "fsck", "--store", str(root)]) == 0
    with Store(root) as st:
        assert st.stat("f").size == want
        with st.open("f") as f:
            assert f.read(0, want) == got.tobytes()


def test_pario_run_serves_unmodified_ior_from_rados_through_ceda(ceph_cluster, lib, ior_bin, tmp_path):
    """The whole loop on Ceph: ``pario run`` traces unmodified IOR (random 16 KiB reads of a
    file created with striping hints over the two HDD-like servers), plans CEDA against that
    layout (the store's, not advise's default), copies the replicas into the rados store and
    serves run 2 from them. Checked: every request of run 2 hit the RMT, the plan was
    priced against the file's real layout (ORIG = the distribution model of fixed:64K@H0,H1
    on the traced requests), bytes equal to IOR without pario, fsck clean."""
    import json as _json

    from pario.layout import parse_layout
    from pario.model import DistributionModel
    from pario.store.root import read_config
    from pario.system import System
    from pario.trace import load as load_trace

    cl = ceph_cluster
    root = _store(tmp_path, cl)
    hints = tmp_path / "hints"
    hints.write_text("IOR_HINT__MPI__striping_factor=2\nIOR_HINT__MPI__striping_unit=65536\n")
    data = tmp_path / "ior.dat"
    common = ["-a", "MPIIO", "-k", "-G", "11", "-t", "16k", "-b", "512k", f"--mpiio.hintsFileName={hints}",
              "-o", str(data)]
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PARIO_") and k != "LD_PRELOAD"}
    cp = subprocess.run([*PARIO, "run",
                         "--json", "--procs", str(P), "--store", str(root),
                         "--out", str(out), "--schemes", "ceda", "--timeout", "300",
                         "--prepare=" + " ".join(["-w", *common]), str(ior_bin), "-r", "-z", "--random-offset-seed=5", *common],
                        capture_output=True, text=True, timeout=900, env=env)
    assert cp.returncode in (0, 1), cp.stderr[-2000:]
    s = _json.loads(cp.stdout)
    assert s["identical"] and s["fsck_ok"], s
    assert s["plain"]["identical"], s["plain"]
    assert s["replicas_planned"] > 0
    hits = s["redirected"]
    assert hits["requests"] == P * (512 // 16) and hits["hit_requests"] == hits["requests"], hits
    system = System.from_dict(read_config(root)["profile"])
    t1 = load_trace(out / "run1.parquet")
    orig = DistributionModel().trace_cost(t1, parse_layout("fixed:64K@H0,H1", system), system).predicted_s
    assert s["predicted"]["ORIG"] == pytest.approx(orig, rel=1e-6)
