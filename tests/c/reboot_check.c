/* reboot_check: a program's view of its own writes across an unclean end and a reboot
 * (issue 28; tests/native/test_reboot.py).
 *
 *   reboot_check FILE GEN BLOCK MODE
 *
 * Every rank writes BLOCK bytes at rank x BLOCK of FILE (MPI_COMM_WORLD, create), the byte
 * at i of its block being val(GEN, rank, i), and syncs (the write is acknowledged).  Then
 * by MODE:
 *   run            close, reopen read-only, read the block back and compare: prints
 *                  "rank R wrong N" (N bytes differ from what the rank wrote), close;
 *   pause:PATH     as run, but after the reopen rank 0 creates PATH.ready and every rank
 *                  waits until PATH exists (a test acts on the store meanwhile);
 *   abort          rewrite the first half of the block with val(GEN + 100, ...) (never
 *                  acknowledged), then MPI_Abort: the store is left open, uncleanly;
 *   kill:US        close, then SIGKILL this process US microseconds into MPI_Finalize (the
 *                  store's flush of DIRTY replica bytes runs there).
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static unsigned char val(long gen, long rank, long i)
{
    return (unsigned char)((gen * 131 + rank * 29 + i * 7 + (i >> 8)) & 0xff);
}

static void fail(const char *what, int rc)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    fprintf(stderr, "reboot_check: %s: %s\n", what, msg);
    fflush(stderr);
    /* mpiexec's forwarding of this line can lose the race with the abort (an empty stderr
     * under load): give it a moment */
    struct timespec t = { 0, 200 * 1000 * 1000 };
    nanosleep(&t, NULL);
    MPI_Abort(MPI_COMM_WORLD, 3);
}

static void check(int rc, const char *what)
{
    if (rc != MPI_SUCCESS)
        fail(what, rc);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    if (argc != 5) {
        fprintf(stderr, "usage: reboot_check FILE GEN BLOCK MODE\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int me = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    const char *path = argv[1], *mode = argv[4];
    long gen = atol(argv[2]), block = atol(argv[3]);
    unsigned char *b = malloc((size_t)block), *c = malloc((size_t)block);
    if (!b || !c)
        MPI_Abort(MPI_COMM_WORLD, 2);
    for (long i = 0; i < block; i++)
        b[i] = val(gen, me, i);
    MPI_File fh;
    MPI_Offset at = (MPI_Offset)me * block;
    check(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh), "open");
    check(MPI_File_write_at(fh, at, b, (int)block, MPI_BYTE, MPI_STATUS_IGNORE), "write");
    check(MPI_File_sync(fh), "sync");
    if (!strcmp(mode, "abort")) {
        for (long i = 0; i < block / 2; i++)
            c[i] = val(gen + 100, me, i);
        check(MPI_File_write_at(fh, at, c, (int)(block / 2), MPI_BYTE, MPI_STATUS_IGNORE), "rewrite");
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Abort(MPI_COMM_WORLD, 9);
    }
    check(MPI_File_close(&fh), "close");
    if (!strncmp(mode, "kill:", 5)) {
        long us = atol(mode + 5);
        timer_t t;
        struct sigevent ev;
        memset(&ev, 0, sizeof ev);
        ev.sigev_notify = SIGEV_SIGNAL;
        ev.sigev_signo = SIGKILL;
        struct itimerspec it;
        memset(&it, 0, sizeof it);
        it.it_value.tv_sec = us / 1000000;
        it.it_value.tv_nsec = (us % 1000000) * 1000 + 1;
        if (timer_create(CLOCK_MONOTONIC, &ev, &t) == 0)
            timer_settime(t, 0, &it, NULL);
        MPI_Finalize();
        return 0;
    }
    check(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh), "reopen");
    if (!strncmp(mode, "pause:", 6)) {
        char ready[4096];
        snprintf(ready, sizeof ready, "%s.ready", mode + 6);
        if (me == 0)
            fclose(fopen(ready, "w"));
        struct stat sb;
        struct timespec nap = {0, 10000000};
        while (stat(mode + 6, &sb) != 0)
            nanosleep(&nap, NULL);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    memset(c, 0, (size_t)block);
    check(MPI_File_read_at(fh, at, c, (int)block, MPI_BYTE, MPI_STATUS_IGNORE), "read");
    long wrong = 0;
    for (long i = 0; i < block; i++)
        wrong += b[i] != c[i];
    printf("rank %d wrong %ld\n", me, wrong);
    check(MPI_File_close(&fh), "close");
    free(b);
    free(c);
    MPI_Finalize();
    return 0;
}
