"""Serving unmodified MPI programs (issue 16): IOR -a MPIIO with and without pario's preloaded
library (``libpario_trace.so``), side by side in one run.

    python bench/bench_serve.py [--procs 4] [--repeat 3] [--size 32m] [--coll-size 8m]
                                [--dir DIR] [--profile]

IOR is built from ../shared/clients/ior with the wheel's mpicc.  Every file (plain files and
the store's server directories) lives in ``--dir`` (default /dev/shm, where the file system
costs least and pario's share of each call is the largest it can be).  Four comparisons,
each a ratio of IOR's own bandwidths, candidate / baseline:

1. ``pass-through``: the library preloaded with PARIO_STORE set and PARIO_SERVE unset, the
   file not in the store (it goes to MPICH) vs no library.  Floor 0.98.
2. ``served``: the file created in the store (PARIO_SERVE=all: the default layout, 64 KiB
   over every server; PARIO_PLAN: the layout ``pario advise --schemes padp`` made from a
   trace of the same IOR run) vs plain MPI-IO without the library, independent and
   collective (-c, ROMIO's default hints: automatic collective buffering).  Floor 0.9.
3. ``redirected``: random (-z) writes and reads of a store file with CEDA replicas (a prepare
   write, a traced -z read, ``pario advise --schemes ceda --by order``, ``pario replicate``)
   vs a store file with the same bytes and no replica.  Ratios reported (the loop issue
   measured 0.86–0.95 for the Python store's redirected paths, docs/RESULTS.md).  Replica
   hits: the traced requests that the RMT routes to a replica (``File.served_by`` of the
   Python store) and the MARK records each write run adds to the RMT journal.
4. ``two-phase``: collective writes and reads (-c) with collective buffering forced on
   (romio_cb_write/read=enable, as IOR_HINT__MPI__ hints) served with each order
   (ROMCIO, CACIO, HACIO) vs MPICH's ROMIO on a plain file.  Floor 0.9.

Each repetition runs every configuration once; inside a group the order alternates between
repetitions (so drift and other load hit both sides alike); the first repetition is a
warm-up and is dropped.  Two ratios per row: ``IOR bw`` (IOR's bwMaxMIB over its -i
iterations: bytes / open-to-close time) and ``data`` (bytes / the shortest write or read
phase, IOR's wrRdTime: open and close left out).  The table gives median [min–max] over the
repetitions.  Bytes are verified once per configuration (after the warm-up): the store file
equals the plain file of the same IOR run, byte for byte; redirected reads pass IOR's own
check (-R) with every byte read through replicas.  ``--profile`` adds what each side costs
per call on this machine: MPICH's collectives (the MPI calls pario adds per open and per
collective call) and the store's calls (pxs_read, pxs_size) against a raw pread.  Not a
test: no assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from bench_tracer import IOR_SRC, build_ior  # noqa: E402

SYSTEM = "hacio-6h2s"
GROUPS = ("indep", "coll", "tp", "z")
SEED = 4242
FLOORS = {"pass-through": 0.98, "served": 0.9, "two-phase": 0.9}
ORDERS = ("romcio", "cacio", "hacio")


def _size(text: str) -> int:
    m = re.fullmatch(r"(\d+)([kmg]?)", text.strip().lower())
    if not m:
        raise SystemExit(f"bench_serve: bad size {text!r}")
    return int(m.group(1)) << {"": 0, "k": 10, "m": 20, "g": 30}[m.group(2)]


def _ior_size(n: int) -> str:
    for unit, sh in (("g", 30), ("m", 20), ("k", 10)):
        if n % (1 << sh) == 0:
            return f"{n >> sh}{unit}"
    return str(n)


class Bench:
    def __init__(self, a, work: Path):
        from pario.run.launch import find_mpiexec
        from pario.trace.launch import tracer_library

        self.a, self.work = a, work
        self.lib = str(tracer_library())
        self.mpiexec = find_mpiexec()
        self.ior = build_ior(work / "bin")
        self.store = work / "store"
        self.py = sys.executable
        self.pario = [self.py, "-c", "import sys; from pario.cli import main; sys.exit(main())"]
        src = work / "zio.c"
        src.write_text(ZIO)
        self.zio = work / "bin" / "zio"
        r = subprocess.run([str(Path(sys.executable).parent / "mpicc"), "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror",
                            str(src), "-o", str(self.zio)], capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"bench_serve: zio did not build: {r.stderr.strip()[-400:]}")

    # ------------------------------------------------------------------ running things
    def env(self, *, lib=False, store=False, serve=None, plan=None, order=None, trace=None, cb=None):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("PARIO_", "IOR_HINT")) and k != "LD_PRELOAD"}
        if lib:
            env["LD_PRELOAD"] = self.lib
        for key, val in (("PARIO_STORE", self.store if store else None), ("PARIO_SERVE", serve),
                         ("PARIO_PLAN", plan), ("PARIO_ORDER", order), ("PARIO_TRACE_DIR", trace)):
            if val is not None:
                env[key] = str(val)
        if cb:
            env["IOR_HINT__MPI__romio_cb_write"] = cb
            env["IOR_HINT__MPI__romio_cb_read"] = cb
        return env

    def cli(self, *args) -> str:
        r = subprocess.run([*self.pario, *map(str, args)], capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"bench_serve: pario {' '.join(map(str, args[:2]))} failed: "
                             f"{(r.stderr or r.stdout).strip()[-400:]}")
        return r.stdout

    def ior_run(self, args, env, check=True) -> tuple[dict, subprocess.CompletedProcess]:
        summary = self.work / "summary.json"
        summary.unlink(missing_ok=True)
        cmd = [self.mpiexec, "-n", str(self.a.procs), str(self.ior), *map(str, args),
               "-O", "summaryFormat=JSON", "-O", f"summaryFile={summary}"]
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        if check and r.returncode != 0:
            raise SystemExit(f"bench_serve: IOR failed ({' '.join(map(str, args))}): "
                             f"{(r.stderr or r.stdout).strip()[-600:]}")
        if "pario: serve:" in r.stderr:
            raise SystemExit(f"bench_serve: the library complained: {r.stderr.strip()[-600:]}")
        out = {}
        if summary.exists():
            doc = json.loads(summary.read_text())
            for s in doc.get("summary", []):
                out[s["operation"]] = {"bw": float(s["bwMaxMIB"])}
            for t in doc.get("tests", []):
                p = t.get("Parameters", {})
                nbytes = int(p.get("blockSize", 0)) * int(p.get("segmentCount", 1)) * self.a.procs
                for res in t.get("Results", []):
                    op = res["access"]
                    if op in out and res.get("wrRdTime", 0) > 0:
                        bw = nbytes / res["wrRdTime"] / (1 << 20)
                        out[op]["data"] = max(out[op].get("data", 0.0), bw)
                        out[op]["oc"] = min(out[op].get("oc", 1e9), res["openTime"] + res["closeTime"])
        return out, r

    def zio_run(self, mode, name, shape, iters, env) -> tuple[dict, list[str]]:
        """zio (ZIO below): {'write': {'bw', 'data'}} like ior_run, and its output lines."""
        b, t, segs = shape
        cmd = [self.mpiexec, "-n", str(self.a.procs), str(self.zio), mode, str(name), str(b), str(t), str(segs),
               str(iters)]
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        if r.returncode != 0 or "pario: serve:" in r.stderr:
            raise SystemExit(f"bench_serve: zio {mode} {name} failed: {(r.stderr or r.stdout).strip()[-600:]}")
        lines = r.stdout.split("\n")
        nbytes = int(lines[0])
        times = [tuple(map(float, ln.split())) for ln in lines[1:] if ln and ln[0].isdigit()]
        out = {"write": {"bw": nbytes / min(x[0] for x in times) / (1 << 20),
                         "data": nbytes / min(x[1] for x in times) / (1 << 20),
                         "oc": min(x[0] - x[1] for x in times)}} if times else {}
        return out, lines

    # ------------------------------------------------------------------ verification
    def store_bytes(self, name) -> bytes:
        from pario.store import Store

        with Store(str(self.store)) as st:
            with st.open(str(name)) as f:
                return bytes(f.read(0, int(f.size)))

    def in_store(self, name) -> bool:
        from pario.store import Store

        with Store(str(self.store)) as st:
            return str(name) in st.files()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3, help="measured repetitions (plus one warm-up)")
    ap.add_argument("--size", default="32m", help="bytes per rank of the independent and random runs")
    ap.add_argument("--coll-size", default="8m", help="bytes per rank of the collective runs")
    ap.add_argument("--dir", default="/dev/shm" if os.path.isdir("/dev/shm") else None)
    ap.add_argument("--profile", action="store_true", help="also time MPICH's collectives and the store's calls")
    ap.add_argument("--only", default=",".join(GROUPS),
                    help=f"run only these groups (comma-separated, of {','.join(GROUPS)}: independent, collective, "
                         "two-phase with cb forced, random with CEDA replicas)")
    a = ap.parse_args()
    a.only = set(filter(None, a.only.split(",")))
    if not a.only or a.only - set(GROUPS):
        raise SystemExit(f"bench_serve: --only: groups are {','.join(GROUPS)}")
    size, csize = _size(a.size), _size(a.coll_size)
    if size < 1 << 20 or size % (1 << 20) or csize < 1 << 20 or csize % (1 << 20):
        raise SystemExit("bench_serve: --size and --coll-size must be whole MiB, at least 1m")
    if not (IOR_SRC / "build.sh").exists():
        raise SystemExit("bench_serve: ../shared/clients/ior is absent")
    from pario import ParioError

    t_start = time.time()
    work = Path(tempfile.mkdtemp(prefix="pario-bench-serve-", dir=a.dir))
    try:
        try:
            b = Bench(a, work)
        except ParioError as exc:
            raise SystemExit(f"bench_serve: {exc}") from None
        run(b, a, size, csize, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"  wall time {time.time() - t_start:.0f} s")


def run(b: Bench, a, size: int, csize: int, work: Path) -> None:
    b.cli("store", "init", b.store, "--system", SYSTEM)
    seg = 4
    indep = ["-a", "MPIIO", "-G", SEED, "-b", _ior_size(size // seg), "-t", "64k", "-s", seg, "-i", 3, "-e", "-k"]
    coll = ["-a", "MPIIO", "-G", SEED, "-b", _ior_size(csize), "-t", "1m", "-s", 1, "-i", 3, "-e", "-k", "-c"]
    zshape = ["-a", "MPIIO", "-G", 99, "-b", "1m", "-t", "16k", "-s", size >> 20, "-k"]
    zread = [*zshape, "-r", "-z", "--random-offset-seed", 7, "-E", "-i", 3]
    zio_shape = (1 << 20, 16 << 10, size >> 20)
    f = {k: work / f"{k}.dat" for k in ("plain", "pt", "sd", "sp", "plain-c", "sd-c", "sp-c", "plain-tp",
                                         *[f"tp-{o}" for o in ORDERS], "za", "zb", "plain-z", "traced")}

    padp_desc, nrep, hits, replica_bytes, ztrace = "-", 0, 0, 0, []
    if a.only & {"indep", "coll"}:
        padp_desc = padp_layout(b, work, indep, f)
    if "z" in a.only:
        nrep, hits, replica_bytes, ztrace = ceda_replicas(b, a, work, zshape, f, size)
    run_groups(b, a, work, f, indep, coll, zread, zio_shape, size, padp_desc, nrep, hits, replica_bytes, ztrace)


def padp_layout(b: Bench, work: Path, indep: list, f: dict) -> str:
    """PADP layout: advise on a trace of the same IOR run (plain file, traced by the library);
    writes padp.json (the layout for the sp and sp-c files) and returns its description."""
    from pario.trace import save
    from pario.trace.native import read_native

    tdir = work / "trace-padp"
    tdir.mkdir()
    b.ior_run([*indep, "-w", "-r", "-i", 1, "-o", f["traced"]], b.env(lib=True, trace=tdir))
    save(read_native(tdir), work / "padp.parquet")
    b.cli("advise", work / "padp.parquet", "--system", SYSTEM, "--schemes", "padp", "-o", work / "padp-out.json")
    padp = json.loads((work / "padp-out.json").read_text())
    lay = padp["layouts"].get(str(f["traced"])) or padp["layouts"]["*"]   # '*': every file of the trace
    padp.update(layouts={str(f["sp"]): lay, str(f["sp-c"]): lay}, replicas={})
    (work / "padp.json").write_text(json.dumps(padp))
    from pario.layout import describe, layout_from_dict
    from pario.system import load_system

    prof = load_system(SYSTEM)
    return describe(layout_from_dict(lay, prof), prof)


def ceda_replicas(b: Bench, a, work: Path, zshape: list, f: dict, size: int):
    """CEDA replicas for the random workload: prepare writes, traced -z read of zb, advise,
    replicate.  Returns (replicas, traced reads routed to a replica, replica bytes, trace)."""
    from pario.store import Store
    from pario.trace import save
    from pario.trace.native import read_native

    served_all = b.env(lib=True, store=True, serve="all")
    for name in ("za", "zb"):
        b.ior_run([*zshape, "-w", "-o", f[name]], served_all)
    b.ior_run([*zshape, "-w", "-o", f["plain-z"]], b.env())
    tdir = work / "trace-z"
    tdir.mkdir()
    b.ior_run([*zshape, "-r", "-z", "--random-offset-seed", 7, "-E", "-o", f["zb"]],
              b.env(lib=True, store=True, trace=tdir))
    ztrace = read_native(tdir)
    save(ztrace, work / "z.parquet")
    zbytes = a.procs * size
    b.cli("advise", work / "z.parquet", "--system", SYSTEM, "--schemes", "ceda", "--by", "order",
          "--space", str(zbytes), "-o", work / "ceda.json")
    ceda = json.loads((work / "ceda.json").read_text())
    nrep = len(ceda.get("replicas", {}).get(str(f["zb"]), []))
    if nrep:
        b.cli("replicate", work / "ceda.json", "--store", b.store, "--no-layouts")
    # replica hits: the traced requests the RMT sends (partly) to a replica, Python's routing
    hits = 0
    with Store(str(b.store)) as st:
        with st.open(str(f["zb"])) as fh:
            for o, n in zip(ztrace.offset.tolist(), ztrace.length.tolist()):
                hits += any(seg_[2] is not None for seg_ in fh.served_by(o, o + n))
    replica_bytes = sum(int(e.get("bytes", 0)) for e in ceda.get("replicas", {}).get(str(f["zb"]), []))
    return nrep, hits, replica_bytes, ztrace


def run_groups(b: Bench, a, work: Path, f: dict, indep, coll, zread, zio_shape, size, padp_desc, nrep, hits,
               replica_bytes, ztrace) -> None:
    # ---- the configurations: (group, key, IOR args, env)
    served_all = b.env(lib=True, store=True, serve="all")
    plan_env = b.env(lib=True, store=True, plan=work / "padp.json")
    groups = {
        "indep": [("plain", [*indep, "-w", "-r", "-o", f["plain"]], b.env()),
                  ("pt", [*indep, "-w", "-r", "-o", f["pt"]], b.env(lib=True, store=True)),
                  ("sd", [*indep, "-w", "-r", "-o", f["sd"]], served_all),
                  ("sp", [*indep, "-w", "-r", "-o", f["sp"]], plan_env)],
        "coll": [("plain-c", [*coll, "-w", "-r", "-o", f["plain-c"]], b.env()),
                 ("sd-c", [*coll, "-w", "-r", "-o", f["sd-c"]], served_all),
                 ("sp-c", [*coll, "-w", "-r", "-o", f["sp-c"]], plan_env)],
        "tp": [("plain-tp", [*coll, "-w", "-r", "-o", f["plain-tp"]], b.env(cb="enable"))]
              + [(f"tp-{o}", [*coll, "-w", "-r", "-o", f[f"tp-{o}"]],
                  b.env(lib=True, store=True, serve="all", order=o, cb="enable")) for o in ORDERS],
        "z": [("za-r", [*zread, "-o", f["za"]], b.env(lib=True, store=True, plan=work / "ceda.json")),
              ("zb-r", [*zread, "-o", f["zb"]], b.env(lib=True, store=True, plan=work / "ceda.json")),
              ("za-w", ("zio", f["za"]), b.env(lib=True, store=True, plan=work / "ceda.json")),
              ("zb-w", ("zio", f["zb"]), b.env(lib=True, store=True, plan=work / "ceda.json"))],
    }
    groups = {g: v for g, v in groups.items() if g in a.only}
    rw = ("write", "read")
    rows = [  # (comparison, candidate, baseline, label, floor, ops)
        ("pass-through", "pt", "plain", "independent, file not in the store", FLOORS["pass-through"], rw),
        ("served", "sd", "plain", "independent, default layout", FLOORS["served"], rw),
        ("served", "sp", "plain", "independent, PADP layout", FLOORS["served"], rw),
        ("served", "sd-c", "plain-c", "collective (-c), default layout", FLOORS["served"], rw),
        ("served", "sp-c", "plain-c", "collective (-c), PADP layout", FLOORS["served"], rw),
        *[("two-phase", f"tp-{o}", "plain-tp", f"-c, cb forced, {o.upper()}", FLOORS["two-phase"], rw)
          for o in ORDERS],
        ("redirected", "zb-w", "za-w", "random writes (zio), CEDA replicas vs none", None, ("write",)),
        ("redirected", "zb-r", "za-r", "random reads (IOR -z), CEDA replicas vs none", None, ("read",)),
    ]
    res: dict[str, list[dict]] = {k: [] for g in groups.values() for k, _, _ in g}
    rows = [r for r in rows if r[1] in res]
    marks = []
    journal = b.store / "rmt.log"
    loads = []
    for k in range(a.repeat + 1):
        for gname, confs in groups.items():
            for key, args, env in (confs if k % 2 == 0 else confs[::-1]):
                seq0 = _last_seq(journal) if key == "zb-w" else None
                if args[0] == "zio":
                    out, _ = b.zio_run("w", args[1], zio_shape, 3, env)
                else:
                    out, _ = b.ior_run(args, env)
                if seq0 is not None:
                    m = _marks_after(journal, seq0)
                    if m is not None:
                        marks.append(m)
                if k > 0:
                    res[key].append(out)
        loads.append(os.getloadavg()[0])
        if k == 0:
            verified = verify(b, a, f, zio_shape)
        print(f"  repetition {k}{' (warm-up)' if k == 0 else ''} done, load {loads[-1]:.2f}", flush=True)

    # ---- the table
    print()
    print(f"IOR -a MPIIO, {a.procs} procs, files and store in {a.dir or 'tmp'} (store: {SYSTEM}); "
          f"{a.repeat} repetitions (+1 warm-up); ratio = candidate / baseline, median [min–max]")
    print(f"  independent: {' '.join(map(str, indep))} -w -r;  collective: {' '.join(map(str, coll))} -w -r;")
    print(f"  random reads: {' '.join(map(str, zread))}; random writes: zio (this file) with IOR -z's "
          f"transfers of the same shape, 3 iterations;  PADP layout: {padp_desc}")
    print()
    print("| comparison | configuration | op | baseline MiB/s | candidate MiB/s | IOR bw ratio | data-phase ratio | floor |")
    print("|---|---|---|---|---|---|---|---|")
    for comp, cand, base, label, floor, ops in rows:
        for op in ops:
            r_bw = [c[op]["bw"] / bb[op]["bw"] for c, bb in zip(res[cand], res[base])]
            r_data = [c[op]["data"] / bb[op]["data"] for c, bb in zip(res[cand], res[base])]
            mb = statistics.median(x[op]["bw"] for x in res[base])
            mc = statistics.median(x[op]["bw"] for x in res[cand])
            print(f"| {comp} | {label} | {op} | {mb:.0f} | {mc:.0f} | {_stat(r_bw)} | {_stat(r_data)} | "
                  f"{floor if floor else 'report'} |")
    print()
    if "z" in a.only:
        print(f"  redirected: {nrep} replica(s) of {replica_bytes / (1 << 20):.0f} MiB for {f['zb'].name}; "
              f"{hits} of {len(ztrace)} traced -z reads routed to a replica by the RMT; "
              f"RMT journal MARK records (CLEAN → DIRTY) per zio write run of zb: {_stat(marks, 0)} "
              f"({len(marks)} of {a.repeat + 1} runs; the others' records were compacted at close)")
    oc = [key for key in ("plain", "pt", "sd", "plain-c", "sd-c") if key in res]
    if oc:
        print("  open+close seconds per iteration (median, max over ranks as IOR reports): "
              + ", ".join(f"{key} {statistics.median(x['write']['oc'] + x['read']['oc'] for x in res[key]):.3f}"
                          for key in oc))
    print("  bytes verified: " + "; ".join(verified))
    print(f"  load average {min(loads):.2f}–{max(loads):.2f}")
    fsck = subprocess.run([*b.pario, "store", "fsck", "--store", str(b.store)], capture_output=True, text=True)
    print(f"  pario store fsck: {'clean' if fsck.returncode == 0 else 'NOT clean: ' + fsck.stdout.strip()[-300:]}")
    if a.profile and "indep" in a.only:
        profile(b, a, f)
    elif a.profile:
        print("  --profile: needs the indep group (it times the store's calls on its files)")


def _stat(vals, nd=3) -> str:
    vals = list(vals)
    if not vals:
        return "–"
    if nd == 0:
        return f"{statistics.median(vals):.0f} [{min(vals)}–{max(vals)}]"
    return f"{statistics.median(vals):.{nd}f} [{min(vals):.{nd}f}–{max(vals):.{nd}f}]"


def _last_seq(journal: Path) -> tuple[int, int]:
    from pario.store import rmt_journal as J

    j = J.read(journal)
    return j.header["epoch"], (j.records[-1].seq if j.records else -1)


def _marks_after(journal: Path, before: tuple[int, int]) -> int | None:
    """MARK records added since ``before``; None when the last close compacted the journal
    (a new epoch: the run's records are folded into the new journal's state)."""
    from pario.store import rmt_journal as J

    j = J.read(journal)
    if j.header["epoch"] != before[0]:
        return None
    return sum(1 for r in j.records if r.seq > before[1] and r.type == J.MARK)


def verify(b: Bench, a, f, zio_shape) -> list[str]:
    """Byte checks after the warm-up: every store file equals the plain file of the same run."""
    out = []
    if "indep" in a.only:
        ok = f["pt"].read_bytes() == f["plain"].read_bytes() and not b.in_store(f["pt"])
        out.append(f"pass-through file {'=' if ok else '!='} plain{'' if ok else ' (MISMATCH)'}")
    pairs = {"indep": (("sd", "plain"), ("sp", "plain")), "coll": (("sd-c", "plain-c"), ("sp-c", "plain-c")),
             "tp": tuple((f"tp-{o}", "plain-tp") for o in ORDERS), "z": (("za", "plain-z"), ("zb", "plain-z"))}
    for key, ref in (kr for g in GROUPS if g in a.only for kr in pairs[g]):
        if key == "za":   # the plain twin of the random runs: the same zio writes, without pario
            b.zio_run("w", f["plain-z"], zio_shape, 1, b.env())
        same = b.store_bytes(f[key]) == f[ref].read_bytes()
        out.append(f"{key} {'=' if same else '!='} {ref}{'' if same else ' (MISMATCH)'}")
    if "z" not in a.only:
        return out
    # redirected reads: zio c reads zb (through its replicas) and compares every byte with its pattern
    _, lines = b.zio_run("c", f["zb"], zio_shape, 1, b.env(lib=True, store=True))
    bad = [ln for ln in lines if ln.startswith("bad ")]
    out.append(f"zio reads of zb through its replicas: {bad[0][4:] if bad else '?'} bytes differ from the pattern")
    return out


# ---------------------------------------------------------------------- --profile

MPI_PROBE = r"""
#include <mpi.h>
#include <stdio.h>
#include <stdint.h>
int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int r, e = 0, g = 0, dec[2] = {0, 0}, N = 200;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm d;
    MPI_Comm_dup(MPI_COMM_WORLD, &d);
    int64_t mine[5] = {r, r, 0, 0, 1}, all[5 * 256];
    double t[5];
    MPI_Barrier(d);
    t[0] = MPI_Wtime();
    for (int i = 0; i < N; i++) MPI_Allgather(mine, 5, MPI_INT64_T, all, 5, MPI_INT64_T, d);
    t[1] = MPI_Wtime();
    for (int i = 0; i < N; i++) MPI_Allreduce(&e, &g, 1, MPI_INT, MPI_MAX, d);
    t[2] = MPI_Wtime();
    for (int i = 0; i < N; i++) MPI_Bcast(dec, 2, MPI_INT, 0, d);
    t[3] = MPI_Wtime();
    for (int i = 0; i < N; i++) MPI_Barrier(d);
    t[4] = MPI_Wtime();
    if (r == 0)
        printf("%.1f %.1f %.1f %.1f\n", (t[1] - t[0]) / N * 1e6, (t[2] - t[1]) / N * 1e6,
               (t[3] - t[2]) / N * 1e6, (t[4] - t[3]) / N * 1e6);
    MPI_Finalize();
    return 0;
}
"""

# An unmodified MPI program that writes without truncating (IOR's write phase opens its file
# with MPI_File_set_size(0), aiori-MPIIO.c, which drops every replica entry: RMT TRIM to 0):
# the transfers of IOR -z (rank r's block of segment s at (s·P + r)·b, its transfers in one
# shuffled order), each 8-byte word at file offset x holding splitmix64(x ^ seed).
#   zio w|c FILE BLOCK XFER SEGMENTS ITER   (w: write ITER times; c: read once, count bad bytes)
# prints: bytes, then per iteration "open-to-close data-phase" seconds (max over ranks);
# c prints the number of bytes that differ from the pattern (summed over ranks).
ZIO = r"""
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static uint64_t mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}
static void fill(uint64_t *w, int64_t off, int64_t n)
{
    for (int64_t i = 0; i < n / 8; i++)
        w[i] = mix((uint64_t)(off + 8 * i) ^ 0x5EEDULL);
}
int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int r, p;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    if (argc != 7) {
        if (r == 0) fprintf(stderr, "usage: zio w|c FILE BLOCK XFER SEGMENTS ITER\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int check = argv[1][0] == 'c';
    int64_t b = atoll(argv[3]), t = atoll(argv[4]), segs = atoll(argv[5]), iters = atoll(argv[6]);
    int64_t nt = b / t;
    int64_t *perm = malloc((size_t)nt * sizeof *perm);
    for (int64_t i = 0; i < nt; i++) perm[i] = i;
    uint64_t s = 7;
    for (int64_t i = nt - 1; i > 0; i--) {
        s = mix(s);
        int64_t j = (int64_t)(s % (uint64_t)(i + 1)), x = perm[i];
        perm[i] = perm[j];
        perm[j] = x;
    }
    uint64_t *buf = malloc((size_t)t), *want = malloc((size_t)t);
    long long bad = 0;
    if (r == 0) printf("%lld\n", (long long)(b * segs * p));
    for (int64_t it = 0; it < (check ? 1 : iters); it++) {
        MPI_File fh;
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        if (MPI_File_open(MPI_COMM_WORLD, argv[2], check ? MPI_MODE_RDONLY : MPI_MODE_WRONLY, MPI_INFO_NULL, &fh)
            != MPI_SUCCESS) MPI_Abort(MPI_COMM_WORLD, 1);
        double t1 = MPI_Wtime();
        for (int64_t sg = 0; sg < segs; sg++)
            for (int64_t k = 0; k < nt; k++) {
                int64_t off = (sg * p + r) * b + perm[k] * t;
                MPI_Status st;
                if (check) {
                    if (MPI_File_read_at(fh, off, buf, (int)t, MPI_BYTE, &st) != MPI_SUCCESS) MPI_Abort(MPI_COMM_WORLD, 1);
                    fill(want, off, t);
                    const unsigned char *x = (const unsigned char *)buf, *y = (const unsigned char *)want;
                    for (int64_t i = 0; i < t; i++) bad += x[i] != y[i];
                } else {
                    fill(buf, off, t);
                    if (MPI_File_write_at(fh, off, buf, (int)t, MPI_BYTE, &st) != MPI_SUCCESS) MPI_Abort(MPI_COMM_WORLD, 1);
                }
            }
        double t2 = MPI_Wtime();
        MPI_File_close(&fh);
        double t3 = MPI_Wtime(), mine[2] = {t3 - t0, t2 - t1}, all[2];
        MPI_Reduce(mine, all, 2, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (r == 0) printf("%.6f %.6f\n", all[0], all[1]);
    }
    long long tot = 0;
    MPI_Reduce(&bad, &tot, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (r == 0 && check) printf("bad %lld\n", tot);
    free(perm); free(buf); free(want);
    MPI_Finalize();
    return 0;
}
"""

STORE_PROBE = r"""
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include "redirect.h"
static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}
int main(int argc, char **argv)
{
    if (argc != 5)
        return 2;
    pxs_store *st;
    char err[PXS_ERRLEN];
    if (pxs_store_open(argv[1], PXS_SHARED, &st, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    pxs_file *f;
    if (pxs_open(st, argv[2], &f)) {
        fprintf(stderr, "%s\n", pxs_store_error(st));
        return 1;
    }
    int64_t T = 65536, N = atoll(argv[4]) / T, got, size;
    char *buf = malloc((size_t)T);
    int fd = open(argv[3], O_RDONLY);
    double best[3] = {1e9, 1e9, 1e9};
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now();
        for (int64_t i = 0; i < N; i++)
            pxs_read(f, i * T, buf, T, &got);
        double t1 = now();
        for (int64_t i = 0; i < N; i++)
            pxs_size(f, &size);
        double t2 = now();
        for (int64_t i = 0; i < N; i++)
            if (pread(fd, buf, (size_t)T, i * T) != T)
                return 1;
        double t3 = now();
        double d[3] = {t1 - t0, t2 - t1, t3 - t2};
        for (int k = 0; k < 3; k++)
            best[k] = d[k] < best[k] ? d[k] : best[k];
    }
    printf("%.2f %.2f %.2f\n", best[0] / (double)N * 1e6, best[1] / (double)N * 1e6, best[2] / (double)N * 1e6);
    close(fd);
    free(buf);
    pxs_close(f);
    return pxs_store_close(st, err, sizeof err) ? 1 : 0;
}
"""


def profile(b: Bench, a, f) -> None:
    import importlib.util

    mpicc = Path(sys.executable).parent / "mpicc"
    src = b.work / "mpi_probe.c"
    src.write_text(MPI_PROBE)
    exe = b.work / "bin" / "mpi_probe"
    subprocess.run([str(mpicc), "-O2", str(src), "-o", str(exe)], check=True)
    vals = []
    for _ in range(3):
        r = subprocess.run([b.mpiexec, "-n", str(a.procs), str(exe)], capture_output=True, text=True, check=True)
        vals.append([float(x) for x in r.stdout.split()])
    names = ("MPI_Allgather", "MPI_Allreduce", "MPI_Bcast", "MPI_Barrier")
    print(f"  MPICH collectives, {a.procs} procs, µs per call (median of 3 runs of 200 calls): "
          + ", ".join(f"{n} {statistics.median(v[i] for v in vals):.0f}" for i, n in enumerate(names)))

    spec = importlib.util.spec_from_file_location("build_native", ROOT / "scripts" / "build_native.py")
    bn = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bn)
    src = b.work / "store_probe.c"
    src.write_text(STORE_PROBE)
    exe = b.work / "bin" / "store_probe"
    r = subprocess.run(bn.serve_driver_command(src, exe), capture_output=True, text=True)
    if r.returncode != 0:
        print(f"  store probe did not build: {r.stderr.strip()[-300:]}")
        return
    nbytes = min(f["plain"].stat().st_size, 64 << 20)
    r = subprocess.run([str(exe), str(b.store), str(f["sd"]), str(f["plain"]), str(nbytes)], capture_output=True,
                       text=True)
    if r.returncode != 0:
        print(f"  store probe failed: {r.stderr.strip()[-300:]}")
        return
    rd, sz, raw = map(float, r.stdout.split())
    print(f"  store calls, one process, 64 KiB sequential, µs per call (best of 5): pxs_read {rd:.2f}, "
          f"pxs_size {sz:.2f}, raw pread of the plain file {raw:.2f}")


if __name__ == "__main__":
    main()
