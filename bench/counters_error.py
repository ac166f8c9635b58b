"""Error of traces synthesized from Darshan counters, measured against the DXT traces of the same runs.

    .venv/bin/python bench/counters_error.py [LOG.darshan | DIR ...] [--system ceda-hdd8] [--layout fixed:64k]

Every log given (default: ``../shared/traces`` and ``../shared/traces/real``) holds both
the module counters and DXT.  For each layer (MPI-IO, POSIX) that has both, the trace
synthesized from the counters (:func:`pario.trace.darshan_counters.synthesize`) is compared
with the DXT trace of that layer (:func:`pario.trace.darshan.read_darshan`) on:

* ``requests`` and ``bytes``: synthesized vs DXT (exact when DXT saw every access);
* ``size TVD``: total variation distance between the request-size histograms (bins: op ×
  power of two, ``floor(log2 length)``; 0 = same shape, 1 = disjoint);
* ``footprint``: bytes covered by the union of all extents (per file), synthesized / DXT;
* ``seq`` / ``consec``: fraction of a (rank, file, op) stream's transitions that are
  sequential (start at or after where the previous request ended) / consecutive (start
  exactly there) — Darshan's definitions — synthesized and DXT, in percent;
* ``rank TVD``: total variation distance between the bytes-per-rank distributions;
* ``time``: predicted makespan of the synthesized / the DXT trace on ``--system`` under
  ``--layout`` (independent, blocking: ``pario simulate TRACE --system S --layout L``).

The table is the one in docs/traces.md ("Counters-only logs"); tests/trace/test_darshan_counters.py
recomputes some rows and checks them against it.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pario import ParioError
from pario.layout import parse_layout
from pario.simulate import simulate
from pario.system import load_system
from pario.trace import Trace
from pario.trace.darshan import read_darshan
from pario.trace.darshan_counters import VIEWS_NOTE, synthesize

DEFAULT_DIRS = ("../shared/traces", "../shared/traces/real")
LAYERS = (("MPI-IO", "DXT_MPIIO"), ("POSIX", "DXT_POSIX"))


@dataclass
class Row:
    log: str
    layer: str
    requests: tuple[int, int]
    bytes: tuple[int, int]
    size_tvd: float
    footprint: float
    seq: tuple[float, float]
    consec: tuple[float, float]
    rank_tvd: float
    time: float

    @property
    def bytes_exact(self) -> bool:
        return self.bytes[0] == self.bytes[1]

    def cells(self) -> list[str]:
        a, b = self.requests
        n = f"{a}" if a == b else f"{a} / {b}"
        return [self.log, self.layer, n, "yes" if self.bytes_exact else "no", f"{self.size_tvd:.3f}",
                f"{self.footprint:.3f}", f"{self.seq[0]:.0f} / {self.seq[1]:.0f}",
                f"{self.consec[0]:.0f} / {self.consec[1]:.0f}", f"{self.rank_tvd:.3f}", f"{self.time:.3f}"]


HEADER = ["log", "layer", "requests", "bytes exact?", "size TVD", "footprint ratio", "seq % synth / DXT",
          "consec % synth / DXT", "rank-bytes TVD", "predicted-time ratio"]


# ---------------------------------------------------------------------------- metrics
def _tvd(a: dict, b: dict) -> float:
    sa, sb = sum(a.values()), sum(b.values())
    if sa == 0 or sb == 0:
        return 0.0 if sa == sb else 1.0
    keys = set(a) | set(b)
    return 0.5 * sum(abs(a.get(k, 0) / sa - b.get(k, 0) / sb) for k in keys)


def size_hist(t: Trace) -> dict:
    """Requests per (op, floor(log2 length)) bin; zero-length requests in bin -1."""
    ln = t.cols["length"]
    b = np.where(ln > 0, np.floor(np.log2(np.maximum(ln, 1))).astype(np.int64), -1)
    keys, counts = np.unique(np.stack([t.cols["op"].astype(np.int64), b]), axis=1, return_counts=True)
    return {(int(o), int(k)): int(c) for (o, k), c in zip(keys.T, counts)}


def footprint(t: Trace) -> int:
    """Bytes covered by the union of the requests' extents, summed over files."""
    total = 0
    for f in np.unique(t.cols["file"]):
        m = (t.cols["file"] == f) & (t.cols["length"] > 0)
        lo, hi = t.cols["offset"][m], t.end_offset[m]
        idx = np.argsort(lo, kind="stable")
        lo, hi = lo[idx], np.maximum.accumulate(hi[idx])
        # a new run starts where an extent begins after everything before it ended
        new = np.r_[True, lo[1:] > hi[:-1]]
        starts = np.flatnonzero(new)
        ends = np.r_[starts[1:], len(lo)] - 1
        total += int((hi[ends] - lo[starts]).sum())
    return total


def transitions(t: Trace) -> tuple[float, float]:
    """Percent of stream transitions that are sequential / consecutive (Darshan's rules:
    stream = (rank, file, op) in order; sequential = offset at or past the previous end)."""
    c = t.cols
    idx = np.lexsort((c["order"], c["op"], c["file"], c["rank"]))
    key = np.stack([c["rank"][idx], c["file"][idx], c["op"][idx]])
    same = np.all(key[:, 1:] == key[:, :-1], axis=0)
    off, end = c["offset"][idx], (c["offset"] + c["length"])[idx]
    n = int(same.sum())
    if n == 0:
        return 0.0, 0.0
    seq = (off[1:] >= end[:-1]) & same
    con = (off[1:] == end[:-1]) & same
    return 100.0 * seq.sum() / n, 100.0 * con.sum() / n


def rank_bytes(t: Trace) -> dict:
    r, ln = t.cols["rank"], t.cols["length"]
    out = np.bincount(r, weights=ln.astype(np.float64)) if len(r) else np.zeros(0)
    return {i: float(v) for i, v in enumerate(out) if v}


def compare(synth: Trace, dxt: Trace, system, layout) -> dict:
    """The metrics of the module docstring for one (synthesized, DXT) pair."""
    fd = footprint(dxt)
    td = simulate(dxt, system, layout).makespan_s
    ts = simulate(synth, system, layout).makespan_s
    return {
        "requests": (len(synth), len(dxt)),
        "bytes": (synth.bytes_read + synth.bytes_written, dxt.bytes_read + dxt.bytes_written),
        "bytes_by_op": ((synth.bytes_read, synth.bytes_written), (dxt.bytes_read, dxt.bytes_written)),
        "size_tvd": _tvd(size_hist(synth), size_hist(dxt)),
        "footprint": footprint(synth) / fd if fd else float("nan"),
        "seq": (transitions(synth)[0], transitions(dxt)[0]),
        "consec": (transitions(synth)[1], transitions(dxt)[1]),
        "rank_tvd": _tvd(rank_bytes(synth), rank_bytes(dxt)),
        "time": ts / td if td > 0 else float("nan"),
    }


def measure(path: Path, system, layout) -> list[Row]:
    """One row per layer of ``path`` that has both counters and usable DXT data."""
    rows = []
    for layer, dxt_mod in LAYERS:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                dxt = read_darshan(path, dxt_mod).trace
            synth = synthesize(path, module=layer)
        except ParioError:
            continue  # the log lacks this layer (or its DXT has no offsets: Darshan < 3.2 DXT_MPIIO)
        m = compare(synth, dxt, system, layout)
        views = any(n.startswith(VIEWS_NOTE) for n in synth.meta.notes)
        rows.append(Row(log=path.name.removesuffix(".darshan"), layer=layer + (" (views)" if views else ""),
                        requests=m["requests"], bytes=m["bytes"], size_tvd=m["size_tvd"], footprint=m["footprint"],
                        seq=m["seq"], consec=m["consec"], rank_tvd=m["rank_tvd"], time=m["time"]))
    return rows


def logs(args: list[str]) -> list[Path]:
    out = []
    for a in args or DEFAULT_DIRS:
        p = Path(a)
        out += sorted(p.glob("*.darshan")) if p.is_dir() else [p] if p.exists() else []
    return out


def markdown(rows: list[Row]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(r.cells()) + " |" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("logs", nargs="*", help="Darshan logs or directories (default: ../shared/traces[/real])")
    ap.add_argument("--system", default="ceda-hdd8", help="system profile for the predicted time (default ceda-hdd8)")
    ap.add_argument("--layout", default="fixed:64k", help="layout for the predicted time (default fixed:64k)")
    a = ap.parse_args(argv)
    system = load_system(a.system)
    layout = parse_layout(a.layout, system)
    paths = logs(a.logs)
    if not paths:
        print("no Darshan logs found", file=sys.stderr)
        return 2
    rows = [r for p in paths for r in measure(p, system, layout)]
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
