"""An MPI-IO program of two ranks for tests/multinode/test_coherence.py (ranks on two nodes):
rank 0 overwrites one 1 MiB region ROUNDS times, rank 1 reads it after each write, in one of
MPI-IO's consistency modes (MPI 4.0 §14.6.1): "atomic" (MPI_File_set_atomicity true), "sbs"
(sync-barrier-sync), "none" (a barrier only: the result is undefined by the standard).  Rank 1
prints "round K FRESH" per read, FRESH the bytes equal to round K's fill."""

import sys

from mpi4py import MPI

N = 1 << 20


def main(path: str, mode: str, rounds: int) -> None:
    comm = MPI.COMM_WORLD
    fh = MPI.File.Open(comm, path, MPI.MODE_CREATE | MPI.MODE_RDWR)
    if mode == "atomic":
        fh.Set_atomicity(True)
    buf = bytearray(N)
    for k in range(rounds):
        if comm.rank == 0:
            fh.Write_at(0, bytes([65 + k]) * N)
        if mode == "sbs":
            fh.Sync()
        comm.Barrier()
        if mode == "sbs":
            fh.Sync()
        if comm.rank == 1:
            fh.Read_at(0, buf)
            print(f"round {k} {buf.count(65 + k)}", flush=True)
        comm.Barrier()
    fh.Close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
