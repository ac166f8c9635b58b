"""``pario run --procs N --store DIR (--system P | --testbed TB) [OPTIONS] PROGRAM [ARGS…]``: the full CEDA loop.

pario's options come before PROGRAM (as with ``mpiexec``); everything after PROGRAM is
passed to the program unchanged.  This module only parses the arguments, calls
:func:`pario.run.run_loop` (run 1 traced, ``pario advise``, ``pario replicate``, run 2
redirected: see :mod:`pario.run.loop`) and prints what it returns.

Printed as the loop goes: each step's command and the program's last output lines.  Then,
for run 1 and run 2 side by side: the model's prediction (``pario advise``: ORIG, the
original layout, for run 1 and the plan for run 2), the I/O time of each run from its trace
(the time with a request in flight, the quantity the model prices; the program's gaps and
the span first request → last request below it), measured /
predicted per run, and the wall time of each ``mpiexec`` (MPI start-up, imports and
open/close included); on a testbed also the requests and bytes each server's device served
in each run (the cgroup's ``blkio.throttle.io_serviced`` / ``io_service_bytes``).  Below
the table the **verdict** in one sentence — ``as predicted``, ``faster than predicted`` or
``contradicts the prediction``, by the rule and tolerance of :mod:`pario.run.compare` — and
its reasons, each a measured statement (:func:`pario.run.compare.judge`); then how many of
run 2's requests hit RMT entries (the redirector sends those to replicas: seed 000 §4.6),
SHA-256 checksums of every file the program touched, read through the store after run 1
and after run 2, for an unmodified program the bytes that vary from run to run (two runs
without pario differ there: :mod:`pario.run.variation`) and where each run differs outside
them, ``fsck`` and the load average.

``--json`` prints the summary as one JSON document (the tools' own output goes to stderr):
``predicted`` (``ORIG``, ``plan``, ``ratio``, ``model``, ``order``, ``two_phase``, ``parts``:
:mod:`pario.run.predict`), ``io_s``, ``run1_s``, ``run2_s``, ``devices``, ``redirected``,
``files``, ``identical``, ``verdict`` (``verdict``, ``agrees``, ``predicted_ratio``,
``measured_ratio``, ``q``, ``tolerance``, ``runs``, ``sentence``, ``reasons``),
``evidence``, ``loadavg``, ``variation``, ``steps`` (every step — setup, prepare, run 1,
reference run, advise, relayout, replicate, run 2, check, compare — as ``{"name", "start",
"seconds"}``, ``start`` in seconds since the run began), ``whole_job`` (``ratio``,
``break_even_runs``, ``setup_s``, ``run1_s``, ``run2_s``, each ``{"predicted",
"measured"}``; ``costs``, ``setup``: :mod:`pario.run.whole_job`) and the verdict's
``whole_job``, ….  After the verdict of the traced I/O, the whole job is printed: a table of
run 1, the setup (advise, relayout, replicate) and run 2, predicted and measured, the
whole-job ratio and the break-even runs, the flush at the program's end, the trace overhead,
and the whole job's verdict.  Exit status 1 if the bytes differ (for an
unmodified program: outside the bytes that vary between two runs without pario) or fsck
finds problems (the verdict does not change it); bad input and failed steps are one
``pario: error:`` line, exit 2.
"""

from __future__ import annotations

import argparse
import sys

from rich.markup import escape

from .common import add_placement_args, console, placement_of, print_json, size_arg


def register(sub) -> None:
    p = sub.add_parser(
        "run", help="run an MPI program twice around advise + replicate (traced, then redirected)",
        description="Run 1 traced on the store, pario advise, pario replicate, run 2 with the plan; "
                    "prints the predicted and measured times of both runs, whether the measurement agrees "
                    "with the prediction (and why not), and checks the files are byte-identical.")
    p.add_argument("program", metavar="PROGRAM", help="the MPI program (.py runs with this Python)")
    p.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS",
                   help="the program's arguments (everything after PROGRAM; pario's options go before it)")
    p.add_argument("--procs", "-n", required=True, metavar="N", help="number of MPI processes")
    p.add_argument("--store", required=True, metavar="DIR", help="pario store (created for --system if missing)")
    p.add_argument("--system", default=None, metavar="P",
                   help="system profile (name or TOML); default: an existing --store's profile, else with "
                        "--testbed DIR/nominal.toml")
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
    p.add_argument("--repeat", default="1", metavar="K",
                   help="run 1 and run 2 each K times and compare the medians (default 1)")
    p.add_argument("--paper-benefit", action="store_true",
                   help="pario advise --paper-benefit: CEDA's benefit test without the copy back of dirty "
                        "replica bytes at the program's end")
    p.add_argument("--fresh", action="store_true",
                   help="start from an empty store: delete every file of an existing --store first (with its "
                        "replicas), so that no layout an earlier plan gave a file stays")
    p.add_argument("--json", action="store_true", help="print a JSON summary")
    add_placement_args(p)
    p.add_argument("--coord", default="host", metavar="MEMBER",
                   help="coordination of a store made here: host (one machine, default) or pfs (ranks on several "
                        "nodes of the parallel file system holding it; docs/multinode.md)")
    p.set_defaults(func=_run)


def _run(args) -> int:
    from ..run import exit_status, run_loop

    def progress(kind: str, text: str) -> None:
        if kind == "step":
            console.print(f"[bold]{escape(text)}[/bold]", soft_wrap=True)
        elif kind == "output":
            console.print(f"  | {text}", markup=False, highlight=False, soft_wrap=True)
        else:
            console.print(f"  {escape(text)}", soft_wrap=True)

    summary = run_loop(args.program, args.args, procs=args.procs, store=args.store, system=args.system,
                       testbed=args.testbed, direct=args.direct, space=args.space, schemes=args.schemes,
                       out=args.out, timeout=args.timeout, mpiexec=args.mpiexec, prepare=args.prepare,
                       repeat=args.repeat, paper_benefit=args.paper_benefit, place=placement_of(args),
                       coord=args.coord, fresh=args.fresh,
                       progress=None if args.json else progress, tool_stdout=sys.stderr if args.json else None)
    if args.json:
        print_json(summary)
    else:
        _report(summary)
    return exit_status(summary)


def _against(label: str) -> str:
    """A comparison's label as printed: ``run 2 vs run 1``, ``run 1 vs without pario``."""
    return label if " vs " in label else f"{label} vs without pario"


def _report_variation(vr: dict) -> None:
    """Per file: the bytes that vary between the two runs without pario, and each run's bytes
    that differ outside them (first ranges, inclusive offsets)."""
    from ..run.variation import n_bytes, offsets_text

    for name, f in vr["files"].items():
        sizes = f["plain_sizes"] or []
        if f["varying_bytes"]:
            size_note = (f"; their sizes differ ({sizes[0]} and {sizes[1]} bytes)"
                         if len(sizes) == 2 and sizes[0] != sizes[1] else "")
            where = offsets_text(f["varying_ranges"], f["varying_range_count"])
            console.print(f"  {escape(name)}: {n_bytes(f['varying_bytes'], 'vary')} from run to run (two runs "
                          f"without pario differ at {where}){size_note}", soft_wrap=True)
        for label, r in f["differing"].items():
            if r["bytes"]:
                run = label.split(" vs ")[0]
                size = f["sizes"].get(run)
                size_note = f" ({run} has {size} bytes)" if size not in sizes else ""
                console.print(f"  {escape(name)}: {_against(label)}: "
                              f"[bold red]{n_bytes(r['bytes'], 'differ')}[/] where the runs without pario agree, at "
                              f"{offsets_text(r['ranges'], r['range_count'])}{size_note}", soft_wrap=True)
    if vr.get("kept"):
        console.print(f"  the runs' files are kept in {escape(vr['kept'])}", soft_wrap=True)


def _fmt(v, unit=" s", digits=3) -> str:
    return "–" if v is None else f"{v:.{digits}f}{unit}"


def _runs(n) -> str:
    """Break-even runs as printed: ``1``, ``4``, ``never``."""
    return "never" if n is None else str(n)


def _report_whole(w: dict, wv: dict, style: dict) -> None:
    """The whole job (:mod:`pario.run.whole_job`): pario's own costs, run 1 against setup + run 2,
    predicted and measured, the break-even runs and the whole job's verdict."""
    from rich.table import Table

    from ..units import format_size

    c = w["costs"]
    t = Table(title="whole job: run 1 against pario's setup + run 2")
    t.add_column("")
    out = w.get("outside_io_s")
    t.add_column("predicted (model: I/O times, copies" + (f"; + {out:.3f} s outside the I/O per run, as in run 1)"
                                                           if out is not None else ")"), justify="right")
    t.add_column("measured (wall times, steps)", justify="right")
    setup = w.get("setup") or {}
    t.add_row("run 1", _fmt(w["run1_s"]["predicted"]), _fmt(w["run1_s"]["measured"]))
    t.add_row("setup" + (f" (copies {format_size(setup['bytes'])})" if setup else ""),
              _fmt(w["setup_s"]["predicted"]), _fmt(w["setup_s"]["measured"]))
    t.add_row("  advise", "as it ran" if out is not None else "not priced", _fmt(c["advise_s"]))
    if c["relayout_s"] or any(x["kind"] == "relayout" for x in setup.get("copies", [])):
        t.add_row("  relayout", _fmt(sum(x["seconds"] for x in setup.get("copies", []) if x["kind"] == "relayout")),
                  _fmt(c["relayout_s"]))
    t.add_row("  replicate", _fmt(sum(x["seconds"] for x in setup.get("copies", []) if x["kind"] == "replica")),
              _fmt(c["replicate_s"]))
    if c.get("compile_s"):
        t.add_row("not in the setup: numba compiling pario's kernels (first use after installation, once)", "",
                  _fmt(c["compile_s"]))
    t.add_row("run 2", _fmt(w["run2_s"]["predicted"]), _fmt(w["run2_s"]["measured"]))
    t.add_row("whole-job ratio: run 1 / (setup + run 2)", _fmt(w["ratio"]["predicted"], "×", 2),
              _fmt(w["ratio"]["measured"], "×", 2))
    t.add_row("break-even: runs until the plan has paid for its setup", _runs(w["break_even_runs"]["predicted"]),
              _runs(w["break_even_runs"]["measured"]))
    console.print(t)
    fl = c.get("flush") or {}
    parts = []
    for run in ("run1", "run2"):
        f = fl.get(run)
        if f is not None:
            parts.append(f"{run[:3]} {run[3]} {f['flush_s']:.3f} s ({format_size(f['flushed_bytes'])} copied, "
                         f"{f['ranks']} rank(s), at {'/'.join(f['at'])})")
    console.print("flush of dirty replica bytes at the program's end (inside the run's wall time): "
                  + ("; ".join(parts) if parts else "not reported (no served file)"), soft_wrap=True)
    over = c.get("trace_overhead_s")
    console.print("trace overhead: " + (f"{over:.3f} s, {escape(c['trace_overhead'])}" if over is not None
                                        else escape(c["trace_overhead"])), soft_wrap=True)
    if wv:
        console.print(f"[{style.get(wv['verdict'], 'bold')}]verdict[/] (whole job): {escape(wv['sentence'])}",
                      soft_wrap=True)


def _report(s: dict) -> None:
    from rich.table import Table

    pr, io, v = s["predicted"], s["io_s"], s["verdict"]
    t = Table(title=f"run 1 (original layout) vs run 2 (plan {pr['scheme']}), {s['procs']} processes")
    t.add_column("")
    t.add_column("run 1", justify="right")
    t.add_column("run 2", justify="right")
    t.add_column("run 1 / run 2", justify="right")
    src = {None: "pario advise", "distribution": "distribution model"}.get(pr.get("model"), pr.get("model"))
    t.add_row(f"predicted I/O time ({escape(str(src))}, {escape(str(pr['system']))}: ORIG / plan)", _fmt(pr["ORIG"]),
              _fmt(pr["plan"]), _fmt(v["predicted_ratio"], "×", 2))
    k = s.get("repeat", 1)
    t.add_row("measured I/O time (trace: a request in flight)" + (f", median of {k}" if k > 1 else ""),
              _fmt(io["run1"]), _fmt(io["run2"]), _fmt(v["measured_ratio"], "×", 2))
    sp = s.get("span_s") or {}
    if sp.get("run1") is not None and sp.get("run2") is not None and io["run1"] is not None and io["run2"] is not None:
        t.add_row("  the program's gaps between requests (open, close, computation)",
                  _fmt(sp["run1"] - io["run1"]), _fmt(sp["run2"] - io["run2"]), "")
        t.add_row("  first request → last request (I/O time and gaps)", _fmt(sp["run1"]), _fmt(sp["run2"]),
                  _fmt(sp.get("ratio"), "×", 2))
    if k > 1:
        spans = [[r["io_s"] for r in s["repetitions"][run] if r["io_s"] is not None] for run in ("run1", "run2")]
        t.add_row("  each run's I/O time, min – max", *(f"{min(x):.3f} – {max(x):.3f}" if x else "–" for x in spans),
                  "")
    t.add_row("measured / predicted", _fmt(v["runs"]["run1"]["measured_over_predicted"], "", 2),
              _fmt(v["runs"]["run2"]["measured_over_predicted"], "", 2), _fmt(v["q"], "", 2))
    t.add_row("wall time (mpiexec: start-up, imports, open, close included)" + (", median" if k > 1 else ""),
              _fmt(s["run1_s"]), _fmt(s["run2_s"]), _fmt(s["speedup"], "×", 2))
    ph = (s.get("evidence") or {}).get("phases") or {}
    if ph.get("run1") and ph.get("run2"):
        for k in ("open", "write", "read", "close"):
            if k in ph["run1"] and k in ph["run2"]:
                a, b = ph["run1"][k], ph["run2"][k]
                t.add_row(f"  {k} (the program's own timing)", _fmt(a), _fmt(b), _fmt(a / b if b else None, "×", 2))
    if s["devices"]:
        for key, label in (("ios", "device requests (testbed cgroup)"), ("bytes", "device MiB (testbed cgroup)")):
            vals = []
            for run in ("run1", "run2"):
                d = s["devices"][run]
                vals.append(None if d is None else sum(x[f"read_{key}"] + x[f"write_{key}"] for x in d.values()))
            div = 1 if key == "ios" else 1 << 20
            t.add_row(label, *("–" if x is None else f"{x / div:.0f}" for x in vals),
                      "–" if None in vals or not vals[1] else f"{vals[0] / vals[1]:.2f}×")
    console.print(t)
    if pr.get("order"):
        from ..units import format_size

        tp = pr.get("two_phase") or {}
        agg = "one per node" if tp.get("aggregators") is None else str(tp["aggregators"])
        console.print(f"collective requests predicted in order {pr['order']['run1'].upper()} (run 1) and "
                      f"{pr['order']['run2'].upper()} (run 2), {agg} aggregator(s) ({escape(str(tp.get('agg_source')))}), "
                      f"cb_buffer {format_size(tp['cb_buffer'])} ({escape(str(tp.get('cb_source')))})", soft_wrap=True)
    if s["devices"] and s["devices"]["run1"] is not None and s["devices"]["run2"] is not None:
        per = "  ".join(f"{name} {s['devices']['run1'][name]['read_ios'] + s['devices']['run1'][name]['write_ios']}"
                        f"/{s['devices']['run2'][name]['read_ios'] + s['devices']['run2'][name]['write_ios']}"
                        for name in s["devices"]["run1"])
        console.print(f"device requests per server (run 1/run 2): {per}")
    style = {"as predicted": "green", "faster than predicted": "yellow", "contradicts the prediction": "bold red"}
    console.print(f"[{style.get(v['verdict'], 'bold')}]verdict[/] (traced I/O): {escape(v['sentence'])}",
                  soft_wrap=True)
    if v["reasons"]:
        console.print("why (measured in these runs):")
        for r in v["reasons"]:
            console.print(f"  - {escape(r['text'])}", soft_wrap=True)
    if s.get("whole_job"):
        _report_whole(s["whole_job"], v.get("whole_job") or {}, style)
    h = s["redirected"]
    console.print(f"run 2 requests through replicas (RMT hits): {h['hit_requests']} of {h['requests']} "
                  f"({h['hit_bytes']} of {h['bytes']} bytes)")
    vr = s.get("variation")
    judged = bool(vr and vr["plain_runs"] == 2)       # then judged byte by byte below
    for name, dg in s["files"].items():
        same = s["files_run1"].get(name) == dg
        console.print(f"  {name}: sha256 {dg[:16]}…  "
                      f"{'same as run 1' if same else 'other than run 1' if judged else 'DIFFERENT'}")
    pl = s.get("plain")
    if pl:
        for name, dg in pl["files"].items():
            console.print(f"  {name} without pario: sha256 {(dg or '(missing)')[:16]}…  "
                          f"{'same' if dg == s['files'].get(name) else 'other than run 2' if judged else 'DIFFERENT'}")
    if vr:
        _report_variation(vr)
    if vr and vr["plain_runs"] == 2:
        from ..run.variation import n_bytes

        vary = n_bytes(vr["varying_bytes"], "vary")
        head = (f"yes: {vary} from run to run; all other bytes identical (run 1, run 2 and the runs without "
                "pario)" if s["identical"] else
                "NO: bytes differ where the runs without pario agree ("
                + "; ".join(f"{_against(k)}: {n_bytes(b)}" for k, b in vr["differing_bytes"].items())
                + f"); {vary} from run to run")
    else:
        head = ("yes" if s["identical"] else "NO") + (" (run 1, run 2 and the run without pario)" if pl else "")
    console.print(f"identical bytes: {head}; store fsck: {'clean' if s['fsck_ok'] else 'PROBLEMS'}", soft_wrap=True)
    if vr and not s["identical"] and vr.get("varying_bytes"):
        console.print("  the program does not write the same bytes twice: a byte that two runs without pario "
                      "wrote alike by chance can differ in a third, so these differences need not be pario's"
                      + (f"; {escape(vr['cause'])}" if vr.get("cause") else ""), soft_wrap=True)
    la = s["loadavg"]
    console.print(f"load average (1/5/15 min) at start {la['start'][0]:.2f}/{la['start'][1]:.2f}/{la['start'][2]:.2f}, "
                  f"at end {la['end'][0]:.2f}/{la['end'][1]:.2f}/{la['end'][2]:.2f}")

