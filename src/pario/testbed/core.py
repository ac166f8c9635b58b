"""Testbed life cycle: ``up``, ``down``, ``status``, and running I/O inside its cgroup.

See the package docstring for the design.  All shell-outs use absolute argument lists
(``losetup``, ``mkfs.ext4``, ``mount``, ``umount``); nothing here touches a device that
is not recorded in, or backed by an image inside, the testbed directory.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .. import ParioError

STATE_FILE = "pario-testbed.json"
NOMINAL_PROFILE = "nominal.toml"
_V1_FILES = {
    "read_bps": "blkio.throttle.read_bps_device",
    "write_bps": "blkio.throttle.write_bps_device",
    "read_iops": "blkio.throttle.read_iops_device",
    "write_iops": "blkio.throttle.write_iops_device",
}

# blk-throttle's time slice: ``throtl_slice`` = HZ/10 jiffies, 100 ms at any HZ (kernel 6.18:
# DFL_THROTL_SLICE for every queue).  A slice restarted by a limit write ends one slice later
# (slice_end = jiffies + HZ/10); 2 jiffies (≤ 20 ms for HZ ≥ 100) on top make sure it is over.
THROTTLE_SLICE_S = 0.1
SLICE_EXPIRY_S = THROTTLE_SLICE_S + 0.02

# Defaults: an HDD-like server (≈ 4 ms per random request, 120 MiB/s) and an SSD-like one
# (0.5 ms, 400 MiB/s).  See docs/calibration.md.
DEFAULT_HDD_IOPS = 250
DEFAULT_HDD_BPS = 120 << 20
DEFAULT_SSD_IOPS = 2000
DEFAULT_SSD_BPS = 400 << 20
DEFAULT_SIZE = 512 << 20


@dataclass
class TestbedServer:
    """One emulated server: image file → loop device → ext4 mounted at ``mount``, throttled."""

    __test__ = False  # not a pytest test class

    name: str
    kind: str
    iops: int
    bps: int
    image: str
    write_iops: int | None = None
    write_bps: int | None = None
    loop: str | None = None
    majmin: str | None = None
    mount: str | None = None
    mounted: bool = False

    def limits(self) -> dict[str, int]:
        return {
            "read_iops": int(self.iops),
            "write_iops": int(self.write_iops or self.iops),
            "read_bps": int(self.bps),
            "write_bps": int(self.write_bps or self.bps),
        }


@dataclass
class Testbed:
    """State of one testbed (saved as ``DIR/pario-testbed.json``)."""

    __test__ = False

    dir: str
    size: int
    cgroup_version: int = 1
    cgroup: str | None = None  # absolute path of the testbed's cgroup directory
    cgroup_root: str | None = None  # the hierarchy's mount point
    servers: list[TestbedServer] = field(default_factory=list)
    created: float = 0.0
    complete: bool = False

    @property
    def state_path(self) -> Path:
        return Path(self.dir) / STATE_FILE

    def save(self) -> None:
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2))
        os.replace(tmp, self.state_path)

    def server(self, name: str) -> TestbedServer:
        for s in self.servers:
            if s.name == name:
                return s
        raise ParioError(f"testbed {self.dir} has no server {name!r}")


# ---------------------------------------------------------------------------- environment
def _run(args: list[str], what: str) -> str:
    try:
        res = subprocess.run(args, capture_output=True, text=True, timeout=120)
    except FileNotFoundError:
        raise ParioError(f"{what}: command {args[0]!r} not found") from None
    if res.returncode != 0:
        msg = (res.stderr or res.stdout).strip().splitlines()
        raise ParioError(f"{what}: {' '.join(args)} failed: {msg[-1] if msg else 'exit ' + str(res.returncode)}")
    return res.stdout


def _mounts() -> list[tuple[str, str, str, str]]:
    """(device, mount point, fstype, options) from /proc/mounts."""
    out = []
    with open("/proc/mounts") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 4:
                dev, mnt, fs, opts = parts[:4]
                out.append((dev, mnt.replace("\\040", " "), fs, opts))
    return out


def cgroup_hierarchy() -> tuple[int, str] | None:
    """The cgroup hierarchy that can throttle block I/O: (1, blkio mount) or (2, unified mount)."""
    for _dev, mnt, fs, opts in _mounts():
        if fs == "cgroup" and "blkio" in opts.split(",") and os.path.exists(os.path.join(mnt, _V1_FILES["read_bps"])):
            return 1, mnt
    for _dev, mnt, fs, _opts in _mounts():
        if fs == "cgroup2":
            try:
                ctrls = Path(mnt, "cgroup.controllers").read_text().split()
            except OSError:
                continue
            if "io" in ctrls:
                return 2, mnt
    return None


def check_support() -> tuple[int, str]:
    """Raise ParioError (one line) unless this process can build a testbed; return the hierarchy."""
    if os.geteuid() != 0:
        raise ParioError("pario testbed needs root (it creates loop devices, ext4 mounts and a blkio cgroup); "
                         "run it as root or with sudo")
    if not os.path.exists("/dev/loop-control"):
        raise ParioError("pario testbed needs loop devices, but /dev/loop-control is missing (modprobe loop?)")
    for tool in ("losetup", "mkfs.ext4", "mount", "umount"):
        if shutil.which(tool) is None:
            raise ParioError(f"pario testbed needs the {tool!r} command (util-linux / e2fsprogs)")
    h = cgroup_hierarchy()
    if h is None:
        raise ParioError("pario testbed needs block-I/O throttling: no cgroup v1 'blkio' hierarchy with "
                         "blkio.throttle.* files and no cgroup v2 hierarchy with the 'io' controller")
    return h


def _cgroup_name(d: Path) -> str:
    base = re.sub(r"[^A-Za-z0-9_.-]", "_", d.name).removeprefix("pario-")[:32] or "tb"
    return f"pario-{base}-{hashlib.sha1(str(d).encode()).hexdigest()[:8]}"


def _own_cgroup(version: int, root: str) -> str:
    """This process's cgroup directory in the given hierarchy (from /proc/self/cgroup)."""
    with open("/proc/self/cgroup") as f:
        for line in f:
            hid, ctrls, path = line.rstrip("\n").split(":", 2)
            if version == 1 and "blkio" in ctrls.split(","):
                return os.path.join(root, path.lstrip("/"))
            if version == 2 and hid == "0" and ctrls == "":
                return os.path.join(root, path.lstrip("/"))
    return root


def _write(path: str | Path, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _apply_limits(tb: Testbed, s: TestbedServer) -> None:
    lim = s.limits()
    if tb.cgroup_version == 1:
        for key, fname in _V1_FILES.items():
            _write(os.path.join(tb.cgroup, fname), f"{s.majmin} {lim[key]}\n")
    else:
        _write(os.path.join(tb.cgroup, "io.max"),
               f"{s.majmin} rbps={lim['read_bps']} wbps={lim['write_bps']} "
               f"riops={lim['read_iops']} wiops={lim['write_iops']}\n")


def restart_throttle(tb: Testbed, *, wait: bool = True) -> None:
    """Give every server of ``tb`` the throttle state of a device that has long been idle.

    blk-throttle charges a device's bytes against ``rate × (elapsed time of the current slice,
    rounded up to 100 ms)``, and the slice stays open until up to two slices after the last
    dispatch.  Idle time inside a slice that is still open is therefore credit: a window that
    starts < 200 ms after earlier I/O of the cgroup on the device (the previous replay's
    reads, a trickle of small requests) passes the bytes of that idle time at once on top of
    its own slice (measured: up to ≈ 0.24 s worth), and a measured time falls below
    ``bytes / rate − 100 ms`` (docs/calibration.md, "Credit carried into the next window").

    Writing a throttle limit makes the kernel restart the device's slices and, with nothing
    queued, forget what it dispatched (``tg_set_conf`` / ``tg_set_limit`` →
    ``tg_update_carryover`` + ``tg_conf_updated``); the current limits, as read back from the
    cgroup, are written unchanged.  With ``wait`` this returns only when that restarted slice
    is over (:data:`SLICE_EXPIRY_S`), so the next request starts a new slice of its own: the
    window then gets exactly the one slice of credit an idle device gets, and a device ``j``
    that must pass ``B_j`` bytes takes at least ``B_j / rate_j − 100 ms``.  Meant for a cgroup
    with no I/O queued in the throttle (bios still queued would keep their computed wait).
    """
    for s in tb.servers:
        if not s.majmin:
            continue
        cur = _read_limits(tb, s)
        if not cur:
            continue
        try:
            if tb.cgroup_version == 1:
                for key, fname in _V1_FILES.items():
                    if key in cur:
                        _write(os.path.join(tb.cgroup, fname), f"{s.majmin} {cur[key]}\n")
            else:
                kv = " ".join(f"{k}={cur.get(key, 'max')}" for k, key in
                              (("rbps", "read_bps"), ("wbps", "write_bps"), ("riops", "read_iops"),
                               ("wiops", "write_iops")))
                _write(os.path.join(tb.cgroup, "io.max"), f"{s.majmin} {kv}\n")
        except OSError as exc:
            raise ParioError(f"cannot restart the throttle of {s.name} in {tb.cgroup} ({exc.strerror})") from None
    if wait:
        time.sleep(SLICE_EXPIRY_S)


def set_limits(tb: Testbed, name: str, limits: dict[str, int]) -> None:
    """Re-throttle server ``name`` of a running testbed with ``limits`` (the keys of
    :meth:`TestbedServer.limits`) and save the state."""
    s = tb.server(name)
    s.iops, s.bps = int(limits["read_iops"]), int(limits["read_bps"])
    s.write_iops, s.write_bps = int(limits["write_iops"]), int(limits["write_bps"])
    _apply_limits(tb, s)
    tb.save()


# ---------------------------------------------------------------------------- state
def load_state(d: str | Path) -> Testbed:
    """Load ``DIR/pario-testbed.json`` (ParioError if DIR is not a testbed)."""
    p = Path(d).resolve() / STATE_FILE
    try:
        raw = json.loads(p.read_text())
    except FileNotFoundError:
        raise ParioError(f"{Path(d)} is not a pario testbed (no {STATE_FILE}); create one with 'pario testbed up'") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise ParioError(f"{p}: unreadable testbed state ({exc})") from None
    servers = [TestbedServer(**s) for s in raw.pop("servers", [])]
    return Testbed(servers=servers, **raw)


def find_testbed(path: str | Path) -> Testbed | None:
    """The testbed whose directory contains ``path`` (walking up), or None."""
    p = Path(path).resolve()
    for q in (p, *p.parents):
        if (q / STATE_FILE).is_file():
            try:
                return load_state(q)
            except ParioError:
                return None
    return None


# ---------------------------------------------------------------------------- up / down
def up(d: str | Path, *, hdd: int = 2, ssd: int = 2, hdd_iops: int = DEFAULT_HDD_IOPS,
       hdd_bps: int = DEFAULT_HDD_BPS, ssd_iops: int = DEFAULT_SSD_IOPS, ssd_bps: int = DEFAULT_SSD_BPS,
       size: int = DEFAULT_SIZE, progress=None) -> Testbed:
    """Create the testbed under ``d``: images, loop devices, ext4, mounts, the throttling cgroup.

    On any failure everything made so far is released (``down``) and the error re-raised.
    """
    version, root = check_support()
    if hdd < 0 or ssd < 0 or hdd + ssd == 0:
        raise ParioError("a testbed needs at least one server (--hdd N and/or --ssd M)")
    for what, v in (("--hdd-iops", hdd_iops), ("--hdd-bps", hdd_bps), ("--ssd-iops", ssd_iops), ("--ssd-bps", ssd_bps)):
        if v <= 0:
            raise ParioError(f"{what} must be > 0, got {v}")
    if size < 16 << 20:
        raise ParioError(f"--size must be at least 16 MiB per server, got {size} bytes")
    d = Path(d).resolve()
    d.mkdir(parents=True, exist_ok=True)
    if (d / STATE_FILE).exists():
        raise ParioError(f"{d} already holds a testbed; run 'pario testbed down {d}' first")
    tb = Testbed(dir=str(d), size=int(size), cgroup_version=version, cgroup_root=root, created=time.time())
    specs = [(f"H{i}", "hdd", hdd_iops, hdd_bps) for i in range(hdd)] + \
            [(f"S{i}", "ssd", ssd_iops, ssd_bps) for i in range(ssd)]
    for name, kind, iops, bps in specs:
        tb.servers.append(TestbedServer(name=name, kind=kind, iops=int(iops), bps=int(bps),
                                        image=str(d / f"pario-{name}.img")))
    tb.save()
    try:
        cg = os.path.join(root, _cgroup_name(d))
        if version == 2:  # the io controller must be enabled for the root's children
            ctl = Path(root, "cgroup.subtree_control")
            if "io" not in ctl.read_text().split():
                _write(ctl, "+io")
        tb.cgroup = cg
        tb.save()
        os.mkdir(cg)
        for s in tb.servers:
            if progress:
                progress(f"server {s.name} ({s.kind}): image, loop device, ext4, mount")
            with open(s.image, "wb") as f:
                f.truncate(size)
            _run(["mkfs.ext4", "-q", "-F", "-m", "0", "-L", f"pario-{s.name}",
                  "-E", "lazy_itable_init=0,lazy_journal_init=0", s.image], f"mkfs {s.name}")
            loop = _run(["losetup", "--find", "--show", s.image], f"loop device for {s.name}").strip()
            s.loop = loop
            tb.save()
            st = os.stat(loop)
            s.majmin = f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"
            s.mount = str(d / s.name)
            os.makedirs(s.mount, exist_ok=True)
            _run(["mount", "-t", "ext4", "-o", "noatime", loop, s.mount], f"mount {s.name}")
            s.mounted = True
            tb.save()
            os.chmod(s.mount, 0o1777)
            _apply_limits(tb, s)
        tb.complete = True
        tb.save()
        write_nominal_profile(tb)
    except BaseException:
        with contextlib.suppress(Exception):
            down(d)
        raise
    return tb


def _loops_backed_by(image: str) -> list[str]:
    if not os.path.exists(image):
        return []
    try:
        out = subprocess.run(["losetup", "-j", image], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.split(":", 1)[0] for line in out.splitlines() if line.strip()]


def down(d: str | Path, progress=None) -> list[str]:
    """Release everything the testbed at ``d`` made: cgroup, mounts, loop devices, images.

    Works from the state file even after a crash half-way through ``up``; also finds loop
    devices still backed by ``DIR/pario-*.img`` and mounts under ``DIR``.  Returns a list of
    what was released.  Raises ParioError if something could not be released.
    """
    d = Path(d).resolve()
    if not (d / STATE_FILE).exists():
        images = sorted(d.glob("pario-*.img"))
        if not images:
            raise ParioError(f"{d} is not a pario testbed (no {STATE_FILE}); nothing to release")
        tb = Testbed(dir=str(d), size=0)
    else:
        tb = load_state(d)
    if os.geteuid() != 0:
        raise ParioError("pario testbed down needs root (it unmounts file systems and detaches loop devices)")
    done: list[str] = []
    problems: list[str] = []
    # 1. cgroup: move any process still inside out to the hierarchy's root, then remove it
    cg = tb.cgroup
    if cg is None:  # crash before the state recorded it: recompute the name
        h = cgroup_hierarchy()
        if h:
            cg = os.path.join(h[1], _cgroup_name(d))
            tb.cgroup_root = h[1]
    if cg and os.path.basename(cg).startswith("pario-") and os.path.isdir(cg):
        root = tb.cgroup_root or os.path.dirname(cg)
        for _ in range(20):
            try:
                pids = Path(cg, "cgroup.procs").read_text().split()
            except OSError:
                pids = []
            for pid in pids:
                with contextlib.suppress(OSError):
                    _write(os.path.join(root, "cgroup.procs"), pid)
            try:
                os.rmdir(cg)
                done.append(f"cgroup {cg}")
                break
            except OSError:
                time.sleep(0.05)
        else:
            problems.append(f"cgroup {cg} could not be removed")
    # 2. mounts under DIR
    mounted = [mnt for _dev, mnt, _fs, _o in _mounts() if mnt == str(d) or mnt.startswith(str(d) + os.sep)]
    for s in tb.servers:
        if s.mount and s.mount not in mounted and os.path.ismount(s.mount):
            mounted.append(s.mount)
    busy: set[str] = set()
    for mnt in sorted(set(mounted), key=len, reverse=True):
        res = subprocess.run(["umount", mnt], capture_output=True, text=True)
        if res.returncode == 0:
            done.append(f"mount {mnt}")
        else:  # no lazy unmount: it would hide the user and keep the loop device alive
            busy.add(mnt)
            problems.append(f"cannot unmount {mnt} ({res.stderr.strip().splitlines()[-1] if res.stderr.strip() else 'busy'}; "
                            f"see 'fuser -vm {mnt}')")
    # 3. loop devices backed by our images
    images = {s.image for s in tb.servers} | {str(p) for p in d.glob("pario-*.img")}
    busy_images = {s.image for s in tb.servers if s.mount in busy}
    for image in sorted(images - busy_images):
        for loop in _loops_backed_by(image):
            res = subprocess.run(["losetup", "-d", loop], capture_output=True, text=True)
            for _ in range(50):  # a busy device is only marked autoclear: wait until it is gone
                if loop not in _loops_backed_by(image):
                    break
                time.sleep(0.1)
            if res.returncode == 0 and loop not in _loops_backed_by(image):
                done.append(f"loop {loop}")
            else:
                problems.append(f"cannot detach {loop} (still in use)")
    if problems:
        raise ParioError("testbed down incomplete: " + "; ".join(problems) + "; stop the user and run down again")
    # 4. files
    for image in sorted(images):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(image)
            done.append(f"image {image}")
    for s in tb.servers:
        if s.mount:
            with contextlib.suppress(OSError):
                os.rmdir(s.mount)
    for fname in (NOMINAL_PROFILE, STATE_FILE, STATE_FILE[:-5] + ".tmp"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(d / fname)
    with contextlib.suppress(OSError):
        d.rmdir()  # only if empty
    return done


# ---------------------------------------------------------------------------- status
def _space(path) -> tuple[int, int] | tuple[None, None]:
    """(free bytes for an unprivileged user, size) of the file system holding ``path``."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None, None
    return st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize


def status(d: str | Path) -> dict:
    """Health of the testbed at ``d``: per server loop/mount/throttle as recorded and as found,
    its file system's free space and size, and the pario store directories on it (``pario run
    --testbed``'s ``pario-run-<hash>``: bytes, whether their store still uses them —
    :func:`pario.store.gc.survey`; ``pario store gc`` removes the others); the free space of the
    file system holding the images (``dir_free`` / ``dir_total``).  Reads only."""
    from ..store.gc import survey

    tb = load_state(d)
    mounts = {mnt: dev for dev, mnt, _fs, _o in _mounts()}
    rows = []
    for s in tb.servers:
        attached = bool(s.loop) and s.loop in _loops_backed_by(s.image)
        is_mounted = bool(s.mount) and s.mount in mounts
        free = total = None
        stores: list[dict] = []
        if is_mounted:
            free, total = _space(s.mount)
            stores = survey(s.mount, depth=1)
        rows.append({**asdict(s), "attached": attached, "is_mounted": is_mounted, "free": free, "total": total,
                     "stores": stores, "throttle": _read_limits(tb, s)})
    procs: list[int] = []
    if tb.cgroup and os.path.isdir(tb.cgroup):
        with contextlib.suppress(OSError):
            procs = [int(p) for p in Path(tb.cgroup, "cgroup.procs").read_text().split()]
    healthy = tb.complete and all(r["attached"] and r["is_mounted"] for r in rows) and bool(tb.cgroup) \
        and os.path.isdir(tb.cgroup)
    dir_free, dir_total = _space(tb.dir)
    return {"dir": tb.dir, "cgroup": tb.cgroup, "cgroup_version": tb.cgroup_version, "complete": tb.complete,
            "healthy": healthy, "procs_in_cgroup": procs, "servers": rows, "dir_free": dir_free,
            "dir_total": dir_total}


def _read_limits(tb: Testbed, s: TestbedServer) -> dict[str, int] | None:
    if not (tb.cgroup and s.majmin and os.path.isdir(tb.cgroup)):
        return None
    out: dict[str, int] = {}
    try:
        if tb.cgroup_version == 1:
            for key, fname in _V1_FILES.items():
                for line in Path(tb.cgroup, fname).read_text().splitlines():
                    dev, val = line.split()
                    if dev == s.majmin:
                        out[key] = int(val)
        else:
            names = {"rbps": "read_bps", "wbps": "write_bps", "riops": "read_iops", "wiops": "write_iops"}
            for line in Path(tb.cgroup, "io.max").read_text().splitlines():
                parts = line.split()
                if parts and parts[0] == s.majmin:
                    for kv in parts[1:]:
                        k, v = kv.split("=")
                        if k in names and v != "max":
                            out[names[k]] = int(v)
    except OSError:
        return None
    return out


# ---------------------------------------------------------------------------- running inside
@contextlib.contextmanager
def enter(tb: Testbed | str | Path, *, fresh: bool = True):
    """Run the body (and any child started in it) inside the testbed's throttling cgroup.

    Writes this process's pid into the cgroup's ``cgroup.procs`` and moves it back to its
    original cgroup on exit, so ``down`` can remove the cgroup afterwards.  With ``fresh``
    (the default) the throttles are restarted first (:func:`restart_throttle`, ≈ 0.12 s), so
    that nothing the cgroup did before — a previous run that ended a few ms ago — leaves
    credit for the body: every run starts like one on a device idle for a long time.
    """
    if not isinstance(tb, Testbed):
        tb = load_state(tb)
    if not tb.cgroup or not os.path.isdir(tb.cgroup):
        raise ParioError(f"testbed {tb.dir} has no cgroup (is it up? see 'pario testbed status {tb.dir}')")
    root = tb.cgroup_root or os.path.dirname(tb.cgroup)
    original = _own_cgroup(tb.cgroup_version, root)
    try:
        _write(os.path.join(tb.cgroup, "cgroup.procs"), str(os.getpid()))
    except OSError as exc:
        raise ParioError(f"cannot move process into {tb.cgroup} ({exc.strerror}); are you root?") from None
    try:
        if fresh:
            restart_throttle(tb)
        yield tb
    finally:
        target = original if os.path.isdir(original) else root
        with contextlib.suppress(OSError):
            _write(os.path.join(target, "cgroup.procs"), str(os.getpid()))


# ---------------------------------------------------------------------------- nominal profile
def nominal_system(tb: Testbed | str | Path):
    """The profile the throttle settings stand for: α = 1/IOPS, β = 1/BPS, capacity = free space.

    This is what ``pario calibrate`` should recover (blk-throttle makes a request cost
    ``max(1/IOPS, s/BPS)``, so α and β are the two asymptotes), and the profile says so:
    ``cost = "max"``, the shape the simulator, the distribution model (a batch passes in
    max(T_s, T_t)) and so ``pario advise`` and ``pario run``'s prediction price these devices
    with (docs/calibration.md, "The throttle is a max, not a sum").  The throttle's credit
    after idle (docs/calibration.md, "The bucket holds one time slice of credit") is not in
    the profile: it depends on where the idle time falls in the throttle's slice (measured
    0.02–0.17 s for one server), which no device model can know.  Network e = t = 0
    (everything is on one machine; calibrate measures loopback values).
    """
    from ..system import Network, Server, System

    if not isinstance(tb, Testbed):
        tb = load_state(tb)
    servers = []
    for s in tb.servers:
        cap = math.inf
        if s.mount and os.path.ismount(s.mount):
            st = os.statvfs(s.mount)
            cap = float(st.f_bavail * st.f_frsize)
        lim = s.limits()
        servers.append(Server(
            name=s.name, kind=s.kind, alpha=1.0 / lim["read_iops"], beta=1.0 / lim["read_bps"],
            alpha_read_seq=1.0 / lim["read_iops"], alpha_read_rand=1.0 / lim["read_iops"],
            alpha_write_seq=1.0 / lim["write_iops"], alpha_write_rand=1.0 / lim["write_iops"],
            beta_read=1.0 / lim["read_bps"], beta_write=1.0 / lim["write_bps"], capacity=cap, cost="max"))
    return System(name=f"testbed-{Path(tb.dir).name}-nominal", servers=tuple(servers), network=Network(0.0, 0.0),
                  procs_per_node=1,
                  description=f"nominal throttle settings of the pario testbed at {tb.dir} (alpha = 1/IOPS, beta = 1/BPS)",
                  source={"how": "pario testbed up (throttle settings, not measured)"})


def write_nominal_profile(tb: Testbed) -> Path:
    p = Path(tb.dir) / NOMINAL_PROFILE
    p.write_text(nominal_system(tb).to_toml())
    return p
