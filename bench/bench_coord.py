"""The cost of a store's metadata operations under each coordination member, side by side
in one run on one directory (docs/multinode.md, "What it costs").

    python bench/bench_coord.py [--dir DIR] [--n 200] [--cluster CLUSTER_DIR]

For "host" (one machine: flock, the mapped journal, SQLite WAL) and "pfs" (nodes of a
parallel file system: fcntl locks, the journal with pread/pwrite, SQLite with a rollback
journal read through pario's coherent VFS), on stores made in DIR (default: a new temporary
directory; give a directory on the parallel file system to measure it there), and with
``--cluster`` (a `pario cluster`'s directory) "rados" (a store on the rados plane with its
leased cls_lock locks, the journal object and the metadata through Ceph's SQLite VFS):

- open      a store opened shared and closed (the store lock, the metadata, the journal);
- create    a file created in an open store (a metadata transaction + its catalog line);
- RMT       one RMT change of a shared journal (the journal lock, an append, the publication);
- follow    a lookup by a second opener of the store after a change of the first (the
            catch-up: the mapped header's generation, or a re-read of the header and record);
- lookup    a lookup with nothing new (the common case of every served request).

The RMT operations run on the engines of two stores opened shared (two openers of one
journal).  Medians of ``--n`` operations (µs); the last columns are each member / host.
Not a test.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path


def _median_us(fn, n: int) -> float:
    times = []
    for i in range(n):
        t = time.perf_counter()
        fn(i)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e6


def measure(root: Path, member: str, n: int, cluster: str | None = None) -> dict[str, float]:
    from pario.store import Store, init_store

    if member == "rados":
        store = init_store(root / f"store-{member}", None, backend="rados", cluster=cluster, coord=member)
    else:
        store = init_store(root / f"store-{member}", "ceda-hdd8", coord=member)
    Store(store).close()                                    # the journal made by a first opener
    out = {"open": _median_us(lambda i: Store(store, shared=True).close(), max(n // 10, 5))}
    with Store(store, shared=True) as st:
        out["create"] = _median_us(lambda i: st.create(f"f{i}", "fixed:64k"), n)
    sa, sb = Store(store, shared=True), Store(store, shared=True)
    a, b = sa.rmt.core, sb.rmt.core
    a.register(11, 1, 0, 0, "r")
    a.add(1, 11, 0, 0, 1 << 30, 0)
    out["RMT"] = _median_us(lambda i: a.mark(1, 11 if i % 2 else 0, 4096 * i, 4096 * i + 4096), n)

    def follow(i):
        a.mark(1, 0, 4096 * i, 4096 * i + 4096)
        t = time.perf_counter()
        b.route(1, 4096 * i, 4096 * i + 4096)
        return time.perf_counter() - t

    out["follow"] = statistics.median(follow(i) for i in range(n)) * 1e6
    out["lookup"] = _median_us(lambda i: b.route(1, 0, 4096), n)
    sa.close()
    sb.close()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=None, help="where the stores are made (default: a new temporary directory)")
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--cluster", default=None, help="a pario cluster's directory: measure the rados member too")
    a = ap.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="pario-bench-coord-", dir=a.dir))
    members = ("host", "pfs", "rados") if a.cluster else ("host", "pfs")
    res = {m: measure(root, m, a.n, a.cluster) for m in members}
    print(f"coordination bench: {root}, medians of {a.n} operations (µs)")
    print(f"{'operation':>9}" + "".join(f" {m:>10}" for m in members) + "".join(f" {m + '/host':>11}" for m in members[1:]))
    for op in res["host"]:
        h = res["host"][op]
        print(f"{op:>9}" + "".join(f" {res[m][op]:10.1f}" for m in members)
              + "".join(f" {res[m][op] / h:11.2f}" for m in members[1:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
