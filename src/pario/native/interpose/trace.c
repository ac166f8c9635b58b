/* pario interpose: the tracing module (trace.h) -- start and end of tracing.
 *
 * Tracing is on when PARIO_TRACE_DIR names a directory; otherwise every interposed
 * function passes straight to its PMPI_ or libc counterpart (or to the serving module).
 * Registered with the core (runtime.h) at constructor priority PX_PRIO_TRACE.
 *
 * Init (MPI_Init, MPI_Init_thread): a barrier on MPI_COMM_WORLD, then every rank zeroes its
 * clock (CLOCK_MONOTONIC), so time stamps of different ranks are comparable; each rank opens
 * its record file DIR/rank-<R>.pxt (records.h) and the lock file of shared-pointer calls
 * DIR/shared.lock; whether tracing is on is agreed by all ranks (an MPI_Allreduce), because
 * the tracer adds collectives of its own.
 *
 * Finalize (MPI_Finalize): the file summaries of all ranks are gathered to rank 0, which
 * writes DIR/job.json (the process count, the command line from /proc/self/cmdline, the
 * clock, the files with their hints and two-phase aggregators); then every rank appends
 * PX_REC_FINAL and closes its record file.  A process that exits without MPI_Finalize
 * flushes its records from a destructor (no PX_REC_FINAL: the reader reports the trace
 * partial); a killed one leaves what it had spilled.
 *
 * File summaries, JSON objects separated by ", ": one per file a rank closed as rank 0 of
 * the file's communicator (gathered from all its ranks at MPI_File_close), plus one per file
 * still open at MPI_Finalize (this rank's view only).  Each object: {"name", "procs",
 * "hints": {key: value}, "aggregators": [world ranks that did POSIX I/O on the file during
 * collective data calls], "posix_bytes": [[rank, coll_read, coll_write, indep_read,
 * indep_write, other_read, other_write], ...] (ranks with any), "open_at_finalize": bool}.
 */
#define _GNU_SOURCE
#include "interpose/trace.h"

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
#include "interpose/records.h"
#include "interpose/runtime.h"

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

/* ------------------------------------------------------------------ shared-pointer lock */

static int lock_fd = -1;
static pthread_mutex_t shared_mutex = PTHREAD_MUTEX_INITIALIZER;

static int open_lock_file(void)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/shared.lock", px_dir);
    lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lock_fd < 0)
        fprintf(stderr, "pario tracer: cannot open %s: %s\n", path, strerror(errno));
    return lock_fd >= 0 ? 0 : -1;
}

int px_trace_shared_lock(off_t byte, short type)
{
    if (type == F_WRLCK && lock_fd < 0)
        return 0;
    if (type == F_WRLCK)
        pthread_mutex_lock(&shared_mutex);  /* fcntl locks do not exclude this process's threads */
    struct flock l;
    memset(&l, 0, sizeof l);
    l.l_type = type;
    l.l_whence = SEEK_SET;
    l.l_start = byte;
    l.l_len = 1;
    while (fcntl(lock_fd, F_SETLKW, &l) != 0 && errno == EINTR)
        ;
    if (type == F_UNLCK)
        pthread_mutex_unlock(&shared_mutex);
    return 1;
}

/* ------------------------------------------------------------------ start */

/* A forked child (fork without exec) is not an MPI process: it traces nothing. */
static void forked(void) { px_on = 0; }

static void trace_init(void)
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
    int ok = px_rec_open(dir, px_rank, px_nprocs, t0_unix, buffer_size()) == 0 && open_lock_file() == 0;
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

/* ------------------------------------------------------------------ file summaries */

static px_buf summaries;   /* JSON objects of the files this rank summarised at close */

static void summary_object(px_buf *b, const px_file *f, const int64_t *rows, int nrows, int open_at_finalize)
{
    if (b->n)
        px_buf_puts(b, ", ");
    px_buf_puts(b, "{\"name\": ");
    px_buf_json(b, f->name, strlen(f->name));
    px_buf_printf(b, ", \"procs\": %d, \"open_at_finalize\": %s, \"hints\": %s, \"aggregators\": [", f->comm_size,
                  open_at_finalize ? "true" : "false", f->hints_json ? f->hints_json : "{}");
    int first = 1;
    for (int r = 0; r < nrows; r++) {
        const int64_t *row = rows + 7 * r;
        if (row[1] + row[2] > 0) {
            px_buf_printf(b, first ? "%lld" : ", %lld", (long long)row[0]);
            first = 0;
        }
    }
    px_buf_puts(b, "], \"posix_bytes\": [");
    first = 1;
    for (int r = 0; r < nrows; r++) {
        const int64_t *row = rows + 7 * r;
        if (row[1] + row[2] + row[3] + row[4] + row[5] + row[6] == 0)
            continue;
        px_buf_printf(b, "%s[%lld, %lld, %lld, %lld, %lld, %lld, %lld]", first ? "" : ", ", (long long)row[0],
                      (long long)row[1], (long long)row[2], (long long)row[3], (long long)row[4],
                      (long long)row[5], (long long)row[6]);
        first = 0;
    }
    px_buf_puts(b, "]}");
}

static void counts_row(const px_posix_counts *pc, int64_t row[7])
{
    row[0] = px_rank;
    for (int c = 0; c < 3; c++)
        for (int o = 0; o < 2; o++)
            row[1 + 2 * c + o] = pc->bytes[c][o];
}

void px_trace_file_closed(const px_file *f, const px_posix_counts *pc)
{
    if (!px_on || f->comm == MPI_COMM_NULL)
        return;
    int64_t row[7];
    counts_row(pc, row);
    int64_t *rows = f->comm_rank == 0 ? malloc(sizeof row * (size_t)f->comm_size) : NULL;
    PMPI_Gather(row, 7, MPI_INT64_T, rows, 7, MPI_INT64_T, 0, f->comm);
    if (rows)
        summary_object(&summaries, f, rows, f->comm_size, 0);
    free(rows);
}

/* A file still open at MPI_Finalize: this rank's view of it. */
static void summary_open(struct px_file *f, void *out)
{
    px_posix_counts pc;
    px_posix_snapshot(&f->watch, &pc);
    int64_t row[7];
    counts_row(&pc, row);
    summary_object(out, f, row, 1, 1);
}

/* ------------------------------------------------------------------ end */

static void trace_finalize(void)
{
    if (px_on) {
        /* file summaries: each rank's JSON objects, gathered to rank 0 (PMPI_Gather) */
        px_buf mine = {0};
        if (summaries.p)
            px_buf_add(&mine, summaries.p, summaries.n);
        px_core_file_each(summary_open, &mine);
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
}

/* A process leaving without MPI_Finalize keeps what it recorded. */
__attribute__((destructor)) static void at_exit(void)
{
    if (px_on) {
        px_on = 0;
        px_rec_close();
    }
}

__attribute__((constructor(PX_PRIO_TRACE))) static void trace_register(void)
{
    static const px_module trace = {.name = "trace", .init = trace_init, .finalize = trace_finalize};
    px_core_register(&trace);
}
