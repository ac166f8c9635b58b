"""Consistency check of a store (``pario store fsck``).

Checks, reporting each problem as one line:

* data files in server directories that belong to no file (orphan data, e.g. left by a
  crash during delete);
* RMT consistency: every entry's original and replica exist and the replica is registered;
  flags are CLEAN/DIRTY/STALE; entries of one replica do not overlap; a byte has at most
  one DIRTY entry; entries lie inside the original file; replica offsets lie inside the
  replica's extents (partial replicas);
* replica files (``.replica/…``) that no registered replica owns (orphan replica data);
* checksums: for every CLEAN entry the replica's bytes equal the original's (SHA-256 per
  chunk, both read through the backend).

DIRTY/STALE entries are not problems (they are pending synchronisation) and are counted.
"""

from __future__ import annotations

import hashlib

import numpy as np

from ..layout import ExtentMap
from .rmt import CLEAN, DIRTY, STALE
from .root import REPLICA_PREFIX, Store

CHUNK = 8 << 20


def fsck(store: Store, *, checksums: bool = True) -> dict:
    """Check ``store``; returns ``{"ok", "problems", "entries", "unclean", "checked_bytes", "files"}``."""
    st = store
    problems: list[str] = []
    ids = st.backend.meta.ids()
    names = set(ids.values())
    for j, path, fid, df in st.backend.datafiles():
        if fid < 0:
            problems.append(f"unknown file {path} in server {st.system.names[j]} directory")
        elif fid not in ids:
            problems.append(f"orphan data file {path} (no file has id {fid})")
    reps = {r["r_file"]: r for r in st.rmt.replicas()}
    referenced = {row[3] for row in st.rmt.all_rows()}
    for r_file, r in reps.items():
        # registered but not created yet (replicator killed in between, no entry points to it): harmless
        if r_file not in names and r_file in referenced:
            problems.append(f"replica {r_file!r} is registered but its file is missing")
        if r["o_file"] not in names:
            problems.append(f"replica {r_file!r} belongs to missing file {r['o_file']!r}")
    for n in names:
        if n.startswith(REPLICA_PREFIX) and n not in reps:
            problems.append(f"orphan replica data {n!r} (not registered in the RMT)")
    rows = st.rmt.all_rows()
    sizes = {}
    layouts = {}
    for n in names:
        s = st.stat(n)
        sizes[n], layouts[n] = s.size, s.layout
    unclean = 0
    by_r: dict[str, list] = {}
    by_o: dict[str, list] = {}
    for rid, o_file, o, r_file, r, n, f in rows:
        where = f"RMT entry {rid} ({o_file}@{o}+{n} -> {r_file}@{r})"
        if f not in (CLEAN, DIRTY, STALE):
            problems.append(f"{where}: bad R_flag {f}")
        if f != CLEAN:
            unclean += 1
        if o_file not in names:
            problems.append(f"{where}: original file missing")
            continue
        if r_file not in names:
            problems.append(f"{where}: replica file missing")
            continue
        if r_file not in reps:
            problems.append(f"{where}: replica not registered")
        if o + n > sizes[o_file]:
            problems.append(f"{where}: beyond the end of {o_file!r} ({sizes[o_file]} B)")
        lay = layouts[r_file]
        if isinstance(lay, ExtentMap):
            i = int(np.searchsorted(lay.offset, r, side="right")) - 1
            ok = i >= 0
            pos, end = r, r + n
            while ok and pos < end:
                if i >= len(lay) or lay.offset[i] > pos or lay.offset[i] + lay.length[i] <= pos:
                    ok = False
                    break
                pos = int(lay.offset[i] + lay.length[i])
                i += 1
            if not ok:
                problems.append(f"{where}: replica range not inside the replica's extents")
        by_r.setdefault(r_file, []).append((o, n, rid))
        by_o.setdefault(o_file, []).append((o, n, f, rid))
    for r_file, lst in by_r.items():
        lst.sort()
        for (a, n, i1), (b, _, i2) in zip(lst, lst[1:]):
            if b < a + n:
                problems.append(f"RMT entries {i1} and {i2} of replica {r_file!r} overlap")
    for o_file, lst in by_o.items():
        d = sorted((o, n, rid) for o, n, f, rid in lst if f == DIRTY)
        for (a, n, i1), (b, _, i2) in zip(d, d[1:]):
            if b < a + n:
                problems.append(f"RMT entries {i1} and {i2} of {o_file!r} are both dirty for the same bytes")
    checked = 0
    if checksums:
        for rid, o_file, o, r_file, r, n, f in rows:
            if f != CLEAN or o_file not in names or r_file not in names or o + n > sizes[o_file]:
                continue
            oh = st.backend.open(o_file)
            rh = st.backend.open(r_file)
            try:
                pos = 0
                while pos < n:
                    c = min(CHUNK, n - pos)
                    a, b = bytearray(c), bytearray(c)
                    st.backend.readv(oh, (o + pos,), (c,), a, (0,))
                    st.backend.readv(rh, (r + pos,), (c,), b, (0,))
                    if hashlib.sha256(a).digest() != hashlib.sha256(b).digest():
                        bad = int(np.flatnonzero(np.frombuffer(a, np.uint8) != np.frombuffer(b, np.uint8))[0])
                        problems.append(f"RMT entry {rid}: clean replica {r_file!r} differs from {o_file!r} "
                                        f"at offset {o + pos + bad}")
                        break
                    pos += c
                    checked += c
            finally:
                st.backend.close(rh)
                st.backend.close(oh)
    return {"ok": not problems, "problems": problems, "entries": len(rows), "unclean": unclean,
            "checked_bytes": checked, "files": len([n for n in names if not n.startswith(REPLICA_PREFIX)])}
