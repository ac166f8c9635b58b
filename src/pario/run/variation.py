"""Bytes that vary from run to run, and pario's files judged outside them (``pario run`` on
an unmodified program).

Some programs do not write the same bytes twice: HDF5 stores modification times in its
object headers, a program may stamp its output with the time or the host.  ``pario run``
therefore judges the store's files against runs of the program *without* pario, byte for
byte, outside the positions where two such runs differ:

- the **varying positions** of a file are those where the two plain runs hold different
  bytes, and those that only one of them has (when their sizes differ);
- a file of pario (run 1, run 2, each repetition) must equal the plain run at every other
  position: a position it has that the plain runs lack, or that it lacks where the plain
  runs agree, counts as differing too; so does a file missing altogether;
- run 2 against run 1 likewise, outside the varying positions.

:func:`compare_sources` does this for one file in one pass over fixed-size chunks
(:data:`CHUNK`): memory is a few chunks whatever the size of the file.  For each
comparison it counts the bytes and keeps the first :data:`KEEP` ranges (``[start, end)``,
half-open byte offsets) and the number of ranges.  A source is anything with ``size``
(None: the file does not exist) and ``read(offset, n) -> bytes``: :class:`PathSource` (a
file outside the store), :class:`StoreSource` (a file as a reader sees it through the store,
redirector included).

:class:`Kept` keeps the bytes a later comparison needs: the output of a run that the next
run will overwrite, copied out of the store only when its SHA-256 differs from the plain
run's (otherwise the plain run's file stands for it), and the first plain run's files, moved
aside before the second plain run writes the same paths.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import numpy as np

CHUNK = 4 << 20     # bytes of each source compared at a time
KEEP = 8            # ranges reported per comparison (the first ones)
PLAIN = "plain"     # the label of the plain run in pairs


# ---------------------------------------------------------------------- sources
class PathSource:
    """A file outside the store (the plain run's, or a kept copy); ``size`` None when it
    does not exist."""

    def __init__(self, path):
        self.path = str(path)
        try:
            self._fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            self._fd, self.size = None, None
        else:
            self.size = os.fstat(self._fd).st_size

    def read(self, offset: int, n: int) -> bytes:
        return os.pread(self._fd, n, offset) if self._fd is not None else b""

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class StoreSource:
    """A file as a reader sees it through the store (redirector included); ``size`` None when
    the store does not hold it."""

    def __init__(self, store, name: str):
        self._f = store.open(name) if store.exists(name) else None
        self.size = int(self._f.size) if self._f is not None else None

    def read(self, offset: int, n: int) -> bytes:
        return self._f.read(offset, n) if self._f is not None else b""

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None


# ---------------------------------------------------------------------- the comparison
class Ranges:
    """Positions found chunk by chunk: their count, the number of maximal ranges they form,
    and the first ``keep`` ranges ``[start, end)`` (a range that goes on across a chunk's end
    is one range)."""

    def __init__(self, keep: int = KEEP):
        self.keep, self.bytes, self.count, self.first = keep, 0, 0, []
        self._end = -1      # end of the last range seen

    def add(self, mask: np.ndarray, pos: int) -> None:
        """Add the set positions of ``mask`` (bool), whose element 0 is byte ``pos``."""
        if not mask.any():
            return
        edges = np.flatnonzero(np.diff(np.concatenate(([0], mask.view(np.int8), [0]))))
        starts, ends = edges[0::2] + pos, edges[1::2] + pos
        self.bytes += int((ends - starts).sum())
        k = 0
        if starts[0] == self._end:      # goes on from the previous chunk
            if self.first and self.first[-1][1] == self._end:
                self.first[-1][1] = int(ends[0])
            k = 1
        self.count += len(starts) - k
        for s, e in zip(starts[k:k + max(0, self.keep - len(self.first))], ends[k:]):
            self.first.append([int(s), int(e)])
        self._end = int(ends[-1])

    def as_dict(self) -> dict:
        return {"bytes": self.bytes, "ranges": self.first, "range_count": self.count}


def _differ(a: np.ndarray, b: np.ndarray, n: int) -> np.ndarray:
    """Positions 0..n-1 of one chunk where ``a`` and ``b`` (that chunk of two files, shorter
    where a file ends) differ: different bytes, or a byte that only one of them has."""
    out = np.zeros(n, dtype=bool)
    k = min(len(a), len(b))
    np.not_equal(a[:k], b[:k], out=out[:k])
    out[k:max(len(a), len(b))] = True
    return out


def compare_sources(plain1, plain2, sources: dict, pairs, chunk: int = CHUNK, keep: int = KEEP) -> dict:
    """One file compared in one pass of ``chunk`` bytes at a time.

    ``plain1``, ``plain2``: the file of two runs without pario (``plain2`` None: one run,
    nothing varies); ``sources``: ``{label: source}``; ``pairs``: ``[(label, label), …]``
    to compare outside the varying positions, :data:`PLAIN` standing for the plain run
    (``plain1``: outside the varying positions both plain runs hold the same bytes).
    Returns ``{"plain_sizes": [s1, s2], "varying": {"bytes", "ranges", "range_count"},
    "sizes": {label: size}, "pairs": {(a, b): {"bytes", "ranges", "range_count"}}}`` (sizes
    None for a missing file)."""
    src = {PLAIN: plain1, **sources}
    used = {x for p in pairs for x in p}
    for x in used:
        if x not in src:
            raise ValueError(f"compare_sources: no source {x!r}")
    readers = [plain1] + ([plain2] if plain2 is not None else []) + [src[x] for x in sorted(used - {PLAIN})]
    total = max((r.size or 0) for r in readers)
    varying = Ranges(keep)
    found = {p: Ranges(keep) for p in pairs}
    for pos in range(0, total, chunk):
        n = min(chunk, total - pos)
        got: dict[int, np.ndarray] = {}      # a source under two labels is read once

        def part(r):
            if id(r) not in got:
                have = max(0, min(n, (r.size or 0) - pos))
                got[id(r)] = np.frombuffer(r.read(pos, have), dtype=np.uint8) if have else np.zeros(0, np.uint8)
                if len(got[id(r)]) != have:
                    raise OSError(f"short read at {pos}: {len(got[id(r)])} of {have} bytes")
            return got[id(r)]

        data = {label: part(src[label]) for label in ({PLAIN} | used)}
        if plain2 is not None:
            vary = _differ(data[PLAIN], part(plain2), n)
            varying.add(vary, pos)
        else:
            vary = np.zeros(n, dtype=bool)
        for a, b in pairs:
            d = _differ(data[a], data[b], n)
            d &= ~vary
            found[(a, b)].add(d, pos)
    return {"plain_sizes": [plain1.size, plain2.size if plain2 is not None else None],
            "varying": varying.as_dict(), "sizes": {x: src[x].size for x in used - {PLAIN}},
            "pairs": {p: r.as_dict() for p, r in found.items()}}


# ---------------------------------------------------------------------- bytes kept for later
def _sha256_copy(read, size: int, dst: Path) -> str:
    h = hashlib.sha256()
    with open(dst, "wb") as out:
        pos = 0
        while pos < size:
            chunk = read(pos, min(CHUNK, size - pos))
            if not chunk:
                break
            h.update(chunk)
            out.write(chunk)
            pos += len(chunk)
    return h.hexdigest()


class Kept:
    """Files kept under ``root`` for the comparison at the end, found by (name, SHA-256)."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.paths: dict[tuple[str, str], Path] = {}

    def _slot(self) -> Path:
        self.root.mkdir(parents=True, exist_ok=True)
        return self.root / f"{len(self.paths):04d}"

    def has(self, name: str, digest: str | None) -> bool:
        return (name, digest) in self.paths

    def copy_from_store(self, store_dir: str, names, digests: dict) -> list[str]:
        """Copy each named file out of the store unless its content is kept already; the names copied."""
        from ..store import Store

        done = []
        with Store(store_dir) as st:
            for name in names:
                dg = digests.get(name)
                if dg is None or self.has(name, dg) or not st.exists(name):
                    continue
                dst = self._slot()
                with st.open(name) as f:
                    got = _sha256_copy(f.read, int(f.size), dst)
                if got != dg:     # nothing else writes the store between the digest and the copy
                    raise OSError(f"{name}: the store's bytes changed while they were copied")
                self.paths[(name, dg)] = dst
                done.append(name)
        return done

    def move(self, name: str, digest: str | None) -> None:
        """Move the file at path ``name`` (the plain run's, SHA-256 ``digest``) here."""
        if digest is None or self.has(name, digest):
            return
        dst = self._slot()
        shutil.move(name, dst)
        self.paths[(name, digest)] = dst

    def path(self, name: str, digest: str | None) -> Path | None:
        return self.paths.get((name, digest))

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        self.paths.clear()


class _Missing:
    """The source of a file that does not exist."""

    size = None

    def read(self, offset: int, n: int) -> bytes:
        return b""

    def close(self) -> None:
        pass


MISSING = _Missing()


def _pair_label(a: str, b: str) -> str:
    return a if b == PLAIN else f"{a} vs {b}"


def judge_files(store_dir: str, names, plain1: dict, plain2: dict | None, runs: dict, final: str, kept: Kept,
                extra_pairs=(("run 2", "run 1"),), chunk: int = CHUNK) -> dict:
    """Every named file of every run judged against the plain runs, outside the positions
    where the plain runs differ (:func:`compare_sources`).

    ``plain1``, ``plain2``: ``{name: SHA-256 or None}`` of the two plain runs (``plain2``
    None: one plain run); the first plain run's files are in ``kept`` when there is a second
    (moved aside before it ran), else at their paths; the second's at their paths.
    ``runs``: ``{label: {name: SHA-256}}`` of pario's runs, each file found by its digest —
    the plain run's file when it is the same, else a copy in ``kept``, else the store (whose
    files are those of run ``final``).  Each run is compared with the plain run, and each pair
    of ``extra_pairs`` with each other; a comparison whose two SHA-256 agree reads nothing.
    Returns ``{"plain_runs", "varying_bytes", "differing_bytes": {label: bytes, summed over
    the files; only comparisons that found any}, "identical", "files": {name: {"plain_sizes",
    "varying_bytes", "varying_ranges", "varying_range_count", "sizes", "differing": {label:
    {"bytes", "ranges", "range_count"}}}}}`` (label: the run's for a comparison with the
    plain run, ``"A vs B"`` for a pair of runs; ``differing`` holds only the comparisons made:
    one whose two SHA-256 agree found nothing)."""
    from ..store import Store

    files, vary_total, diff_total = {}, 0, {}
    with Store(store_dir) as st:
        for name in names:
            p1 = plain1.get(name)
            p2 = plain2.get(name) if plain2 is not None else p1
            pairs = [(label, PLAIN) for label, dg in runs.items() if dg.get(name) != p1]
            pairs += [(a, b) for a, b in extra_pairs
                      if a in runs and b in runs and runs[a].get(name) != runs[b].get(name)]
            row = {"plain_sizes": None, "varying_bytes": 0, "varying_ranges": [], "varying_range_count": 0,
                   "sizes": {}, "differing": {}}
            files[name] = row
            if not pairs and p1 == p2:
                continue
            opened = []

            def at(path):
                s = PathSource(path)
                opened.append(s)
                return s

            def source(dg):
                if dg is None:
                    return MISSING
                if dg == p1:
                    return src1
                if kept.path(name, dg) is not None:
                    return at(kept.path(name, dg))
                if dg == runs[final].get(name):
                    s = StoreSource(st, name)
                    opened.append(s)
                    return s
                raise RuntimeError(f"{name}: the bytes of SHA-256 {dg[:16]}… were not kept for the comparison")

            try:
                moved = plain2 is not None
                src1 = MISSING if p1 is None else at(kept.path(name, p1) if moved else name)
                src2 = (MISSING if p2 is None else at(name)) if moved and p2 != p1 else None
                srcs = {label: source(dg.get(name)) for label, dg in runs.items()
                        if any(label in p for p in pairs)}
                res = compare_sources(src1, src2, srcs, pairs, chunk=chunk)
            finally:
                for s in opened:
                    s.close()
            sizes = res["plain_sizes"]
            row.update(plain_sizes=[sizes[0], sizes[1] if src2 is not None else sizes[0]],
                       varying_bytes=res["varying"]["bytes"], varying_ranges=res["varying"]["ranges"],
                       varying_range_count=res["varying"]["range_count"], sizes=res["sizes"],
                       differing={_pair_label(a, b): r for (a, b), r in res["pairs"].items()})
            vary_total += row["varying_bytes"]
            for label, r in row["differing"].items():
                if r["bytes"]:
                    diff_total[label] = diff_total.get(label, 0) + r["bytes"]
    return {"plain_runs": 1 if plain2 is None else 2, "varying_bytes": vary_total, "differing_bytes": diff_total,
            "identical": not diff_total, "files": files}


# ---------------------------------------------------------------------- causes
def unseeded_randomness(program: str, args) -> str | None:
    """A known program setting whose bytes vary more than two runs can show, as one sentence
    (None: none known).  Two runs without pario find the positions that vary, but a value
    drawn from a few (a rank among 4) agrees between two runs by chance at many positions
    where a third run differs: pario's runs then differ "where the runs without pario agree"
    without pario being the cause.  Known: IOR's ``-z`` on a shared file without
    ``--random-offset-seed``, which seeds the shuffle that deals the transfers to the ranks
    with the time of day (``init_random_seed``: ``time(NULL)`` broadcast from rank 0); IOR's
    data holds the writer's rank in every 8-byte word, so each transfer's bytes follow the
    clock (IOR itself refuses ``-z -R`` without a seed for that reason)."""
    import re

    args = [str(a) for a in args]
    if not os.path.basename(str(program)).lower().startswith("ior"):
        return None
    if not any(re.fullmatch(r"-z+", a) for a in args) or "-F" in args:
        return None
    if any(a.startswith("--random-offset-seed") for a in args):
        return None
    if "-r" in args and "-w" not in args:      # reads only (IOR writes and reads when given neither)
        return None
    return ("IOR -z on a shared file without --random-offset-seed deals the transfers to the ranks by a shuffle "
            "seeded with the time of day, and its data holds each writer's rank: the file's bytes change from run "
            "to run at more positions than two runs without pario show; give --random-offset-seed=N to judge every "
            "byte")


# ---------------------------------------------------------------------- reports
def n_bytes(n: int, verb: str = "") -> str:
    """``1 byte`` / ``3 bytes``, with ``verb`` agreeing: ``1 byte varies``, ``3 bytes vary``."""
    if n == 1:
        return "1 byte" + (f" {verb[:-1]}ies" if verb.endswith("y") else f" {verb}s" if verb else "")
    return f"{n} bytes" + (f" {verb}" if verb else "")


def offsets_text(ranges: list, count: int) -> str:
    """``[[932, 933], [1532, 1540]]`` as ``932, 1532–1539`` (inclusive offsets), with ``, …``
    when there are more ranges than listed."""
    parts = [f"{s}" if e - s == 1 else f"{s}–{e - 1}" for s, e in ranges]
    return ", ".join(parts) + (f", … ({count} ranges)" if count > len(ranges) else "")


__all__ = ["CHUNK", "KEEP", "PLAIN", "MISSING", "PathSource", "StoreSource", "Ranges", "compare_sources", "Kept",
           "unseeded_randomness",
           "judge_files", "n_bytes", "offsets_text"]
