/* MPI_File_set_size between writes of several ranks (tests/native/test_serve_mpi.py runs it with
 * and without pario's library and compares the files).
 *
 *   serve_resize FILE
 *
 * A: every rank writes block r (BLK bytes of value r + 1); close.
 * B: open; collective set_size(0); rank P-1 writes block P-1 again (it ends where the size
 *    its handle read at open already was) and rank 0 block 0 (value 100 + r); close.
 * C: open; rank 1 % P writes block P (it extends the file); collective set_size(BLK / 2);
 *    close.
 * Rank 0 prints the size after each phase ("size N"), read by a fresh open.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BLK 65536

static void check(int rc, const char *what)
{
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "serve_resize: %s failed\n", what);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

/* the size a fresh collective open sees (rank 0 prints it) */
static void print_size(const char *name, int rank)
{
    MPI_File fh;
    MPI_Offset sz = 0;
    check(MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh), "open to size");
    check(MPI_File_get_size(fh, &sz), "get_size");
    check(MPI_File_close(&fh), "close after size");
    if (rank == 0)
        printf("size %lld\n", (long long)sz);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 2) {
        if (rank == 0)
            fprintf(stderr, "usage: serve_resize FILE\n");
        MPI_Finalize();
        return 2;
    }
    static char buf[BLK];
    MPI_File fh;
    const char *name = argv[1];
    /* A */
    check(MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh), "open A");
    memset(buf, rank + 1, BLK);
    check(MPI_File_write_at(fh, (MPI_Offset)rank * BLK, buf, BLK, MPI_BYTE, MPI_STATUS_IGNORE), "write A");
    check(MPI_File_close(&fh), "close A");
    print_size(name, rank);
    /* B */
    check(MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_RDWR, MPI_INFO_NULL, &fh), "open B");
    check(MPI_File_set_size(fh, 0), "set_size 0");
    memset(buf, 100 + rank, BLK);
    if (rank == size - 1 || rank == 0)
        check(MPI_File_write_at(fh, (MPI_Offset)rank * BLK, buf, BLK, MPI_BYTE, MPI_STATUS_IGNORE), "write B");
    check(MPI_File_close(&fh), "close B");
    print_size(name, rank);
    /* C */
    check(MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_RDWR, MPI_INFO_NULL, &fh), "open C");
    memset(buf, 200 + rank, BLK);
    if (rank == 1 % size)
        check(MPI_File_write_at(fh, (MPI_Offset)size * BLK, buf, BLK, MPI_BYTE, MPI_STATUS_IGNORE), "write C");
    check(MPI_File_set_size(fh, BLK / 2), "set_size half");
    check(MPI_File_close(&fh), "close C");
    print_size(name, rank);
    MPI_Finalize();
    return 0;
}
