"""Network pre-estimation: connection time e and per-byte time t.

CI-LAYOUT seed 002 §4 / §6.2 ("a pair of nodes (one I/O client and one file server) to
estimate network parameters, e and v"), PADP seed 003 §3.5, PSA seed 001 §3.4.

- ``tcp``: a loopback (or ``host:port``-free, local) TCP client/server pair.  e is the
  median time of ``connect()`` (the TCP handshake, what a PVFS2 client pays per server
  connection); t is the slope of the one-way transfer time of messages of several sizes
  (client sends n bytes, server acknowledges with one byte once all arrived; least squares
  of time vs n).
- ``mpi``: a two-rank mpi4py ping-pong (``mpiexec -n 2 python -m pario.calibrate.network``):
  e is half the round trip of a 1-byte message (MPI has no per-message connection: the
  startup latency is its analogue), t the slope of half round-trip time vs size.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass

import numpy as np

from .. import ParioError
from .fit import fit_additive

DEFAULT_NET_SIZES = (1, 4096, 65536, 1 << 20, 4 << 20)


@dataclass(frozen=True)
class NetFit:
    method: str
    e: float
    t: float
    e_spread: float  # coefficient of variation of the e samples
    t_ci: tuple[float, float]
    rel_rms: float

    def to_dict(self) -> dict:
        return {"method": self.method, "e": self.e, "t": self.t, "e_spread": self.e_spread,
                "t_ci": list(self.t_ci), "rel_rms": self.rel_rms}


def _recv_exact(conn, n, buf):
    view = memoryview(buf)
    got = 0
    while got < n:
        k = conn.recv_into(view[got:n])
        if k == 0:
            raise ConnectionError("peer closed")
        got += k


def _server(sock):
    buf = bytearray(8 << 20)
    while True:
        conn, _ = sock.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while True:
                hdr = conn.recv(8, socket.MSG_WAITALL)
                if len(hdr) < 8:
                    break
                n = int.from_bytes(hdr, "little")
                if n == 0xFFFFFFFFFFFFFFFF:
                    conn.close()
                    return
                got = 0
                while got < n:
                    k = conn.recv_into(buf, min(n - got, len(buf)))
                    if k == 0:
                        raise ConnectionError
                    got += k
                conn.sendall(b"\x01")
        except (ConnectionError, OSError):
            pass
        finally:
            conn.close()


def measure_tcp(sizes=DEFAULT_NET_SIZES, reps: int = 20, connects: int = 50) -> tuple[NetFit, dict]:
    """Loopback TCP e and t (see module docstring); returns (fit, raw samples)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    addr = sock.getsockname()
    ctx = mp.get_context("fork")
    proc = ctx.Process(target=_server, args=(sock,), daemon=True)
    proc.start()
    sock.close()
    try:
        e_samples = []
        for _ in range(connects):
            c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            t0 = time.perf_counter()
            c.connect(addr)
            e_samples.append(time.perf_counter() - t0)
            c.close()
        c = socket.create_connection(addr)
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        payload = memoryview(bytearray(max(sizes)))
        ack = bytearray(1)
        xs, ts = [], []
        for n in sizes:
            for r in range(reps + 1):
                t0 = time.perf_counter()
                c.sendall(int(n).to_bytes(8, "little"))
                c.sendall(payload[:n])
                _recv_exact(c, 1, ack)
                dt = time.perf_counter() - t0
                if r:  # first one is a warm-up
                    xs.append(n)
                    ts.append(dt)
        c.sendall((0xFFFFFFFFFFFFFFFF).to_bytes(8, "little"))
        c.close()
    finally:
        proc.join(timeout=5)
        if proc.is_alive():
            proc.kill()
    f = fit_additive(xs, ts)
    e = float(statistics.median(e_samples))
    cv = float(np.std(e_samples, ddof=1) / np.mean(e_samples)) if len(e_samples) > 1 else 0.0
    return NetFit("tcp", e, max(f.beta, 0.0), cv, f.beta_ci, f.rel_rms), {"connect": e_samples, "size": xs, "seconds": ts}


def measure_mpi(sizes=DEFAULT_NET_SIZES, reps: int = 20) -> tuple[NetFit, dict]:
    """Two-rank mpi4py ping-pong started with ``mpiexec -n 2`` (ParioError if unavailable)."""
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        raise ParioError("--network mpi needs mpi4py (pip install mpi4py); use --network tcp instead") from None
    mpiexec = shutil.which("mpiexec") or shutil.which("mpirun")
    if mpiexec is None:
        raise ParioError("--network mpi needs mpiexec/mpirun on PATH; use --network tcp instead")
    cmd = [mpiexec, "-n", "2"]
    if os.geteuid() == 0 and "open" in subprocess.run([mpiexec, "--version"], capture_output=True, text=True).stdout.lower():
        cmd.append("--allow-run-as-root")
    cmd += [sys.executable, "-m", "pario.calibrate.network", json.dumps({"sizes": list(sizes), "reps": reps})]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if res.returncode != 0:
        last = (res.stderr or res.stdout).strip().splitlines()
        raise ParioError(f"MPI ping-pong failed: {last[-1] if last else 'exit ' + str(res.returncode)}")
    raw = json.loads(res.stdout.strip().splitlines()[-1])
    xs, ts = raw["size"], raw["seconds"]
    f = fit_additive(xs, ts)
    small = [t for x, t in zip(xs, ts) if x == min(sizes)]
    e = float(statistics.median(small))
    cv = float(np.std(small, ddof=1) / np.mean(small)) if len(small) > 1 else 0.0
    return NetFit("mpi", e, max(f.beta, 0.0), cv, f.beta_ci, f.rel_rms), raw


def _mpi_worker(cfg: dict) -> None:  # pragma: no cover - runs under mpiexec
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    sizes, reps = cfg["sizes"], cfg["reps"]
    buf = np.zeros(max(sizes), dtype=np.uint8)
    xs, ts = [], []
    for n in sizes:
        for r in range(reps + 1):
            comm.Barrier()
            t0 = MPI.Wtime()
            if rank == 0:
                comm.Send([buf[:n], MPI.BYTE], dest=1)
                comm.Recv([buf[:n], MPI.BYTE], source=1)
                if r:
                    xs.append(n)
                    ts.append((MPI.Wtime() - t0) / 2)
            elif rank == 1:
                comm.Recv([buf[:n], MPI.BYTE], source=0)
                comm.Send([buf[:n], MPI.BYTE], dest=0)
    if rank == 0:
        print(json.dumps({"size": xs, "seconds": ts}))


def measure(method: str, reps: int = 20) -> tuple[NetFit | None, dict]:
    """``tcp``, ``mpi``, ``auto`` (mpi if mpi4py and mpiexec exist, else tcp) or ``none``."""
    if method == "none":
        return None, {}
    if method == "auto":
        try:
            import mpi4py  # noqa: F401

            method = "mpi" if (shutil.which("mpiexec") or shutil.which("mpirun")) else "tcp"
        except ImportError:
            method = "tcp"
    if method == "tcp":
        return measure_tcp(reps=reps)
    if method == "mpi":
        return measure_mpi(reps=reps)
    raise ParioError(f"unknown --network {method!r} (mpi, tcp, none)")


if __name__ == "__main__":  # pragma: no cover
    _mpi_worker(json.loads(sys.argv[1]))
