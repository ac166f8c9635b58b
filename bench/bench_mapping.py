"""The layout mapping: the store engine's (``pario.layout.map_requests``, store/layout.c) vs
the numpy mapping it replaced (``tests/oracles/layout.py``), side by side in one run.

    python bench/bench_mapping.py [--requests 1000000] [--extents 100000] [--repeat 3]

Random requests (offsets below 16 GiB, 1 byte to 1 MiB, seeded) mapped under a fixed
64 KiB stripe over 8 servers, a 2-D layout (2 groups of 4) and an extent map of
``--extents`` extents (128 KiB every 256 KiB, the striped layout as default).  Per layout:
the best of ``--repeat`` timings of each, their ratio (numpy / engine: above 1 the engine is
faster), and that both gave the same rows.  Also the first call on a new extent map (its
rows copied into the engine, once per map), against the numpy mapping's.  Not
a test: no assertions beyond the rows being equal.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from oracles.layout import map_requests as numpy_map  # noqa: E402

from pario.layout import ExtentMap, Grouped, Striped, map_requests  # noqa: E402


def best(fn, repeat: int):
    t_min, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        t_min = min(t_min, time.perf_counter() - t)
    return t_min, out


def same(a, b) -> bool:
    return all(np.array_equal(getattr(a, c), getattr(b, c)) for c in ("req", "server", "local", "length", "datafile"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--extents", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)
    rng = np.random.default_rng(1)
    off = rng.integers(0, 1 << 34, a.requests)
    ln = rng.integers(1, 1 << 20, a.requests)
    striped = Striped.fixed(64 << 10, range(8))
    ne = a.extents
    eo = np.arange(ne, dtype=np.int64) * (256 << 10)

    def extent_map():
        return ExtentMap(eo, np.full(ne, 128 << 10), eo % 8, eo // 2, np.ones(ne, dtype=np.int64), default=striped)

    cases = [("striped 64K × 8", striped, off), ("2-D 2 × 4, 64K", Grouped(((0, 1, 2, 3), (4, 5, 6, 7)), 64 << 10), off),
             (f"extent map, {ne} extents", extent_map(), off % (ne * (256 << 10)))]
    print(f"{a.requests} requests, best of {a.repeat}")
    print("| layout | numpy s | engine s | numpy / engine | sub-requests | rows equal |\n|---|---|---|---|---|---|")
    for name, lay, x in cases:
        map_requests(lay, x[:1], ln[:1])        # the engine's parse, outside the timing
        t_np, r_np = best(lambda: numpy_map(lay, x, ln), a.repeat)
        t_en, r_en = best(lambda: map_requests(lay, x, ln), a.repeat)
        print(f"| {name} | {t_np:.3f} | {t_en:.3f} | {t_np / t_en:.2f} | {len(r_en)} | {same(r_np, r_en)} |")
    x = off[:1000] % (ne * (256 << 10))
    t_np, _ = best(lambda: numpy_map(extent_map(), x, ln[:1000]), a.repeat)
    t_en, _ = best(lambda: map_requests(extent_map(), x, ln[:1000]), a.repeat)
    print(f"\nfirst call on a new {ne}-extent map, 1000 requests: numpy {t_np:.3f} s, engine {t_en:.3f} s "
          f"(the engine copies the map once; later calls on it reuse it)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
