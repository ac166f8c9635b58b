"""Simulator speed: pario's event core vs the same model written with SimPy.

Standard scenario: P ranks (2 per client node) write R blocking 256 KiB requests each, IOR
strided, on the 8 HDD servers of ``ceda-hdd8`` with fixed 64 KiB striping (4 sub-requests
per request).  Both simulators model the same thing: per sub-request the client-node link,
then the server link (cut-through), then the server's device with head tracking; a rank
issues its next request when all sub-requests of the previous one are done.

Prints sub-requests per second of both, their ratio, the makespans (they should agree up to
the tie-breaking of simultaneous events), and the events/s of pario's core on a large run.

    .venv/bin/python bench/bench_simulate.py [--ranks 64] [--requests 200] [--large-ranks 1024 --large-requests 2500]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from pario.layout import Striped, map_trace
from pario.simulate import simulate
from pario.system import load_system
from pario.trace import Trace

XFER = 256 * 1024
STRIPE = 64 * 1024


def scenario(ranks: int, requests: int) -> Trace:
    rank = np.repeat(np.arange(ranks), requests)
    i = np.tile(np.arange(requests), ranks)
    off = (i * ranks + rank) * XFER
    return Trace.from_arrays(rank, None, np.ones(len(rank), dtype=np.int8), off, np.full(len(rank), XFER))


def simpy_run(trace: Trace, system, layout) -> tuple[float, float]:
    import simpy

    sub = map_trace(trace, layout)
    env = simpy.Environment()
    ppn = system.procs_per_node
    n_nodes = int(trace.rank.max()) // ppn + 1
    client = [simpy.Resource(env, 1) for _ in range(n_nodes)]
    slink = [simpy.Resource(env, 1) for _ in range(system.n)]
    dev = [simpy.Resource(env, 1) for _ in range(system.n)]
    head = [-1] * system.n
    alpha, beta = system.alpha_table(), system.beta_table()
    e, t = system.network.e, system.network.t
    starts = np.searchsorted(sub.req, np.arange(len(trace) + 1))
    done = [0.0]

    def receive(j, dur, arrived):
        with slink[j].request() as rq:
            yield rq
            yield env.timeout(dur)
        arrived.succeed()

    def subreq(k, node):
        j, loc, ln = int(sub.server[k]), int(sub.local[k]), int(sub.length[k])
        dur = e + ln * t
        arrived = env.event()
        with client[node].request() as rq:
            yield rq
            env.process(receive(j, dur, arrived))
            yield env.timeout(dur)
        yield arrived
        with dev[j].request() as rq:
            yield rq
            seq = 1 if head[j] == loc else 0
            head[j] = loc + ln
            yield env.timeout(alpha[j, 1, seq] + ln * beta[j, 1])

    def rank_proc(rows, node):
        for r in rows:
            procs = [env.process(subreq(k, node)) for k in range(starts[r], starts[r + 1])]
            yield env.all_of(procs)
        done[0] = max(done[0], env.now)

    order = np.lexsort((trace.order, trace.rank))
    for rk in np.unique(trace.rank):
        rows = order[trace.rank[order] == rk]
        env.process(rank_proc(rows, int(rk) // ppn))
    t0 = time.perf_counter()
    env.run()
    return done[0], time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--large-ranks", type=int, default=1024)
    ap.add_argument("--large-requests", type=int, default=2500)
    args = ap.parse_args()
    system = load_system("ceda-hdd8")
    layout = Striped.fixed(STRIPE, range(system.n))
    tr = scenario(args.ranks, args.requests)
    simulate(tr, system, layout)  # JIT warm-up (cached after the first run)
    res = simulate(tr, system, layout)
    n_sub = res.n_subrequests
    ours = n_sub / res.wall_s
    try:
        sp_makespan, sp_wall = simpy_run(tr, system, layout)
    except ImportError:
        print("simpy not installed: pip install simpy")
        sp_makespan, sp_wall = float("nan"), float("nan")
    theirs = n_sub / sp_wall
    print(f"standard scenario: {args.ranks} ranks x {args.requests} requests = {n_sub} sub-requests")
    print(f"  pario : {res.wall_s:8.3f} s  {ours:12.0f} sub-requests/s  {res.events_per_s:12.0f} events/s  "
          f"makespan {res.makespan_s:.6f} s")
    print(f"  simpy : {sp_wall:8.3f} s  {theirs:12.0f} sub-requests/s  makespan {sp_makespan:.6f} s")
    print(f"  ratio pario/simpy: {ours / theirs:.1f}x   makespan difference {abs(res.makespan_s / sp_makespan - 1) * 100:.2f} %")
    if args.large_ranks:
        big = scenario(args.large_ranks, args.large_requests)
        t0 = time.perf_counter()
        r = simulate(big, system, layout)
        wall = time.perf_counter() - t0
        print(f"large: {args.large_ranks} ranks, {r.n_subrequests} sub-requests, {r.n_events} events in {wall:.1f} s "
              f"({r.n_subrequests / wall:.0f} sub-requests/s, {r.n_events / wall:.0f} events/s incl. mapping)")


if __name__ == "__main__":
    main()
