"""An independent reader of the RMT journal: parse ``DIR/rmt.log`` and replay it in Python.

This is the *second implementation* of the journal's format and semantics (the first is the
C core, ``src/pario/native/rmt*.c``), written from the specification in
``src/pario/native/rmt.h`` and docs/store.md, not from the C code: records are checked with
``zlib.crc32``, and every record type is applied to a plain Python model (per replica a
sorted list of ``[off, end, delta, flag]``, canonical: neighbours that continue each other
with the same shift and flag are merged).

``pario store fsck`` replays the journal with it and compares the result, entry for entry,
with the table the store serves from (:meth:`Model.diff`); the property tests feed random
operation sequences to both implementations (tests/store/test_rmt.py).
"""

from __future__ import annotations

import struct
import zlib
from bisect import bisect_right
from dataclasses import dataclass, field
from pathlib import Path

CLEAN, DIRTY, STALE, COPYING, FRESH = 0, 1, 2, 3, 4
NFLAGS = 5
READABLE_CLEAN = (CLEAN, FRESH)
ADD, MARK, SETFLAG, TRIM, GROW, DROP, REGISTER, JOB = range(1, 9)
NAMES = {ADD: "ADD", MARK: "MARK", SETFLAG: "SETFLAG", TRIM: "TRIM", GROW: "GROW", DROP: "DROP",
         REGISTER: "REGISTER", JOB: "JOB"}
NU = {ADD: 5, MARK: 4, SETFLAG: 4, TRIM: 2, GROW: 3, DROP: 1, REGISTER: 2, JOB: 1}
MAGIC = b"PARIORMT"
HDR_SIZE = 4096
HEAD = struct.Struct("<IIQHHI")          # size, crc, seq, type, a16, a32
HEADER = struct.Struct("<8sIIQQQQII40s")  # magic, version, hdr_size, epoch, end, seq, synced, clean, verify, boot
I64_MAX = (1 << 63) - 1


@dataclass
class Record:
    pos: int
    seq: int
    type: int
    a16: int
    a32: int
    u: tuple
    data: bytes

    def describe(self) -> str:
        return f"#{self.seq} {NAMES.get(self.type, self.type)} {self.u} a16={self.a16}"


@dataclass
class Journal:
    header: dict
    records: list[Record]
    end: int                # offset after the last valid record
    stop_reason: str        # why the scan stopped


def _i64(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def read(path, limit: int | None = None, *, raw: bytes | None = None) -> Journal:
    """Parse the journal at ``path`` (or its bytes ``raw``, ``path`` then only names it): the
    header and every valid record up to ``limit`` (default: the header's published end;
    ``0``: as far as valid records go)."""
    if raw is None:
        raw = Path(path).read_bytes()
    if len(raw) < HDR_SIZE:
        raise ValueError(f"{path}: shorter than its header")
    magic, version, hdr_size, epoch, end, seq, synced, clean, verify, boot = HEADER.unpack_from(raw, 0)
    if magic != MAGIC or version != 1 or hdr_size != HDR_SIZE:
        raise ValueError(f"{path}: not an RMT journal (magic {magic!r}, version {version})")
    header = {"epoch": epoch, "end": end, "seq": seq, "synced": synced, "clean": clean,
              "verify": verify, "boot_id": boot.rstrip(b"\0").decode(errors="replace")}
    stop = end if limit is None else (limit or len(raw))
    stop = min(stop, len(raw))
    pos, last, out, reason = HDR_SIZE, 0, [], "end"
    while pos < stop:
        if pos + HEAD.size > stop:
            reason = f"incomplete record header at {pos}"
            break
        size, crc, rseq, typ, a16, a32 = HEAD.unpack_from(raw, pos)
        if size == 0:
            reason = f"end marker at {pos}"
            break
        if size < HEAD.size or size % 8 or pos + size > stop:
            reason = f"bad record size {size} at {pos}"
            break
        if rseq != last + 1:
            reason = f"sequence {rseq} after {last} at {pos}"
            break
        if typ not in NU:
            reason = f"unknown record type {typ} at {pos}"
            break
        nb = a32 if typ in (REGISTER, JOB) else 0
        if size != HEAD.size + 8 * NU[typ] + ((nb + 7) & ~7):
            reason = f"record size {size} does not fit type {typ} at {pos}"
            break
        if zlib.crc32(raw[pos + 8:pos + size]) != crc:
            reason = f"bad crc at {pos}"
            break
        u = struct.unpack_from(f"<{NU[typ]}Q", raw, pos + HEAD.size)
        d0 = pos + HEAD.size + 8 * NU[typ]
        out.append(Record(pos, rseq, typ, a16, a32, u, raw[d0:d0 + nb]))
        last = rseq
        pos += size
    return Journal(header, out, pos, reason)


# ---------------------------------------------------------------------- the model
@dataclass
class Rep:
    o: int
    registered: bool = False
    mode: int = 0
    route: int = 0
    name: str = ""
    ents: list = field(default_factory=list)     # [off, end, delta, flag], sorted, disjoint, canonical


def _canon(lst: list) -> list:
    out = []
    for e in lst:
        if out and out[-1][1] == e[0] and out[-1][2] == e[2] and out[-1][3] == e[3]:
            out[-1] = [out[-1][0], e[1], e[2], e[3]]
        else:
            out.append(list(e))
    return out


def _window(ents: list, a: int, b: int) -> tuple[int, int]:
    """Indices [i, j) of the entries overlapping [a, b) (entries sorted and disjoint)."""
    ends = [e[1] for e in ents]
    i = bisect_right(ends, a)
    j = i
    while j < len(ents) and ents[j][0] < b:
        j += 1
    return i, j


def _paint(ents: list, a: int, b: int, fn) -> list:
    """The entries with the flag of their part inside [a, b) replaced by fn(flag) (None: keep)."""
    i, j = _window(ents, a, b)
    mid = []
    for off, end, d, f in ents[i:j]:
        nf = fn(f)
        if nf is None or nf == f:
            mid.append([off, end, d, f])
            continue
        s, t = max(a, off), min(b, end)
        if s > off:
            mid.append([off, s, d, f])
        mid.append([s, t, d, nf])
        if end > t:
            mid.append([t, end, d, f])
    lo, hi = max(0, i - 1), min(len(ents), j + 1)
    return ents[:lo] + _canon(ents[lo:i] + mid + ents[j:hi]) + ents[hi:]


def _minus(a: int, b: int, spans) -> list[tuple[int, int]]:
    """[a, b) minus the union of the sorted ``spans``."""
    out, pos = [], a
    for s, t in sorted(spans):
        if t <= pos or s >= b:
            continue
        if s > pos:
            out.append((pos, s))
        pos = max(pos, t)
        if pos >= b:
            break
    if pos < b:
        out.append((pos, b))
    return out


class Model:
    """The RMT state as the journal describes it."""

    def __init__(self) -> None:
        self.reps: dict[int, Rep] = {}
        self.jobs: dict[int, tuple[int, str]] = {}
        self.trim_floor: dict[int, int] = {}      # replica -> least TRIM size since its last JOB record
        self.refused: list[Record] = []

    # ---------------------------------------------------------------- helpers
    def reps_of(self, o: int) -> list[tuple[int, Rep]]:
        return sorted((r, p) for r, p in self.reps.items() if p.o == o)

    def originals(self) -> set[int]:
        return {p.o for p in self.reps.values()}

    def _dirty_spans(self, o: int, skip: int, a: int, b: int) -> list[tuple[int, int]]:
        out = []
        for r, p in self.reps_of(o):
            if r == skip:
                continue
            for off, end, _, f in p.ents:
                if f == DIRTY and off < b and end > a:
                    out.append((max(a, off), min(b, end)))
        return out

    def _covers(self, p: Rep, a: int, b: int) -> bool:
        return not _minus(a, b, [(e[0], e[1]) for e in p.ents])

    # ---------------------------------------------------------------- records
    def valid(self, rec: Record) -> bool:
        t, u, a16 = rec.type, rec.u, rec.a16
        if t == ADD:
            o, r, x, ro, n = u
            x, ro, n = _i64(x), _i64(ro), _i64(n)
            if not o or not r or o == r or x < 0 or ro < 0 or n <= 0 or x > I64_MAX - n or ro > I64_MAX - n \
                    or a16 >= NFLAGS:
                return False
            if r in self.reps and self.reps[r].o != o:
                return False
            if o in self.reps or r in self.originals():
                return False
            if a16 == DIRTY and any(f != STALE for q, p in self.reps_of(o) if q != r
                                    for off, end, _, f in p.ents if off < x + n and end > x):
                return False        # a DIRTY entry only where every other copy is STALE
            return True
        if t == MARK:
            o, tgt, a, b = u
            a, b = _i64(a), _i64(b)
            if not o or a < 0 or b <= a:
                return False
            if tgt:
                p = self.reps.get(tgt)
                return p is not None and p.o == o and self._covers(p, a, b)
            return True
        if t == SETFLAG:
            o, r, a, b = u
            a, b = _i64(a), _i64(b)
            old, new = a16 & 0xFF, a16 >> 8
            if not o or not r or a < 0 or b <= a or old >= NFLAGS or new >= NFLAGS:
                return False
            p = self.reps.get(r)
            if p is not None and p.o != o:
                return False
            return new != DIRTY     # a copy becomes DIRTY only by a write (MARK)
        if t == TRIM:
            return bool(u[0]) and _i64(u[1]) >= 0
        if t == GROW:
            p = self.reps.get(u[1])
            return p is not None and p.o == u[0] and _i64(u[2]) >= 0
        if t == DROP:
            return bool(u[0])
        if t == REGISTER:
            r, o = u
            if not r or not o or r == o or (a16 & 0xFF) > 1 or (a16 >> 8) > 1:
                return False
            if r in self.reps and self.reps[r].o != o:
                return False
            return o not in self.reps and r not in self.originals()
        if t == JOB:
            return bool(u[0]) and a16 <= 1
        return False

    def apply(self, rec: Record) -> bool:
        """Apply one record (False: refused, as the C core refuses it)."""
        if not self.valid(rec):
            self.refused.append(rec)
            return False
        t, u, a16 = rec.type, rec.u, rec.a16
        if t == ADD:
            o, r, x, ro, n = u
            flag = a16
            p = self.reps.setdefault(r, Rep(o))
            holes = _minus(x, x + n, [(e[0], e[1]) for e in p.ents])
            p.ents = _canon(sorted(p.ents + [[s, e, ro - x, flag] for s, e in holes]))
            if flag != DIRTY:
                for s, e in self._dirty_spans(o, r, x, x + n):
                    p.ents = _paint(p.ents, s, e, lambda f: None if f == DIRTY else STALE)
        elif t == MARK:
            o, tgt, a, b = u
            for r, p in self.reps_of(o):
                nf = DIRTY if r == tgt else STALE
                p.ents = _paint(p.ents, a, b, lambda f, nf=nf: nf)
        elif t == SETFLAG:
            o, r, a, b = u
            old, new = a16 & 0xFF, a16 >> 8
            p = self.reps.get(r)
            if p is not None:
                spans = [(a, b)] if new not in (CLEAN, COPYING, FRESH) else _minus(a, b, self._dirty_spans(o, r, a, b))
                for s, e in spans:
                    p.ents = _paint(p.ents, s, e, lambda f: new if f == old else None)
        elif t == TRIM:
            o, size = u
            for r, p in self.reps_of(o):
                p.ents = [[off, min(end, size), d, f] for off, end, d, f in p.ents if off < size]
                self.trim_floor[r] = min(self.trim_floor.get(r, size), size)
                if not p.ents and not p.registered:     # an unregistered replica without entries is gone
                    del self.reps[r]
                    self.jobs.pop(r, None)
                    self.trim_floor.pop(r, None)
        elif t == GROW:
            o, r, end = u
            p = self.reps[r]
            top = p.ents[-1][1] if p.ents else 0
            if top < end:
                p.ents = _canon(p.ents + [[top, end, 0, STALE]])
        elif t == DROP:
            self.reps.pop(u[0], None)
            self.jobs.pop(u[0], None)
            self.trim_floor.pop(u[0], None)
        elif t == REGISTER:
            r, o = u
            p = self.reps.setdefault(r, Rep(o))
            p.registered, p.mode, p.route = True, a16 & 0xFF, a16 >> 8
            p.name = rec.data.decode()
        elif t == JOB:
            self.jobs[u[0]] = (a16, rec.data.decode())
            self.trim_floor.pop(u[0], None)
        return True

    # ---------------------------------------------------------------- views
    def entries(self, o: int) -> list[tuple[int, int, int, int, int]]:
        """``(r, off, len, r_off, flag)`` of original ``o``, sorted by (off, r) — as the C core's ``entries``."""
        out = [(off, r, end - off, off + d, f) for r, p in self.reps_of(o) for off, end, d, f in p.ents]
        return [(r, off, n, ro, f) for off, r, n, ro, f in sorted(out)]

    def coverage(self, r: int) -> list[tuple[int, int]]:
        out = []
        for off, end, _, _ in self.reps[r].ents if r in self.reps else ():
            if out and out[-1][0] + out[-1][1] == off:
                out[-1] = (out[-1][0], end - out[-1][0])
            else:
                out.append((off, end - off))
        return out

    def replicas(self) -> list[tuple]:
        return sorted((r, p.o, int(p.registered), p.mode, p.route, p.name,
                       sum(e[1] - e[0] for e in p.ents), len(p.ents)) for r, p in self.reps.items())

    def job_list(self) -> list[tuple[int, int, str]]:
        return sorted((r, d, s) for r, (d, s) in self.jobs.items())

    def diff(self, core) -> list[str]:
        """Differences between this model and a C core's table (empty: identical)."""
        out = []
        mine, theirs = self.replicas(), core.replicas()
        if mine != theirs:
            a, b = {x[0]: x for x in mine}, {x[0]: x for x in theirs}
            for r in sorted(set(a) | set(b)):
                if a.get(r) != b.get(r):
                    out.append(f"replica {r}: journal {a.get(r)} vs table {b.get(r)}")
        for o in sorted(self.originals() | set(core.files())):
            m, c = self.entries(o), core.entries(o)
            if m != c:
                ms, cs = set(m), set(c)
                out.append(f"original {o}: {len(ms - cs)} entries only in the journal (e.g. {sorted(ms - cs)[:2]}), "
                           f"{len(cs - ms)} only in the table (e.g. {sorted(cs - ms)[:2]})")
        if self.job_list() != core.jobs():
            out.append("replicator jobs differ between the journal and the table")
        return out


def replay(path, limit: int | None = None, *, raw: bytes | None = None) -> tuple[Model, Journal]:
    """Parse and replay the journal at ``path`` (see :func:`read`)."""
    j = read(path, limit, raw=raw)
    m = Model()
    for rec in j.records:
        m.apply(rec)
    return m, j
