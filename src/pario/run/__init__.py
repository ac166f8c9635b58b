"""``pario run``'s work: the full loop on an MPI program — run 1 traced, ``pario advise``,
``pario replicate``, run 2 redirected — and what it measured against what the model
predicted.  The ``pario run`` command (:mod:`pario.cli.run_cmd`) only parses its arguments,
calls :func:`run_loop` and prints the summary.

- :mod:`pario.run.loop` — :func:`run_loop`: the loop itself, returns the summary dict;
- :mod:`pario.run.launch` — which ``mpiexec``, the command line, one run in its own
  process group (killed as a whole on timeout);
- :mod:`pario.run.devices` — ``--testbed``: the store on the testbed's servers, the
  device counters of its cgroup;
- :mod:`pario.run.measure` — traced I/O time, RMT hits, per-request latencies of run 2
  against run 1, the program's phase times, file checksums;
- :mod:`pario.run.variation` — an unmodified program's files against its own without
  pario, byte for byte outside the bytes that vary between two runs without pario;
- :mod:`pario.run.predict` — the predicted I/O time of both runs: the plan as run 2 runs it
  (layouts, replicas, collective order, the trace's aggregators and buffer), priced by the
  model ``pario advise`` used;
- :mod:`pario.run.compare` — prediction against measurement: :func:`judge` gives the
  verdict (``as predicted`` / ``faster than predicted`` / ``contradicts the prediction``,
  tolerance :data:`TOLERANCE`) and its reasons, each from measured evidence;
- :mod:`pario.run.whole_job` — the whole job: pario's own costs (advise, relayout,
  replicate, the flush at the end, the trace overhead), run 1 / (setup + run 2) and the
  break-even runs, predicted and measured, and their verdict.
"""

from .compare import TOLERANCE, classify, judge, predicted_servers
from .launch import find_mpiexec
from .loop import exit_status, run_loop
from .measure import io_span, request_latencies, rmt_hit_mask, rmt_hits

__all__ = ["run_loop", "exit_status", "judge", "classify", "TOLERANCE", "predicted_servers", "find_mpiexec",
           "io_span", "rmt_hits", "rmt_hit_mask", "request_latencies"]
