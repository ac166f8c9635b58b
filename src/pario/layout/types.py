"""Layout types: how a file's bytes are placed on servers.

Every layout here (except :class:`ExtentMap`) is described by its *byte-count function*
``C_j(x)`` — the number of the file's bytes in ``[0, x)`` that live on server ``j``.  For
these layouts the server-local offset of byte ``x`` on its server is ``C_j(x)``, so the
sub-request of a request ``[x, x+L)`` on server ``j`` is exactly
``local = C_j(x)``, ``length = C_j(x+L) − C_j(x)`` (one contiguous piece per server, since
``C_j`` is monotone and counts server ``j``'s bytes in file order).  This is the general
form of SPEC §1: round ``r = x div W``, position ``q = x mod W`` and local offset
``r·w_i + (q − prefix_i)``.

Servers are referred to by their index in :attr:`pario.system.System.servers`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import ParioError


#: The largest byte offset a layout may name (stripe round, 2-D block, region bound, extent
#: end): 2^52, the store's offset limit (its range locks, docs/store.md), the C runtime's
#: too (store/layout.c, PXS_LAYOUT_MAX).  A layout beyond it is refused when it is made, so
#: no path (put, replicate, a plan, the served runtime) can place bytes it cannot serve.
LAYOUT_MAX = 1 << 52


def _bounded(v: int, what: str) -> int:
    if v > LAYOUT_MAX:
        raise ParioError(f"{what} {v} is beyond 2^52 bytes (4 PiB), the largest a layout may use")
    return v


class Layout:
    """Base class of all layouts."""

    kind = "layout"

    def servers_used(self) -> tuple[int, ...]:
        raise NotImplementedError

    def counts(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(servers, C)``: server indices and ``C[i, k]`` = bytes of ``[0, x[k])`` on ``servers[i]``."""
        raise NotImplementedError


def _striped_counts(x: np.ndarray, stripes: np.ndarray) -> np.ndarray:
    """``C_i(x) = (x div W)·w_i + clip(x mod W − P_i, 0, w_i)`` for each stripe ``w_i`` (SPEC §1)."""
    W = int(stripes.sum())
    prefix = np.concatenate(([0], np.cumsum(stripes)[:-1]))
    rounds, q = np.divmod(x, W)
    return rounds[None, :] * stripes[:, None] + np.clip(q[None, :] - prefix[:, None], 0, stripes[:, None])


def _check_servers(servers, what: str) -> tuple[int, ...]:
    servers = tuple(int(s) for s in servers)
    if not servers:
        raise ParioError(f"{what}: needs at least one server")
    if len(set(servers)) != len(servers):
        raise ParioError(f"{what}: a server appears twice")
    if min(servers) < 0:
        raise ParioError(f"{what}: negative server index")
    return servers


@dataclass(frozen=True)
class Striped(Layout):
    """Round-robin striping with one stripe size per server (fixed or varied).

    Fixed-size striping (OrangeFS ``simple_stripe``, Lustre ``lfs setstripe -S``) has all
    stripes equal; PADP (seed 003 §3.3) and PSA (seed 001 §3.3) give HServers stripe ``h``
    and SServers stripe ``s``; a stripe of 0 leaves a server out (PADP's h = 0).
    """

    servers: tuple[int, ...]
    stripes: tuple[int, ...]
    kind = "striped"

    def __post_init__(self):
        servers = _check_servers(self.servers, "striped layout")
        stripes = tuple(int(s) for s in self.stripes)
        if len(stripes) != len(servers):
            raise ParioError("striped layout: needs one stripe size per server")
        if min(stripes) < 0 or sum(stripes) <= 0:
            raise ParioError("striped layout: stripe sizes must be >= 0 and not all 0")
        _bounded(sum(stripes), "striped layout: a round of")
        object.__setattr__(self, "servers", servers)
        object.__setattr__(self, "stripes", stripes)

    @classmethod
    def fixed(cls, stripe: int, servers) -> "Striped":
        servers = tuple(servers)
        return cls(servers, (int(stripe),) * len(servers))

    @property
    def width(self) -> int:
        """W = Σ stripe sizes: the bytes of one full round."""
        return sum(self.stripes)

    @property
    def is_fixed(self) -> bool:
        return len(set(self.stripes)) == 1

    def servers_used(self) -> tuple[int, ...]:
        return tuple(s for s, w in zip(self.servers, self.stripes) if w > 0)

    def counts(self, x):
        x = np.asarray(x, dtype=np.int64)
        keep = [i for i, w in enumerate(self.stripes) if w > 0]
        stripes = np.array([self.stripes[i] for i in keep], dtype=np.int64)
        return np.array([self.servers[i] for i in keep]), _striped_counts(x, stripes)


@dataclass(frozen=True)
class Grouped(Layout):
    """CI-LAYOUT's 2-D layout (seed 002 §3): servers split into groups.

    Blocks of ``stripe·|group|`` bytes go round-robin to the groups; inside its group a
    block is striped round-robin over the group's servers with ``stripe``.  So a request of
    one block, aligned, is served by exactly one group ("every process served by one
    group").  One group of all servers is fixed striping (1-DH for large requests); groups
    of one server each put every block on one server (1-DV).
    """

    groups: tuple[tuple[int, ...], ...]
    stripe: int
    kind = "grouped"

    def __post_init__(self):
        groups = tuple(_check_servers(g, "2-D layout group") for g in self.groups)
        if not groups:
            raise ParioError("2-D layout: needs at least one group")
        _check_servers([s for g in groups for s in g], "2-D layout")
        if int(self.stripe) <= 0:
            raise ParioError("2-D layout: stripe must be > 0")
        _bounded(int(self.stripe) * sum(len(g) for g in groups), "2-D layout: a round of")
        object.__setattr__(self, "groups", groups)
        object.__setattr__(self, "stripe", int(self.stripe))

    def servers_used(self) -> tuple[int, ...]:
        return tuple(s for g in self.groups for s in g)

    def counts(self, x):
        x = np.asarray(x, dtype=np.int64)
        block = np.array([self.stripe * len(g) for g in self.groups], dtype=np.int64)
        v = _striped_counts(x, block)  # bytes of [0, x) in each group's virtual file
        rows = []
        for k, g in enumerate(self.groups):
            rows.append(_striped_counts(v[k], np.full(len(g), self.stripe, dtype=np.int64)))
        return np.array(self.servers_used()), np.vstack(rows)


@dataclass(frozen=True)
class Region:
    """Bytes ``[start, end)`` of a file (``end=None``: to the end of the file) under ``layout``."""

    start: int
    end: int | None
    layout: Layout


@dataclass(frozen=True)
class Regions(Layout):
    """A file cut into offset ranges, each with its own layout (PSA seed 001 §3.3).

    Offsets inside a region are region-relative; on each server a region's data follows the
    data of the earlier regions (server-local base = bytes the earlier regions put there).
    """

    regions: tuple[Region, ...]
    kind = "regions"

    def __post_init__(self):
        regs = tuple(self.regions)
        if not regs:
            raise ParioError("region layout: needs at least one region")
        if regs[0].start != 0:
            raise ParioError("region layout: the first region must start at offset 0")
        for a, b in zip(regs, regs[1:]):
            if a.end is None or a.end != b.start:
                raise ParioError("region layout: regions must be contiguous and only the last may be open-ended")
        for r in regs:
            if r.end is not None and r.end <= r.start:
                raise ParioError("region layout: a region must have end > start")
            _bounded(int(r.start if r.end is None else r.end), "region layout: a region bound of")
            if isinstance(r.layout, (Regions, ExtentMap)):
                raise ParioError("region layout: a region's layout must be striped or 2-D")
        object.__setattr__(self, "regions", regs)

    def servers_used(self) -> tuple[int, ...]:
        seen: list[int] = []
        for r in self.regions:
            for s in r.layout.servers_used():
                if s not in seen:
                    seen.append(s)
        return tuple(seen)

    def bases(self) -> list[dict[int, int]]:
        """Per region, server → server-local base offset of that region's data."""
        out, acc = [], {}
        for r in self.regions:
            out.append(dict(acc))
            if r.end is not None:
                srv, c = r.layout.counts(np.array([r.end - r.start]))
                for s, v in zip(srv, c[:, 0]):
                    acc[int(s)] = acc.get(int(s), 0) + int(v)
        return out

    def counts(self, x):
        x = np.asarray(x, dtype=np.int64)
        servers = self.servers_used()
        idx = {s: i for i, s in enumerate(servers)}
        total = np.zeros((len(servers), len(x)), dtype=np.int64)
        for r, base in zip(self.regions, self.bases()):
            end = np.iinfo(np.int64).max if r.end is None else r.end
            rel = np.clip(x, r.start, end) - r.start
            srv, c = r.layout.counts(rel)
            for s, row in zip(srv, c):
                total[idx[int(s)]] += row
        return np.array(servers), total


@dataclass(frozen=True, eq=False)
class ExtentMap(Layout):
    """An explicit map of logical extents to (server, server-local offset, data file).

    CEDA's replica layout (seed 000 §4.3, §4.5): the replicated data of an access pattern is
    stored in replica data files ``datafile`` (≥ 1) on chosen servers; bytes not covered by
    any extent are served by ``default`` (the original layout, data file 0).
    """

    offset: np.ndarray
    length: np.ndarray
    server: np.ndarray
    local: np.ndarray
    datafile: np.ndarray
    default: Layout | None = None
    kind = "extents"

    def __post_init__(self):
        arrs = [np.asarray(getattr(self, k), dtype=np.int64).ravel() for k in ("offset", "length", "server", "local", "datafile")]
        n = len(arrs[0])
        if any(len(a) != n for a in arrs):
            raise ParioError("extent map: offset/length/server/local/datafile must have equal lengths")
        order = np.argsort(arrs[0], kind="stable")
        arrs = [a[order] for a in arrs]
        off, ln, srv, loc, df = arrs
        if n:
            if ln.min() <= 0 or off.min() < 0 or loc.min() < 0 or srv.min() < 0:
                raise ParioError("extent map: extents need length > 0 and non-negative offsets/servers")
            if (off > LAYOUT_MAX - ln).any() or (loc > LAYOUT_MAX - ln).any():
                raise ParioError("extent map: an extent ends beyond 2^52 bytes (4 PiB), the largest a layout may use")
            if df.min() < 0 or df.max() > 1_000_000:
                raise ParioError("extent map: bad data file number")
            if (off[1:] < off[:-1] + ln[:-1]).any():
                raise ParioError("extent map: extents overlap")
        if isinstance(self.default, ExtentMap):
            raise ParioError("extent map: the default layout cannot itself be an extent map")
        for k, a in zip(("offset", "length", "server", "local", "datafile"), arrs):
            a.setflags(write=False)
            object.__setattr__(self, k, a)

    def servers_used(self) -> tuple[int, ...]:
        used = [int(s) for s in dict.fromkeys(self.server.tolist())]
        if self.default is not None:
            used += [s for s in self.default.servers_used() if s not in used]
        return tuple(used)

    def counts(self, x):  # not monotone: mapping uses its own path
        raise TypeError("an extent map has no byte-count function; use map_requests")

    def __len__(self) -> int:
        return len(self.offset)
