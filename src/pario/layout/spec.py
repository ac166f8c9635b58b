"""Layout spec strings and the JSON layout format.

Spec strings (``--layout`` on the CLI)::

    fixed:64K               fixed 64 KiB stripes over all servers of the system
    fixed:64K@H0,H1,S0      ... over the named servers, in that order
    var:hdd=28K,ssd=100K    varied stripes by server kind (kinds not named get 0: left out)
    var:H0=28K,S0=100K      varied stripes by server name (servers not named are left out)
    2d:2:64K                CI-LAYOUT 2-D: servers (in system order) split into 2 equal groups,
                            64 KiB stripe inside a group
    PATH.json               anything else: a JSON layout file (below)

Stripe sizes a user writes (spec strings and JSON layout files) must be at least 512 bytes
(:data:`pario.units.MIN_STRIPE`; 0 still leaves a server out of a ``var`` layout); every
size is at most 2^63 − 1.  Errors name the spec.

JSON layouts name servers, and sizes may be integers or size strings::

    {"type": "striped", "servers": ["H0", "S0"], "stripes": ["28k", "100k"]}
    {"type": "fixed", "stripe": "64k", "servers": ["H0", "H1"]}     # servers optional: all
    {"type": "grouped", "groups": [["H0", "H1"], ["H2", "H3"]], "stripe": "64k"}
    {"type": "regions", "regions": [{"start": 0, "end": "1g", "layout": {...}},
                                    {"start": "1g", "end": null, "layout": {...}}]}
    {"type": "extents", "extents": [[offset, length, "H0", local, datafile], ...],
     "default": {...} | null}
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from .. import ParioError
from ..units import format_size, parse_size, parse_stripe
from .types import ExtentMap, Grouped, Layout, Region, Regions, Striped


def _servers(system, names: list[str] | None) -> tuple[int, ...]:
    if names is None:
        return tuple(range(system.n))
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ParioError("layout: 'servers' must be a list of server names")
    return tuple(system.index(n) for n in names)


def parse_layout(spec: str | Layout | dict, system) -> Layout:
    """Parse a spec string, a JSON layout file path, or a layout dict, against ``system``."""
    if isinstance(spec, Layout):
        return spec
    if isinstance(spec, dict):
        return layout_from_dict(spec, system)
    text = str(spec).strip()
    head, _, rest = text.partition(":")
    try:
        return _parse_spec(text, head.lower(), rest, system)
    except ParioError as exc:
        msg = str(exc)
        raise ParioError(msg if repr(text) in msg or text in msg else f"bad layout {text!r}: {msg}") from None


def _parse_spec(text: str, head: str, rest: str, system) -> Layout:
    if head == "fixed" and rest:
        size, _, names = rest.partition("@")
        servers = _servers(system, [n.strip() for n in names.split(",")] if names else None)
        return Striped.fixed(_stripe(size, text), servers)
    if head == "var" and rest:
        pairs = {}
        for item in rest.split(","):
            key, eq, val = item.partition("=")
            if not eq or not key.strip():
                raise ParioError(f"bad layout {text!r}: expected var:KIND=SIZE,... or var:NAME=SIZE,...")
            pairs[key.strip()] = _stripe(val, text, allow_zero=True)
        kinds = {k.lower() for k in pairs} <= {"hdd", "ssd"}
        if kinds:
            lower = {k.lower(): v for k, v in pairs.items()}
            stripes = [lower.get(s.kind, 0) for s in system.servers]
            servers = tuple(range(system.n))
        else:
            idx = {system.index(k): v for k, v in pairs.items()}
            servers = tuple(sorted(idx))
            stripes = [idx[i] for i in servers]
        if sum(stripes) == 0:
            raise ParioError(f"bad layout {text!r}: every stripe size is 0")
        return Striped(servers, tuple(stripes))
    if head == "2d" and rest:
        parts = rest.split(":")
        if len(parts) != 2:
            raise ParioError(f"bad layout {text!r}: expected 2d:GROUPS:STRIPE")
        try:
            g = int(parts[0])
        except ValueError:
            raise ParioError(f"bad layout {text!r}: group count must be an integer") from None
        if g < 1 or system.n % g:
            raise ParioError(f"bad layout {text!r}: {system.n} servers cannot be split into {g} equal groups")
        size = system.n // g
        groups = tuple(tuple(range(k * size, (k + 1) * size)) for k in range(g))
        return Grouped(groups, _stripe(parts[1], text))
    path = Path(text)
    if path.suffix.lower() == ".json" or path.exists():
        if not path.exists():
            raise ParioError(f"layout file {text!r} does not exist")
        try:
            data = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ParioError(f"{text}: not a JSON layout ({exc})") from None
        if isinstance(data, dict) and "layout" in data and "type" not in data:
            data = data["layout"]
        return layout_from_dict(data, system, user=True)
    raise ParioError(f"bad layout {text!r}: expected fixed:SIZE[@S,..], var:KIND=SIZE,..., 2d:G:SIZE or a JSON file")


def _size(value: Any, ctx: str, what: str = "size") -> int:
    try:
        return parse_size(value if isinstance(value, int) else str(value).strip(), what)
    except ParioError as exc:
        raise ParioError(f"bad layout {ctx!r}: {exc}") from None


def _stripe(value: Any, ctx: str, allow_zero: bool = False, user: bool = True) -> int:
    """A stripe size: at least MIN_STRIPE when a user wrote it (``user``), else any > 0."""
    try:
        v = value if isinstance(value, int) else str(value).strip()
        if user:
            return parse_stripe(v, "stripe size", allow_zero)
        return parse_size(v, "stripe size")
    except ParioError as exc:
        raise ParioError(f"bad layout {ctx!r}: {exc}") from None


def _check_in_system(layout: Layout, system) -> Layout:
    bad = [s for s in layout.servers_used() if s >= system.n]
    if bad:
        raise ParioError(f"layout uses server index {bad[0]} but system {system.name!r} has {system.n} servers")
    return layout


def layout_from_dict(d: dict, system, user: bool = False) -> Layout:
    """Build a layout from its JSON form (server names resolved against ``system``).
    ``user``: a user wrote it (a layout file): stripe sizes must be at least MIN_STRIPE."""
    if not isinstance(d, dict) or "type" not in d:
        raise ParioError("layout JSON must be an object with a 'type' key")
    kind = d["type"]
    try:
        if kind == "fixed":
            return _check_in_system(Striped.fixed(_stripe(d["stripe"], "fixed", user=user),
                                                  _servers(system, d.get("servers"))), system)
        if kind in ("striped", "varied"):
            servers = _servers(system, d.get("servers"))
            stripes = d["stripes"]
            if not isinstance(stripes, list):
                raise ParioError("layout: 'stripes' must be a list")
            return Striped(servers, tuple(_stripe(s, kind, allow_zero=True, user=user) for s in stripes))
        if kind == "grouped":
            groups = d["groups"]
            if not isinstance(groups, list) or not groups:
                raise ParioError("layout: 'groups' must be a non-empty list of server-name lists")
            return Grouped(tuple(_servers(system, g) for g in groups), _stripe(d["stripe"], kind, user=user))
        if kind == "regions":
            regs = []
            for r in d["regions"]:
                end = r.get("end")
                regs.append(Region(_size(r["start"], "region"), None if end is None else _size(end, "region"),
                                   layout_from_dict(r["layout"], system, user)))
            return Regions(tuple(regs))
        if kind == "extents":
            rows = d["extents"]
            if not isinstance(rows, list):
                raise ParioError("layout: 'extents' must be a list of [offset, length, server, local, datafile]")
            fast = _int_extents(rows, system)
            if fast is not None:
                default = d.get("default")
                return ExtentMap(*fast, None if default is None else layout_from_dict(default, system, user))
            if rows:
                off, ln, srv, loc, df = zip(*[(r[0], r[1], r[2], r[3], r[4] if len(r) > 4 else 1) for r in rows])
                srv = [system.index(s) if isinstance(s, str) else int(s) for s in srv]
            else:
                off = ln = srv = loc = df = []
            default = d.get("default")
            for col, vals in (("offset", off), ("length", ln), ("local", loc)):
                for v in vals:
                    _size(v, "extents", col)
            return ExtentMap(np.array(off, dtype=np.int64), np.array(ln, dtype=np.int64), np.array(srv, dtype=np.int64),
                             np.array(loc, dtype=np.int64), np.array(df, dtype=np.int64),
                             None if default is None else layout_from_dict(default, system, user))
    except KeyError as exc:
        raise ParioError(f"layout JSON of type {kind!r} is missing key {exc.args[0]!r}") from None
    except (TypeError, ValueError, IndexError, OverflowError, AttributeError) as exc:
        raise ParioError(f"layout JSON of type {kind!r} is malformed ({exc})") from None
    raise ParioError(f"unknown layout type {kind!r} (striped, fixed, grouped, regions, extents)")


def _int_extents(rows: list, system):
    """The columns of extent rows that are all ``[int, int, server name, int, int]`` with byte
    counts in range — what pario writes — in one pass each (10⁶ rows in ≈ 0.3 s); None for
    anything else, which the general path checks value by value for its one-line error."""
    if not rows or any(type(r) is not list or len(r) != 5 for r in rows):
        return None
    off, ln, srv, loc, df = (list(c) for c in zip(*rows))
    if not all(type(v) is int for col in (off, ln, loc, df) for v in col):
        return None
    if not all(type(s) is str for s in srv):
        return None
    index = {}
    for s in set(srv):
        try:
            index[s] = system.index(s)
        except ParioError:
            return None
    try:
        cols = [np.array(c, dtype=np.int64) for c in (off, ln, loc, df)]
    except OverflowError:
        return None
    if any(len(c) and (c.min() < 0) for c in cols[:3]):
        return None
    server = np.array([index[s] for s in srv], dtype=np.int64)
    return cols[0], cols[1], server, cols[2], cols[3]


class ExtentRows:
    """The ``"extents"`` rows of an :class:`ExtentMap`'s JSON form, ``[offset, length, server
    name, local, datafile]``, kept as the map's columns: :meth:`tolist` gives the rows, and
    :meth:`json_rows` their JSON text a chunk at a time — the numbers formatted by pyarrow's
    compute kernels into one string buffer per chunk, no Python object per value (a CEDA
    replica of 5·10⁶ extents in ≈ 2 s instead of ≈ 15 s and 1.2 GB of lists)."""

    CHUNK = 1 << 20

    def __init__(self, layout: ExtentMap, names):
        self.layout, self.names = layout, list(names)

    def __len__(self) -> int:
        return len(self.layout.offset)

    def tolist(self) -> list[list]:
        m, names = self.layout, self.names
        srv = [names[s] for s in np.asarray(m.server).tolist()]
        return [list(r) for r in zip(np.asarray(m.offset).tolist(), np.asarray(m.length).tolist(), srv,
                                     np.asarray(m.local).tolist(), np.asarray(m.datafile).tolist())]

    def json_rows(self, pad: str, chunk: int | None = None):
        """Text pieces whose ``",\\n"``-join is the rows, one per line, each after ``pad``, as
        :func:`pario.jsonutil.dumps` writes a list of lists (its C encoder's separators)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        m, step = self.layout, chunk or self.CHUNK
        names = pa.array([json.dumps(n) for n in self.names], type=pa.string())
        for a in range(0, len(self), step):
            b = min(len(self), a + step)

            def text(col):  # the map's columns are int64 (ExtentMap.__post_init__)
                return pc.cast(pa.array(col[a:b]), pa.string())

            body = pc.binary_join_element_wise(text(m.offset), text(m.length), names.take(pa.array(m.server[a:b])),
                                               text(m.local), text(m.datafile), ", ")
            rows = pc.binary_join_element_wise(pad + "[", body, "],\n", "")  # each row ends "],\n"
            ends = np.frombuffer(rows.buffers()[1], dtype=np.int32)[rows.offset:rows.offset + len(rows) + 1]
            data = rows.buffers()[2]
            yield data[int(ends[0]):int(ends[-1]) - 2].to_pybytes().decode()  # without the last ",\n"


def layout_to_dict(layout: Layout, system, lazy: bool = False) -> dict:
    """JSON form of a layout, with server names from ``system``; ``lazy``: an extent map's rows
    as an :class:`ExtentRows` for :func:`pario.jsonutil.dump` instead of a list of lists."""
    names = system.names
    if isinstance(layout, Striped):
        return {"type": "striped", "servers": [names[s] for s in layout.servers], "stripes": list(layout.stripes)}
    if isinstance(layout, Grouped):
        return {"type": "grouped", "groups": [[names[s] for s in g] for g in layout.groups], "stripe": layout.stripe}
    if isinstance(layout, Regions):
        return {"type": "regions", "regions": [
            {"start": r.start, "end": r.end, "layout": layout_to_dict(r.layout, system, lazy)} for r in layout.regions]}
    if isinstance(layout, ExtentMap):
        rows = ExtentRows(layout, names)
        return {"type": "extents", "extents": rows if lazy else rows.tolist(),
                "default": None if layout.default is None else layout_to_dict(layout.default, system, lazy)}
    raise TypeError(f"not a layout: {type(layout).__name__}")


def _fs(n: int) -> str:
    return format_size(n).replace(" ", "").replace("iB", "")


def describe(layout: Layout, system) -> str:
    """A short human description, e.g. ``fixed 64K × 8`` or ``⟨28K, 100K⟩ (H×4, S×4)``."""
    names = system.names
    if isinstance(layout, Striped):
        if layout.is_fixed:
            n = len(layout.servers)
            return f"fixed {_fs(layout.stripes[0])} × {n}" + ("" if n == system.n else f" ({','.join(names[s] for s in layout.servers)})")
        kinds = {}
        for s, w in zip(layout.servers, layout.stripes):
            kinds.setdefault(system.servers[s].kind, set()).add(w)
        if all(len(v) == 1 for v in kinds.values()) and set(kinds) <= {"hdd", "ssd"}:
            h = next(iter(kinds.get("hdd", {0})))
            s_ = next(iter(kinds.get("ssd", {0})))
            return f"⟨{_fs(h)}, {_fs(s_)}⟩"
        return "var " + ",".join(f"{names[s]}={_fs(w)}" for s, w in zip(layout.servers, layout.stripes))
    if isinstance(layout, Grouped):
        return f"2-D {len(layout.groups)} groups × {_fs(layout.stripe)}"
    if isinstance(layout, Regions):
        parts = []
        for r in layout.regions:
            end = "end" if r.end is None else _fs(r.end)
            parts.append(f"[{_fs(r.start)}, {end}): {describe(r.layout, system)}")
        return "; ".join(parts)
    if isinstance(layout, ExtentMap):
        base = "" if layout.default is None else f" over {describe(layout.default, system)}"
        return f"{len(layout)} replica extents ({_fs(int(layout.length.sum()))}){base}"
    return type(layout).__name__
