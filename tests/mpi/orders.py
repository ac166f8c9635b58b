"""Run under mpiexec -n 4: the three collective orders on plain files with a known placement.

Usage: orders.py DIR
Part A — seed 004's worked example (Fig. 2-7): servers H0 S0 H1 S1, one-block stripes, 4
processes writing blocks r and r+4, 2 aggregators, one-block buffer.  Rank 0 writes
DIR/example.json: per order, per aggregator, the block sequence and cycle of each block.
Part B — an interleaved pattern on hacio-6h2s (6 HDD + 2 SSD) with 8 KiB stripes, traced
with pario_trace: DIR/b_<order>.bin, DIR/b_<order>.parquet and each aggregator's schedule
DIR/b_<order>_agg<k>.npz, for the cross-check against pario.plan.collective in the test.
"""
import json
import sys
from pathlib import Path

import numpy as np
from mpi4py import MPI

from pario.mpi import File

comm = MPI.COMM_WORLD
r, p = comm.rank, comm.size
d = Path(sys.argv[1])
ORDERS = ("romcio", "cacio", "hacio")

SYSTEM = """name = "hshs"
[network]
e = 0.0003
t = 1e-8
[clients]
procs_per_node = 4
[[server]]
name = "H0"
kind = "hdd"
alpha = 0.005
beta = 1e-8
[[server]]
name = "S0"
kind = "ssd"
alpha = 0.001
beta = 1e-9
[[server]]
name = "H1"
kind = "hdd"
alpha = 0.005
beta = 1e-8
[[server]]
name = "S1"
kind = "ssd"
alpha = 0.001
beta = 1e-9
"""

BLOCK = 4096
if r == 0:
    (d / "hshs.toml").write_text(SYSTEM)
comm.Barrier()


def schedules(fh):
    s = fh.last_schedule
    mine = None
    if s.aggregator >= 0:
        mine = {"agg": s.aggregator, "blocks": (s.offset // BLOCK).tolist(), "cycle": s.cycle.tolist(),
                "server": s.server.tolist(), "kind": s.kind.tolist()}
    return [x for x in comm.gather(mine, root=0) or [] if x is not None]


# ---------------------------------------------------------------- part A: the worked example
result = {}
for order in ORDERS:
    path = d / f"example_{order}.bin"
    hints = {"pario_system": str(d / "hshs.toml"), "pario_layout": f"fixed:{BLOCK}", "pario_order": order,
             "cb_nodes": "2", "cb_buffer_size": str(BLOCK), "romio_cb_write": "enable"}
    fh = File.open(comm, str(path), MPI.MODE_CREATE | MPI.MODE_WRONLY, hints)
    ft = MPI.BYTE.Create_vector(2, BLOCK, p * BLOCK).Commit()
    fh.set_view(r * BLOCK, MPI.BYTE, ft)
    data = np.repeat(np.array([r * 2 + 1, r * 2 + 2], dtype=np.uint8), BLOCK)
    fh.write_all(data)
    sch = schedules(fh)
    fh.close()
    if r == 0:
        result[order] = sorted(sch, key=lambda x: x["agg"])
if r == 0:
    (d / "example.json").write_text(json.dumps(result))

# ---------------------------------------------------------------- part B: traced, 6H+2S
rng = np.random.default_rng(99 + r)
for order in ORDERS:
    path = d / f"b_{order}.bin"
    hints = {"pario_system": "hacio-6h2s", "pario_layout": "fixed:8K", "pario_order": order, "cb_nodes": "2",
             "cb_buffer_size": "12K", "romio_cb_write": "enable", "romio_cb_read": "enable",
             "pario_trace": str(d / f"b_{order}.parquet")}
    fh = File.open(comm, str(path), MPI.MODE_CREATE | MPI.MODE_RDWR, hints)
    ft = MPI.BYTE.Create_vector(6, 5000, p * 5000).Commit()
    fh.set_view(100 + r * 5000, MPI.BYTE, ft)
    data = np.random.default_rng(7 + r).integers(0, 256, 30000, dtype=np.uint8)
    fh.write_all(data)
    s = fh.last_schedule
    if s.aggregator >= 0:
        np.savez(d / f"b_{order}_agg{s.aggregator}.npz", offset=s.offset, length=s.length, server=s.server,
                 kind=s.kind, proc=s.proc, cycle=s.cycle, domain=np.array(s.domain))
    fh.seek(0)
    back = np.zeros_like(data)
    fh.read_all(back)
    assert np.array_equal(back, data), f"rank {r}: read-back differs ({order})"
    fh.close()
comm.Barrier()
if r == 0:
    print("done")
