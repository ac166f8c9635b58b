"""Calibrate a system profile: measure every target, fit α/β per op and pattern, measure e/t.

The result is a :class:`pario.system.System` (``System.to_toml()`` gives the profile file
every other command loads) plus the fits, samples and warnings for reporting.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import ParioError
from ..system import KINDS, Network, Server, System
from . import fit as fitmod
from . import network as netmod
from .storage import DEFAULT_SIZES, READ, WRITE, Samples, measure_target, n_batches

PATTERN_NAMES = {True: "seq", False: "rand"}
OP_NAMES = {READ: "read", WRITE: "write"}


@dataclass(frozen=True)
class Target:
    """A server to calibrate: ``name``, a directory on its storage, its kind (hdd | ssd); or,
    with ``pool``, the server's pool of the Ceph cluster at ``path`` (a ``pario cluster``
    directory), measured through librados (:mod:`pario.calibrate.rados`)."""

    name: str
    path: str
    kind: str
    pool: str | None = None

    @property
    def where(self) -> str:
        return f"{self.path}:{self.pool}" if self.pool else self.path


def cluster_targets(cluster_dir: str, names: list[str] | None = None) -> list[Target]:
    """The servers of the ``pario cluster`` at ``cluster_dir`` (all, or ``names`` in that order)."""
    from ..cluster.state import load_state

    cl = load_state(cluster_dir)
    by_name = {s.name: s for s in cl.servers}
    pick = names or [s.name for s in cl.servers]
    out = []
    for n in pick:
        s = by_name.get(n)
        if s is None:
            raise ParioError(f"cluster {cluster_dir} has no server {n!r} (it has {', '.join(by_name)})")
        if not s.pool:
            raise ParioError(f"cluster {cluster_dir}: server {n} has no pool (was 'pario cluster up' complete?)")
        out.append(Target(n, str(cl.dir), s.kind, pool=s.pool))
    return out


def _rotational(path: str) -> bool | None:
    """Is the block device under ``path`` rotational? None if unknown."""
    try:
        dev = os.stat(path).st_dev
    except OSError:
        return None
    base = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}")
    for q in (base / "queue" / "rotational", base / ".." / "queue" / "rotational"):
        with contextlib.suppress(OSError):
            return q.read_text().strip() == "1"
    return None


def parse_target(spec: str) -> Target:
    """``NAME=PATH[:hdd|ssd]``; without a kind: the testbed's kind, else the device's rotational flag."""
    m = re.match(r"^([A-Za-z0-9_.-]+)=(.+?)(?::(hdd|ssd))?$", spec)
    if not m:
        raise ParioError(f"bad --target {spec!r}: expected NAME=PATH[:hdd|ssd], e.g. H0=/mnt/disk0:hdd")
    name, path, kind = m.group(1), m.group(2), m.group(3)
    if not os.path.isdir(path):
        raise ParioError(f"--target {name}: {path!r} is not a directory")
    if kind is None:
        from ..testbed import find_testbed

        tb = find_testbed(path)
        if tb is not None:
            kind = next((s.kind for s in tb.servers if s.mount and Path(path).resolve().is_relative_to(s.mount)), None)
        if kind is None:
            rot = _rotational(path)
            kind = "hdd" if rot in (True, None) else "ssd"
    assert kind in KINDS
    return Target(name, path, kind)


@dataclass
class Calibration:
    """Everything one ``calibrate`` run produced."""

    system: System
    fits: dict[tuple[str, int, bool], fitmod.Fit]  # (target, op, sequential) -> fit
    spreads: dict[tuple[str, int, bool], tuple[float, int]]
    samples: Samples
    network: netmod.NetFit | None
    capacities: dict[str, float]
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return {
            "profile": self.system.to_dict(),
            "fits": [{"target": t, "op": OP_NAMES[op], "pattern": PATTERN_NAMES[seq], **f.to_dict(),
                      "spread": self.spreads[(t, op, seq)][0], "spread_size": self.spreads[(t, op, seq)][1]}
                     for (t, op, seq), f in self.fits.items()],
            "network": self.network.to_dict() if self.network else None,
            "capacities": self.capacities,
            "warnings": self.warnings,
            "seconds": self.seconds,
        }


def _testbed_context(path: str):
    """Enter the throttling cgroup of the testbed holding ``path`` (no-op elsewhere)."""
    from ..testbed import enter, find_testbed

    tb = find_testbed(path)
    if tb is None or not tb.cgroup:
        return contextlib.nullcontext()
    return enter(tb)


def calibrate(targets: list[Target], *, sizes=DEFAULT_SIZES, reps: int = 5, min_time: float = 0.2,
              file_size: int | None = None, network: str = "auto", net_reps: int = 20, model: str = "auto",
              max_residual: float = 0.25, conf: float = 0.95, name: str = "calibrated", procs_per_node: int = 1,
              capacity: bool = True, progress=None, check: bool = True) -> Calibration:
    """Measure ``targets`` and the network; return the fitted profile (see module docstring).

    Raises ParioError when a fit's residuals exceed ``max_residual`` (relative RMS of the
    per-size medians) unless ``check`` is False.
    """
    if not targets:
        raise ParioError("calibrate needs at least one --target NAME=PATH[:hdd|ssd]")
    names = [t.name for t in targets]
    if len(set(names)) != len(names):
        raise ParioError(f"duplicate --target name {next(n for n in names if names.count(n) > 1)!r}")
    t_start = time.perf_counter()
    samples = Samples()
    warnings: list[str] = []
    caps: dict[str, float] = {}
    kw = {} if file_size is None else {"file_size": file_size}
    for tgt in targets:
        if tgt.pool:
            from .rados import RadosTarget
            from .storage import DEFAULT_FILE_SIZE

            rt = RadosTarget(tgt.path, tgt.pool, file_size or DEFAULT_FILE_SIZE, max(sizes))
            _, cap = measure_target(tgt.name, tgt.where, sizes=sizes, reps=reps, min_time=min_time, samples=samples,
                                    progress=progress, warnings=warnings, target=rt)
        else:
            with _testbed_context(tgt.path):
                _, cap = measure_target(tgt.name, tgt.path, sizes=sizes, reps=reps, min_time=min_time,
                                        samples=samples, progress=progress, warnings=warnings, **kw)
        caps[tgt.name] = cap
    fits: dict = {}
    spreads: dict = {}
    servers = []
    for tgt in targets:
        per = {}
        for op in (READ, WRITE):
            for seq in (True, False):
                s, t = samples.select(tgt.name, op, seq)
                f = fitmod.fit(s, t, model=model, conf=conf)
                what = f"{tgt.name} {OP_NAMES[op]} {PATTERN_NAMES[seq]}"
                if check:
                    fitmod.check(f, what, max_residual)
                for note in f.notes:
                    warnings.append(f"{what}: {note}")
                fits[(tgt.name, op, seq)] = per[(op, seq)] = f
                spreads[(tgt.name, op, seq)] = fitmod.spread(s, t)
        beta_r = max(fitmod.combine_beta([per[(READ, True)], per[(READ, False)]]), 0.0)
        beta_w = max(fitmod.combine_beta([per[(WRITE, True)], per[(WRITE, False)]]), 0.0)
        a = {k: max(per[k].alpha, 0.0) for k in per}
        # the server's cost shape: max(α, s·β) when most of its four fits chose it (a rate limiter)
        shape = "max" if sum(f.model == "max" for f in per.values()) > len(per) / 2 else "additive"
        servers.append(Server(
            name=tgt.name, kind=tgt.kind, alpha=a[(READ, False)], beta=beta_r,
            alpha_read_seq=a[(READ, True)], alpha_read_rand=a[(READ, False)],
            alpha_write_seq=a[(WRITE, True)], alpha_write_rand=a[(WRITE, False)],
            beta_read=beta_r, beta_write=beta_w, capacity=caps[tgt.name] if capacity else math.inf, cost=shape))
    if progress:
        progress("network")
    net, _raw = netmod.measure(network, reps=net_reps)
    if net is None:
        warnings.append("network not measured (--network none): e = t = 0 in the profile")
    models = sorted({f.model for f in fits.values()})
    source = {
        "how": "pario calibrate",
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "storage": ("librados (objects of 4 MiB, a request's pieces in flight together) " if any(t.pool for t in targets)
                    else "O_DIRECT ") + f"queue-depth-1 batches, sizes {','.join(str(s) for s in sorted(set(sizes)))} B, "
                   f"{reps} reps x >= {min_time} s, fit {'/'.join(models)} (weighted least squares)",
        "network": (f"{net.method}: e = connect/startup median, t = slope of transfer time" if net else "not measured"),
        "targets": ", ".join(f"{t.name}={t.where}" for t in targets),
    }
    system = System(name=name, servers=tuple(servers),
                    network=Network(e=net.e if net else 0.0, t=net.t if net else 0.0),
                    procs_per_node=procs_per_node, description="measured by pario calibrate", source=source)
    return Calibration(system, fits, spreads, samples, net, caps, warnings, time.perf_counter() - t_start)


def progress_steps(targets: list[Target], sizes, reps: int) -> int:
    return len(targets) * n_batches(sizes, reps) + 1
