/* The journal storage for processes on several machines (rmt_journal_file, core/rmt.h):
 * DIR/rmt.log on a shared (parallel) file system, with only what such a file system
 * guarantees between nodes (../shared/notes/multinode.md for CephFS; Lustre and GPFS give the
 * same): byte-range locks are cluster-wide, and data written and synced by one client is read
 * by another that opens or re-reads it.  No mapping (a mapping held open on two nodes is not
 * coherent) and no process-shared mutex (it deadlocks across nodes).
 *
 *   journal lock   an fcntl open-file-description lock on byte 0 of the file (released by
 *                  the kernel, or by the file system's lease of a dead client);
 *   publish        the appender pwrites the records, then the header's end and seq;
 *   follow         a reader re-reads the header's end and seq and the records after what it
 *                  has applied, with the kernel's cached pages of the file dropped first
 *                  (POSIX_FADV_DONTNEED): a client whose page cache its file system does not
 *                  invalidate (ceph-fuse keeps the kernel's) then asks the file system again.
 * Records and the header's format, replay and validation are core/rmt_log.c's. */
#define _GNU_SOURCE
#include "core/rmt_private.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define HEAD offsetof(rmt_hdr, lock)  /* the header's fields (no lock in the file) */
#define PAGE 4096                     /* the smallest page a kernel drops whole (POSIX_FADV_DONTNEED) */
#define AHEAD ((uint64_t)64 << 20)    /* bytes the file grows beyond its records (sparse) */
#define SIZE_WAIT 10.0                /* seconds a lagging size is asked again */

typedef struct {
    rmt_posix f;
    rmt_hdr hdr;           /* the header as last read or written */
    rmt_window w;          /* the file's bytes as last read */
} jfile;

static void file_close(rmt_log *lg)
{
    jfile *j = lg->impl;
    if (!j)
        return;
    rmt_posix_close(&j->f);
    rmt_window_free(&j->w);
    free(j);
    lg->impl = NULL;
    lg->hdr = NULL;
}

static int read_exact(int fd, void *buf, size_t n, uint64_t pos)
{
    uint8_t *p = buf;
    while (n) {
        ssize_t r = pread(fd, p, n, (off_t)pos);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return RMT_EIO;
        if (r == 0)
            return RMT_ECORRUPT;    /* shorter than the caller was told */
        p += r;
        pos += (uint64_t)r;
        n -= (size_t)r;
    }
    return RMT_OK;
}

static int read_header(rmt_log *lg)
{
    jfile *j = lg->impl;
    (void)posix_fadvise(j->f.fd, 0, RMT_HDR_SIZE, POSIX_FADV_DONTNEED);
    j->w.len = 0;           /* what was read ahead may have changed too */
    return read_exact(j->f.fd, &j->hdr, HEAD, 0);
}

static int file_stat(rmt_log *lg)
{
    jfile *j = lg->impl;
    return rmt_posix_size(j->f.fd, &lg->fsize);
}

static int file_open(rmt_log *lg, const char *path, int how)
{
    jfile *j = calloc(1, sizeof *j);
    if (!j)
        return RMT_ENOMEM;
    lg->impl = j;
    lg->hdr = &j->hdr;
    return rmt_storage_opened(lg, rmt_posix_open(&j->f, path, how), read_header);
}

/* a window's bytes, the kernel's cached pages of the range dropped first -- from the first page
 * on: the kernel keeps a partial page at the start of a range (the record at pos would be read
 * from a stale page) */
static int fill(void *ctx, void *buf, size_t n, uint64_t pos)
{
    jfile *j = ctx;
    uint64_t from = pos & ~(uint64_t)(PAGE - 1);
    (void)posix_fadvise(j->f.fd, (off_t)from, (off_t)(n + (pos - from)), POSIX_FADV_DONTNEED);
    return read_exact(j->f.fd, buf, n, pos);
}

static int file_read(rmt_log *lg, uint64_t pos, size_t n, const uint8_t **p)
{
    jfile *j = lg->impl;
    return rmt_window_read(&j->w, pos, n, lg->fsize, fill, j, p);
}

static int file_write(rmt_log *lg, uint64_t pos, const void *buf, size_t n)
{
    jfile *j = lg->impl;
    j->w.len = 0;
    if (pos + n > lg->fsize) {
        /* the size grows ahead of the records (sparse), before they are written and published:
         * another node learns a file's new size later than its bytes (its client caches the
         * attributes; ceph-fuse's size follows the writer's caps), and a published end past the
         * size it knows would read as a short, "damaged" journal */
        if (file_stat(lg))
            return RMT_EIO;
        if (pos + n > lg->fsize) {
            uint64_t nsize = pos + n + AHEAD;
            if (ftruncate(j->f.fd, (off_t)nsize) != 0)
                return RMT_EIO;
            lg->fsize = nsize;
        }
    }
    int rc = rmt_posix_write_all(j->f.fd, buf, n, pos);
    if (!rc && pos + n > lg->fsize)
        lg->fsize = pos + n;
    return rc;
}

static int file_truncate(rmt_log *lg, uint64_t size)
{
    jfile *j = lg->impl;
    j->w.len = 0;
    if (ftruncate(j->f.fd, (off_t)size) != 0)
        return RMT_EIO;
    lg->fsize = size;
    return RMT_OK;
}

static int file_sync(rmt_log *lg)
{
    jfile *j = lg->impl;
    return fdatasync(j->f.fd) == 0 ? RMT_OK : RMT_EIO;
}

static uint64_t file_published(rmt_log *lg)
{
    jfile *j = lg->impl;
    if (read_header(lg))
        return 0;           /* unreadable: below what was applied, the caller says corrupt */
    /* an end past the size this client knows: its attributes lag (the appender grew the file
     * before publishing); asked again for a while before the caller calls it damaged */
    long nap = 1000000;
    for (double waited = 0; j->hdr.end > lg->fsize && !file_stat(lg) && j->hdr.end > lg->fsize
                            && waited < SIZE_WAIT;
         waited += (double)nap * 1e-9, nap = nap * 2 > 100000000 ? 100000000 : nap * 2) {
        struct timespec ts = {0, nap};
        nanosleep(&ts, NULL);
    }
    return j->hdr.end;
}

static int file_put_header(rmt_log *lg, size_t off, size_t len)
{
    jfile *j = lg->impl;
    if (off + len > HEAD)
        return RMT_EINVAL;
    return rmt_posix_write_all(j->f.fd, (const uint8_t *)&j->hdr + off, len, off);
}

static int file_lock_init(rmt_log *lg)
{
    (void)lg;               /* the lock is the file system's */
    return RMT_OK;
}

static int file_lock(rmt_log *lg, double timeout, int *dead_holder)
{
    jfile *j = lg->impl;
    (void)dead_holder;      /* a dead holder's lock is dropped by the kernel or the file system */
    return rmt_lock(j->f.fd, 0, 1, 1, timeout);
}

static void file_unlock(rmt_log *lg)
{
    jfile *j = lg->impl;
    (void)rmt_unlock(j->f.fd, 0, 1);
}

static int file_replace(rmt_log *lg, const char *path)
{
    jfile *j = lg->impl;
    return rmt_posix_replace(&j->f, path);
}

const rmt_journal_ops rmt_journal_file = {
    .name = "file",
    .open = file_open,
    .close = file_close,
    .read = file_read,
    .write = file_write,
    .stat = file_stat,
    .truncate = file_truncate,
    .sync = file_sync,
    .published = file_published,
    .put_header = file_put_header,
    .lock_init = file_lock_init,
    .lock = file_lock,
    .unlock = file_unlock,
    .replace = file_replace,
};
