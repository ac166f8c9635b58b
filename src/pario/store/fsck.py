"""Consistency check of a store (``pario store fsck``).

Checks, reporting each problem as one line:

* data files in server directories that belong to no file (orphan data, e.g. left by a
  crash during delete), and files whose data files hold bytes past a size the metadata
  calls final (a lost committed size: :meth:`LocalBackend.size_problem`);
* the RMT journal against the table the store serves from: the journal is parsed and
  replayed by an independent implementation (:mod:`pario.store.rmt_journal`, Python, CRCs
  by zlib) and compared entry for entry with the C core's table; records either refused
  are problems;
* coverage against an independent record: a replica whose replicator job finished must
  still cover what its job recorded — the extents of its layout (partial) or the whole
  file (full), up to the file's size when it was copied and any later truncation — so
  coverage lost without a crash is found, whatever lost it;
* RMT consistency: every entry's original and replica exist and the replica is registered;
  a byte has at most one DIRTY entry and then every other entry there is STALE; entries lie
  inside the original file; replica offsets lie inside the replica's extents (partial
  replicas); replica files that no registered replica owns (orphan replica data);
* checksums: for every CLEAN or FRESH entry the replica's bytes equal the original's
  (SHA-256 per chunk, both read through the backend; in a shared store under the entry's
  range lock).

DIRTY/STALE/COPYING entries are not problems (pending synchronisation or copying) and are
counted.  Pending replicator jobs are reported, not problems (``pario replicate --resume``).
"""

from __future__ import annotations

import hashlib
import json

import numpy as np

from ..layout import ExtentMap, layout_from_dict
from . import rmt_journal
from .rmt import DIRTY, READABLE_CLEAN, STALE
from .root import INCOMING_PREFIX, REPLICA_PREFIX, RESERVED, Store

CHUNK = 8 << 20


def _spans_minus(want: list[tuple[int, int]], have: list[tuple[int, int]]) -> int:
    """Bytes of the ``(off, len)`` ranges ``want`` that ``have`` does not cover."""
    miss = 0
    for a, n in want:
        b = a + n
        for s, m in sorted(rmt_journal._minus(a, b, [(x, x + k) for x, k in have])):
            miss += m - s
    return miss


def fsck(store: Store, *, checksums: bool = True) -> dict:
    """Check ``store``; returns ``{"ok", "problems", "entries", "unclean", "checked_bytes",
    "files", "pending_jobs", "journal"}``."""
    st = store
    rmt = st.rmt
    problems: list[str] = []
    ids = st.backend.meta.ids()
    names = set(ids.values())
    for j, path, fid, df in st.backend.datafiles():
        if fid == -2:
            problems.append(f"{path} in server {st.system.names[j]} directory is a symbolic link or not a regular file "
                            "(pario never makes one, and never uses it: remove it)")
        elif fid < 0:
            problems.append(f"foreign file {path} in server {st.system.names[j]} directory (not a data file)")
        elif fid not in ids:
            problems.append(f"orphan data file {path} (no file has id {fid})")
    for n in sorted(names):
        p = st.backend.size_problem(n)
        if p:
            problems.append(p)

    # the journal, replayed independently, against the table (no appends meanwhile)
    with rmt.transaction():
        stats = rmt.stats()
        from .locks import shared_record

        model, journal = rmt_journal.replay(rmt.path, limit=stats["end"],
                                            raw=shared_record(st.root, "rmt.log") or b"")
        if journal.end != stats["end"]:
            problems.append(f"RMT journal {rmt.path}: the independent reader stops at offset {journal.end} "
                            f"({journal.stop_reason}), the table at {stats['end']}")
        problems += [f"RMT journal record {r.describe()} is refused by the independent replay" for r in model.refused]
        if stats["skipped"]:
            problems.append(f"RMT journal {rmt.path}: {stats['skipped']} record(s) were refused by the table")
        problems += [f"RMT table differs from its journal: {d}" for d in model.diff(rmt.core)]
        jobs = model.job_list()
        reps = model.replicas()
        entries = {o: model.entries(o) for o in model.originals()}

    def nm(i: int) -> str:
        return ids.get(i, f"#{i}")

    sizes, layouts, dirty = {}, {}, {}
    for n in names:
        rec = st.backend.meta.get(n)
        s = st.stat(n)
        sizes[n], layouts[n], dirty[n] = s.size, s.layout, bool(rec and rec[3])
    registered = {r: (o, name) for r, o, reg, _, _, name, _, _ in reps if reg}
    for r, (o, _) in registered.items():
        if r not in ids and entries.get(o) and any(e[0] == r for e in entries[o]):
            problems.append(f"replica {nm(r)!r} is registered and has entries but its file is missing")
        if o not in ids:
            problems.append(f"replica {nm(r)!r} belongs to missing file id {o}")
    pending = {r for r, done, _ in jobs if not done}
    for i, n in ids.items():
        if n.startswith(REPLICA_PREFIX) and i not in registered and i not in pending:
            problems.append(f"orphan replica data {n!r} (not registered in the RMT)")

    # coverage against what each finished job recorded
    for r, done, spec in jobs:
        if not done or r not in registered:
            continue
        try:
            sp = json.loads(spec)
            lay = layout_from_dict(sp["layout"], st.system)
        except (ValueError, KeyError, TypeError) as exc:
            problems.append(f"replica {nm(r)!r}: unreadable job record ({exc})")
            continue
        o = registered[r][0]
        upto = min(int(sp.get("size", 0)), model.trim_floor.get(r, 1 << 62), sizes.get(nm(o), 0))
        if isinstance(lay, ExtentMap):
            e = np.minimum(lay.offset + lay.length, upto)
            keep = e > lay.offset
            want = list(zip(lay.offset[keep].tolist(), (e - lay.offset)[keep].tolist()))
        else:
            want = [(0, upto)] if upto > 0 else []
        miss = _spans_minus(want, model.coverage(r))
        if miss:
            problems.append(f"replica {nm(r)!r} of {nm(o)!r} lost coverage: {miss} of the "
                            f"{sum(n for _, n in want)} bytes its finished job copied are in no RMT entry")

    unclean = 0
    n_entries = 0
    for o, ents in entries.items():
        on = nm(o)
        n_entries += len(ents)
        for r, off, n, ro, f in ents:
            where = f"RMT entry {on}@{off}+{n} -> {nm(r)}@{ro}"
            if f not in READABLE_CLEAN:
                unclean += 1
            if on not in sizes:
                problems.append(f"{where}: original file missing")
                continue
            rn = nm(r)
            if rn not in sizes:
                problems.append(f"{where}: replica file missing")
                continue
            if r not in registered:
                problems.append(f"{where}: replica not registered")
            if off + n > sizes[on] and not dirty[on]:
                problems.append(f"{where}: beyond the end of {on!r} ({sizes[on]} B)")
            lay = layouts[rn]
            if isinstance(lay, ExtentMap):
                i = int(np.searchsorted(lay.offset, ro, side="right")) - 1
                pos, end, ok = ro, ro + n, i >= 0
                while ok and pos < end:
                    if i >= len(lay) or lay.offset[i] > pos or lay.offset[i] + lay.length[i] <= pos:
                        ok = False
                        break
                    pos = int(lay.offset[i] + lay.length[i])
                    i += 1
                if not ok:
                    problems.append(f"{where}: replica range not inside the replica's extents")
        bad = _dirty_conflict(ents)
        if bad is not None:
            problems.append(f"RMT entries of {on!r} at offset {bad}: a DIRTY copy with another copy not STALE")

    unverified = st.unverified
    if unverified:
        problems.append(f"the store ended uncleanly in another boot and its replicas are not verified yet (another "
                        f"process has it open, and it serves nothing until then): run 'pario store fsck --store "
                        f"{st.root}' again while no program uses it")
    checked = 0
    if checksums and not unverified:
        for o, ents in entries.items():
            on = nm(o)
            if on not in sizes:
                continue
            for r, off, n, ro, f in ents:
                rn = nm(r)
                if f not in READABLE_CLEAN or rn not in sizes or off + n > sizes[on]:
                    continue
                checked += _compare(st, o, on, rn, off, ro, n, problems)
    return {"ok": not problems, "problems": problems, "entries": n_entries, "unclean": unclean,
            "checked_bytes": checked, "files": len([n for n in names if not n.startswith(RESERVED)]),
            "uploads_in_progress": len([n for n in names if n.startswith(INCOMING_PREFIX)]),
            "pending_jobs": sorted(nm(r) for r in pending),
            "verification": ("pending" if unverified else None if st.verified_ranges is None else
                             {"differed": [{"file": f, "offset": o, "bytes": n} for f, o, n in st.verified_ranges]}),
            "journal": {"bytes": stats["end"], "records": stats["seq"], "synced": stats["synced"]}}


def _dirty_conflict(ents) -> int | None:
    """The first offset where a byte has a DIRTY entry and another entry that is not STALE
    (a sweep over the entries' starts and ends), else None."""
    events = sorted([(off, 1, k) for k, (_, off, _, _, _) in enumerate(ents)]
                    + [(off + n, 0, k) for k, (_, off, n, _, _) in enumerate(ents)])
    active: set[int] = set()
    i = 0
    while i < len(events):
        x = events[i][0]
        while i < len(events) and events[i][0] == x:
            _, start, k = events[i]
            (active.add if start else active.discard)(k)
            i += 1
        flags = [ents[k][4] for k in active]
        d = flags.count(DIRTY)
        if d > 1 or (d == 1 and any(f not in (DIRTY, STALE) for f in flags)):
            return x
    return None


def _compare(st: Store, o: int, on: str, rn: str, off: int, ro: int, n: int, problems: list) -> int:
    """Compare a CLEAN entry's bytes (under its range lock in a shared store)."""
    be, core = st.backend, st.rmt.core
    if st.shared:
        core.lock(o, off, off + n, True)
    oh, rh = be.open(on), be.open(rn)
    checked = 0
    try:
        if st.shared:        # re-check under the lock: still CLEAN?
            if not any(e[0] == st.rmt.fid(rn) and e[1] <= off and e[1] + e[2] >= off + n and e[4] in READABLE_CLEAN
                       for e in core.entries(o, False, off, off + n)):
                return 0
        pos = 0
        while pos < n:
            c = min(CHUNK, n - pos)
            a, b = bytearray(c), bytearray(c)
            be.readv(oh, (off + pos,), (c,), a, (0,))
            be.readv(rh, (ro + pos,), (c,), b, (0,))
            if hashlib.sha256(a).digest() != hashlib.sha256(b).digest():
                bad = int(np.flatnonzero(np.frombuffer(a, np.uint8) != np.frombuffer(b, np.uint8))[0])
                problems.append(f"RMT entry {on}@{off}+{n}: clean replica {rn!r} differs from {on!r} "
                                f"at offset {off + pos + bad}")
                break
            pos += c
            checked += c
    finally:
        be.close(rh)
        be.close(oh)
        if st.shared:
            core.unlock(o, off, off + n)
    return checked
