/* pario tracer: start and end of tracing (MPI_Init, MPI_Init_thread, MPI_Finalize).
 *
 * Tracing is on when PARIO_TRACE_DIR names a directory; otherwise every interposed
 * function passes straight to its PMPI_ or libc counterpart.  Programs that start MPI
 * through MPI_Session_init only (MPI-4.1 §11.3) are not traced.
 *
 * MPI_Init: after PMPI_Init, a barrier on MPI_COMM_WORLD, then every rank zeroes its clock
 * (CLOCK_MONOTONIC), so time stamps of different ranks are comparable; each rank opens its
 * record file DIR/rank-<R>.pxt (records.h); whether tracing is on is agreed by all ranks
 * (an MPI_Allreduce), because the tracer adds collectives of its own.
 *
 * MPI_Finalize: the file summaries of all ranks (mpiio.h) are gathered to rank 0, which
 * writes DIR/job.json (the process count, the command line from /proc/self/cmdline, the
 * clock, the files with their hints and two-phase aggregators); then every rank appends
 * PX_REC_FINAL and closes its record file.  A process that exits without MPI_Finalize
 * flushes its records from a destructor (no PX_REC_FINAL: the reader reports the trace
 * partial); a killed one leaves what it had spilled.
 */
#define _GNU_SOURCE
#include "interpose/runtime.h"

#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "interpose/jsonbuf.h"
#include "interpose/mpiio.h"
#include "interpose/records.h"
#include "interpose/serve.h"

int px_on;
int px_rank;
int px_nprocs;
const char *px_dir;

static struct timespec t0_mono;
static double t0_unix;
static uint64_t next_id;

double px_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0_mono.tv_sec) + 1e-9 * (double)(t.tv_nsec - t0_mono.tv_nsec);
}

uint64_t px_next_id(void) { return __atomic_fetch_add(&next_id, 1, __ATOMIC_RELAXED); }

/* PARIO_TRACE_BUFFER: bytes, optionally with a k/m/g suffix (binary). */
static size_t buffer_size(void)
{
    const char *s = getenv("PARIO_TRACE_BUFFER");
    if (!s || !*s)
        return 4u << 20;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    switch (*end) {
    case 'k': case 'K': v <<= 10; break;
    case 'm': case 'M': v <<= 20; break;
    case 'g': case 'G': v <<= 30; break;
    default: break;
    }
    return v ? (size_t)v : 4u << 20;
}

/* A forked child (fork without exec) is not an MPI process: it traces nothing. */
static void forked(void) { px_on = 0; }

static void start(void)
{
    const char *dir = getenv("PARIO_TRACE_DIR");
    if (!dir || !*dir)
        return;
    PMPI_Comm_rank(MPI_COMM_WORLD, &px_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &px_nprocs);
    px_dir = dir;
    PMPI_Barrier(MPI_COMM_WORLD);
    clock_gettime(CLOCK_MONOTONIC, &t0_mono);
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    t0_unix = (double)wall.tv_sec + 1e-9 * (double)wall.tv_nsec;
    int ok = px_rec_open(dir, px_rank, px_nprocs, t0_unix, buffer_size()) == 0 && px_mpiio_start() == 0;
    int all = 0;
    PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all) {
        if (ok)
            px_rec_close();
        if (px_rank == 0)
            fprintf(stderr, "pario tracer: tracing is off (a rank could not open its record file in %s)\n", dir);
        return;
    }
    px_on = 1;
    pthread_atfork(NULL, NULL, forked);
}

PX_EXPORT int MPI_Init(int *argc, char ***argv)
{
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS)
        start();
    return rc;
}

PX_EXPORT int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS)
        start();
    return rc;
}

/* The command line, NUL-separated arguments, as a JSON array. */
static void command_json(px_buf *out)
{
    px_buf_puts(out, "[");
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        px_buf raw = {0};
        char tmp[4096];
        ssize_t n;
        while ((n = read(fd, tmp, sizeof tmp)) > 0)
            px_buf_add(&raw, tmp, (size_t)n);
        close(fd);
        for (size_t i = 0; raw.p && i < raw.n;) {
            size_t len = strnlen(raw.p + i, raw.n - i);
            if (i)
                px_buf_puts(out, ", ");
            px_buf_json(out, raw.p + i, len);
            i += len + 1;
        }
        px_buf_free(&raw);
    }
    px_buf_puts(out, "]");
}

static void write_job(const char *files, size_t nfiles_bytes)
{
    px_buf j = {0};
    px_buf_printf(&j, "{\"format\": \"pario-tracer-job\", \"version\": %u, \"nprocs\": %d, ", PX_FORMAT_VERSION,
                  px_nprocs);
    px_buf_puts(&j, "\"command\": ");
    command_json(&j);
    px_buf_printf(&j, ", \"clock\": \"CLOCK_MONOTONIC, zeroed after a barrier in MPI_Init\", "
                      "\"t0_unix\": %.6f, \"finalized\": true, \"files\": [", t0_unix);
    px_buf_add(&j, files, nfiles_bytes);
    px_buf_puts(&j, "]}\n");
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/job.json", px_dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    size_t off = 0;
    while (fd >= 0 && !j.oom && off < j.n) {
        ssize_t w = write(fd, j.p + off, j.n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    if (fd < 0 || j.oom || off < j.n || close(fd) != 0 || rename(tmp, path) != 0)
        fprintf(stderr, "pario tracer: cannot write %s: %s\n", path, strerror(errno));
    px_buf_free(&j);
}

PX_EXPORT int MPI_Finalize(void)
{
    if (px_on) {
        /* file summaries: each rank's JSON objects, gathered to rank 0 (PMPI_Gather) */
        px_buf mine = {0};
        px_mpiio_finish(&mine);
        int len = mine.oom ? 0 : (int)mine.n;
        int *lens = px_rank == 0 ? calloc((size_t)px_nprocs, sizeof(int)) : NULL;
        int *displs = px_rank == 0 ? calloc((size_t)px_nprocs, sizeof(int)) : NULL;
        PMPI_Gather(&len, 1, MPI_INT, lens, 1, MPI_INT, 0, MPI_COMM_WORLD);
        char *all = NULL;
        size_t total = 0;
        if (px_rank == 0 && lens && displs) {
            for (int r = 0; r < px_nprocs; r++) {
                displs[r] = (int)total;
                total += (size_t)lens[r];
            }
            all = malloc(total + 1);
        }
        PMPI_Gatherv(mine.p ? mine.p : "", len, MPI_CHAR, all, lens, displs, MPI_CHAR, 0, MPI_COMM_WORLD);
        if (px_rank == 0) {
            /* join the ranks' non-empty lists with commas */
            px_buf files = {0};
            for (int r = 0; all && r < px_nprocs; r++) {
                if (!lens[r])
                    continue;
                if (files.n)
                    px_buf_puts(&files, ", ");
                px_buf_add(&files, all + displs[r], (size_t)lens[r]);
            }
            write_job(files.p ? files.p : "", files.n);
            px_buf_free(&files);
        }
        free(all);
        free(lens);
        free(displs);
        px_buf_free(&mine);
        px_call c;
        memset(&c, 0, sizeof c);
        c.id = px_next_id();
        c.type = PX_REC_FINAL;
        c.file = -1;
        c.moved = -1;
        c.start = c.end = px_now();
        px_rec_lock();
        px_rec_call(&c);
        px_rec_unlock();
        px_rec_close();
        px_on = 0;
    }
    if (px_serving)
        px_serve_finish();
    return PMPI_Finalize();
}

/* A process leaving without MPI_Finalize keeps what it recorded. */
__attribute__((destructor)) static void at_exit(void)
{
    if (px_on) {
        px_on = 0;
        px_rec_close();
    }
}
