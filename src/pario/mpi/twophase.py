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
   the *one* implementation of ROMCIO / CACIO / HACIO (seed 004 Algorithm 1): the C table
   of ``collective/order.c``, shared with the simulator and the served runtime.  Without a
   placement the order is ROMCIO (logical offset).
5. **Cycles.**  The ordered pieces fill the ``cb_buffer_size`` buffer one after the other;
   cycle ``c`` gets the ``c``-th buffer-full (a piece that crosses a buffer boundary is
   split).  All ranks run ``max`` cycles.  Each aggregator returns to each source the
   (cycle, offset, length) of that source's pieces once, so per cycle only data moves: one
   contiguous message per (source, aggregator) pair (``Isend``/``Irecv``), sent from /
   received into the user's buffer directly when the source's blocks are consecutive in
   its data stream.  The aggregator keeps the blocks of each source back to back and
   writes (reads) the file with ``pwritev`` (``preadv``) whose iovecs point into that
   buffer: no unpack copy.  Writes overlap: cycle ``c`` is written by a writer thread while
   ``c + 1`` is exchanged (each cycle run as two half-size cycles in two buffers, so the
   memory stays ``cb_buffer_size``).  ``PARIO_EXCHANGE=alltoallw`` selects the former
   exchange (``MPI_Alltoallw`` with hindexed types into the cycle buffer).  The overlap
   needs a free core for the writer thread: by default it is on only when the node has
   more usable CPUs than ranks (:func:`spare_core`; with 4 ranks on 2 cores the thread only
   competes with the ranks: 0.60–0.91× MPICH with it, 1.01–1.11× without);
   ``PARIO_CB_OVERLAP=1`` / ``0`` force it on / off.

For ROMCIO on a densely accessed file this is ROMIO's schedule (each cycle a contiguous
``cb_buffer_size`` window of the domain); ROMIO windows include holes, pario's cycles
count data bytes only, so sparse accesses may use fewer cycles.  Holes are never written
(no read-modify-write), which gives the same bytes as ROMIO.
"""

from __future__ import annotations

import os as _os
from dataclasses import dataclass, field

import numpy as np

from ..plan.collective import request_order
from .placement import split_periodic
from .views import gather, scatter

_I64 = np.int64


def spare_core(comm) -> bool:
    """Whether this node has more usable CPUs than ranks of ``comm`` on it (collective), i.e.
    whether an aggregator's writer thread gets a core of its own."""
    from mpi4py import MPI

    node_comm = comm.Split_type(MPI.COMM_TYPE_SHARED, key=comm.rank)
    ranks = node_comm.size
    node_comm.Free()
    try:
        cpus = len(_os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = _os.cpu_count() or 1
    return cpus > ranks


def _overlap(f) -> bool:
    """Overlap an aggregator's writes with the next cycle's exchange (see module docstring)."""
    if _OVERLAP_ENV in ("0", "1"):
        return _OVERLAP_ENV == "1"
    return bool(getattr(f, "spare_core", False))


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
    # exchange mode of this call, the same on every rank: contiguous messages + pwritev/preadv
    # for pieces of >= _MIN_IOV bytes on average, else hindexed Alltoallw into the cycle
    # buffer (MPICH packs many small blocks in C; a Python iovec list would not keep up)
    tot = np.zeros(2, np.int64)
    comm.Allreduce(np.array([len(o), int(l.sum()) if len(l) else 0], np.int64), tot)
    xmode = _MODE if _MODE == "alltoallw" or tot[1] >= _MIN_IOV * max(1, tot[0]) else "alltoallw"
    # ---- 4./5. aggregator: order the domain's pieces, assign cycles
    my_agg = aggs.index(comm.rank) if comm.rank in aggs else -1
    B = int(f.hints.cb_buffer_size)
    if my_agg >= 0:
        src = np.repeat(np.arange(size, dtype=_I64), rcounts // 2)
        a_off, a_len = rmeta[0::2].copy(), rmeta[1::2].copy()
        split = 2 if is_write and _overlap(f) and xmode != "alltoallw" and hasattr(f.backend, "pwritev") else 1
        seg_src, seg_off, seg_len, seg_cyc, seg_seq = _plan_domain(f, my_agg, src, a_off, a_len, B, sched, split)
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
    vec_io = xmode != "alltoallw" and hasattr(backend, "pwritev")
    # writes: cycle c's pwritev runs in a writer thread while cycle c+1 is exchanged (two
    # receive buffers; the syscall releases the GIL).  ROMIO does these one after the other.
    overlap = is_write and vec_io and my_agg >= 0 and ncycles > 1 and _overlap(f)
    pending = [None, None]
    pool = _writer(f) if overlap else None
    for c in range(ncycles):
        si = src_by_cycle[c]
        ai = agg_by_cycle[c]
        a_src, a_off_c, a_len_c = seg_src[ai], seg_off[ai], seg_len[ai]
        src_side = (stream, my_agg_of[si], m_pos[si], m_len[si])
        if xmode == "alltoallw":   # small pieces or PARIO_EXCHANGE=alltoallw: hindexed types into the cycle buffer
            moved += _cycle_alltoallw(f, comm, is_write, src_side, a_src, a_off_c, a_len_c)
            continue
        # aggregator side: blocks arrive / leave contiguous per source, in (source, sequence) order
        # (ai is sorted by source then sequence: see back_order), at rpos in the receive buffer
        total = int(a_len_c.sum()) if len(ai) else 0
        slot = c % 2 if overlap else 0
        if pending[slot] is not None:      # the buffer's previous write must be done
            pending[slot].result()
            pending[slot] = None
        rbuf = _buffer(f, "_rbuf", total) if slot == 0 else _buffer(f, "_rbuf2", total, int(f.hints.cb_buffer_size) // 2)
        rpos = np.concatenate(([0], np.cumsum(a_len_c)[:-1])).astype(_I64) if len(ai) else _Z
        if is_write:
            _exchange_v(comm, src_side, (rbuf, a_src, a_len_c), to_aggregator=True)
            if len(ai):
                if overlap:
                    pending[slot] = pool.submit(_write_cycle, f, backend, vec_io, rbuf, rpos, a_off_c, a_len_c)
                else:
                    _write_cycle(f, backend, vec_io, rbuf, rpos, a_off_c, a_len_c)
                moved += total
        else:
            if len(ai):
                _read_cycle(f, backend, vec_io, rbuf, rpos, a_off_c, a_len_c)
                moved += total
            _exchange_v(comm, src_side, (rbuf, a_src, a_len_c), to_aggregator=False)
    err = None
    for fut in pending:
        if fut is not None:
            try:
                fut.result()
            except BaseException as exc:  # noqa: BLE001 - re-raised after every write finished
                err = err or exc
    if err is not None:
        raise err
    return nbytes


_EMPTY = np.zeros(0, dtype=np.uint8)
_Z = np.zeros(0, dtype=_I64)
_MODE = _os.environ.get("PARIO_EXCHANGE", "p2p")   # p2p (default) | alltoallw (the former exchange)
_INT_MAX = 2**31 - 1
_TAG_DATA = 7201
_IOV_MAX = 1024
_MIN_IOV = 4096   # below this mean block length, pack through the cycle buffer instead of iovecs


_OVERLAP_ENV = _os.environ.get("PARIO_CB_OVERLAP", "auto").strip()


_POOL = None
_BUFS: dict[str, np.ndarray] = {}


def _writer(f):
    """The aggregator's writer thread (one per process, created on first use).

    Collective calls of one process run one after the other and each waits for its writes,
    so one thread and one set of buffers serve every file."""
    global _POOL
    if _POOL is None:
        from concurrent.futures import ThreadPoolExecutor

        _POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pario-cb-writer")
    return _POOL


def _buffer(f, attr: str, n: int, least: int | None = None) -> np.ndarray:
    """A byte buffer kept per process and reused across cycles, calls and files: no page
    faults per cycle or per open (ROMIO allocates its collective buffer in every call)."""
    buf = _BUFS.get(attr)
    want = max(n, int(f.hints.cb_buffer_size) if least is None else least)
    if buf is None or len(buf) < n or len(buf) > 4 * want:
        buf = np.empty(want, dtype=np.uint8)
        _BUFS[attr] = buf
    return buf[:n]


def _cycle_buffer(f, n: int) -> np.ndarray:
    return _buffer(f, "_cbuf", n)


def _exchange_v(comm, src_side, agg_side, *, to_aggregator: bool) -> None:
    """One cycle's data exchange: one contiguous message per (source, aggregator) pair.

    Source side ``(stream, aggregator of each block, stream position, length)``: when the
    blocks for each aggregator follow each other in the stream (IOR, MPI-Tile-IO rows,
    any view read in order) the segment is sent from / received into the user's stream
    directly; otherwise it is packed / unpacked through a scratch buffer.  Aggregator side
    ``(rbuf, source of each block, length)``: the blocks of each source lie back to back in
    ``rbuf`` in the order given, and the aggregator reads/writes the file straight from
    ``rbuf`` with ``preadv``/``pwritev`` (no unpack copy; ROMIO unpacks into its collective
    buffer).
    """
    from mpi4py import MPI

    size = comm.size
    stream, speer, spos, slen = src_side
    rbuf, rsrc, rlen = agg_side
    # -- source side: per-aggregator segments in the stream
    scnt = np.bincount(speer, weights=slen, minlength=size).astype(np.int64) if len(speer) else np.zeros(size, np.int64)
    direct = True
    if len(speer):
        so = np.argsort(speer, kind="stable")
        p_sorted, pos_sorted, len_sorted = speer[so], spos[so], slen[so]
        same_peer = p_sorted[1:] == p_sorted[:-1]
        direct = bool(np.all(pos_sorted[1:][same_peer] == (pos_sorted + len_sorted)[:-1][same_peer]))
        first = np.searchsorted(p_sorted, np.arange(size))
        has = scnt > 0
        sdis = np.zeros(size, np.int64)
        sdis[has] = pos_sorted[first[has]]
    else:
        sdis = np.zeros(size, np.int64)
    if not direct:
        sdis = np.concatenate(([0], np.cumsum(scnt)[:-1])).astype(np.int64)
    # -- aggregator side: per-source segments back to back in rbuf
    acnt = np.bincount(rsrc, weights=rlen, minlength=size).astype(np.int64) if len(rsrc) else np.zeros(size, np.int64)
    adis = np.concatenate(([0], np.cumsum(acnt)[:-1])).astype(np.int64)
    # point-to-point between the peers that have data (MPICH's Alltoallv for large messages
    # runs pairwise steps, which serialises the sources of a single aggregator)
    me = comm.rank
    packed = None
    if not direct and len(speer):
        packed = gather(stream, pos_sorted, len_sorted) if to_aggregator else np.empty(int(scnt.sum()), np.uint8)
    sbase = stream if direct else packed
    src_peers = [int(q) for q in np.flatnonzero(scnt)]
    agg_peers = [int(q) for q in np.flatnonzero(acnt)]

    def rseg(q):  # the aggregator-side segment of peer q
        return rbuf[adis[q]:adis[q] + acnt[q]]

    def sseg(q):  # the sender-side segment for peer q
        return sbase[sdis[q]:sdis[q] + scnt[q]]

    if to_aggregator:   # writes: senders' segments land in the aggregators' buffers
        _p2p(comm, MPI, me, agg_peers, rseg, src_peers, sseg)
    else:               # reads: the aggregators' buffers go back to the requesters
        _p2p(comm, MPI, me, src_peers, sseg, agg_peers, rseg)
    if not to_aggregator and not direct and packed is not None:
        scatter(stream, pos_sorted, len_sorted, packed)


def _file_runs(off: np.ndarray, ln: np.ndarray):
    """Blocks in file order, or None if two blocks overlap; run id of each sorted block."""
    order = np.argsort(off, kind="stable")
    o, l = off[order], ln[order]
    e = o + l
    if len(o) > 1 and np.any(o[1:] < e[:-1]):
        return None
    new = np.r_[True, o[1:] != e[:-1]]
    return order, o, l, np.cumsum(new) - 1, new


def _iov_ok(ln: np.ndarray) -> bool:
    return len(ln) > 0 and int(ln.sum()) >= _MIN_IOV * len(ln)


def _iov_runs(rbuf, rpos, off, ln):
    """The cycle's blocks as file-contiguous runs of iovecs: ``(file offset, [views], [lengths])``
    per run, the views pointing into ``rbuf`` (no copy); None if two blocks overlap."""
    runs = _file_runs(off, ln)
    if runs is None:
        return None
    order, o, l, _, new = runs
    starts = np.flatnonzero(new).tolist() + [len(o)]
    mv = memoryview(rbuf)
    pl, ll, ol = rpos[order].tolist(), l.tolist(), o.tolist()
    return [(ol[a], [mv[pl[k]:pl[k] + ll[k]] for k in range(a, b)], ll[a:b])
            for a, b in zip(starts[:-1], starts[1:])]


def _write_cycle(f, backend, vec_io, rbuf, rpos, off, ln) -> None:
    """Write one cycle's blocks (``rbuf[rpos:rpos+ln]`` → file ``off``)."""
    runs = _iov_runs(rbuf, rpos, off, ln) if vec_io and _iov_ok(ln) else None
    if runs is not None:
        for fo, bufs, _ in runs:
            backend.pwritev(fo, bufs)
        return
    # overlapping or tiny blocks: merge through the cycle buffer, later blocks win (ROMIO)
    run_off, run_len, run_buf, pos, total = _runs(off, ln)
    cbuf = _cycle_buffer(f, total)
    scatter(cbuf, pos, ln, rbuf)   # rbuf holds the blocks back to back (rpos = exclusive cumsum)
    _write_runs(backend, run_off, run_len, cbuf, run_buf)


def _write_runs(backend, run_off, run_len, cbuf, run_buf) -> None:
    """Write disjoint file runs ``cbuf[run_buf:+run_len]`` → ``run_off``.  A store back end
    takes the whole cycle in one call and merges the pieces that are contiguous on a server
    (a HACIO cycle: file-strided blocks of one server → one device write); a POSIX file is
    written run by run."""
    if hasattr(backend, "write_ranges"):
        backend.write_ranges(run_off, run_len, cbuf, run_buf)
        return
    for ro, rl, rb in zip(run_off.tolist(), run_len.tolist(), run_buf.tolist()):
        backend.pwrite(ro, cbuf[rb:rb + rl])


def _read_runs(backend, run_off, run_len, cbuf, run_buf) -> None:
    """:func:`_write_runs` for reads; bytes past the end of the file read as 0."""
    if hasattr(backend, "read_ranges"):
        backend.read_ranges(run_off, run_len, cbuf, run_buf)
        return
    for ro, rl, rb in zip(run_off.tolist(), run_len.tolist(), run_buf.tolist()):
        got = backend.pread_into(cbuf[rb:rb + rl], ro)
        if got < rl:
            cbuf[rb + got:rb + rl] = 0


def _read_cycle(f, backend, vec_io, rbuf, rpos, off, ln) -> None:
    """Fill ``rbuf[rpos:rpos+ln]`` from file ``off`` (zeros past EOF)."""
    runs = _iov_runs(rbuf, rpos, off, ln) if vec_io and _iov_ok(ln) else None
    if runs is not None:
        for fo, bufs, lens in runs:
            got = backend.preadv_into(bufs, fo)
            if got < sum(lens):  # past EOF: zero the rest of the run
                for b, n in zip(bufs, lens):
                    if got < n:
                        b[max(got, 0):] = bytes(n - max(got, 0))
                    got -= n
        return
    run_off, run_len, run_buf, pos, total = _runs(off, ln)
    cbuf = _cycle_buffer(f, total)
    _read_runs(backend, run_off, run_len, cbuf, run_buf)
    gather(cbuf, pos, ln, out=rbuf)


def _cycle_alltoallw(f, comm, is_write, src_side, a_src, a_off_c, a_len_c) -> int:
    """The former exchange (``PARIO_EXCHANGE=alltoallw``): hindexed datatypes straight between
    the user's stream and the cycle buffer, merged runs written with pwrite (kept to compare)."""
    backend = f.backend
    if len(a_src):
        run_off, run_len, run_buf, pos, total = _runs(a_off_c, a_len_c)
        cbuf = _cycle_buffer(f, total)
    else:
        cbuf, pos, total = _EMPTY, _Z, 0
    agg_side = (cbuf, a_src, pos, a_len_c)
    if is_write:
        _exchange(comm, src_side, agg_side)
        if len(a_src):
            _write_runs(backend, run_off, run_len, cbuf, run_buf)
    else:
        if len(a_src):
            _read_runs(backend, run_off, run_len, cbuf, run_buf)
        _exchange(comm, agg_side, src_side)
    return total


def _exchange(comm, send, recv) -> None:
    """``MPI_Alltoallw`` with an hindexed datatype per peer (``PARIO_EXCHANGE=alltoallw``).

    ``send`` / ``recv`` = (buffer, peer of each block, byte offset of each block in the buffer,
    block length); blocks to/from one peer travel in the order given.
    """
    from mpi4py import MPI

    size = comm.size
    sbuf, speer, spos, slen = send
    rbuf, rpeer, rpos, rlen = recv
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
        idx, p_off, p_len, server, kind = placement.pieces(off, ln)
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


def _p2p(comm, MPI, me, recv_peers, recv_seg, send_peers, send_seg) -> None:
    """One contiguous Irecv per receiving peer and one Isend per sending peer (own data copied)."""
    reqs = [comm.Irecv([recv_seg(q), MPI.BYTE], source=q, tag=_TAG_DATA) for q in recv_peers if q != me]
    for q in send_peers:
        seg = send_seg(q)
        if q == me:
            recv_seg(q)[:] = seg
        else:
            reqs.append(comm.Isend([seg, MPI.BYTE], dest=q, tag=_TAG_DATA))
    MPI.Request.Waitall(reqs)
