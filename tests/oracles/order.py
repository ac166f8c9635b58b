"""The reference implementation of the collective orders, in numpy (the test oracle).

pario computes every request order with the one table of
``src/pario/native/collective/order.c`` (``pario.plan.collective.request_order`` runs it
through the extension).  This module is the independent reimplementation the tests compare
it with: ROMCIO, CACIO and HACIO as pario had them in Python before the table (seed 004
§2.2, Fig. 3–5, and §3.2 Algorithm 1), with the signature of
:func:`pario.plan.collective.request_order`.
"""

from __future__ import annotations

import numpy as np

from pario import ParioError


def _arr(x, dtype=np.int64) -> np.ndarray:
    return np.asarray(x, dtype=dtype).ravel()


def romcio_order(offset) -> np.ndarray:
    """ROMCIO: pieces in logical file-offset order (stable for equal offsets)."""
    return np.argsort(_arr(offset), kind="stable").astype(np.int64)


def _positions(server: np.ndarray, servers) -> tuple[np.ndarray, int]:
    """Position of each piece's server in ``servers`` (the layout's server order)."""
    if servers is None:
        servers = np.unique(server)
    servers = _arr(servers)
    if len(servers) == 0:
        return np.zeros(len(server), dtype=np.int64), 1
    lookup = {int(s): i for i, s in enumerate(servers)}
    try:
        pos = np.array([lookup[int(s)] for s in np.unique(server)], dtype=np.int64)
    except KeyError as exc:
        raise ParioError(f"collective order: piece on server {exc.args[0]} which is not in the server list") from None
    uniq = np.unique(server)
    return pos[np.searchsorted(uniq, server)], len(servers)


def cacio_order(offset, server, aggregator: int, servers=None) -> np.ndarray:
    """CACIO (seed 004 §2.2, Fig. 4–5): groups by server, issued from server position
    ``aggregator mod n`` of ``servers`` (Algorithm 1 lines 15–25 without the type split)."""
    offset, server = _arr(offset), _arr(server)
    base = romcio_order(offset)
    if len(base) == 0:
        return base
    pos, n = _positions(server, servers)
    rot = (pos - int(aggregator)) % n
    return base[np.argsort(rot[base], kind="stable")].astype(np.int64)


def hacio_order(offset, server, kind, aggregator: int, proc=None, kind_servers=None) -> np.ndarray:
    """HACIO: seed 004 §3.2 Algorithm 1 (heterogeneity-aware request reordering)."""
    offset, server = _arr(offset), _arr(server)
    kind = _arr(kind)
    n = len(offset)
    if len(server) != n or len(kind) != n:
        raise ValueError("offset, server and kind must have the same length")
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if kind.min() < 0 or kind.max() > 1:
        raise ParioError("collective order: server kind must be 0 (HDD) or 1 (SSD)")
    proc = np.zeros(n, dtype=np.int64) if proc is None else _arr(proc)
    # lines 2-13: walk processes in rank order, each process's requests in offset order
    walk = np.lexsort((np.arange(n), offset, proc))
    # line 7: a piece already in T (same offset on the same server) is not appended again
    key_seen = {}
    keep = np.ones(n, dtype=bool)
    for i in walk:
        k = (int(offset[i]), int(server[i]))
        if k in key_seen:
            keep[i] = False
        key_seen[k] = True
    walk = walk[keep[walk]]
    # Server_number(): the server's number among the servers of its type
    number = np.empty(n, dtype=np.int64)
    counts = [0, 0]
    for t in (0, 1):
        sel = kind == t
        lst = np.unique(server[sel]) if kind_servers is None else _arr(kind_servers[t])
        counts[t] = max(len(lst), 1)
        if sel.any():
            pos, _ = _positions(server[sel], lst)
            number[sel] = pos
    # lines 15-26: type 0 first; inside a type, server number (a + i) mod count for i = 0..count-1
    rot = np.empty(n, dtype=np.int64)
    for t in (0, 1):
        sel = kind == t
        rot[sel] = (number[sel] - int(aggregator)) % counts[t]
    # stable sort of the walk by (type, rotated number) keeps the walk order inside a bucket
    order = np.lexsort((np.arange(len(walk)), rot[walk], kind[walk]))
    return walk[order].astype(np.int64)


ORACLES = {"romcio", "cacio", "hacio"}


def twins_of(order, offset, server) -> np.ndarray:
    """For every piece the issued piece it stands for: the first of ``order`` with its offset
    and server (itself when it is issued)."""
    srv = np.zeros(len(offset), np.int64) if server is None else _arr(server)
    first = {}
    for i in np.asarray(order).tolist():
        first.setdefault((int(offset[i]), int(srv[i])), i)
    return np.array([first[(int(o), int(v))] for o, v in zip(_arr(offset).tolist(), srv.tolist())], np.int64)


def request_order(method: str, offset, server=None, kind=None, aggregator: int = 0, *, proc=None,
                  servers=None, server_kinds=None, twins: bool = False):
    """The reference order ``method``, with pario.plan.collective.request_order's arguments
    and result (``twins``: ``(order, twin)``)."""
    m = str(method).lower()
    if m == "romcio":
        order = romcio_order(offset)
    elif m == "cacio":
        order = cacio_order(offset, server, aggregator, servers=servers)
    elif m == "hacio":
        kind_servers = None
        if servers is not None:
            s, k = _arr(servers), _arr(server_kinds)
            kind_servers = (s[k == 0], s[k == 1])
        order = hacio_order(offset, server, kind, aggregator, proc=proc, kind_servers=kind_servers)
    else:
        raise KeyError(f"no reference implementation of the order {method!r}")
    return (order, twins_of(order, _arr(offset), server)) if twins else order
