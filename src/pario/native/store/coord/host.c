/* pario store: the single-host coordination member "host" (store/coord.h; docs/store.md,
 * "Coordination"): today's mechanisms, for processes of one machine.
 *
 *   store lock      flock on DIR/.lock (LOCK_EX / LOCK_SH, never waiting: LOCK_NB; flock
 *                   converts EX -> SH without letting anyone in; the kernel drops it when
 *                   its holder dies);
 *   journal         DIR/rmt.log, mapped MAP_SHARED by every opener (core/: rmt_open, the
 *                   robust process-shared mutex in its header page, rmt_commit publishes,
 *                   rmt_catch_up follows; docs/store.md, "The RMT journal");
 *   range locks     fcntl open-file-description locks on DIR/.sync.lock (core/locks.c);
 *   metadata        DIR/meta.db, SQLite in WAL mode (store/meta.c).
 * None of these works across machines (no shared mmap or process-shared mutex on a parallel
 * file system, no SQLite WAL across nodes): other members replace them there. */
#define _GNU_SOURCE
#include "store/coord.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    pxs_coord h;            /* first: the interface's header */
    int lock_fd;            /* DIR/.lock (flock), -1: none */
    char *sync;             /* DIR/.sync.lock (shared journals), NULL: none */
    char *meta;             /* DIR/meta.db */
    char *legacy;           /* DIR/rmt.db: the table of stores made before the journal */
    int files;              /* over explicit files (pxs_coord_host_files): the sync file as given */
} host;

static char *join(const char *root, const char *name)
{
    size_t n = strlen(root) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", root, name);
    return p;
}

static char *dup_or_null(const char *s, int *bad)
{
    char *p = s ? strdup(s) : NULL;
    if (s && !p)
        *bad = 1;
    return p;
}

static void host_close(pxs_coord *co)
{
    host *h = (host *)co;
    if (!h)
        return;
    if (h->lock_fd >= 0)
        close(h->lock_fd);
    free(h->h.journal_where);
    free(h->h.lock_where);
    free(h->sync);
    free(h->meta);
    free(h->legacy);
    free(h);
}

static host *host_new(double timeout)
{
    host *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->h.ops = &pxs_coord_host;
    h->h.timeout = timeout;
    h->lock_fd = -1;
    return h;
}

static int host_open(const char *root, double timeout, pxs_coord **out, char *err, size_t errlen)
{
    *out = NULL;
    host *h = host_new(timeout);
    if (!h || !(h->h.journal_where = join(root, "rmt.log")) || !(h->h.lock_where = join(root, ".lock"))
        || !(h->sync = join(root, ".sync.lock")) || !(h->meta = join(root, "meta.db"))
        || !(h->legacy = join(root, "rmt.db"))) {
        host_close(&h->h);
        snprintf(err, errlen, "out of memory");
        return PXS_ENOMEM;
    }
    /* never through a planted link (a store directory may come from someone else) */
    h->lock_fd = open(h->h.lock_where, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (h->lock_fd < 0) {
        snprintf(err, errlen, "%s: %s%s", h->h.lock_where, strerror(errno),
                 errno == ELOOP ? " (a symbolic link: pario never follows one it did not make)" : "");
        host_close(&h->h);
        return PXS_EIO;
    }
    *out = &h->h;
    return PXS_OK;
}

int pxs_coord_host_files(const char *journal, const char *sync, const char *meta, double timeout, pxs_coord **out)
{
    *out = NULL;
    int bad = 0;
    host *h = host_new(timeout);
    if (!h)
        return PXS_ENOMEM;
    h->h.journal_where = dup_or_null(journal, &bad);
    h->sync = dup_or_null(sync, &bad);
    h->meta = dup_or_null(meta, &bad);
    h->files = 1;
    if (bad) {
        host_close(&h->h);
        return PXS_ENOMEM;
    }
    *out = &h->h;
    return PXS_OK;
}

/* ------------------------------------------------------------------ the store lock */
static int host_try_lock(pxs_coord *co, int exclusive)
{
    host *h = (host *)co;
    if (h->lock_fd < 0)
        return PXS_EIO;
    if (flock(h->lock_fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) == 0)
        return PXS_OK;
    return errno == EWOULDBLOCK || errno == EINTR ? PXS_EBUSY : PXS_EIO;
}

static int host_downgrade(pxs_coord *co)
{
    return host_try_lock(co, 0);        /* flock conversion: nobody else can hold it now */
}

static void host_release(pxs_coord *co)
{
    host *h = (host *)co;
    if (h->lock_fd >= 0)
        close(h->lock_fd);
    h->lock_fd = -1;
}

/* ------------------------------------------------------------------ metadata */
static int host_meta_open(pxs_coord *co, pxs_meta *m, char *err, size_t errlen)
{
    host *h = (host *)co;
    if (!h->meta) {
        snprintf(err, errlen, "no metadata database");
        return PXS_EINVAL;
    }
    return pxs_meta_open(m, h->meta, co->timeout, err, errlen);
}

/* ------------------------------------------------------------------ the journal (core/) */
static int host_journal_probe(pxs_coord *co)
{
    host *h = (host *)co;
    struct stat sb;
    if (!co->journal_where)
        return PXS_ENOENT;
    if (stat(co->journal_where, &sb) == 0)
        return PXS_OK;
    return h->legacy && stat(h->legacy, &sb) == 0 ? PXS_ENOSYS : PXS_ENOENT;
}

static int host_journal_open(pxs_coord *co, rmt_core *c, int shared, int first)
{
    host *h = (host *)co;
    if (!co->journal_where)
        return RMT_EINVAL;
    return rmt_open(c, co->journal_where, shared || h->files ? h->sync : NULL, shared, first, co->timeout);
}

static void host_journal_close(pxs_coord *co, rmt_core *c)
{
    (void)co;
    rmt_close(c);
}

static int host_journal_lock(pxs_coord *co, rmt_core *c, double timeout)
{
    (void)co;
    return rmt_begin(c, timeout);
}

static int host_journal_publish(pxs_coord *co, rmt_core *c)
{
    (void)co;
    return rmt_commit(c);
}

static int host_journal_follow(pxs_coord *co, rmt_core *c)
{
    (void)co;
    return rmt_catch_up(c);
}

static int host_journal_sync(pxs_coord *co, rmt_core *c)
{
    (void)co;
    return rmt_sync(c);
}

static int host_journal_checkpoint(pxs_coord *co, rmt_core *c)
{
    (void)co;
    return rmt_checkpoint(c);
}

static int host_journal_set_clean(pxs_coord *co, rmt_core *c, int clean)
{
    (void)co;
    return rmt_set_clean(c, clean);
}

/* ------------------------------------------------------------------ range locks */
static int host_range_lock(pxs_coord *co, rmt_core *c, uint64_t fid, int64_t x, int64_t e, int exclusive,
                           double timeout)
{
    (void)co;
    return rmt_range_lock(c, fid, x, e, exclusive, timeout);
}

static int host_range_unlock(pxs_coord *co, rmt_core *c, uint64_t fid, int64_t x, int64_t e)
{
    (void)co;
    return rmt_range_unlock(c, fid, x, e);
}

const pxs_coord_ops pxs_coord_host = {
    .name = "host",
    .open = host_open,
    .close = host_close,
    .try_lock = host_try_lock,
    .downgrade = host_downgrade,
    .release = host_release,
    .meta_open = host_meta_open,
    .journal_probe = host_journal_probe,
    .journal_open = host_journal_open,
    .journal_close = host_journal_close,
    .journal_lock = host_journal_lock,
    .journal_publish = host_journal_publish,
    .journal_follow = host_journal_follow,
    .journal_sync = host_journal_sync,
    .journal_checkpoint = host_journal_checkpoint,
    .journal_set_clean = host_journal_set_clean,
    .range_lock = host_range_lock,
    .range_unlock = host_range_unlock,
};
