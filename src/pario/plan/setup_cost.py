"""What applying a plan costs before the program runs again (its *setup*), and after how many
runs the plan has paid for it (issue 27, "Whole-job truth").

``pario replicate`` applies a plan in two kinds of copy, both one process going through the
bytes in steps of :data:`COPY_CHUNK`:

- **relayout** (:mod:`pario.store.relayout`): a file already in the store gets the plan's
  layout — every step read from the old copy, written to the new one and read back;
- **replica** (the replicator, CEDA seed 000 §4.5 Algorithm 2, :mod:`pario.store.replicator`):
  a replica's extents (a CEDA extent map's, or the whole file for a full replica) read from
  the original — on its new layout when the plan also relays it out — and written to the
  replica, in groups of at most :data:`COPY_CHUNK` bytes (:func:`copy_groups`: a long extent
  split, short ones together).

:func:`copy_costs` prices such copies with the distribution model (CEDA seed 000 §3 eq. 1–4
on the exact sub-requests: the model ``pario advise`` compares plans with and ``pario run``
prices both runs with): each step of a copy — a group's read, its write, a relayout's
read-back — is one batch of one process, so it costs its busiest server's
T_ser^j = k·α_j + Σ_i s_ij·β_j (eq. 3 with p = 1, eq. 4), with α and β of the step's op, and
the steps follow one another (Σ over batches).  :func:`plan_setup` lists and prices every copy
a plan asks of the files in a store.  ``pario advise`` prints it, and ``pario run`` predicts
its setup with it: one implementation, so the two cannot disagree on a plan.  CEDA's own
benefit test (the PBT, :mod:`pario.plan.ceda_analyze`) prices each pattern per run,
B = T_O − T_N (eq. 5) minus the copy back of its dirty bytes; the paper's replicator copies in
idle time (§4.5) and its analyzer has no setup term: the setup is priced here, for the plan as
chosen, and set against the per-run gain by :func:`break_even_runs`.

:func:`break_even_runs` — the smallest number of runs n ≥ 1 after which the plan has paid for
its setup S: n·T_1 ≥ S + n·T_2 (T_1, T_2 one run without and with the plan); None ("never")
when T_2 ≥ T_1.  :func:`whole_job_ratio` — T_1 / (S + T_2): one run without the plan against
its setup and one run with it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..store.copies import COPY_CHUNK, copy_groups, replica_extents, replica_file_layout  # noqa: F401 (re-exported)

MODEL_LABEL = ("distribution model (CEDA seed 000 §3 eq. 1–4): one process, every copy step "
               f"({COPY_CHUNK >> 20} MiB: read, write, relayout's read-back) one batch")



@dataclass(frozen=True)
class Copy:
    """One copy ``pario replicate`` makes: ``file``'s ranges read under ``src`` and written
    under ``dst``; ``kind`` ``relayout`` (each step also read back, ``verify``) or ``replica``
    (``name``: the replica's)."""

    file: str
    kind: str
    name: str | None
    src: object
    dst: object
    offsets: np.ndarray
    lengths: np.ndarray
    verify: bool = False

    @property
    def nbytes(self) -> int:
        return int(np.sum(self.lengths))


# ---------------------------------------------------------------------- pricing
def _steps(offsets, lengths, chunk: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(offsets, lengths, group) of the ranges cut as :func:`copy_groups` cuts them, vectorised:
    group g holds the bytes g·chunk … (g + 1)·chunk − 1 of the ranges laid end to end."""
    off = np.asarray(offsets, dtype=np.int64)
    ln = np.asarray(lengths, dtype=np.int64)
    keep = ln > 0
    off, ln = off[keep], ln[keep]
    if len(ln) == 0:
        return off, ln, np.zeros(0, np.int64)
    c0 = np.concatenate(([0], np.cumsum(ln)[:-1]))          # each range's start, ranges end to end
    g0, g1 = c0 // chunk, (c0 + ln - 1) // chunk              # its first and last group
    k = g1 - g0 + 1
    rid = np.repeat(np.arange(len(ln)), k)
    g = g0[rid] + (np.arange(int(k.sum())) - np.repeat(np.cumsum(k) - k, k))
    a = np.maximum(c0[rid], g * chunk)
    b = np.minimum(c0[rid] + ln[rid], (g + 1) * chunk)
    return off[rid] + (a - c0[rid]), b - a, g


def _merged(o, n, g) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The steps' ranges with the contiguous ones of a step joined: the engine copies a step
    with one vectored read and one vectored write (``pxs_sfile_copy``), whose ranges the store
    maps to one segment per server and data file where they touch, so a step's adjacent
    ranges are one request to each server they cross (as the device counters show: a CEDA
    replica of 256 KiB extents is read in 512 KiB device requests)."""
    if len(n) == 0:
        return o, n, g
    start = np.ones(len(n), dtype=bool)
    start[1:] = (g[1:] != g[:-1]) | (o[1:] != o[:-1] + n[:-1])
    first = np.flatnonzero(start)
    return o[first], np.add.reduceat(n, first), g[first]


def copy_costs(copies, system, *, chunk: int = COPY_CHUNK) -> np.ndarray:
    """Seconds of each :class:`Copy` under the distribution model (module docstring), priced
    in one model call: copy j's steps are batches of its own two virtual files (its source and
    destination), after copy j − 1's."""
    from ..model import DistributionModel
    from ..trace import Trace

    copies = list(copies)
    out = np.zeros(len(copies))
    rows = {k: [] for k in ("file", "op", "offset", "length", "batch")}
    owner, layouts, files, nb = [], {}, [], 0
    for j, c in enumerate(copies):
        o, n, g = _merged(*_steps(c.offsets, c.lengths, chunk))
        if len(n) == 0:
            continue
        fs, fd = len(files), len(files) + 1
        files += [f"{j}:src", f"{j}:dst"]
        layouts[files[fs]], layouts[files[fd]] = c.src, c.dst
        passes = [(fs, 0), (fd, 1)] + ([(fd, 0)] if c.verify else [])
        ng = int(g.max()) + 1
        for step, (fi, op) in enumerate(passes):      # group g: read, write (, read back)
            rows["file"].append(np.full(len(n), fi))
            rows["op"].append(np.full(len(n), op))
            rows["offset"].append(o)
            rows["length"].append(n)
            rows["batch"].append(nb + g * len(passes) + step)
        owner += [j] * (ng * len(passes))
        nb += ng * len(passes)
    if nb == 0:
        return out
    cols = {k: np.concatenate(v) for k, v in rows.items()}
    perm = np.argsort(cols["batch"], kind="stable")        # the service order: step after step
    cols = {k: v[perm] for k, v in cols.items()}
    n = len(perm)
    tr = Trace.from_arrays(np.zeros(n, np.int64), cols["file"].astype(np.int32), cols["op"].astype(np.int8),
                           cols["offset"], cols["length"], files=files, order=np.arange(n))
    per_batch = DistributionModel().trace_cost(tr, layouts, system, batches=cols["batch"]).per_batch
    return out + np.bincount(np.asarray(owner), weights=np.asarray(per_batch, dtype=float), minlength=len(copies))


def copy_cost(src, dst, offsets, lengths, system, *, verify: bool = False, chunk: int = COPY_CHUNK) -> float:
    """Seconds to copy the ranges ``(offsets, lengths)`` of a file from layout ``src`` to
    layout ``dst`` (``verify``: every step read back, as relayout does): :func:`copy_costs`."""
    return float(copy_costs([Copy("", "replica", None, src, dst, np.asarray(offsets), np.asarray(lengths), verify)],
                            system, chunk=chunk)[0])


# ---------------------------------------------------------------------- a plan's setup
def plan_copies(plan, system, files: dict) -> tuple[list[Copy], list[dict]]:
    """The copies ``pario replicate`` makes for ``plan`` in a store holding ``files`` (name →
    ``(size, layout)``, the layout the file has now), and what it leaves (``{"file", "why"}``).

    As ``pario replicate`` applies a plan: first the layouts the plan names a file for, to
    files in the store whose layout differs (the ``"*"`` layout is given to files created
    later, not to existing ones); then every replica of a file in the store, read from the
    file's layout after that."""
    from ..layout import layout_to_dict

    copies, left = [], []
    now = {}
    for name, (size, lay) in files.items():
        new = plan.layouts.get(name)
        if new is not None and lay is not None and layout_to_dict(new, system) != layout_to_dict(lay, system):
            copies.append(Copy(name, "relayout", None, lay, new, np.array([0]), np.array([int(size)]), verify=True))
            lay = new
        now[name] = (int(size), lay)
    for name, reps in plan.replicas.items():
        if name not in now or now[name][1] is None:
            left.append({"file": name, "why": "not a file in the store: pario replicate copies no replica of it"
                                              + (" (it refuses the plan)" if name == "*" else "")})
            continue
        size, lay = now[name]
        for k, r in enumerate(reps):
            offs, lens = replica_extents(r["layout"], size)
            copies.append(Copy(name, "replica", str(r.get("name") or f"r{k + 1}"), lay,
                               replica_file_layout(r["layout"]), offs, lens))
    return copies, left


def plan_setup(plan, system, files: dict, *, chunk: int = COPY_CHUNK) -> dict:
    """The predicted setup of ``plan`` on a store holding ``files`` (name → ``(size, layout)``):
    ``{"seconds", "bytes", "copies": [{"file", "kind", "name", "bytes", "seconds"}], "relaid",
    "left", "model"}`` — every copy of :func:`plan_copies` priced by :func:`copy_costs`;
    ``relaid``: the files given a new layout."""
    copies, left = plan_copies(plan, system, files)
    secs = copy_costs(copies, system, chunk=chunk)
    rows = [{"file": c.file, "kind": c.kind, "name": c.name, "bytes": c.nbytes, "seconds": float(s)}
            for c, s in zip(copies, secs)]
    return {"seconds": float(secs.sum()), "bytes": int(sum(r["bytes"] for r in rows)), "copies": rows,
            "relaid": [c.file for c in copies if c.kind == "relayout"], "left": left, "model": MODEL_LABEL}


def trace_files(trace, layout_of) -> dict:
    """``files`` for :func:`plan_setup` from a trace: each file's size as the trace shows it
    (the end of its furthest request) and ``layout_of(name)``."""
    ends = np.zeros(len(trace.files), dtype=np.int64)
    if len(trace):
        np.maximum.at(ends, trace.file, trace.offset + trace.length)
    return {name: (int(ends[i]), layout_of(name)) for i, name in enumerate(trace.files)}


# ---------------------------------------------------------------------- paying for it
def break_even_runs(run1: float | None, run2: float | None, setup: float | None) -> int | None:
    """The smallest n ≥ 1 with n·run1 ≥ setup + n·run2: after n runs with the plan the time
    saved, n·(run1 − run2), covers the setup.  None when it never does (run2 ≥ run1) or a
    time is unknown."""
    if run1 is None or run2 is None or setup is None:
        return None
    gain = run1 - run2
    if not gain > 0:
        return None
    setup = max(float(setup), 0.0)
    n = max(1, math.ceil(setup / gain))
    while n > 1 and (n - 1) * run1 >= setup + (n - 1) * run2:     # the division's rounding, either way
        n -= 1
    while n * run1 < setup + n * run2:
        n += 1
    return int(n)


def whole_job_ratio(run1: float | None, setup: float | None, run2: float | None) -> float | None:
    """run1 / (setup + run2): one run without the plan against the plan's setup and one run
    with it (> 1: the plan pays for itself in its first run).  None when a time is unknown."""
    if run1 is None or run2 is None or setup is None:
        return None
    den = setup + run2
    return float(run1 / den) if den > 0 else None


__all__ = ["COPY_CHUNK", "Copy", "copy_groups", "replica_extents", "replica_file_layout", "copy_costs", "copy_cost",
           "plan_copies", "plan_setup", "trace_files", "break_even_runs", "whole_job_ratio"]
