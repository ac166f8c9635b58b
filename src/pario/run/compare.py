"""Prediction against measurement for ``pario run``: the verdict and its reasons.

The prediction (:mod:`pario.run.predict`) prices run 1's trace with ``pario advise``'s model
under the original layout (``ORIG``, what run 1 ran on) and under the plan as run 2 runs it:
its layouts and replicas, and for collective requests its collective order with the
aggregators and buffer of the trace's own hints (the simulated two-phase run advise chose
the order with).
The measurement is each run's traced I/O time (:func:`pario.run.measure.io_busy`: the time
with a request of any rank in flight, the quantity the model prices; the program's gaps
between its requests are reported apart).  :func:`judge` compares
the two speed-ups, run 1 / run 2:

    predicted_ratio = ORIG / plan          measured_ratio = io_s(run 1) / io_s(run 2)
    q = measured_ratio / predicted_ratio

- ``as predicted``               when 1/(1 + TOLERANCE) <= q <= 1 + TOLERANCE;
- ``faster than predicted``      when q > 1 + TOLERANCE (run 2 gained more than predicted);
- ``contradicts the prediction`` when q < 1/(1 + TOLERANCE) (run 2 gained less than
  predicted, or lost where it was predicted to gain).

``TOLERANCE`` = 0.25: a fixed factor of 1.25 either way, chosen once for all workloads (not
per run, not fitted to any result).  It is there because one pair of runs is one sample:
repetitions of one workload in ``examples/README.md`` vary by tens of per cent (measured I/O
ratio 1.88–2.62 for write + read strided), so a narrower band would call noise a
contradiction; it is not widened to excuse larger differences.  ``agrees`` is true only for
``as predicted``.  When a ratio cannot be formed (no
trace times, a zero prediction) the verdict is ``not comparable`` and ``agrees`` is None.

The reasons are built only from what the run measured (each with its numbers in
``evidence``), never from fixed text alone:

- ``collective_order`` — the plan runs the collective requests in another order than run 1
  (e.g. ROMCIO → HACIO): the simulated two-phase time of each run's order, with the
  aggregators and buffer it was priced with;
- ``not_redirected`` — the plan has no replica or run 2 had no RMT hit, and it keeps run 1's
  collective order: both runs used the original layout, so the prediction is "no change";
- ``page_cache`` — present exactly when the ranks did not use ``O_DIRECT`` (no ``--direct``,
  no ``--testbed``): run 1's bytes per second of traced I/O and its median request latency
  against the cheapest request the profile prices (α + s·β of its fastest server);
- ``shared_device`` — ``--direct`` without a testbed, and the store's server directories
  lie on fewer devices than the profile has servers (``st_dev``);
- ``request_latency`` — when the verdict disagrees: each class of run 2's requests
  (redirected or not, read or write) whose own speed-up — the total latency of the same
  requests in run 1 / in run 2 (:func:`pario.run.measure.request_latencies`: mean over
  mean, so a few slow requests count with their full time) — is off the predicted ratio by
  more than the tolerance in the same direction as the whole run;
- ``between_requests`` — when the verdict disagrees and the time the slowest rank spent
  between its requests (its traced span minus its requests' latencies,
  :func:`pario.run.measure.time_in_requests`) changed the way of the disagreement by at
  least ``BETWEEN_SHARE`` (a quarter) of the traced span's change;
- ``dirty_copy_back`` — run 2 wrote to replicas (RMT hits among its writes): the dirty data
  is copied back at close, outside the traced I/O; how much of the wall-time difference is
  in ``close`` when the program prints its phase times;
- ``collective`` — run 1 had collective requests and the plan has replicas: the model priced
  the aggregators' two-phase requests, the redirector serves their runs piece by piece;
- ``devices`` — on a testbed: each server's device requests and bytes measured in each run
  (cgroup counters) against the model's sub-requests and bytes per server for run 1's trace
  under ORIG (run 1) and under the plan (run 2), naming the server whose measured load
  disagrees most (largest |log((measured + 1) / (predicted + 1))| of the requests), and the
  time per device request on the server the model finds busiest (traced I/O time / its
  measured requests) against the model's (its busy time / sub-requests);
- ``busy_machine`` — the load average exceeded the number of CPUs during the runs.

:func:`predicted_servers` computes the per-server prediction with pario's own model
(:func:`pario.layout.server_load`, :class:`pario.model.DistributionModel`) from run 1's trace
as ``pario advise`` planned it (collective requests as the aggregators' requests).
"""

from __future__ import annotations

import math

from ..units import format_size

TOLERANCE = 0.25
BETWEEN_SHARE = 0.25   # time between requests is a reason when it is >= this share of the span's change
AS_PREDICTED, FASTER, CONTRADICTS, NOT_COMPARABLE = (
    "as predicted", "faster than predicted", "contradicts the prediction", "not comparable")


# ====================================================================== the model's side
def planned_view(trace, system, nodes: int | None = None):
    """Run 1's trace as ``pario advise`` planned it: collective requests as the aggregators'
    two-phase requests (:func:`pario.plan.collective.aggregator_view`) with the trace's own
    hints — its aggregators and ``cb_buffer_size`` (:func:`pario.plan.collective.two_phase`),
    a ``cb_nodes`` hint placed on ``nodes`` client nodes as ROMIO places it — as ``pario run``
    has ``pario advise --nodes`` resolve them."""
    from ..plan.collective import aggregator_view, romio_view

    trace = romio_view(trace)       # calls ROMIO runs as independent I/O: the ranks' own requests
    if not trace.collective.any():
        return trace
    return aggregator_view(trace, system.procs_per_node, nodes=nodes)


def plan_layouts(plan, files, orig_layouts: dict | None = None) -> tuple[dict, dict]:
    """(ORIG, plan) layouts per file of a :class:`pario.plan.Plan`: the original layouts, and
    for files the plan routes to a replica that replica's layout (a CEDA extent map, whose
    default is the original layout).  ``orig_layouts``: the layouts the files had in run 1
    (the store's, before ``pario replicate`` applied the plan's): ORIG is then those, and the
    plan's layout of a file (PADP, PSA, CI-LAYOUT) replaces it in the plan."""
    default = plan.layouts.get("*")
    orig, new = {}, {}
    for f in files:
        if orig_layouts is not None and orig_layouts.get(f) is not None:
            orig[f] = orig_layouts[f]
            lf = plan.layouts.get(f, orig[f])
        else:
            lf = plan.layouts.get(f, default)
            orig[f] = lf
        reps = [r for r in plan.replicas.get(f, []) if r.get("layout") is not None]
        routed = any(r.get("rule") == "replica" and r.get("file") in (f, "*") for r in plan.routing)
        new[f] = reps[0]["layout"] if reps and routed else lf
    return orig, new


def plan_batching(plan) -> str:
    """The batching (:mod:`pario.model.batches`) a plan was made with — its ``params["by"]``,
    ``pario advise --by`` — so that ``pario run`` prices both runs as ``advise`` priced the plan."""
    return (plan.params or {}).get("by") or "auto"


def predicted_servers(trace, plan_path, system, orig_layouts: dict | None = None,
                      nodes: int | None = None) -> dict | None:
    """Per server, the model's prediction for run 1's trace under ORIG and under the plan:
    ``{"ORIG": {"predicted_s", "servers": {name: {"requests", "bytes", "busy_s"}}}, "plan": …}``
    (requests = sub-requests of :func:`pario.layout.server_load`; busy_s = the distribution
    model's per-server time, batched as the plan was made: :func:`plan_batching`; collective
    requests as :func:`planned_view` with ``nodes``).
    ``plan_path``: the plan file or a :class:`pario.plan.base.Plan`.  None when the plan has
    no layout for a file."""
    from ..layout import server_load
    from ..model import DistributionModel
    from ..model.batches import batch_ids
    from ..plan.base import Plan

    plan = plan_path if isinstance(plan_path, Plan) else Plan.load(plan_path, system)
    view = planned_view(trace, system, nodes)
    orig, new = plan_layouts(plan, view.files, orig_layouts)
    if any(v is None for v in orig.values()):
        return None
    bid = batch_ids(view, plan_batching(plan))
    out = {}
    for key, lay in (("ORIG", orig), ("plan", new)):
        nbytes, count = server_load(view, lay, system.n)
        cost = DistributionModel().trace_cost(view, lay, system, batches=bid)
        out[key] = {"predicted_s": float(cost.predicted_s),
                    "servers": {name: {"requests": int(c), "bytes": int(b), "busy_s": float(t)}
                                for name, b, c, t in zip(system.names, nbytes, count, cost.servers)}}
    return out


# ====================================================================== the verdict
def _ratio(a, b):
    if a is None or b is None or not (a > 0 and b > 0) or not (math.isfinite(a) and math.isfinite(b)):
        return None
    return a / b


def _speed(r: float) -> str:
    """A run-1/run-2 ratio as words: 2.00× faster / 1.50× slower / as fast."""
    if r >= 1.005:
        return f"{r:.2f}× faster"
    if r <= 1 / 1.005:
        return f"{1 / r:.2f}× slower"
    return "as fast"


def classify(predicted_ratio, measured_ratio, tolerance: float = TOLERANCE) -> tuple[str, float | None]:
    """(verdict, q = measured / predicted) by the rule of the module docstring."""
    if predicted_ratio is None or measured_ratio is None:
        return NOT_COMPARABLE, None
    q = measured_ratio / predicted_ratio
    if q > 1 + tolerance:
        return FASTER, q
    if q < 1 / (1 + tolerance):
        return CONTRADICTS, q
    return AS_PREDICTED, q


def _us(v) -> str:
    """Microseconds as µs, ms or s."""
    if v is None:
        return "–"
    if v >= 1e6:
        return f"{v / 1e6:.3f} s"
    if v >= 1000:
        return f"{v / 1000:.2f} ms"
    return f"{v:.0f} µs" if v >= 10 else f"{v:.1f} µs"


def _secs(v: float) -> str:
    """Signed seconds, in ms below 1 s."""
    return f"{v * 1e3:+.1f} ms" if abs(v) < 1 else f"{v:+.3f} s"


def _dur(v: float) -> str:
    """Seconds, in ms below 1 s."""
    return f"{v * 1e3:.1f} ms" if abs(v) < 1 else f"{v:.3f} s"


def _mb(b: float) -> str:
    return f"{b / (1 << 20):.1f} MiB"


_CLASS_WORDS = {"hit_read": "redirected reads (RMT hits)", "hit_write": "redirected writes (RMT hits)",
                "miss_read": "reads not redirected", "miss_write": "writes not redirected"}


def judge(s: dict, tolerance: float = TOLERANCE) -> dict:
    """The verdict of a ``pario run`` summary ``s`` (see the module docstring).

    Reads ``predicted`` (ORIG, plan), ``io_s`` (run1, run2), ``direct``, ``testbed``,
    ``replicas_planned``, ``redirected``, ``run1_s``, ``run2_s``, ``devices``,
    ``collective_requests_run1``, ``loadavg``, ``procs`` and ``evidence`` (``run1``: bytes,
    requests, median request bytes and latency; ``model_request_s``, ``server_mb_s``,
    ``servers``, ``store_devices``, ``phases``, ``requests``, ``ranks``, ``model_servers``,
    ``cpus``);
    missing pieces only leave out the reasons that need them.  Returns ``{"verdict",
    "agrees", "predicted_ratio", "measured_ratio", "q", "tolerance", "runs", "sentence",
    "reasons": [{"kind", "text", "evidence"}]}``."""
    pred, io = s.get("predicted") or {}, s.get("io_s") or {}
    ev = s.get("evidence") or {}
    p1, p2, m1, m2 = pred.get("ORIG"), pred.get("plan"), io.get("run1"), io.get("run2")
    pr, mr = _ratio(p1, p2), _ratio(m1, m2)
    verdict, q = classify(pr, mr, tolerance)
    runs = {"run1": {"predicted_s": p1, "measured_s": m1, "measured_over_predicted": _ratio(m1, p1)},
            "run2": {"predicted_s": p2, "measured_s": m2, "measured_over_predicted": _ratio(m2, p2)}}
    if verdict == NOT_COMPARABLE:
        sentence = ("Not comparable: " + ("no predicted time" if pr is None else "no measured I/O time")
                    + " for one of the runs.")
    else:
        head = verdict[0].upper() + verdict[1:]
        measured = f"{_speed(mr)} than" if _speed(mr) != "as fast" else "as fast as"
        predicted = _speed(pr) if _speed(pr) != "as fast" else "no change"
        sentence = (f"{head}: run 2's traced I/O was {measured} run 1's ({m2:.3f} s vs {m1:.3f} s) where "
                    f"pario advise predicted {predicted} ({p2:.3f} s vs {p1:.3f} s); measured/predicted = {q:.2f}, "
                    f"{'within' if verdict == AS_PREDICTED else 'outside'} the tolerance (a factor of "
                    f"{1 + tolerance:g} either way).")
    reasons: list[dict] = []

    def add(kind, text, **evidence):
        reasons.append({"kind": kind, "text": text, "evidence": evidence})

    hits = s.get("redirected") or {}
    n_rep = s.get("replicas_planned")
    relaid = s.get("relaid") or []
    ords = pred.get("order") or {}
    reordered = bool(ords) and ords.get("run1") != ords.get("run2")
    if reordered:
        parts = (pred.get("parts") or {}).get("collective") or {}
        tp = pred.get("two_phase") or {}
        agg = tp.get("aggregators")
        setting = (f"{'one aggregator per node' if agg is None else f'{agg} aggregator(s)'}, "
                   f"cb_buffer {format_size(tp['cb_buffer'])}") if tp.get("cb_buffer") else ""
        add("collective_order",
            f"the plan changes the collective order from {ords['run1'].upper()} (run 1) to {ords['run2'].upper()} "
            f"(run 2): the aggregators issue their file domains' pieces in that order (seed 004 §3, Algorithm 1 for "
            f"HACIO); the simulated two-phase run of run 1's collective requests ({setting}) takes "
            + (f"{parts['plan']:.3f} s against {parts['ORIG']:.3f} s"
               if parts.get("ORIG") is not None and parts.get("plan") is not None else "another time")
            + f", {'no change' if pr is None or _speed(pr) == 'as fast' else _speed(pr)} in all",
            run1=ords["run1"], run2=ords["run2"], collective_s=parts or None, two_phase=tp or None)
    if relaid:
        add("relaid", f"the plan gave {len(relaid)} file(s) a new layout, applied by pario replicate before run 2 "
            f"({', '.join(relaid[:3])}{', …' if len(relaid) > 3 else ''}); run 2's {hits.get('hit_requests', 0)} of "
            f"{hits.get('requests', 0)} requests hit replicas", relaid=relaid)
    elif not reordered and (n_rep == 0 or hits.get("hit_requests", 1) == 0):
        add("not_redirected",
            f"run 2 was not redirected: the plan has {n_rep} replica(s) and {hits.get('hit_requests', 0)} of run 2's "
            f"{hits.get('requests', 0)} requests hit the RMT, so both runs used the original layout; the model "
            f"predicts {'nothing' if pr is None else 'no change' if _speed(pr) == 'as fast' else _speed(pr)} "
            f"and any measured difference is run-to-run variation",
            replicas_planned=n_rep, hit_requests=hits.get("hit_requests", 0))

    disagree = verdict in (FASTER, CONTRADICTS)
    r1 = ev.get("run1") or {}
    if not s.get("direct"):
        lat, size, model_s = r1.get("median_latency_us"), r1.get("median_request_bytes"), ev.get("model_request_s")
        rate = (r1["bytes"] / m1) if r1.get("bytes") and m1 else None
        parts = ["no --direct or --testbed: the store's servers are directories on this machine, so the ranks' I/O "
                 "went through the page cache"]
        if rate is not None:
            parts.append(f"run 1 moved {_mb(r1['bytes'])} in {m1:.3f} s of traced I/O ({rate / (1 << 20):.0f} MiB/s"
                         + (f"; predicted {p1:.3f} s" if p1 else "") + ")")
        factor = None
        if lat and size and model_s:
            factor = model_s / (lat * 1e-6)
            cmp_ = f"{factor:.0f}× faster than" if factor >= 1 else f"{1 / factor:.1f}× slower than"
            parts.append(f"its median request ({size} bytes) took {_us(lat)}, {cmp_} the cheapest request of that "
                         f"size the profile prices ({model_s * 1e3:.2f} ms = α + s·β"
                         + (f", servers of {ev['server_mb_s']:.0f} MiB/s" if ev.get("server_mb_s") else "") + ")")
        parts_text = "; ".join(parts)
        add("page_cache", parts_text + ": the model's device costs (α, β per server) are not what these runs paid",
            run1_bytes=r1.get("bytes"), run1_io_s=m1, run1_bytes_per_s=rate, median_latency_us=lat,
            median_request_bytes=size, model_request_s=model_s, server_mb_s=ev.get("server_mb_s"),
            faster_than_model=factor)
    elif not s.get("testbed") and ev.get("store_devices") is not None and ev.get("servers") \
            and ev["store_devices"] < ev["servers"]:
        add("shared_device",
            f"--direct without a testbed: the profile's {ev['servers']} servers are directories on "
            f"{ev['store_devices']} device(s) here, so spreading requests over servers cannot run them in parallel "
            "as the model assumes",
            servers=ev["servers"], devices=ev["store_devices"])

    req = ev.get("requests")
    if disagree and req and mr is not None:
        for cls, row in req["classes"].items():
            a, b = row.get("run1_median_us"), row.get("run2_median_us")
            ma, mb = row.get("run1_mean_us"), row.get("run2_mean_us")
            if not row.get("matched") or not ma or not mb:
                continue
            gain = ma / mb    # this class's speed-up: its total latency in run 1 / in run 2 (same requests)
            if (verdict == CONTRADICTS and gain < pr / (1 + tolerance)) or \
                    (verdict == FASTER and gain > pr * (1 + tolerance)):
                extra = row["extra_s_max"] if verdict == CONTRADICTS else row["extra_s_min"]
                span = m2 - m1
                add("request_latency",
                    f"run 2's {row['n']} {_CLASS_WORDS[cls]} took {_us(b)} each (median; mean {_us(mb)}) against "
                    f"{_us(a)} (mean {_us(ma)}) for the same requests in run 1: in total {_speed(gain)} where "
                    f"{_speed(pr)} was predicted (summed over one rank's requests up to {_secs(extra)}, while the "
                    f"traced I/O span changed by {_secs(span)})",
                    cls=cls, n=row["n"], matched=row["matched"], run1_median_us=a, run2_median_us=b,
                    run1_mean_us=ma, run2_mean_us=mb, speedup=gain, extra_s=extra, span_change_s=span)

    lat_reasons = [r for r in reasons if r["kind"] == "request_latency"]
    if len(lat_reasons) > 1:   # the class that cost (or saved) most first
        rest = [r for r in reasons if r["kind"] != "request_latency"]
        reasons[:] = rest + sorted(lat_reasons, key=lambda r: -abs(r["evidence"]["extra_s"] or 0))

    rk = ev.get("ranks") or {}
    g1, g2 = rk.get("run1"), rk.get("run2")
    if disagree and g1 and g2:
        d_between, d_in = g2["between_s"] - g1["between_s"], g2["in_requests_s"] - g1["in_requests_s"]
        big = abs(d_between) >= BETWEEN_SHARE * abs(m2 - m1)
        if big and ((verdict == CONTRADICTS and d_between > 0) or (verdict == FASTER and d_between < 0)):
            add("between_requests",
                f"the rank with the longest traced span spent {_dur(g2['in_requests_s'])} inside its requests and "
                f"{_dur(g2['between_s'])} between them in run 2 (rank {g2['rank']}), against "
                f"{_dur(g1['in_requests_s'])} and {_dur(g1['between_s'])} in run 1 (rank {g1['rank']}): "
                f"{_secs(d_between)} of time between requests (the program itself, or waiting for a CPU), which "
                f"the model does not price, next to {_secs(d_in)} inside them",
                run1=g1, run2=g2, between_change_s=d_between, in_requests_change_s=d_in)

    if hits.get("hit_write_requests"):
        ph = ev.get("phases") or {}
        c1, c2 = (ph.get("run1") or {}).get("close"), (ph.get("run2") or {}).get("close")
        w1, w2 = s.get("run1_s"), s.get("run2_s")
        text = (f"{hits['hit_write_requests']} of run 2's writes went to replicas and made them dirty; the dirty "
                "data is copied back to the original at the file's close (pario.mpi) or when the program ends "
                "(MPI_Finalize, the preloaded library; CEDA seed 000 §5), which the traced I/O time does not include")
        evidence = {"hit_write_requests": hits["hit_write_requests"], "close_run1_s": c1, "close_run2_s": c2,
                    "wall_run1_s": w1, "wall_run2_s": w2}
        if c1 is not None and c2 is not None and w1 is not None and w2 is not None:
            dw, dc = w2 - w1, c2 - c1
            if dw * dc > 0:
                share = f", {100 * dc / dw:.0f} % of the wall-time difference ({dw:+.3f} s)"
            else:
                share = f", while the wall time changed by {dw:+.3f} s"
            text += f": the program measured close {c1:.3f} s → {c2:.3f} s ({dc:+.3f} s){share}"
        elif w1 is not None and w2 is not None and m1 is not None and m2 is not None:
            text += (f"; the untraced part of the wall time (start-up, open, close) went {w1 - m1:.3f} s → "
                     f"{w2 - m2:.3f} s")
        add("dirty_copy_back", text, **evidence)

    if s.get("collective_requests_run1") and n_rep:
        add("collective",
            f"run 1 had {s['collective_requests_run1']} collective requests: the model priced them as the "
            "aggregators' two-phase requests, while the RMT hits count the ranks' requests and the redirector "
            "serves each aggregator's runs piece by piece through the replica",
            collective_requests=s["collective_requests_run1"])

    dev, model = s.get("devices"), ev.get("model_servers")
    if dev and model and dev.get("run1") is not None and dev.get("run2") is not None:
        worst, rows = None, {}
        for run, key in (("run1", "ORIG"), ("run2", "plan")):
            for name, m in dev[run].items():
                pm = model[key]["servers"].get(name)
                if pm is None:
                    continue
                mreq, mb = m["read_ios"] + m["write_ios"], m["read_bytes"] + m["write_bytes"]
                rows.setdefault(run, {})[name] = {"measured_requests": mreq, "predicted_requests": pm["requests"],
                                                  "measured_bytes": mb, "predicted_bytes": pm["bytes"]}
                score = abs(math.log((mreq + 1) / (pm["requests"] + 1)))
                if worst is None or score > worst[0]:
                    worst = (score, run, name)
        if worst is not None:
            tot = {run: (sum(r["measured_requests"] for r in rows[run].values()),
                         sum(r["predicted_requests"] for r in rows[run].values())) for run in rows}
            _, run, name = worst
            w = rows[run][name]
            # time per request on the server the model finds busiest: the traced I/O span over
            # its measured device requests (an upper bound: the span includes its idle time)
            # against the model's busy time over its sub-requests
            per_req, parts = {}, []
            for r_, key, span_ in (("run1", "ORIG", m1), ("run2", "plan", m2)):
                srv = model[key]["servers"]
                busiest = max(srv, key=lambda k: srv[k].get("busy_s", 0.0))
                got = rows.get(r_, {}).get(busiest, {}).get("measured_requests")
                if span_ and got and srv[busiest]["requests"]:
                    per_req[r_] = {"server": busiest, "measured_s": span_ / got,
                                   "model_s": srv[busiest]["busy_s"] / srv[busiest]["requests"]}
                    parts.append(f"{r_.replace('run', 'run ')} {busiest} {per_req[r_]['measured_s'] * 1e3:.2f} ms "
                                 f"against {per_req[r_]['model_s'] * 1e3:.2f} ms")
            add("devices",
                f"testbed devices: run 1 served {tot['run1'][0]} requests (model: {tot['run1'][1]} sub-requests under "
                f"ORIG), run 2 {tot['run2'][0]} (model: {tot['run2'][1]} under the plan); the server whose measured "
                f"load disagrees most with the model is {name} in {run.replace('run', 'run ')}: "
                f"{w['measured_requests']} requests / {_mb(w['measured_bytes'])} measured against "
                f"{w['predicted_requests']} / {_mb(w['predicted_bytes'])} predicted"
                + ("; time per device request on the server the model finds busiest (traced I/O time / its device "
                   "requests, against the model's busy time / sub-requests): " + ", ".join(parts) if parts else ""),
                servers=rows, worst={"run": run, "server": name}, per_request=per_req)

    la, cpus = s.get("loadavg"), ev.get("cpus")
    if la and cpus:
        peak = max(la["start"][0], la["end"][0])
        if peak > cpus:
            add("busy_machine",
                f"the machine was busy: load average up to {peak:.1f} on {cpus} CPUs ({s.get('procs')} ranks), so "
                "traced times include waiting for a CPU", load=peak, cpus=cpus)

    return {"verdict": verdict, "agrees": None if verdict == NOT_COMPARABLE else verdict == AS_PREDICTED,
            "predicted_ratio": pr, "measured_ratio": mr, "q": q, "tolerance": tolerance, "runs": runs,
            "sentence": sentence, "reasons": reasons}
