"""pario's two-phase collective I/O (ROMIO's extended two-phase method, seed 004 §2.1, Fig. 1).

One collective call (``write_at_all`` / ``read_at_all`` …) runs, on every rank:

1. **Offsets.**  Every rank flattens its request through its file view into file pieces;
   ``Allgather`` of each rank's first and last byte gives the aggregate access range.
   With ``romio_cb_* = automatic`` and requests that do not interleave (each rank's range
   starts after the previous rank's range ends, ROMIO's test), every rank does
   independent I/O instead, as ROMIO does.
2. **Aggregators and file domains.**  ``cb_nodes`` aggregators (default one per node,
   chosen like ROMIO: the first rank of each node, then round-robin over nodes); the
   aggregate range is split evenly into one *file domain* per aggregator
   (ROMIO ``ADIOI_Calc_file_domains``: ``fd_size = ⌈(max_end − min_st) / naggr⌉``).
3. **Requests to aggregators.**  Each rank splits its pieces at file-domain boundaries and
   sends their (offset, length) to the owning aggregators (``Alltoall`` + ``Alltoallv``).
4. **Request order.**  Each aggregator splits its domain's pieces at stripe-unit
   boundaries of the file's placement (server and server kind per piece, from the store's
   or plan's layout) and orders them with :func:`pario.plan.collective.request_order` —
   the *one* implementation of ROMCIO / CACIO / HACIO (seed 004 Algorithm 1), shared with
   the simulator.  Without a placement the order is ROMCIO (logical offset).
5. **Cycles.**  The ordered pieces fill the ``cb_buffer_size`` buffer one after the other;
   cycle ``c`` gets the ``c``-th buffer-full (a piece that crosses a buffer boundary is
   split).  All ranks run ``max`` cycles; in each cycle the data of that cycle is
   exchanged with one ``Alltoallv`` and the aggregator writes (or, before the exchange,
   reads) the merged contiguous runs of its cycle buffer.  Each aggregator returns to each
   source the (cycle, offset, length) of that source's pieces once, so per cycle only data
   moves.

For ROMCIO on a densely accessed file this is ROMIO's schedule (each cycle a contiguous
``cb_buffer_size`` window of the domain); ROMIO windows include holes, pario's cycles
count data bytes only, so sparse accesses may use fewer cycles.  Holes are never written
(no read-modify-write), which gives the same bytes as ROMIO.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .placement import split_periodic
from .views import gather, scatter

_I64 = np.int64


def choose_aggregators(comm, cb_nodes: int | None) -> list[int]:
    """ROMIO-like aggregator list: first rank of each node, then the next rank of each node, …

    Nodes are found with ``MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)``.  Default
    ``cb_nodes`` = number of nodes.  Collective.
    """
    from mpi4py import MPI

    node_comm = comm.Split_type(MPI.COMM_TYPE_SHARED, key=comm.rank)
    leader = node_comm.bcast(comm.rank, root=0)
    local = node_comm.rank
    node_comm.Free()
    info = comm.allgather((leader, local))
    leaders = sorted({l for l, _ in info})
    node_of = {l: i for i, l in enumerate(leaders)}
    n = cb_nodes if cb_nodes else len(leaders)
    n = max(1, min(n, comm.size))
    # ROMIO cb_config_list "*:*" style round robin: local index first, node second
    ranked = sorted(range(comm.size), key=lambda r: (info[r][1], node_of[info[r][0]], r))
    return sorted(ranked[:n])


@dataclass
class Schedule:
    """What one aggregator did in one collective call (for tests and the simulator cross-check)."""

    aggregator: int = -1          # index among aggregators (-1: not an aggregator)
    domain: tuple[int, int] = (0, 0)
    offset: np.ndarray = field(default_factory=lambda: np.zeros(0, _I64))   # ordered pieces
    length: np.ndarray = field(default_factory=lambda: np.zeros(0, _I64))
    server: np.ndarray = field(default_factory=lambda: np.zeros(0, _I64))
    kind: np.ndarray = field(default_factory=lambda: np.zeros(0, _I64))
    proc: np.ndarray = field(default_factory=lambda: np.zeros(0, _I64))
    cycle: np.ndarray = field(default_factory=lambda: np.zeros(0, _I64))  # cycle of each piece's first byte
    ncycles: int = 0
    independent: bool = False


def _alltoallv(comm, send: np.ndarray, scounts: np.ndarray, mpitype, recv_dtype=None):
    """Alltoallv with counts exchanged first; returns (recv array, rcounts)."""
    from mpi4py import MPI

    scounts = np.ascontiguousarray(scounts, dtype=np.int32)
    rcounts = np.empty_like(scounts)
    comm.Alltoall([scounts, MPI.INT], [rcounts, MPI.INT])
    recv = np.empty(int(rcounts.sum()), dtype=send.dtype if recv_dtype is None else recv_dtype)
    sdis = np.concatenate(([0], np.cumsum(scounts)[:-1])).astype(np.int32)
    rdis = np.concatenate(([0], np.cumsum(rcounts)[:-1])).astype(np.int32)
    comm.Alltoallv([send, (scounts, sdis), mpitype], [recv, (rcounts, rdis), mpitype])
    return recv, rcounts


def _runs(off: np.ndarray, ln: np.ndarray):
    """Merge ranges (any order) into sorted disjoint runs; position of each range in the run buffer."""
    order = np.argsort(off, kind="stable")
    o, l = off[order], ln[order]
    e = o + l
    reach = np.maximum.accumulate(e)
    new = np.r_[True, o[1:] > reach[:-1]]
    grp = np.cumsum(new) - 1
    run_off = o[new]
    run_end = np.zeros(len(run_off), _I64)
    np.maximum.at(run_end, grp, e)
    run_len = run_end - run_off
    run_buf = np.concatenate(([0], np.cumsum(run_len)[:-1])).astype(_I64)
    pos = np.empty(len(off), _I64)
    pos[order] = run_buf[grp] + (o - run_off[grp])
    return run_off, run_len, run_buf, pos, int(run_len.sum())


def collective_io(f, is_write: bool, foff: np.ndarray, flen: np.ndarray, stream: np.ndarray) -> int:
    """Run one two-phase collective access for ``f`` (a :class:`pario.mpi.File`).

    ``foff``/``flen``: this rank's file pieces in data-stream order; ``stream``: the data
    (write) or the buffer to fill (read), ``flen.sum()`` bytes.  Returns bytes moved.
    """
    from mpi4py import MPI

    comm = f.comm
    size = comm.size
    nbytes = int(flen.sum()) if len(flen) else 0
    if nbytes:
        st, en = int(foff.min()), int((foff + flen).max())
    else:
        st, en = -1, -1
    se = np.empty(2 * size, dtype=_I64)
    comm.Allgather([np.array([st, en], dtype=_I64), MPI.INT64_T], [se, MPI.INT64_T])
    sts, ens = se[0::2], se[1::2]
    has = ens >= 0
    sched = Schedule()
    f.last_schedule = sched
    if not has.any():
        return 0
    mode = f.hints.cb_write if is_write else f.hints.cb_read
    if mode == "disable" or (mode == "automatic" and not _interleaved(sts[has], ens[has])):
        sched.independent = True
        return f._independent_pieces(is_write, foff, flen, stream)

    aggs = f.aggregators
    naggr = len(aggs)
    min_st, max_end = int(sts[has].min()), int(ens[has].max())
    fd = max(1, -(-(max_end - min_st) // naggr))
    # ---- 3. split own pieces at file-domain boundaries, send (offset, length) to aggregators
    spos_start = np.concatenate(([0], np.cumsum(flen)[:-1])).astype(_I64) if len(flen) else np.zeros(0, _I64)
    if nbytes:
        idx, o, l = split_periodic(foff, flen, fd, np.array([0]), base=min_st)
        spos = spos_start[idx] + (o - foff[idx])
        dom = (o - min_st) // fd
    else:
        o = l = spos = dom = np.zeros(0, _I64)
    by_dom = np.argsort(dom, kind="stable")
    o, l, spos, dom = o[by_dom], l[by_dom], spos[by_dom], dom[by_dom]
    agg_rank = np.asarray(aggs, dtype=_I64)
    dest = agg_rank[dom]
    scounts = np.bincount(dest, minlength=size) * 2
    meta = np.empty(2 * len(o), dtype=_I64)
    meta[0::2], meta[1::2] = o, l
    rmeta, rcounts = _alltoallv(comm, meta, scounts, MPI.INT64_T)
    # ---- 4./5. aggregator: order the domain's pieces, assign cycles
    my_agg = aggs.index(comm.rank) if comm.rank in aggs else -1
    B = int(f.hints.cb_buffer_size)
    if my_agg >= 0:
        src = np.repeat(np.arange(size, dtype=_I64), rcounts // 2)
        a_off, a_len = rmeta[0::2].copy(), rmeta[1::2].copy()
        seg_src, seg_off, seg_len, seg_cyc, seg_seq = _plan_domain(f, my_agg, src, a_off, a_len, B, sched)
        sched.domain = (min_st + my_agg * fd, min(max_end, min_st + (my_agg + 1) * fd))
        # back to sources, grouped by source, in (cycle, sequence) order
        back_order = np.lexsort((seg_seq, seg_cyc, seg_src))
        seg_src, seg_off, seg_len, seg_cyc = (a[back_order] for a in (seg_src, seg_off, seg_len, seg_cyc))
        back = np.empty(3 * len(seg_src), dtype=_I64)
        back[0::3], back[1::3], back[2::3] = seg_cyc, seg_off, seg_len
        bcounts = np.bincount(seg_src, minlength=size) * 3
        ncyc_local = int(seg_cyc.max()) + 1 if len(seg_cyc) else 0
    else:
        back = np.zeros(0, _I64)
        bcounts = np.zeros(size, _I64)
        ncyc_local = 0
        seg_src = seg_off = seg_len = seg_cyc = np.zeros(0, _I64)
    rback, rbcounts = _alltoallv(comm, back, bcounts, MPI.INT64_T)
    ncycles = comm.allreduce(ncyc_local, op=MPI.MAX)
    sched.ncycles = ncyc_local
    # ---- source side: stream position of every returned segment
    my_agg_of = np.repeat(np.arange(size, dtype=_I64), rbcounts // 3)
    m_cyc, m_off, m_len = rback[0::3], rback[1::3], rback[2::3]
    if len(m_off):
        k = np.searchsorted(foff, m_off, side="right") - 1
        m_pos = spos_start[k] + (m_off - foff[k])
    else:
        m_pos = np.zeros(0, _I64)
    # per-cycle index lists (stable in aggregator order then sequence order)
    src_by_cycle = _group(m_cyc, ncycles)
    agg_by_cycle = _group(seg_cyc, ncycles) if my_agg >= 0 else [np.zeros(0, _I64)] * ncycles
    moved = 0
    backend = f.backend
    for c in range(ncycles):
        si = src_by_cycle[c]
        ai = agg_by_cycle[c]
        a_src, a_off_c, a_len_c = seg_src[ai], seg_off[ai], seg_len[ai]
        if len(ai):
            run_off, run_len, run_buf, pos, total = _runs(a_off_c, a_len_c)
            cbuf = _cycle_buffer(f, total)
        else:
            cbuf, pos = _EMPTY, np.zeros(0, _I64)
        # this rank as a source: its stream blocks per aggregator; as an aggregator: cbuf blocks per source
        src_side = (stream, my_agg_of[si], m_pos[si], m_len[si])
        agg_side = (cbuf, a_src, pos, a_len_c)
        if is_write:
            _exchange(comm, src_side, agg_side)
            if len(ai):
                for ro, rl, rb in zip(run_off.tolist(), run_len.tolist(), run_buf.tolist()):
                    backend.pwrite(ro, cbuf[rb:rb + rl])
                moved += total
        else:
            if len(ai):
                for ro, rl, rb in zip(run_off.tolist(), run_len.tolist(), run_buf.tolist()):
                    got = backend.pread_into(cbuf[rb:rb + rl], ro)
                    if got < rl:
                        cbuf[rb + got:rb + rl] = 0
                moved += total
            _exchange(comm, agg_side, src_side)
    return nbytes


_EMPTY = np.zeros(0, dtype=np.uint8)
import os as _os
_MODE = _os.environ.get("PARIO_EXCHANGE", "alltoallw")
_RBUF = None


def _cycle_buffer(f, n: int) -> np.ndarray:
    """The aggregator's collective buffer, kept on the file and reused (no page faults per cycle)."""
    buf = getattr(f, "_cbuf", None)
    if buf is None or len(buf) < n:
        buf = np.empty(max(n, int(f.hints.cb_buffer_size)), dtype=np.uint8)
        f._cbuf = buf
    return buf[:n]


def _exchange(comm, send, recv) -> None:
    """One cycle's data exchange: ``MPI_Alltoallw`` with an hindexed datatype per peer.

    ``send`` / ``recv`` = (buffer, peer of each block, byte offset of each block in the buffer,
    block length); blocks to/from one peer travel in the order given.  The datatypes
    address the user's data stream and the aggregator's cycle buffer directly, so no
    packing copy is made (ROMIO does the same with derived datatypes).
    """
    from mpi4py import MPI

    size = comm.size
    sbuf, speer, spos, slen = send
    rbuf, rpeer, rpos, rlen = recv
    if _MODE == "alltoallv":
        so = np.argsort(speer, kind="stable")
        ro = np.argsort(rpeer, kind="stable")
        packed = gather(sbuf, spos[so], slen[so])
        scnt = np.bincount(speer, weights=slen, minlength=size).astype(np.int32)
        rcnt = np.bincount(rpeer, weights=rlen, minlength=size).astype(np.int32)
        sdis = np.concatenate(([0], np.cumsum(scnt)[:-1])).astype(np.int32)
        rdis = np.concatenate(([0], np.cumsum(rcnt)[:-1])).astype(np.int32)
        global _RBUF
        need = int(rcnt.sum())
        if _RBUF is None or len(_RBUF) < need:
            _RBUF = np.empty(need, np.uint8)
        tmp = _RBUF[:need]
        comm.Alltoallv([packed, (scnt, sdis), MPI.BYTE], [tmp, (rcnt, rdis), MPI.BYTE])
        scatter(rbuf, rpos[ro], rlen[ro], tmp)
        return
    stypes, rtypes, free = [MPI.BYTE] * size, [MPI.BYTE] * size, []
    scnt, rcnt = np.zeros(size, np.int32), np.zeros(size, np.int32)
    for buf, peer, pos, ln, types, cnt in ((sbuf, speer, spos, slen, stypes, scnt), (rbuf, rpeer, rpos, rlen, rtypes, rcnt)):
        if len(peer) == 0:
            continue
        order = np.argsort(peer, kind="stable")
        bounds = np.searchsorted(peer[order], np.arange(size + 1))
        for q in range(size):
            sel = order[bounds[q]:bounds[q + 1]]
            if len(sel) == 0:
                continue
            t = MPI.BYTE.Create_hindexed(ln[sel].tolist(), pos[sel].tolist()).Commit()
            types[q] = t
            cnt[q] = 1
            free.append(t)
    zero = np.zeros(size, np.int32)
    sb = sbuf if len(sbuf) else _EMPTY
    rb = rbuf if len(rbuf) else _EMPTY
    comm.Alltoallw([sb, (scnt, zero), stypes], [rb, (rcnt, zero), rtypes])
    for t in free:
        t.Free()


def _group(cyc: np.ndarray, n: int) -> list[np.ndarray]:
    order = np.argsort(cyc, kind="stable")
    bounds = np.searchsorted(cyc[order], np.arange(n + 1))
    return [order[bounds[c]:bounds[c + 1]] for c in range(n)]


def _interleaved(sts: np.ndarray, ens: np.ndarray) -> bool:
    """ROMIO's test: some rank's range starts before the previous rank's range ends."""
    return bool(np.any(sts[1:] < ens[:-1]))


def _plan_domain(f, agg: int, src, off, ln, B: int, sched: Schedule):
    """Order the domain's pieces (seed 004) and cut the sequence into cb_buffer_size cycles.

    Returns per segment: source rank, file offset, length, cycle, sequence number.
    """
    from ..plan.collective import request_order

    placement = f.placement
    method = f.order
    if placement is not None and len(off):
        idx, p_off, p_len, server, kind = placement.pieces(off, ln)
        p_src = src[idx]
        hs, ss = placement.kind_servers
        order = request_order(method, p_off, server, kind, agg, proc=p_src,
                              servers=placement.servers, kind_servers=(hs, ss))
    else:
        p_off, p_len, p_src = off, ln, src
        server = kind = np.zeros(len(off), _I64)
        order = request_order("romcio", p_off, server, kind, agg)
    n = len(p_off)
    # byte packing of the ordered sequence into buffers of B bytes
    o_len = p_len[order]
    bufpos = np.concatenate(([0], np.cumsum(o_len)[:-1])).astype(_I64)
    j, bstart, blen = split_periodic(bufpos, o_len, B, np.array([0]))
    piece = order[j]
    seg_off = p_off[piece] + (bstart - bufpos[j])
    seg_cyc = bstart // B
    seg_src = p_src[piece]
    seg_seq = np.arange(len(j), dtype=_I64)
    first_cycle = np.full(n, -1, _I64)
    first_cycle[order[::-1]] = (bufpos // B)[::-1]
    if len(order) < n:  # HACIO line 7 dropped duplicate pieces: they travel with their twin
        dropped = np.setdiff1d(np.arange(n), order)
        key = {(int(p_off[i]), int(server[i])): int(first_cycle[i]) for i in order}
        cyc_d = np.array([key[(int(p_off[i]), int(server[i]))] for i in dropped], dtype=_I64)
        seg_off = np.concatenate((seg_off, p_off[dropped]))
        blen = np.concatenate((blen, p_len[dropped]))
        seg_cyc = np.concatenate((seg_cyc, cyc_d))
        seg_src = np.concatenate((seg_src, p_src[dropped]))
        seg_seq = np.concatenate((seg_seq, len(j) + np.arange(len(dropped), dtype=_I64)))
    sched.aggregator = agg
    sched.offset, sched.length = p_off[order], p_len[order]
    sched.server, sched.kind, sched.proc = server[order], kind[order], p_src[order]
    sched.cycle = bufpos // B
    return seg_src, seg_off, blen, seg_cyc, seg_seq
