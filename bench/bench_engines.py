"""Which engine for the planners' per-request group-bys: pario's numba kernels against numpy's
sorts, pyarrow compute, and (when installed) DuckDB and Polars, on one trace, side by side.

    .venv/bin/python bench/bench_engines.py [--trace /tmp/pario-scale/ior-random-10000000.parquet]
                                            [--repeat 3]

Three steps every model call needs (issue 18, docs/design.md "Engine choice"):

1. *request classes*: the distinct (op, size) pairs with each request's class and the counts;
2. *p_b*: the number of distinct ranks in each batch (batches by order: the k-th request of
   every rank);
3. *service order*: the rows sorted by (batch, order, row) — the order the distribution
   model serves them in.

Each engine computes the same result (checked against numpy's before timing); the best of
``--repeat`` runs is printed, with the ratio to pario's kernel.  DuckDB and Polars are not
dependencies of pario: install them into the venv to include them (``pip install duckdb
polars``), else they are reported as not installed.  No assertion: figures only.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def best(fn, repeat):
    out, ts = None, []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t0)
    return min(ts), out


def rows_of(out) -> int:
    """The number of result rows, whatever the engine returned."""
    if isinstance(out, dict):  # duckdb fetchnumpy
        return len(next(iter(out.values())))
    if isinstance(out, tuple):  # pario's (groups, keys, counts) or (p, ...)
        return len(out[1])
    if hasattr(out, "num_rows"):
        return out.num_rows
    if hasattr(out, "height"):
        return out.height
    return len(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default="/tmp/pario-scale/ior-random-10000000.parquet")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)

    import pyarrow as pa
    import pyarrow.compute as pc

    from pario import grouping
    from pario.model.batches import _by_order
    from pario.trace.io import load

    tr = load(args.trace)
    n = len(tr)
    op, length, rank, order = (np.ascontiguousarray(a) for a in (tr.op, tr.length, tr.rank, tr.order))
    bid = _by_order(rank, order)
    key = op.astype(np.int64) * (int(length.max()) + 1) + length
    table = pa.table({"op": op, "length": length, "rank": rank, "order": order, "bid": bid,
                      "row": np.arange(n, dtype=np.int64)})
    grouping.dense_groups(key[:1000])  # compile / load the kernels
    grouping.service_order(bid[:1000], order[:1000])

    # the reference answers (numpy, by sorting)
    u, inv, cnt = np.unique(key, return_inverse=True, return_counts=True)
    nb = int(bid.max()) + 1
    pair = np.unique(bid * (int(rank.max()) + 1) + rank)
    p_ref = np.bincount(pair // (int(rank.max()) + 1), minlength=nb)
    perm_ref = np.lexsort((order, bid))

    engines = {}
    engines["pario (numba)"] = {
        "classes": lambda: grouping.dense_groups(key),
        "p_b": lambda: grouping.ranks_per_batch(rank, bid, grouping.service_order(bid, order), nb),
        "service order": lambda: grouping.service_order(bid, order),
    }
    engines["numpy (sort)"] = {
        "classes": lambda: np.unique(key, return_inverse=True, return_counts=True),
        "p_b": lambda: np.bincount(np.unique(bid * (int(rank.max()) + 1) + rank) // (int(rank.max()) + 1),
                                   minlength=nb),
        "service order": lambda: np.lexsort((order, bid)),
    }
    engines["pyarrow compute"] = {
        "classes": lambda: table.group_by(["op", "length"]).aggregate([("row", "count")]),
        "p_b": lambda: table.group_by("bid").aggregate([("rank", "count_distinct")]),
        "service order": lambda: pc.sort_indices(table, sort_keys=[("bid", "ascending"), ("order", "ascending"),
                                                                   ("row", "ascending")]),
    }
    try:
        import duckdb

        con = duckdb.connect()
        con.register("t", table)
        engines["duckdb"] = {
            "classes": lambda: con.execute("SELECT op, length, count(*) FROM t GROUP BY op, length").fetchall(),
            "p_b": lambda: con.execute("SELECT bid, count(DISTINCT rank) FROM t GROUP BY bid").fetchnumpy(),
            "service order": lambda: con.execute("SELECT row FROM t ORDER BY bid, \"order\", row").fetchnumpy(),
        }
    except ImportError:
        engines["duckdb"] = None
    try:
        import polars as pl

        df = pl.from_arrow(table)
        engines["polars"] = {
            "classes": lambda: df.group_by(["op", "length"]).len(),
            "p_b": lambda: df.group_by("bid").agg(pl.col("rank").n_unique()),
            "service order": lambda: df.select(pl.arg_sort_by(["bid", "order", "row"])),
        }
    except ImportError:
        engines["polars"] = None

    # pario's answers equal numpy's; the others are checked by their number of rows below
    g, keys, _ = grouping.dense_groups(key)
    assert np.array_equal(keys, u) and np.array_equal(g, inv.ravel())
    assert np.array_equal(grouping.ranks_per_batch(rank, bid, grouping.service_order(bid, order), nb), p_ref)
    assert np.array_equal(grouping.service_order(bid, order), perm_ref)

    steps = ("classes", "p_b", "service order")
    times = {}
    for name, ops in engines.items():
        if ops is None:
            continue
        for step in steps:
            times[name, step], out = best(ops[step], args.repeat)
            rows = {"classes": len(u), "p_b": nb, "service order": n}[step]
            got = rows_of(out[0] if name == "numpy (sort)" and step == "classes" else out)
            assert got == rows, (name, step, got, rows)
    print(f"{args.trace}: {n:,} requests, {len(u)} classes, {nb:,} batches; best of {args.repeat}, "
          f"ratio = time / pario's")
    print(f"{'engine':<18}" + "".join(f"{s:>24}" for s in steps))
    for name, ops in engines.items():
        if ops is None:
            print(f"{name:<18}  not installed")
            continue
        cells = [f"{times[name, s]:8.3f} s ({times[name, s] / times['pario (numba)', s]:5.1f}×)" for s in steps]
        print(f"{name:<18}" + "".join(f"{c:>24}" for c in cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
