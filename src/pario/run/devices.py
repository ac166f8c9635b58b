"""``pario run --testbed``: the store on the testbed's throttled servers, and what each
server's device served.

The store's server directories go on the testbed's servers (``TB/NAME/pario-run-<hash>``,
one per server of the profile, which must be testbed servers); an existing store must
already keep every server's data there.  :func:`device_stats` reads the requests and bytes
each server's device served for the testbed's cgroup (cgroup v1
``blkio.throttle.io_serviced`` / ``io_service_bytes``, v2 ``io.stat``): read before and
after a run, their difference (:func:`stats_diff`) is that run's device I/O.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from .. import ParioError
from ..store.root import read_config

STAT_KEYS = ("read_ios", "write_ios", "read_bytes", "write_bytes")


def open_testbed(path: str):
    """The testbed at ``path``, checked to be up (cgroup and every server mounted) and usable (root)."""
    from ..testbed import load_state

    tb = load_state(path)
    if not tb.complete or not tb.cgroup or not os.path.isdir(tb.cgroup):
        raise ParioError(f"--testbed {path}: the testbed is not (completely) up; see 'pario testbed status {path}'")
    for s in tb.servers:
        if not (s.mount and os.path.ismount(s.mount)):
            raise ParioError(f"--testbed {path}: server {s.name} is not mounted; see 'pario testbed status {path}'")
    if os.geteuid() != 0:
        raise ParioError("--testbed needs root: the MPI processes join the testbed's blkio cgroup")
    return tb


def testbed_servers(tb, system, store: Path) -> dict[str, str]:
    """Server name → directory on the testbed server of that name, for a new store."""
    mounts = {s.name: s.mount for s in tb.servers}
    missing = [n for n in system.names if n not in mounts]
    if missing:
        raise ParioError(f"system {system.name!r} has server {missing[0]!r}, which testbed {tb.dir} does not have "
                         f"(its servers: {', '.join(mounts)}); use --system {Path(tb.dir) / 'nominal.toml'} "
                         "or a profile calibrated on it")
    tag = "pario-run-" + hashlib.sha1(str(store).encode()).hexdigest()[:8]
    return {n: str(Path(mounts[n]) / tag) for n in system.names}


def check_store_on_testbed(store: Path, tb) -> None:
    """An existing store used with --testbed must keep every server's data on that testbed server."""
    cfg = read_config(store)
    mounts = {s.name: Path(s.mount).resolve() for s in tb.servers}
    for name, d in (cfg.get("servers") or {}).items():
        p = Path(d) if Path(d).is_absolute() else store / d
        m = mounts.get(name)
        if m is None or not p.resolve().is_relative_to(m):
            raise ParioError(f"store {store}: server {name} keeps its data in {p}, not on testbed {tb.dir}; "
                             "use a new --store (it is created on the testbed)")


def device_stats(tb) -> dict[str, dict[str, int]] | None:
    """Per testbed server: requests and bytes its device served so far for the testbed's cgroup
    (cgroup v1 ``blkio.throttle.io_serviced`` / ``io_service_bytes``, v2 ``io.stat``)."""
    if tb is None or not tb.cgroup:
        return None
    by_dev = {s.majmin: s.name for s in tb.servers if s.majmin}
    out = {name: dict.fromkeys(STAT_KEYS, 0) for name in by_dev.values()}
    try:
        if tb.cgroup_version == 1:
            for fname, kind in (("blkio.throttle.io_serviced", "ios"), ("blkio.throttle.io_service_bytes", "bytes")):
                for line in Path(tb.cgroup, fname).read_text().splitlines():
                    parts = line.split()
                    if len(parts) == 3 and parts[0] in by_dev and parts[1] in ("Read", "Write"):
                        out[by_dev[parts[0]]][f"{parts[1].lower()}_{kind}"] += int(parts[2])
        else:
            keys = {"rios": "read_ios", "wios": "write_ios", "rbytes": "read_bytes", "wbytes": "write_bytes"}
            for line in Path(tb.cgroup, "io.stat").read_text().splitlines():
                parts = line.split()
                if parts and parts[0] in by_dev:
                    for kv in parts[1:]:
                        k, _, v = kv.partition("=")
                        if k in keys:
                            out[by_dev[parts[0]]][keys[k]] += int(v)
    except OSError:
        return None
    return out


def stats_diff(after, before):
    """``after − before`` per server and counter (None when either is unknown)."""
    if after is None or before is None:
        return None
    return {n: {k: after[n][k] - before[n][k] for k in after[n]} for n in after}


def store_devices(store: Path) -> dict[str, int]:
    """Server name → ``st_dev`` of the directory that holds its data in the store: how many
    distinct devices really serve the profile's servers."""
    cfg = read_config(store)
    out = {}
    for name, d in (cfg.get("servers") or {}).items():
        p = Path(d) if Path(d).is_absolute() else store / d
        try:
            out[name] = os.stat(p).st_dev
        except OSError:
            continue
    return out
