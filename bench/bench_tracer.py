"""The MPI-IO tracer's overhead on a real program: IOR (-a MPIIO, 64 KiB transfers) with and
without ``libpario_trace.so``, side by side in one run.

    python bench/bench_tracer.py [--procs 4] [--repeat 11] [--segments 1024] [--dir DIR]

IOR is built from ../shared/clients/ior with the wheel's mpicc.  Each repetition runs the
same IOR command twice, untraced and traced, in alternating order (so drift and other load
hit both alike); the file lives in ``--dir`` (default: /dev/shm, where the file system costs
least and the tracer's share of each call is the largest it can be).  IOR's own reported
write and read bandwidths (``-O summaryFormat=JSON``, the max over its iterations) are
compared: ratio = traced / untraced of each pair, median [min–max] over the repetitions (the
first is a warm-up and dropped), and the ratio of the two median bandwidths.  The issue's floor is 0.97.  Also printed: the trace's bytes per
extent before compression (the per-rank record files' total size over the extents they
hold) and the Parquet trace's bytes per request.  Not a test: no assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IOR_SRC = ROOT.parent / "shared" / "clients" / "ior"
FLOOR = 0.97


def build_ior(work: Path) -> Path:
    mpicc = Path(sys.executable).parent / "mpicc"
    r = subprocess.run(["bash", str(IOR_SRC / "build.sh"), str(work), str(mpicc)], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"bench_tracer: IOR did not build: {r.stderr.strip()}")
    return Path(r.stdout.strip().splitlines()[-1])


def run_ior(ior: Path, procs: int, data: Path, segments: int, trace_dir: Path | None) -> dict:
    from pario.trace.launch import tracer_library
    from pario.run.launch import find_mpiexec

    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "PARIO_TRACE_DIR")}
    if trace_dir is not None:
        env["LD_PRELOAD"] = str(tracer_library())
        env["PARIO_TRACE_DIR"] = str(trace_dir)
    summary = data.with_suffix(".json")
    cmd = [find_mpiexec(), "-n", str(procs), str(ior), "-a", "MPIIO", "-b", "64k", "-t", "64k", "-s", str(segments),
           "-w", "-r", "-e", "-i", "3", "-o", str(data), "-O", "summaryFormat=JSON", "-O", f"summaryFile={summary}"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"bench_tracer: IOR failed: {(r.stderr or r.stdout).strip().splitlines()[-1:]}")
    doc = json.loads(summary.read_text())
    bw = {}
    for s in doc.get("summary", []):
        bw[s["operation"]] = float(s["bwMaxMIB"])
    return bw


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--procs", type=int, default=min(4, os.cpu_count() or 1),
                    help="IOR processes (default: the cores, at most 4: more ranks than cores measure the scheduler)")
    ap.add_argument("--repeat", type=int, default=11)
    ap.add_argument("--segments", type=int, default=1024)
    ap.add_argument("--dir", default="/dev/shm" if os.path.isdir("/dev/shm") else None)
    a = ap.parse_args()
    if not (IOR_SRC / "build.sh").exists():
        raise SystemExit("bench_tracer: ../shared/clients/ior is absent")
    from pario import ParioError
    from pario.trace.launch import tracer_library

    try:
        tracer_library()
    except ParioError as exc:
        raise SystemExit(f"bench_tracer: {exc}") from None
    work = Path(tempfile.mkdtemp(prefix="pario-bench-tracer-", dir=a.dir))
    try:
        ior = build_ior(work / "bin")
        ratios = {"write": [], "read": []}
        bws = {(op, t): [] for op in ratios for t in (False, True)}
        per_extent = None
        for k in range(a.repeat + 1):
            runs = {}
            for traced in ((False, True) if k % 2 == 0 else (True, False)):
                tdir = work / f"trace-{k}" if traced else None
                if tdir is not None:
                    tdir.mkdir()
                runs[traced] = run_ior(ior, a.procs, work / "ior.dat", a.segments, tdir)
                if tdir is not None and per_extent is None:
                    from pario.trace.native import read_native

                    tr = read_native(tdir)
                    raw = sum(p.stat().st_size for p in tdir.rglob("*") if p.is_file())
                    from pario.trace import save

                    save(tr, work / "t.parquet")
                    pq = (work / "t.parquet").stat().st_size
                    per_extent = (raw / max(1, len(tr)), pq / max(1, len(tr)), len(tr))
                if tdir is not None:
                    shutil.rmtree(tdir)
            if k == 0:
                continue
            for op in ratios:
                ratios[op].append(runs[True][op] / runs[False][op])
                for t in (False, True):
                    bws[op, t].append(runs[t][op])
        print(f"IOR -a MPIIO -b 64k -t 64k -s {a.segments} -i 3, {a.procs} procs, file in {a.dir or 'tmp'}; "
              f"{a.repeat} repetitions (+1 warm-up), traced/untraced bandwidth")
        for op, rs in ratios.items():
            med = statistics.median
            print(f"  {op:5s}  {med(rs):.3f} [{min(rs):.3f}-{max(rs):.3f}]   floor {FLOOR}   "
                  f"(median bandwidths {med(bws[op, True]):.0f} / {med(bws[op, False]):.0f} MiB/s "
                  f"= {med(bws[op, True]) / med(bws[op, False]):.3f})")
        if per_extent:
            print(f"  trace: {per_extent[0]:.1f} bytes per extent in the record files, "
                  f"{per_extent[1]:.1f} in Parquet ({per_extent[2]} extents)")
        print(f"  load average {os.getloadavg()[0]:.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
