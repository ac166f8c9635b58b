"""``pario run --procs N --store DIR (--system P | --testbed TB) [OPTIONS] PROGRAM [ARGS…]``: the full CEDA loop.

pario's options come before PROGRAM (as with ``mpiexec``); everything after PROGRAM is
passed to the program unchanged.

What a user would otherwise type by hand (examples/README.md), for any program that opens
its files with :class:`pario.mpi.File` (CEDA seed 000 §4.1, Fig. 6: profiling phase →
decision phase → replication → redirected run):

1. **run 1** — ``mpiexec -n N PROGRAM ARGS`` with ``PARIO_STORE=DIR``, ``PARIO_SYSTEM=P``
   and ``PARIO_TRACE=OUT/run1.parquet`` in the environment: ``pario.mpi.File.open`` takes
   them as the default ``pario_store`` / ``pario_system`` / ``pario_trace`` hints
   (:mod:`pario.mpi.hints`), so the program runs unchanged on the store and every rank's
   requests are recorded (``PARIO_SYSTEM`` lets the ranks load a plan made for a TOML
   profile: a plan records only the profile's name);
2. ``pario advise OUT/run1.parquet --system P --schemes S [--space SIZE] -o OUT/plan.json``;
3. ``pario replicate OUT/plan.json --store DIR [--space SIZE]``;
4. **run 2** — the same command with ``PARIO_PLAN=OUT/plan.json`` (and
   ``PARIO_TRACE=OUT/run2.parquet``): reads and writes are redirected by the store's RMT.

Other ``PARIO_*`` variables of the caller's environment (``PARIO_ORDER``, ``PARIO_LAYOUT``,
``PARIO_STORE_TIMEOUT``, …) reach every run alike; ``PARIO_HINTS`` is dropped (it could set
the hints pario run controls).

Then it prints both runs' times (below), how many of run 2's requests hit RMT entries (the
redirector sends those to replicas: seed 000 §4.6), and SHA-256 checksums of every file
the program touched, read through the store after run 1 and after run 2 (plus ``fsck``:
replicas equal to the originals).  Exit status 1 if the bytes differ.  The program must be
deterministic (same bytes in both runs).

``mpiexec`` is the one next to the Python interpreter (the ``mpich`` wheel puts it in the
venv's ``bin``), else the first on ``PATH``.  A ``.py`` program runs with this interpreter,
as ``python -m mpi4py PROGRAM`` (an uncaught exception in one rank aborts the job instead of
leaving the other ranks in a collective forever); ``--timeout`` kills the whole process
group of a run that hangs anyway.

On emulated storage (``--testbed DIR``, :mod:`pario.testbed`): the store's server
directories are put on the testbed's throttled servers (``DIR/NAME/pario-run-<hash>``, one
per server of the profile, which must be testbed servers), every ``mpiexec`` runs inside the
testbed's blkio cgroup (:func:`pario.testbed.enter`: the MPI processes inherit it), the
ranks open the store's data files with ``O_DIRECT`` (``PARIO_DIRECT=1``: the throttle sees
only I/O that bypasses the page cache; ``--direct`` alone does that without a testbed), and
``--system`` defaults to ``DIR/nominal.toml`` (a calibrated profile of the same servers works
too).  ``--prepare "ARGS"`` runs the program once with ARGS before run 1, on the store but
neither traced nor planned (e.g. to write the input of a read-only analysis).

Printed next to each other: the model's prediction (``pario advise``: ORIG, the original
layout, and the plan), the I/O time of each run from its trace (first request start → last
request end, the quantity the model prices), and the wall time of each ``mpiexec`` (MPI
start-up, imports and open/close included); on a testbed also the requests and bytes each
server's device served in each run (the cgroup's ``blkio.throttle.io_serviced`` /
``io_service_bytes``).  Replicas left in the store by an earlier run are dropped (flushed
first) before run 1, so that run 1 runs on the originals.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shlex
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
                    "prints the predicted and measured times of both runs and checks the files are "
                    "byte-identical.")
    p.add_argument("program", metavar="PROGRAM", help="the MPI program (.py runs with this Python)")
    p.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS",
                   help="the program's arguments (everything after PROGRAM; pario's options go before it)")
    p.add_argument("--procs", "-n", required=True, metavar="N", help="number of MPI processes")
    p.add_argument("--store", required=True, metavar="DIR", help="pario store (created for --system if missing)")
    p.add_argument("--system", default=None, metavar="P",
                   help="system profile (name or TOML); with --testbed default DIR/nominal.toml")
    p.add_argument("--space", type=size_arg, default=None, metavar="SIZE", help="replica space budget")
    p.add_argument("--schemes", default="ceda", metavar="LIST", help="schemes for pario advise (default ceda)")
    p.add_argument("--out", default=None, metavar="DIR", help="traces, plan and logs (default: ./pario-run)")
    p.add_argument("--timeout", type=float, default=None, metavar="S", help="kill a run after S seconds")
    p.add_argument("--mpiexec", default=None, metavar="PATH", help="mpiexec to use")
    p.add_argument("--testbed", default=None, metavar="DIR",
                   help="run on a pario testbed: store servers on its throttled servers, MPI ranks in its "
                        "cgroup, O_DIRECT (needs root)")
    p.add_argument("--direct", action="store_true",
                   help="ranks open the store's data files with O_DIRECT (PARIO_DIRECT=1; implied by --testbed)")
    p.add_argument("--prepare", default=None, metavar="ARGS",
                   help="run the program once with these arguments before run 1 (untraced, no plan), "
                        "e.g. to write the input of a read-only run (--prepare=ARGS when ARGS starts with -)")
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
    if path.suffix == ".py":
        # python -m mpi4py: an uncaught exception in one rank calls MPI_Abort instead of leaving
        # the other ranks waiting forever in a collective (the raising rank's MPI_Finalize blocks)
        import importlib.util

        runner = ["-m", "mpi4py"] if importlib.util.find_spec("mpi4py") is not None else []
        prog = [sys.executable, *runner, str(path.resolve())]
    else:
        prog = [str(path.resolve())]
    return [mpiexec, "-n", str(n), *prog, *args]


def _launch(cmd: list[str], env: dict, log: Path, timeout: float | None, label: str) -> tuple[float, str]:
    """Run ``cmd`` (mpiexec) in its own process group: on timeout the whole group (mpiexec,
    its proxies and the ranks) is killed, so that no rank is left behind."""
    import signal

    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=5)
                break
            except subprocess.TimeoutExpired:
                continue
        out, _ = proc.communicate()
        log.write_text(out or "")
        raise ParioError(f"{label} timed out after {timeout:g} s (output in {log})") from None
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    wall = time.perf_counter() - t0
    log.write_text(out)
    if proc.returncode != 0:
        tail = [l for l in out.strip().splitlines() if l.strip() and not _mpiexec_noise(l)][-1:] or ["(no output)"]
        raise ParioError(f"{label} failed (exit {proc.returncode}): {tail[0].strip()[:200]} (full output in {log})")
    return wall, out


_NOISE = ("BAD TERMINATION", "YOUR APPLICATION", "This typically", "Please see the FAQ", "PID ", "EXIT CODE",
          "CLEANING UP", "YOU CAN IGNORE", "Abort(")


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
    wr = trace.op == 1
    return {"requests": int(len(trace)), "hit_requests": int(hit.sum()),
            "hit_bytes": int(trace.length[hit].sum()), "bytes": int(trace.length.sum()),
            "hit_write_requests": int((hit & wr).sum())}


def _system_env(spec: str) -> str:
    """The --system value for the ranks' ``PARIO_SYSTEM`` (absolute when it is a file), so that a
    plan made for a TOML profile loads in the ranks (the plan records only the profile's name)."""
    p = Path(spec)
    return str(p.resolve()) if p.is_file() else spec


def _open_testbed(path: str):
    """The testbed at ``path``, checked to be up (cgroup and every server mounted)."""
    from ..testbed import load_state

    tb = load_state(path)
    if not tb.complete or not tb.cgroup or not os.path.isdir(tb.cgroup):
        raise ParioError(f"--testbed {path}: the testbed is not (completely) up; see 'pario testbed status {path}'")
    for s in tb.servers:
        if not (s.mount and os.path.ismount(s.mount)):
            raise ParioError(f"--testbed {path}: server {s.name} is not mounted; see 'pario testbed status {path}'")
    if os.geteuid() != 0:
        raise ParioError("--testbed needs root: the MPI processes join the testbed's blkio cgroup")
    return tb


def _testbed_servers(tb, system, store: Path) -> dict[str, str]:
    """Server name → directory on the testbed server of that name, for a new store."""
    mounts = {s.name: s.mount for s in tb.servers}
    missing = [n for n in system.names if n not in mounts]
    if missing:
        raise ParioError(f"system {system.name!r} has server {missing[0]!r}, which testbed {tb.dir} does not have "
                         f"(its servers: {', '.join(mounts)}); use --system {Path(tb.dir) / 'nominal.toml'} "
                         "or a profile calibrated on it")
    tag = "pario-run-" + hashlib.sha1(str(store).encode()).hexdigest()[:8]
    return {n: str(Path(mounts[n]) / tag) for n in system.names}


def _check_store_on_testbed(store: Path, tb) -> None:
    """An existing store used with --testbed must keep every server's data on that testbed server."""
    cfg = json.loads((store / "store.json").read_text())
    mounts = {s.name: Path(s.mount).resolve() for s in tb.servers}
    for name, d in (cfg.get("servers") or {}).items():
        p = Path(d) if Path(d).is_absolute() else store / d
        m = mounts.get(name)
        if m is None or not p.resolve().is_relative_to(m):
            raise ParioError(f"store {store}: server {name} keeps its data in {p}, not on testbed {tb.dir}; "
                             "use a new --store (it is created on the testbed)")


def device_stats(tb) -> dict[str, dict[str, int]] | None:
    """Per testbed server: requests and bytes its device served so far for the testbed's cgroup
    (cgroup v1 ``blkio.throttle.io_serviced`` / ``io_service_bytes``, v2 ``io.stat``)."""
    if tb is None or not tb.cgroup:
        return None
    by_dev = {s.majmin: s.name for s in tb.servers if s.majmin}
    out = {name: {"read_ios": 0, "write_ios": 0, "read_bytes": 0, "write_bytes": 0} for name in by_dev.values()}
    try:
        if tb.cgroup_version == 1:
            for fname, kind in (("blkio.throttle.io_serviced", "ios"), ("blkio.throttle.io_service_bytes", "bytes")):
                for line in Path(tb.cgroup, fname).read_text().splitlines():
                    parts = line.split()
                    if len(parts) == 3 and parts[0] in by_dev and parts[1] in ("Read", "Write"):
                        out[by_dev[parts[0]]][f"{parts[1].lower()}_{kind}"] += int(parts[2])
        else:
            keys = {"rios": "read_ios", "wios": "write_ios", "rbytes": "read_bytes", "wbytes": "write_bytes"}
            for line in Path(tb.cgroup, "io.stat").read_text().splitlines():
                parts = line.split()
                if parts and parts[0] in by_dev:
                    for kv in parts[1:]:
                        k, _, v = kv.partition("=")
                        if k in keys:
                            out[by_dev[parts[0]]][keys[k]] += int(v)
    except OSError:
        return None
    return out


def _stats_diff(after, before):
    if after is None or before is None:
        return None
    return {n: {k: after[n][k] - before[n][k] for k in after[n]} for n in after}


def io_span(trace) -> float | None:
    """Seconds from the first request's start to the last request's end (the traced I/O time)."""
    import numpy as np

    if trace is None or len(trace) == 0 or not trace.has_times:
        return None
    end = np.where(np.isnan(trace.end), trace.start, trace.end)
    return float(np.nanmax(end) - np.nanmin(trace.start))


def _drop_replicas(store: Path) -> list[str]:
    """Drop every replica in the store (dirty data flushed first): run 1 must use the originals."""
    from ..store import Store

    with Store(str(store)) as st:
        names = sorted({r["r_file"] for r in st.rmt.replicas()})
        for r_file in names:
            st.delete_replica(r_file)
    return names


_OWN_ENV = ("PARIO_STORE", "PARIO_PLAN", "PARIO_TRACE", "PARIO_SYSTEM", "PARIO_DIRECT", "PARIO_HINTS")


def _run(args) -> int:
    from ..store import init_store
    from ..system import load_system
    from ..trace import load as load_trace
    from . import main as cli_main

    load0 = os.getloadavg()
    n = _procs(args.procs)
    mpiexec = find_mpiexec(args.mpiexec)
    tb = _open_testbed(args.testbed) if args.testbed else None
    if args.system is None:
        if tb is None:
            raise ParioError("--system is required (or --testbed DIR, whose nominal.toml is the default profile)")
        args.system = str(Path(tb.dir) / "nominal.toml")
    system = load_system(args.system)
    direct = bool(args.direct or tb is not None)
    store = Path(args.store).resolve()
    if store.exists() and not (store / "store.json").exists():
        raise ParioError(f"--store {args.store}: exists but is not a pario store")
    prog_args = list(args.args)
    if prog_args[:1] == ["--"]:
        prog_args = prog_args[1:]
    cmd = _command(mpiexec, n, args.program, prog_args)
    prep_cmd = None
    if args.prepare is not None:
        try:
            prep_cmd = _command(mpiexec, n, args.program, shlex.split(args.prepare))
        except ValueError as exc:
            raise ParioError(f"--prepare {args.prepare!r}: {exc}") from None
    if store.exists():
        cfg = json.loads((store / "store.json").read_text())
        if cfg.get("system") != system.name:
            raise ParioError(f"store {args.store} is for system {cfg.get('system')!r}, not {system.name!r}")
        if tb is not None:
            _check_store_on_testbed(store, tb)
    servers = _testbed_servers(tb, system, store) if tb is not None else None
    out = Path(args.out or "pario-run").resolve()
    out.mkdir(parents=True, exist_ok=True)
    if not store.exists():
        init_store(store, system, servers)
    t1, t2, plan = out / "run1.parquet", out / "run2.parquet", out / "plan.json"
    for p in (t1, t2, plan):
        p.unlink(missing_ok=True)
    # the variables pario run sets per run are its own; others (PARIO_ORDER, PARIO_STORE_TIMEOUT,
    # PARIO_DEBUG, …) apply to every run alike
    base = {k: v for k, v in os.environ.items() if k not in _OWN_ENV}
    base.update({"PARIO_STORE": str(store), "PARIO_SYSTEM": _system_env(args.system)})
    if direct:
        base["PARIO_DIRECT"] = "1"
    quiet = bool(args.json)

    def say(msg: str, **kw) -> None:
        if not quiet:
            console.print(msg, soft_wrap=True, **kw)

    def launch(c, env, log, label):
        """One mpiexec (inside the testbed's cgroup with --testbed): wall time, output, device I/O."""
        if tb is None:
            wall, text = _launch(c, env, log, args.timeout, label)
            return wall, text, None
        from ..testbed import enter

        with enter(tb):
            before = device_stats(tb)
            wall, text = _launch(c, env, log, args.timeout, label)
            after = device_stats(tb)
        return wall, text, _stats_diff(after, before)

    dropped = _drop_replicas(store)
    if dropped:
        say(f"dropped {len(dropped)} replica(s) left in the store by an earlier run (run 1 uses the originals)")
    where = f" on testbed {tb.dir} (O_DIRECT, ranks in cgroup {os.path.basename(tb.cgroup)})" if tb is not None \
        else (" (O_DIRECT)" if direct else "")
    shown = escape(" ".join(cmd))
    wall0 = None
    if prep_cmd is not None:
        say(f"[bold]prepare[/bold] (not traced){escape(where)}: {escape(' '.join(prep_cmd))}")
        wall0, log0, _ = launch(prep_cmd, dict(base), out / "prepare.log", "the prepare run")
        _echo(say, log0)
        say(f"  wall time {wall0:.3f} s")
        if direct:
            os.sync()

    say(f"[bold]run 1[/bold] (traced){escape(where)}: {shown}")
    wall1, log1, dev1 = launch(cmd, {**base, "PARIO_TRACE": str(t1)}, out / "run1.log", "run 1")
    if not t1.exists():
        raise ParioError("run 1 recorded no trace: does the program open its files with pario.mpi.File?")
    trace1 = load_trace(t1)
    d1 = _digests(str(store), trace1.files)
    _echo(say, log1)
    say(f"  wall time {wall1:.3f} s, {len(trace1)} requests traced → {t1}")

    # collective calls are planned as the aggregators' requests; every rank runs on this
    # machine, i.e. one node, so pario.mpi picks one aggregator (ROMIO's cb_nodes default)
    adv = ["advise", str(t1), "--system", args.system, "--schemes", args.schemes, "-o", str(plan), "--cb-nodes", "1"]
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
    if direct:
        os.sync()   # the replicator writes through the page cache: to the devices now, outside the cgroup

    say(f"[bold]run 2[/bold] (plan {plan.name}){escape(where)}: {shown}")
    wall2, log2, dev2 = launch(cmd, {**base, "PARIO_PLAN": str(plan), "PARIO_TRACE": str(t2)}, out / "run2.log", "run 2")
    _echo(say, log2)
    trace2 = load_trace(t2) if t2.exists() else None
    hits = rmt_hits(str(store), trace2) if trace2 is not None else {"requests": 0, "hit_requests": 0,
                                                                    "hit_bytes": 0, "bytes": 0,
                                                                    "hit_write_requests": 0}
    names = list(dict.fromkeys([*trace1.files, *(trace2.files if trace2 is not None else ())]))
    d2 = _digests(str(store), names)
    from ..store import Store
    from ..store.fsck import fsck

    with Store(str(store)) as st:
        ok_fsck = bool(fsck(st)["ok"])
    same = d1 == {k: v for k, v in d2.items() if k in d1} and set(d1) <= set(d2)
    io1, io2 = io_span(trace1), io_span(trace2)
    base_s = plan_d.get("baselines") or {}
    pred = {"scheme": plan_d.get("scheme"), "system": system.name,
            "ORIG": base_s.get("ORIG"), "plan": plan_d.get("predicted_s")}
    pred["ratio"] = (pred["ORIG"] / pred["plan"]) if pred["ORIG"] and pred["plan"] else None
    load1 = os.getloadavg()
    summary = {"procs": n, "command": cmd, "store": str(store), "out": str(out),
               "testbed": tb.dir if tb is not None else None, "direct": direct,
               "prepare_s": wall0,
               "run1_s": wall1, "run2_s": wall2, "speedup": wall1 / wall2 if wall2 > 0 else None,
               "io_s": {"run1": io1, "run2": io2, "ratio": (io1 / io2) if io1 and io2 else None},
               "predicted": pred,
               "devices": {"run1": dev1, "run2": dev2} if tb is not None else None,
               "replicas_planned": n_rep, "redirected": hits, "files": d2, "files_run1": d1, "identical": same,
               "fsck_ok": ok_fsck, "plan": str(plan), "traces": [str(t1), str(t2)],
               "dropped_replicas": dropped, "collective_requests_run1": int(trace1.collective.sum()),
               "loadavg": {"start": list(load0), "end": list(load1)}}
    if args.json:
        print_json(summary)
    else:
        _report(summary)
    return 0 if same and ok_fsck else 1


def _fmt(v, unit=" s", digits=3) -> str:
    return "–" if v is None else f"{v:.{digits}f}{unit}"


def _report(s: dict) -> None:
    from rich.table import Table

    pr, io = s["predicted"], s["io_s"]
    t = Table(title=f"run 1 (original layout) vs run 2 (plan {pr['scheme']}), {s['procs']} processes")
    t.add_column("")
    t.add_column("run 1", justify="right")
    t.add_column("run 2", justify="right")
    t.add_column("run 1 / run 2", justify="right")
    t.add_row(f"predicted I/O time (pario advise, {escape(str(pr['system']))}: ORIG / plan)", _fmt(pr["ORIG"]),
              _fmt(pr["plan"]), _fmt(pr["ratio"], "", 2))
    t.add_row("measured I/O time (trace: first request → last request)", _fmt(io["run1"]), _fmt(io["run2"]),
              _fmt(io["ratio"], "", 2))
    t.add_row("wall time (mpiexec: start-up, imports, open, close included)", _fmt(s["run1_s"]), _fmt(s["run2_s"]),
              _fmt(s["speedup"], "", 2))
    if s["devices"]:
        for key, label in (("ios", "device requests (testbed cgroup)"), ("bytes", "device MiB (testbed cgroup)")):
            vals = []
            for run in ("run1", "run2"):
                d = s["devices"][run]
                vals.append(None if d is None else sum(v[f"read_{key}"] + v[f"write_{key}"] for v in d.values()))
            div = 1 if key == "ios" else 1 << 20
            t.add_row(label, *("–" if v is None else f"{v / div:.0f}" for v in vals),
                      "–" if None in vals or not vals[1] else f"{vals[0] / vals[1]:.2f}")
    console.print(t)
    if s["devices"] and s["devices"]["run1"] is not None and s["devices"]["run2"] is not None:
        per = "  ".join(f"{name} {s['devices']['run1'][name]['read_ios'] + s['devices']['run1'][name]['write_ios']}"
                        f"/{s['devices']['run2'][name]['read_ios'] + s['devices']['run2'][name]['write_ios']}"
                        for name in s["devices"]["run1"])
        console.print(f"device requests per server (run 1/run 2): {per}")
    if s["replicas_planned"] == 0:
        console.print("plan has no replicas: run 2 was not redirected (the model found no benefit)")
    if s["collective_requests_run1"]:
        console.print(f"note: {s['collective_requests_run1']} of run 1's requests were collective; pario advise "
                      "planned them as the aggregator's two-phase requests (what the servers see), and the RMT "
                      "hits below count the ranks' requests, not the aggregator's")
    if s["redirected"].get("hit_write_requests"):
        console.print(f"note: {s['redirected']['hit_write_requests']} of run 2's writes went to replicas (dirty); "
                      "they are copied to the original at close (CEDA §5.3): in the wall time, not in the traced "
                      "I/O time")
    h = s["redirected"]
    console.print(f"run 2 requests through replicas (RMT hits): {h['hit_requests']} of {h['requests']} "
                  f"({h['hit_bytes']} of {h['bytes']} bytes)")
    for name, dg in s["files"].items():
        same = s["files_run1"].get(name) == dg
        console.print(f"  {name}: sha256 {dg[:16]}…  {'same as run 1' if same else 'DIFFERENT'}")
    console.print(f"identical bytes: {'yes' if s['identical'] else 'NO'}; store fsck: "
                  f"{'clean' if s['fsck_ok'] else 'PROBLEMS'}")
    la = s["loadavg"]
    console.print(f"load average (1/5/15 min) at start {la['start'][0]:.2f}/{la['start'][1]:.2f}/{la['start'][2]:.2f}, "
                  f"at end {la['end'][0]:.2f}/{la['end'][1]:.2f}/{la['end'][2]:.2f}")


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
