"""System profiles: the servers, the network and the clients a cost model needs.

A profile is TOML (see ``docs/profiles.md``)::

    name = "example"
    [network]
    e = 0.0003          # s to establish one connection (SPEC §1, PADP seed 003 Table 1)
    t = 8.5e-9          # s per byte on the wire
    [clients]
    procs_per_node = 8  # c (PADP) / m (CI-LAYOUT): processes per client node
    [[server]]
    name = "H0"
    kind = "hdd"        # hdd | ssd
    alpha = 0.004       # startup time α (s), the default for every op/pattern
    beta = 1.0e-8       # per-byte time β (s/B), the default for every op
    alpha_read_seq = 0.0001   # optional per-op, per-pattern α
    beta_write = 1.2e-8       # optional per-op β
    capacity = "1g"     # bytes or a size string; absent = unlimited
    cost = "additive"   # additive: α + s·β (the papers, a disk) | max: max(α, s·β) (a rate limiter)

:class:`Server` answers ``alpha(op, sequential)`` and ``beta(op)`` with the most specific
value given, falling back to ``alpha`` / ``beta``.  Vectorised forms
(:meth:`System.alpha_table`, :meth:`System.beta_table`) give per-server arrays for models
and the simulator.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from .. import ParioError
from ..units import parse_size

KINDS = ("hdd", "ssd")
COSTS = ("additive", "max")
_ALPHA_KEYS = ("alpha_read_seq", "alpha_read_rand", "alpha_write_seq", "alpha_write_rand")
_BETA_KEYS = ("beta_read", "beta_write")
_SERVER_KEYS = {"name", "kind", "alpha", "beta", "capacity", "count", "cost", *_ALPHA_KEYS, *_BETA_KEYS}


@dataclass(frozen=True)
class Server:
    """One file server j: kind, startup time α and per-byte time β (per op / pattern), capacity C_j."""

    name: str
    kind: str
    alpha: float
    beta: float
    alpha_read_seq: float | None = None
    alpha_read_rand: float | None = None
    alpha_write_seq: float | None = None
    alpha_write_rand: float | None = None
    beta_read: float | None = None
    beta_write: float | None = None
    capacity: float = math.inf
    cost: str = "additive"   # time of a request of s bytes: α + s·β, or max(α, s·β) (see docs/profiles.md)

    def alpha_for(self, op: int, sequential: bool) -> float:
        """α for op (0 = read, 1 = write) and access pattern (sequential or random)."""
        key = _ALPHA_KEYS[2 * int(op) + (0 if sequential else 1)]
        v = getattr(self, key)
        return self.alpha if v is None else v

    def beta_for(self, op: int) -> float:
        """β for op (0 = read, 1 = write)."""
        v = getattr(self, _BETA_KEYS[int(op)])
        return self.beta if v is None else v

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "kind": self.kind, "alpha": self.alpha, "beta": self.beta}
        for k in (*_ALPHA_KEYS, *_BETA_KEYS):
            if getattr(self, k) is not None:
                d[k] = getattr(self, k)
        if math.isfinite(self.capacity):
            d["capacity"] = int(self.capacity)
        if self.cost != "additive":
            d["cost"] = self.cost
        return d


@dataclass(frozen=True)
class Network:
    """Network parameters: e = connection establish time (s), t = time per byte (s/B)."""

    e: float
    t: float


@dataclass(frozen=True)
class System:
    """A parallel I/O system: servers (in layout order), network and client layout."""

    name: str
    servers: tuple[Server, ...]
    network: Network
    procs_per_node: int = 1
    description: str = ""
    source: dict[str, str] = field(default_factory=dict)

    # ------------------------------------------------------------------ queries
    @property
    def n(self) -> int:
        return len(self.servers)

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.servers]

    def index(self, name: str) -> int:
        for i, s in enumerate(self.servers):
            if s.name == name:
                return i
        raise ParioError(f"no server named {name!r} in system {self.name!r} (servers: {', '.join(self.names)})")

    def of_kind(self, kind: str) -> list[int]:
        """Indices of the servers of one kind (``hdd`` or ``ssd``), in layout order."""
        return [i for i, s in enumerate(self.servers) if s.kind == kind]

    @property
    def kinds(self) -> np.ndarray:
        """Per-server kind code: 0 = hdd, 1 = ssd."""
        return np.array([KINDS.index(s.kind) for s in self.servers], dtype=np.int8)

    def alpha_table(self) -> np.ndarray:
        """Array [server, op, sequential] of α (op 0 = read, 1 = write; seq 0 = random, 1 = sequential)."""
        a = np.empty((self.n, 2, 2))
        for j, s in enumerate(self.servers):
            for op in (0, 1):
                a[j, op, 0] = s.alpha_for(op, False)
                a[j, op, 1] = s.alpha_for(op, True)
        return a

    def beta_table(self) -> np.ndarray:
        """Array [server, op] of β."""
        return np.array([[s.beta_for(0), s.beta_for(1)] for s in self.servers])

    def device_time(self, alpha, transfer, servers=None) -> np.ndarray:
        """A request's time on its server from its startup ``alpha`` and transfer time
        ``transfer`` (arrays, one per request; ``servers``: their server indices, None: one per
        server in order): α + s·β, or max(α, s·β) where the profile says ``cost = "max"``."""
        shape = self.cost_table() if servers is None else self.cost_table()[servers]
        return np.where(shape == 1, np.maximum(alpha, transfer), np.add(alpha, transfer))

    def cheapest_request_s(self, size: int) -> float:
        """The cheapest time the profile prices for one request of ``size`` bytes on one server:
        min over servers of (smallest α of any op and pattern + size · smallest β), or of the
        larger of the two on a server whose profile says ``cost = "max"``."""
        at, bt = self.alpha_table(), self.beta_table()
        return float(np.min(self.device_time(at.reshape(self.n, -1).min(axis=1), size * bt.min(axis=1))))

    def cost_table(self) -> np.ndarray:
        """Per-server cost shape code: 0 = additive (α + s·β), 1 = max (max(α, s·β))."""
        return np.array([COSTS.index(s.cost) for s in self.servers], dtype=np.int8)

    def capacities(self) -> np.ndarray:
        return np.array([s.capacity for s in self.servers], dtype=float)

    def subset(self, indices) -> "System":
        return replace(self, servers=tuple(self.servers[i] for i in indices))

    # ------------------------------------------------------------------ (de)serialisation
    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name}
        if self.description:
            d["description"] = self.description
        d["network"] = {"e": self.network.e, "t": self.network.t}
        d["clients"] = {"procs_per_node": self.procs_per_node}
        d["server"] = [s.to_dict() for s in self.servers]
        if self.source:
            d["source"] = dict(self.source)
        return d

    def to_toml(self) -> str:
        import tomli_w

        return tomli_w.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, data: dict[str, Any], origin: str = "profile") -> "System":
        return _parse(data, origin)


# sanity limits of a profile (docs/profiles.md): beyond them a value is a typo, not a machine
MAX_SERVERS = 65536          # servers in all (the largest parallel file systems have thousands)
MAX_PROCS_PER_NODE = 1 << 20
MAX_COST = 1e6               # α, e (s per request), β, t (s per byte): beyond, a typo (and overflow)


def _num(table: dict, key: str, where: str, *, required: bool = True, positive: bool = False):
    if key not in table:
        if required:
            raise ParioError(f"{where}: missing key '{key}'")
        return None
    v = table[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise ParioError(f"{where}: key '{key}' must be a non-negative number, got {v!r}")
    if positive and v == 0:
        raise ParioError(f"{where}: key '{key}' must be > 0")
    if v > MAX_COST:
        raise ParioError(f"{where}: key '{key}' = {v!r} is beyond the sanity limit of {MAX_COST:g}")
    return float(v)


def _parse(data: dict[str, Any], origin: str) -> System:
    if not isinstance(data, dict):
        raise ParioError(f"{origin}: a profile must be a TOML table")
    net = data.get("network")
    if not isinstance(net, dict):
        raise ParioError(f"{origin}: missing table '[network]'")
    network = Network(e=_num(net, "e", f"{origin} [network]"), t=_num(net, "t", f"{origin} [network]"))
    clients = data.get("clients", {})
    if not isinstance(clients, dict):
        raise ParioError(f"{origin}: '[clients]' must be a table")
    ppn = clients.get("procs_per_node", 1)
    if isinstance(ppn, bool) or not isinstance(ppn, int) or not 1 <= ppn <= MAX_PROCS_PER_NODE:
        raise ParioError(f"{origin} [clients]: key 'procs_per_node' must be an integer from 1 to "
                         f"{MAX_PROCS_PER_NODE}, got {ppn!r}")
    raw = data.get("server")
    if not isinstance(raw, list) or not raw:
        raise ParioError(f"{origin}: needs at least one '[[server]]' table")
    servers: list[Server] = []
    for i, tab in enumerate(raw):
        where = f"{origin} [[server]] #{i + 1}"
        if not isinstance(tab, dict):
            raise ParioError(f"{where}: must be a table")
        unknown = set(tab) - _SERVER_KEYS
        if unknown:
            raise ParioError(f"{where}: unknown key '{sorted(unknown)[0]}'")
        kind = tab.get("kind")
        if kind not in KINDS:
            raise ParioError(f"{where}: key 'kind' must be 'hdd' or 'ssd', got {kind!r}")
        cap = tab.get("capacity")
        if cap is None:
            capacity = math.inf
        else:
            try:
                capacity = float(parse_size(cap if isinstance(cap, (str, int)) else str(cap), "capacity"))
            except ParioError:
                raise ParioError(f"{where}: key 'capacity' must be bytes or a size like '1g', got {cap!r}") from None
        cost = tab.get("cost", "additive")
        if cost not in COSTS:
            raise ParioError(f"{where}: key 'cost' must be 'additive' or 'max', got {cost!r}")
        count = tab.get("count", 1)
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_SERVERS - len(servers):
            raise ParioError(f"{where}: key 'count' must be an integer >= 1, and a profile has at most "
                             f"{MAX_SERVERS} servers (got {count!r})")
        name = tab.get("name")
        if name is None:
            raise ParioError(f"{where}: missing key 'name'")
        if not isinstance(name, str) or not name:
            raise ParioError(f"{where}: key 'name' must be a non-empty string")
        params = dict(
            kind=kind,
            alpha=_num(tab, "alpha", where),
            beta=_num(tab, "beta", where),
            capacity=capacity,
            cost=cost,
            **{k: _num(tab, k, where, required=False) for k in (*_ALPHA_KEYS, *_BETA_KEYS)},
        )
        if count == 1:
            servers.append(Server(name=name, **params))
        else:  # `count = 4` with name "H" expands to H0..H3
            servers.extend(Server(name=f"{name}{k}", **params) for k in range(count))
    names = [s.name for s in servers]
    if len(set(names)) != len(names):
        from collections import Counter

        dup = next(n for n, k in Counter(names).items() if k > 1)
        raise ParioError(f"{origin}: duplicate server name {dup!r}")
    source = data.get("source", {})
    return System(
        name=str(data.get("name", Path(origin).stem)),
        servers=tuple(servers),
        network=network,
        procs_per_node=ppn,
        description=str(data.get("description", "")),
        source={str(k): str(v) for k, v in source.items()} if isinstance(source, dict) else {},
    )


def builtin_names() -> list[str]:
    """Names of the built-in profiles (the papers' clusters)."""
    pkg = resources.files("pario.system") / "builtin"
    return sorted(p.name[:-5] for p in pkg.iterdir() if p.name.endswith(".toml"))


def load_system(spec: str | Path | System) -> System:
    """Load a built-in profile by name or a TOML profile file; raise ParioError on bad input."""
    if isinstance(spec, System):
        return spec
    spec = str(spec)
    path = Path(spec)
    if spec in builtin_names():
        text = (resources.files("pario.system") / "builtin" / f"{spec}.toml").read_text()
        origin = spec
    elif path.exists():
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise ParioError(f"{path}: cannot read profile ({exc})") from None
        origin = str(path)
    else:
        raise ParioError(f"unknown system {spec!r}: not a file and not a built-in ({', '.join(builtin_names())})")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ParioError(f"{origin}: not valid TOML ({exc})") from None
    return _parse(data, origin)
