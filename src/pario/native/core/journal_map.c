/* The journal storage of one host (rmt_journal_map, core/rmt.h): DIR/rmt.log mapped MAP_SHARED.
 *
 * Every process maps the whole file into one large reservation, so an append is a copy into
 * the page cache (no system call; it survives the process being killed), and a reader sees
 * other processes' records without reading the file: the header's `end` is the generation, a
 * reader compares it with what it has applied (one load).  The journal lock is a robust,
 * process-shared pthread mutex in the header page (the kernel hands it on when its holder
 * dies).  Durability against power failure comes from fdatasync at sync points.  None of this
 * holds between machines (a mapping held open on two nodes of a parallel file system is not
 * coherent, a process-shared mutex there deadlocks): rmt_journal_file is the storage for that.
 */
#define _GNU_SOURCE
#include "core/rmt_private.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define RESERVE ((size_t)1 << 36)   /* 64 GiB of address space for the mapping */

_Static_assert(sizeof(pthread_mutex_t) <= 64, "the journal lock fits its header slot");

typedef struct {
    rmt_posix f;
    uint8_t *map;          /* the whole reservation */
} jmap;

static void map_close(rmt_log *lg)
{
    jmap *j = lg->impl;
    if (!j)
        return;
    if (j->map)
        munmap(j->map, RESERVE);
    rmt_posix_close(&j->f);
    free(j);
    lg->impl = NULL;
    lg->hdr = NULL;
}

static int map_open(rmt_log *lg, const char *path, int how)
{
    jmap *j = calloc(1, sizeof *j);
    if (!j)
        return RMT_ENOMEM;
    lg->impl = j;
    int rc = rmt_posix_open(&j->f, path, how);
    if (!rc)
        rc = rmt_posix_size(j->f.fd, &lg->fsize);
    if (!rc && lg->fsize < RMT_HDR_SIZE)
        rc = RMT_ECORRUPT;
    if (!rc) {
        void *m = mmap(NULL, RESERVE, PROT_READ | PROT_WRITE, MAP_SHARED, j->f.fd, 0);
        if (m == MAP_FAILED)
            rc = RMT_EIO;
        else
            j->map = m;
    }
    if (rc) {
        int e = errno;
        map_close(lg);
        errno = e;
        return rc;
    }
    lg->hdr = (rmt_hdr *)j->map;
    return RMT_OK;
}

static int map_read(rmt_log *lg, uint64_t pos, size_t n, const uint8_t **p)
{
    jmap *j = lg->impl;
    if (pos + n > RESERVE)
        return RMT_ECORRUPT;
    *p = j->map + pos;
    return RMT_OK;
}

static int map_write(rmt_log *lg, uint64_t pos, const void *buf, size_t n)
{
    jmap *j = lg->impl;
    if (pos + n > RESERVE)
        return RMT_EFULL;
    int rc = rmt_posix_allocate(j->f.fd, &lg->fsize, pos + n, RESERVE);
    if (rc)
        return rc;
    memcpy(j->map + pos, buf, n);
    return RMT_OK;
}

static int map_stat(rmt_log *lg)
{
    jmap *j = lg->impl;
    int rc = rmt_posix_size(j->f.fd, &lg->fsize);
    if (!rc && lg->fsize > RESERVE)
        lg->fsize = RESERVE;
    return rc;
}

static int map_truncate(rmt_log *lg, uint64_t size)
{
    jmap *j = lg->impl;
    if (ftruncate(j->f.fd, (off_t)size) != 0)
        return RMT_EIO;
    lg->fsize = size;
    (void)rmt_posix_allocate(j->f.fd, &lg->fsize, size + 8, RESERVE);   /* room ahead; a full disk: later */
    return RMT_OK;
}

static int map_sync(rmt_log *lg)
{
    jmap *j = lg->impl;
    return fdatasync(j->f.fd) == 0 ? RMT_OK : RMT_EIO;
}

static uint64_t map_published(rmt_log *lg)
{
    return __atomic_load_n(&lg->hdr->end, __ATOMIC_ACQUIRE);
}

static int map_put_header(rmt_log *lg, size_t off, size_t len)
{
    (void)lg, (void)off, (void)len;     /* the header page is shared: stores are seen at once */
    return RMT_OK;
}

/* initialised by a first opener (alone: a holder of an earlier session, or of another boot,
 * left whatever state) */
static int map_lock_init(rmt_log *lg)
{
    pthread_mutexattr_t a;
    if (pthread_mutexattr_init(&a))
        return RMT_EIO;
    int rc = pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED) || pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST)
             || pthread_mutex_init(&lg->hdr->lock.m, &a);
    pthread_mutexattr_destroy(&a);
    return rc ? RMT_EIO : RMT_OK;
}

static int map_lock(rmt_log *lg, double timeout, int *dead_holder)
{
    pthread_mutex_t *m = &lg->hdr->lock.m;
    int e = pthread_mutex_trylock(m);
    if (e == EBUSY && timeout > 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        double t = (double)ts.tv_nsec * 1e-9 + timeout;
        ts.tv_sec += (time_t)t;
        ts.tv_nsec = (long)((t - (double)(time_t)t) * 1e9);
        e = pthread_mutex_timedlock(m, &ts);
    }
    if (e == EOWNERDEAD) {
        /* the holder died (killed mid-append): its unpublished record is past `end` and the
         * next append overwrites it */
        pthread_mutex_consistent(m);
        *dead_holder = 1;
        return RMT_OK;
    }
    if (e == EBUSY || e == ETIMEDOUT)
        return RMT_ETIMEDOUT;
    return e ? (errno = e, RMT_EIO) : RMT_OK;
}

static void map_unlock(rmt_log *lg)
{
    pthread_mutex_unlock(&lg->hdr->lock.m);
}

static int map_replace(rmt_log *lg, const char *path)
{
    jmap *j = lg->impl;
    return rmt_posix_replace(&j->f, path);
}

const rmt_journal_ops rmt_journal_map = {
    .name = "map",
    .open = map_open,
    .close = map_close,
    .read = map_read,
    .write = map_write,
    .stat = map_stat,
    .truncate = map_truncate,
    .sync = map_sync,
    .published = map_published,
    .put_header = map_put_header,
    .lock_init = map_lock_init,
    .lock = map_lock,
    .unlock = map_unlock,
    .replace = map_replace,
};
