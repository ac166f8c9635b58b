"""pario cluster: a real Ceph cluster on this host.

Without root or Ceph only the parts that need neither run (the one-line refusal, ports,
ceph.conf, state, nominal profile); the rest uses one cluster for the module
(tests/ceph_fixture.py) and checks it with Ceph's own tools: ``ceph osd map`` for placement,
``ceph osd crush get-device-class`` for classes, ``rados`` (the Python module) for objects,
the blkio cgroup's own I/O counters for where bytes went, ``/proc``, ``/proc/mounts``,
``losetup -a`` and the cgroup hierarchy for what ``down`` leaves.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ceph_fixture import ceph_cluster, ceph_skip_reason  # noqa: F401  (ceph_cluster: the fixture)

from pario import ParioError
from pario.cli import main
from pario.cluster import conf as cconf
from pario.cluster import core, devices, pools
from pario.cluster.state import Cluster, ClusterServer, Daemon, find_cluster, load_state
from pario.system import load_system

pytestmark = [pytest.mark.ceph,                    # not in ./test: .ci/run runs them (-m ceph)
              pytest.mark.xdist_group("ceph")]  # with --dist loadgroup: one worker, one cluster


# ---------------------------------------------------------------------------- no root, no Ceph needed
def test_without_ceph_one_line_naming_the_setup(monkeypatch, tmp_path, capsys):
    real_which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda b: None if b.startswith("ceph") else real_which(b))
    rc = main(["cluster", "up", str(tmp_path / "c")])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.count("\n") == 1 and err.startswith("pario: error: ")
    assert "run scripts/setup.sh ceph (as root)" in err and "ceph-mon" in err
    assert not (tmp_path / "c").exists()


def test_without_rados_module_one_line(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(shutil, "which", lambda b: f"/usr/bin/{b}")
    monkeypatch.setitem(sys.modules, "rados", None)  # import rados → ImportError
    rc = main(["cluster", "up", str(tmp_path / "c")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1
    assert "'rados'" in err and "run scripts/setup.sh ceph (as root)" in err


def test_without_root_one_line(monkeypatch, tmp_path):
    monkeypatch.setattr(shutil, "which", lambda b: f"/usr/bin/{b}")
    monkeypatch.setattr(core, "rados_module", lambda: None)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(ParioError) as ei:
        core.up(tmp_path / "c", hdd=1, ssd=0)
    assert "root" in str(ei.value) and "\n" not in str(ei.value)
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize("kw, what", [(dict(hdd=0, ssd=0), "at least one server"),
                                      (dict(osd_size=512 << 20), "--osd-size"),
                                      (dict(hdd_bps=0), "--hdd-bps"),
                                      (dict(port_base=80), "--port-base")])
def test_bad_arguments_refused_before_anything(tmp_path, kw, what):
    with pytest.raises(ParioError, match=what):
        core.up(tmp_path / "c", **kw)
    assert not (tmp_path / "c").exists()


def test_ports_standard_and_moved():
    assert cconf.ports(4, None) == ((3300, 6789), (6800, 7300))
    (m2, m1), (lo, hi) = cconf.ports(4, 21000)
    assert (m2, m1) == (21000, 21001) and lo == 21002
    # 4 OSDs × 4 messengers × (msgr2 + msgr1) + manager + MDS (2 each) fit in the range
    assert hi - lo + 1 >= 4 * 4 * 2 + 2 + 2
    assert cconf.mon_addrs((21000, 21001)) == ["v2:127.0.0.1:21000", "v1:127.0.0.1:21001"]


def test_conf_text(tmp_path):
    text = cconf.conf_text(tmp_path, "f-s-i-d", cconf.mon_addrs((3300, 6789)), (6800, 7300),
                           {0: "pario-H0", 1: "pario-S0"})
    lines = [x.strip() for x in text.splitlines()]
    assert "mon host = [v2:127.0.0.1:3300,v1:127.0.0.1:6789]" in lines
    for k in ("cluster", "service", "client"):
        assert f"auth {k} required = none" in lines
    assert "osd pool default size = 1" in lines
    i = lines.index("[osd.1]")
    assert lines[i + 1] == "crush location = root=default host=pario-S0"
    client = lines[lines.index("[client]"):]
    assert f"rados osd op timeout = {cconf.CLIENT_OP_TIMEOUT}" in client
    assert f"rados mon op timeout = {cconf.CLIENT_MON_TIMEOUT}" in client
    assert all(str(tmp_path) in x for x in lines if x.startswith(("mon data =", "osd data =", "admin socket =", "log file =")))


def _state(tmp_path) -> Cluster:
    cl = Cluster(dir=str(tmp_path), fsid="x", mon_addrs=cconf.mon_addrs((3300, 6789)), bind_ports=[6800, 7300],
                 osd_size=2 << 30, servers=[
                     ClusterServer("H0", "hdd", 200, 100 << 20, str(tmp_path / "img/H0.img"), osd=0, pool="pario-H0"),
                     ClusterServer("S0", "ssd", 5000, 400 << 20, str(tmp_path / "img/S0.img"), osd=1, pool="pario-S0")],
                 daemons=[Daemon("mon.a", 123, ["ceph-mon"], "log")])
    cl.save()
    (tmp_path / "ceph.conf").write_text("")
    return cl


def test_state_round_trip_and_find(tmp_path):
    cl = _state(tmp_path)
    (tmp_path / "mnt" / "deep").mkdir(parents=True)
    assert load_state(tmp_path) == cl
    assert find_cluster(tmp_path / "mnt" / "deep") == cl
    assert cl.server("S0").osd == 1 and cl.daemon("mon.a").pid == 123
    with pytest.raises(ParioError, match="no server"):
        cl.server("H9")
    with pytest.raises(ParioError, match="not a pario cluster"):
        load_state(tmp_path / "mnt")


def test_nominal_profile_is_one_over_the_throttles(tmp_path):
    cl = _state(tmp_path)
    p = tmp_path / "n.toml"
    p.write_text(core.nominal_system(cl, {"H0": 1.5e9}).to_toml())
    s = load_system(p)
    assert s.names == ["H0", "S0"] and [x.kind for x in s.servers] == ["hdd", "ssd"]
    for srv, iops, bps in zip(s.servers, (200, 5000), (100 << 20, 400 << 20)):
        for op in (0, 1):
            assert srv.alpha_for(op, False) == pytest.approx(1 / iops)
            assert srv.alpha_for(op, True) == pytest.approx(1 / iops)
            assert srv.beta_for(op) == pytest.approx(1 / bps)
    assert s.servers[0].capacity == 1.5e9 and s.servers[1].capacity == float("inf")


# ---------------------------------------------------------------------------- helpers on a real cluster
def ceph(cl, *args):
    """Ceph's own command-line tool on the cluster, JSON output."""
    res = subprocess.run(["ceph", "-c", cl.conf, "--connect-timeout", "20", *args, "--format", "json"],
                         capture_output=True, text=True, timeout=90)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def written_bytes(s: ClusterServer) -> int:
    """Bytes written to the server's loop device by processes in its cgroup (the kernel's count)."""
    for line in Path(s.cgroup, "blkio.throttle.io_service_bytes").read_text().splitlines():
        parts = line.split()
        if parts[:2] == [s.majmin, "Write"]:
            return int(parts[2])
    return 0


def leftovers(d: Path, pids: list[int], cgroups: list[str]) -> list[str]:
    """Everything of the cluster in ``d`` that still exists: processes, mounts, loop devices, cgroups."""
    out = []
    for e in os.listdir("/proc"):
        if e.isdigit():
            try:
                cmd = Path(f"/proc/{e}/cmdline").read_bytes()
            except OSError:
                continue
            if str(d).encode() in cmd:
                out.append(f"process {e}: {cmd!r}")
    out += [f"pid {p} still in /proc" for p in pids if os.path.exists(f"/proc/{p}")]
    out += [f"mount {line}" for line in Path("/proc/mounts").read_text().splitlines() if str(d) in line]
    losetup = subprocess.run(["losetup", "-a"], capture_output=True, text=True, timeout=30).stdout
    out += [f"loop {line}" for line in losetup.splitlines() if str(d) in line]
    out += [f"cgroup {cg}" for cg in cgroups if os.path.exists(cg)]
    out += [f"cgroup {cg}" for cg in devices.leftover_cgroups(d)]
    return out


# ---------------------------------------------------------------------------- the module's cluster
def test_up_healthy(ceph_cluster):
    cl = ceph_cluster
    st = core.status(cl.dir)
    assert st["healthy"], st
    assert st["health"]["status"] == "HEALTH_OK"
    assert "up:active" in st["mds"]
    assert {x["name"] for x in st["daemons"]} == {"mon.a", "mgr.x", "mds.a", "client.fuse",
                                                  *(f"osd.{s.osd}" for s in cl.servers)}
    assert [s.name for s in cl.servers] == ["H0", "H1", "S0", "S1"]
    # Ceph's own view: HEALTH_OK, the MDS active, every OSD up and in
    assert ceph(cl, "health")["status"] == "HEALTH_OK"
    fs = ceph(cl, "fs", "dump")["filesystems"]
    assert [i["state"] for f in fs for i in f["mdsmap"]["info"].values()] == ["up:active"]
    osds = ceph(cl, "osd", "dump")["osds"]
    assert sorted((o["osd"], o["up"], o["in"]) for o in osds) == [(s.osd, 1, 1) for s in cl.servers]
    # every OSD process runs inside its own throttled cgroup, with its device's limits
    for s in cl.servers:
        pid = cl.daemon(f"osd.{s.osd}").pid
        assert [int(x) for x in Path(s.cgroup, "cgroup.procs").read_text().split()] == [pid]
        want_bps = s.bps
        assert f"{s.majmin} {want_bps}" in Path(s.cgroup, "blkio.throttle.write_bps_device").read_text()
        assert f"{s.majmin} {s.iops}" in Path(s.cgroup, "blkio.throttle.read_iops_device").read_text()
    # the nominal profile names the servers and prices them from the throttles
    prof = load_system(Path(cl.dir) / "nominal.toml")
    assert prof.names == [s.name for s in cl.servers]
    for srv, s in zip(prof.servers, cl.servers):
        assert srv.kind == s.kind and srv.alpha == pytest.approx(1 / s.iops) and srv.beta == pytest.approx(1 / s.bps)
        assert 0 < srv.capacity < cl.osd_size


def test_status_cli(ceph_cluster, capsys):
    assert main(["cluster", "status", ceph_cluster.dir, "--json"]) == 0
    st = json.loads(capsys.readouterr().out)
    assert st["healthy"] and [r["device_class"] for r in st["servers"]] == ["hdd", "hdd", "ssd", "ssd"]
    assert main(["cluster", "status", ceph_cluster.dir]) == 0
    words = capsys.readouterr().out.split()
    assert "HEALTH_OK" in words and "mounted" in words
    assert [w for w in words if w in ("H0", "H1", "S0", "S1")] == ["H0", "H1", "S0", "S1"]
    assert [r["pool"] for r in st["servers"]] == ["pario-H0", "pario-H1", "pario-S0", "pario-S1"]


def test_device_classes_read_back(ceph_cluster):
    cl = ceph_cluster
    for s in cl.servers:
        assert ceph(cl, "osd", "crush", "get-device-class", f"osd.{s.osd}") == [{"osd": s.osd, "device_class": s.kind}]
    # each OSD alone in its own host bucket
    nodes = {n["name"]: n for n in ceph(cl, "osd", "tree")["nodes"]}
    for s in cl.servers:
        assert nodes[s.host]["type"] == "host" and nodes[s.host]["children"] == [s.osd]


def test_server_pools_place_exactly_on_their_osd(ceph_cluster):
    import rados

    cl = ceph_cluster
    host_osds = {n["name"]: n.get("children") for n in ceph(cl, "osd", "tree")["nodes"]}
    r = rados.Rados(conffile=cl.conf)
    r.connect(timeout=20)

    def osd_map(pool, obj):  # the monitor's own mapping, as `ceph osd map POOL OBJ` prints it
        ret, out, err = r.mon_command(json.dumps({"prefix": "osd map", "pool": pool, "object": obj,
                                                  "format": "json"}), b"")
        assert ret == 0, err
        return json.loads(out)

    try:
        for s in cl.servers:
            assert host_osds[s.host] == [s.osd]
            before = {x.name: written_bytes(x) for x in cl.servers}
            io = r.open_ioctx(s.pool)
            blobs = {f"obj-{s.name}-{i}": os.urandom(1 << 20) for i in range(4)}
            for name, b in blobs.items():
                io.write_full(name, b)
            for name, b in blobs.items():
                assert io.read(name, len(b) + 1) == b
                m = osd_map(s.pool, name)
                assert m["acting"] == m["up"] == [s.osd], m
            io.close()
            # the command-line tool says the same
            assert ceph(cl, "osd", "map", s.pool, f"obj-{s.name}-0")["acting"] == [s.osd]
            # the kernel's count agrees: the 4 MiB went to this server's device
            grew = {x.name: written_bytes(x) - before[x.name] for x in cl.servers}
            assert grew[s.name] >= 4 << 20, grew
            assert all(g < 2 << 20 for n, g in grew.items() if n != s.name), grew
        # class pools: objects on OSDs of that class only
        classes = {s.osd: s.kind for s in cl.servers}
        for kind in ("hdd", "ssd"):
            for i in range(16):
                m = osd_map(f"{pools.PREFIX}{kind}", f"c{i}")
                assert len(m["acting"]) == 1 and classes[m["acting"][0]] == kind
    finally:
        r.shutdown()


def test_cephfs_file_reads_back_and_lives_in_the_data_pool(ceph_cluster):
    cl = ceph_cluster
    data = os.urandom(3 << 20)
    f = Path(cl.mount) / "hello.bin"
    with open(f, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    assert f.read_bytes() == data
    ino = os.stat(f).st_ino
    res = subprocess.run(["rados", "-c", cl.conf, "-p", cl.fs_pools["data"], "ls"], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, res.stderr
    objs = {x for x in res.stdout.split() if x.startswith(f"{ino:x}.")}
    assert len(objs) == 1, objs  # 3 MiB < the default 4 MiB object: one object of this file
    f.unlink()


def test_throttled_osd_slower_than_unthrottled(ceph_cluster):
    """H0 and H1 are alike (class, tuning, throttle); lift H1's throttle, write the same objects
    to both in alternation, restore it.  Throttled / unthrottled time: a ratio, not a time."""
    import rados

    cl = ceph_cluster
    h0, h1 = cl.server("H0"), cl.server("H1")
    files = [f"blkio.throttle.{k}_device" for k in ("read_bps", "write_bps", "read_iops", "write_iops")]
    r = rados.Rados(conffile=cl.conf)
    r.connect(timeout=20)
    data = os.urandom(4 << 20)
    t = {"H0": 0.0, "H1": 0.0}
    try:
        for fname in files:  # 0 removes the device's rule
            Path(h1.cgroup, fname).write_text(f"{h1.majmin} 0\n")
        assert not devices.read_throttle(cl, h1)
        ios = {s.name: r.open_ioctx(s.pool) for s in (h0, h1)}
        devices.restart_throttle(cl)
        for i in range(6):
            for name in ("H0", "H1"):
                t0 = time.perf_counter()
                ios[name].write_full(f"thr-{i}", data)
                t[name] += time.perf_counter() - t0
        for io in ios.values():
            io.close()
    finally:
        r.shutdown()
        devices.throttle(cl, h1)
    assert devices.read_throttle(cl, h1) == h1.limits()
    ratio = t["H0"] / t["H1"]
    print(f"24 MiB: throttled H0 {t['H0']:.2f} s, unthrottled H1 {t['H1']:.2f} s, ratio {ratio:.1f}")
    # 16 MiB/s and 250 IOPS make each 4 MiB write ≥ 0.25 s; unthrottled it takes a few tens of ms
    assert ratio > 2.0, t


def _osd_config(cl, osd: int, key: str) -> str:
    out = subprocess.run(["ceph", "-c", cl.conf, "tell", f"osd.{osd}", "config", "get", key], capture_output=True,
                         text=True, timeout=60, check=True).stdout
    return json.loads(out)[key]


def test_calibrate_cluster_server_prices_its_device_requests(ceph_cluster, tmp_path):
    """``pario calibrate --cluster`` on H0 through librados.  Independently of pario: a read of a
    prefilled object is one device request per BlueStore blob (``bluestore_max_blob_size_<type>``
    of the OSD, as Ceph reports it), each passing H0's blk-throttle (cluster.json: IOPS and
    bytes/s).  So a 4 KiB random read costs α ≈ 1/IOPS, and each further byte
    β ≈ max(1/(IOPS · blob), 1/BPS); within 35 % (throttle granularity, other load)."""
    cl = ceph_cluster
    h0 = cl.server("H0")
    out = tmp_path / "cal.toml"
    rc = main(["calibrate", "--cluster", cl.dir, "--server", "H0", "--sizes", "4k,64k,1m,4m", "--reps", "2",
               "--network", "none", "--min-time", "0.3", "-o", str(out)])
    assert rc == 0
    prof = load_system(str(out))
    assert list(prof.names) == ["H0"] and prof.servers[0].kind == "hdd"
    s = prof.servers[0]
    meta = json.loads(subprocess.run(["ceph", "-c", cl.conf, "osd", "metadata", str(h0.osd), "-f", "json"],
                                     capture_output=True, text=True, timeout=60, check=True).stdout)
    kind = meta["bluestore_bdev_type"]
    blob = int(_osd_config(cl, h0.osd, f"bluestore_max_blob_size_{kind}"))
    want_alpha = 1.0 / h0.iops
    want_beta = max(1.0 / (h0.iops * blob), 1.0 / h0.bps)
    print(f"H0: α read rand {s.alpha_read_rand * 1e3:.2f} ms (want {want_alpha * 1e3:.2f}), β read "
          f"{s.beta_read * 1e9:.1f} ns/B (want {want_beta * 1e9:.1f}; blob {blob} B)")
    assert abs(s.alpha_read_rand - want_alpha) <= 0.35 * want_alpha
    assert abs(s.beta_read - want_beta) <= 0.35 * want_beta
    assert s.capacity > 0 and s.capacity <= 2 * (4 << 30)
    # the scratch objects are gone
    import rados

    r = rados.Rados(conffile=cl.conf)
    r.connect(timeout=20)
    try:
        io = r.open_ioctx(h0.pool)
        io.set_namespace(rados.LIBRADOS_ALL_NSPACES)
        left = [o.key for o in io.list_objects() if o.key.startswith("calibrate.")]
        io.close()
    finally:
        r.shutdown()
    assert not left


def test_failed_up_releases_everything(tmp_path, monkeypatch):
    """A partial up (failure after the OSDs started) leaves nothing, and down again is a no-op."""
    reason = ceph_skip_reason()
    if reason:
        pytest.skip(reason)
    from ceph_fixture import free_port_base

    d = tmp_path / "partial"

    def boom(r, cl):
        raise ParioError("injected failure after the pools")

    monkeypatch.setattr(pools, "verify_placement", boom)
    with pytest.raises(ParioError, match="injected failure") as ei:
        core.up(d, hdd=1, ssd=0, osd_size=1 << 30, port_base=free_port_base(1))
    assert "cluster released" in str(ei.value)
    assert leftovers(d, [], []) == []
    assert (d / "log").is_dir() and not (d / "img").exists()  # logs kept for the post-mortem
    assert core.down(d) == []


def test_every_read_of_fresh_small_objects_reaches_the_device(ceph_cluster):
    """An HDD-class OSD defers writes of up to 64 KiB through its RocksDB WAL and serves reads of
    them from memory until it applies them (16-55 of 64 fresh 16 KiB objects read with no device
    request, before and after `cache drop`); the cluster turns that off, so each read of a CEDA
    replica just copied pays the device as the model prices it.  And `pario.cluster.caches`
    reports every OSD's caches and empties them."""
    import rados

    from pario.cluster import caches

    cl = ceph_cluster
    s = next(x for x in cl.servers if x.kind == "hdd")
    r = rados.Rados(conffile=cl.conf)
    r.connect(timeout=20)
    try:
        io = r.open_ioctx(s.pool)
        blobs = {f"fresh-{i}": os.urandom(16 << 10) for i in range(64)}
        for name, b in blobs.items():
            io.write_full(name, b)
        n0, b0 = read_requests(s)
        for name, b in blobs.items():
            assert io.read(name, len(b)) == b
        n1, b1 = read_requests(s)
        io.close()
    finally:
        r.shutdown()
    assert b1 - b0 >= len(blobs) * (16 << 10), (n1 - n0, b1 - b0)
    held = caches.status(cl.conf)
    assert sorted(held) == sorted(x.osd for x in cl.servers)
    assert all("bluestore_buffers" in v and "bluestore_onode" in v for v in held.values())
    dropped = caches.drop(cl.conf)
    assert sorted(dropped) == sorted(held)
    after = caches.status(cl.conf)
    assert caches.buffers(after) == 0 and all(v["bluestore_onode"] <= dropped[k]["bluestore_onode"]
                                              for k, v in after.items())


def test_zz_down_after_a_crash_leaves_nothing(ceph_cluster, capsys):
    """Last test of the module: SIGKILL the monitor and an OSD (a crash), then down."""
    import signal

    cl = ceph_cluster
    d = Path(cl.dir)
    pids = [dm.pid for dm in cl.daemons]
    cgroups = [s.cgroup for s in cl.servers]
    os.kill(cl.daemon("mon.a").pid, signal.SIGKILL)
    os.kill(cl.daemon("osd.1").pid, signal.SIGKILL)
    assert leftovers(d, pids, cgroups) != []
    assert main(["cluster", "down", str(d)]) == 0
    assert leftovers(d, pids, cgroups) == []
    assert not d.exists()
    assert main(["cluster", "down", str(d)]) == 0  # idempotent
    assert "nothing to release" in capsys.readouterr().out


def read_requests(s) -> tuple[int, int]:
    """(read requests, bytes read) of server ``s``'s loop device, as the kernel counts them."""
    f = Path(f"/sys/block/{os.path.basename(s.loop)}/stat").read_text().split()
    return int(f[0]), int(f[2]) * 512
