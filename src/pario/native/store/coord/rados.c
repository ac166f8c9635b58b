/* pario store: the coordination member "rados" (store/coord.h; docs/multinode.md, "rados"):
 * everything processes of a store share kept in the RADOS cluster of its data (a store on
 * the rados data plane), so that a client on any node of the cluster needs only the store's
 * store.json.  The objects live in namespace "<id>.coord" of the pool of the store's first
 * server (store.json "coord_pool" names another), apart from the data objects (namespace
 * "<id>", store/planes/rados.c):
 *
 *   store lock      cls_lock "store" on object "store.lock", exclusive or shared, leased
 *                   (coord/rados_lease.h).  cls_lock cannot convert a lock in place (measured:
 *                   an exclusive request with the renew flag by the only shared holder is
 *                   refused, -EBUSY), so an exclusive taker first takes the exclusive lock
 *                   "gate" on the same object and keeps it while exclusive; a downgrade drops
 *                   "store", takes it shared, then drops "gate": no exclusive taker passes the
 *                   gate in between, and shared takers do not need it;
 *   journal         the RMT journal as object "rmt.log", its lock a leased cls_lock on
 *                   "rmt.lock", its writes fenced by the object's version
 *                   (coord/journal_rados.h);
 *   range locks     per file, not per byte range: cls_lock "range" on object "range.<fid>",
 *                   shared for writers, exclusive (behind the gate "gate" of the same object) for
 *                   a synchronisation or a replicator chunk; coarser than fcntl's byte ranges:
 *                   disjoint ranges of one file serialise against a synchroniser, never wrongly
 *                   coexist.  Within a process the locks of all threads count as one holder, as
 *                   fcntl's open-file-description locks do: a thread's exclusive request while
 *                   another thread of the process holds the file shared converts the process's
 *                   lock (gate first, then shared -> exclusive), and back when it ends;
 *   metadata        meta.db through Ceph's SQLite VFS (store/meta.c, pxs_meta_open_rados);
 *   counters        the served runtime's shared file pointers: object "shfp.<token>", 8 bytes,
 *                   read and written under the leased exclusive cls_lock "shfp", the write
 *                   asserting the version the read found (a holder that outlived its lease
 *                   cannot overwrite its successor's value); every token made is appended
 *                   to object "shfp.live" first, so that a first opener removes a killed
 *                   run's counters with one read instead of a listing of the namespace;
 *   lease           PARIO_RADOS_LEASE seconds (default 10): a dead process's locks are taken
 *                   over one lease after its last renewal.  meta.db's lock is libcephsqlite's
 *                   own, with a lease of its own (META_LEASE): a process that dies inside a
 *                   metadata transaction holds it that long, and a live process waiting for it
 *                   keeps the locks it holds meanwhile (a writer its range lock); so every wait
 *                   of the member lasts at least both leases and a margin (wait_bound), and a
 *                   store usable again "one lease after a death" means after the longer one.
 * A process stalled for longer than the lease loses its locks: the set is marked lost and every
 * later lock or journal write of it fails (the journal's version fence refuses it too). */
#define _GNU_SOURCE
#include "store/coord.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/coord/journal_rados.h"
#include "store/coord/rados_lease.h"
#include "store/json.h"
#include "store/rados_api.h"

#define LEASE_DEFAULT 10.0
/* libcephsqlite's lock lease: cephsqlite_lock_renewal_timeout, 30000 ms by default; Ceph 16's
 * configuration refuses every value of it ("below minimum 100", CEPH_ARGS or ceph.conf:
 * measured, docs/multinode.md), so it is the default everywhere pario runs today */
#define META_LEASE 30.0
#define WAIT_MARGIN 5.0
#define STORE_OBJECT "store.lock"

typedef struct {
    uint64_t fid;
    int mode;                  /* what the process holds in RADOS: 0 nothing, 1 shared, 2 exclusive */
    int nsh, nex;              /* holders in this process */
} rfile;

typedef struct {
    uint64_t fid;
    int64_t x, e;
    int exclusive;
} rheld;

typedef struct {
    pxs_coord h;               /* first: the interface's header */
    rd_handle cluster;
    rd_handle lock_io, journal_io;
    rd_handle counter_io;      /* the counters' reads: their version is the ioctx's last (cmu) */
    pthread_mutex_t cmu;
    pxs_lease *lease;
    pxs_rjournal journal;
    char *conf;                /* the cluster's ceph.conf */
    char *pool, *ns;
    int store_mode;            /* 0, 1 shared, 2 exclusive (with the gate) */
    /* range locks: the process's state per file, one transition in RADOS at a time */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int busy;
    rfile *files;
    size_t nfiles, capfiles;
    rheld *held;
    size_t nheld, capheld;
} rcoord;

static double lease_seconds(void)
{
    const char *s = getenv("PARIO_RADOS_LEASE");
    if (s && *s) {
        char *end;
        double v = strtod(s, &end);
        if (*end == 0 && v >= 0.5 && v <= 3600)
            return v;
    }
    return LEASE_DEFAULT;
}

/* the shortest wait for a lock of the member (0: try once stays 0): a holder may itself wait
 * for a dead process's metadata lock (META_LEASE) after the dead process's own locks expired
 * (the lease), so a shorter wait would fail while the store recovers by itself (crash stress
 * shared-hybrid --coord rados, seed 13000002: a writer holding its range lock waited 29 s for
 * meta.db, and a synchroniser's 30 s wait for that range gave up) */
static double wait_bound(double timeout, double lease)
{
    double floor = META_LEASE + lease + WAIT_MARGIN;
    return timeout > 0 && timeout < floor ? floor : timeout;
}

static void rados_close(pxs_coord *co)
{
    rcoord *r = (rcoord *)co;
    if (!r)
        return;
    if (r->lease)
        pxs_lease_free(r->lease);    /* every lock released */
    if (r->journal_io)
        pxs_rados.ioctx_destroy(r->journal_io);
    if (r->counter_io)
        pxs_rados.ioctx_destroy(r->counter_io);
    if (r->lock_io)
        pxs_rados.ioctx_destroy(r->lock_io);
    if (r->cluster)
        pxs_rados.shutdown(r->cluster);
    pthread_mutex_destroy(&r->mu);
    pthread_mutex_destroy(&r->cmu);
    pthread_cond_destroy(&r->cv);
    free(r->files);
    free(r->held);
    free(r->conf);
    free(r->pool);
    free(r->ns);
    free(r->h.journal_where);
    free(r->h.lock_where);
    free(r);
}

/* store.json "coord_pool" (optional): the pool of the coordination objects */
static int coord_pool(const char *root, char **out, char *err, size_t errlen)
{
    *out = NULL;
    char *path = pxs_join(root, "store.json");
    if (!path)
        return PXS_ENOMEM;
    size_t len = 0;
    char *text = pxs_read_text(path, &len, 1 << 20);
    free(path);
    if (!text)
        return PXS_OK;       /* pxs_config_read said what was wrong already */
    pxs_json *j = NULL;
    int rc = pxs_json_parse(text, len, &j, err, errlen) ? PXS_EINVAL : PXS_OK;
    const pxs_json *p = j ? pxs_json_get(j, "coord_pool") : NULL;
    if (!rc && p && p->type == PXS_JSTR && p->slen && strlen(p->s) == p->slen && !(*out = strdup(p->s)))
        rc = PXS_ENOMEM;
    else if (!rc && p && p->type != PXS_JNULL && !*out) {
        snprintf(err, errlen, "%s/store.json: \"coord_pool\" must name a pool", root);
        rc = PXS_EINVAL;
    }
    pxs_json_free(j);
    free(text);
    return rc;
}

static int io_for(rcoord *r, rd_handle *io, char *err, size_t errlen)
{
    return pxs_rados_ioctx(r->cluster, r->pool, r->ns, io, err, errlen);
}

static int rados_open(const char *root, double timeout, pxs_coord **out, char *err, size_t errlen)
{
    *out = NULL;
    pxs_config cfg;
    int rc = pxs_config_read(root, &cfg, err, errlen);
    if (rc)
        return rc;
    const char *cluster = pxs_rados_cluster_of(&cfg);
    if (!cluster || cfg.nservers < 1) {
        snprintf(err, errlen, "store %s: coordination 'rados' keeps the store's metadata, RMT journal and locks in the "
                 "RADOS cluster of its data: it needs a store on the rados data plane (its backend is '%s')", root,
                 cfg.plane ? cfg.plane : "?");
        pxs_config_free(&cfg);
        return PXS_EINVAL;
    }
    rcoord *r = calloc(1, sizeof *r);
    if (!r) {
        pxs_config_free(&cfg);
        return PXS_ENOMEM;
    }
    double lease = lease_seconds();
    r->h.ops = &pxs_coord_rados;
    r->h.timeout = wait_bound(timeout, lease);    /* the store's waits too (redirect.c) */
    pthread_mutex_init(&r->mu, NULL);
    pthread_mutex_init(&r->cmu, NULL);
    pthread_cond_init(&r->cv, NULL);
    char *pool = NULL;
    rc = coord_pool(root, &pool, err, errlen);
    r->pool = pool ? pool : strdup(cfg.servers[0].place);
    size_t nl = strlen(cfg.id) + 8;
    r->ns = malloc(nl);
    if (r->ns)
        snprintf(r->ns, nl, "%s.coord", cfg.id);
    r->conf = pxs_join(cluster, "ceph.conf");
    pxs_config_free(&cfg);
    if (!rc && (!r->pool || !r->ns || !r->conf))
        rc = PXS_ENOMEM;
    if (!rc) {
        size_t n = strlen(r->pool) + strlen(r->ns) + 32;
        r->h.journal_where = malloc(n);
        r->h.lock_where = malloc(n);
        if (!r->h.journal_where || !r->h.lock_where)
            rc = PXS_ENOMEM;
        else {
            snprintf(r->h.journal_where, n, "rados:%s/%s/rmt.log", r->pool, r->ns);
            snprintf(r->h.lock_where, n, "rados:%s/%s/" STORE_OBJECT, r->pool, r->ns);
        }
    }
    if (!rc) {
        char *dir = strdup(r->conf);
        if (!dir)
            rc = PXS_ENOMEM;
        else {
            *strrchr(dir, '/') = 0;
            rc = pxs_rados_connect(dir, &r->cluster, err, errlen);
            free(dir);
        }
    }
    if (!rc)
        rc = io_for(r, &r->lock_io, err, errlen);
    if (!rc)
        rc = io_for(r, &r->journal_io, err, errlen);
    if (!rc && !(r->lease = pxs_lease_new(r->lock_io, lease))) {
        snprintf(err, errlen, "cannot start the lease renewal thread");
        rc = PXS_ENOMEM;
    }
    if (rc) {
        if (rc == PXS_ENOMEM && !err[0])
            snprintf(err, errlen, "out of memory");
        rados_close(&r->h);
        return rc;
    }
    pxs_rjournal_init(&r->journal, r->journal_io, r->lease);
    *out = &r->h;
    return PXS_OK;
}

/* ------------------------------------------------------------------ the store lock */
static int rados_downgrade(pxs_coord *co);

/* as fcntl's locks: a holder asking for the other mode converts its own lock (exclusive ->
 * shared always; shared -> exclusive when nobody else holds it: the last one out of a shared
 * store, pxs_store_alone) */
static int rados_try_lock(pxs_coord *co, int exclusive)
{
    rcoord *r = (rcoord *)co;
    if (r->store_mode == (exclusive ? 2 : 1))
        return PXS_OK;
    if (r->store_mode == 2)
        return rados_downgrade(co);
    if (!exclusive) {
        int rc = pxs_lease_try(r->lease, STORE_OBJECT, "store", 0);
        if (!rc)
            r->store_mode = 1;
        return rc;
    }
    int rc = pxs_lease_try(r->lease, STORE_OBJECT, "gate", 1);
    if (rc)
        return rc;
    if (r->store_mode == 1)     /* an upgrade: behind the gate only shared takers can come in meanwhile */
        pxs_lease_drop(r->lease, STORE_OBJECT, "store");
    rc = pxs_lease_try(r->lease, STORE_OBJECT, "store", 1);
    if (rc) {
        if (r->store_mode == 1 && pxs_lease_try(r->lease, STORE_OBJECT, "store", 0) != PXS_OK)
            r->store_mode = 0;  /* lost (only a lease gone stale): the caller's next try says so */
        pxs_lease_drop(r->lease, STORE_OBJECT, "gate");
        return rc;
    }
    r->store_mode = 2;
    return PXS_OK;
}

static int rados_downgrade(pxs_coord *co)
{
    rcoord *r = (rcoord *)co;
    if (r->store_mode != 2)
        return r->store_mode == 1 ? PXS_OK : PXS_EINVAL;
    pxs_lease_drop(r->lease, STORE_OBJECT, "store");
    /* nobody exclusive can have come in: the gate is still this process's */
    int rc = pxs_lease_try(r->lease, STORE_OBJECT, "store", 0);
    pxs_lease_drop(r->lease, STORE_OBJECT, "gate");
    r->store_mode = rc ? 0 : 1;
    return rc ? PXS_EIO : PXS_OK;
}

static void rados_unlock(pxs_coord *co)
{
    rcoord *r = (rcoord *)co;
    pxs_lease_drop(r->lease, STORE_OBJECT, "store");
    if (r->store_mode == 2)
        pxs_lease_drop(r->lease, STORE_OBJECT, "gate");
    r->store_mode = 0;
}

/* what a process killed now leaves (pystore's abandon): every lock of the opener released at
 * once (a dead process's go with their lease), the renewal stopped; the opener unusable */
static void rados_release(pxs_coord *co)
{
    rcoord *r = (rcoord *)co;
    pxs_lease_free(r->lease);
    r->lease = NULL;
    r->journal.lease = NULL;
    r->store_mode = 0;
}

/* ------------------------------------------------------------------ metadata */
/* the catalog (pario.store.catalog) as object "catalog.log": one append operation a line
 * (atomic: two clients' lines never interleave), acknowledged when durable */
static int catalog_line(void *ctx, const char *line, size_t n, char *err, size_t errlen)
{
    rcoord *r = ctx;
    rd_handle op = pxs_rados.create_write_op();
    if (!op)
        return PXS_ENOMEM;
    pxs_rados.write_op_append(op, line, n);
    int rv = pxs_rados.write_op_operate(op, r->lock_io, "catalog.log", NULL, 0);
    pxs_rados.release_write_op(op);
    if (rv < 0) {
        snprintf(err, errlen, "store catalog rados:%s/%s/catalog.log: %s", r->pool, r->ns, strerror(-rv));
        return PXS_EIO;
    }
    return PXS_OK;
}

static int rados_meta_open(pxs_coord *co, pxs_meta *m, char *err, size_t errlen)
{
    rcoord *r = (rcoord *)co;
    /* the VFS's first object (libcephsqlite's striper: "<db>.<16 hex digits>"): its absence is a
     * missing database (the VFS's own open says only "unknown error") */
    uint64_t size;
    int rv = pxs_rados.stat(r->lock_io, "meta.db.0000000000000000", &size, NULL);
    if (rv == -ENOENT) {
        memset(m, 0, sizeof *m);
        snprintf(err, errlen, "metadata database rados:%s/%s/meta.db is missing: rebuild it with 'pario store fsck "
                 "--store DIR --repair'", r->pool, r->ns);
        return PXS_ENOENT;
    }
    int rc = pxs_meta_open_rados(m, r->conf, r->pool, r->ns, 0, co->timeout, err, errlen);
    if (!rc) {
        m->catalog_append = catalog_line;
        m->catalog_ctx = r;
    }
    return rc;
}

static int rados_read_shared(pxs_coord *co, const char *name, char **buf, size_t *n, char *err, size_t errlen)
{
    rcoord *r = (rcoord *)co;
    *buf = NULL;
    *n = 0;
    uint64_t size = 0;
    int rv = pxs_rados.stat(r->lock_io, name, &size, NULL);
    if (rv == -ENOENT)
        return PXS_ENOENT;
    char *b = rv < 0 ? NULL : malloc(size ? size : 1);
    size_t got = 0;
    while (rv >= 0 && b && got < size) {
        rv = pxs_rados.read(r->lock_io, name, b + got, size - got > ((size_t)1 << 30) ? (size_t)1 << 30 : size - got,
                            got);
        if (rv == 0)
            break;
        if (rv > 0)
            got += (size_t)rv;
    }
    if (rv < 0 || !b) {
        free(b);
        if (rv >= 0)
            return PXS_ENOMEM;
        snprintf(err, errlen, "rados:%s/%s/%s: %s", r->pool, r->ns, name, strerror(-rv));
        return PXS_EIO;
    }
    *buf = b;
    *n = got;
    return PXS_OK;
}

static int rados_meta_transfer(pxs_coord *co, const char *local, int to_shared, char *err, size_t errlen)
{
    rcoord *r = (rcoord *)co;
    return pxs_meta_rados_transfer(r->conf, r->pool, r->ns, local, to_shared, err, errlen);
}

static int rados_meta_init(pxs_coord *co, char *err, size_t errlen)
{
    rcoord *r = (rcoord *)co;
    pxs_meta m;
    int rc = pxs_meta_open_rados(&m, r->conf, r->pool, r->ns, 1, co->timeout, err, errlen);
    if (!rc)
        pxs_meta_close(&m);
    return rc;
}

/* ------------------------------------------------------------------ the journal */
static int rados_journal_probe(pxs_coord *co)
{
    rcoord *r = (rcoord *)co;
    uint64_t size;
    int rv = pxs_rados.stat(r->journal_io, "rmt.log", &size, NULL);
    return rv == 0 ? PXS_OK : rv == -ENOENT ? PXS_ENOENT : PXS_EIO;
}

static int rados_journal_open(pxs_coord *co, rmt_core *c, int shared, int first)
{
    rcoord *r = (rcoord *)co;
    return rmt_open(c, &r->journal.ops, co->journal_where, NULL, shared, first, co->timeout);
}

/* ------------------------------------------------------------------ range locks (per file) */
static rfile *file_of(rcoord *r, uint64_t fid)
{
    for (size_t i = 0; i < r->nfiles; i++)
        if (r->files[i].fid == fid)
            return &r->files[i];
    if (r->nfiles == r->capfiles) {
        size_t nc = r->capfiles ? 2 * r->capfiles : 8;
        rfile *nf = realloc(r->files, nc * sizeof *nf);
        if (!nf)
            return NULL;
        r->files = nf;
        r->capfiles = nc;
    }
    r->files[r->nfiles] = (rfile){fid, 0, 0, 0};
    return &r->files[r->nfiles++];
}

static void oid_of(char *out, size_t n, uint64_t fid)
{
    snprintf(out, n, "range.%llu", (unsigned long long)fid);
}

/* the process's lock of fid in RADOS brought to mode want (0, 1, 2) from f->mode; called with
 * r->busy set and r->mu released.  Exclusive always behind the gate. */
static int transition(rcoord *r, uint64_t fid, int from, int want, double timeout)
{
    char oid[48];
    oid_of(oid, sizeof oid, fid);
    int rc = PXS_OK;
    if (want == 2) {
        if ((rc = pxs_lease_wait(r->lease, oid, "gate", 1, timeout)))
            return rc;
        if (from == 1)
            pxs_lease_drop(r->lease, oid, "range");    /* only shared takers can come in now */
        rc = pxs_lease_wait(r->lease, oid, "range", 1, timeout);
        if (rc) {
            int back = from == 1 ? pxs_lease_wait(r->lease, oid, "range", 0, timeout) : PXS_OK;
            pxs_lease_drop(r->lease, oid, "gate");
            return back ? PXS_EIO : rc;
        }
        return PXS_OK;
    }
    if (from == 2) {
        pxs_lease_drop(r->lease, oid, "range");
        if (want == 1)      /* back to shared while the gate keeps exclusive takers out */
            rc = pxs_lease_wait(r->lease, oid, "range", 0, timeout);
        pxs_lease_drop(r->lease, oid, "gate");
        return rc;
    }
    if (want == 1)
        return pxs_lease_wait(r->lease, oid, "range", 0, timeout);
    pxs_lease_drop(r->lease, oid, "range");
    return PXS_OK;
}

static int needed(const rfile *f)
{
    return f->nex ? 2 : f->nsh ? 1 : 0;
}

/* bring the process's lock of f to what its holders need (r->mu held; waits out another
 * thread's transition) */
static int settle(rcoord *r, uint64_t fid, double timeout)
{
    for (;;) {
        while (r->busy)
            pthread_cond_wait(&r->cv, &r->mu);
        rfile *f = file_of(r, fid);
        if (!f)
            return PXS_ENOMEM;
        int want = needed(f), from = f->mode;
        if (want == from || (want == 1 && from == 2 && f->nex))
            return PXS_OK;
        r->busy = 1;
        pthread_mutex_unlock(&r->mu);
        int rc = transition(r, fid, from, want, timeout);
        pthread_mutex_lock(&r->mu);
        r->busy = 0;
        pthread_cond_broadcast(&r->cv);
        f = file_of(r, fid);
        if (!f)
            return PXS_ENOMEM;
        if (rc) {
            /* nothing changed in RADOS when the step failed (transition undoes its gate) */
            return rc;
        }
        f->mode = want;
    }
}

static int rmt_code(int rc)
{
    return rc == PXS_OK ? RMT_OK : rc == PXS_EBUSY ? RMT_ETIMEDOUT : rc == PXS_ENOMEM ? RMT_ENOMEM : RMT_EIO;
}

static int rados_range_lock(pxs_coord *co, rmt_core *c, uint64_t fid, int64_t x, int64_t e, int exclusive,
                            double timeout)
{
    rcoord *r = (rcoord *)co;
    (void)c;
    if (x < 0 || e <= x)
        return RMT_EINVAL;
    pthread_mutex_lock(&r->mu);
    if (r->nheld == r->capheld) {
        size_t nc = r->capheld ? 2 * r->capheld : 16;
        rheld *nh = realloc(r->held, nc * sizeof *nh);
        if (!nh) {
            pthread_mutex_unlock(&r->mu);
            return RMT_ENOMEM;
        }
        r->held = nh;
        r->capheld = nc;
    }
    rfile *f = file_of(r, fid);
    if (!f) {
        pthread_mutex_unlock(&r->mu);
        return RMT_ENOMEM;
    }
    if (exclusive)
        f->nex++;
    else
        f->nsh++;
    int rc = settle(r, fid, timeout);
    f = file_of(r, fid);
    if (rc) {
        if (f) {
            if (exclusive)
                f->nex--;
            else
                f->nsh--;
            (void)settle(r, fid, timeout);
        }
    } else {
        r->held[r->nheld++] = (rheld){fid, x, e, exclusive};
    }
    pthread_mutex_unlock(&r->mu);
    return rmt_code(rc);
}

static int rados_range_unlock(pxs_coord *co, rmt_core *c, uint64_t fid, int64_t x, int64_t e)
{
    rcoord *r = (rcoord *)co;
    (void)c;
    pthread_mutex_lock(&r->mu);
    size_t i = r->nheld;
    while (i > 0 && !(r->held[i - 1].fid == fid && r->held[i - 1].x == x && r->held[i - 1].e == e))
        i--;
    if (i == 0) {
        pthread_mutex_unlock(&r->mu);
        return RMT_EINVAL;
    }
    int exclusive = r->held[i - 1].exclusive;
    r->held[i - 1] = r->held[--r->nheld];
    rfile *f = file_of(r, fid);
    int rc = PXS_OK;
    if (f) {
        if (exclusive)
            f->nex--;
        else
            f->nsh--;
        rc = settle(r, fid, r->h.timeout);
    }
    pthread_mutex_unlock(&r->mu);
    return rmt_code(rc);
}

/* ------------------------------------------------------------------ shared counters */
#define COUNTER_PREFIX "shfp."
#define COUNTER_LOCK "shfp"
#define COUNTER_LIVE "shfp.live"      /* the tokens made since the last first opener, 8 bytes each */

static void counter_oid(char *out, size_t n, uint64_t token)
{
    snprintf(out, n, COUNTER_PREFIX "%016llx", (unsigned long long)token);
}

static int rados_counter_make(pxs_coord *co, uint64_t token)
{
    rcoord *r = (rcoord *)co;
    char oid[64];
    counter_oid(oid, sizeof oid, token);
    int64_t zero = 0;
    /* the token on the list first: a death before the counter exists leaves a name to skip */
    rd_handle op = pxs_rados.create_write_op();
    if (!op)
        return PXS_ENOMEM;
    pxs_rados.write_op_append(op, (const char *)&token, sizeof token);
    int rv = pxs_rados.write_op_operate(op, r->lock_io, COUNTER_LIVE, NULL, 0);
    pxs_rados.release_write_op(op);
    if (rv < 0)
        return PXS_EIO;
    op = pxs_rados.create_write_op();
    if (!op)
        return PXS_ENOMEM;
    pxs_rados.write_op_create(op, PXS_RADOS_CREATE_EXCLUSIVE, NULL);
    pxs_rados.write_op_write_full(op, (const char *)&zero, sizeof zero);
    rv = pxs_rados.write_op_operate(op, r->lock_io, oid, NULL, 0);
    pxs_rados.release_write_op(op);
    return rv == -EEXIST ? PXS_EEXIST : rv < 0 ? PXS_EIO : PXS_OK;
}

static int rados_counter_lock(pxs_coord *co, uint64_t token, int64_t *value, uint64_t *version)
{
    rcoord *r = (rcoord *)co;
    char oid[64], err[PXS_ERRLEN];
    counter_oid(oid, sizeof oid, token);
    int rc = pxs_lease_wait(r->lease, oid, COUNTER_LOCK, 1, r->h.timeout);
    if (rc)
        return rc == PXS_EBUSY ? PXS_EBUSY : PXS_EIO;
    int64_t v = 0;
    uint64_t ver = 0;
    pthread_mutex_lock(&r->cmu);
    int rv = !r->counter_io && io_for(r, &r->counter_io, err, sizeof err) ? -EIO
             : pxs_rados.read(r->counter_io, oid, (char *)&v, sizeof v, 0);
    if (rv == (int)sizeof v)
        ver = pxs_rados.get_last_version(r->counter_io);
    pthread_mutex_unlock(&r->cmu);
    if (rv != (int)sizeof v) {
        pxs_lease_drop(r->lease, oid, COUNTER_LOCK);
        return PXS_EIO;
    }
    *value = v;
    *version = ver;
    return PXS_OK;
}

static int rados_counter_unlock(pxs_coord *co, uint64_t token, const int64_t *value, uint64_t version)
{
    rcoord *r = (rcoord *)co;
    char oid[64];
    counter_oid(oid, sizeof oid, token);
    int rc = PXS_OK;
    if (value) {
        rd_handle op = pxs_rados.create_write_op();
        if (!op)
            rc = PXS_ENOMEM;
        else {
            pxs_rados.write_op_assert_version(op, version);
            pxs_rados.write_op_write_full(op, (const char *)value, sizeof *value);
            rc = pxs_rados.write_op_operate(op, r->lock_io, oid, NULL, 0) < 0 ? PXS_EIO : PXS_OK;
            pxs_rados.release_write_op(op);
        }
    }
    pxs_lease_drop(r->lease, oid, COUNTER_LOCK);
    return rc;
}

static void rados_counter_drop(pxs_coord *co, uint64_t token)
{
    rcoord *r = (rcoord *)co;
    char oid[64];
    counter_oid(oid, sizeof oid, token);
    (void)pxs_rados.remove(r->lock_io, oid);
}

/* every counter made since the last first opener (COUNTER_LIVE; a first opener: no open of a
 * served run is left), and the list */
static void rados_counter_clear(pxs_coord *co)
{
    rcoord *r = (rcoord *)co;
    uint64_t size = 0;
    if (pxs_rados.stat(r->lock_io, COUNTER_LIVE, &size, NULL) < 0 || size == 0 || size > ((uint64_t)1 << 30))
        return;
    uint64_t *tokens = malloc(size);
    if (!tokens)
        return;
    int rv = pxs_rados.read(r->lock_io, COUNTER_LIVE, (char *)tokens, size, 0);
    for (size_t i = 0; rv > 0 && i < (size_t)rv / sizeof *tokens; i++)
        rados_counter_drop(co, tokens[i]);        /* one a closed open removed already: ENOENT */
    free(tokens);
    if (rv == (int)size)
        (void)pxs_rados.remove(r->lock_io, COUNTER_LIVE);
}

const pxs_coord_ops pxs_coord_rados = {
    .name = "rados",
    .uncached_data = 0,          /* RADOS objects: no client cache */
    .meta_wal = 0,
    .open = rados_open,
    .close = rados_close,
    .try_lock = rados_try_lock,
    .downgrade = rados_downgrade,
    .release = rados_release,
    .unlock = rados_unlock,
    .meta_open = rados_meta_open,
    .meta_init = rados_meta_init,
    .read_shared = rados_read_shared,
    .meta_transfer = rados_meta_transfer,
    .journal_probe = rados_journal_probe,
    .journal_open = rados_journal_open,
    PXS_COORD_CORE_JOURNAL,
    .range_lock = rados_range_lock,
    .range_unlock = rados_range_unlock,
    .counter_make = rados_counter_make,
    .counter_lock = rados_counter_lock,
    .counter_unlock = rados_counter_unlock,
    .counter_drop = rados_counter_drop,
    .counter_clear = rados_counter_clear,
};
