"""``pario run``'s whole-job report: what the plan costs besides the runs, and whether it pays.

The traced I/O of run 1 and run 2 (:mod:`pario.run.compare`) leaves out what pario itself
costs.  :func:`whole_job` puts it beside them, from what the loop measured:

- **own costs**, each step's seconds (:class:`pario.run.loop.Steps`): ``advise`` (planning),
  ``relayout`` (the plan's layouts given to the files in the store) and ``replicate`` (the
  replicas copied, and with ``O_DIRECT`` the copy synced to the devices); the **flush** of
  dirty replica bytes at the program's end (inside run 2's wall time: the served runtime's
  ``MPI_Finalize``, or ``pario.mpi.File.close``, reported per rank in ``PARIO_SERVE_STATS``:
  :func:`pario.run.measure.flush_stats`); the **trace overhead**, when a run without pario
  was made (an unmodified program): run 1's wall time minus the program's without pario (the
  tracer and the store together; not measurable for a program that opens its files with
  ``pario.mpi.File``: it has no run without pario);
- **whole-job ratio** = run 1 / (setup + run 2), where setup = advise + relayout + replicate
  (measured: wall times of the runs, :func:`pario.plan.setup_cost.whole_job_ratio`), and
  predicted in the same units: each run = its I/O time as the model prices it
  (:mod:`pario.run.predict`: ORIG, plan) + the time run 1 spent outside its I/O (its wall
  time minus its measured I/O time: start-up, opens, closes, computing — the program's, the
  same in both runs), setup = advise as it ran (it has run when the prediction is made) +
  the copies ``pario advise`` prices (:func:`pario.plan.setup_cost.plan_setup`: the
  distribution model);
- **the compile of pario's kernels** (numba, on their first use after an installation; inside
  the steps, advise mostly: :class:`pario.jit.CompileClock`): left out of every step's seconds
  and of the setup judged, since a user pays it once and not once per plan; reported as
  ``costs.compile_s`` with the whole job as this run paid it (``first_use``);
- **break-even runs**: the smallest n ≥ 1 with n·run 1 ≥ setup + n·run 2, predicted and
  measured (:func:`pario.plan.setup_cost.break_even_runs`; None: never — run 2 is not faster).

:func:`judge` gives the whole job a verdict by the rule of :func:`pario.run.compare.classify`
(measured whole-job ratio / predicted, the same tolerance) and says whether the plan pays for
itself in one run, after n runs, or never — measured and predicted.
"""

from __future__ import annotations

from .compare import AS_PREDICTED, NOT_COMPARABLE, TOLERANCE, classify

SETUP_STEPS = ("advise", "relayout", "replicate")


def step_seconds(steps: list[dict], name: str) -> float:
    """Seconds of the steps named ``name`` (0 when there was none; a step not yet closed counts 0)."""
    return float(sum(s["seconds"] or 0.0 for s in steps if s["name"] == name))


def step_compile(steps: list[dict], name: str) -> float:
    """Seconds the steps named ``name`` spent compiling pario's kernels (numba, first use after
    installation: :class:`pario.jit.CompileClock`; 0 when not measured)."""
    return float(sum(s.get("compile_s") or 0.0 for s in steps if s["name"] == name))


def whole_job(*, predicted: dict, setup: dict | None, steps: list[dict], run1_s: float | None,
              run2_s: float | None, flush: dict | None = None, plain_s: float | None = None,
              run1_io_s: float | None = None) -> dict:
    """The summary's ``whole_job`` (module docstring): ``{"ratio", "break_even_runs", "setup_s",
    "run1_s", "run2_s"}`` each ``{"predicted", "measured"}``, ``"costs"`` (``advise_s``,
    ``relayout_s``, ``replicate_s``, ``flush`` per run, ``trace_overhead_s`` and how it was
    measured) and ``"setup"`` (the predicted copies).  ``predicted``: :func:`pario.run.predict.predict`'s;
    ``setup``: :func:`pario.plan.setup_cost.plan_setup`'s (None: not priced); ``steps``: the
    loop's steps so far; ``flush``: ``{"run1", "run2"}`` of :func:`pario.run.measure.flush_stats`;
    ``plain_s``: the program's wall time without pario, when measured; ``run1_io_s``: run 1's
    measured I/O time (then each predicted run adds run 1's time outside its I/O, and the
    predicted setup the advise step as it ran; without it the prediction is I/O times and
    copies only).  ``"advised"``: the ratio, break-even and setup ``pario advise`` printed
    for the plan (I/O times and copies only: it cannot know the program's other time).
    Each step's seconds leave out its ``compile_s`` (numba compiling pario's kernels, once per
    installation): ``costs["compile_s"]`` is their sum, and ``"first_use"`` (None when nothing
    compiled) the measured setup, ratio and break-even with it."""
    from ..plan.setup_cost import break_even_runs, whole_job_ratio  # lazy: pario.plan needs the C extension
    # each step without numba's compile of pario's kernels: paid once per installation, not
    # once per plan (pario.jit), so it is counted apart ("compile_s", "first_use")
    compiled = {name: step_compile(steps, name) for name in SETUP_STEPS}
    costs = {f"{name}_s": max(step_seconds(steps, name) - compiled[name], 0.0) for name in SETUP_STEPS}
    compile_s = sum(compiled.values())
    setup_m = sum(costs.values())
    setup_p = None if setup is None else float(setup["seconds"])
    p1, p2 = predicted.get("ORIG"), predicted.get("plan")
    advised = {"ratio": whole_job_ratio(p1, setup_p, p2), "break_even_runs": break_even_runs(p1, p2, setup_p),
               "setup_s": setup_p}  # what pario advise prints: the I/O times and the copies
    outside = None  # run 1's time outside its I/O: the program's own, in both runs
    if run1_io_s is not None and run1_s is not None and p1 is not None and p2 is not None:
        outside = max(float(run1_s) - float(run1_io_s), 0.0)
        p1, p2 = p1 + outside, p2 + outside
        if setup_p is not None:
            setup_p += costs["advise_s"]
    if plain_s is not None and run1_s is not None:
        costs["trace_overhead_s"] = float(run1_s - plain_s)
        costs["trace_overhead"] = ("run 1's wall time minus the program's without pario (the tracer and the store "
                                   f"together; {plain_s:.3f} s without pario)")
    else:
        costs["trace_overhead_s"] = None
        costs["trace_overhead"] = ("not measurable: the program opens its files with pario.mpi.File and has no run "
                                   "without pario")
    costs["flush"] = flush or {"run1": None, "run2": None}
    costs["compile_s"] = compile_s
    costs["compile"] = ("numba compiling pario's kernels on their first use after installation, inside the steps "
                        "(advise mostly); once: cached for every later run (python -m pario.jit compiles them "
                        "ahead); not in the setup")
    first_use = None   # the whole job as this run paid it, the compile included
    if compile_s > 0:
        first_use = {"setup_s": setup_m + compile_s,
                     "ratio": whole_job_ratio(run1_s, setup_m + compile_s, run2_s),
                     "break_even_runs": break_even_runs(run1_s, run2_s, setup_m + compile_s)}
    return {
        "ratio": {"predicted": whole_job_ratio(p1, setup_p, p2), "measured": whole_job_ratio(run1_s, setup_m, run2_s)},
        "break_even_runs": {"predicted": break_even_runs(p1, p2, setup_p),
                            "measured": break_even_runs(run1_s, run2_s, setup_m)},
        "setup_s": {"predicted": setup_p, "measured": setup_m},
        "run1_s": {"predicted": p1, "measured": run1_s},
        "run2_s": {"predicted": p2, "measured": run2_s},
        "costs": costs,
        "setup": setup,
        "outside_io_s": outside,
        "advised": advised,
        "first_use": first_use,
        "formula": "ratio = run 1 / (advise + relayout + replicate + run 2) measured (wall times), "
                   + ("(ORIG + w) / (advise + copies + plan + w) predicted (the model's I/O times, w = run 1's "
                      "wall time outside its I/O, advise as it ran, the copies as advise prices them)"
                      if outside is not None else "ORIG / (copies + plan) predicted (the model's I/O times and "
                      "copies)") + "; break-even = the smallest n >= 1 with n·run 1 >= setup + n·run 2",
    }


def predicted_payoff(trace, plan, system, files: dict, *, nodes: int | None = None, hint: str | None = None) -> dict:
    """What ``pario advise`` prints beside a plan: its setup on a store holding ``files`` (name →
    ``(size, layout)``; :func:`pario.plan.setup_cost.plan_setup`), one run without and with it
    (:func:`pario.run.predict.predict_plan`, as ``pario run`` predicts them), the whole-job
    ratio and the break-even runs — the functions ``pario run`` predicts its whole job with.
    ``{"setup", "run1_s", "run2_s", "model", "ratio", "break_even_runs"}``."""
    from ..plan.setup_cost import break_even_runs, whole_job_ratio  # lazy: pario.plan needs the C extension
    from ..plan.setup_cost import plan_setup
    from .predict import predict_plan

    setup = plan_setup(plan, system, files)
    orig = {f: lay for f, (_, lay) in files.items()}
    pred = predict_plan(trace, plan, system, orig, relaid=setup["relaid"], nodes=nodes, hint=hint)
    p1, p2, s = pred["ORIG"], pred["plan"], setup["seconds"]
    return {"setup": setup, "run1_s": p1, "run2_s": p2, "model": pred["model"],
            "ratio": whole_job_ratio(p1, s, p2), "break_even_runs": break_even_runs(p1, p2, s)}


def advise_payoffs(trace, plans: dict, best: str, system, original, *, nodes: int | None = None,
                   hint: str | None = None) -> tuple[dict, dict]:
    """What ``pario advise`` prints beside its plans: ``(scheme → its setup, the best plan's
    whole job)`` — every plan's copies on a store holding the traced files, each as large as
    its furthest traced request, on the ``original`` layout (spec, Layout or dict;
    :func:`pario.plan.setup_cost.plan_setup`), and :func:`predicted_payoff` for ``best``."""
    from ..plan.base import original_layouts
    from ..plan.setup_cost import plan_setup, trace_files

    _, per_file = original_layouts(original, trace, system)
    files = trace_files(trace, dict(zip(trace.files, per_file)).get)
    payoff = predicted_payoff(trace, plans[best], system, files, nodes=nodes, hint=hint)
    setups = {name: (payoff["setup"] if name == best else plan_setup(plan, system, files))
              for name, plan in plans.items()}
    return setups, payoff


def pays(n: int | None) -> str:
    """Break-even runs as words: ``after 1 run`` / ``after 4 runs`` / ``never (…)``."""
    if n is None:
        return "never (run 2 is not faster than run 1)"
    return f"after {n} run" + ("" if n == 1 else "s")


def judge(w: dict, tolerance: float = TOLERANCE) -> dict:
    """The whole job's verdict: ``{"verdict", "agrees", "q", "predicted_ratio",
    "measured_ratio", "break_even_runs", "sentence"}`` — :func:`pario.run.compare.classify` on
    the whole-job ratios, and whether (and after how many runs) the plan pays for itself."""
    pr, mr = w["ratio"]["predicted"], w["ratio"]["measured"]
    verdict, q = classify(pr, mr, tolerance)
    be = w["break_even_runs"]
    c = w["costs"]
    own = (f"advise {c['advise_s']:.3f} s" + (f" + relayout {c['relayout_s']:.3f} s" if c["relayout_s"] else "")
           + f" + replicate {c['replicate_s']:.3f} s")
    if verdict == NOT_COMPARABLE:
        sentence = "Whole job not comparable: " + ("no predicted ratio" if pr is None else "no measured ratio") + "."
    else:
        w_out = w.get("outside_io_s")
        how = ("the copies as priced by pario advise; I/O times" if w_out is None else
               f"advise as it ran + the copies as priced by pario advise; the model's I/O times + "
               f"{w_out:.3f} s outside the I/O in each run, as run 1 spent it")
        sentence = (f"Whole job {verdict}: run 1 / (setup + run 2) = {mr:.2f}× measured ({own}; wall times) "
                    f"against {pr:.2f}× predicted (setup {w['setup_s']['predicted']:.3f} s, {how}); "
                    f"measured/predicted = {q:.2f}.")
        if verdict != AS_PREDICTED and w_out is not None:
            diff = [f"{label} {w[k]['measured'] - w[k]['predicted']:+.3f} s" for k, label in
                    (("setup_s", "setup"), ("run1_s", "run 1"), ("run2_s", "run 2"))
                    if w[k]["measured"] is not None and w[k]["predicted"] is not None]
            sentence += f" Measured minus predicted: {', '.join(diff)}."
        if verdict != AS_PREDICTED and w_out is None:
            out = [f"{w[k]['measured'] - w[k]['predicted']:.3f} s" for k in ("run1_s", "run2_s")
                   if w[k]["measured"] is not None and w[k]["predicted"] is not None]
            sentence += (f" Not in the prediction: planning (advise {c['advise_s']:.3f} s)"
                         + (f" and the runs' wall time beyond their predicted I/O ({' and '.join(out)})" if out else "")
                         + ".")
    sentence += (f" Break-even (runs until the plan has paid for its setup): {pays(be['measured'])} measured, "
                 f"{pays(be['predicted'])} predicted.")
    fu = w.get("first_use")
    if fu is not None:
        sentence += (f" Not judged: this run also compiled pario's kernels ({c['compile_s']:.3f} s, numba's first use "
                     f"after installation; later runs load them from its cache, python -m pario.jit compiles them "
                     f"ahead); with it the whole job was "
                     + (f"{fu['ratio']:.2f}×" if fu["ratio"] is not None else "not measured")
                     + f", break-even {pays(fu['break_even_runs'])}.")
    return {"verdict": verdict, "agrees": None if verdict == NOT_COMPARABLE else verdict == AS_PREDICTED, "q": q,
            "predicted_ratio": pr, "measured_ratio": mr, "tolerance": tolerance, "break_even_runs": dict(be),
            "sentence": sentence}


__all__ = ["whole_job", "judge", "predicted_payoff", "advise_payoffs", "step_seconds", "step_compile", "pays",
           "SETUP_STEPS"]
