/* pario store: the RMT journal as one RADOS object (coord/journal_rados.h). */
#define _GNU_SOURCE
#include "store/coord/journal_rados.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/rmt_private.h"
#include "store/meta.h"

#define HEAD offsetof(rmt_hdr, lock)      /* the header's fields (no lock in the object) */
#define MAX_OBJECT ((uint64_t)120 << 20)  /* below the OSDs' osd_max_object_size (128 MiB by default) */
#define LOCK_OBJECT "rmt.lock"
#define LOCK_NAME "journal"
#define HOLDER_XATTR "pario.holder"

typedef struct {
    char *oid;
    rmt_hdr hdr;             /* the header as last read or written */
    rmt_window w;            /* the object's bytes as last read */
    uint64_t ver;            /* the object's version after this holder's last write */
    int fenced;              /* 1: this process holds the journal lock: its writes assert ver */
} jr;

static pxs_rjournal *ctx(const rmt_log *lg)
{
    return (pxs_rjournal *)(uintptr_t)lg->ops;   /* ops is pxs_rjournal's first member */
}

static int rv_to_rmt(int rv)
{
    if (rv >= 0)
        return RMT_OK;
    errno = -rv == ERANGE || -rv == EOVERFLOW ? ESTALE : -rv;
    return -rv == EFBIG ? RMT_EFULL : RMT_EIO;
}

static void jr_close(rmt_log *lg)
{
    jr *j = lg->impl;
    if (!j)
        return;
    free(j->oid);
    rmt_window_free(&j->w);
    free(j);
    lg->impl = NULL;
    lg->hdr = NULL;
}

/* one write operation on the journal object: [assert version] create? truncate? write/write_full */
enum { W_AT, W_FULL, W_TRUNC };
static int operate(rmt_log *lg, int kind, const void *buf, size_t n, uint64_t pos, int create_excl)
{
    jr *j = lg->impl;
    pxs_rjournal *c = ctx(lg);
    rd_handle op = pxs_rados.create_write_op();
    if (!op)
        return RMT_ENOMEM;
    if (create_excl)
        pxs_rados.write_op_create(op, PXS_RADOS_CREATE_EXCLUSIVE, NULL);
    else if (j->fenced)
        pxs_rados.write_op_assert_version(op, j->ver);
    if (kind == W_AT)
        pxs_rados.write_op_write(op, buf, n, pos);
    else if (kind == W_FULL)
        pxs_rados.write_op_write_full(op, buf, n);
    else
        pxs_rados.write_op_truncate(op, pos);
    int rv = pxs_rados.write_op_operate(op, c->io, j->oid, NULL, 0);
    pxs_rados.release_write_op(op);
    if (rv >= 0)
        j->ver = pxs_rados.get_last_version(c->io);
    return rv;
}

static int jr_stat(rmt_log *lg)
{
    jr *j = lg->impl;
    uint64_t size = 0;
    int rv = pxs_rados.stat(ctx(lg)->io, j->oid, &size, NULL);
    if (rv < 0)
        return rv_to_rmt(rv);
    lg->fsize = size;
    return RMT_OK;
}

static int read_exact(rmt_log *lg, void *buf, size_t n, uint64_t pos)
{
    jr *j = lg->impl;
    uint8_t *p = buf;
    while (n) {
        size_t k = n > ((size_t)1 << 30) ? (size_t)1 << 30 : n;
        int r = pxs_rados.read(ctx(lg)->io, j->oid, (char *)p, k, pos);
        if (r < 0)
            return rv_to_rmt(r);
        if (r == 0)
            return RMT_ECORRUPT;     /* shorter than the caller was told */
        p += r;
        pos += (uint64_t)r;
        n -= (size_t)r;
    }
    return RMT_OK;
}

static int read_header(rmt_log *lg)
{
    jr *j = lg->impl;
    j->w.len = 0;
    return read_exact(lg, &j->hdr, HEAD, 0);
}

static const char *object_of(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static int jr_open(rmt_log *lg, const char *path, int how)
{
    jr *j = calloc(1, sizeof *j);
    if (!j)
        return RMT_ENOMEM;
    lg->impl = j;
    lg->hdr = &j->hdr;
    int rc = (j->oid = strdup(object_of(path))) ? RMT_OK : RMT_ENOMEM;
    if (!rc && how != RMT_OPEN_EXISTING) {
        rmt_hdr h;
        memset(&h, 0, sizeof h);
        rmt_log_header_init(&h, RMT_HDR_SIZE, 0);
        uint8_t *blank = calloc(1, RMT_HDR_SIZE);
        if (!blank) {
            rc = RMT_ENOMEM;
        } else {
            memcpy(blank, &h, sizeof h < RMT_HDR_SIZE ? sizeof h : RMT_HDR_SIZE);
            /* CREATE: only if there is none (the caller makes sure nobody else creates it now) */
            int rv = how == RMT_OPEN_CREATE ? operate(lg, W_FULL, blank, RMT_HDR_SIZE, 0, 1)
                                            : operate(lg, W_FULL, blank, RMT_HDR_SIZE, 0, 0);
            if (rv < 0 && !(how == RMT_OPEN_CREATE && rv == -EEXIST))
                rc = rv_to_rmt(rv);
            free(blank);
        }
    }
    return rmt_storage_opened(lg, rc, read_header);
}

static int fill(void *ctx, void *buf, size_t n, uint64_t pos)
{
    return read_exact(ctx, buf, n, pos);
}

static int jr_read(rmt_log *lg, uint64_t pos, size_t n, const uint8_t **p)
{
    jr *j = lg->impl;
    return rmt_window_read(&j->w, pos, n, lg->fsize, fill, lg, p);
}

static int jr_write(rmt_log *lg, uint64_t pos, const void *buf, size_t n)
{
    jr *j = lg->impl;
    j->w.len = 0;
    if (pos + n > MAX_OBJECT)
        return RMT_EFULL;
    int rv = operate(lg, W_AT, buf, n, pos, 0);
    if (rv < 0)
        return rv_to_rmt(rv);
    if (pos + n > lg->fsize)
        lg->fsize = pos + n;
    return RMT_OK;
}

static int jr_truncate(rmt_log *lg, uint64_t size)
{
    jr *j = lg->impl;
    j->w.len = 0;
    int rv = operate(lg, W_TRUNC, NULL, 0, size, 0);
    if (rv < 0)
        return rv_to_rmt(rv);
    lg->fsize = size;
    return RMT_OK;
}

static int jr_sync(rmt_log *lg)
{
    (void)lg;                  /* acknowledged: on every replica of the object */
    return RMT_OK;
}

static uint64_t jr_published(rmt_log *lg)
{
    jr *j = lg->impl;
    if (read_header(lg))
        return 0;              /* unreadable: below what was applied, the caller says corrupt */
    if (j->hdr.end > lg->fsize)
        (void)jr_stat(lg);     /* another client appended: the object is longer now */
    return j->hdr.end;
}

static int jr_put_header(rmt_log *lg, size_t off, size_t len)
{
    jr *j = lg->impl;
    if (off + len > HEAD)
        return RMT_EINVAL;
    int rv = operate(lg, W_AT, (const uint8_t *)&j->hdr + off, len, off, 0);
    return rv_to_rmt(rv);
}

static int jr_lock_init(rmt_log *lg)
{
    (void)lg;                  /* the lock is RADOS's */
    return RMT_OK;
}

static int jr_lock(rmt_log *lg, double timeout, int *dead_holder)
{
    jr *j = lg->impl;
    pxs_rjournal *c = ctx(lg);
    (void)dead_holder;         /* an expired lease is not told apart from a released lock */
    int rc = pxs_lease_wait(c->lease, LOCK_OBJECT, LOCK_NAME, 1, timeout);
    if (rc == PXS_EBUSY)
        return RMT_ETIMEDOUT;
    if (rc)
        return RMT_EIO;
    /* fence: from now on this holder's writes assert the version its own writes leave */
    rd_handle op = pxs_rados.create_write_op();
    if (!op) {
        pxs_lease_drop(c->lease, LOCK_OBJECT, LOCK_NAME);
        return RMT_ENOMEM;
    }
    const char *cookie = pxs_lease_cookie(c->lease);
    pxs_rados.write_op_setxattr(op, HOLDER_XATTR, cookie, strlen(cookie));
    int rv = pxs_rados.write_op_operate(op, c->io, j->oid, NULL, 0);
    pxs_rados.release_write_op(op);
    if (rv < 0) {
        pxs_lease_drop(c->lease, LOCK_OBJECT, LOCK_NAME);
        return rv_to_rmt(rv);
    }
    j->ver = pxs_rados.get_last_version(c->io);
    j->fenced = 1;
    return RMT_OK;
}

static void jr_unlock(rmt_log *lg)
{
    jr *j = lg->impl;
    j->fenced = 0;
    pxs_lease_drop(ctx(lg)->lease, LOCK_OBJECT, LOCK_NAME);
}

static int jr_replace(rmt_log *lg, const char *path)
{
    jr *j = lg->impl;
    pxs_rjournal *c = ctx(lg);
    uint8_t *all = malloc(lg->fsize ? lg->fsize : 1);
    if (!all)
        return RMT_ENOMEM;
    int rc = read_exact(lg, all, lg->fsize, 0);
    char *noid = strdup(object_of(path));
    if (!rc && !noid)
        rc = RMT_ENOMEM;
    if (!rc) {
        int rv = pxs_rados.write_full(c->io, noid, (const char *)all, lg->fsize);
        rc = rv_to_rmt(rv);
    }
    free(all);
    if (rc) {
        free(noid);
        return rc;
    }
    (void)pxs_rados.remove(c->io, j->oid);
    free(j->oid);
    j->oid = noid;
    j->fenced = 0;
    j->w.len = 0;
    return RMT_OK;
}

void pxs_rjournal_init(pxs_rjournal *j, rd_handle io, pxs_lease *lease)
{
    memset(j, 0, sizeof *j);
    j->ops = (rmt_journal_ops){
        .name = "rados",
        .open = jr_open,
        .close = jr_close,
        .read = jr_read,
        .write = jr_write,
        .stat = jr_stat,
        .truncate = jr_truncate,
        .sync = jr_sync,
        .published = jr_published,
        .put_header = jr_put_header,
        .lock_init = jr_lock_init,
        .lock = jr_lock,
        .unlock = jr_unlock,
        .replace = jr_replace,
    };
    j->io = io;
    j->lease = lease;
}
