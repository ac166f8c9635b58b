"""Repeat ``pario run`` on a testbed and tabulate predicted vs measured (examples/README.md).

    python examples/loop_bench.py --testbed TB [--reps 3] [--procs 4] [--work DIR] [--only NAME,...]

For every workload below, ``--reps`` times on a fresh store (created on the testbed's
servers, deleted afterwards together with its server directories): ``pario run --json
--testbed TB …``; then one Markdown row per workload with medians and [min–max] of the
predicted and measured times, the device requests of each run, the RMT hits, the byte
check, ``pario run``'s verdicts (``as predicted`` / ``faster than predicted`` / ``contradicts
the prediction``, counted over the repetitions; :mod:`pario.run.compare`) and the load
average seen over the repetitions.  Each repetition's line names its verdict and the kinds
of its reasons.  Needs root and an up testbed
whose servers match its ``nominal.toml`` (``pario testbed up TB --hdd 4 --ssd 0``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IOR = str(ROOT / "examples" / "ior_like.py")
SIZE = ["--xfer", "256K", "--segments", "64"]
SMALL = ["--xfer", "16K", "--segments", "64"]

WORKLOADS = {
    # name: (prepare args or None, program args)
    "read-strided": (["data", "--write-only", *SIZE], ["data", "--read-only", *SIZE, "--reads", "4"]),
    "read-random": (["data", "--write-only", "--pattern", "random", *SIZE],
                    ["data", "--read-only", "--pattern", "random", *SIZE, "--reads", "4"]),
    "write+read-strided": (None, ["data", *SIZE]),
    "write+read-strided-16K": (None, ["data", *SMALL]),
    "collective-16K": (None, ["data", "--collective", *SMALL]),
    "collective": (None, ["data", "--collective", *SIZE]),
}


def pario_run(tb: str, procs: int, work: Path, prepare, args) -> dict:
    store, out = work / "store", work / "out"
    cmd = [sys.executable, "-c", "import sys; from pario.cli import main; sys.exit(main())", "run", "--json", "--procs", str(procs), "--testbed", tb,
           "--store", str(store), "--out", str(out), "--timeout", "300"]
    if prepare:
        cmd += ["--prepare", " ".join(prepare)]
    cmd += [IOR, *args]
    try:
        cp = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        if cp.returncode not in (0, 1):
            raise SystemExit(f"pario run failed: {cp.stderr.strip()[-500:]}")
        res = json.loads(cp.stdout)
        res["logs"] = {k: (out / f"{k}.log").read_text() for k in ("run1", "run2")}
        return res
    finally:
        _remove_store(store)
        shutil.rmtree(work, ignore_errors=True)


def _remove_store(store: Path) -> None:
    cfg = store / "store.json"
    if cfg.exists():
        for d in json.loads(cfg.read_text()).get("servers", {}).values():
            p = Path(d)
            if p.is_absolute():
                shutil.rmtree(p, ignore_errors=True)
    shutil.rmtree(store, ignore_errors=True)


def _stat(vals) -> str:
    vals = [v for v in vals if v is not None]
    if not vals:
        return "–"
    return f"{statistics.median(vals):.3f} [{min(vals):.3f}–{max(vals):.3f}]"


def _ios(dev) -> int | None:
    if not dev:
        return None
    return sum(v["read_ios"] + v["write_ios"] for v in dev.values())


def _verdict(r: dict) -> str:
    """``verdict (reason kinds)`` of one repetition."""
    v = r.get("verdict") or {}
    kinds = ", ".join(x["kind"] for x in v.get("reasons", []))
    return f"{v.get('verdict', '–')}" + (f" ({kinds})" if kinds else "")


def _verdicts(runs) -> str:
    """The verdicts of the repetitions, counted: ``contradicts the prediction ×2, as predicted ×1``."""
    counts: dict[str, int] = {}
    for r in runs:
        k = (r.get("verdict") or {}).get("verdict", "–")
        counts[k] = counts.get(k, 0) + 1
    return ", ".join(f"{k} ×{n}" for k, n in sorted(counts.items(), key=lambda kv: -kv[1]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--testbed", required=True)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--work", default="/tmp/pario-loop-bench")
    ap.add_argument("--only", default=None, help="comma list of workloads (default all)")
    ap.add_argument("--json", default=None, help="also save every repetition's result here")
    a = ap.parse_args()
    names = a.only.split(",") if a.only else list(WORKLOADS)
    allres = {}
    for name in names:
        prepare, args = WORKLOADS[name]
        runs = []
        for k in range(a.reps):
            r = pario_run(a.testbed, a.procs, Path(a.work) / f"{name}-{k}", prepare, args)
            runs.append(r)
            print(f"{name} #{k + 1}: predicted {r['predicted']['ORIG']} / {r['predicted']['plan']}, io "
                  f"{r['io_s']['run1']:.3f} / {r['io_s']['run2']:.3f} s, wall {r['run1_s']:.2f} / {r['run2_s']:.2f} s, "
                  f"hits {r['redirected']['hit_requests']}/{r['redirected']['requests']}, identical {r['identical']}, "
                  f"load {r['loadavg']['start'][0]:.2f}; {_verdict(r)}", flush=True)
        allres[name] = runs
    print()
    print("| workload | predicted ORIG / plan (s) | ratio | measured I/O run 1 (s) | run 2 (s) | ratio | wall run 1 (s) "
          "| run 2 (s) | device requests run 1 / run 2 | RMT hits | identical | verdicts | load avg |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, runs in allres.items():
        p = runs[0]["predicted"]
        pred = f"{p['ORIG']:.3f} / {p['plan']:.3f}" if p["ORIG"] and p["plan"] else "–"
        preds = {(round(r["predicted"]["ORIG"] or 0, 3), round(r["predicted"]["plan"] or 0, 3)) for r in runs}
        if len(preds) > 1:
            pred = _stat([r["predicted"]["ORIG"] for r in runs]) + " / " + _stat([r["predicted"]["plan"] for r in runs])
        loads = [x for r in runs for x in (r["loadavg"]["start"][0], r["loadavg"]["end"][0])]
        print(f"| {name} | {pred} | {_stat([r['predicted']['ratio'] for r in runs])} "
              f"| {_stat([r['io_s']['run1'] for r in runs])} | {_stat([r['io_s']['run2'] for r in runs])} "
              f"| {_stat([r['io_s']['ratio'] for r in runs])} | {_stat([r['run1_s'] for r in runs])} "
              f"| {_stat([r['run2_s'] for r in runs])} "
              f"| {statistics.median([_ios(r['devices']['run1']) for r in runs]):.0f} / "
              f"{statistics.median([_ios(r['devices']['run2']) for r in runs]):.0f} "
              f"| {runs[0]['redirected']['hit_requests']}/{runs[0]['redirected']['requests']} "
              f"| {'yes' if all(r['identical'] and r['fsck_ok'] for r in runs) else 'NO'} "
              f"| {_verdicts(runs)} | {min(loads):.1f}–{max(loads):.1f} |")
    if a.json:
        Path(a.json).write_text(json.dumps(allres, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
