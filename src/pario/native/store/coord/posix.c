/* pario store: the coordination members over a store directory of a POSIX file system
 * (store/coord.h; docs/store.md, "Coordination"; docs/multinode.md).
 *
 * "host": the processes of one machine (the fastest mechanisms there are):
 *   store lock      flock on DIR/.lock (LOCK_EX / LOCK_SH, never waiting: LOCK_NB; flock
 *                   converts EX -> SH without letting anyone in; the kernel drops it when
 *                   its holder dies);
 *   journal         DIR/rmt.log mapped MAP_SHARED (core/journal_map.c: one load to follow, the
 *                   journal lock a robust process-shared mutex in the header page);
 *   range locks     fcntl open-file-description locks on DIR/.sync.lock (core/locks.c);
 *   metadata        DIR/meta.db, SQLite in WAL mode (store/meta.c);
 *   one host        the first opener writes its boot id to DIR/.host; every other opener
 *                   compares it with its own and refuses a store another machine has open
 *                   (a mapping and a process-shared mutex are not shared between machines:
 *                   serving on, it would lose data).
 * "pfs": processes on several nodes of a parallel file system (CephFS, Lustre, GPFS, BeeGFS),
 * with only what such a file system guarantees between nodes: byte-range locks are
 * cluster-wide, data synced by one client is read by another that reads it again:
 *   store lock      an fcntl open-file-description lock on byte 0 of DIR/.lock (F_RDLCK /
 *                   F_WRLCK, never waiting; a write lock converts to a read lock in place);
 *   journal         DIR/rmt.log with pread/pwrite, the journal lock a byte-range lock of it
 *                   (core/journal_file.c);
 *   range locks     as "host" (fcntl locks are the cluster-wide ones);
 *   metadata        DIR/meta.db, SQLite with a rollback journal (no WAL: its index is a shared
 *                   mapping), every transaction under SQLite's fcntl locks.
 */
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
    int pfs;                                /* 0: "host", 1: "pfs" */
    const rmt_journal_ops *journal;         /* the journal's storage */
} variant;

static const variant HOST = {0, &rmt_journal_map};
static const variant PFS = {1, &rmt_journal_file};

typedef struct {
    pxs_coord h;            /* first: the interface's header */
    const variant *v;
    int lock_fd;            /* DIR/.lock (flock / fcntl), -1: none */
    char *where_host;       /* DIR/.host ("host": the machine that has the store open) */
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
    free(h->where_host);
    free(h);
}

static host *host_new(const pxs_coord_ops *ops, double timeout)
{
    host *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->h.ops = ops;
    h->v = ops == &pxs_coord_pfs ? &PFS : &HOST;
    h->h.timeout = timeout;
    h->lock_fd = -1;
    return h;
}

static int dir_open(const pxs_coord_ops *ops, const char *root, double timeout, pxs_coord **out, char *err,
                    size_t errlen)
{
    *out = NULL;
    host *h = host_new(ops, timeout);
    if (!h || !(h->h.journal_where = join(root, "rmt.log")) || !(h->h.lock_where = join(root, ".lock"))
        || !(h->sync = join(root, ".sync.lock")) || !(h->meta = join(root, "meta.db"))
        || !(h->legacy = join(root, "rmt.db")) || !(h->where_host = join(root, ".host"))) {
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

static int host_open(const char *root, double timeout, pxs_coord **out, char *err, size_t errlen)
{
    return dir_open(&pxs_coord_host, root, timeout, out, err, errlen);
}

static int pfs_open(const char *root, double timeout, pxs_coord **out, char *err, size_t errlen)
{
    return dir_open(&pxs_coord_pfs, root, timeout, out, err, errlen);
}

int pxs_coord_files(const char *member, const char *journal, const char *sync, const char *meta, double timeout,
                    pxs_coord **out)
{
    *out = NULL;
    int bad = 0;
    const pxs_coord_ops *ops = pxs_coord_member(member);
    if (ops != &pxs_coord_host && ops != &pxs_coord_pfs)
        return PXS_ENOSYS;
    host *h = host_new(ops, timeout);
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

/* ------------------------------------------------------------------ one host ("host")
 * DIR/.host: "BOOT_ID HOSTNAME\n" of the machine whose processes have the store open, written
 * by every exclusive holder (a first opener, a replicator, fsck) and compared by every shared
 * one.  Read and written with pread/pwrite (the kernel's cached pages dropped first), never
 * mapped: the check must hold where the mechanisms it protects do not. */
static void this_machine(char *out, size_t n)
{
    char boot[40], name[64] = "?";
    rmt_boot_id(boot, sizeof boot);
    if (gethostname(name, sizeof name) != 0)
        snprintf(name, sizeof name, "?");
    name[sizeof name - 1] = 0;
    snprintf(out, n, "%s %s\n", boot[0] ? boot : "unknown", name);
}

static int write_host(host *h)
{
    char me[128];
    this_machine(me, sizeof me);
    int fd = open(h->where_host, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return PXS_EIO;
    size_t n = strlen(me);
    int rc = pwrite(fd, me, n, 0) == (ssize_t)n && ftruncate(fd, (off_t)n) == 0 ? PXS_OK : PXS_EIO;
    close(fd);
    return rc;
}

/* PXS_OK: DIR/.host names this machine (or nobody); PXS_EREMOTE: another (co->remote says which) */
static int check_host(host *h)
{
    char me[128], there[128] = "";
    this_machine(me, sizeof me);
    int fd = open(h->where_host, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? PXS_OK : PXS_EIO;
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ssize_t r = pread(fd, there, sizeof there - 1, 0);
    close(fd);
    if (r < 0)
        return PXS_EIO;
    there[r] = 0;
    size_t id = strcspn(me, " ");
    if (r == 0 || strncmp(me, there, id + 1) == 0)
        return PXS_OK;
    there[strcspn(there, "\n")] = 0;
    const char *sp = strchr(there, ' ');
    snprintf(h->h.remote, sizeof h->h.remote, "%s (boot id %.*s)", sp ? sp + 1 : "?", sp ? (int)(sp - there) : 0,
             there);
    return PXS_EREMOTE;
}

/* ------------------------------------------------------------------ the store lock */
static int lock_now(host *h, int exclusive)
{
    if (h->v->pfs) {
        struct flock fl = {.l_type = exclusive ? F_WRLCK : F_RDLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1};
        if (fcntl(h->lock_fd, F_OFD_SETLK, &fl) == 0)
            return PXS_OK;
        return errno == EAGAIN || errno == EACCES || errno == EINTR ? PXS_EBUSY : PXS_EIO;
    }
    if (flock(h->lock_fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) == 0)
        return PXS_OK;
    return errno == EWOULDBLOCK || errno == EINTR ? PXS_EBUSY : PXS_EIO;
}

static void unlock_now(host *h)
{
    if (h->v->pfs) {
        struct flock fl = {.l_type = F_UNLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1};
        (void)fcntl(h->lock_fd, F_OFD_SETLK, &fl);
    } else {
        (void)flock(h->lock_fd, LOCK_UN);
    }
}

static int host_try_lock(pxs_coord *co, int exclusive)
{
    host *h = (host *)co;
    if (h->lock_fd < 0)
        return PXS_EIO;
    int rc = lock_now(h, exclusive);
    if (rc || h->v->pfs || !h->where_host)
        return rc;
    if (exclusive)          /* this machine's processes have it now */
        return write_host(h) ? (unlock_now(h), PXS_EIO) : PXS_OK;
    rc = check_host(h);
    if (rc != PXS_EREMOTE)
        return rc ? (unlock_now(h), rc) : PXS_OK;
    /* DIR/.host names another machine: a holder there, or a stale name nobody holds any more
     * (that machine's session ended): alone, this process names its own machine */
    unlock_now(h);
    if (lock_now(h, 1) != PXS_OK)
        return PXS_EREMOTE;
    rc = write_host(h);
    if (!rc)
        rc = lock_now(h, 0);
    if (rc)
        unlock_now(h);
    return rc;
}

static int host_downgrade(pxs_coord *co)
{
    host *h = (host *)co;
    return lock_now(h, 0);  /* conversion in place (flock, fcntl): nobody else can hold it now */
}

static void host_unlock(pxs_coord *co)
{
    host *h = (host *)co;
    if (h->lock_fd >= 0)
        unlock_now(h);
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
    return pxs_meta_open(m, h->meta, co->timeout, co->ops->meta_wal, err, errlen);
}

static int host_meta_init(pxs_coord *co, char *err, size_t errlen)
{
    host *h = (host *)co;
    if (!h->meta) {
        snprintf(err, errlen, "no metadata database");
        return PXS_EINVAL;
    }
    return pxs_meta_init(h->meta, co->ops->meta_wal, err, errlen);
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
    return rmt_open(c, h->v->journal, co->journal_where, shared || h->files ? h->sync : NULL, shared, first, co->timeout);
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

/* the two members differ in their open (the variant) and in what serving several nodes takes:
 * data files read past the client cache, SQLite without WAL */
#define POSIX_MEMBER(NAME, OPEN, NODES)                                                                      \
    {                                                                                                        \
        .name = NAME, .uncached_data = NODES, .meta_wal = !(NODES), .open = OPEN, .close = host_close,        \
        .try_lock = host_try_lock,                                                                           \
        .downgrade = host_downgrade, .release = host_release, .unlock = host_unlock, .meta_open = host_meta_open, .meta_init = host_meta_init,                   \
        .journal_probe = host_journal_probe, .journal_open = host_journal_open,                              \
        PXS_COORD_CORE_JOURNAL, .range_lock = host_range_lock,                                                 \
        .range_unlock = host_range_unlock,                                                                   \
    }

const pxs_coord_ops pxs_coord_host = POSIX_MEMBER("host", host_open, 0);
const pxs_coord_ops pxs_coord_pfs = POSIX_MEMBER("pfs", pfs_open, 1);
