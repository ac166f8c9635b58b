"""The redirector (CEDA seed 000 §4.6, §5.2) and hybrid routing (CI-LAYOUT seed 002 §5).

:class:`File` is an open logical file of a :class:`~pario.store.root.Store`.  Every read and
write consults the RMT (:mod:`pario.store.rmt`):

* no entry overlaps the request (the common case, one ``bisect``): the request goes to the
  original file unchanged;
* otherwise the request is cut at the entries' ends into segments; each segment is served by
  an *up-to-date* copy: the DIRTY replica if there is one, else the original or a CLEAN
  replica.  Route ``replica`` (CEDA) prefers a clean replica; route ``cheapest`` (hybrid)
  picks the copy of least ``cost(layout, offset, length)``.  Stale copies are never read.
* a write of a segment goes to the chosen up-to-date copy; the RMT is updated *first*
  (target → DIRTY if it is a replica, all other copies → STALE; committed with
  ``synchronous=FULL``), then the bytes are written.  A crash in between leaves a copy
  marked newer that holds the old (identical) bytes, which the flush copies harmlessly.

:meth:`File.flush` (and close, and the next open after a crash) writes DIRTY replica ranges
back to the original and refreshes STALE replicas from the original, chunk by chunk, each
chunk's flag cleared only after its bytes are fsync'ed (:meth:`File.sync_step`).

Several processes (shared store): a write holds the file's sync lock *shared* from the RMT
lookup to its last byte, a synchronisation step holds it *exclusive* from its copy to the
flag change (:mod:`pario.store.locks`), so no flag is cleared under a write in flight in
any process; the RMT cache follows other processes' commits through the generation
counter, and a read past the size this process knows refreshes the size.

Fast path: a request that hits no entry (CEDA seed 000 §6.4.1, Fig. 17) is recognised by
the file's precomputed block table (:func:`pario.store.rmt._free_runs`: one byte index and
two compares, inlined in :meth:`File.readinto`/:meth:`File.write`) or, when that cannot
tell, one ``bisect``; a request overlapping a few RMT entries is cut into segments with
``bisect`` and integer compares (no numpy), and a segment served by an extent-map replica
is placed by the scalar :func:`pario.store.pieces.fast_pieces`.
"""

from __future__ import annotations

import time
from bisect import bisect_left, bisect_right

import numpy as np

from .. import ParioError
from .locks import held
from .rmt import CLEAN, DIRTY, STALE

SYNC_CHUNK = 4 << 20
FAST_ENTRIES = 16


class File:
    """An open file of a store, with RMT redirection and hybrid routing."""

    def __init__(self, store, name: str):
        self.store = store
        self.name = name
        self.backend = store.backend
        self.rmt = store.rmt
        self.h = self.backend.open(name)
        self.lock = self.h.lock
        self.sync = getattr(store, "sync_locks", None)   # None: exclusive store, no inter-process locks
        self.shared = self.sync is not None
        self.closed = False
        self.refs = 1
        self._reps: dict[str, object] = {}
        self.reload_replicas()

    # ------------------------------------------------------------------ replicas
    def reload_replicas(self) -> None:
        reps = self.rmt.replicas(self.name)
        self.route = "cheapest" if any(r["route"] == "cheapest" for r in reps) else "replica"
        self.full = [r["r_file"] for r in reps if r["mode"] == "full"]

    def _rh(self, r_file: str):
        h = self._reps.get(r_file)
        if h is None:
            h = self.backend.open(r_file)
            self._reps[r_file] = h
        return h

    @property
    def size(self) -> int:
        return self.h.size

    def current_size(self) -> int:
        """The size including other processes' writes (shared store); else :attr:`size`."""
        if self.shared:
            with self.lock:
                return self.backend.refresh_size(self.h)
        return self.h.size

    @property
    def layout(self):
        return self.h.layout

    # ------------------------------------------------------------------ routing
    def _best(self, ent, sk: int, tk: int, clean) -> int:
        best, best_c = -1, self.store.cost(self.h.layout, sk, tk - sk)
        for j in clean:
            rf = ent.r_file[j]
            c = self.store.cost(self._rh(rf).layout, ent._roff[j] + sk - ent._starts[j], tk - sk)
            if c < best_c:
                best, best_c = j, c
        return best

    def _segments_fast(self, ent, x: int, e: int):
        """Scalar :meth:`_segments` for a request overlapping ≤ ``FAST_ENTRIES`` entries (else None)."""
        starts, ends, flags = ent._starts, ent._ends, ent._flags
        i0 = bisect_right(ent._pmax, x)
        i1 = bisect_left(starts, e)
        if i1 - i0 > FAST_ENTRIES:
            return None
        idx = [j for j in range(i0, i1) if ends[j] > x]
        pts = {x, e}
        for j in idx:
            if starts[j] > x:
                pts.add(starts[j])
            if ends[j] < e:
                pts.add(ends[j])
        pts = sorted(pts)
        out = []
        for k in range(len(pts) - 1):
            sk, tk = pts[k], pts[k + 1]
            cov = [j for j in idx if starts[j] <= sk and ends[j] >= tk]
            dirty = next((j for j in cov if flags[j] == DIRTY), None)
            out.append((sk, tk, self._serving(ent, sk, tk, dirty, [j for j in cov if flags[j] == CLEAN])))
        return out

    def _serving(self, ent, sk: int, tk: int, dirty, clean: list) -> int:
        """The up-to-date copy that serves segment ``[sk, tk)``: the DIRTY replica if there is
        one, else the original (-1) when no replica is CLEAN, else the first clean replica
        (route ``replica``, CEDA) or the cheapest copy (route ``cheapest``, hybrid)."""
        if dirty is not None:
            return dirty
        if not clean:
            return -1
        if self.route == "replica":
            return clean[0]
        return self._best(ent, sk, tk, clean)

    def _segments(self, x: int, e: int, write: bool):
        """Segments of ``[x, e)`` with uniform coverage and the copy serving each.

        Returns the entries and a list of (start, end, entry index or -1 for the original).
        """
        ent = self.rmt.entries(self.name)
        fast = self._segments_fast(ent, x, e)
        if fast is not None:
            return ent, fast
        return ent, self._segments_numpy(ent, x, e)

    def _segments_numpy(self, ent, x: int, e: int):
        """Vectorised :meth:`_segments` (any number of overlapping entries)."""
        idx = ent.overlapping(x, e)
        pts = np.unique(np.clip(np.concatenate(([x, e], ent.o_off[idx], ent.end[idx])), x, e))
        s, t = pts[:-1], pts[1:]
        lo, hi, fl = ent.o_off[idx], ent.end[idx], ent.flag[idx]
        cover = (lo[None, :] <= s[:, None]) & (hi[None, :] >= t[:, None])
        out = []
        for k in range(len(s)):
            sk, tk = int(s[k]), int(t[k])
            cov = np.flatnonzero(cover[k])
            dirty = cov[fl[cov] == DIRTY]
            out.append((sk, tk, self._serving(ent, sk, tk, int(idx[dirty[0]]) if len(dirty) else None,
                                              [int(idx[j]) for j in cov[fl[cov] == CLEAN]])))
        return out

    def _dispatch(self, ent, segs, x: int, mv: memoryview, write: bool) -> None:
        groups: dict[int, list] = {}
        for s, t, j in segs:
            groups.setdefault(j, []).append((s, t))
        be = self.backend
        io = be.writev if write else be.readv
        for j, parts in groups.items():
            if j < 0:
                h, shift = self.h, 0
            else:
                h, shift = self._rh(ent.r_file[j]), ent._roff[j] - ent._starts[j]
            if len(parts) == 1:          # one range: the backend's scalar fast path
                s, t = parts[0]
                view = mv if (s == x and t - s == len(mv)) else mv[s - x:t - x]
                if write:
                    be.write1(h, s + shift, view)
                else:
                    be.read1(h, s + shift, t - s, view)
                continue
            a = np.array(parts, dtype=np.int64)
            s, ln = a[:, 0], a[:, 1] - a[:, 0]
            io(h, s + shift, ln, mv, s - x)

    # ------------------------------------------------------------------ I/O
    def readinto(self, offset: int, buf) -> int:
        """Read ``len(buf)`` bytes at ``offset``; bytes past the end read as 0; returns bytes inside the file."""
        mv = memoryview(buf).cast("B")
        offset = int(offset)
        if offset < 0:
            raise ParioError("read: offset must be >= 0")
        with self.lock:
            self.store.fg_last = time.monotonic()
            n = len(mv)
            inside = self.h.size - offset
            if inside >= n > 0:
                inside = n
            else:
                if inside < n and self.shared:    # past what this process knows: others may have extended
                    inside = self.backend.refresh_size(self.h) - offset
                inside = max(0, min(n, inside))
                if inside < n:
                    mv[inside:] = bytes(n - inside)
                if inside <= 0:
                    return 0
            e = offset + inside
            ent = self.rmt.entries(self.name)
            # no entry overlaps [offset, e) (CEDA Fig. 17's path): past every entry (also: the
            # file has none), or the request's blocks are free in the per-file table (one byte),
            # or the exact bisect says so -- Entries.hits, with its first tests inlined
            if offset >= ent.top or ent.free[(blk := offset // ent.bsize)] > (e - 1) // ent.bsize - blk \
                    or not ent.hits(offset, e):
                self.backend.read1(self.h, offset, inside, mv)
                return inside
            ent, segs = self._segments(offset, e, write=False)
            self._dispatch(ent, segs, offset, mv, write=False)
            return inside

    def read(self, offset: int, length: int) -> bytes:
        n = max(0, min(int(length), self.h.size - int(offset)))
        if self.shared and n < int(length):
            n = max(0, min(int(length), self.current_size() - int(offset)))
        buf = bytearray(n)
        if n:
            n = self.readinto(offset, buf)
        return bytes(buf[:n]) if n < len(buf) else bytes(buf)

    def write(self, offset: int, data) -> int:
        """Write ``data`` at ``offset`` (redirected to replicas where the RMT says so)."""
        mv = memoryview(data).cast("B")
        n = len(mv)
        offset = int(offset)
        if offset < 0:
            raise ParioError("write: offset must be >= 0")
        if n == 0:
            return 0
        sync = self.sync          # shared store: the file's sync lock, shared, lookup → last byte
        with self.lock:
            if sync is not None:
                sync.acquire(self.h.id, False, self.name)
            try:
                self.store.fg_last = time.monotonic()
                e = offset + n
                old = self.h.size
                ent = self.rmt.entries(self.name)
                if offset >= ent.top or ent.free[(blk := offset // ent.bsize)] > (e - 1) // ent.bsize - blk \
                        or not ent.hits(offset, e):      # no entry overlaps: as in readinto
                    self.backend.write1(self.h, offset, mv)
                else:
                    ent, segs = self._segments(offset, e, write=True)
                    # RMT first (durable), then the bytes (see module docstring)
                    flags = ent._flags
                    for s, t, j in segs:
                        if j >= 0 and flags[j] == DIRTY:
                            continue   # already the newest copy, every other copy STALE: nothing to mark
                        self.rmt.mark_write(self.name, None if j < 0 else ent.r_file[j], s, t)
                    self._dispatch(ent, segs, offset, mv, write=True)
                if self.full and e > old:
                    # hybrid full replicas grow with the file: the new range is stale there until synced
                    # (from the RMT's own coverage, so several processes extending the file agree)
                    self.rmt.grow_full(self.name, self.full, e)
                if self.route == "cheapest" and self.rmt.entries(self.name).any_unclean:
                    self.store.lazy_sync(self)
                return n
            finally:
                if sync is not None:
                    sync.release(self.h.id)

    def readv(self, offsets, lengths, buf, buf_offsets) -> None:
        """Read many ranges at once: ``[offsets[k], +lengths[k])`` → ``buf[buf_offsets[k]:]``.

        The vectored path of two-phase I/O (one aggregator cycle): when no range is past the
        end and none hits an RMT entry, the whole vector is one backend call, which merges the
        pieces that are contiguous on a server into one ``preadv`` per server run (a HACIO
        cycle's file-noncontiguous blocks on one server become one device request).  Otherwise
        range by range through :meth:`readinto` (redirection, zeros past the end)."""
        mv = memoryview(buf).cast("B")
        o, ln, bo = _vec(offsets, lengths, buf_offsets)
        if len(o) == 0:
            return
        with self.lock:
            self.store.fg_last = time.monotonic()
            e = o + ln
            ent = self.rmt.entries(self.name)
            if int(e.max()) <= self.h.size and (ent.n == 0 or not ent.hits_many(o, e).any()):
                self.backend.readv(self.h, o, ln, mv, bo)
                return
        for x, n, b in zip(o.tolist(), ln.tolist(), bo.tolist()):
            self.readinto(x, mv[b:b + n])

    def writev(self, offsets, lengths, buf, buf_offsets) -> None:
        """Write many non-overlapping ranges at once (``buf[buf_offsets[k]:+lengths[k]]`` →
        ``offsets[k]``): one backend call (server-contiguous pieces merged) when no range hits
        an RMT entry and the file has no full replicas; else range by range through :meth:`write`."""
        mv = memoryview(buf).cast("B")
        o, ln, bo = _vec(offsets, lengths, buf_offsets)
        if len(o) == 0:
            return
        if int(o.min()) < 0:
            raise ParioError("write: offset must be >= 0")
        with self.lock, held(self.sync, self.h.id, False, self.name):
            self.store.fg_last = time.monotonic()
            ent = self.rmt.entries(self.name)
            if not self.full and (ent.n == 0 or not ent.hits_many(o, o + ln).any()):
                self.backend.writev(self.h, o, ln, mv, bo)
                return
        for x, n, b in zip(o.tolist(), ln.tolist(), bo.tolist()):
            self.write(x, mv[b:b + n])

    def truncate(self, size: int) -> None:
        with self.lock:
            size = int(size)
            if size < self.h.size:
                self.rmt.trim(self.name, size)
            self.backend.truncate(self.h, size)

    # ------------------------------------------------------------------ synchronisation
    def sync_step(self, chunk: int = SYNC_CHUNK) -> bool:
        """Synchronise one chunk: first DIRTY replica ranges → original, then original →
        STALE replicas.  Each flag is cleared only after the bytes are fsync'ed.  Returns
        whether unclean entries remain."""
        with self.lock:
            if self.closed or not self.rmt.entries(self.name).any_unclean:
                return False
            with held(self.sync, self.h.id, True, self.name):
                return self._sync_step_locked(chunk)

    def _sync_step_locked(self, chunk: int) -> bool:
        ent = self.rmt.entries(self.name)   # again, under the exclusive sync lock
        if not ent.any_unclean:
            return False
        dirty = np.flatnonzero(ent.flag == DIRTY)
        if len(dirty):
            j = int(dirty[0])
            o, r, n = int(ent.o_off[j]), int(ent.r_off[j]), min(int(ent.length[j]), chunk)
            rh = self._rh(ent.r_file[j])
            buf = bytearray(n)
            self.backend.readv(rh, (r,), (n,), buf, (0,))
            self.backend.writev(self.h, (o,), (n,), buf, (0,))
            self.backend.fsync(self.h)
            self.rmt.set_flag(self.name, ent.r_file[j], o, o + n, DIRTY, CLEAN)
        else:
            j = int(np.flatnonzero(ent.flag == STALE)[0])
            o, r, n = int(ent.o_off[j]), int(ent.r_off[j]), min(int(ent.length[j]), chunk)
            rh = self._rh(ent.r_file[j])
            buf = bytearray(n)
            self.backend.readv(self.h, (o,), (n,), buf, (0,))
            self.backend.writev(rh, (r,), (n,), buf, (0,))
            self.backend.fsync(rh)
            self.rmt.set_flag(self.name, ent.r_file[j], o, o + n, STALE, CLEAN)
        return self.rmt.entries(self.name).any_unclean

    def flush(self) -> None:
        """Write dirty replica data back and refresh stale replicas (CEDA: at close)."""
        with self.lock:
            while self.sync_step():
                pass
            self.rmt.compact(self.name)
            self.backend.fsync(self.h)

    def fsync(self) -> None:
        with self.lock:
            self.backend.fsync(self.h)
            for h in self._reps.values():
                self.backend.fsync(h)

    def close(self) -> None:
        if self.closed:
            return
        self.store._release(self)

    def _close_now(self) -> None:
        self.flush()
        with self.lock:
            for h in self._reps.values():
                self.backend.close(h)
            self._reps.clear()
            self.backend.close(self.h)
            self.closed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _vec(offsets, lengths, buf_offsets):
    """int64 arrays of a vectored request, zero-length ranges dropped."""
    o = np.asarray(offsets, dtype=np.int64).ravel()
    ln = np.asarray(lengths, dtype=np.int64).ravel()
    bo = np.asarray(buf_offsets, dtype=np.int64).ravel()
    if not (len(o) == len(ln) == len(bo)):
        raise ParioError("vectored I/O: offsets, lengths and buffer offsets differ in length")
    keep = ln > 0
    if not keep.all():
        o, ln, bo = o[keep], ln[keep], bo[keep]
    return o, ln, bo
