"""Engines of ``pario reproduce``: who evaluates one ``simulate(...)``-shaped call of a family.

The families (:mod:`pario.reproduce.families`) call :func:`measure` exactly where they
used to call :func:`pario.simulate.simulate`, with the same arguments.  :func:`measure`
hands the call to the engine of the running experiment (:data:`ENGINE`, a context
variable set by :func:`pario.reproduce.core.run_experiment`):

- ``simulate`` (default): :func:`pario.simulate.simulate` itself (so the simulator path is
  unchanged, value for value).
- ``testbed`` (:class:`TestbedEngine`): the trace is replayed on an emulated testbed
  (:mod:`pario.testbed`: loop devices + ext4 + blkio throttles) with the same number of
  servers of each kind, in the profile's order, and the *measured* wall time is returned
  as ``makespan_s`` / ``cost_s`` (:class:`Measured`).

α/β → throttle mapping (per server, the testbed throttles each device separately):
``read_iops = round(1/α_read_rand)``, ``write_iops = round(1/α_write_rand)``,
``read_bps = round(1/β_read)``, ``write_bps = round(1/β_write)``.  blk-throttle then makes
a queue-depth-1 request of ``s`` bytes cost ``max(1/IOPS, s/BPS)`` on that device (see
:mod:`pario.testbed`), the two asymptotes of the profile's ``α + β·s``.  The network
(``e``, ``t``) and ``procs_per_node`` are not emulated: all ranks run on this machine.
``--testbed-slowdown K`` divides every rate by K (K times slower devices) so that
the throttle, not this machine's CPU and loop devices, bounds the replay.
One testbed is brought up per distinct server configuration and reused for the whole
run; :meth:`TestbedEngine.close` releases every one of them (also on errors and Ctrl-C).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import ParioError

MB = float(1 << 20)

#: the engine of the running experiment (None = the simulator)
ENGINE: contextvars.ContextVar = contextvars.ContextVar("pario_reproduce_engine", default=None)

ENGINES = ("simulate", "testbed")


class Unsupported(ParioError):
    """The testbed cannot measure what this experiment needs (one line: experiment and why)."""


# families (and family/paper pairs) whose runs the testbed cannot replay, with the reason
_UNSUPPORTED = {
    "ceda": "CEDA/CIDA plans route requests to partial replicas, which the testbed replay "
            "(one layout per file) cannot follow",
    ("server_time", "CEDA"): "CEDA/CIDA plans route requests to partial replicas, which the testbed replay "
                             "(one layout per file) cannot follow",
    "hacio_example": "the worked example is in abstract time units T with β = 0 (no byte rate to throttle)",
    "ci_accuracy": "it needs dozens of system profiles × hundreds of IOR instances (one testbed per profile); "
                   "simulator only",
    "ci_mixed": "it needs dozens of system profiles × hundreds of IOR instances (one testbed per profile); "
                "simulator only",
    "hybrid_tile": "hybrid-replica routing (a replica chosen per request) is not supported by the testbed replay",
}


def unsupported_reason(exp) -> str | None:
    """Why ``exp`` cannot run on the testbed, or None."""
    return _UNSUPPORTED.get((exp.family, exp.paper)) or _UNSUPPORTED.get(exp.family)


def measure(trace, system, layout=None, **kw):
    """``simulate(trace, system, layout, **kw)`` on the engine of the running experiment."""
    eng = ENGINE.get()
    if eng is None:
        from ..simulate import simulate

        return simulate(trace, system, layout, **kw)
    return eng(trace, system, layout, **kw)


@contextlib.contextmanager
def using(engine):
    """Run the body with ``engine`` (None = simulator) as :data:`ENGINE`."""
    tok = ENGINE.set(engine)
    try:
        yield engine
    finally:
        ENGINE.reset(tok)


# ---------------------------------------------------------------------------- testbed engine
@dataclass
class Measured:
    """A testbed measurement with the attributes the families read from a SimResult."""

    makespan_s: float  # measured wall time (independent: all ranks; collective: sum of the calls)
    bytes: int
    server_names: list[str]
    server_bytes: np.ndarray  # bytes that reached each server device (blkio statistics)
    server_ios: np.ndarray | None  # requests that passed each server's throttle
    server_busy_s: np.ndarray  # throttle-implied busy time: max(ios/IOPS, bytes/BPS) per server
    collective: bool = False
    order: str | None = None
    cost_s: float | None = None
    wall_s: float = 0.0
    engine: str = "testbed"
    details: dict = field(default_factory=dict)

    @property
    def bandwidth_MBps(self) -> float:
        return self.bytes / MB / self.makespan_s if self.makespan_s > 0 else 0.0


class _FileLayouts:
    """A ``{file: layout}`` dict in the shape the replay wants of a plan (``layout_for``)."""

    def __init__(self, d: dict):
        self._d = dict(d)

    def layout_for(self, fname):
        return self._d.get(fname)


def throttle_limits(server, slowdown: float = 1.0) -> dict[str, int]:
    """The testbed throttle standing for one profile server (see the module doc), every
    rate divided by ``slowdown``."""
    def rate(x: float, what: str) -> int:
        if not x or x <= 0 or not np.isfinite(x):
            raise Unsupported(f"server {server.name}: {what} = {x!r} cannot be expressed as a throttle rate")
        return max(1, int(round(1.0 / (x * slowdown))))

    return {"read_iops": rate(server.alpha_for(0, False), "α_read_rand"),
            "write_iops": rate(server.alpha_for(1, False), "α_write_rand"),
            "read_bps": rate(server.beta_for(0), "β_read"),
            "write_bps": rate(server.beta_for(1), "β_write")}


class TestbedEngine:
    """Replays the families' runs on emulated testbeds; use as a context manager (or ``close()``).

    ``dir``: where the testbeds (``DIR/tb<k>``) and stores (``DIR/store<k>``) go; default a
    fresh ``/tmp/pario-reproduce-*`` removed by :meth:`close`.  ``size``: image bytes per
    server (sparse files).  ``slowdown`` K: every throttle rate ÷ K (K times slower devices,
    so that the throttle, not this machine's CPU, bounds the replay; times scale by about K).
    """

    __test__ = False

    def __init__(self, dir: str | Path | None = None, *, size: int | None = None, slowdown: float = 1.0,
                 progress=None):
        from ..testbed.core import DEFAULT_SIZE, check_support

        if not slowdown or slowdown <= 0 or not np.isfinite(slowdown):
            raise ParioError(f"--testbed-slowdown must be > 0, got {slowdown!r}")
        self.slowdown = float(slowdown)
        check_support()  # one-line ParioError when not root / no loop devices / no throttling
        self._own_dir = dir is None
        self.dir = Path(tempfile.mkdtemp(prefix="pario-reproduce-tb-", dir="/tmp") if dir is None else dir).resolve()
        self.dir.mkdir(parents=True, exist_ok=True)
        self.size = int(size or DEFAULT_SIZE)
        self.progress = progress
        self.experiment = ""  # id of the running experiment, for error messages
        self._beds: dict[tuple, tuple] = {}  # config key → (Testbed, store root, kind → [testbed server names])
        self.calls = 0

    # -- life cycle
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def close(self) -> None:
        """Tear down every testbed this engine brought up (and remove its stores / own dir)."""
        from ..testbed.core import down

        problems = []
        for key in list(self._beds):
            tb, store, _ = self._beds.pop(key)
            with contextlib.suppress(OSError):
                shutil.rmtree(store)
            try:
                down(tb.dir)
            except (ParioError, OSError) as exc:
                problems.append(str(exc))
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)
        if problems:
            raise ParioError("reproduce --engine testbed: " + "; ".join(problems))

    def _say(self, msg: str) -> None:
        if self.progress:
            self.progress(msg)

    def _fail(self, why: str):
        raise Unsupported(f"experiment {self.experiment or '?'}: not available on the testbed: {why}")

    # -- testbeds
    def _bed(self, system):
        """(Testbed, store root) for ``system``'s server configuration, brought up on first use."""
        from ..store import init_store
        from ..testbed.core import set_limits, up

        kinds = [s.kind for s in system.servers]
        if any(k not in ("hdd", "ssd") for k in kinds):
            self._fail(f"servers of kind {sorted(set(kinds) - {'hdd', 'ssd'})} (the testbed has hdd and ssd)")
        lims = [throttle_limits(s, self.slowdown) for s in system.servers]
        by_kind = {k: [tuple(sorted(l.items())) for s, l in zip(system.servers, lims) if s.kind == k]
                   for k in ("hdd", "ssd")}
        key = (tuple(by_kind["hdd"]), tuple(by_kind["ssd"]))
        if key not in self._beds:
            k = len(self._beds)
            d = self.dir / f"tb{k}"
            nh, ns = len(by_kind["hdd"]), len(by_kind["ssd"])
            self._say(f"testbed up: {nh} HDD + {ns} SSD servers in {d}")
            tb = up(d, hdd=nh, ssd=ns, size=self.size)
            store = self.dir / f"store{k}"
            # register before anything else can fail, so close() releases it
            names = {"hdd": [f"H{i}" for i in range(nh)], "ssd": [f"S{i}" for i in range(ns)]}
            self._beds[key] = (tb, store, names)
            for kind in ("hdd", "ssd"):
                for nm, lim in zip(names[kind], by_kind[kind]):
                    set_limits(tb, nm, dict(lim))
        tb, store, names = self._beds[key]
        # the store's profile: the experiment's servers in its order, renamed to the testbed server
        # they live on (k-th hdd server → H<k>, k-th ssd → S<k>), so layouts index the same
        # positions and the replay's per-device statistics (looked up by name) are right
        it = {"hdd": iter(names["hdd"]), "ssd": iter(names["ssd"])}
        tnames = [next(it[s.kind]) for s in system.servers]
        sub = store / "".join(tnames)[:120]
        if not (sub / "store.json").exists():
            mounts = {s.name: s.mount for s in tb.servers}
            sysc = dataclasses.replace(
                system, name=f"{system.name}-on-testbed",
                servers=tuple(dataclasses.replace(s, name=t, capacity=float("inf"))  # capacity: the image's
                              for s, t in zip(system.servers, tnames)))
            init_store(sub, sysc, {t: str(Path(mounts[t]) / f"pario-reproduce-{sub.name}") for t in tnames})
        return tb, sub, tnames

    # -- one run
    def __call__(self, trace, system, layout=None, *, plan=None, routing=None, collective: bool = False,
                 order: str | None = None, cb_buffer=4 << 20, aggregators: int | None = None, **other):
        from ..layout import parse_layout
        from ..plan.collective import order_for
        from ..testbed.bench import device_ios, replay, replay_collective
        from ..units import parse_size

        if routing is not None:
            self._fail("hybrid-replica routing (routing=) is not supported by the testbed replay")
        if other:
            self._fail(f"simulator options {sorted(other)} have no testbed equivalent")
        if plan is not None and (getattr(plan, "replicas", None) or getattr(plan, "routing", None)):
            self._fail("the plan routes requests to replicas, which the testbed replay (one layout per file) "
                       "cannot follow")
        tb, store, tnames = self._bed(system)
        if isinstance(layout, dict):
            plan, layout = _FileLayouts({f: parse_layout(v, system) for f, v in layout.items()}), None
        elif layout is not None:
            layout = parse_layout(layout, system)
        procs = int(len(np.unique(trace.rank)))
        cb = parse_size(cb_buffer, "collective buffer size") if isinstance(cb_buffer, str) else int(cb_buffer)
        names = list(system.names)
        self.calls += 1
        ios0 = device_ios(tb, tnames)
        if collective:
            order = order_for(plan, order)
            # the simulator's default: one aggregator per client node (ranks // procs_per_node)
            n_nodes = int(trace.rank.max()) // int(system.procs_per_node) + 1
            self._say(f"{self.experiment}: collective replay ({order}) of {len(trace)} requests, {procs} ranks")
            res = replay_collective(trace, store, procs=procs, layout=layout, plan=plan, order=order,
                                    cb_buffer=cb, cb_nodes=int(aggregators or n_nodes))
        else:
            self._say(f"{self.experiment}: replay of {len(trace)} requests, {procs} ranks")
            res = replay(trace, store, procs=procs, layout=layout, plan=plan)
        ios1 = device_ios(tb, tnames)
        # every per-server array is in profile order (the store's servers are the profile's, renamed)
        dev = res.device_bytes if res.device_bytes is not None else res.mapped_bytes
        ios = None if ios0 is None or ios1 is None else ios1 - ios0
        lims = [throttle_limits(s, self.slowdown) for s in system.servers]
        busy = np.zeros(len(names))
        # read and write bytes are not separated in the counters: price them at the op of the trace
        op = int(np.bincount(trace.op.astype(np.int64), weights=trace.length).argmax()) if len(trace) else 0
        key = "read" if op == 0 else "write"
        for j, lim in enumerate(lims):
            t_b = float(dev[j]) / lim[f"{key}_bps"]
            t_i = float(ios[j]) / lim[f"{key}_iops"] if ios is not None else 0.0
            busy[j] = max(t_b, t_i)
        wall = float(res.wall_s)
        return Measured(makespan_s=wall, bytes=int(res.bytes), server_names=names,
                        server_bytes=np.asarray(dev, dtype=np.int64), server_ios=ios, server_busy_s=busy,
                        collective=bool(collective), order=order if collective else None,
                        cost_s=wall if collective else None, wall_s=wall,
                        details={"mapped_bytes": np.asarray(res.mapped_bytes).tolist(), "procs": procs,
                                 "limits": lims, "slowdown": self.slowdown})
