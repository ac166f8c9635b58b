"""Testbed: clear refusal without root, state handling, nominal profile, and (as root with
loop devices and a blkio/io cgroup) a full up → calibrate → replay → down cycle that must
leave no loop device, mount or cgroup behind."""

from __future__ import annotations

import argparse
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from pario import ParioError
from pario.layout import Striped
from pario.model import DistributionModel
from pario.system import load_system
from pario.testbed import core
from pario.testbed.core import Testbed, TestbedServer
from pario.trace import Trace


def _can_build() -> bool:
    try:
        core.check_support()
        return True
    except ParioError:
        return False


needs_root = pytest.mark.skipif(not _can_build(), reason="needs root, loop devices and a blkio/io cgroup")


def test_without_root_one_clear_line(monkeypatch, tmp_path):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(ParioError) as ei:
        core.up(tmp_path / "tb", hdd=1, ssd=1)
    msg = str(ei.value)
    assert "root" in msg and "\n" not in msg
    assert not (tmp_path / "tb").exists()


def test_not_a_testbed(tmp_path):
    with pytest.raises(ParioError, match="not a pario testbed"):
        core.load_state(tmp_path)
    with pytest.raises(ParioError, match="not a pario testbed"):
        core.down(tmp_path)
    assert core.find_testbed(tmp_path) is None


def test_state_round_trip_and_find(tmp_path):
    tb = Testbed(dir=str(tmp_path), size=64 << 20, cgroup="/sys/fs/cgroup/blkio/pario-x", servers=[
        TestbedServer("H0", "hdd", 250, 120 << 20, str(tmp_path / "pario-H0.img"), mount=str(tmp_path / "H0")),
        TestbedServer("S0", "ssd", 4000, 500 << 20, str(tmp_path / "pario-S0.img"), write_bps=400 << 20)])
    tb.save()
    (tmp_path / "H0" / "deep").mkdir(parents=True)
    back = core.find_testbed(tmp_path / "H0" / "deep")
    assert back == tb
    assert back.server("S0").limits() == {"read_iops": 4000, "write_iops": 4000, "read_bps": 500 << 20,
                                           "write_bps": 400 << 20}


def test_nominal_profile_is_one_over_the_limits(tmp_path):
    tb = Testbed(dir=str(tmp_path), size=64 << 20, servers=[
        TestbedServer("H0", "hdd", 200, 100 << 20, "x"), TestbedServer("S0", "ssd", 5000, 400 << 20, "y",
                                                                        write_iops=2500)])
    tb.save()
    sysm = core.nominal_system(tb)
    p = tmp_path / "n.toml"
    p.write_text(sysm.to_toml())
    s = load_system(p)
    assert s.names == ["H0", "S0"]
    assert s.servers[0].alpha_for(0, False) == pytest.approx(1 / 200)
    assert s.servers[0].beta_for(1) == pytest.approx(1 / (100 << 20))
    assert s.servers[1].alpha_for(1, True) == pytest.approx(1 / 2500)
    assert s.servers[1].alpha_for(0, True) == pytest.approx(1 / 5000)
    # blk-throttle passes q requests of B bytes in max(q/IOPS, B/BPS): the profile says so, and
    # a request near the knee costs the larger asymptote, not their sum
    assert [x.cost for x in s.servers] == ["max", "max"]
    one = Trace.from_arrays([0], None, [0], [0], [64 << 10])
    got = DistributionModel().trace_cost(one, Striped.fixed(64 << 10, [0]), s).predicted_s
    assert got == pytest.approx(max(1 / 200, (64 << 10) / (100 << 20)))


def test_cli_registers_and_rejects(tmp_path):
    from pario.cli import bench_cmd, testbed_cmd

    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    testbed_cmd.register(sub)
    bench_cmd.register(sub)
    args = parser.parse_args(["testbed", "status", str(tmp_path)])
    with pytest.raises(ParioError, match="not a pario testbed"):
        args.func(args)
    args = parser.parse_args(["bench", "run", "t.csv", "--store", str(tmp_path), "--layout", "fixed:64k"])
    with pytest.raises(ParioError, match="not a pario store"):
        args.func(args)


def test_status_free_space_and_pario_stores(monkeypatch, tmp_path, capsys):
    """pario testbed status on a testbed recorded but not built (its servers' mounts are plain
    directories here; the mount table and the loop devices faked): each server's free space and
    size are its file system's (os.statvfs, read here), and the store directories pario made on
    it (a live store's and a gone one's, as pario run --testbed places them) with the bytes of
    their data files (summed here from the directory) and whether their store still uses them;
    the images' file system's free space; the printed table and the hint to pario store gc.
    Nothing is changed."""
    import shutil

    from pario.cli import main
    from pario.store import Store, init_store

    d = tmp_path / "tb"
    d.mkdir()
    mnt = {n: d / n for n in ("H0", "H1")}
    for m in mnt.values():
        m.mkdir()
    tb = Testbed(dir=str(d), size=64 << 20, complete=True, servers=[
        TestbedServer(n, "hdd", 200, 100 << 20, str(d / f"{n}.img"), loop=f"/dev/loop9{k}", mount=str(m),
                      mounted=True) for k, (n, m) in enumerate(mnt.items())])
    tb.save()
    monkeypatch.setattr(core, "_mounts", lambda: [(f"/dev/loop9{k}", str(m), "ext4", "rw")
                                                   for k, m in enumerate(mnt.values())])
    monkeypatch.setattr(core, "_loops_backed_by", lambda image: [f"/dev/loop9{0 if 'H0' in image else 1}"])
    for name in ("live", "gone"):
        root = tmp_path / name
        init_store(root, "ceda-hdd8", {n: str(m / f"pario-run-{name}") for n, m in mnt.items()})
        with Store(root) as st:
            st.create("f", "fixed:64K@H0,H1")
            with st.open("f") as f:
                f.write(0, b"y" * (700_000 if name == "gone" else 200_000))
    shutil.rmtree(tmp_path / "gone")
    before = sorted(str(p) for p in d.rglob("*"))
    st = core.status(d)
    assert sorted(str(p) for p in d.rglob("*")) == before
    for r in st["servers"]:
        vfs = os.statvfs(r["mount"])
        assert (r["free"], r["total"]) == (vfs.f_bavail * vfs.f_frsize, vfs.f_blocks * vfs.f_frsize)
        got = {Path(x["dir"]).name: (x["in_use"], x["bytes"], x["data_files"]) for x in r["stores"]}
        want = {}
        for name in ("live", "gone"):
            files = [p for p in (Path(r["mount"]) / f"pario-run-{name}").iterdir() if p.name[0].isdigit()]
            want[f"pario-run-{name}"] = (name == "live", sum(p.stat().st_blocks * 512 for p in files), len(files))
        assert got == want and want["pario-run-gone"][1] > 0
    vfs = os.statvfs(d)
    assert (st["dir_free"], st["dir_total"]) == (vfs.f_bavail * vfs.f_frsize, vfs.f_blocks * vfs.f_frsize)
    capsys.readouterr()
    from pario.cli.common import console

    old = console.width
    console.width = 300
    try:
        main(["testbed", "status", str(d)])
    finally:
        console.width = old
    out = " ".join(capsys.readouterr().out.split())
    gone = sum(x["bytes"] for r in st["servers"] for x in r["stores"] if not x["in_use"])
    from pario.units import format_size

    assert f"2 server directory(ies) of stores that are gone hold {format_size(gone)}" in out
    assert f"pario store gc {d}" in out and "images' file system" in out


def _leftovers(d: Path) -> list[str]:
    out = []
    loops = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    out += [line for line in loops.splitlines() if str(d) in line]
    with open("/proc/mounts") as f:
        out += [line for line in f if str(d) in line]
    h = core.cgroup_hierarchy()
    if h:
        out += [n for n in os.listdir(h[1]) if n == core._cgroup_name(d.resolve())]
    return out


@needs_root
def test_up_calibrate_replay_down_leaves_nothing(tmp_path):
    """The CI cycle: tiny testbed, short calibration, one replay, teardown without leftovers."""
    from pario.calibrate.core import calibrate, parse_target
    from pario.store import init_store
    from pario.testbed.bench import replay
    from pario.workload.ior import ior
    from pario.layout import parse_layout

    d = tmp_path / "pario-ci-tb"
    iops_h, bps_h, iops_s, bps_s = 200, 64 << 20, 2000, 256 << 20
    try:
        tb = core.up(d, hdd=1, ssd=1, hdd_iops=iops_h, hdd_bps=bps_h, ssd_iops=iops_s, ssd_bps=bps_s, size=48 << 20)
        st = core.status(d)
        assert st["healthy"]
        assert st["servers"][0]["throttle"] == {"read_iops": iops_h, "write_iops": iops_h, "read_bps": bps_h,
                                                "write_bps": bps_h}
        # short calibration: α from the IOPS limit, β from the bandwidth limit (loose bounds: short run)
        cal = calibrate([parse_target(f"H0={d}/H0"), parse_target(f"S0={d}/S0")], sizes=[4096, 1 << 20, 4 << 20],
                        reps=2, min_time=0.25, file_size=16 << 20, network="tcp", net_reps=3, max_residual=0.5)
        h, s = cal.system.servers
        assert (h.kind, s.kind) == ("hdd", "ssd")
        assert h.alpha_for(0, False) == pytest.approx(1 / iops_h, rel=0.35)
        assert h.beta_for(1) == pytest.approx(1 / bps_h, rel=0.35)
        assert s.alpha_for(1, False) == pytest.approx(1 / iops_s, rel=0.35)
        assert s.beta_for(0) == pytest.approx(1 / bps_s, rel=0.35)
        # one replay through a store on the testbed's servers
        init_store(d / "store", cal.system, {"H0": str(d / "H0"), "S0": str(d / "S0")})
        trace = ior(procs=2, xfer=256 << 10, block=1 << 20, pattern="random", op="write")
        lay = parse_layout("fixed:64k", cal.system)
        res = replay(trace, d / "store", procs=2, layout=lay)
        assert res.bytes == 2 << 20
        assert int(res.mapped_bytes.sum()) == res.bytes  # conservation of the mapping
        # O_DIRECT: what reached each device is at least what the layout maps there (ext4 may add metadata)
        assert res.device_bytes is not None and np.all(res.device_bytes >= res.mapped_bytes)
        assert np.all(res.device_bytes <= res.mapped_bytes + (256 << 10))
        assert tb.cgroup and os.path.isdir(tb.cgroup)
        if _have_mpi():  # collective replay: MPI ranks inherit the cgroup; O_DIRECT bytes reach the devices
            from pario.testbed.bench import replay_collective

            tc = ior(procs=2, xfer=256 << 10, block=1 << 20, pattern="random", op="write", collective=True)
            rc = replay_collective(tc, d / "store", procs=2, layout=lay, order="hacio", cb_nodes=2,
                                   cb_buffer=256 << 10)
            assert rc.bytes == 2 << 20 and int(rc.mapped_bytes.sum()) == rc.bytes
            assert rc.device_bytes is not None and np.all(rc.device_bytes >= rc.mapped_bytes)
            assert np.all(rc.device_bytes <= rc.mapped_bytes + (256 << 10))
            # the pario_direct hint: every data file the ranks had open carried O_DIRECT, and every
            # rank ran inside the testbed's cgroup (replay_collective raises otherwise; checked here too)
            call = rc.calls[0]
            assert call["data_fds"] > 0 and call["direct_fds"] == call["data_fds"]
            assert call["cgroups"] == ["/" + os.path.basename(tb.cgroup)]
            # requests per server: the throttle passed some on every server, the devices completed them
            assert rc.device_ios is not None and np.all(rc.device_ios > 0)
            assert rc.block_ios is not None and np.all(rc.block_ios >= rc.device_ios)
    finally:
        if (d / core.STATE_FILE).exists():
            core.down(d)
    assert _leftovers(d) == []
    assert not list(d.glob("pario-*.img")) if d.exists() else True


def _direct_reads(path, chunks, threads: int = 1, size: int = 64 << 10) -> float:
    """Read ``chunks`` (offsets) of ``size`` bytes from ``path`` with O_DIRECT on ``threads``
    threads (queue depth 1 each); the wall time from a common start to the last completion."""
    import mmap
    import threading
    import time

    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    todo = list(chunks)
    lock = threading.Lock()
    start = threading.Barrier(threads + 1)

    def work():
        buf = mmap.mmap(-1, size)
        start.wait()
        while True:
            with lock:
                if not todo:
                    break
                off = todo.pop(0)
            os.preadv(fd, [buf], off)
        buf.close()

    ths = [threading.Thread(target=work) for _ in range(threads)]
    try:
        for th in ths:
            th.start()
        start.wait()
        t0 = time.perf_counter()
        for th in ths:
            th.join()
        return time.perf_counter() - t0
    finally:
        os.close(fd)


@needs_root
def test_window_gets_no_throttle_credit_from_earlier_io(tmp_path):
    """Regression (reproduce --engine testbed read runs 0.84 s where 8 MiB at 7.86 MB/s needs
    >= 0.97 s): blk-throttle counts idle time inside a slice that is still open as credit,
    so a window that starts < 200 ms after earlier I/O of the cgroup (here a trickle of
    64 KiB reads every 60 ms, which keeps the read slice open and mostly unused) passed
    ~0.2 s worth of bytes at once.  ``enter`` restarts the throttles, so the window gets
    the one slice of credit of an idle device and no more: B bytes take >= B/R - 100 ms."""
    import time

    d = tmp_path / "pario-credit"
    bps = 8 << 20
    try:
        tb = core.up(d, hdd=1, ssd=0, size=48 << 20)
        core.set_limits(tb, "H0", {"read_iops": 100000, "write_iops": 100000, "read_bps": bps, "write_bps": bps})
        path = d / "H0" / "probe.dat"
        with open(path, "wb") as f:  # outside the cgroup: unthrottled
            f.write(os.urandom(1 << 20) * 8)
            f.flush()
            os.fsync(f.fileno())
        n = 4 << 20
        for _ in range(2):
            with core.enter(tb):
                for i in range(6):
                    _direct_reads(path, [(6 << 20) + i * (64 << 10)])
                    time.sleep(0.06)
            with core.enter(tb):
                dt = _direct_reads(path, range(0, n, 64 << 10), threads=4)
            assert dt >= n / bps - core.THROTTLE_SLICE_S, (dt, n / bps)
    finally:
        if (d / core.STATE_FILE).exists():
            core.down(d)
    assert _leftovers(d) == []


@needs_root
def test_down_after_crash_midway(tmp_path, monkeypatch):
    """A failure inside up (here: mount refused) is cleaned up, and a stale state is released by down."""
    d = tmp_path / "pario-crash"
    real = core._run

    def failing(args, what):
        if args[0] == "mount":
            raise ParioError("simulated mount failure")
        return real(args, what)

    monkeypatch.setattr(core, "_run", failing)
    with pytest.raises(ParioError, match="simulated"):
        core.up(d, hdd=1, ssd=0, size=32 << 20)
    assert _leftovers(d) == []
    monkeypatch.setattr(core, "_run", real)
    # now simulate a crash: up completes, then the state survives but the process is gone
    core.up(d, hdd=1, ssd=1, size=32 << 20)
    core.down(d)
    assert _leftovers(d) == []


@needs_root
@pytest.mark.slow
def test_calibrate_recovers_throttle_within_20_percent(tmp_path):
    """Must-show: 2 HDD-like + 2 SSD-like servers; α ≈ 1/IOPS and β ≈ 1/BPS within 20 %."""
    from pario.calibrate.core import calibrate, parse_target

    d = tmp_path / "pario-2h2s"
    try:
        core.up(d, hdd=2, ssd=2, size=160 << 20)
        nominal = core.nominal_system(d)
        cal = calibrate([parse_target(f"{n}={d}/{n}") for n in ("H0", "H1", "S0", "S1")], reps=3,
                        file_size=64 << 20, network="none")
        for m, ref in zip(cal.system.servers, nominal.servers):
            for op in (0, 1):
                assert m.beta_for(op) == pytest.approx(ref.beta_for(op), rel=0.2), (m.name, op)
                for seq in (True, False):
                    assert m.alpha_for(op, seq) == pytest.approx(ref.alpha_for(op, seq), rel=0.2), (m.name, op, seq)
    finally:
        if (d / core.STATE_FILE).exists():
            core.down(d)
    assert _leftovers(d) == []


def _have_mpi() -> bool:
    import importlib.util

    if importlib.util.find_spec("mpi4py") is None:
        return False
    from pario.testbed.bench import mpiexec_path

    return mpiexec_path() is not None


@pytest.mark.skipif(not _have_mpi(), reason="needs mpi4py and mpiexec")
def test_collective_replay_writes_every_rank_s_bytes(tmp_path):
    """bench run --collective: 2 MPI ranks, one write_at_all through pario.mpi.File on a store
    file (hacio order, 2 aggregators); afterwards every request's bytes hold its MPI rank's
    fill byte (trace rank r runs on MPI rank r mod 2), and the layout mapping conserves bytes."""
    from pario.layout import parse_layout
    from pario.store import Store, init_store
    from pario.testbed.bench import replay_collective
    from pario.workload.ior import ior

    from pario.system import Network, Server, System

    system = System(name="t", servers=tuple(
        Server(name=n, kind=k, alpha=a, beta=b) for n, k, a, b in
        (("H0", "hdd", 4e-3, 1 / (120 << 20)), ("S0", "ssd", 5e-4, 1 / (400 << 20)),
         ("H1", "hdd", 4e-3, 1 / (120 << 20)), ("S1", "ssd", 5e-4, 1 / (400 << 20)))),
        network=Network(0.0, 0.0), procs_per_node=1)
    init_store(tmp_path / "store", system)
    trace = ior(procs=4, xfer=64 << 10, block=256 << 10, pattern="random", op="write", collective=True)
    lay = parse_layout("fixed:16k", system)
    res = replay_collective(trace, tmp_path / "store", procs=2, layout=lay, order="hacio", cb_buffer=128 << 10,
                            cb_nodes=2, keep=True)
    assert res.bytes == 1 << 20 and int(res.mapped_bytes.sum()) == res.bytes
    assert [c["op"] for c in res.calls] == ["write"] and res.calls[0]["aggregators"] == 2
    assert res.calls[0]["cycles"] >= 2  # 512 KiB per aggregator domain through a 128 KiB buffer
    st = Store(tmp_path / "store")
    try:
        f = st.open("bench/ior.dat")
        buf = bytearray(64 << 10)
        for r, off, n in zip(trace.rank.tolist(), trace.offset.tolist(), trace.length.tolist()):
            f.readinto(off, memoryview(buf)[:n])
            assert set(buf[:n]) == {r % 2}, (r, off)
        f.close()
    finally:
        st.close()


# ---------------------------------------------------------------------------- throttle estimate
def _two_servers(e=0.0, t=0.0):
    from pario.system import Network, Server, System

    return System(name="h1s1", servers=(Server(name="H0", kind="hdd", alpha=4e-3, beta=1 / (120 << 20)),
                                        Server(name="S0", kind="ssd", alpha=5e-4, beta=1 / (400 << 20))),
                  network=Network(e, t), procs_per_node=1)


def _small_collective_trace():
    """2 ranks write 8 × 64 KiB (512 KiB) collectively; rank = block index mod 2."""
    from pario.trace import Trace

    n = 8
    return Trace.from_arrays(np.arange(n) % 2, np.zeros(n, np.int64), np.ones(n, np.int64),
                             np.arange(n, dtype=np.int64) * (64 << 10), np.full(n, 64 << 10),
                             files=["f"], collective=True)


def test_throttle_estimate_by_hand():
    """fixed:64k over H0 S0, one aggregator, 256 KiB buffer.  ROMCIO: each of the 2 cycles holds
    blocks H S H S, the two H blocks contiguous on H0 (one 128 KiB request), same on S0.  HACIO
    (seed 004 Algorithm 1): cycle 0 = the four H blocks (one 256 KiB request), cycle 1 = S."""
    from pario.layout import parse_layout
    from pario.testbed.throttle import collective_io_estimate

    system = _two_servers()
    trace = _small_collective_trace()
    lay = parse_layout("fixed:64k", system)
    aH, bH, aS, bS = 4e-3, 1 / (120 << 20), 5e-4, 1 / (400 << 20)
    K = 1024
    est = lambda order, shape, split=None: collective_io_estimate(  # noqa: E731
        trace, system, lay, order=order, aggregators=1, cb_buffer=256 * K, shape=shape, split=split)
    r = est("romcio", "max")
    assert r.total_s == pytest.approx(2 * max(max(aH, 128 * K * bH), max(aS, 128 * K * bS)))   # 2 × 4 ms
    assert r.server_requests.tolist() == [2, 2] and r.server_bytes.tolist() == [256 * K, 256 * K]
    assert est("romcio", "additive").total_s == pytest.approx(2 * (aH + 128 * K * bH))
    h = est("hacio", "max")
    assert h.cycle_s == pytest.approx([max(aH, 256 * K * bH), max(aS, 256 * K * bS)])        # 4 ms + 0.625 ms
    assert h.server_requests.tolist() == [1, 1]
    assert est("hacio", "additive").total_s == pytest.approx(aH + 256 * K * bH + aS + 256 * K * bS)
    hs = est("hacio", "max", split=64 * K)   # the kernel cutting each request into 64 KiB ones
    assert hs.server_requests.tolist() == [4, 4]
    assert hs.total_s == pytest.approx(max(4 * aH, 256 * K * bH) + max(4 * aS, 256 * K * bS))
    # the same order of the two shapes flips: α + βs favours HACIO, max(nα, Bβ) does not here
    assert est("hacio", "additive").total_s < est("romcio", "additive").total_s
    with pytest.raises(ParioError, match="cost shape"):
        est("romcio", "sum")
    with pytest.raises(ParioError, match="split"):
        est("romcio", "max", split=0)


def test_throttle_additive_equals_simulator_without_network():
    """With e = t = 0 the simulator's collective makespan is its I/O phases alone, priced α + β·s:
    the additive estimate must reproduce it for every order (IOR random, 4 servers, 2 aggregators)."""
    from pario.layout import parse_layout
    from pario.simulate import simulate
    from pario.system import Network, Server, System
    from pario.testbed.throttle import collective_io_estimate
    from pario.workload.ior import ior

    system = System(name="h2s2", servers=tuple(
        Server(name=n, kind=k, alpha=a, beta=b) for n, k, a, b in
        (("H0", "hdd", 4e-3, 1 / (120 << 20)), ("H1", "hdd", 4e-3, 1 / (120 << 20)),
         ("S0", "ssd", 5e-4, 1 / (400 << 20)), ("S1", "ssd", 5e-4, 1 / (400 << 20)))),
        network=Network(0.0, 0.0), procs_per_node=1)
    trace = ior(procs=4, xfer=64 << 10, block=1 << 20, pattern="random", op="write", collective=True)
    for spec in ("fixed:64k", "fixed:256k"):
        lay = parse_layout(spec, system)
        for order in ("romcio", "cacio", "hacio"):
            sim = simulate(trace, system, lay, collective=True, order=order, aggregators=2, cb_buffer=512 << 10)
            est = collective_io_estimate(trace, system, lay, order=order, aggregators=2, cb_buffer=512 << 10,
                                         shape="additive")
            assert est.total_s == pytest.approx(sim.makespan_s, rel=1e-9), (spec, order)
            assert est.server_requests.tolist() == sim.server_subrequests.tolist()
            assert int(est.server_bytes.sum()) == int(trace.length.sum())


def test_collective_driver_sees_o_direct_and_cgroup(tmp_path):
    """The checks the collective driver reports: O_DIRECT flags of the fds under a directory
    (from /proc/self/fdinfo) and this process's block-I/O cgroup."""
    from pario.testbed.collective import data_fds, io_cgroup

    d = tmp_path / "srv"
    d.mkdir()
    plain = os.open(d / "a", os.O_RDWR | os.O_CREAT, 0o644)
    other = os.open(tmp_path / "outside", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        direct = os.open(d / "b", os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)
    except OSError:
        direct = None
    try:
        assert data_fds([str(d)]) == ((2, 1) if direct is not None else (1, 0))
        assert data_fds([str(tmp_path / "nothing")]) == (0, 0)
    finally:
        for fd in (plain, other, direct):
            if fd is not None:
                os.close(fd)
    cg = io_cgroup()
    assert cg.startswith("/")
    own = open("/proc/self/cgroup").read()
    assert f":{cg}\n" in own or own.endswith(f":{cg}")


def test_simulator_max_cost_equals_throttle_pricing_without_network():
    """A profile with ``cost = "max"`` (what calibrate finds on the testbed): the simulator serves
    each request in max(α, s·β).  Where a server's requests in a cycle lie on one side of the knee
    α/β this equals the token bucket's max(n·α, B·β) of :mod:`pario.testbed.throttle` (a second
    implementation), so with e = t = 0 the two must agree for every order."""
    import dataclasses

    from pario.layout import parse_layout
    from pario.simulate import simulate
    from pario.system import Network, Server, System
    from pario.testbed.throttle import collective_io_estimate
    from pario.workload.ior import ior

    servers = tuple(Server(name=n, kind=k, alpha=a, beta=b, cost="max") for n, k, a, b in
                    (("H0", "hdd", 4e-3, 1 / (120 << 20)), ("H1", "hdd", 4e-3, 1 / (120 << 20)),
                     ("S0", "ssd", 5e-4, 1 / (400 << 20)), ("S1", "ssd", 5e-4, 1 / (400 << 20))))
    system = System(name="h2s2max", servers=servers, network=Network(0.0, 0.0), procs_per_node=1)
    additive = dataclasses.replace(system, servers=tuple(dataclasses.replace(s, cost="additive") for s in servers))
    trace = ior(procs=4, xfer=64 << 10, block=1 << 20, pattern="random", op="write", collective=True)
    lay = parse_layout("fixed:64k", system)
    for order in ("romcio", "cacio", "hacio"):
        kw = dict(collective=True, order=order, aggregators=2, cb_buffer=512 << 10)
        sim = simulate(trace, system, lay, **kw)
        est = collective_io_estimate(trace, system, lay, order=order, aggregators=2, cb_buffer=512 << 10, shape="max")
        assert sim.makespan_s == pytest.approx(est.total_s, rel=1e-9), order
        assert sim.makespan_s < simulate(trace, additive, lay, **kw).makespan_s   # max(a, b) < a + b
