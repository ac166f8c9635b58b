/* pario serve: the `rados` data plane (datafile.h): a data file is a sequence of RADOS
 * objects, as pario.store.rados.RadosBackend keeps it (Python and C share one store).
 *
 * Objects.  Data file (i, d) of server j is the objects `<i:08d>.<d>.<k:08x>` (k = 0, 1, …)
 * of object_size bytes (store.json "object_size") in server j's pool (store.json "pools"),
 * in the RADOS namespace of the store's id: the byte at server-local offset L is byte
 * L % object_size of object L / object_size.  Objects no write touched do not exist and read
 * as 0, as do bytes past an object's end.
 *
 * Transfers.  A transfer's segments are cut at object boundaries; pieces contiguous in one
 * object become one operation (one buffer: rados_aio_write / rados_aio_read; several: one
 * write or read operation with a sub-operation per buffer, buffers adjacent in memory
 * joined).  All operations of a transfer are in flight at once (at most MAX_INFLIGHT, the
 * Objecter's default in-flight limit, then the next batch), the call returns when all have
 * completed and reports the first failure with its pool and object; -ENOENT on a read is a
 * hole.  A write is durable on the OSD when it completes: sync has nothing to do (the
 * store still commits the size at fsync and close).
 *
 * Sizes.  The size of a data file is k_last * object_size + size(object k_last), k_last the
 * highest index present: the objects of the store's namespace in the server's pool are
 * listed (rados_nobjects_list_*: the namespace holds this store's objects only), those of
 * (i, d) kept, and the highest one stat'ed (one removed meanwhile: the next lower one).
 * Listing rather than stat'ing downward from an expected size: after a crash nothing bounds
 * where the last object is.  truncate(n) removes the objects past byte n, from the highest
 * down, and cuts (or creates) the last one to end at n; reserve(end) grows the object holding
 * byte end - 1 to hold it, never cuts it and overwrites nothing: stat, then a write operation
 * that asserts the object's version (or creates it exclusively) and truncates it up; another
 * writer in between makes the assertion fail and the step is taken again.
 *
 * Connection.  At the plane's open (the store's open): a cluster handle of store/rados_api.h
 * (librados loaded by dlopen there, shared with everything of a store in RADOS; the cluster's
 * ceph.conf and explicit operation timeouts, so that a down OSD or monitor is an error, never
 * a hang); one I/O context per server pool, in the store's namespace.  All shut down at the
 * store's close.
 * O_DIRECT does not apply (direct mode is refused). */
#define _GNU_SOURCE
#include "store/planes/plane.h"
#include "store/rados_api.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_INFLIGHT 1024         /* operations in flight at once (objecter_inflight_ops) */
#define RESERVE_TRIES 100
#define OID_LEN 64

/* ------------------------------------------------------------------ the plane */
typedef struct {
    pxs_dplane hdr;
    rd_handle cluster;
    rd_handle *io;                 /* per server: its pool, in the store's namespace */
    int nio;
    int64_t osz;                   /* object size */
} rplane;

struct pxs_datafile {
    rplane *dp;
    int server, d;
    int64_t id;
    const char *name;
};

static const char *pool_of(const rplane *p, int server)
{
    return p->hdr.cfg->servers[server].place;
}

/* the plane's own entries of store.json (cfg->plane_cfg) */
typedef struct {
    char *cluster;      /* the cluster directory (its ceph.conf) */
    int64_t object_size;/* bytes per object ("object_size", default 4 MiB: pario.store.rados.OBJECT_SIZE) */
} rconfig;

#define OBJECT_SIZE ((int64_t)4 << 20)

static void free_config(void *c)
{
    if (c)
        free(((rconfig *)c)->cluster);
    free(c);
}

/* store.json "cluster", "object_size" and "pools": every server's pool (pario.store.root.Store,
 * pario.store.rados.RadosBackend.options) */
static int configure(const pxs_json *j, pxs_config *cfg, const char *path, char *err, size_t errlen)
{
    const pxs_json *cl = j ? pxs_json_get(j, "cluster") : NULL, *osz = j ? pxs_json_get(j, "object_size") : NULL;
    const pxs_json *pools = j ? pxs_json_get(j, "pools") : NULL;
    if (!cl || cl->type != PXS_JSTR || cl->slen == 0 || strlen(cl->s) != cl->slen || !pools
        || pools->type != PXS_JOBJ) {
        snprintf(err, errlen, "%s: a rados store needs \"cluster\" and \"pools\"", path);
        return PXS_EINVAL;
    }
    rconfig *rc = calloc(1, sizeof *rc);
    if (!rc)
        return PXS_ENOMEM;
    cfg->plane_cfg = rc;
    cfg->plane_free = free_config;
    rc->object_size = OBJECT_SIZE;
    if (osz && osz->type != PXS_JNULL) {
        if (osz->type != PXS_JNUM || !osz->is_int || osz->i <= 0 || osz->i > ((int64_t)1 << 40)) {
            if (osz->type == PXS_JNUM)
                snprintf(err, errlen, "%s: object size must be an integer > 0 (store.json has %g)", path, osz->d);
            else
                snprintf(err, errlen, "%s: object size must be an integer > 0", path);
            return PXS_EINVAL;
        }
        rc->object_size = osz->i;
    }
    rc->cluster = cl->s[0] == '/' ? strdup(cl->s) : pxs_join(cfg->root, cl->s);
    if (!rc->cluster)
        return PXS_ENOMEM;
    for (int i = 0; i < cfg->nservers; i++) {
        const pxs_json *p = pxs_json_get(pools, cfg->servers[i].name);
        if (!p || p->type != PXS_JSTR || p->slen == 0 || strlen(p->s) != p->slen) {
            snprintf(err, errlen, "store.json names no pool for server %s", cfg->servers[i].name);
            return PXS_EINVAL;
        }
        if (!(cfg->servers[i].place = strdup(p->s)))
            return PXS_ENOMEM;
    }
    return PXS_OK;
}

static void oid(char *out, int64_t id, int d, int64_t k)
{
    snprintf(out, OID_LEN, "%08lld.%d.%08llx", (long long)id, d, (unsigned long long)k);
}

static const char *why(int rv)
{
    return strerror(rv < 0 ? -rv : rv);
}

static void close_plane(pxs_dplane *dp)
{
    rplane *p = (rplane *)dp;
    if (!p)
        return;
    for (int i = 0; i < p->nio; i++)
        if (p->io[i])
            pxs_rados.ioctx_destroy(p->io[i]);
    free(p->io);
    if (p->cluster)
        pxs_rados.shutdown(p->cluster);
    free(p);
}

static int open_plane(const pxs_config *cfg, int cache, pxs_dplane **out, char *err, size_t errlen)
{
    *out = NULL;
    if (cache == PXS_CACHE_DIRECT) {
        snprintf(err, errlen, "direct I/O (O_DIRECT) does not apply to a rados store (its data are RADOS objects): "
                 "open it without direct I/O");
        return PXS_EINVAL;
    }
    rplane *p = calloc(1, sizeof *p);
    if (!p || !(p->io = calloc((size_t)(cfg->nservers > 0 ? cfg->nservers : 1), sizeof *p->io))) {
        free(p);
        return PXS_ENOMEM;
    }
    p->hdr.ops = &pxs_df_rados;
    p->hdr.cfg = cfg;
    p->osz = ((const rconfig *)cfg->plane_cfg)->object_size;
    int rv = pxs_rados_connect(((const rconfig *)cfg->plane_cfg)->cluster, &p->cluster, err, errlen);
    if (rv) {
        close_plane(&p->hdr);
        return rv;
    }
    for (int i = 0; i < cfg->nservers; i++) {
        rv = pxs_rados_ioctx(p->cluster, cfg->servers[i].place, cfg->id, &p->io[i], err, errlen);
        if (rv) {
            p->nio = i;
            close_plane(&p->hdr);
            return rv;
        }
    }
    p->nio = cfg->nservers;
    *out = &p->hdr;
    return PXS_OK;
}

static int df_open(pxs_dplane *dp, int server, int64_t id, int d, const char *name, pxs_datafile **out, char *err,
                   size_t errlen)
{
    (void)err;
    (void)errlen;
    pxs_datafile *f = malloc(sizeof *f);
    if (!f)
        return PXS_ENOMEM;
    *f = (pxs_datafile){(rplane *)dp, server, d, id, name};
    *out = f;
    return PXS_OK;
}

static void df_close(pxs_datafile *f)
{
    free(f);
}

/* ------------------------------------------------------------------ listing */
/* a data object's name `<id:08d>.<d>.<k:08x>` parsed (0 if the name is not one) */
static int parse_oid(const char *s, int64_t *id, long *d, int64_t *k)
{
    char *e;
    if (*s < '0' || *s > '9')
        return 0;
    long long a = strtoll(s, &e, 10);
    if (*e != '.' || e[1] < '0' || e[1] > '9')
        return 0;
    long b = strtol(e + 1, &e, 10);
    if (*e != '.' || !((e[1] >= '0' && e[1] <= '9') || (e[1] >= 'a' && e[1] <= 'f') || (e[1] >= 'A' && e[1] <= 'F')))
        return 0;
    unsigned long long c = strtoull(e + 1, &e, 16);
    if (*e || b < 0 || b > INT_MAX || c > (unsigned long long)INT64_MAX)
        return 0;
    *id = a;
    *d = b;
    *k = (int64_t)c;
    return 1;
}

/* the objects of id on server: their (d, k), malloc'ed; d < 0 takes every d of id */
typedef struct {
    int d;
    int64_t k;
} objkey;

static int scan(rplane *p, int server, int64_t id, int d, objkey **out, size_t *n, char *err, size_t errlen)
{
    *out = NULL;
    *n = 0;
    rd_handle ctx = NULL;
    int rv = pxs_rados.nobjects_list_open(p->io[server], &ctx);
    size_t cap = 0;
    int rc = PXS_OK;
    while (rv >= 0) {
        const char *entry = NULL;
        rv = pxs_rados.nobjects_list_next(ctx, &entry, NULL, NULL);
        if (rv == -ENOENT) {        /* the end */
            rv = 0;
            break;
        }
        if (rv < 0)
            break;
        int64_t fid, k;
        long df;
        if (!parse_oid(entry, &fid, &df, &k) || fid != id || (d >= 0 && df != d))
            continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            objkey *no = realloc(*out, cap * sizeof *no);
            if (!no) {
                rc = PXS_ENOMEM;
                break;
            }
            *out = no;
        }
        (*out)[(*n)++] = (objkey){(int)df, k};
    }
    if (ctx)
        pxs_rados.nobjects_list_close(ctx);
    if (!rc && rv < 0) {
        snprintf(err, errlen, "rados list %s (namespace %s): %s", pool_of(p, server), p->hdr.cfg->id, why(rv));
        rc = PXS_EIO;
    }
    if (rc) {
        free(*out);
        *out = NULL;
        *n = 0;
    }
    return rc;
}

static int cmp_k_desc(const void *a, const void *b)
{
    int64_t x = ((const objkey *)a)->k, y = ((const objkey *)b)->k;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* k_last * object_size + size(object k_last) of data file (id, d) of server */
static int df_size(pxs_dplane *dp, int server, int64_t id, int d, int64_t *size, char *err, size_t errlen)
{
    rplane *p = (rplane *)dp;
    objkey *ks;
    size_t n;
    *size = 0;
    int rc = scan(p, server, id, d, &ks, &n, err, errlen);
    if (rc)
        return rc;
    qsort(ks, n, sizeof *ks, cmp_k_desc);
    for (size_t i = 0; i < n; i++) {
        char o[OID_LEN];
        oid(o, id, d, ks[i].k);
        uint64_t sz = 0;
        int rv = pxs_rados.stat(p->io[server], o, &sz, NULL);
        if (rv == -ENOENT)          /* removed meanwhile: the one before */
            continue;
        if (rv < 0) {
            snprintf(err, errlen, "rados stat %s/%s: %s", pool_of(p, server), o, why(rv));
            rc = PXS_EIO;
        } else
            *size = ks[i].k * p->osz + (int64_t)sz;
        break;
    }
    free(ks);
    return rc;
}

static int df_list(pxs_dplane *dp, int server, int64_t id, int **ds, size_t *n, char *err, size_t errlen)
{
    objkey *ks;
    size_t nk;
    *ds = NULL;
    *n = 0;
    int rc = scan((rplane *)dp, server, id, -1, &ks, &nk, err, errlen);
    if (rc)
        return rc;
    int *out = malloc((nk ? nk : 1) * sizeof *out);
    if (!out) {
        free(ks);
        return PXS_ENOMEM;
    }
    size_t m = 0;
    for (size_t i = 0; i < nk; i++) {
        size_t j = 0;
        while (j < m && out[j] != ks[i].d)
            j++;
        if (j == m)
            out[m++] = ks[i].d;
    }
    free(ks);
    *ds = out;
    *n = m;
    return PXS_OK;
}

/* ------------------------------------------------------------------ sizes */
static int df_truncate(pxs_datafile *f, int64_t n, int sync, char *err, size_t errlen)
{
    (void)sync;                     /* durable on ack */
    rplane *p = f->dp;
    rd_handle io = p->io[f->server];
    int64_t last = n > 0 ? (n - 1) / p->osz : -1;
    objkey *ks;
    size_t nk;
    int rc = scan(p, f->server, f->id, f->d, &ks, &nk, err, errlen);
    if (rc)
        return rc;
    qsort(ks, nk, sizeof *ks, cmp_k_desc);
    char o[OID_LEN];
    for (size_t i = 0; !rc && i < nk && ks[i].k > last; i++) {   /* from the highest down */
        oid(o, f->id, f->d, ks[i].k);
        int rv = pxs_rados.remove(io, o);
        if (rv < 0 && rv != -ENOENT) {
            snprintf(err, errlen, "rados remove %s/%s: %s", pool_of(p, f->server), o, why(rv));
            rc = PXS_EIO;
        }
    }
    free(ks);
    if (rc || last < 0)
        return rc;
    oid(o, f->id, f->d, last);
    rd_handle op = pxs_rados.create_write_op();
    if (!op)
        return PXS_ENOMEM;
    pxs_rados.write_op_create(op, PXS_RADOS_CREATE_IDEMPOTENT, NULL);
    pxs_rados.write_op_truncate(op, (uint64_t)(n - last * p->osz));
    int rv = pxs_rados.write_op_operate(op, io, o, NULL, 0);
    pxs_rados.release_write_op(op);
    if (rv < 0) {
        snprintf(err, errlen, "rados truncate %s/%s: %s", pool_of(p, f->server), o, why(rv));
        return PXS_EIO;
    }
    return PXS_OK;
}

static int df_reserve(pxs_datafile *f, int64_t end, char *err, size_t errlen)
{
    rplane *p = f->dp;
    rd_handle io = p->io[f->server];
    int64_t k = (end - 1) / p->osz;
    uint64_t need = (uint64_t)(end - k * p->osz);
    char o[OID_LEN];
    oid(o, f->id, f->d, k);
    int rv = 0;
    for (int t = 0; t < RESERVE_TRIES; t++) {
        uint64_t sz = 0, ver = 0;
        rv = pxs_rados.stat(io, o, &sz, NULL);      /* the store's mutex: nothing else on io in between */
        int absent = rv == -ENOENT;
        if (rv < 0 && !absent)
            break;
        if (!absent) {
            ver = pxs_rados.get_last_version(io);
            if (sz >= need)
                return PXS_OK;
        }
        rd_handle op = pxs_rados.create_write_op();
        if (!op)
            return PXS_ENOMEM;
        if (absent)
            pxs_rados.write_op_create(op, PXS_RADOS_CREATE_EXCLUSIVE, NULL);
        else
            pxs_rados.write_op_assert_version(op, ver);
        pxs_rados.write_op_truncate(op, need);
        rv = pxs_rados.write_op_operate(op, io, o, NULL, 0);
        pxs_rados.release_write_op(op);
        if (rv >= 0)
            return PXS_OK;
        /* raced with another writer (created it, changed it, removed it): again */
        if (rv != -EEXIST && rv != -ERANGE && rv != -EOVERFLOW && rv != -ENOENT)
            break;
    }
    snprintf(err, errlen, "rados reserve %s/%s: %s", pool_of(p, f->server), o, why(rv));
    return PXS_EIO;
}

static int df_sync(pxs_datafile *f, char *err, size_t errlen)
{
    (void)f;                        /* a write is durable on the OSD when it completes */
    (void)err;
    (void)errlen;
    return PXS_OK;
}

/* ------------------------------------------------------------------ transfers */
typedef struct {                   /* one buffer of an operation */
    char *buf;
    size_t len, got;
    int prval;
} part;

typedef struct {                   /* one operation: a range of one object */
    const pxs_datafile *df;
    int64_t k, off, len;
    size_t p0, np;                 /* its parts */
    rd_handle c, op;
    char oid[OID_LEN];
} run;

typedef struct {
    run *r;
    part *p;
    size_t nr, np, capr, capp;
} runs;

static int add_piece(runs *rs, const pxs_datafile *df, int64_t k, int64_t off, int64_t len, char *buf)
{
    run *last = rs->nr ? &rs->r[rs->nr - 1] : NULL;
    if (last && last->df == df && last->k == k && last->off + last->len == off) {
        part *lp = &rs->p[rs->np - 1];
        last->len += len;
        if (lp->buf + lp->len == buf) {       /* adjacent in memory: one buffer */
            lp->len += (size_t)len;
            return PXS_OK;
        }
    } else {
        if (rs->nr == rs->capr) {
            size_t c = rs->capr ? 2 * rs->capr : 64;
            run *nr = realloc(rs->r, c * sizeof *nr);
            if (!nr)
                return PXS_ENOMEM;
            rs->r = nr;
            rs->capr = c;
        }
        last = &rs->r[rs->nr++];
        *last = (run){.df = df, .k = k, .off = off, .len = len, .p0 = rs->np};
    }
    if (rs->np == rs->capp) {
        size_t c = rs->capp ? 2 * rs->capp : 64;
        part *np = realloc(rs->p, c * sizeof *np);
        if (!np)
            return PXS_ENOMEM;
        rs->p = np;
        rs->capp = c;
    }
    rs->p[rs->np++] = (part){buf, (size_t)len, 0, 0};
    last->np++;
    return PXS_OK;
}

/* submit run r (its completion in r->c) */
static int submit(run *r, part *ps, int write)
{
    rplane *p = r->df->dp;
    rd_handle io = p->io[r->df->server];
    oid(r->oid, r->df->id, r->df->d, r->k);
    int rv = pxs_rados.aio_create_completion(NULL, NULL, NULL, &r->c);
    if (rv < 0) {
        r->c = NULL;
        return rv;
    }
    part *pp = ps + r->p0;
    if (r->np == 1) {
        rv = write ? pxs_rados.aio_write(io, r->oid, r->c, pp[0].buf, pp[0].len, (uint64_t)r->off)
                   : pxs_rados.aio_read(io, r->oid, r->c, pp[0].buf, pp[0].len, (uint64_t)r->off);
    } else {
        r->op = write ? pxs_rados.create_write_op() : pxs_rados.create_read_op();
        if (!r->op)
            rv = -ENOMEM;
        uint64_t at = (uint64_t)r->off;
        for (size_t i = 0; r->op && i < r->np; i++) {
            if (write)
                pxs_rados.write_op_write(r->op, pp[i].buf, pp[i].len, at);
            else
                pxs_rados.read_op_read(r->op, at, pp[i].len, pp[i].buf, &pp[i].got, &pp[i].prval);
            at += pp[i].len;
        }
        if (r->op)
            rv = write ? pxs_rados.aio_write_op_operate(r->op, io, r->c, r->oid, NULL, 0)
                       : pxs_rados.aio_read_op_operate(r->op, io, r->c, r->oid, 0);
    }
    if (rv < 0) {
        pxs_rados.aio_release(r->c);
        r->c = NULL;
    }
    return rv;
}

/* wait for run r, fill a read's holes with zeros; its return value (< 0: failed) */
static int complete(run *r, part *ps, int write)
{
    pxs_rados.aio_wait_for_complete(r->c);
    int rv = pxs_rados.aio_get_return_value(r->c);
    pxs_rados.aio_release(r->c);
    r->c = NULL;
    if (r->op) {
        if (write)
            pxs_rados.release_write_op(r->op);
        else
            pxs_rados.release_read_op(r->op);
        r->op = NULL;
    }
    if (write)
        return rv < 0 ? rv : 0;
    part *pp = ps + r->p0;
    if (rv == -ENOENT) {            /* no such object: a hole */
        for (size_t i = 0; i < r->np; i++)
            memset(pp[i].buf, 0, pp[i].len);
        return 0;
    }
    if (rv < 0)
        return rv;
    if (r->np == 1) {               /* rv = bytes read: the rest is past the object's end */
        size_t got = (size_t)rv < pp[0].len ? (size_t)rv : pp[0].len;
        memset(pp[0].buf + got, 0, pp[0].len - got);
        return 0;
    }
    for (size_t i = 0; i < r->np; i++) {
        if (pp[i].prval < 0)
            return pp[i].prval;
        size_t got = pp[i].got < pp[i].len ? pp[i].got : pp[i].len;
        memset(pp[i].buf + got, 0, pp[i].len - got);
    }
    return 0;
}

static int transfer(pxs_dplane *dp, const pxs_dseg *sg, size_t n, char *buf, int write, char *err, size_t errlen)
{
    rplane *p = (rplane *)dp;
    int64_t osz = p->osz;
    runs rs = {0};
    int rc = PXS_OK;
    /* cut at object boundaries, pieces contiguous in one object merged (sg is in data-file
     * and offset order) */
    for (size_t i = 0; !rc && i < n; i++) {
        int64_t at = sg[i].local, left = sg[i].len;
        char *b = buf + sg[i].bo;
        while (!rc && left > 0) {
            int64_t k = at / osz, off = at % osz, m = osz - off < left ? osz - off : left;
            rc = add_piece(&rs, sg[i].df, k, off, m, b);
            at += m;
            b += m;
            left -= m;
        }
    }
    /* all in flight (MAX_INFLIGHT at a time), every one waited for, the first failure kept */
    int bad = 0;
    const run *badr = NULL;
    for (size_t a = 0; !rc && a < rs.nr; a += MAX_INFLIGHT) {
        size_t e = a + MAX_INFLIGHT < rs.nr ? a + MAX_INFLIGHT : rs.nr, sent = a;
        for (; sent < e; sent++) {
            int rv = submit(&rs.r[sent], rs.p, write);
            if (rv < 0) {
                bad = rv;
                badr = &rs.r[sent];
                break;
            }
        }
        for (size_t i = a; i < sent; i++) {
            int rv = complete(&rs.r[i], rs.p, write);
            if (rv < 0 && !bad) {
                bad = rv;
                badr = &rs.r[i];
            }
        }
        if (bad) {
            const pxs_datafile *f = badr->df;
            snprintf(err, errlen, "rados %s %s/%s of '%s' (server %s): %s", write ? "write" : "read",
                     pool_of(p, f->server), badr->oid, f->name, p->hdr.cfg->servers[f->server].name, why(bad));
            rc = PXS_EIO;
        }
    }
    free(rs.r);
    free(rs.p);
    return rc;
}

const pxs_dfops pxs_df_rados = {
    .kind = "rados",
    .configure = configure,
    .open_plane = open_plane,
    .close_plane = close_plane,
    .open = df_open,
    .close = df_close,
    .transfer = transfer,
    .size = df_size,
    .truncate = df_truncate,
    .reserve = df_reserve,
    .sync = df_sync,
    .list = df_list,
};

const char *pxs_rados_cluster_of(const pxs_config *cfg)
{
    if (!cfg->plane || strcmp(cfg->plane, "rados") != 0 || !cfg->plane_cfg)
        return NULL;
    return ((const rconfig *)cfg->plane_cfg)->cluster;
}
