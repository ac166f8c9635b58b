"""The full CEDA loop on an MPI program (CEDA seed 000 §4.1, Fig. 6: profiling phase →
decision phase → replication → redirected run): :func:`run_loop`, the work behind
``pario run``.

What a user would otherwise type by hand (``examples/README.md``), for any program that
opens its files with :class:`pario.mpi.File`:

1. **run 1** — ``mpiexec -n N PROGRAM ARGS`` with ``PARIO_STORE=DIR``, ``PARIO_SYSTEM=P``
   and ``PARIO_TRACE=OUT/run1.parquet`` in the environment: ``pario.mpi.File.open`` takes
   them as the default ``pario_store`` / ``pario_system`` / ``pario_trace`` hints
   (:mod:`pario.mpi.hints`), so the program runs unchanged on the store and every rank's
   requests are recorded (``PARIO_SYSTEM`` lets the ranks load a plan made for a TOML
   profile: a plan records only the profile's name);
2. ``pario advise OUT/run1.parquet --system P --schemes S --cb-nodes 1 [--space SIZE]
   [--by order] -o OUT/plan.json`` — the command itself (:func:`pario.cli.main`), so the plan
   file and its printed tables are exactly what a user typing it gets.  ``--by order`` when the
   ranks' I/O went through the page cache (no ``--direct``, no ``--testbed``, a store on
   directories): its requests took microseconds, so which of them overlapped in time says
   nothing of the concurrency the modelled servers would see (the same IOR trace priced 0.053 s
   by its µs overlaps and 0.44 s in lock-step); the plan then batches the papers' way, every
   rank's k-th request together (:mod:`pario.model.batches`), and both runs are priced so;
3. ``pario replicate OUT/plan.json --store DIR [--space SIZE]`` — likewise (when the plan
   names layouts for files, in two steps timed apart: ``--layouts-only``, the relayout,
   then ``--no-layouts``, the replicas);
4. **run 2** — the same command with ``PARIO_PLAN=OUT/plan.json`` (and
   ``PARIO_TRACE=OUT/run2.parquet``): reads and writes are redirected by the store's RMT.

Other ``PARIO_*`` variables of the caller's environment (``PARIO_ORDER``, ``PARIO_LAYOUT``,
``PARIO_STORE_TIMEOUT``, …) reach every run alike; ``PARIO_HINTS`` is dropped (it could set
the hints the loop controls).  Replicas left in the store by an earlier run are dropped
(flushed first) before run 1, so that run 1 runs on the originals.  ``prepare`` runs the
program once with other arguments before run 1, on the store but neither traced nor
planned (e.g. to write the input of a read-only analysis).

On emulated storage (``testbed=DIR``, :mod:`pario.run.devices`): the store's server
directories are put on the testbed's throttled servers, every ``mpiexec`` runs inside the
testbed's blkio cgroup (:func:`pario.testbed.enter`: the MPI processes inherit it), the
ranks open the store's data files with ``O_DIRECT`` (``PARIO_DIRECT=1``: the throttle sees
only I/O that bypasses the page cache; ``direct=True`` alone does that without a testbed),
the profile defaults to ``DIR/nominal.toml``, and the setup steps (relayout, replication)
run inside the cgroup too, copying with ``O_DIRECT`` (``pario replicate --direct``): their
copies pay the servers' throttles, as the runs' requests do (before, outside the cgroup and
through the page cache, 64 MiB copied in 0.08–0.33 s, far below what the devices allow).

Measured afterwards (:mod:`pario.run.measure`): each run's wall time and traced I/O time,
run 2's RMT hits, each request's latency in both runs, the program's printed phase times,
SHA-256 of every file the program touched (read through the store after run 1 and after
run 2) and ``fsck``; on a testbed each server's device requests and bytes per run.  Then
:func:`pario.run.predict.predict` prices both runs (the plan as run 2 runs it: layouts,
replicas, collective order, the trace's two-phase hints) and
:func:`pario.run.compare.judge` puts the prediction next to the measurement and gives the
verdict with its measured reasons.  Every step is timed (:class:`Steps`: the summary's
``steps``).  A program that opens its files with ``pario.mpi.File``
must be deterministic (the same bytes in both runs, compared by SHA-256).  An unmodified
program's files are compared with the program's own without pario
(:func:`_plain_reference`, :mod:`pario.run.variation`): when a SHA-256 differs, a second run
without pario tells the bytes that vary from run to run (HDF5's modification times), and the
files are judged byte for byte outside them.

The whole job (:mod:`pario.run.whole_job`): pario's own costs — the steps ``advise``,
``relayout`` and ``replicate``, the flush of dirty replica bytes at the program's end that
every rank reports to ``PARIO_SERVE_STATS`` (``OUT/runN.serve.jsonl``:
:func:`pario.run.measure.flush_stats`), the trace overhead against the run without pario of
an unmodified program — beside run 1 / (setup + run 2) and the break-even runs, measured and
predicted (the setup as ``pario advise`` prices it: :func:`pario.plan.setup_cost.plan_setup`
on the store's files after run 1).  ``fresh``: the store's files are deleted before
anything runs (:func:`pario.store.gc.empty_store`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import time
from pathlib import Path

import numpy as np

from .. import ParioError
from ..native import build_hint
from ..store.planes import PLANES
from ..store.root import read_config
from . import compare, devices, measure, variation, whole_job
from .launch import find_mpiexec, launch, mpi_command, parse_procs
from .predict import order_hint, predict

OWN_ENV = ("PARIO_STORE", "PARIO_PLAN", "PARIO_TRACE", "PARIO_SYSTEM", "PARIO_DIRECT", "PARIO_HINTS",
           "PARIO_SERVE_STATS")


def _store_profile(store: Path, outdir: Path) -> Path:
    """The profile an existing store was made for, as ``OUT/store-profile.toml`` (the loop's
    ``advise --system`` and the ranks' ``PARIO_SYSTEM`` load it)."""
    from ..system import System

    cfg = read_config(store)
    outdir.mkdir(parents=True, exist_ok=True)
    p = outdir / "store-profile.toml"
    p.write_text(System.from_dict(cfg["profile"], origin=str(store)).to_toml())
    return p


def system_env(spec: str) -> str:
    """The profile for the ranks' ``PARIO_SYSTEM`` (absolute when it is a file), so that a
    plan made for a TOML profile loads in the ranks (the plan records only the profile's name)."""
    p = Path(spec)
    return str(p.resolve()) if p.is_file() else spec


def drop_replicas(store: Path) -> list[str]:
    """Drop every replica in the store (dirty data flushed first): run 1 must use the originals."""
    from ..store import Store

    with Store(str(store)) as st:
        names = sorted({r["r_file"] for r in st.rmt.replicas()})
        for r_file in names:
            st.delete_replica(r_file)
    return names


def _tool(argv: list[str], what: str, stdout) -> None:
    """``pario ARGV`` (the command itself), its output to ``stdout`` (None: this process's)."""
    from ..cli import main as cli_main

    with contextlib.redirect_stdout(stdout) if stdout is not None else contextlib.nullcontext():
        rc = cli_main(argv)
    if rc != 0:
        raise ParioError(f"{what} failed (exit {rc})")


def _nothing(kind: str, text: str) -> None:
    return None


class Steps:
    """The loop's steps as they happen, for ``pario run --json``'s ``steps``: each one
    ``{"name", "start", "seconds", "compile_s"}`` — its start in seconds since the run began, how
    long it took (until the next step starts, or the run ends) and how much of that numba spent
    compiling pario's kernels (:class:`pario.jit.CompileClock`; once per installation).  :meth:`start` also tells
    ``progress`` (kind ``"step"``) when given a text."""

    def __init__(self, say=_nothing, clock=None):
        self.t0 = time.perf_counter()
        self.rows: list[dict] = []
        self.say = say
        self.clock = clock      # a pario.jit.CompileClock: each step's compile_s (None: not measured)
        self._c0 = 0.0

    def _compiled(self) -> float | None:
        return None if self.clock is None else self.clock.seconds

    def _close(self, now: float) -> None:
        if self.rows and self.rows[-1]["seconds"] is None:
            self.rows[-1]["seconds"] = max(0.0, now - self.t0 - self.rows[-1]["start"])
            c = self._compiled()
            self.rows[-1]["compile_s"] = None if c is None else c - self._c0

    def start(self, name: str, text: str | None = None) -> None:
        now = time.perf_counter()
        self._close(now)
        self._c0 = self._compiled() or 0.0
        self.rows.append({"name": name, "start": now - self.t0, "seconds": None, "compile_s": None})
        if text is not None:
            self.say("step", text)

    def finish(self) -> list[dict]:
        """Close the last step; the steps in order."""
        self._close(time.perf_counter())
        return [dict(r) for r in self.rows]


def run_loop(program: str, args: list[str] | tuple[str, ...] = (), **options) -> dict:
    """Run the loop of the module docstring and return its summary (``pario run --json``);
    ``options``: :func:`_run_loop`'s.  numba's compiles of pario's kernels are timed while it
    runs (:class:`pario.jit.CompileClock`): each step's ``compile_s``."""
    from ..jit import CompileClock

    with CompileClock() as clock:
        return _run_loop(program, args, clock=clock, **options)


def _run_loop(program: str, args: list[str] | tuple[str, ...] = (), *, clock=None, procs, store,
             system: str | None = None,
             testbed: str | None = None, direct: bool = False, space: int | None = None, schemes: str = "ceda",
             out: str | None = None, timeout: float | None = None, mpiexec: str | None = None,
             prepare: str | None = None, repeat: int = 1, progress=None, tool_stdout=None,
             paper_benefit: bool = False, place: list[str] | tuple = (), coord: str = "host",
             fresh: bool = False) -> dict:
    """The loop of :func:`run_loop`.  ``clock``: the compile clock of the steps.

    ``procs``: number of MPI processes (int or text); ``store``: the store directory (created
    for the profile when missing); ``system``: profile name or TOML (default
    ``TESTBED/nominal.toml`` with ``testbed``); ``prepare``: the program's arguments for an
    untraced run before run 1 (one shell-quoted string); ``out``: traces, plan and logs
    (default ``./pario-run``); ``repeat``: run 1 and run 2 each that many times (every run 1
    before the plan, every run 2 after it; each traced, each checked byte for byte) and report
    the medians of their I/O and wall times — the traced I/O of a short program on a busy
    machine varies by more than the difference the plan makes.  ``progress(kind, text)`` is
    told what happens as it happens
    (``kind`` = ``"step"``: a step starts; ``"output"``: a line the program printed;
    ``"info"``: a measurement); ``tool_stdout``: where ``pario advise`` / ``pario replicate``
    print (None: this process's stdout); ``paper_benefit``: ``pario advise --paper-benefit``
    (CEDA's benefit test without the copy back of dirty bytes); ``place``: mpiexec's options
    placing the ranks on nodes (:func:`pario.run.launch.placement`); ``coord``: the
    coordination of a store made here (``pfs`` for ranks on several nodes; docs/multinode.md);
    ``fresh``: an existing store is emptied first (every file deleted with its replicas:
    :func:`pario.store.gc.empty_store`), so that no layout an earlier plan gave a file stays.
    Every input is checked before anything is written;
    a bad input or a failed step raises :class:`pario.ParioError`.
    """
    from ..store import Store, init_store
    from ..store.fsck import fsck
    from ..store.locks import check_coord
    from ..system import load_system
    from ..trace import load as load_trace

    say = progress or _nothing
    steps = Steps(say, clock)
    steps.start("setup")    # inputs checked, the store made or checked, replicas of an earlier run dropped
    load0 = os.getloadavg()
    n = parse_procs(procs)
    check_coord(coord)     # the store made here is on the local plane
    try:
        repeat = int(repeat)
    except (TypeError, ValueError):
        raise ParioError(f"--repeat {repeat!r}: not an integer") from None
    if not 1 <= repeat <= 100:
        raise ParioError(f"--repeat {repeat}: give 1 to 100 runs")
    mpiexec = find_mpiexec(mpiexec)
    tb = devices.open_testbed(testbed) if testbed else None
    if system is None and tb is None and (Path(store) / "store.json").is_file():
        system = str(_store_profile(Path(store), Path(out or "pario-run").resolve()))
    if system is None:
        if tb is None:
            raise ParioError("--system is required (or --testbed DIR, whose nominal.toml is the default profile, "
                             "or an existing --store, whose profile is)")
        system = str(Path(tb.dir) / "nominal.toml")
    prof = load_system(system)
    direct = bool(direct or tb is not None)
    store_arg, store = str(store), Path(store).resolve()
    if store.exists() and not (store / "store.json").exists():
        raise ParioError(f"--store {store_arg}: exists but is not a pario store")
    prog_args = list(args)
    if prog_args[:1] == ["--"]:
        prog_args = prog_args[1:]
    cmd = mpi_command(mpiexec, n, program, prog_args, place)
    prep_cmd = None
    if prepare is not None:
        try:
            prep_cmd = mpi_command(mpiexec, n, program, shlex.split(prepare), place)
        except ValueError as exc:
            raise ParioError(f"--prepare {prepare!r}: {exc}") from None
    # a setting known to make the program's bytes vary beyond what two runs show: said now,
    # and again beside the bytes' verdict if they differ
    caution = variation.unseeded_randomness(program, prog_args) or (
        variation.unseeded_randomness(program, shlex.split(prepare)) if prepare is not None else None)
    if caution:
        say("info", caution)
    if store.exists():
        cfg = read_config(store)
        if cfg.get("system") != prof.name:
            raise ParioError(f"store {store_arg} is for system {cfg.get('system')!r}, not {prof.name!r}")
        if tb is not None:
            devices.check_store_on_testbed(store, tb)
    servers = devices.testbed_servers(tb, prof, store) if tb is not None else None
    outdir = Path(out or "pario-run").resolve()
    outdir.mkdir(parents=True, exist_ok=True)
    if not store.exists():
        init_store(store, prof, servers, coord=coord)
    t1, t2, plan = outdir / "run1.parquet", outdir / "run2.parquet", outdir / "plan.json"
    for p in (t1, t2, plan, *outdir.glob("run[12]-*.parquet"), *outdir.glob("plain-2*.log"),
              *outdir.glob("run[12]*.serve.jsonl")):
        p.unlink(missing_ok=True)
    # the variables the loop sets per run are its own; others (PARIO_ORDER, PARIO_STORE_TIMEOUT,
    # PARIO_DEBUG, …) apply to every run alike
    base = {k: v for k, v in os.environ.items() if k not in OWN_ENV}
    base.update({"PARIO_STORE": str(store), "PARIO_SYSTEM": system_env(system)})
    if direct:
        base["PARIO_DIRECT"] = "1"

    osd_cache = []      # on a pario cluster: the OSDs' buffer-cache entries dropped before each run

    def run(c, env, log, label):
        """One mpiexec (inside the testbed's cgroup with a testbed): wall time, output, device I/O.
        On a pario cluster the OSDs' caches are emptied first (pario.cluster.caches)."""
        from ..cluster.caches import buffers, drop_for_store

        held = drop_for_store(store)
        if held is not None:
            osd_cache.append({"run": label, "buffers": buffers(held)})
        if tb is None:
            wall, text = launch(c, env, log, timeout, label)
            return wall, text, None
        from ..testbed import enter

        with enter(tb):
            before = devices.device_stats(tb)
            wall, text = launch(c, env, log, timeout, label)
            after = devices.device_stats(tb)
        return wall, text, devices.stats_diff(after, before)

    def echo(text: str, limit: int = 20) -> None:
        for line in text.rstrip().splitlines()[-limit:]:
            say("output", line)

    if fresh:
        from ..store.gc import empty_store

        gone = empty_store(store)
        if gone:
            say("info", f"--fresh: deleted {len(gone)} file(s) of the store (and their replicas): "
                + ", ".join(gone[:5]) + (" …" if len(gone) > 5 else ""))
    dropped = drop_replicas(store)
    if dropped:
        say("info", f"dropped {len(dropped)} replica(s) left in the store by an earlier run (run 1 uses the originals)")
    plane = PLANES.get(read_config(store).get("backend", "local"))
    reaches_devices = direct or not plane.page_cache    # O_DIRECT, or a plane without a client page cache
    where = f" on testbed {tb.dir} (O_DIRECT, ranks in cgroup {os.path.basename(tb.cgroup)})" if tb is not None \
        else (" (O_DIRECT)" if direct else "")
    if not plane.page_cache:   # every request reaches the servers, as O_DIRECT's do
        where = f" (store on {plane.name}: no client page cache)"
    shown = " ".join(cmd)
    wall0 = None
    tracer = _tracer()
    if tracer is not None:
        # an unmodified MPI-IO program's files go to the store (interpose/serve.c): every file it
        # opens is served from the store (run 1: the store's layouts; run 2: the plan's)
        base["PARIO_SERVE"] = "all"
    if prep_cmd is not None:
        steps.start("prepare", f"prepare (not traced){where}: {' '.join(prep_cmd)}")
        wall0, log0, _ = run(prep_cmd, _with_tracer(base, tracer, None), outdir / "prepare.log", "the prepare run")
        echo(log0)
        say("info", f"wall time {wall0:.3f} s")
        if direct:
            os.sync()

    def repeated(k: int, which: int, tpath: Path, env: dict):
        """Run ``which`` (1 or 2), repetition ``k`` (0 = the one the report details)."""
        suffix = "" if k == 0 else f"-{k + 1}"
        tp = tpath if k == 0 else outdir / f"run{which}{suffix}.parquet"
        label = f"run {which}" + (f" ({k + 1} of {repeat})" if repeat > 1 else "")
        stats = outdir / f"run{which}{suffix}.serve.jsonl"     # the flush at the program's end, per rank
        stats.unlink(missing_ok=True)
        steps.start(label)
        return (tp, *run(cmd, {**env, "PARIO_TRACE": str(tp), "PARIO_SERVE_STATS": str(stats)},
                         outdir / f"run{which}{suffix}.log", label))

    say("step", f"run 1 (traced{', pario library preloaded' if tracer else ''}){where}: {shown}"
        + (f", {repeat} times" if repeat > 1 else ""))
    rep1 = []
    native = False
    plain = kept = None
    runs: dict[str, dict] = {}      # an unmodified program: each run's SHA-256 per file, judged at the end
    for k in range(repeat):
        tdir = outdir / (f"run1-{k + 1}.pxt" if k else "run1.pxt")
        tp, wall, log, dev = repeated(k, 1, t1, _with_tracer(base, tracer, tdir))
        tr, native = _run_trace(tp, tdir, tracer, "run 1")
        dig = measure.file_digests(str(store), tr.files)
        if k == 0:
            wall1, log1, dev1, trace1, d1 = wall, log, dev, tr, dig
            echo(log1)
            say("info", f"wall time {wall1:.3f} s, {len(trace1)} requests traced → {t1}"
                + (" (by the MPI-IO tracer: the program does plain MPI-IO, served from the store)" if native else ""))
            if native:
                plain = _plain_reference(cmd, prep_cmd, os.environ, outdir, timeout, trace1.files, say,
                                         step=steps.start)
                kept = variation.Kept(outdir / "compare")
                kept.remove()       # an earlier run's
        if native:
            # the next run overwrites the store: keep the bytes that are not the plain run's
            runs[_run_label(1, k, repeat)] = dig
            kept.copy_from_store(str(store), [n for n in dig if dig[n] != plain["files"].get(n)], dig)
        elif k > 0 and dig != d1:
            raise ParioError(f"run 1 repetition {k + 1} wrote other bytes than the first (the program must be "
                             "deterministic)")
        rep1.append({"wall_s": wall, "io_s": measure.io_busy(tr), "span_s": measure.io_span(tr)})

    # collective calls are planned as the aggregators' requests, with the trace's own hints
    # (the aggregator ranks pario.mpi or the MPI-IO tracer recorded, else its cb_nodes, and its
    # cb_buffer_size); without placement options every rank runs on this machine, one node:
    # advise --nodes 1 places a cb_nodes hint as ROMIO does there (cb_config_list *:1: one
    # aggregator), and the prediction below resolves the same settings
    nodes = None if place else 1
    adv = ["advise", str(t1), "--system", system, "--schemes", schemes, "-o", str(plan),
           *(("--nodes", str(nodes)) if nodes is not None else ()), *(("--paper-benefit",) if paper_benefit else ())]
    files1 = _store_files(store, trace1.files)     # (size, layout) after run 1: what pario replicate copies
    orig_layouts = {f: lay for f, (_, lay) in files1.items()}
    original = _original_arg(orig_layouts, prof, outdir)
    if original:
        adv += ["--original", str(original)]     # the ORIG of CEDA and hybrid: the files' layout now
    # requests served by the page cache in microseconds: their overlaps in time are not the
    # modelled servers' concurrency, so the plan batches in lock-step (module docstring, step 2)
    batching = "auto" if reaches_devices else "order"
    if batching != "auto":
        adv += ["--by", batching]
        say("info", "planned with --by order (every rank's k-th request in one batch, as the papers' benchmarks "
                    "run): the ranks' I/O went through the page cache, so the requests' overlaps in time are not the "
                    "concurrency of the modelled servers")
    rep = ["replicate", str(plan), "--store", str(store)]
    if space is not None:
        adv += ["--space", str(space)]
        rep += ["--space", str(space)]
    steps.start("advise", "pario " + " ".join(adv))
    _tool(adv, "pario advise", tool_stdout)
    plan_d = json.loads(plan.read_text())
    n_rep = sum(len(v) for v in (plan_d.get("replicas") or {}).values())
    if direct:
        rep.append("--direct")      # the copies reach the devices, as the ranks' requests do

    dev_setup = None        # the setup steps' device I/O (testbed cgroup), summed

    def setup(argv: list[str], what: str) -> None:
        """A setup step (relayout, replication): on a testbed inside its cgroup, so that its
        copies pay the servers' throttles as the runs' requests do."""
        nonlocal dev_setup
        if tb is None:
            _tool(argv, what, tool_stdout)
            return
        from ..testbed import enter

        with enter(tb):
            before = devices.device_stats(tb)
            _tool(argv, what, tool_stdout)
            os.sync()
            d = devices.stats_diff(devices.device_stats(tb), before)
        dev_setup = d if dev_setup is None or d is None else {
            n: {k: dev_setup[n][k] + d[n][k] for k in d[n]} for n in d}

    if any(f != "*" for f in plan_d.get("layouts") or {}):
        # the plan's layouts for files in the store first (relayout), timed apart from the replicas
        rel = ["replicate", str(plan), "--store", str(store), "--layouts-only", *(("--direct",) if direct else ())]
        steps.start("relayout", "pario " + " ".join(rel))
        setup(rel, "pario replicate --layouts-only")
        rep.insert(4, "--no-layouts")
    steps.start("replicate", "pario " + " ".join(rep))
    setup(rep, "pario replicate")
    relaid = sorted(f for f, lay in _store_layouts(store, trace1.files).items()
                    if lay is not None and lay != orig_layouts.get(f))

    say("step", f"run 2 (plan {plan.name}){where}: {shown}" + (f", {repeat} times" if repeat > 1 else ""))
    rep2 = []
    for k in range(repeat):
        tdir = outdir / (f"run2-{k + 1}.pxt" if k else "run2.pxt")
        tp, wall, log, dev = repeated(k, 2, t2, _with_tracer({**base, "PARIO_PLAN": str(plan)}, tracer, tdir))
        tr2k = _run_trace(tp, tdir, tracer, "run 2", required=False)[0]
        if k == 0:
            wall2, log2, dev2 = wall, log, dev
            echo(log2)
        rep2.append({"wall_s": wall, "io_s": measure.io_busy(tr2k) if tr2k is not None else None,
                     "span_s": measure.io_span(tr2k) if tr2k is not None else None})
        if native:
            names_k = list(dict.fromkeys([*trace1.files, *(tr2k.files if tr2k is not None else ())]))
            dig = runs[_run_label(2, k, repeat)] = measure.file_digests(str(store), names_k)
            if k < repeat - 1:      # the last run 2's files stay in the store
                kept.copy_from_store(str(store), [n for n in dig if dig[n] != plain["files"].get(n)], dig)
        elif repeat > 1 and measure.file_digests(str(store), trace1.files) != d1:
            raise ParioError(f"run 2 repetition {k + 1} left other bytes than run 1")
    steps.start("check")    # run 2's trace, RMT hits, files through the store, fsck, bytes against the references
    trace2 = load_trace(t2) if t2.exists() else None
    hit2 = measure.rmt_hit_mask(str(store), trace2) if trace2 is not None else None
    hits = measure.hit_counts(trace2, hit2) if trace2 is not None else dict(measure.NO_HITS)
    names = list(dict.fromkeys([*trace1.files, *(trace2.files if trace2 is not None else ())]))
    d2 = runs[_run_label(2, repeat - 1, repeat)] if native else measure.file_digests(str(store), names)
    with Store(str(store)) as st:
        ok_fsck = bool(fsck(st)["ok"])
    same = d1 == {k: v for k, v in d2.items() if k in d1} and set(d1) <= set(d2)
    vary = None
    if native:
        vary = _judge_bytes(store, plain, runs, _run_label(2, repeat - 1, repeat), kept, cmd, prep_cmd, outdir,
                            timeout, say, step=steps.start)
        plain["identical"] = not any(f["differing"].get(label, {}).get("bytes") for f in vary["files"].values()
                                     for label in runs)
        same = vary["identical"]
        if not same and vary.get("varying_bytes"):
            vary["cause"] = caution     # None: no known cause of the program's variation
    io1, io2 = _median([r["io_s"] for r in rep1]), _median([r["io_s"] for r in rep2])
    span1, span2 = _median([r["span_s"] for r in rep1]), _median([r["span_s"] for r in rep2])
    if repeat > 1:
        wall1, wall2 = _median([r["wall_s"] for r in rep1]), _median([r["wall_s"] for r in rep2])
    # both runs as they ran: the plan's layouts, replicas and collective order, the trace's hints
    steps.start("compare")  # the prediction against the measurement
    pred, model_servers = predict(trace1, plan, prof, orig_layouts, relaid=relaid, nodes=nodes,
                                  hint=order_hint(trace1, base))
    from ..plan.base import Plan
    from ..plan.setup_cost import plan_setup

    # pario's own costs and the whole job: the setup as pario advise prices it (the same copies
    # of the same files), the steps' seconds, the flush the ranks reported at the program's end
    whole = whole_job.whole_job(
        predicted=pred, setup=plan_setup(Plan.load(plan, prof), prof, files1), steps=steps.rows,
        run1_s=wall1, run2_s=wall2, plain_s=plain["wall_s"] if plain else None, run1_io_s=io1,
        flush={f"run{k}": measure.flush_stats(outdir / f"run{k}.serve.jsonl") for k in (1, 2)})
    load1 = os.getloadavg()
    summary = {"procs": n, "command": cmd, "store": str(store), "out": str(outdir),
               "testbed": tb.dir if tb is not None else None, "direct": reaches_devices,
               "backend": plane.name, "batching": batching,
               "prepare_s": wall0,
               "run1_s": wall1, "run2_s": wall2, "speedup": wall1 / wall2 if wall2 > 0 else None,
               "io_s": {"run1": io1, "run2": io2, "ratio": (io1 / io2) if io1 and io2 else None},
               "span_s": {"run1": span1, "run2": span2, "ratio": (span1 / span2) if span1 and span2 else None},
               "predicted": pred,
               "devices": {"run1": dev1, "run2": dev2, "setup": dev_setup} if tb is not None else None,
               "osd_cache_dropped": osd_cache or None,
               "replicas_planned": n_rep, "redirected": hits, "files": d2, "files_run1": d1, "identical": same,
               "fsck_ok": ok_fsck, "plan": str(plan), "traces": [str(t1), str(t2)],
               "dropped_replicas": dropped, "collective_requests_run1": int(trace1.collective.sum()),
               "unmodified": native, "plain": plain, "variation": vary, "relaid": relaid,
               "repeat": repeat, "repetitions": {"run1": rep1, "run2": rep2},
               "loadavg": {"start": list(load0), "end": list(load1)}}
    summary["evidence"] = _evidence(trace1, trace2, hit2, prof, plan, store, log1, log2, model_servers)
    summary["whole_job"] = whole
    summary["verdict"] = compare.judge(summary)
    summary["verdict"]["whole_job"] = whole_job.judge(whole)
    summary["steps"] = steps.finish()
    return summary


def _tracer() -> Path | None:
    """The MPI-IO tracer library (:mod:`pario.trace.launch`), None when it is not built."""
    from ..trace.launch import tracer_library

    try:
        return tracer_library()
    except ParioError:
        return None


def _with_tracer(env: dict, lib: Path | None, tdir: Path | None) -> dict:
    """``env`` with the pario library preloaded (serving files of the store) and, when
    ``tdir`` is given, its trace records going to that fresh directory."""
    import shutil

    from ..trace.launch import preload_env

    if lib is None:
        return env
    if tdir is not None:
        shutil.rmtree(tdir, ignore_errors=True)
        tdir.mkdir(parents=True)
    return preload_env(env, lib, tdir)


def _run_trace(tp: Path, tdir: Path, lib: Path | None, label: str, required: bool = True):
    """A run's trace and whether it is the MPI-IO tracer's: ``pario.mpi.File``'s own trace
    (``tp``) when the program wrote one, else the tracer's records of its MPI-IO calls (saved
    to ``tp``).  The tracer's directory is removed once read."""
    import shutil

    from ..trace import load as load_trace
    from ..trace import save
    from ..trace.native import read_native

    try:
        if tp.exists():
            return load_trace(tp), False
        if lib is not None:
            tr = read_native(tdir)
            if len(tr):
                save(tr, tp)
                return tr, True
            if not required:
                return None, True
            raise ParioError(f"{label} made no I/O request pario can see: no MPI-IO call (MPI_File_*) and no "
                             "pario.mpi.File")
        if not required:
            return None, False
        raise ParioError(f"{label} recorded no trace: the program does not open its files with pario.mpi.File and "
                         f"the pario library is not built ({build_hint()})")
    finally:
        shutil.rmtree(tdir, ignore_errors=True)


def _plain_reference(cmd, prep_cmd, environ, outdir: Path, timeout, names, say, second: bool = False,
                     step=None) -> dict:
    """The program without pario (no store, no library: MPICH alone, the prepare run first),
    its files' SHA-256 at the paths the program names: what the served runs must equal.
    ``second``: the second such run (logs ``plain-2*.log``).  ``end_time``: when it ended
    (``time.time()``).  ``step(name, text)``: :meth:`Steps.start` (None: ``say`` alone)."""
    env = {k: v for k, v in environ.items() if not k.startswith("PARIO_")}
    tag, what = ("-2", "second reference") if second else ("", "reference")
    step = step or (lambda name, text: say("step", text))
    if prep_cmd is not None:
        step(f"{what} prepare", f"{what}, without pario: {' '.join(prep_cmd)}")
        launch(prep_cmd, env, outdir / f"plain{tag}-prepare.log", timeout, f"the {what} prepare run")
    step(f"{what} run", f"{what}, without pario: {' '.join(cmd)}")
    wall, _ = launch(cmd, env, outdir / f"plain{tag}.log", timeout, f"the {what} run")
    end = time.time()
    files = {name: measure.plain_digest(name) for name in names}
    say("info", f"wall time {wall:.3f} s; files written where the program names them: "
        + ", ".join(n for n, d in files.items() if d is not None))
    return {"wall_s": wall, "files": files, "end_time": end}


def _run_label(which: int, k: int, repeat: int) -> str:
    """``run 1`` / ``run 2`` for the first of each, ``run 2 (3 of 5)`` for a repetition."""
    return f"run {which}" if k == 0 else f"run {which} ({k + 1} of {repeat})"


def _judge_bytes(store: Path, plain: dict, runs: dict, final: str, kept, cmd, prep_cmd, outdir: Path, timeout,
                 say, step=None) -> dict:
    """The store's files of every run of an unmodified program against the program's own
    files without pario (:func:`pario.run.variation.judge_files`).  When every SHA-256 agrees
    with the plain run's, nothing more is read or run.  Otherwise the program runs without
    pario a second time, its first plain run's files moved aside, and the files are compared
    byte for byte outside the positions where the two plain runs differ.  The second plain
    run comes after run 2 and at least a second after the first plain run ended: run 2 lies
    between the two in time, so a value that grows with the clock (a modification time) has
    in run 2 a value between the plain runs' and differs from theirs only in bytes that vary
    between them, and a time stamp of one-second resolution does vary."""

    names = list(dict.fromkeys(n for dg in runs.values() for n in dg))
    p1 = plain["files"]
    for n in names:
        if n not in p1:       # a file only run 2 named: the plain run's is still at its path
            p1[n] = measure.plain_digest(n)
    end1 = plain.pop("end_time")
    if all(dg.get(n) == p1.get(n) for dg in runs.values() for n in names):
        kept.remove()
        plain["runs"] = 1
        return variation.judge_files(str(store), names, p1, None, runs, final, kept)
    say("info", "the store's files differ from the run without pario: the program runs without pario once more, "
        "to tell the bytes that vary from run to run")
    time.sleep(max(0.0, end1 + 1.0 - time.time()))
    for n in names:
        kept.move(n, p1.get(n))
    second = _plain_reference(cmd, prep_cmd, os.environ, outdir, timeout, names, say, second=True, step=step)
    if step is not None:
        step("byte comparison", None)
    second.pop("end_time")
    plain.update(runs=2, wall_s_2=second["wall_s"], files_2=second["files"])
    out = variation.judge_files(str(store), names, p1, second["files"], runs, final, kept)
    if out["identical"]:
        kept.remove()
    else:
        out["kept"] = str(kept.root)     # the runs' differing files, for a look
    return out


def _median(xs):
    xs = [x for x in xs if x is not None]
    return float(np.median(xs)) if xs else None


def _original_arg(layouts: dict, prof, outdir: Path) -> Path | None:
    """``OUT/original-layout.json``: the layout the traced files have in the store (what CEDA
    and hybrid replication compare against as ORIG, seed 000 §4.4), when they share one;
    None when the store holds none of them or they differ (advise then assumes its default)."""
    from ..layout import layout_to_dict

    dicts = {json.dumps(layout_to_dict(lay, prof), sort_keys=True) for lay in layouts.values() if lay is not None}
    if len(dicts) != 1:
        return None
    p = outdir / "original-layout.json"
    p.write_text(dicts.pop() + "\n")
    return p


def _store_layouts(store: Path, names) -> dict:
    """The layout of each named file in the store (None for a file it does not hold)."""
    return {n: lay for n, (_, lay) in _store_files(store, names).items()}


def _store_files(store: Path, names) -> dict:
    """``(size, layout)`` of each named file in the store (``(0, None)`` for a file it does not hold)."""
    from ..store import Store

    with Store(str(store)) as st:
        out = {}
        for n in names:
            info = st.stat(n) if st.exists(n) else None
            out[n] = (int(info.size), info.layout) if info is not None else (0, None)
        return out


def _evidence(trace1, trace2, hit2, prof, plan: Path, store: Path, log1: str, log2: str, model_servers) -> dict:
    """What :func:`pario.run.compare.judge` needs beyond the summary's own numbers."""
    lat1 = np.where(np.isnan(trace1.end), np.nan, trace1.end - trace1.start) if len(trace1) else np.zeros(0)
    ok = ~np.isnan(lat1)
    size = int(np.median(trace1.length)) if len(trace1) else None
    run1 = {"requests": int(len(trace1)), "bytes": int(trace1.length.sum()),
            "median_request_bytes": size,
            "median_latency_us": float(np.median(lat1[ok]) * 1e6) if ok.any() else None}
    try:
        n_dev = len(set(devices.store_devices(store).values())) or None
    except (OSError, ValueError):
        n_dev = None
    return {
        "run1": run1,
        "model_request_s": prof.cheapest_request_s(size) if size else None,
        "server_mb_s": float(1 / prof.beta_table().min() / (1 << 20)) if prof.beta_table().min() > 0 else None,
        "servers": prof.n,
        "store_devices": n_dev,
        "cpus": os.cpu_count(),
        "phases": {"run1": measure.program_phases(log1), "run2": measure.program_phases(log2)},
        "requests": measure.request_latencies(trace1, trace2, hit2) if trace2 is not None else None,
        "ranks": {"run1": measure.time_in_requests(trace1), "run2": measure.time_in_requests(trace2)},
        "model_servers": model_servers,
    }


def exit_status(summary: dict) -> int:
    """``pario run``'s exit status: 0 when the files are byte-identical (an unmodified program's:
    outside the bytes that vary between two runs without pario) and fsck is clean, else 1
    (the verdict does not change it: a contradicted prediction is a finding, not a failure)."""
    return 0 if summary["identical"] and summary["fsck_ok"] else 1


__all__ = ["run_loop", "exit_status", "drop_replicas", "system_env", "OWN_ENV"]
