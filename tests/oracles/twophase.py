"""The reference planning of two-phase collective I/O, in numpy (the test oracle).

pario runs two-phase collective I/O once, in C (``src/pario/native/collective/``:
``pario_tp_collective``; ``pario.mpi.File`` calls it through ``pario.native._collective``,
the preloaded library directly).  This module is the independent reimplementation the tests
compare it with: ROMIO's test for interleaved ranges and an aggregator's plan (its pieces cut
at the placement's server boundaries, ordered -- ROMCIO, or CACIO / HACIO of seed 004
Algorithm 1 --, cut into ``cb_buffer_size`` cycles) as pario had them in Python
(``pario.mpi.twophase`` before issue 25).  tests/native/test_serve_twophase.py and
tests/native/test_serve_mpi.py compute every aggregator's expected schedule with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from oracles.placement import pieces, split_periodic
from pario.plan.collective import request_order

_I64 = np.int64


@dataclass
class Schedule:
    """What one aggregator did in one collective call (the fields of pario.mpi.twophase.Schedule)."""

    aggregator: int = -1
    domain: tuple[int, int] = (0, 0)
    offset: np.ndarray = field(default_factory=lambda: np.zeros(0, _I64))
    length: np.ndarray = field(default_factory=lambda: np.zeros(0, _I64))
    server: np.ndarray = field(default_factory=lambda: np.zeros(0, _I64))
    kind: np.ndarray = field(default_factory=lambda: np.zeros(0, _I64))
    proc: np.ndarray = field(default_factory=lambda: np.zeros(0, _I64))
    cycle: np.ndarray = field(default_factory=lambda: np.zeros(0, _I64))
    ncycles: int = 0
    independent: bool = False


def _interleaved(sts: np.ndarray, ens: np.ndarray) -> bool:
    """ROMIO's test: some rank's range starts before the previous rank's range ends."""
    return bool(np.any(sts[1:] < ens[:-1]))


def _plan_domain(f, agg: int, src, off, ln, B: int, sched: Schedule, split: int = 1):
    """Order the domain's pieces (seed 004) and cut the sequence into cb_buffer_size cycles.

    Returns per segment: source rank, file offset, length, cycle, sequence number.  With
    ``split`` > 1 the returned cycles are execution cycles of ``B / split`` bytes (each
    cb_buffer_size cycle run as ``split`` consecutive smaller ones: overlapped writes keep
    the aggregator's memory at ``B``); ``sched.cycle`` stays in cb_buffer_size cycles.
    """
    Bx = max(1, B // split)
    placement = f.placement
    if placement is not None and len(off):
        idx, p_off, p_len, server, kind = pieces(placement, off, ln)
        p_src = src[idx]
        servers = placement.servers
        order, twin = request_order(f.order, p_off, server, kind, agg, proc=p_src, servers=servers,
                                    server_kinds=placement.kinds[servers], twins=True)
    else:
        p_off, p_len, p_src = off, ln, src
        server = kind = np.zeros(len(off), _I64)
        order, twin = request_order("romcio", p_off, twins=True)   # no placement: ROMCIO
    n = len(p_off)
    # byte packing of the ordered sequence into buffers of B bytes
    o_len = p_len[order]
    bufpos = np.concatenate(([0], np.cumsum(o_len)[:-1])).astype(_I64)
    j, bstart, blen = split_periodic(bufpos, o_len, Bx, np.array([0]))
    piece = order[j]
    seg_off = p_off[piece] + (bstart - bufpos[j])
    seg_cyc = bstart // Bx
    seg_src = p_src[piece]
    seg_seq = np.arange(len(j), dtype=_I64)
    first_cycle = np.full(n, -1, _I64)
    first_cycle[order[::-1]] = (bufpos // Bx)[::-1]
    if len(order) < n:  # HACIO line 7 dropped duplicate pieces: they travel with their twin
        dropped = np.setdiff1d(np.arange(n), order)
        cyc_d = first_cycle[twin[dropped]]
        seg_off = np.concatenate((seg_off, p_off[dropped]))
        blen = np.concatenate((blen, p_len[dropped]))
        seg_cyc = np.concatenate((seg_cyc, cyc_d))
        seg_src = np.concatenate((seg_src, p_src[dropped]))
        seg_seq = np.concatenate((seg_seq, len(j) + np.arange(len(dropped), dtype=_I64)))
    sched.aggregator = agg
    sched.offset, sched.length = p_off[order], p_len[order]
    sched.server, sched.kind, sched.proc = server[order], kind[order], p_src[order]
    sched.cycle = bufpos // B
    sched.ncycles = int(sched.cycle.max()) + 1 if len(sched.cycle) else 0
    return seg_src, seg_off, blen, seg_cyc, seg_seq
