/* pario tracer: the per-rank record buffer, bounded in memory, spilled to the rank file.
 * The format is documented in records.h. */
#define _GNU_SOURCE
#include "interpose/records.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

static pthread_mutex_t rec_mutex = PTHREAD_MUTEX_INITIALIZER;
static int rec_fd = -1;
static char *rec_buf;         /* calls from the front, units from the back */
static size_t rec_cap;        /* bytes, a multiple of 64 */
static size_t rec_ncalls;
static size_t rec_nunits;
static uint64_t rec_seq;
static char rec_path[4096];
static pid_t rec_pid;         /* the process that owns the rank file (not a forked child) */

void px_rec_lock(void) { pthread_mutex_lock(&rec_mutex); }
void px_rec_unlock(void) { pthread_mutex_unlock(&rec_mutex); }
int px_rec_ok(void) { return rec_fd >= 0; }

/* Write all of iov (retrying short writes and EINTR); 0 or -1. */
static int write_all(int fd, struct iovec *iov, int n)
{
    while (n > 0) {
        ssize_t w = writev(fd, iov, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        size_t left = (size_t)w;
        while (n > 0 && left >= iov->iov_len) {
            left -= iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (char *)iov->iov_base + left;
            iov->iov_len -= left;
        }
    }
    return 0;
}

static void rec_fail(const char *what)
{
    fprintf(stderr, "pario tracer: %s %s: %s; tracing stops for this rank\n", what, rec_path, strerror(errno));
    close(rec_fd);
    rec_fd = -1;
}

/* Write the buffer as one chunk and empty it (lock held). */
static void spill(void)
{
    if (rec_fd < 0 || (rec_ncalls == 0 && rec_nunits == 0) || getpid() != rec_pid)
        return;
    px_unit *units = (px_unit *)(rec_buf + rec_cap) - rec_nunits;
    for (size_t i = 0, j = rec_nunits; i + 1 < j; i++, j--) {  /* stored back to front */
        px_unit t = units[i];
        units[i] = units[j - 1];
        units[j - 1] = t;
    }
    px_chunk_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, PX_CHUNK_MAGIC, 4);
    h.ncalls = (uint32_t)rec_ncalls;
    h.nunits = rec_nunits;
    h.seq = rec_seq++;
    struct iovec iov[3] = {
        {&h, sizeof h},
        {rec_buf, rec_ncalls * sizeof(px_call)},
        {units, rec_nunits * sizeof(px_unit)},
    };
    if (write_all(rec_fd, iov, 3) != 0)
        rec_fail("cannot write");
    rec_ncalls = rec_nunits = 0;
}

static size_t used(void) { return rec_ncalls * sizeof(px_call) + rec_nunits * sizeof(px_unit); }

int px_rec_open(const char *dir, int rank, int nprocs, double t0_unix, size_t bufsize)
{
    if (bufsize < 4096)
        bufsize = 4096;
    bufsize &= ~(size_t)63;
    rec_buf = malloc(bufsize);
    if (!rec_buf)
        return -1;
    rec_cap = bufsize;
    rec_pid = getpid();
    snprintf(rec_path, sizeof rec_path, "%s/rank-%d.pxt", dir, rank);
    rec_fd = open(rec_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (rec_fd < 0) {
        fprintf(stderr, "pario tracer: cannot create %s: %s; tracing is off for this rank\n", rec_path,
                strerror(errno));
        free(rec_buf);
        rec_buf = NULL;
        return -1;
    }
    px_file_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, PX_FILE_MAGIC, 8);
    h.version = PX_FORMAT_VERSION;
    h.header_size = sizeof(px_file_header);
    h.call_size = sizeof(px_call);
    h.unit_size = sizeof(px_unit);
    h.rank = rank;
    h.nprocs = nprocs;
    h.pid = (int64_t)getpid();
    h.t0_unix = t0_unix;
    struct iovec iov = {&h, sizeof h};
    if (write_all(rec_fd, &iov, 1) != 0) {
        rec_fail("cannot write");
        return -1;
    }
    return 0;
}

void px_rec_unit(int64_t a, int64_t b)
{
    if (rec_fd < 0)
        return;
    if (used() + sizeof(px_unit) > rec_cap)
        spill();
    px_unit *u = (px_unit *)(rec_buf + rec_cap) - (rec_nunits + 1);
    u->a = a;
    u->b = b;
    rec_nunits++;
}

int64_t px_rec_bytes(const void *data, size_t len)
{
    const char *p = data;
    int64_t n = 0;
    for (size_t off = 0; off < len; off += sizeof(px_unit), n++) {
        px_unit u;
        memset(&u, 0, sizeof u);
        memcpy(&u, p + off, len - off < sizeof u ? len - off : sizeof u);
        px_rec_unit(u.a, u.b);
    }
    return n;
}

void px_rec_call(const px_call *c)
{
    if (rec_fd < 0)
        return;
    if (used() + sizeof(px_call) > rec_cap)
        spill();
    memcpy(rec_buf + rec_ncalls * sizeof(px_call), c, sizeof *c);
    rec_ncalls++;
}

void px_rec_flush(void)
{
    px_rec_lock();
    spill();
    px_rec_unlock();
}

void px_rec_close(void)
{
    px_rec_lock();
    spill();
    if (rec_fd >= 0)
        close(rec_fd);
    rec_fd = -1;
    free(rec_buf);
    rec_buf = NULL;
    rec_ncalls = rec_nunits = 0;
    px_rec_unlock();
}
