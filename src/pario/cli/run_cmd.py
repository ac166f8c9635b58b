"""``pario run --procs N --store DIR --system P [OPTIONS] PROGRAM [ARGS…]``: the full CEDA loop on an MPI program.

pario's options come before PROGRAM (as with ``mpiexec``); everything after PROGRAM is
passed to the program unchanged.

What a user would otherwise type by hand (examples/README.md), for any program that opens
its files with :class:`pario.mpi.File` (CEDA seed 000 §4.1, Fig. 6: profiling phase →
decision phase → replication → redirected run):

1. **run 1** — ``mpiexec -n N PROGRAM ARGS`` with ``PARIO_STORE=DIR`` and
   ``PARIO_TRACE=OUT/run1.parquet`` in the environment: ``pario.mpi.File.open`` takes them
   as the default ``pario_store`` / ``pario_trace`` hints (:mod:`pario.mpi.hints`), so the
   program runs unchanged on the store and every rank's requests are recorded;
2. ``pario advise OUT/run1.parquet --system P --schemes S [--space SIZE] -o OUT/plan.json``;
3. ``pario replicate OUT/plan.json --store DIR [--space SIZE]``;
4. **run 2** — the same command with ``PARIO_PLAN=OUT/plan.json`` (and
   ``PARIO_TRACE=OUT/run2.parquet``): reads and writes are redirected by the store's RMT.

Then it prints both runs' wall times, how many of run 2's requests hit RMT entries (the
redirector sends those to replicas: seed 000 §4.6), and SHA-256 checksums of every file
the program touched, read through the store after run 1 and after run 2 (plus ``fsck``:
replicas equal to the originals).  Exit status 1 if the bytes differ.  The program must be
deterministic (same bytes in both runs).

``mpiexec`` is the one next to the Python interpreter (the ``mpich`` wheel puts it in the
venv's ``bin``), else the first on ``PATH``.  A ``.py`` program runs with this interpreter.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from .. import ParioError
from rich.markup import escape

from .common import console, print_json, size_arg


def register(sub) -> None:
    p = sub.add_parser(
        "run", help="run an MPI program twice around advise + replicate (traced, then redirected)",
        description="Run 1 traced on the store, pario advise, pario replicate, run 2 with the plan; "
                    "prints both wall times and checks the files are byte-identical.")
    p.add_argument("program", metavar="PROGRAM", help="the MPI program (.py runs with this Python)")
    p.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS",
                   help="the program's arguments (everything after PROGRAM; pario's options go before it)")
    p.add_argument("--procs", "-n", required=True, metavar="N", help="number of MPI processes")
    p.add_argument("--store", required=True, metavar="DIR", help="pario store (created for --system if missing)")
    p.add_argument("--system", required=True, metavar="P", help="system profile (name or TOML)")
    p.add_argument("--space", type=size_arg, default=None, metavar="SIZE", help="replica space budget")
    p.add_argument("--schemes", default="ceda", metavar="LIST", help="schemes for pario advise (default ceda)")
    p.add_argument("--out", default=None, metavar="DIR", help="traces, plan and logs (default: ./pario-run)")
    p.add_argument("--timeout", type=float, default=None, metavar="S", help="kill a run after S seconds")
    p.add_argument("--mpiexec", default=None, metavar="PATH", help="mpiexec to use")
    p.add_argument("--json", action="store_true", help="print a JSON summary")
    p.set_defaults(func=_run)


def find_mpiexec(explicit: str | None = None) -> str:
    if explicit:
        if not (Path(explicit).is_file() and os.access(explicit, os.X_OK)):
            raise ParioError(f"--mpiexec {explicit}: not an executable file")
        return explicit
    cand = Path(sys.executable).parent / "mpiexec"
    if cand.exists():
        return str(cand)
    found = shutil.which("mpiexec")
    if found is None:
        raise ParioError("mpiexec not found (pip install mpich mpi4py, or pass --mpiexec)")
    return found


def _procs(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise ParioError(f"--procs {text!r}: not an integer") from None
    if n < 1:
        raise ParioError(f"--procs {n}: need at least 1 process")
    return n


def _command(mpiexec: str, n: int, program: str, args: list[str]) -> list[str]:
    path = Path(program)
    if not path.exists():
        found = shutil.which(program)
        if found is None:
            raise ParioError(f"program {program!r} not found")
        path = Path(found)
    elif path.is_dir():
        raise ParioError(f"program {program!r} is a directory")
    prog = [sys.executable, str(path.resolve())] if path.suffix == ".py" else [str(path.resolve())]
    return [mpiexec, "-n", str(n), *prog, *args]


def _launch(cmd: list[str], env: dict, log: Path, timeout: float | None, label: str) -> tuple[float, str]:
    t0 = time.perf_counter()
    try:
        cp = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout or ""
        log.write_text(out if isinstance(out, str) else out.decode(errors="replace"))
        raise ParioError(f"{label} timed out after {timeout:g} s (output in {log})") from None
    wall = time.perf_counter() - t0
    log.write_text(cp.stdout)
    if cp.returncode != 0:
        tail = [l for l in cp.stdout.strip().splitlines() if l.strip() and not _mpiexec_noise(l)][-1:] or ["(no output)"]
        raise ParioError(f"{label} failed (exit {cp.returncode}): {tail[0].strip()[:200]} (full output in {log})")
    return wall, cp.stdout


_NOISE = ("BAD TERMINATION", "YOUR APPLICATION", "This typically", "Please see the FAQ", "PID ", "EXIT CODE",
          "CLEANING UP", "YOU CAN IGNORE")


def _mpiexec_noise(line: str) -> bool:
    """mpiexec's (hydra's) banner lines around a failed run."""
    t = line.strip()
    return t.startswith("=") and (set(t) == {"="} or any(k in t for k in _NOISE)) or any(t.startswith(k) for k in _NOISE)


def _digests(store_dir: str, names) -> dict[str, str]:
    """SHA-256 of each file as a reader sees it through the store (redirector included)."""
    from ..store import Store

    out = {}
    with Store(store_dir) as st:
        for name in names:
            if not st.exists(name):
                continue
            h = hashlib.sha256()
            with st.open(name) as f:
                size, pos = int(f.size), 0
                while pos < size:
                    chunk = f.read(pos, min(8 << 20, size - pos))
                    if not chunk:
                        break
                    h.update(chunk)
                    pos += len(chunk)
            out[name] = h.hexdigest()
    return out


def rmt_hits(store_dir: str, trace) -> dict:
    """Requests (and bytes) of ``trace`` that overlap an RMT entry of their file: the ones the
    redirector serves through replicas (seed 000 §4.6)."""
    import numpy as np

    from ..store import Store

    hit = np.zeros(len(trace), dtype=bool)
    with Store(store_dir) as st:
        for fi, name in enumerate(trace.files):
            sel = np.flatnonzero(trace.file == fi)
            if len(sel) == 0:
                continue
            ent = st.rmt.entries(name)
            x = trace.offset[sel]
            hit[sel] = ent.hits_many(x, x + trace.length[sel])
    return {"requests": int(len(trace)), "hit_requests": int(hit.sum()),
            "hit_bytes": int(trace.length[hit].sum()), "bytes": int(trace.length.sum())}


def _run(args) -> int:
    from ..store import init_store
    from ..system import load_system
    from ..trace import load as load_trace
    from . import main as cli_main

    n = _procs(args.procs)
    mpiexec = find_mpiexec(args.mpiexec)
    system = load_system(args.system)
    store = Path(args.store).resolve()
    if store.exists() and not (store / "store.json").exists():
        raise ParioError(f"--store {args.store}: exists but is not a pario store")
    prog_args = list(args.args)
    if prog_args[:1] == ["--"]:
        prog_args = prog_args[1:]
    cmd = _command(mpiexec, n, args.program, prog_args)
    out = Path(args.out or "pario-run").resolve()
    out.mkdir(parents=True, exist_ok=True)
    if not store.exists():
        init_store(store, system)
    else:
        cfg = json.loads((store / "store.json").read_text())
        if cfg.get("system") != system.name:
            raise ParioError(f"store {args.store} is for system {cfg.get('system')!r}, not {system.name!r}")
    t1, t2, plan = out / "run1.parquet", out / "run2.parquet", out / "plan.json"
    for p in (t1, t2, plan):
        p.unlink(missing_ok=True)
    base = {k: v for k, v in os.environ.items() if not k.startswith("PARIO_") or k == "PARIO_DEBUG"}
    quiet = bool(args.json)

    def say(msg: str, **kw) -> None:
        if not quiet:
            console.print(msg, soft_wrap=True, **kw)

    shown = escape(" ".join(cmd))

    say(f"[bold]run 1[/bold] (traced): {shown}")
    wall1, log1 = _launch(cmd, {**base, "PARIO_STORE": str(store), "PARIO_TRACE": str(t1)}, out / "run1.log",
                    args.timeout, "run 1")
    if not t1.exists():
        raise ParioError("run 1 recorded no trace: does the program open its files with pario.mpi.File?")
    trace1 = load_trace(t1)
    d1 = _digests(str(store), trace1.files)
    _echo(say, log1)
    say(f"  wall time {wall1:.3f} s, {len(trace1)} requests traced → {t1}")

    adv = ["advise", str(t1), "--system", args.system, "--schemes", args.schemes, "-o", str(plan)]
    rep = ["replicate", str(plan), "--store", str(store)]
    if args.space is not None:
        adv += ["--space", str(args.space)]
        rep += ["--space", str(args.space)]
    if args.json:
        adv.append("--json")
        rep.append("--json")
    say(f"[bold]pario {escape(' '.join(adv))}[/bold]")
    _quiet(args.json, lambda: _check_rc(cli_main(adv), "pario advise"))
    plan_d = json.loads(plan.read_text())
    n_rep = sum(len(v) for v in (plan_d.get("replicas") or {}).values())
    say(f"[bold]pario {escape(' '.join(rep))}[/bold]")
    _quiet(args.json, lambda: _check_rc(cli_main(rep), "pario replicate"))

    say(f"[bold]run 2[/bold] (plan {plan.name}): {shown}")
    wall2, log2 = _launch(cmd, {**base, "PARIO_STORE": str(store), "PARIO_PLAN": str(plan), "PARIO_TRACE": str(t2)},
                    out / "run2.log", args.timeout, "run 2")
    _echo(say, log2)
    trace2 = load_trace(t2) if t2.exists() else None
    hits = rmt_hits(str(store), trace2) if trace2 is not None else {"requests": 0, "hit_requests": 0,
                                                                    "hit_bytes": 0, "bytes": 0}
    names = list(dict.fromkeys([*trace1.files, *(trace2.files if trace2 is not None else ())]))
    d2 = _digests(str(store), names)
    from ..store import Store
    from ..store.fsck import fsck

    with Store(str(store)) as st:
        ok_fsck = bool(fsck(st)["ok"])
    same = d1 == {k: v for k, v in d2.items() if k in d1} and set(d1) <= set(d2)
    summary = {"procs": n, "command": cmd, "store": str(store), "out": str(out),
               "run1_s": wall1, "run2_s": wall2, "speedup": wall1 / wall2 if wall2 > 0 else None,
               "replicas_planned": n_rep, "redirected": hits, "files": d2, "identical": same,
               "fsck_ok": ok_fsck, "plan": str(plan), "traces": [str(t1), str(t2)]}
    if args.json:
        print_json(summary)
    else:
        console.print(f"[bold]run 1[/bold] {wall1:8.3f} s   [bold]run 2[/bold] {wall2:8.3f} s   "
                      f"(run 1 / run 2 = {summary['speedup']:.2f}; wall times include MPI start-up)")
        if n_rep == 0:
            console.print("plan has no replicas: run 2 was not redirected (the model found no benefit)")
        console.print(f"run 2 requests through replicas (RMT hits): {hits['hit_requests']} of {hits['requests']} "
                      f"({hits['hit_bytes']} of {hits['bytes']} bytes)")
        for name, dg in d2.items():
            console.print(f"  {name}: sha256 {dg[:16]}…  {'same as run 1' if d1.get(name) == dg else 'DIFFERENT'}")
        console.print(f"identical bytes: {'yes' if same else 'NO'}; store fsck: {'clean' if ok_fsck else 'PROBLEMS'}")
    return 0 if same and ok_fsck else 1


def _echo(say, text: str, limit: int = 20) -> None:
    """The program's last output lines, indented."""
    for line in text.rstrip().splitlines()[-limit:]:
        say(f"  | {line}", markup=False, highlight=False)


def _check_rc(rc: int, what: str) -> None:
    if rc != 0:
        raise ParioError(f"{what} failed (exit {rc})")


def _quiet(enabled: bool, fn) -> None:
    """Run ``fn`` with stdout sent to stderr (keeps ``--json`` output one JSON document)."""
    if not enabled:
        fn()
        return
    import contextlib

    with contextlib.redirect_stdout(sys.stderr):
        fn()
