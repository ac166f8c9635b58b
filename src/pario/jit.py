"""pario's compiled kernels (numba) as a cost of their own: the compile on first use, measured,
and done ahead.

numba compiles a kernel the first time it is called with a given signature, and with
``cache=True`` (every kernel of pario) keeps the machine code on disk: in ``__pycache__``
beside the module, or numba's per-user cache directory when that one is not writable
(``NUMBA_CACHE_DIR`` overrides both).  A new installation therefore pays the compile once, in
the first command that plans or prices (about 20–25 s for all planners on a 2-CPU machine);
every later process loads the code in milliseconds.  ``pario run`` counts that compile apart
from the setup it judges (:mod:`pario.run.whole_job`): a user pays it once per
installation, not once per plan.

- :class:`CompileClock` — the seconds numba spent compiling (not loading from its cache) while
  it is active, and how many kernels: numba's ``numba:compile`` events, the outermost only (a
  kernel's callees compile inside it).
- :func:`warm` — compile ahead: every planner and the simulator on small built-in workloads
  (independent and collective, HDD-only and hybrid systems), so that the signatures real
  traces use are in the cache.  ``python -m pario.jit`` runs it and prints what it compiled;
  ``scripts/setup.sh`` runs it after every install.
"""

from __future__ import annotations

import contextlib
import io
import tempfile
import time
from pathlib import Path


class CompileClock:
    """Seconds numba spends compiling while active (``with CompileClock() as c: …``, then
    ``c.seconds``, ``c.kernels``); a kernel loaded from numba's cache counts nothing."""

    def __init__(self):
        self.seconds = 0.0
        self.kernels = 0
        self._depth = 0
        self._t0 = 0.0
        self._listener = None

    # numba.core.event.Listener's two methods (duck-typed: the class is built in __enter__ so
    # that importing this module does not import numba)
    def on_start(self, event) -> None:
        if self._depth == 0:
            self._t0 = time.perf_counter()
        self._depth += 1

    def on_end(self, event) -> None:
        self._depth -= 1
        if self._depth == 0:
            self.seconds += time.perf_counter() - self._t0
            self.kernels += 1

    def __enter__(self) -> "CompileClock":
        from numba.core import event as ev

        clock = self

        class _Listener(ev.Listener):
            def on_start(self, event):
                clock.on_start(event)

            def on_end(self, event):
                clock.on_end(event)

        self._listener = _Listener()
        ev.register("numba:compile", self._listener)
        return self

    def __exit__(self, *exc) -> None:
        from numba.core import event as ev

        ev.unregister("numba:compile", self._listener)
        self._listener = None


def _cli(argv: list[str]) -> None:
    from .cli import main

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
        rc = main(argv)
    if rc != 0:
        from . import ParioError

        raise ParioError(f"pario {' '.join(argv[:2])} failed while compiling the kernels: "
                         + (err.getvalue().strip().splitlines() or ["no message"])[-1])


def warm() -> CompileClock:
    """Compile every kernel the planners and the simulator use (module docstring) and return
    the clock: ``seconds`` 0 and ``kernels`` 0 when everything came from the cache."""
    with CompileClock() as clock, tempfile.TemporaryDirectory(prefix="pario-jit-") as d:
        t = Path(d)
        # the workloads of the papers' experiments, small: strided and random independent
        # transfers (CEDA, CI-LAYOUT, PADP, PSA), a collective one (HACIO's two-phase order)
        _cli(["workload", "ior", "--procs", "4", "--xfer", "16k", "--block", "16k", "--segments", "16",
              "--pattern", "strided", "--op", "read", "-o", str(t / "strided.parquet")])
        _cli(["workload", "ior", "--procs", "4", "--xfer", "16k", "--block", "64k", "--segments", "4",
              "--pattern", "random", "--op", "both", "-o", str(t / "random.parquet")])
        _cli(["workload", "ior", "--procs", "4", "--xfer", "64k", "--block", "256k", "--collective",
              "--op", "both", "-o", str(t / "collective.parquet")])
        _cli(["workload", "btio", "--procs", "4", "--niter", "2", "-o", str(t / "btio.parquet")])
        # a program that re-reads (IOR -i): requests of a stream out of their issue order
        from .trace import load, save
        from .trace.core import Trace

        df = load(t / "strided.parquet").to_frame()
        df["order"] = df["order"].max() - df["order"]
        save(Trace.from_frame(df), t / "reread.parquet")
        for trace in ("strided", "random", "collective", "btio", "reread"):
            for system in ("ceda-hdd8", "hacio-6h2s"):
                _cli(["advise", str(t / f"{trace}.parquet"), "--system", system, "--schemes", "all",
                      "-o", str(t / f"{trace}-{system}.json")])
                _cli(["simulate", str(t / f"{trace}.parquet"), "--system", system,
                      "--plan", str(t / f"{trace}-{system}.json")])
        _cli(["simulate", str(t / "btio.parquet"), "--system", "hacio-6h2s", "--layout", "fixed:64k",
              "--collective", "--order", "hacio"])
    return clock


def main() -> int:
    """``python -m pario.jit``: :func:`warm`, then one line of what it compiled."""
    from . import ParioError

    try:
        clock = warm()
    except ParioError as exc:
        print(f"pario: error: {exc}")
        return 2
    if clock.kernels:
        print(f"pario: compiled {clock.kernels} kernel(s) in {clock.seconds:.1f} s (numba; cached for later runs)")
    else:
        print("pario: every kernel was already compiled (numba's cache)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["CompileClock", "warm"]
