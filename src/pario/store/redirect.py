"""The redirector (CEDA seed 000 §4.6, §5.2) and hybrid routing (CI-LAYOUT seed 002 §5).

:class:`File` is an open logical file of a :class:`~pario.store.root.Store`.  Every read and
write asks the RMT's C core (:mod:`pario.store.rmt`) where it goes — one call that does the
binary searches, cuts the request into segments of uniform coverage and names the
up-to-date copy that serves each:

* no entry overlaps the request (the common case): the original serves it;
* a segment is served by its DIRTY replica if there is one, else by a CLEAN replica
  (route ``replica``, CEDA) or by the cheapest up-to-date copy (route ``cheapest``, hybrid:
  ``cost(layout, offset, length)``, chosen here), else by the original.  Stale copies are
  never read.
* a write goes to the copy a read would use; the core records the flag change first (the
  target DIRTY, every other copy STALE: one journal record when a copy changes state, none
  when it is already DIRTY), then the bytes are written.  A crash in between leaves a copy
  marked newer that holds the old (identical) bytes, which the flush copies harmlessly.
* a write into a partial replica's own extents (its *slots*, the ranges the CEDA plan
  replicates) where no copy is readable — no entry at all after a truncation (IOR's write
  phase truncates to 0 and writes again) or past the end, or only STALE entries — goes to
  that replica too, DIRTY, as CEDA redirects every write to replicated data: here the
  bytes come first (the replica then holds the only up-to-date copy; a crash before the
  record leaves the original's old bytes in force), then the core's claim (an ADD DIRTY,
  a MARK where the replica had STALE entries) under the journal lock, re-checked there.  A
  write that extends the file first makes the original's data files hold the new size
  (``Backend.reserve``: fallocate of its last byte), as crash recovery and other processes
  derive the size from them.

A request served by one copy (a hit on one replica extent, or a miss) costs the lookup and
one ``preadv``/``pwritev``: the backend's single-piece mapper places it (for an extent-map
replica, one more binary search over the replica's extents).

:meth:`File.flush` (and close, and the next open after a crash) copies DIRTY replica bytes
back to the original, then refreshes STALE replicas from the original, in batches of up to
64 MiB: one vectored copy (or ``copy_file_range``) per copy and batch, one fsync of the
destination, then one transaction that marks the batch CLEAN — O(dirty bytes), and a flag
is cleared only after the bytes it vouches for are durable.

Several processes (shared store): a write holds its byte range of the store's range lock
*shared* from the lookup to its last byte; a synchronisation batch (and the replicator's
chunk) holds its ranges *exclusive* from the copy to the flag change, so no flag is cleared
under a write in flight in any process, and writers elsewhere in the file never wait
(:mod:`pario.store.locks`, docs/store.md).  The core follows other processes' changes
through the journal's end (one load per lookup).
"""

from __future__ import annotations

import time
from bisect import bisect_right

import numpy as np

from .. import ParioError
from ..layout import ExtentMap
from .rmt import CLEAN, COPYING, DIRTY, FRESH, READABLE_CLEAN, STALE

SYNC_CHUNK = 4 << 20      # lazy synchronisation: bytes per step
SYNC_BATCH = 64 << 20     # flush: bytes per batch (one copy, one fsync, one transaction)


class File:
    """An open file of a store, with RMT redirection and hybrid routing."""

    def __init__(self, store, name: str):
        self.store = store
        self.name = name
        self.backend = store.backend
        self.rmt = store.rmt
        self.core = store.rmt.core
        self.h = self.backend.open(name)
        self.fid = self.h.id
        self.lock = self.h.lock
        self.shared = bool(getattr(store, "shared", False))
        self.closed = False
        self.refs = 1
        self._reps: dict[int, object] = {}
        self.reload_replicas()

    # ------------------------------------------------------------------ replicas
    def reload_replicas(self) -> None:
        """Routing and full replicas of this file (again when replicas came or went), and
        the replicas opened now, as a parallel file system client opens a file's objects at
        open: the first redirected request must not pay for it (parsing a replica's extent
        map takes milliseconds)."""
        self._regver = self.core.regver
        reps = self.rmt.replicas(self.name)
        self.cheapest = any(r["route"] == "cheapest" for r in reps)
        self.route = "cheapest" if self.cheapest else "replica"
        self.full = [r["r"] for r in reps if r["mode"] == "full"]
        for r in reps:
            if r["r"] not in self._reps and self.backend.exists(r["r_file"]):
                self._rh(r["r"])
        # the slots: partial replicas' own extents, where a write with no readable copy goes
        # to the replica (:meth:`_write_slot`)
        self._slots = []
        for r in reps:
            lay = getattr(self._reps.get(r["r"]), "layout", None)
            if r["mode"] == "partial" and isinstance(lay, ExtentMap) and len(lay):
                self._slots.append((r["r"], np.asarray(lay.offset, np.int64),
                                    np.asarray(lay.offset + lay.length, np.int64)))

    def revalidate(self) -> None:
        """The RMT's registration version changed: replicas came or went, or another process
        relaid the file out (:mod:`pario.store.relayout`: the name now names a new file id;
        this handle's data files are the old copy, kept for readers).  A write through the
        old copy would be lost: one line instead.  Else the replicas are reloaded."""
        rec = self.backend.meta.get(self.name)
        if rec is None or int(rec[0]) != self.fid:
            raise ParioError(f"file {self.name!r} was relaid out by another process while open here "
                             "(its bytes moved to a new layout); close and reopen it to write")
        self.reload_replicas()

    def _rh(self, r: int):
        """The backend handle of replica file ``r`` (opened on first use)."""
        h = self._reps.get(r)
        if h is None:
            name = self.rmt.name(r)
            if name is None:
                raise ParioError(f"{self.name}: the RMT names replica file id {r}, which the store does not have "
                                 "(run pario store fsck)")
            h = self.backend.open(name)
            self._reps[r] = h
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
    def _choose(self, s: int, t: int) -> tuple[int, int]:
        """Route ``cheapest``: the up-to-date copy of least cost for ``[s, t)`` (the original
        or a CLEAN replica), as ``(replica id or 0, shift)``."""
        best, best_d = 0, 0
        best_c = self.store.cost(self.h.layout, s, t - s)
        for r, d, f in self.core.covers(self.fid, s):
            if f not in READABLE_CLEAN:
                continue
            c = self.store.cost(self._rh(r).layout, s + d, t - s)
            if c < best_c:
                best, best_d, best_c = r, d, c
        return best, best_d

    def _dispatch(self, segs, x: int, mv: memoryview, write: bool) -> None:
        """Move the bytes of a request cut into segments ``(s, t, copy, shift, choice)``."""
        be = self.backend
        for s, t, r, d, choice in segs:
            if choice:
                r, d = self._choose(s, t)
                if write:
                    self.core.mark(self.fid, r, s, t)     # the flags first, then the bytes
            h = self.h if r == 0 else self._rh(r)
            view = mv[s - x:t - x]
            if write:
                be.write1(h, s + d, view)
            else:
                be.read1(h, s + d, t - s, view)

    def served_by(self, x: int, e: int) -> list[tuple[int, int, str | None]]:
        """Where a read of ``[x, e)`` goes now: ``(start, end, replica file or None for the
        original)`` per segment (for reports and tests; the data path does not call it)."""
        with self.lock:
            r = self.core.route(self.fid, int(x), int(e))
            if r is None:
                return [(int(x), int(e), None)]
            if type(r) is tuple:
                return [(int(x), int(e), self.rmt.name(r[0]))]
            out = []
            for s, t, rr, _, choice in r:
                if choice:
                    rr = self._choose(s, t)[0]
                out.append((s, t, self.rmt.name(rr) if rr else None))
            return out

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
            r = self.core.route(self.fid, offset, offset + inside)
            if r is None:                                  # the original serves all of it
                self.backend.read1(self.h, offset, inside, mv)
            elif type(r) is tuple:                         # one replica serves all of it
                h = self._reps.get(r[0]) or self._rh(r[0])
                self.backend.read1(h, offset + r[1], inside, mv)
            else:
                self._dispatch(r, offset, mv if inside == n else mv[:inside], write=False)
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
        e = offset + n
        core, fid = self.core, self.fid
        with self.lock:
            if self.shared:                   # held from the lookup to the last byte
                core.lock(fid, offset, e, False)
            try:
                self.store.fg_last = time.monotonic()
                if (self.shared or e > self.h.size or self._slots) and self._regver != core.regver:
                    self.revalidate()                    # replicas came or went, or a relayout
                if not self._slots:
                    self._write_range(offset, e, mv)
                else:
                    for s, t, r in self._slot_pieces(offset, e):
                        view = mv[s - offset:t - offset]
                        if r and core.all_stale(fid, s, t):
                            self._write_slot(r, s, t, view)
                        else:
                            self._write_range(s, t, view)
                if self.cheapest and core.state(fid)[1]:
                    self.store.lazy_sync(self)
                return n
            finally:
                if self.shared:
                    core.unlock(fid, offset, e)

    def _write_range(self, offset: int, e: int, mv: memoryview) -> None:
        """The bytes of ``[offset, e)`` the usual way: the RMT routes them (redirected where a
        replica has an entry, the flags first), the rest to the original."""
        core, fid = self.core, self.fid
        if self.full and e > self.h.size:
            # hybrid full replicas grow with the file, stale where they grow, before the
            # bytes (from the RMT's own coverage, so several processes extending agree)
            self.rmt.grow_full(self.name, self.full, e)
        r = core.write(fid, offset, e)             # flags first (journal), then the bytes
        if r is None:
            self.backend.write1(self.h, offset, mv)
        elif type(r) is tuple:
            h = self._reps.get(r[0]) or self._rh(r[0])
            self.backend.write1(h, offset + r[1], mv)
            if e > self.h.size:                    # the original's size follows the logical file
                self.backend.extend(self.h, e)
        else:
            self._dispatch(r, offset, mv, write=True)
            if e > self.h.size:
                self.backend.extend(self.h, e)

    def _slot_pieces(self, x: int, e: int) -> list[tuple[int, int, int]]:
        """``[x, e)`` cut at the slots' extents: ``(s, t, replica id or 0)`` in order (the
        first slot replica whose extents hold a piece; 0 outside every slot)."""
        out, pos = [], x
        while pos < e:
            nxt, hit = e, 0
            for r, so, se in self._slots:
                i = int(np.searchsorted(so, pos, side="right")) - 1
                if i >= 0 and pos < int(se[i]):
                    hit, nxt = r, min(e, int(se[i]))
                    break
                if i + 1 < len(so):
                    nxt = min(nxt, int(so[i + 1]))
            out.append((pos, nxt, hit))
            pos = nxt
        return out

    def _write_slot(self, r: int, s: int, t: int, mv: memoryview) -> None:
        """``[s, t)`` inside partial replica ``r``'s own extents with no readable copy there
        (after a truncation, past the end, or every copy STALE): CEDA redirects the write to
        the replica (seed 000 §4.5), DIRTY until synchronised.  The bytes first, then the
        claim (RMT core ``rmt_claim``); a write that extends the file first makes the
        original's data files hold its size (``Backend.reserve``: a crash recovers the size
        from them, other processes read it).  When the claim is refused (another
        process made a copy readable meanwhile) the usual way.  As redirect.c write_slot."""
        self.backend.write1(self._rh(r), s, mv)
        if t > self.h.size:
            self.backend.reserve(self.h, t)
        if not self.core.claim(self.fid, r, s, t):
            self._write_range(s, t, mv)

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
            if int(e.max()) <= self.h.size and not self._hits_any(o, e):
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
        with self.lock:
            lo, hi = int(o.min()), int((o + ln).max())
            if self.shared:
                self.core.lock(self.fid, lo, hi, False)
            try:
                self.store.fg_last = time.monotonic()
                if self._regver != self.core.regver:
                    self.revalidate()
                if not self.full and not self._hits_any(o, o + ln) and not self._slot_hits(o, o + ln):
                    self.backend.writev(self.h, o, ln, mv, bo)
                    return
            finally:
                if self.shared:
                    self.core.unlock(self.fid, lo, hi)
        for x, n, b in zip(o.tolist(), ln.tolist(), bo.tolist()):
            self.write(x, mv[b:b + n])

    def _slot_hits(self, o: np.ndarray, e: np.ndarray) -> bool:
        """Does any range ``[o[k], e[k])`` touch a slot (a partial replica's extents)?"""
        for _, so, se in self._slots:
            i = np.searchsorted(so, e, side="left")     # extents starting before each end ...
            if np.any((i > 0) & (se[np.maximum(i - 1, 0)] > o)):   # ... the last of them ends after its start
                return True
        return False

    def _hits_any(self, o: np.ndarray, e: np.ndarray) -> bool:
        if len(o) == 1:
            return self.core.hits(self.fid, int(o[0]), int(e[0]))
        return bool(np.frombuffer(self.core.hit_mask(self.fid, np.ascontiguousarray(o, dtype=np.int64),
                                                     np.ascontiguousarray(e, dtype=np.int64)), np.uint8).any())

    def truncate(self, size: int) -> None:
        with self.lock:
            if self._regver != self.core.regver:
                self.revalidate()
            size = int(size)
            if size < self.h.size:
                self.rmt.trim(self.name, size)
            self.backend.truncate(self.h, size)

    def resized(self, size: int) -> None:
        """Another process of the job set the size to ``size`` (MPI_File_set_size on rank 0):
        this handle's size is that, and an extension it made before is void (its bytes past
        ``size`` were cut), so it is not committed at close (redirect.c pxs_resized)."""
        with self.lock:
            self.backend.resized(self.h, int(size))

    # ------------------------------------------------------------------ synchronisation
    def sync_step(self, chunk: int = SYNC_CHUNK) -> bool:
        """Synchronise at most ``chunk`` bytes (lazy synchronisation, hybrid replication):
        DIRTY replica ranges → original first, then original → STALE replicas.  Returns
        whether unclean entries remain."""
        with self.lock:
            if self.closed:
                return False
            return self._sync(chunk)

    def _sync(self, budget: int | None, copying: bool = False) -> bool:
        """Copy unclean ranges in batches until none is left (``budget`` None) or ``budget``
        bytes were copied; returns whether unclean entries (that this process may
        synchronise) remain.  ``copying``: COPYING entries count as STALE (recovery: the
        replicator that owned them is gone)."""
        done = 0
        while True:
            ents = self.core.entries(self.fid, True)
            dirty = [x for x in ents if x[4] == DIRTY]
            todo = dirty or [x for x in ents if x[4] == STALE or (copying and x[4] == COPYING)]
            if not todo:
                return False
            if budget is not None and done >= budget:
                return True
            cap = SYNC_BATCH if budget is None else min(SYNC_BATCH, max(budget - done, 1))
            batch, size = [], 0
            for r, off, n, ro, f in todo:
                if size >= cap:
                    break
                take = min(n, cap - size)
                batch.append((r, off, take, ro, f))
                size += take
            self._sync_batch(batch, DIRTY if dirty else None, copying)
            done += size

    def _sync_batch(self, batch, flag, copying: bool, locked: bool = False) -> None:
        """One batch: lock its ranges exclusive (unless the caller holds them), re-read the
        unclean entries inside them (another process may have changed them), copy, fsync
        the destinations, then mark the copied ranges CLEAN in one transaction."""
        ranges = _merge([(off, off + n) for _, off, n, _, _ in batch])
        if self.shared and not locked:
            held = []
            try:
                for a, b in ranges:
                    self.core.lock(self.fid, a, b, True)
                    held.append((a, b))
                self._sync_locked(ranges, flag, copying)
            finally:
                for a, b in held:
                    self.core.unlock(self.fid, a, b)
        else:
            self._sync_locked(ranges, flag, copying)

    def _sync_locked(self, ranges, flag, copying: bool) -> None:
        want = (DIRTY,) if flag == DIRTY else ((STALE, COPYING) if copying else (STALE,))
        pieces = []          # (replica, off, len, r_off, flag) clipped to the locked ranges
        starts = [a for a, _ in ranges]
        for r, off, n, ro, f in self.core.entries(self.fid, True, ranges[0][0], ranges[-1][1]):
            if f not in want:
                continue
            k = max(bisect_right(starts, off) - 1, 0)
            while k < len(ranges) and ranges[k][0] < off + n:
                a, b = ranges[k]
                s, t = max(a, off), min(b, off + n)
                if s < t:
                    pieces.append((r, s, t - s, ro + (s - off), f))
                k += 1
        if not pieces:
            return
        by_r: dict[int, list] = {}
        for p in pieces:
            by_r.setdefault(p[0], []).append(p)
        be = self.backend
        dsts = []
        for r, lst in by_r.items():
            rh = self._rh(r)
            o = [p[1] for p in lst]
            ro = [p[3] for p in lst]
            n = [p[2] for p in lst]
            if flag == DIRTY:      # the replica holds the newest bytes: to the original
                be.copy(rh, ro, self.h, o, n)
                dsts.append(self.h)
            else:                  # the original is up to date: to the stale replica
                be.copy(self.h, o, rh, ro, n)
                dsts.append(rh)
        for h in {id(h): h for h in dsts}.values():
            be.fsync(h)                       # the bytes durable ...
        with self.rmt.transaction():          # ... then the flags that vouch for them
            for r, s, n, _, f in pieces:
                self.core.set_flag(self.fid, r, s, s + n, f, CLEAN)

    def flush(self) -> None:
        """Write dirty replica data back and refresh stale replicas (CEDA: at close)."""
        with self.lock:
            self._sync(None, copying=getattr(self.store, "recovering", False))
            self.backend.fsync(self.h)
            self.rmt.sync()

    def fsync(self) -> None:
        """Make every byte written so far durable: data files (original and replicas), size,
        and the RMT records that say where the newest bytes are (the replicas fsync'ed here
        have their FRESH entries CLEAN from now on)."""
        with self.lock:
            self.backend.fsync(self.h)
            for r, h in self._reps.items():
                fresh = any(e[0] == r and e[4] == FRESH for e in self.core.entries(self.fid))
                self.backend.fsync(h, everything=fresh)     # the replicator wrote through its own handle
                if fresh:
                    self.core.set_flag(self.fid, r, 0, 1 << 62, FRESH, CLEAN)
            self.rmt.sync()

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


def _merge(ranges):
    """Sorted ranges with touching or overlapping ones merged."""
    out = []
    for a, b in sorted(ranges):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


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
