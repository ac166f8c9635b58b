"""pario's store on RADOS against Ceph's own client on the same OSDs, side by side in one run
(issue 17: "store on RADOS vs rados put of the same bytes on the same OSDs, >= 0.8x").

    python bench/bench_rados.py [--size 32m] [--repeat 3] [--keep-cluster DIR]

Root and Ceph needed (scripts/setup.sh ceph).  Brings up a `pario cluster` (1 HDD-like + 1
SSD-like server at the cluster's default throttles) in a temporary directory, a rados store
on it (object size 4 MiB), and for each server: `pario`'s put of SIZE bytes with a layout on
that server alone (`fixed:4m@SERVER`: one 4 MiB object per stripe unit) against `rados put`
of the same bytes into the same pool (Ceph's CLI, default 4 MiB objects), then the gets
against `rados get`.  Every repetition runs both sides, alternating which goes first; the
first repetition is a warm-up.  Prints each side's MiB/s and the ratio pario / rados
(median [min-max]); bytes verified after each get.  Then Ceph's own benchmark on the same
pools, ``rados bench SECONDS write -b 4M`` and ``seq`` at queue depths 1 and 16 (its default),
beside pario's put/get medians (``--bench-seconds 0`` skips it).  Not a test: no assertions.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _size(s: str) -> int:
    from pario.units import parse_size

    return int(parse_size(s))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="32m")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--bench-seconds", type=int, default=8, help="duration of each 'rados bench' (0: skip)")
    a = ap.parse_args()
    from pario import ParioError
    from pario.cluster import core
    from pario.store import Store, init_store

    size = _size(a.size)
    work = Path(tempfile.mkdtemp(prefix="pario-bench-rados-"))
    cdir = work / "cluster"
    t0 = time.time()
    try:
        cl = core.up(cdir, hdd=1, ssd=1, port_base=free_port_base(2))
    except ParioError as exc:
        raise SystemExit(f"bench_rados: {exc}") from None
    try:
        src = work / "src.bin"
        src.write_bytes(os.urandom(size))
        store = work / "store"
        init_store(store, None, backend="rados", cluster=str(cdir), object_size=4 << 20)
        env = {**os.environ, "CEPH_CONF": cl.conf}
        rows = []
        for srv in cl.servers:
            pool = f"pario-{srv.name}"
            res = {"pario put": [], "rados put": [], "pario get": [], "rados get": []}
            for k in range(a.repeat + 1):
                order = ("pario", "rados") if k % 2 == 0 else ("rados", "pario")
                for side in order:
                    name = f"b-{srv.name}-{k}"
                    out = work / f"out-{side}.bin"
                    if side == "pario":
                        t = time.perf_counter()
                        with Store(store) as st:
                            st.put(src, name, f"fixed:4m@{srv.name}")
                        tp = time.perf_counter() - t
                        t = time.perf_counter()
                        with Store(store) as st:
                            st.get(name, out)
                        tg = time.perf_counter() - t
                    else:
                        t = time.perf_counter()
                        subprocess.run(["rados", "-p", pool, "put", name, str(src)], check=True, env=env,
                                       capture_output=True, timeout=600)
                        tp = time.perf_counter() - t
                        t = time.perf_counter()
                        subprocess.run(["rados", "-p", pool, "get", name, str(out)], check=True, env=env,
                                       capture_output=True, timeout=600)
                        tg = time.perf_counter() - t
                    if out.read_bytes() != src.read_bytes():
                        raise SystemExit(f"bench_rados: {side} get of {name}: bytes differ")
                    out.unlink()
                    if k > 0:
                        res[f"{side} put"].append(size / tp / (1 << 20))
                        res[f"{side} get"].append(size / tg / (1 << 20))
            rows.append((srv, res))
        print(f"\nstore on RADOS vs Ceph's rados CLI, {size >> 20} MiB per put/get, {a.repeat} repetitions "
              f"(+1 warm-up), cluster: {len(cl.servers)} servers (up in {cl.up_seconds or 0:.1f} s)\n")
        print("| server | op | rados MiB/s | pario MiB/s | pario / rados |")
        print("|---|---|---|---|---|")
        for srv, res in rows:
            for op in ("put", "get"):
                r = [p / q for p, q in zip(res[f"pario {op}"], res[f"rados {op}"])]
                print(f"| {srv.name} ({srv.kind}) | {op} | {statistics.median(res[f'rados {op}']):.1f} | "
                      f"{statistics.median(res[f'pario {op}']):.1f} | {statistics.median(r):.3f} "
                      f"[{min(r):.3f}-{max(r):.3f}] |")
        if a.bench_seconds > 0:
            print("\n| server | op | rados bench -t 1 MiB/s | rados bench -t 16 MiB/s | pario MiB/s | "
                  "pario / bench -t 1 | pario / bench -t 16 |")
            print("|---|---|---|---|---|---|---|")
            for srv, res in rows:
                b = {t: rados_bench(f"pario-{srv.name}", a.bench_seconds, t, env) for t in (1, 16)}
                for op in ("put", "get"):
                    p = statistics.median(res[f"pario {op}"])
                    key = "write" if op == "put" else "seq"
                    print(f"| {srv.name} ({srv.kind}) | {op} / {key} | {b[1][key]:.1f} | {b[16][key]:.1f} | {p:.1f} | "
                          f"{p / b[1][key]:.3f} | {p / b[16][key]:.3f} |")
        print(f"\n  load average {os.getloadavg()[0]:.2f}; wall time {time.time() - t0:.0f} s")
    finally:
        core.down(cdir)
        shutil.rmtree(work, ignore_errors=True)


def free_port_base(n_osds: int) -> int:
    """A port base whose range is free (another cluster, e.g. a test's, may be up)."""
    import socket

    from pario.cluster import conf

    def free(port):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return False
        return True

    span = conf.bind_span(n_osds) + 2
    for base in range(24000, 40000, 400):
        if all(free(p) for p in range(base, base + span)):
            return base
    raise SystemExit("bench_rados: no free port range")


def rados_bench(pool: str, seconds: int, threads: int, env) -> dict[str, float]:
    """``rados bench`` write (4 MiB objects, kept) then seq read of them, ``threads`` ops in
    flight; its "Bandwidth (MB/sec)" lines (rados bench divides by 2^20: MiB/s)."""
    run = f"pb-{threads}-{os.getpid()}"
    out = {}
    try:
        for mode in ("write", "seq"):
            cmd = ["rados", "-p", pool, "bench", str(seconds), mode, "-t", str(threads), "--run-name", run]
            if mode == "write":
                cmd += ["-b", str(4 << 20), "--no-cleanup"]
            cp = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=seconds * 10 + 120, check=True)
            line = next(x for x in cp.stdout.splitlines() if x.startswith("Bandwidth (MB/sec)"))
            out[mode] = float(line.split(":")[1])
    finally:
        subprocess.run(["rados", "-p", pool, "cleanup", "--run-name", run], env=env, capture_output=True, timeout=300)
    return out


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    main()
