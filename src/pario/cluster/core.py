"""Cluster life cycle: ``up``, ``status``, ``down``, and the nominal system profile.

See the package docstring for the design.  Order of ``up`` (each resource recorded in
``DIR/cluster.json`` as soon as it exists): images, loop devices and throttled cgroups →
ceph.conf → monitor (mkfs, start) → manager → OSDs (``osd new``, BlueStore mkfs on the
loop device, device class file, start inside the OSD's cgroup) → CRUSH rules and pools,
placement verified → CephFS and its MDS → ``ceph-fuse`` at ``DIR/mnt`` → HEALTH_OK, every
PG active+clean → ``DIR/nominal.toml``.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import socket
import subprocess
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path

from .. import ParioError
from ..testbed import core as tb
from . import conf as confmod
from . import daemons, devices, pools
from .client import INSTALL_HINT, mon, rados_module, session
from .state import CALIBRATED_PROFILE, CONF_FILE, MOUNT_DIR, NOMINAL_PROFILE, STATE_FILE, Cluster, ClusterServer, Daemon, load_state

# Defaults: the testbed's HDD-like and SSD-like throttles (docs/calibration.md)
DEFAULT_HDD_IOPS = tb.DEFAULT_HDD_IOPS
DEFAULT_HDD_BPS = tb.DEFAULT_HDD_BPS
DEFAULT_SSD_IOPS = tb.DEFAULT_SSD_IOPS
DEFAULT_SSD_BPS = tb.DEFAULT_SSD_BPS
DEFAULT_OSD_SIZE = 4 << 30     # sparse: only what is written takes space (1 GiB OSDs hit ENOSPC)
MIN_OSD_SIZE = 1 << 30
BINARIES = ("ceph-mon", "ceph-mgr", "ceph-osd", "ceph-mds", "ceph-fuse", "monmaptool", "losetup", "fusermount")
UP_TIMEOUT = 150.0             # s for each wait of up (daemons, PGs, MDS, mount)
_FILES = ("img", "mon", "mgr", "osd", "mds", "run", "monmap", CONF_FILE, NOMINAL_PROFILE, CALIBRATED_PROFILE, STATE_FILE,
          STATE_FILE[:-5] + ".tmp")


# ---------------------------------------------------------------------------- environment
def check_support() -> tuple[int, str]:
    """Raise a one-line ParioError unless this process can run a cluster; the cgroup hierarchy."""
    missing = [b for b in BINARIES if shutil.which(b) is None]
    if any(b.startswith(("ceph", "monmap")) for b in missing):
        raise ParioError(f"pario cluster needs Ceph ({', '.join(missing)} not found); {INSTALL_HINT}")
    rados_module()
    if os.geteuid() != 0:
        raise ParioError("pario cluster needs root (it creates loop devices, blkio cgroups and a FUSE mount); "
                         "run it as root or with sudo")
    if missing:
        raise ParioError(f"pario cluster needs the {missing[0]!r} command (util-linux / fuse)")
    if not os.path.exists("/dev/loop-control"):
        raise ParioError("pario cluster needs loop devices, but /dev/loop-control is missing (modprobe loop?)")
    if not os.path.exists("/dev/fuse"):
        raise ParioError("pario cluster needs FUSE for ceph-fuse, but /dev/fuse is missing (modprobe fuse?)")
    h = tb.cgroup_hierarchy()
    if h is None:
        raise ParioError("pario cluster needs block-I/O throttling: no cgroup v1 'blkio' hierarchy with "
                         "blkio.throttle.* files and no cgroup v2 hierarchy with the 'io' controller")
    return h


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _mounts_under(d: Path) -> list[tuple[str, str]]:
    """(mount point, fs type) of every mount at or below ``d``."""
    return [(mnt, fs) for _dev, mnt, fs, _o in tb._mounts() if mnt == str(d) or mnt.startswith(str(d) + os.sep)]


# ---------------------------------------------------------------------------- up
def up(d: str | Path, *, hdd: int = 2, ssd: int = 2, hdd_iops: int = DEFAULT_HDD_IOPS, hdd_bps: int = DEFAULT_HDD_BPS,
       ssd_iops: int = DEFAULT_SSD_IOPS, ssd_bps: int = DEFAULT_SSD_BPS, osd_size: int = DEFAULT_OSD_SIZE,
       port_base: int | None = None, progress=None) -> Cluster:
    """Bring a cluster up in ``d`` (see the module docstring); on any failure release what was
    made (``down``, keeping ``DIR/log``) and re-raise."""
    if hdd < 0 or ssd < 0 or hdd + ssd == 0:
        raise ParioError("a cluster needs at least one server (--hdd N and/or --ssd M)")
    for what, v in (("--hdd-iops", hdd_iops), ("--hdd-bps", hdd_bps), ("--ssd-iops", ssd_iops), ("--ssd-bps", ssd_bps)):
        if v <= 0:
            raise ParioError(f"{what} must be > 0, got {v}")
    if osd_size < MIN_OSD_SIZE:
        raise ParioError(f"--osd-size must be at least 1 GiB (BlueStore), got {osd_size} bytes")
    n = hdd + ssd
    if port_base is not None and not 1024 <= port_base <= 65535 - confmod.bind_span(n) - 2:
        raise ParioError(f"--port-base must leave room for {confmod.bind_span(n) + 2} ports above 1024, got {port_base}")
    version, root = check_support()
    mon_ports, bind = confmod.ports(n, port_base)
    for p in mon_ports:
        if not _port_free(p):
            raise ParioError(f"port {p} on 127.0.0.1 is in use (another cluster?); choose other ports with --port-base")
    d = Path(d).resolve()
    d.mkdir(parents=True, exist_ok=True)
    if (d / STATE_FILE).exists():
        raise ParioError(f"{d} already holds a cluster; run 'pario cluster down {d}' first")
    if _mounts_under(d):
        raise ParioError(f"{d} has mounts below it; choose an empty directory")
    say = progress or (lambda m: None)
    t0 = time.monotonic()
    cl = Cluster(dir=str(d), fsid=str(uuid.uuid4()), mon_addrs=confmod.mon_addrs(mon_ports), bind_ports=list(bind),
                 osd_size=int(osd_size), cgroup_version=version, cgroup_root=root, created=time.time(),
                 mount=str(d / MOUNT_DIR))
    specs = [(f"H{i}", "hdd", hdd_iops, hdd_bps) for i in range(hdd)] + \
            [(f"S{i}", "ssd", ssd_iops, ssd_bps) for i in range(ssd)]
    for osd, (name, kind, iops, bps) in enumerate(specs):
        cl.servers.append(ClusterServer(name=name, kind=kind, iops=int(iops), bps=int(bps),
                                        image=str(d / "img" / f"{name}.img"), osd=osd,
                                        host=f"{pools.PREFIX}{name}", pool=f"{pools.PREFIX}{name}"))
    cl.save()
    try:
        _bring_up(cl, say)
        cl.up_seconds = round(time.monotonic() - t0, 1)
        cl.complete = True
        cl.save()
    except BaseException as exc:
        with contextlib.suppress(Exception):
            down(d, keep_logs=True)
        if isinstance(exc, ParioError):
            raise ParioError(f"{exc} (cluster released; daemon logs in {d / 'log'})") from None
        raise
    return cl


def _bring_up(cl: Cluster, say) -> None:
    d = Path(cl.dir)
    for sub in ("img", "mon", "mgr/ceph-x", "osd", "mds/ceph-a", "run", "log", MOUNT_DIR):
        (d / sub).mkdir(parents=True, exist_ok=True)
    conf = cl.conf
    say(f"{len(cl.servers)} loop devices (direct I/O) of {cl.osd_size >> 20} MiB, one throttled cgroup each")
    for s in cl.servers:
        s.loop, s.majmin = devices.attach(s.image, cl.osd_size)
        cl.save()
        devices.make_cgroup(cl, s)
        devices.throttle(cl, s)
    Path(conf).write_text(confmod.conf_text(d, cl.fsid, cl.mon_addrs, tuple(cl.bind_ports),
                                            {s.osd: s.host for s in cl.servers}))
    say(f"monitor on {' '.join(cl.mon_addrs)}, manager")
    tb._run(["monmaptool", "--create", "--clobber", "--fsid", cl.fsid, "--addv", "a", f"[{','.join(cl.mon_addrs)}]",
             str(d / "monmap")], "monmap")
    tb._run(["ceph-mon", "-c", conf, "--mkfs", "-i", "a", "--monmap", str(d / "monmap")], "monitor mkfs")
    _start(cl, "mon.a", ["ceph-mon", "-c", conf, "-f", "-i", "a"])
    _start(cl, "mgr.x", ["ceph-mgr", "-c", conf, "-f", "-i", "x"])
    with session(conf) as r:
        say(f"OSDs: BlueStore mkfs on {', '.join(s.loop for s in cl.servers)}")
        for s in cl.servers:
            s.uuid = str(uuid.uuid4())
            res = mon(r, "osd new", uuid=s.uuid)
            got = int(res["osdid"] if isinstance(res, dict) else res)
            if got != s.osd:
                raise ParioError(f"ceph osd new gave id {got} for {s.name}, expected {s.osd} (not a fresh cluster?)")
            cl.save()
            od = d / "osd" / f"ceph-{s.osd}"
            od.mkdir(parents=True, exist_ok=True)
            os.symlink(s.loop, od / "block")
        with ThreadPoolExecutor(max_workers=min(4, len(cl.servers))) as ex:
            for f in [ex.submit(_mkfs, cl, s) for s in cl.servers]:
                f.result()
        for s in cl.servers:
            _start(cl, f"osd.{s.osd}", ["ceph-osd", "-c", conf, "-f", "-i", str(s.osd)], cgroup=s.cgroup)
        daemons.wait_for(f"{len(cl.servers)} OSDs up and in", lambda: _osds_up(r, cl), UP_TIMEOUT,
                         detail=lambda: _osd_summary(r))
        say("CRUSH rules and pools: one per server (its OSD only), one per device class, CephFS")
        pools.create(r, cl)
        pools.verify_placement(r, cl)
        say(f"MDS, CephFS {cl.fs_name!r}")
        _start(cl, "mds.a", ["ceph-mds", "-c", conf, "-f", "-i", "a"])
        daemons.wait_for("HEALTH_OK, every PG active+clean and the MDS up:active", lambda: _ready(r, cl), UP_TIMEOUT,
                         detail=lambda: _health_summary(r))
        say(f"ceph-fuse at {cl.mount}")
        _start(cl, "client.fuse", ["ceph-fuse", "-c", conf, "-f", "--client_fs", cl.fs_name, cl.mount])
        daemons.wait_for(f"the CephFS mount at {cl.mount}", lambda: _mounted(cl), UP_TIMEOUT,
                         detail=lambda: "ceph-fuse " + ("running" if _alive(cl, "client.fuse") else "exited"))
        write_nominal_profile(cl, r)


def _start(cl: Cluster, name: str, cmd: list[str], cgroup: str | None = None) -> None:
    log = str(Path(cl.dir) / "log" / f"{name}.out")
    pid = daemons.spawn(cmd, log, cgroup=cgroup, cwd=cl.dir)
    cl.daemons.append(Daemon(name=name, pid=pid, cmd=cmd, log=log))
    cl.save()
    time.sleep(0.05)
    if not daemons.alive(pid, cl.conf):
        time.sleep(0.5)  # it may have exited: say why, from its output
        if not daemons.alive(pid, cl.conf):
            raise ParioError(f"{name} exited at once: {_last_line(log)}")


def _alive(cl: Cluster, name: str) -> bool:
    dm = cl.daemon(name)
    return dm is not None and daemons.alive(dm.pid, cl.conf)


def _last_line(path: str) -> str:
    try:
        lines = [x for x in Path(path).read_text(errors="replace").splitlines() if x.strip()]
    except OSError:
        return "no output"
    return lines[-1].strip() if lines else "no output"


def _mkfs(cl: Cluster, s: ClusterServer) -> None:
    od = Path(cl.dir) / "osd" / f"ceph-{s.osd}"
    tb._run(["ceph-osd", "-c", cl.conf, "-i", str(s.osd), "--mkfs", "--osd-uuid", s.uuid], f"BlueStore mkfs of {s.name}")
    # the CRUSH device class, read by the OSD at its first start (no set-device-class race)
    (od / "crush_device_class").write_text(f"{s.kind}\n")


def _osds_up(r, cl: Cluster) -> bool:
    dump = mon(r, "osd dump")
    state = {int(o["osd"]): (o["up"], o["in"]) for o in dump["osds"]}
    for s in cl.servers:
        if state.get(s.osd) != (1, 1):
            if not _alive(cl, f"osd.{s.osd}"):
                dm = cl.daemon(f"osd.{s.osd}")
                raise ParioError(f"osd.{s.osd} ({s.name}) exited: {_last_line(dm.log) if dm else '?'}")
            return False
    return True


def _osd_summary(r) -> str:
    return str(mon(r, "osd stat", check=False))


def _pg_states(r) -> dict[str, int]:
    st = mon(r, "pg stat")
    return {x["name"]: int(x["num"]) for x in st["pg_summary"]["num_pg_by_state"]}


def _mds_states(r, cl: Cluster) -> list[str]:
    dump = mon(r, "fs dump")
    for fs in dump.get("filesystems", []):
        if fs["mdsmap"]["fs_name"] == cl.fs_name:
            return [i["state"] for i in fs["mdsmap"]["info"].values()]
    return []


def _ready(r, cl: Cluster) -> bool:
    if not _alive(cl, "mds.a"):
        raise ParioError(f"mds.a exited: {_last_line(cl.daemon('mds.a').log)}")
    health = mon(r, "health")
    if health.get("status") != "HEALTH_OK":
        return False
    states = _pg_states(r)
    if set(states) != {"active+clean"} or states["active+clean"] < pools.PG_NUM * len(cl.pools):
        return False
    return "up:active" in _mds_states(r, cl)


def _health_summary(r) -> str:
    h = mon(r, "health")
    checks = "; ".join(f"{k}: {v['summary']['message']}" for k, v in h.get("checks", {}).items())
    return f"{h.get('status')}{': ' + checks if checks else ''}; PGs {_pg_states(r)}"


def _mounted(cl: Cluster) -> bool:
    return any(mnt == cl.mount and fs.startswith("fuse") for mnt, fs in _mounts_under(Path(cl.dir)))


# ---------------------------------------------------------------------------- nominal profile
def nominal_system(cl: Cluster, capacities: dict[str, float] | None = None):
    """The profile the throttles stand for (the testbed's :func:`pario.testbed.core.nominal_system`:
    α = 1/IOPS, β = 1/BPS; servers H0.., S0.. in that order), with each server's capacity
    (bytes it can still take before its OSD is full, from ``ceph osd df``) where known."""
    from dataclasses import replace

    view = tb.Testbed(dir=cl.dir, size=cl.osd_size, servers=[
        tb.TestbedServer(name=s.name, kind=s.kind, iops=s.iops, bps=s.bps, image=s.image) for s in cl.servers])
    sysm = tb.nominal_system(view)
    caps = capacities or {}
    servers = tuple(replace(sv, capacity=float(caps.get(sv.name, math.inf))) for sv in sysm.servers)
    return replace(sysm, name=f"cluster-{Path(cl.dir).name}-nominal", servers=servers,
                   description=f"nominal throttle settings of the pario Ceph cluster at {cl.dir} "
                               f"(one OSD per server; alpha = 1/IOPS, beta = 1/BPS)",
                   source={"how": "pario cluster up (throttle settings, not measured)"})


def capacities(r, cl: Cluster) -> dict[str, float]:
    """Bytes each server's OSD takes before Ceph calls it full: full ratio × size − used."""
    df = mon(r, "osd df")
    full = float(mon(r, "osd dump").get("full_ratio", 0.95))
    by_id = {int(x["id"]): x for x in df["nodes"]}
    out = {}
    for s in cl.servers:
        x = by_id.get(s.osd)
        if x and int(x.get("kb", 0)) > 0:
            out[s.name] = max(0.0, math.floor(full * int(x["kb"]) * 1024 - int(x["kb_used"]) * 1024))
    return out


CALIBRATION_SIZES = (4 << 10, 64 << 10, 1 << 20, 4 << 20)   # the store's requests: 4 KiB .. one object
CALIBRATION_REPS = 3


def calibrate_profile(d: str | Path, *, sizes=CALIBRATION_SIZES, reps: int = CALIBRATION_REPS, min_time: float = 0.2,
                      progress=None):
    """Measure every server of the cluster through its pool (:mod:`pario.calibrate.rados`: the
    rados store's requests, 4 MiB objects) and write ``DIR/calibrated.toml``; the
    :class:`pario.calibrate.core.Calibration`.  α and β are what a request costs through
    librados, the loopback messenger included, so the profile's network terms are 0.  Fits
    are kept whatever their residual (BlueStore's deferred small writes make a random
    write's cost less linear in its size than a disk's): the residuals are in the
    calibration's warnings and fits."""
    from ..calibrate.core import calibrate, cluster_targets

    cl = load_state(d)
    cal = calibrate(cluster_targets(cl.dir), sizes=sizes, reps=reps, min_time=min_time, network="none",
                    name=f"cluster-{Path(cl.dir).name}-calibrated", check=False, progress=progress)
    cal.warnings[:] = [w for w in cal.warnings if not w.startswith("network not measured")]
    text = cal.system.to_toml()
    (Path(cl.dir) / CALIBRATED_PROFILE).write_text(text)
    return cal


def profile_path(d: str | Path) -> Path:
    """The cluster's profile: ``calibrated.toml`` when ``up`` calibrated it, else ``nominal.toml``."""
    p = Path(d) / CALIBRATED_PROFILE
    return p if p.is_file() else Path(d) / NOMINAL_PROFILE


def write_nominal_profile(cl: Cluster, r=None) -> Path:
    caps = capacities(r, cl) if r is not None else None
    p = Path(cl.dir) / NOMINAL_PROFILE
    p.write_text(nominal_system(cl, caps).to_toml())
    return p


# ---------------------------------------------------------------------------- status
def status(d: str | Path, *, timeout: int = 10) -> dict:
    """Daemons, health, OSDs (class, pool, up/in, usage, loop device, throttle), mount."""
    cl = load_state(d)
    out: dict = {"dir": cl.dir, "fsid": cl.fsid, "conf": cl.conf, "mon": cl.mon_addrs, "complete": cl.complete,
                 "up_seconds": cl.up_seconds, "fs": cl.fs_name, "fs_pools": cl.fs_pools, "pools": cl.pools,
                 "cgroup_version": cl.cgroup_version}
    out["daemons"] = [{"name": dm.name, "pid": dm.pid, "alive": daemons.alive(dm.pid, cl.conf)} for dm in cl.daemons]
    out["mount"] = {"path": cl.mount, "mounted": _mounted(cl)}
    health, osd_info, mds = None, {}, []
    if _alive(cl, "mon.a"):
        try:
            with session(cl.conf, timeout=timeout, op_timeout=timeout) as r:
                h = mon(r, "health")
                health = {"status": h.get("status"),
                          "checks": {k: v["summary"]["message"] for k, v in h.get("checks", {}).items()}}
                dump = {int(o["osd"]): o for o in mon(r, "osd dump")["osds"]}
                tree = {int(x["id"]): x for x in mon(r, "osd tree")["nodes"] if x["id"] >= 0}
                df = {int(x["id"]): x for x in mon(r, "osd df")["nodes"]}
                for s in cl.servers:
                    o, t, u = dump.get(s.osd, {}), tree.get(s.osd, {}), df.get(s.osd, {})
                    osd_info[s.name] = {"up": bool(o.get("up")), "in": bool(o.get("in")),
                                        "device_class": t.get("device_class"),
                                        "used": int(u.get("kb_used", 0)) * 1024, "size": int(u.get("kb", 0)) * 1024}
                mds = _mds_states(r, cl)
        except ParioError as exc:
            health = {"status": "unreachable", "checks": {"connect": str(exc)}}
    else:
        health = {"status": "unreachable", "checks": {"mon.a": "not running"}}
    out["health"] = health
    out["mds"] = mds
    rows = []
    for s in cl.servers:
        dm = cl.daemon(f"osd.{s.osd}")
        in_cg = bool(dm and s.cgroup and dm.pid in devices.cgroup_procs(s.cgroup))
        rows.append({**asdict(s), "attached": bool(s.loop) and s.loop in devices.loops_of(s.image),
                     "throttle": devices.read_throttle(cl, s) if s.cgroup and os.path.isdir(s.cgroup) else None,
                     "osd_in_cgroup": in_cg, **osd_info.get(s.name, {})})
    out["servers"] = rows
    out["healthy"] = bool(
        cl.complete and all(x["alive"] for x in out["daemons"]) and out["mount"]["mounted"]
        and health and health["status"] == "HEALTH_OK" and "up:active" in mds
        and all(r["attached"] and r["throttle"] and r["osd_in_cgroup"] and r.get("up") for r in rows))
    return out


# ---------------------------------------------------------------------------- down
def down(d: str | Path, *, keep_logs: bool = False, timeout: float = 20.0, progress=None) -> list[str]:
    """Release everything the cluster at ``d`` made: mount, processes (SIGTERM by PID, SIGKILL
    after ``timeout`` s), cgroups, loop devices, then its files.

    Works from ``DIR/cluster.json`` and also finds, by scanning, processes whose command line
    names ``DIR/ceph.conf``, mounts below DIR, loop devices over ``DIR/img/*.img`` and cgroups
    named for DIR — after a crash or a partial ``up`` too.  Idempotent: with nothing left it
    returns an empty list.  Raises ParioError if something could not be released (a busy mount
    is left alone, with every daemon still running, so that nothing hangs on it).
    """
    d = Path(d).resolve()
    say = progress or (lambda m: None)
    conf = str(d / CONF_FILE)
    cl = load_state(d) if (d / STATE_FILE).exists() else None
    if os.geteuid() != 0:
        raise ParioError("pario cluster down needs root (it unmounts, signals daemons and detaches loop devices)")
    done: list[str] = []
    problems: list[str] = []
    # 1. the mount(s): first, while ceph-fuse still serves them
    for mnt, fs in sorted(_mounts_under(d), key=lambda m: len(m[0]), reverse=True):
        cmd = ["fusermount", "-u", mnt] if fs.startswith("fuse") else ["umount", mnt]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        if res.returncode != 0 and fs.startswith("fuse"):  # fusermount refuses a mount it did not make
            res = subprocess.run(["umount", mnt], capture_output=True, text=True, timeout=60)
        if res.returncode != 0:
            why = res.stderr.strip().splitlines()[-1] if res.stderr.strip() else "busy"
            raise ParioError(f"cannot unmount {mnt} ({why}); stop what uses it (see 'fuser -vm {mnt}') "
                             f"and run 'pario cluster down {d}' again")
        done.append(f"mount {mnt}")
    # 2. processes, in stages: clients, the MDS (it flushes its journal to the OSDs), the OSDs
    #    and the manager, the monitor last (the others report to it while they stop)
    recorded = [dm.pid for dm in cl.daemons] if cl else []
    pids = [p for p in dict.fromkeys(recorded + daemons.cluster_processes(conf)) if daemons.alive(p, conf)]
    names = {dm.pid: dm.name for dm in cl.daemons} if cl else {}
    stage = {"ceph-mds": 1, "ceph-osd": 2, "ceph-mgr": 2, "ceph-mon": 3}
    by_stage: dict[int, list[int]] = {}
    for p in pids:
        by_stage.setdefault(stage.get(os.path.basename((daemons.cmdline(p) or [""])[0]), 0), []).append(p)
    for k in sorted(by_stage):
        group = by_stage[k]
        say(f"stopping {', '.join(names.get(p, str(p)) for p in group)}")
        left = daemons.stop(group, conf, timeout=timeout)
        done += [f"{names.get(p, 'process')} (pid {p})" for p in group if p not in left]
        problems += [f"process {p} survived SIGKILL" for p in left]
    daemons.wait_reaped(recorded)  # daemons that had died before (a crash): not even a zombie left
    # 3. cgroups
    root = (cl.cgroup_root if cl else None) or (tb.cgroup_hierarchy() or (None, None))[1]
    cgs = set(devices.leftover_cgroups(d)) | ({s.cgroup for s in cl.servers if s.cgroup} if cl else set())
    for cg in sorted(cgs):
        if os.path.isdir(cg):
            if devices.remove_cgroup(cg, root or os.path.dirname(cg)):
                done.append(f"cgroup {cg}")
            else:
                problems.append(f"cgroup {cg} could not be removed")
    # 4. loop devices over the images
    images = {str(p) for p in (d / "img").glob("*.img")} | ({s.image for s in cl.servers} if cl else set())
    for image in sorted(images):
        gone, left = devices.detach(image)
        done += [f"loop {x}" for x in gone]
        problems += [f"cannot detach {x} (still in use)" for x in left]
    if problems:
        raise ParioError("cluster down incomplete: " + "; ".join(problems) + f"; run 'pario cluster down {d}' again")
    # 5. files: only the cluster's own names, and only where DIR holds a pario cluster
    ours = cl is not None or (Path(conf).is_file() and "pario cluster up" in Path(conf).read_text(errors="replace"))
    if ours:
        for name in (*_FILES, *(() if keep_logs else ("log",))):
            p = d / name
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    p.unlink()
        with contextlib.suppress(OSError):
            (d / MOUNT_DIR).rmdir()
        with contextlib.suppress(OSError):
            d.rmdir()  # only if empty
        done.append(f"files in {d}")
    return done
