"""pario's two-phase collective I/O for :class:`pario.mpi.File`: the C driver, bound.

ROMIO's extended two-phase method (seed 004 §2.1, Fig. 1) with pario's request orders
(ROMCIO / CACIO / HACIO, seed 004 Algorithm 1) exists once, in C:
``src/pario/native/collective/`` (``pario_tp_collective``; docs/serve-twophase.md says what
it does step by step), the code the preloaded library serves MPI programs with.  This
module is its Python side, through the extension ``pario.native._collective``
(``python/pycollective.c``, built with ``mpicc``):

- :func:`choose_aggregators`: ROMIO's choice (``pario_tp_choose_aggregators``);
- :func:`compile_layout`: the file's :class:`~pario.mpi.placement.Placement` as the store
  engine's layout, which the C layout callback cuts pieces with (no Python call per piece);
- :func:`collective_io`: one collective access on the file's private communicator (a
  ``Dup`` of the file's, as ROMIO keeps one).  A POSIX file is read and written in C
  (``pwritev``/``preadv`` on its descriptor, the GIL released); another back end (a store
  file, :mod:`pario.mpi.storeio`) is called back once per aggregator cycle with the cycle's
  pieces.  The aggregator's ordered pieces are kept in ``File.last_schedule``
  (:class:`Schedule`).

Errors: a failure on any rank raises :class:`pario.ParioError` on every rank of a
collective call with the first rank's message (a back end's own message, or the driver's
``pario_tp_strerror`` line); an independent access (``romio_cb_* = disable``, or
``automatic`` without interleaving) fails on the ranks it failed on only (MPI-4.1 §14.7).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import ParioError
from .backend import PosixBackend
from .views import gather, scatter

_I64 = np.int64
_CB_MODE = {"enable": 0, "automatic": 1, "disable": 2}   # PARIO_TP_CB_*


def _native():
    try:
        from ..native import _collective
    except ImportError as exc:  # pragma: no cover - a build without mpicc
        from ..native import build_hint

        raise ParioError(f"pario.mpi's collective I/O extension is not built ({exc}): {build_hint()}") from None
    return _collective


def _handle(comm) -> int:
    from mpi4py import MPI

    return MPI._handleof(comm)


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


def choose_aggregators(comm, cb_nodes: int | None) -> list[int]:
    """ROMIO-like aggregator list: the first rank of each node, then the next rank of each
    node, … (nodes: ``MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)``); default ``cb_nodes`` =
    the number of nodes; sorted.  Collective (``pario_tp_choose_aggregators``)."""
    tp = _native()
    code, ranks = tp.choose_aggregators(_handle(comm), int(cb_nodes or 0))
    if code != tp.OK:
        raise ParioError(tp.strerror(code))
    return ranks


# ---------------------------------------------------------------- the layout
def compile_layout(placement) -> tuple | None:
    """The C layout callback's layout of ``placement`` (None: no placement): the store
    engine's parse of the file's layout (``_collective.layout``: its pieces are the mapping's,
    :func:`pario.layout.map_requests`), the layout's ``servers`` and their ``kinds`` (int32,
    the order Algorithm 1 rotates over) and the kind of every system server."""
    if placement is None:
        return None
    from ..layout.mapping import engine_json

    sysk = np.asarray(placement.kinds, np.int32)
    text, n = engine_json(placement.layout, len(sysk))
    servers = placement.servers.astype(np.int32)
    return _native().layout(text, n), servers, sysk[servers], sysk


# ---------------------------------------------------------------- the io callback of other back ends
def _merge(off: np.ndarray, ln: np.ndarray):
    """Pieces (any order, possibly overlapping) as sorted disjoint file runs: ``(run_off,
    run_len, run_buf, pos, total)``, ``pos`` the place of each piece in the runs' buffer."""
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


def _backend_io(f):
    """The io callback for a back end without a file descriptor: one call per aggregator
    cycle (the pieces in the plan's order at ``pos`` in ``buf``), the runs of the cycle in
    one ``write_ranges``/``read_ranges`` call of a store file (pieces contiguous on a server
    merged into one device access), else run by run; ``cycle`` -1: the rank's own extents
    (``File._independent_pieces``).  Overlapping pieces of a write: the later one wins."""
    backend = f.backend

    def io(write, cycle, off, ln, pos, buf):
        off, ln, pos = (np.frombuffer(x, _I64) for x in (off, ln, pos))
        data = np.frombuffer(buf, np.uint8)
        if cycle < 0:
            return f._independent_pieces(bool(write), off, ln, data)
        run_off, run_len, run_buf, rpos, total = _merge(off, ln)
        cbuf = np.empty(total, np.uint8)
        if write:
            scatter(cbuf, rpos, ln, gather(data, pos, ln))
            if hasattr(backend, "write_ranges"):
                backend.write_ranges(run_off, run_len, cbuf, run_buf)
            else:
                for ro, rl, rb in zip(run_off.tolist(), run_len.tolist(), run_buf.tolist()):
                    backend.pwrite(ro, cbuf[rb:rb + rl])
        else:
            if hasattr(backend, "read_ranges"):
                backend.read_ranges(run_off, run_len, cbuf, run_buf)
            else:
                for ro, rl, rb in zip(run_off.tolist(), run_len.tolist(), run_buf.tolist()):
                    got = backend.pread_into(cbuf[rb:rb + rl], ro)
                    cbuf[rb + max(got, 0):rb + rl] = 0    # past the end of the file: zeros
            scatter(data, pos, ln, gather(cbuf, rpos, ln))
        return total

    return io


# ---------------------------------------------------------------- one collective call
def _schedule(rep, B: int) -> Schedule:
    agg, lo, hi, o, l, s, k, p = rep
    sched = Schedule(aggregator=agg, domain=(lo, hi))
    sched.offset, sched.length = np.frombuffer(o, _I64).copy(), np.frombuffer(l, _I64).copy()
    sched.server, sched.kind, sched.proc = (np.frombuffer(x, np.int32).astype(_I64) for x in (s, k, p))
    bufpos = np.concatenate(([0], np.cumsum(sched.length)[:-1])).astype(_I64)
    sched.cycle = bufpos // B
    sched.ncycles = int(sched.cycle.max()) + 1 if len(sched.cycle) else 0
    return sched


def _message(f, exc) -> str:
    if isinstance(exc, OSError):
        return f"{f.path}: {exc.strerror or exc}"
    return str(exc) or type(exc).__name__


def collective_io(f, is_write: bool, foff: np.ndarray, flen: np.ndarray, stream: np.ndarray) -> int:
    """Run one two-phase collective access for ``f`` (a :class:`pario.mpi.File`) with the C
    driver (``pario_tp_collective``).

    ``foff``/``flen``: this rank's file pieces in data-stream order; ``stream``: the data
    (write) or the buffer to fill (read), ``flen.sum()`` bytes.  Returns bytes moved.
    """
    tp = _native()
    h = f.hints
    fd = f.backend.fd if isinstance(f.backend, PosixBackend) else -1
    B = int(h.cb_buffer_size)
    code, moved, indep, rep, exc = tp.collective(
        _handle(f.tp_comm), int(is_write), np.ascontiguousarray(foff, _I64), np.ascontiguousarray(flen, _I64),
        stream, f.order_row, B, int(h.cb_nodes or 0), np.asarray(f.aggregators, np.int32),
        _CB_MODE[h.cb_write if is_write else h.cb_read], f.tp_layout, fd,
        None if fd >= 0 else _backend_io(f), True)
    f.last_schedule = _schedule(rep, B) if rep is not None else Schedule(independent=indep is not None)
    if code == tp.OK:
        return moved if indep is None else indep
    if exc is not None and not isinstance(exc, (ParioError, OSError)):
        raise exc
    own = _message(f, exc) if exc is not None else None
    if own is None and (fd >= 0 or code != tp.EIO):   # the driver's own error (the same on every rank)
        own = f"{f.path}: {tp.strerror(code)}"
    if indep is not None:    # independent access: this rank's own failure only (MPI-4.1 §14.7)
        raise ParioError(own) from exc
    first = next((m for m in f.tp_comm.allgather(own) if m), f"{f.path}: {tp.strerror(code)}")
    raise ParioError(first) from exc
