"""MPI-IO hints: ROMIO's names where they apply, plus pario's own.

ROMIO hints (same meaning as in ROMIO/MPICH):

- ``cb_nodes`` – number of aggregators for two-phase collective I/O (default: one per node,
  nodes found with ``MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)``).
- ``cb_buffer_size`` – collective buffer of each aggregator, bytes (default 16 MiB, ROMIO's
  current default; seed 004 used 4 MiB).  Sizes may use units (``4M``, ``4MiB``).
- ``romio_cb_read`` / ``romio_cb_write`` – ``enable`` | ``disable`` | ``automatic``
  (automatic = two-phase only when the ranks' requests interleave, as ROMIO decides).
- ``striping_unit`` / ``striping_factor`` – stripe size and server count of a file created
  in a pario store (``pario_store``); with ``pario_system`` they also describe a plain
  file's placement for the collective order.

pario hints:

- ``pario_store=DIR`` – open the file in an embedded pario store (redirector, replicas).
- ``pario_plan=PLAN.json`` – a plan (``pario advise``): collective order, layouts, routing.
- ``pario_order=romcio|cacio|hacio`` – request order inside each file domain (seed 004).
- ``pario_trace=PATH`` – record every rank's requests; merged into a pario trace at close.
- ``pario_system=NAME|PATH`` – system profile for server kinds (default: the store's or plan's).
- ``pario_layout=SPEC`` – the file's placement on that system (``fixed:64K``, ``var:…``) for
  plain files (what a parallel file system's layout query would return).
- ``pario_direct=true|false`` – open a store's data files with ``O_DIRECT`` (honest device
  timings, as on the testbed; pieces must then be 4 KiB aligned).  ROMIO's ``direct_read`` /
  ``direct_write`` (its XFS driver's names) are accepted too: either one true turns it on.

Environment defaults (so an unchanged program picks them up, as ROMIO's ``ROMIO_HINTS``
file does; ``pario run`` uses them): ``PARIO_STORE``, ``PARIO_PLAN``, ``PARIO_TRACE``,
``PARIO_ORDER``, ``PARIO_SYSTEM``, ``PARIO_LAYOUT``, ``PARIO_DIRECT`` set the matching ``pario_*`` hint, and
``PARIO_HINTS="key=value,key=value"`` any hint.  A hint the program passes in ``info``
wins over the environment; an empty variable is ignored.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .. import ParioError
from ..units import parse_size

CB_MODES = ("enable", "disable", "automatic")
from ..plan.collective import DEFAULT_CB_BUFFER as ROMIO_DEFAULT_CB_BUFFER  # noqa: E402  (one default)
from ..plan.collective import ORDERS  # noqa: E402  (one list of the orders)
ENV_HINTS = (("PARIO_STORE", "pario_store"), ("PARIO_PLAN", "pario_plan"), ("PARIO_TRACE", "pario_trace"),
             ("PARIO_ORDER", "pario_order"), ("PARIO_SYSTEM", "pario_system"), ("PARIO_LAYOUT", "pario_layout"),
             ("PARIO_DIRECT", "pario_direct"))


def env_hints(environ=None) -> dict[str, str]:
    """Hints from the environment (``PARIO_HINTS`` and the ``PARIO_STORE``… variables)."""
    env = os.environ if environ is None else environ
    out: dict[str, str] = {}
    for item in (env.get("PARIO_HINTS") or "").split(","):
        if not item.strip():
            continue
        key, sep, val = item.partition("=")
        if not sep or not key.strip():
            raise ParioError(f"PARIO_HINTS: {item.strip()!r} is not key=value")
        out[key.strip()] = val.strip()
    for var, key in ENV_HINTS:
        if env.get(var):
            out[key] = env[var]
    return out


def info_to_dict(info) -> dict[str, str]:
    """MPI.Info, a dict or None → dict of strings."""
    if info is None:
        return {}
    if isinstance(info, dict):
        return {str(k): str(v) for k, v in info.items()}
    try:
        from mpi4py import MPI

        if info == MPI.INFO_NULL:
            return {}
        return {k: info.Get(k) for k in info.keys()}
    except Exception as exc:  # pragma: no cover - defensive
        raise ParioError(f"hints: cannot read info object ({exc})") from None


def _size(hints: dict, key: str, default):
    if key not in hints:
        return default
    try:
        v = int(parse_size(hints[key]))
    except Exception:
        raise ParioError(f"hint {key}={hints[key]!r}: not a size") from None
    if v <= 0:
        raise ParioError(f"hint {key} must be > 0")
    return v


def _bool(key: str, value: str) -> bool:
    v = value.strip().lower()
    if v in ("true", "enable", "1", "yes", "on"):
        return True
    if v in ("false", "disable", "0", "no", "off", ""):
        return False
    raise ParioError(f"hint {key}={value!r}: expected true|false")


@dataclass
class Hints:
    cb_nodes: int | None = None
    cb_buffer_size: int = ROMIO_DEFAULT_CB_BUFFER
    cb_read: str = "automatic"
    cb_write: str = "automatic"
    striping_unit: int | None = None
    striping_factor: int | None = None
    store: str | None = None
    plan: str | None = None
    order: str | None = None
    trace: str | None = None
    system: str | None = None
    layout: str | None = None
    direct: bool = False
    raw: dict | None = None

    @classmethod
    def parse(cls, info, environ=None) -> "Hints":
        h = {**env_hints(environ), **info_to_dict(info)}
        out = cls(raw=dict(h))
        if "cb_nodes" in h:
            try:
                out.cb_nodes = int(h["cb_nodes"])
            except ValueError:
                raise ParioError(f"hint cb_nodes={h['cb_nodes']!r}: not an integer") from None
            if out.cb_nodes <= 0:
                raise ParioError("hint cb_nodes must be > 0")
        out.cb_buffer_size = _size(h, "cb_buffer_size", ROMIO_DEFAULT_CB_BUFFER)
        if out.cb_buffer_size > 1 << 30:   # collective/twophase.c's limit (TP_MAX_CB)
            raise ParioError("hint cb_buffer_size must be at most 1 GiB")
        for key, attr in (("romio_cb_read", "cb_read"), ("romio_cb_write", "cb_write")):
            if key in h:
                v = h[key].strip().lower()
                if v not in CB_MODES:
                    raise ParioError(f"hint {key}={h[key]!r}: expected {'|'.join(CB_MODES)}")
                setattr(out, attr, v)
        out.striping_unit = _size(h, "striping_unit", None)
        if "striping_factor" in h:
            out.striping_factor = int(h["striping_factor"])
        out.store = h.get("pario_store") or None
        out.plan = h.get("pario_plan") or None
        out.trace = h.get("pario_trace") or None
        out.system = h.get("pario_system") or None
        out.layout = h.get("pario_layout") or None
        for key in ("pario_direct", "direct_read", "direct_write"):
            if key in h:
                out.direct = out.direct or _bool(key, h[key])
        if "pario_order" in h:
            v = h["pario_order"].strip().lower()
            if v not in ORDERS:
                raise ParioError(f"hint pario_order={h['pario_order']!r}: expected {'|'.join(ORDERS)}")
            out.order = v
        return out

    def as_info_dict(self, n_aggregators: int) -> dict[str, str]:
        """The hints in effect (what ``File.get_info`` reports)."""
        d = dict(self.raw or {})
        d["cb_nodes"] = str(n_aggregators)
        d["cb_buffer_size"] = str(self.cb_buffer_size)
        d["romio_cb_read"] = self.cb_read
        d["romio_cb_write"] = self.cb_write
        if self.order:
            d["pario_order"] = self.order
        return d
