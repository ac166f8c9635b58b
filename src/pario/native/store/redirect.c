/* pario serve: store open/close, CEDA redirection and hybrid routing with the RMT core
 * (redirect.h), as pario.store.root.Store and pario.store.redirect.File. */
#define _GNU_SOURCE
#include "store/redirect.h"

#include "store/lazysync.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NSEG 64
#define JOURNAL_COMPACT_MIN ((uint64_t)4 << 20)

#define LOCK(st) pthread_mutex_lock(&(st)->mu)
#define UNLOCK(st) pthread_mutex_unlock(&(st)->mu)

/* the store of this layer: the data path's store (storefile.h: configuration, metadata,
 * data plane, RMT, coordination) first, then what only the redirection owns.  Every
 * pxs_store this file hands out is the `base` of one (pxs_store_open allocates it). */
typedef struct {
    pxs_store base;             /* first: (rstore *)st is the store's own object */
    pxs_file *files;            /* open redirected files */
    pxs_lazy *lazy;             /* background synchronisation of hybrid replicas (lazysync.h) */
    int lazy_off;               /* no background synchronisation (the opener's choice; tests) */
    int recovering;             /* the first opener's recovery is running */
    int hold;                   /* PXS_HOLD: the opener drives recovery, sharing, the last close */
    int flush_at_end;           /* PXS_FLUSH_AT_END: DIRTY bytes flushed at the store's close */
    pxs_cost_fn cost_fn;        /* the routing cost (pxs_store_set_cost), NULL: the profile's */
    void *cost_ctx;
    uint64_t followed;          /* st->rmt.followed when the data files' cache was last dropped */
    int64_t synced;             /* bytes copied by flush / sync steps of every file (pxs_close_stats) */
} rstore;

static inline rstore *RS(pxs_store *st)
{
    return (rstore *)st;
}

/* the one-line message of an RMT core error (as pyrmt.c) */
static int rmt_fail(pxs_store *st, int rc, const char *what)
{
    const char *path = st->rmt.path ? st->rmt.path : "rmt.log";
    switch (rc) {
    case RMT_ENOMEM:
        return pxs_fail(st, PXS_ENOMEM, "out of memory (%s)", what);
    case RMT_EIO:
        return pxs_fail(st, PXS_ERMT, "%s: %s (%s)", path, strerror(errno), what);
    case RMT_ECORRUPT:
        return pxs_fail(st, PXS_ERMT, "replica mapping table (RMT) %s is damaged or not an RMT journal (%s)", path,
                        what);
    case RMT_ETIMEDOUT:
        return pxs_fail(st, PXS_EBUSY, "timed out after %g s waiting for a lock of %s (%s: another process holds it; "
                        "stopped or hung?)", st->timeout, path, what);
    case RMT_EFULL:
        return pxs_fail(st, PXS_ERMT, "replica mapping table (RMT) %s is full; close every process using the store "
                        "so that it is compacted", path);
    default:
        return pxs_fail(st, PXS_ERMT, "replica mapping table (RMT) %s refused %s (inconsistent with its state)", path,
                        what);
    }
}

/* one change in a transaction of its own (or the caller's) */
static int rmt_change(pxs_store *st, int type, int a16, const uint64_t *u, const char *what)
{
    int rc = pxs_coord_journal_lock(st->co, &st->rmt, st->timeout);
    if (rc)
        return rmt_fail(st, rc, what);
    rc = rmt_op(&st->rmt, type, a16, u, NULL, 0);
    int rc2 = pxs_coord_journal_publish(st->co, &st->rmt);
    if (rc || rc2)
        return rmt_fail(st, rc ? rc : rc2, what);
    return PXS_OK;
}

static int catch_up(pxs_store *st)
{
    /* follow = 0: the tests' negative control of a process that does not follow others */
    int rc = st->shared && st->rmt.follow ? pxs_coord_journal_follow(st->co, &st->rmt) : RMT_OK;
    if (rc)
        return rmt_fail(st, rc, "reading the journal");
    if (st->rmt.followed != RS(st)->followed) {    /* another process changed the RMT (this call or */
        RS(st)->followed = st->rmt.followed;       /* a transaction's): a copy may have been refreshed */
        pxs_store_forget(st);                      /* behind this node's cache (plane.h) */
    }
    return PXS_OK;
}

const char *pxs_store_error(const pxs_store *st)
{
    return st->err;
}

/* ------------------------------------------------------------------ cost */
/* pario.store.hybrid.profile_cost(system, op=0): max over servers touched of
 * alpha_j + bytes_j * beta_j (SPEC §1, α and β of the store's profile) */
void pxs_store_set_cost(pxs_store *st, pxs_cost_fn fn, void *ctx)
{
    LOCK(st);
    RS(st)->cost_fn = fn;
    RS(st)->cost_ctx = ctx;
    UNLOCK(st);
}

void pxs_store_set_lazy(pxs_store *st, int on)
{
    LOCK(st);
    RS(st)->lazy_off = !on;
    UNLOCK(st);
}

int pxs_cost(pxs_store *st, const pxs_sfile *h, int64_t off, int64_t len, double *cost)
{
    if (RS(st)->cost_fn)
        return RS(st)->cost_fn(RS(st)->cost_ctx, h->id, off, len, cost);
    const pxs_layout *l = h->lay;
    pxs_subs s = {0};
    char lerr[300];
    int rc = pxs_layout_map(l, 0, off, len, &s, lerr, sizeof lerr);
    if (rc) {
        free(s.s);
        return rc == PXS_EINVAL ? pxs_fail(st, rc, "%s", lerr) : rc;
    }
    int n = st->cfg.nservers;
    int64_t *per = calloc((size_t)n, sizeof *per);
    char *touched = calloc((size_t)n, 1);
    if (!per || !touched) {
        free(per);
        free(touched);
        free(s.s);
        return PXS_ENOMEM;
    }
    for (size_t i = 0; i < s.n; i++) {
        per[s.s[i].server] += s.s[i].len;
        touched[s.s[i].server] = 1;
    }
    double best = 0.0;
    for (int j = 0; j < n; j++)
        if (touched[j]) {
            double v = st->cfg.servers[j].alpha + (double)per[j] * st->cfg.servers[j].beta;
            if (v > best)
                best = v;
        }
    *cost = best;
    free(per);
    free(touched);
    free(s.s);
    return PXS_OK;
}

/* ------------------------------------------------------------------ replicas of a file */
static int rep_handle(pxs_file *f, uint64_t r, pxs_sfile **out)
{
    for (int i = 0; i < f->nrep; i++)
        if (f->reps[i].r == r) {
            *out = f->reps[i].h;
            return PXS_OK;
        }
    pxs_store *st = f->st;
    pxs_meta_rec rec;
    int rc = pxs_meta_get_id(&st->meta, (int64_t)r, &rec, st->err, sizeof st->err);
    if (rc < 0)
        return rc;
    if (rc == 0)
        return pxs_fail(st, PXS_ENOENT, "%s: the RMT names replica file id %llu, which the store does not have (run "
                        "pario store fsck)", f->name, (unsigned long long)r);
    pxs_sfile *h;
    rc = pxs_sfile_open(st, rec.name, &h);
    pxs_meta_rec_free(&rec);
    if (rc)
        return rc;
    if (f->nrep == f->caprep) {
        int nc = f->caprep ? f->caprep * 2 : 4;
        pxs_rep *n = realloc(f->reps, (size_t)nc * sizeof *n);
        if (!n) {
            pxs_sfile_close(h);
            return PXS_ENOMEM;
        }
        f->reps = n;
        f->caprep = nc;
    }
    f->reps[f->nrep++] = (pxs_rep){r, h, 0};
    *out = h;
    return PXS_OK;
}

/* routing and full replicas of this file, and its replicas opened now (File.reload_replicas);
 * first, as File.revalidate: the name still names this file id (a relayout by another process,
 * pario.store.relayout, moves the bytes to a new id and bumps the registration version: a
 * write through the old copy would be lost, so it fails with one line) */
static int reload_replicas(pxs_file *f)
{
    pxs_store *st = f->st;
    pxs_meta_rec rec;
    int got = pxs_meta_get(&st->meta, f->name, &rec, st->err, sizeof st->err);
    if (got < 0)
        return got;
    int moved = got == 0 || rec.id != (int64_t)f->fid;
    if (got > 0)
        pxs_meta_rec_free(&rec);
    if (moved)
        return pxs_fail(st, PXS_EBUSY, "file '%s' was relaid out by another process while open here (its bytes "
                        "moved to a new layout); close and reopen it to write", f->name);
    f->regver = st->rmt.ix.regver;
    f->cheapest = 0;
    f->nfull = 0;
    f->nslot = 0;
    for (int i = 0; i < f->nrep; i++)
        f->reps[i].slot = 0;
    const rmt_ofile *o = rmt_index_file(&st->rmt.ix, f->fid);
    if (!o)
        return PXS_OK;
    uint64_t *full = realloc(f->full, (size_t)(o->nrep + 1) * sizeof *full);
    if (!full)
        return PXS_ENOMEM;
    f->full = full;
    for (int k = 0; k < o->nrep; k++) {
        const rmt_rep *p = o->reps[k];
        if (!p->registered)
            continue;
        if (p->route == RMT_ROUTE_CHEAPEST)
            f->cheapest = 1;
        if (p->mode == RMT_FULL)
            f->full[f->nfull++] = p->r;
        pxs_meta_rec rec;
        int got = pxs_meta_get_id(&st->meta, (int64_t)p->r, &rec, st->err, sizeof st->err);
        if (got < 0)
            return got;
        if (got == 0)
            continue;     /* the replica's file is gone: opened (and refused) only if a request names it */
        pxs_meta_rec_free(&rec);
        pxs_sfile *h;
        int rc = rep_handle(f, p->r, &h);
        if (rc)
            return rc;
        if (p->mode == RMT_PARTIAL && h->lay->kind == PXS_EXTENTS && h->lay->ne > 0)
            for (int i = 0; i < f->nrep; i++)
                if (f->reps[i].r == p->r && !f->reps[i].slot) {
                    f->reps[i].slot = 1;
                    f->nslot++;
                }
    }
    return PXS_OK;
}

/* ------------------------------------------------------------------ open / close */
/* close a file's data handles (replicas, then the original) and free it: the first error */
static int file_free(pxs_file *f)
{
    int rc = PXS_OK;
    for (int i = 0; i < f->nrep; i++) {
        int r2 = pxs_sfile_close(f->reps[i].h);
        rc = rc ? rc : r2;
    }
    if (f->h) {
        int r3 = pxs_sfile_close(f->h);
        rc = rc ? rc : r3;
    }
    free(f->reps);
    free(f->full);
    free(f->name);
    free(f);
    return rc;
}

int pxs_open_all(pxs_file *f)
{
    return pxs_sfile_open_all(f->h);
}

int pxs_open(pxs_store *st, const char *name, pxs_file **out)
{
    *out = NULL;
    LOCK(st);
    for (pxs_file *f = RS(st)->files; f; f = f->next)
        if (strcmp(f->name, name) == 0) {
            f->refs++;
            pxs_store_forget(st);       /* an open is a sync point (MPI-IO: close-to-open) */
            *out = f;
            UNLOCK(st);
            return PXS_OK;
        }
    pxs_file *f = calloc(1, sizeof *f);
    int rc = f ? PXS_OK : PXS_ENOMEM;
    if (!rc) {
        f->st = st;
        f->refs = 1;
        f->name = strdup(name);
        rc = f->name ? pxs_sfile_open(st, name, &f->h) : PXS_ENOMEM;
    }
    if (!rc) {
        f->fid = (uint64_t)f->h->id;
        rc = catch_up(st);
    }
    if (!rc)
        rc = reload_replicas(f);
    if (rc) {
        if (f)
            file_free(f);
        UNLOCK(st);
        return rc;
    }
    f->next = RS(st)->files;
    RS(st)->files = f;
    pxs_store_forget(st);           /* handles this open shares with others: a sync point too */
    *out = f;
    UNLOCK(st);
    return PXS_OK;
}

static int flush_locked(pxs_file *f);

int pxs_close(pxs_file *f)
{
    pxs_store *st = f->st;
    LOCK(st);
    if (--f->refs > 0) {
        UNLOCK(st);
        return PXS_OK;
    }
    if (RS(st)->lazy)
        pxs_lazy_forget(RS(st)->lazy, f);
    int rc = RS(st)->flush_at_end ? PXS_OK : flush_locked(f);
    for (pxs_file **p = &RS(st)->files; *p; p = &(*p)->next)
        if (*p == f) {
            *p = f->next;
            break;
        }
    int r2 = file_free(f);
    UNLOCK(st);
    return rc ? rc : r2;
}

/* ------------------------------------------------------------------ routing */
/* route "cheapest": the up-to-date copy of least cost for [s, t) (File._choose) */
static int choose(pxs_file *f, int64_t s, int64_t t, uint64_t *r_out, int64_t *d_out)
{
    pxs_store *st = f->st;
    uint64_t best = 0;
    int64_t best_d = 0;
    double best_c, c;
    int rc = pxs_cost(st, f->h, s, t - s, &best_c);
    if (rc)
        return rc;
    rmt_cover cov[64];
    int n = rmt_index_covers(&st->rmt.ix, f->fid, s, cov, 64);
    if (n > 64)
        n = 64;
    for (int i = 0; i < n; i++) {
        if (!RMT_READABLE_CLEAN(cov[i].flag))
            continue;
        pxs_sfile *h;
        if ((rc = rep_handle(f, cov[i].r, &h)) || (rc = pxs_cost(st, h, s + cov[i].delta, t - s, &c)))
            return rc;
        if (c < best_c) {
            best = cov[i].r;
            best_d = cov[i].delta;
            best_c = c;
        }
    }
    *r_out = best;
    *d_out = best_d;
    f->stats.choices++;
    return PXS_OK;
}

/* rmt_route / rmt_write with a buffer that grows on RMT_EMORE (as pyrmt.c) */
static int route(pxs_file *f, int write, int64_t x, int64_t e, rmt_seg *small, rmt_seg **segs, int *nseg)
{
    pxs_store *st = f->st;
    rmt_seg *sg = small;
    int max = NSEG, rc;
    for (;;) {
        rc = write ? rmt_write(&st->rmt, f->fid, x, e, sg, max, nseg, st->timeout)
                   : rmt_route(&st->rmt, f->fid, x, e, sg, max, nseg);
        if (rc != RMT_EMORE)
            break;
        if (sg != small)
            free(sg);
        max *= 8;
        sg = malloc((size_t)max * sizeof *sg);
        if (!sg)
            return PXS_ENOMEM;
    }
    if (rc) {
        if (sg != small)
            free(sg);
        return rmt_fail(st, rc, write ? "a write's flag change" : "a lookup");
    }
    *segs = sg;
    return PXS_OK;
}

int pxs_served_by(pxs_file *f, int64_t x, int64_t e, pxs_served **out, int *n)
{
    pxs_store *st = f->st;
    LOCK(st);
    rmt_seg small[NSEG], *sg = NULL;
    int nseg = 0;
    int rc = catch_up(st);
    if (!rc && f->regver != st->rmt.ix.regver)
        rc = reload_replicas(f);
    if (!rc)
        rc = route(f, 0, x, e, small, &sg, &nseg);
    *out = NULL;
    *n = 0;
    if (!rc) {
        int m = nseg ? nseg : 1;
        *out = malloc((size_t)m * sizeof **out);
        if (!*out)
            rc = PXS_ENOMEM;
        if (!rc && nseg == 0)       /* no entry: the original serves all of it */
            (*out)[(*n)++] = (pxs_served){x, e, 0};
        for (int i = 0; !rc && i < nseg; i++) {
            uint64_t r = sg[i].r;
            int64_t d = sg[i].delta;
            if (sg[i].choice)
                rc = choose(f, sg[i].s, sg[i].t, &r, &d);
            (*out)[(*n)++] = (pxs_served){sg[i].s, sg[i].t, r};
        }
    }
    if (sg && sg != small)
        free(sg);
    UNLOCK(st);
    return rc;
}

/* the bytes of [x, x+n) cut into segments (File._dispatch) */
static int dispatch(pxs_file *f, const rmt_seg *sg, int nseg, int64_t x, char *buf, int write)
{
    pxs_store *st = f->st;
    int rc = PXS_OK, redirected = 0;
    for (int i = 0; i < nseg && !rc; i++) {
        uint64_t r = sg[i].r;
        int64_t d = sg[i].delta, s = sg[i].s, t = sg[i].t;
        if (sg[i].choice) {
            rc = choose(f, s, t, &r, &d);
            if (!rc && write) {     /* the flags first, then the bytes */
                uint64_t u[4] = {f->fid, r, (uint64_t)s, (uint64_t)t};
                rc = rmt_change(st, REC_MARK, 0, u, "marking a write");
            }
            if (rc)
                break;
        }
        pxs_sfile *h = f->h;
        if (r != 0 && (rc = rep_handle(f, r, &h)))
            break;
        int64_t pos = s + d, len = t - s, bo = s - x;
        rc = write ? pxs_sfile_writev(h, 1, &pos, &len, buf, &bo) : pxs_sfile_readv(h, 1, &pos, &len, buf, &bo);
        if (r != 0) {
            redirected = 1;
            if (write)
                f->stats.written_replica += len;
            else
                f->stats.read_replica += len;
        } else if (write) {
            f->stats.written_original += len;
        } else {
            f->stats.read_original += len;
        }
    }
    if (redirected) {
        if (write)
            f->stats.redirected_writes++;
        else
            f->stats.redirected_reads++;
    }
    return rc;
}

/* ------------------------------------------------------------------ I/O */
static int read_locked(pxs_file *f, int64_t off, char *buf, int64_t n, int64_t *got)
{
    pxs_store *st = f->st;
    *got = 0;
    if (off < 0)
        return pxs_fail(st, PXS_EINVAL, "read: offset must be >= 0");
    if (n <= 0)
        return PXS_OK;
    f->stats.reads++;
    int64_t inside = f->h->size - off;
    if (inside < n && st->shared) {     /* past what this process knows: others may have extended */
        int64_t sz;
        int rc = pxs_sfile_refresh_size(f->h, &sz);
        if (rc)
            return rc;
        inside = sz - off;
    }
    if (inside > n)
        inside = n;
    if (inside < 0)
        inside = 0;
    if (inside < n)
        memset(buf + inside, 0, (size_t)(n - inside));
    if (inside == 0)
        return PXS_OK;
    rmt_seg small[NSEG], *sg = small;
    int nseg = 0;
    int rc = route(f, 0, off, off + inside, small, &sg, &nseg);
    if (rc)
        return rc;
    if (nseg == 0) {        /* the original serves all of it */
        int64_t bo = 0;
        rc = pxs_sfile_readv(f->h, 1, &off, &inside, buf, &bo);
        f->stats.read_original += inside;
    } else {
        rc = dispatch(f, sg, nseg, off, buf, 0);
    }
    if (sg != small)
        free(sg);
    if (!rc)
        *got = inside;
    return rc;
}

/* a read in MPI atomic mode is a sync point of its own: the data files' cached pages dropped
 * (PXS_CACHE_SYNC_POINTS; nothing in other cache modes) */
static void read_sync_point(pxs_file *f)
{
    if (f->atomic)
        pxs_store_forget(f->st);
}

void pxs_set_atomic(pxs_file *f, int on)
{
    LOCK(f->st);
    f->atomic = on != 0;
    UNLOCK(f->st);
}

int pxs_read(pxs_file *f, int64_t off, void *buf, int64_t n, int64_t *got)
{
    LOCK(f->st);
    read_sync_point(f);
    int rc = read_locked(f, off, buf, n, got);
    UNLOCK(f->st);
    return rc;
}

/* the bytes of [off, off + n) the usual way: the RMT routes them (redirected where a replica
 * has an entry, the flags first), the rest to the original (File.write) */
static int write_range(pxs_file *f, int64_t off, const char *buf, int64_t n)
{
    pxs_store *st = f->st;
    int64_t e = off + n;
    int rc = PXS_OK;
    if (e > f->h->size) {
        rc = catch_up(st);
        if (!rc && f->regver != st->rmt.ix.regver)
            rc = reload_replicas(f);
    }
    if (!rc && f->nfull && e > f->h->size) {
        /* hybrid full replicas grow with the file, stale where they grow, before the bytes */
        rc = pxs_coord_journal_lock(st->co, &st->rmt, st->timeout);
        if (rc) {
            rc = rmt_fail(st, rc, "growing a full replica");
        } else {
            int r1 = RMT_OK;
            for (int i = 0; i < f->nfull && !r1; i++) {
                uint64_t u[3] = {f->fid, f->full[i], (uint64_t)e};
                r1 = rmt_op(&st->rmt, REC_GROW, 0, u, NULL, 0);
            }
            int r2 = pxs_coord_journal_publish(st->co, &st->rmt);
            if (r1 || r2)
                rc = rmt_fail(st, r1 ? r1 : r2, "growing a full replica");
        }
    }
    rmt_seg small[NSEG], *sg = small;
    int nseg = 0;
    if (!rc)
        rc = route(f, 1, off, e, small, &sg, &nseg);   /* flags first (journal), then the bytes */
    if (!rc) {
        if (nseg == 0) {
            int64_t bo = 0;
            rc = pxs_sfile_writev(f->h, 1, &off, &n, buf, &bo);
            f->stats.written_original += n;
        } else {
            rc = dispatch(f, sg, nseg, off, (char *)(uintptr_t)buf, 1);
            if (!rc && e > f->h->size)     /* the original's size follows the logical file */
                rc = pxs_sfile_extend(f->h, e);
        }
        if (sg != small)
            free(sg);
    }
    return rc;
}

/* the slot replica whose extents hold x: 1 with *r and *t = min(e, the extent's end); else 0
 * and *t = min(e, the next slot extent's start) */
static int slot_at(const pxs_file *f, int64_t x, int64_t e, uint64_t *r, int64_t *t)
{
    int64_t next = e;
    for (int i = 0; i < f->nrep; i++) {
        if (!f->reps[i].slot)
            continue;
        const pxs_layout *l = f->reps[i].h->lay;
        size_t lo = 0, hi = l->ne;        /* the first extent starting after x */
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (l->eo[mid] <= x)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo > 0 && x < l->eo[lo - 1] + l->el[lo - 1]) {
            int64_t end = l->eo[lo - 1] + l->el[lo - 1];
            *r = f->reps[i].r;
            *t = end < e ? end : e;
            return 1;
        }
        if (lo < l->ne && l->eo[lo] < next)
            next = l->eo[lo];
    }
    *t = next;
    return 0;
}

/* does any range touch a slot replica's extents? */
static int slot_hits(const pxs_file *f, int64_t n, const int64_t *off, const int64_t *len)
{
    for (int64_t k = 0; f->nslot && k < n; k++) {
        uint64_t r;
        int64_t t;
        if (len[k] > 0 && (slot_at(f, off[k], off[k] + len[k], &r, &t) || t < off[k] + len[k]))
            return 1;
    }
    return 0;
}

/* lazy synchronisation (store/lazysync.h): the queue's step is one chunk of pxs_sync_step */
static int lazy_step(void *f, int *more)
{
    return pxs_sync_step(f, 0, more);
}

static int lazy_enqueue(pxs_store *st, pxs_file *f)
{
    if (!RS(st)->lazy && !(RS(st)->lazy = pxs_lazy_new(&st->mu, lazy_step, st->err, sizeof st->err)))
        return PXS_ENOMEM;
    return pxs_lazy_enqueue(RS(st)->lazy, f);
}

/* [s, t) inside partial replica r's own extents, no copy readable there (rmt_all_stale: e.g.
 * rewritten after a truncation, or past the file's end): CEDA redirects the write to the
 * replica (seed 000 §4.5: a write to replicated data goes to the replica, marked dirty, and
 * is synchronised back).  The bytes first, then the claim (rmt_claim: DIRTY); a write that
 * extends the file first makes the original's data files hold its size (pxs_sfile_reserve:
 * a crash recovers the size from them, other processes read it).  When the claim is refused
 * (another process made a copy readable meanwhile) the usual way. */
static int write_slot(pxs_file *f, uint64_t r, int64_t s, int64_t t, const char *buf)
{
    pxs_store *st = f->st;
    pxs_sfile *h;
    int rc = rep_handle(f, r, &h);
    int64_t len = t - s, bo = 0;
    if (!rc)
        rc = pxs_sfile_writev(h, 1, &s, &len, buf, &bo);
    if (!rc && t > f->h->size)
        rc = pxs_sfile_reserve(f->h, t);
    if (rc)
        return rc;
    rc = rmt_claim(&st->rmt, f->fid, r, s, t, st->timeout);
    if (rc == 1)
        return write_range(f, s, buf, len);
    if (rc)
        return rmt_fail(st, rc, "a write to a replica's extents");
    f->stats.written_replica += len;
    f->stats.redirected_writes++;
    return PXS_OK;
}

static int write_locked(pxs_file *f, int64_t off, const char *buf, int64_t n)
{
    pxs_store *st = f->st;
    if (off < 0)
        return pxs_fail(st, PXS_EINVAL, "write: offset must be >= 0");
    if (n <= 0)
        return PXS_OK;
    if (n > INT64_MAX - off)
        return pxs_fail(st, PXS_EINVAL, "write: the end is beyond 2^63-1 bytes");
    int64_t e = off + n;
    f->stats.writes++;
    int rc;
    if (st->shared) {       /* held from the lookup to the last byte */
        rc = pxs_coord_range_lock(st->co, &st->rmt, f->fid, off, e, 0, st->timeout);
        if (rc)
            return rc == RMT_ETIMEDOUT ? rmt_fail(st, rc, "the shared range lock of a write (another process is "
                                                          "synchronising it)")
                                       : rmt_fail(st, rc, "the shared range lock of a write");
    }
    rc = catch_up(st);
    if (!rc && f->regver != st->rmt.ix.regver)
        rc = reload_replicas(f);
    for (int64_t pos = off; !rc && pos < e;) {
        uint64_t r = 0;
        int64_t t = e;
        if (f->nslot && slot_at(f, pos, e, &r, &t) && rmt_all_stale(&st->rmt.ix, f->fid, pos, t))
            rc = write_slot(f, r, pos, t, buf + (pos - off));
        else
            rc = write_range(f, pos, buf + (pos - off), t - pos);
        pos = t;
    }
    if (!rc && f->cheapest && pxs_lazy_enabled(RS(st)->lazy_off)) {   /* stale copies left: synchronised lazily */
        const rmt_ofile *of = rmt_index_file(&st->rmt.ix, f->fid);
        if (of && of->nunclean)
            rc = lazy_enqueue(st, f);
    }
    if (st->shared) {
        int r2 = pxs_coord_range_unlock(st->co, &st->rmt, f->fid, off, e);
        if (!rc && r2)
            rc = rmt_fail(st, r2, "a range unlock");
    }
    return rc;
}

int pxs_write(pxs_file *f, int64_t off, const void *buf, int64_t n)
{
    LOCK(f->st);
    int rc = write_locked(f, off, buf, n);
    UNLOCK(f->st);
    return rc;
}

static int hits_any(pxs_file *f, int64_t n, const int64_t *off, const int64_t *len)
{
    for (int64_t k = 0; k < n; k++)
        if (len[k] > 0 && rmt_index_hits(&f->st->rmt.ix, f->fid, off[k], off[k] + len[k]))
            return 1;
    return 0;
}

int pxs_readv(pxs_file *f, int64_t n, const int64_t *off, const int64_t *len, void *buf, const int64_t *bo)
{
    pxs_store *st = f->st;
    LOCK(st);
    read_sync_point(f);
    int rc = catch_up(st);
    int64_t end = 0, any = 0;
    for (int64_t k = 0; !rc && k < n; k++) {
        if (len[k] <= 0)
            continue;
        if (off[k] < 0 || len[k] > INT64_MAX - off[k])
            rc = pxs_fail(st, PXS_EINVAL, "read: offset must be >= 0 and the end below 2^63");
        any = 1;
        end = off[k] + len[k] > end ? off[k] + len[k] : end;
    }
    if (!rc && any && end <= f->h->size && !hits_any(f, n, off, len)) {
        /* the vectored path of two-phase I/O: one backend call, server runs merged */
        f->stats.reads++;
        for (int64_t k = 0; k < n; k++)
            f->stats.read_original += len[k] > 0 ? len[k] : 0;
        rc = pxs_sfile_readv(f->h, n, off, len, buf, bo);
    } else {
        for (int64_t k = 0; !rc && k < n; k++) {
            int64_t got;
            if (len[k] > 0)
                rc = read_locked(f, off[k], (char *)buf + bo[k], len[k], &got);
        }
    }
    UNLOCK(st);
    return rc;
}

int pxs_writev(pxs_file *f, int64_t n, const int64_t *off, const int64_t *len, const void *buf, const int64_t *bo)
{
    pxs_store *st = f->st;
    LOCK(st);
    int rc = PXS_OK;
    int64_t lo = INT64_MAX, hi = 0;
    for (int64_t k = 0; k < n && !rc; k++) {
        if (len[k] <= 0)
            continue;
        if (off[k] < 0 || len[k] > INT64_MAX - off[k])
            rc = pxs_fail(st, PXS_EINVAL, "write: offset must be >= 0 and the end below 2^63");
        lo = off[k] < lo ? off[k] : lo;
        hi = off[k] + len[k] > hi ? off[k] + len[k] : hi;
    }
    if (rc || hi == 0) {
        UNLOCK(st);
        return rc;
    }
    int fast = 0;
    if (st->shared && (rc = pxs_coord_range_lock(st->co, &st->rmt, f->fid, lo, hi, 0, st->timeout)))
        rc = rmt_fail(st, rc, "the shared range lock of a write");
    else {
        rc = catch_up(st);
        if (!rc && f->regver != st->rmt.ix.regver)
            rc = reload_replicas(f);
        if (!rc && !f->nfull && !hits_any(f, n, off, len) && !slot_hits(f, n, off, len)) {
            fast = 1;
            f->stats.writes++;
            for (int64_t k = 0; k < n; k++)
                f->stats.written_original += len[k] > 0 ? len[k] : 0;
            rc = pxs_sfile_writev(f->h, n, off, len, buf, bo);
        }
        if (st->shared) {
            int r2 = pxs_coord_range_unlock(st->co, &st->rmt, f->fid, lo, hi);
            if (!rc && r2)
                rc = rmt_fail(st, r2, "a range unlock");
        }
    }
    for (int64_t k = 0; !rc && !fast && k < n; k++)
        if (len[k] > 0)
            rc = write_locked(f, off[k], (const char *)buf + bo[k], len[k]);
    UNLOCK(st);
    return rc;
}

int pxs_truncate(pxs_file *f, int64_t size)
{
    pxs_store *st = f->st;
    LOCK(st);
    int rc = PXS_OK;
    if (size < 0)
        rc = pxs_fail(st, PXS_EINVAL, "truncate: size must be >= 0");
    if (!rc && size < f->h->size) {
        uint64_t u[2] = {f->fid, (uint64_t)size};
        rc = rmt_change(st, REC_TRIM, 0, u, "trimming entries");
    }
    if (!rc)
        rc = pxs_sfile_truncate(f->h, size);
    UNLOCK(st);
    return rc;
}

void pxs_resized(pxs_file *f, int64_t size)
{
    LOCK(f->st);
    pxs_sfile_resized(f->h, size);
    UNLOCK(f->st);
}

int pxs_size(pxs_file *f, int64_t *size)
{
    LOCK(f->st);
    int rc = pxs_sfile_refresh_size(f->h, size);
    UNLOCK(f->st);
    return rc;
}

/* ------------------------------------------------------------------ synchronisation */
typedef struct {
    uint64_t r;
    int64_t off, len, ro;
    int flag;
} ent;

static int cmp_ent(const void *a, const void *b)
{
    const ent *x = a, *y = b;
    if (x->off != y->off)
        return x->off < y->off ? -1 : 1;
    if (x->r != y->r)
        return x->r < y->r ? -1 : 1;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    if (x->ro != y->ro)
        return x->ro < y->ro ? -1 : 1;
    return (x->flag > y->flag) - (x->flag < y->flag);
}

/* the unclean entries of the file overlapping [a, b), sorted by (offset, replica) (core.entries) */
static int entries(pxs_file *f, int64_t a, int64_t b, ent **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    int rc = catch_up(f->st);
    if (rc)
        return rc;
    const rmt_ofile *o = rmt_index_file(&f->st->rmt.ix, f->fid);
    size_t cap = 0;
    for (int k = 0; o && k < o->nrep; k++) {
        const rmt_rep *p = o->reps[k];
        for (size_t i = rmt_rep_first_after(p, a); i < p->n && p->e[i].off < b; i++) {
            const rmt_ent *c = &p->e[i];
            if (RMT_READABLE_CLEAN(c->flag))
                continue;
            if (*n == cap) {
                cap = cap ? cap * 2 : 16;
                ent *e = realloc(*out, cap * sizeof *e);
                if (!e) {
                    free(*out);
                    *out = NULL;
                    return PXS_ENOMEM;
                }
                *out = e;
            }
            (*out)[(*n)++] = (ent){p->r, c->off, c->len, c->off + c->delta, c->flag};
        }
    }
    if (*n > 1)
        qsort(*out, *n, sizeof **out, cmp_ent);
    return PXS_OK;
}

typedef struct {
    int64_t a, b;
} range;

static int cmp_range(const void *x, const void *y)
{
    const range *p = x, *q = y;
    if (p->a != q->a)
        return p->a < q->a ? -1 : 1;
    return (p->b > q->b) - (p->b < q->b);
}

/* copy the batch's bytes, fsync the destinations, then mark the copied ranges CLEAN in one
 * transaction (File._sync_locked) */
static int sync_locked(pxs_file *f, const range *rg, size_t nr, int flag, int copying)
{
    pxs_store *st = f->st;
    ent *es;
    size_t ne;
    int rc = entries(f, rg[0].a, rg[nr - 1].b, &es, &ne);
    if (rc)
        return rc;
    ent *pc = malloc((ne * nr + 1) * sizeof *pc);
    size_t np = 0;
    if (!pc) {
        free(es);
        return PXS_ENOMEM;
    }
    for (size_t i = 0; i < ne; i++) {
        int fl = es[i].flag;
        int want = flag == RMT_DIRTY ? fl == RMT_DIRTY : (fl == RMT_STALE || (copying && fl == RMT_COPYING));
        if (!want)
            continue;
        int64_t off = es[i].off, n = es[i].len;
        size_t k = 0;     /* max(bisect_right(starts, off) - 1, 0) */
        while (k + 1 < nr && rg[k + 1].a <= off)
            k++;
        for (; k < nr && rg[k].a < off + n; k++) {
            int64_t s = rg[k].a > off ? rg[k].a : off, t = rg[k].b < off + n ? rg[k].b : off + n;
            if (s < t)
                pc[np++] = (ent){es[i].r, s, t - s, es[i].ro + (s - off), fl};
        }
    }
    free(es);
    if (!np) {
        free(pc);
        return PXS_OK;
    }
    /* per replica, in first-seen order: one vectored copy */
    int64_t *o = malloc(np * sizeof *o), *ro = malloc(np * sizeof *ro), *ln = malloc(np * sizeof *ln);
    char *done = calloc(np, 1);
    pxs_sfile **dsts = calloc(np + 1, sizeof *dsts);
    size_t nd = 0;
    rc = (!o || !ro || !ln || !done || !dsts) ? PXS_ENOMEM : PXS_OK;
    for (size_t i = 0; i < np && !rc; i++) {
        if (done[i])
            continue;
        size_t m = 0;
        for (size_t j = i; j < np; j++)
            if (!done[j] && pc[j].r == pc[i].r) {
                done[j] = 1;
                o[m] = pc[j].off;
                ro[m] = pc[j].ro;
                ln[m] = pc[j].len;
                f->stats.synced += pc[j].len;
                RS(f->st)->synced += pc[j].len;
                m++;
            }
        pxs_sfile *rh, *dst;
        if ((rc = rep_handle(f, pc[i].r, &rh)))
            break;
        if (flag == RMT_DIRTY) {     /* the replica holds the newest bytes: to the original */
            rc = pxs_sfile_copy(rh, ro, f->h, o, ln, (int64_t)m);
            dst = f->h;
        } else {                     /* the original is up to date: to the stale replica */
            rc = pxs_sfile_copy(f->h, o, rh, ro, ln, (int64_t)m);
            dst = rh;
        }
        int seen = 0;
        for (size_t q = 0; q < nd; q++)
            seen |= dsts[q] == dst;
        if (!seen)
            dsts[nd++] = dst;
    }
    for (size_t q = 0; q < nd && !rc; q++)
        rc = pxs_sfile_fsync(dsts[q], 0);    /* the bytes durable ... */
    if (!rc) {                               /* ... then the flags that vouch for them */
        int r1 = pxs_coord_journal_lock(st->co, &st->rmt, st->timeout);
        if (r1) {
            rc = rmt_fail(st, r1, "a flag change");
        } else {
            for (size_t i = 0; i < np && !r1; i++) {
                uint64_t u[4] = {f->fid, pc[i].r, (uint64_t)pc[i].off, (uint64_t)(pc[i].off + pc[i].len)};
                r1 = rmt_op(&st->rmt, REC_SETFLAG, pc[i].flag | RMT_CLEAN << 8, u, NULL, 0);
            }
            int r2 = pxs_coord_journal_publish(st->co, &st->rmt);
            if (r1 || r2)
                rc = rmt_fail(st, r1 ? r1 : r2, "a flag change");
        }
    }
    free(o);
    free(ro);
    free(ln);
    free(done);
    free(dsts);
    free(pc);
    return rc;
}

/* one batch: its ranges locked exclusive (shared store), then sync_locked (File._sync_batch) */
static int sync_batch(pxs_file *f, const ent *batch, size_t nb, int flag, int copying)
{
    pxs_store *st = f->st;
    range *rg = malloc((nb + 1) * sizeof *rg);
    if (!rg)
        return PXS_ENOMEM;
    for (size_t i = 0; i < nb; i++)
        rg[i] = (range){batch[i].off, batch[i].off + batch[i].len};
    qsort(rg, nb, sizeof *rg, cmp_range);
    size_t nr = 0;
    for (size_t i = 0; i < nb; i++) {      /* touching or overlapping ranges merged */
        if (nr && rg[i].a <= rg[nr - 1].b) {
            if (rg[i].b > rg[nr - 1].b)
                rg[nr - 1].b = rg[i].b;
        } else {
            rg[nr++] = rg[i];
        }
    }
    int rc = PXS_OK;
    size_t held = 0;
    if (st->shared)
        for (; held < nr; held++) {
            int r1 = pxs_coord_range_lock(st->co, &st->rmt, f->fid, rg[held].a, rg[held].b, 1, st->timeout);
            if (r1) {
                rc = rmt_fail(st, r1, "the exclusive range lock of a synchronisation");
                break;
            }
        }
    if (!rc)
        rc = sync_locked(f, rg, nr, flag, copying);
    for (size_t i = 0; st->shared && i < held; i++)
        pxs_coord_range_unlock(st->co, &st->rmt, f->fid, rg[i].a, rg[i].b);
    free(rg);
    return rc;
}

/* copy unclean ranges in batches until none is left (budget < 0) or budget bytes were
 * copied; *more: unclean entries remain (File._sync) */
static int sync_some(pxs_file *f, int64_t budget, int copying, int *more)
{
    int64_t done = 0;
    *more = 0;
    for (;;) {
        ent *es;
        size_t ne;
        int rc = entries(f, 0, INT64_MAX, &es, &ne);
        if (rc)
            return rc;
        int any_dirty = 0;
        for (size_t i = 0; i < ne; i++)
            any_dirty |= es[i].flag == RMT_DIRTY;
        size_t nt = 0;
        for (size_t i = 0; i < ne; i++) {
            int fl = es[i].flag;
            if (any_dirty ? fl == RMT_DIRTY : (fl == RMT_STALE || (copying && fl == RMT_COPYING)))
                es[nt++] = es[i];
        }
        if (!nt) {
            free(es);
            return PXS_OK;
        }
        if (budget >= 0 && done >= budget) {
            free(es);
            *more = 1;
            return PXS_OK;
        }
        int64_t cap = PXS_SYNC_BATCH;
        if (budget >= 0) {
            int64_t left = budget - done > 1 ? budget - done : 1;
            cap = left < cap ? left : cap;
        }
        size_t nb = 0;
        int64_t size = 0;
        for (size_t i = 0; i < nt && size < cap; i++) {
            int64_t take = es[i].len < cap - size ? es[i].len : cap - size;
            es[nb] = es[i];
            es[nb++].len = take;
            size += take;
        }
        rc = sync_batch(f, es, nb, any_dirty ? RMT_DIRTY : -1, copying);
        free(es);
        if (rc)
            return rc;
        done += size;
    }
}

/* The replicator's step (pario.store.replicator, CEDA seed 000 §5.1: replicas copied online):
 * with [lo, hi) of the original locked exclusive (a shared store; writers elsewhere go on),
 * the replica still wanted (registered to this file, which was not relaid out), the ranges
 * clipped to the file's size, the original up to date there (other replicas' DIRTY bytes
 * written back), then ADD COPYING, the copy original -> replica, COPYING -> FRESH (readable
 * at once; CLEAN once its bytes are durable).  *copied: the bytes copied. */
int pxs_replicate(pxs_file *f, uint64_t r, int64_t n, const int64_t *off, const int64_t *len, int64_t *copied)
{
    pxs_store *st = f->st;
    *copied = 0;
    if (n <= 0)
        return PXS_OK;
    int64_t lo = off[0], hi = off[n - 1] + len[n - 1];
    int rc = PXS_OK, locked = 0;
    if (st->shared) {        /* waited for without the store's mutex: this process's other threads go on */
        int r1 = pxs_coord_range_lock(st->co, &st->rmt, f->fid, lo, hi, 1, st->timeout);
        LOCK(st);
        rc = r1 ? rmt_fail(st, r1, "the exclusive range lock of a replicator chunk") : PXS_OK;
        locked = !rc;
    } else {
        LOCK(st);
    }
    if (!rc)
        rc = catch_up(st);
    if (!rc && f->regver != st->rmt.ix.regver)
        rc = reload_replicas(f);       /* fails with one line if the original was relaid out */
    const rmt_rep *p = rc ? NULL : rmt_index_rep(&st->rmt.ix, r);
    if (!rc && (!p || p->o != f->fid || !p->registered))
        rc = pxs_fail(st, PXS_EBUSY, "a replica of %s was dropped by another process while it was copied; run the "
                      "plan again", f->name);
    int64_t size = 0;
    if (!rc)
        rc = st->shared ? pxs_sfile_refresh_size(f->h, &size) : (size = f->h->size, PXS_OK);
    int64_t *o = rc ? NULL : malloc((size_t)n * sizeof *o), *l = rc ? NULL : malloc((size_t)n * sizeof *l);
    int64_t m = 0;
    if (!rc && (!o || !l))
        rc = PXS_ENOMEM;
    for (int64_t k = 0; !rc && k < n; k++)
        if (off[k] < size && len[k] > 0) {
            o[m] = off[k];
            l[m++] = off[k] + len[k] <= size ? len[k] : size - off[k];
        }
    if (!rc && m) {
        range rg = {o[0], o[m - 1] + l[m - 1]};
        rc = sync_locked(f, &rg, 1, RMT_DIRTY, 0);      /* the newest bytes to the original first */
    }
    for (int pass = 0; pass < 2 && !rc && m; pass++) {
        pxs_sfile *rh = NULL;
        if (pass == 1 && ((rc = rep_handle(f, r, &rh)) || (rc = pxs_sfile_copy(f->h, o, rh, o, l, m))))
            break;
        int r1 = pxs_coord_journal_lock(st->co, &st->rmt, st->timeout);
        if (r1) {
            rc = rmt_fail(st, r1, "a replicator transaction");
            break;
        }
        for (int64_t k = 0; !r1 && k < m; k++) {
            if (pass == 0) {
                uint64_t u[5] = {f->fid, r, (uint64_t)o[k], (uint64_t)o[k], (uint64_t)l[k]};
                r1 = rmt_op(&st->rmt, REC_ADD, RMT_COPYING, u, NULL, 0);
            } else {
                uint64_t u[4] = {f->fid, r, (uint64_t)o[k], (uint64_t)(o[k] + l[k])};
                r1 = rmt_op(&st->rmt, REC_SETFLAG, RMT_COPYING | RMT_FRESH << 8, u, NULL, 0);
            }
        }
        int r2 = pxs_coord_journal_publish(st->co, &st->rmt);
        if (r1 || r2)
            rc = rmt_fail(st, r1 ? r1 : r2, pass ? "marking copied ranges FRESH" : "adding COPYING entries");
    }
    for (int64_t k = 0; !rc && k < m; k++)
        *copied += l[k];
    free(o);
    free(l);
    if (locked)
        pxs_coord_range_unlock(st->co, &st->rmt, f->fid, lo, hi);
    UNLOCK(st);
    return rc;
}

int pxs_writeback(pxs_file *f)
{
    LOCK(f->st);
    int rc = PXS_OK;
    for (;;) {
        ent *es;
        size_t ne, nd = 0;
        if ((rc = entries(f, 0, INT64_MAX, &es, &ne)))
            break;
        for (size_t i = 0; i < ne; i++)
            if (es[i].flag == RMT_DIRTY)
                es[nd++] = es[i];
        if (nd)
            rc = sync_batch(f, es, nd, RMT_DIRTY, 0);
        free(es);
        if (rc || !nd)
            break;
    }
    UNLOCK(f->st);
    return rc;
}

int pxs_sync_step(pxs_file *f, int64_t chunk, int *more)
{
    LOCK(f->st);
    int rc = sync_some(f, chunk > 0 ? chunk : PXS_SYNC_CHUNK, 0, more);
    UNLOCK(f->st);
    return rc;
}

static int flush_locked(pxs_file *f)
{
    pxs_store *st = f->st;
    int more;
    int rc = sync_some(f, -1, RS(st)->recovering, &more);
    if (!rc)
        rc = pxs_sfile_fsync(f->h, 0);
    if (!rc) {
        int r1 = pxs_coord_journal_sync(st->co, &st->rmt);
        if (r1)
            rc = rmt_fail(st, r1, "fdatasync");
    }
    return rc;
}

int pxs_flush(pxs_file *f)
{
    LOCK(f->st);
    int rc = flush_locked(f);
    UNLOCK(f->st);
    return rc;
}

static int has_flag(pxs_store *st, uint64_t o, uint64_t r, int flag)
{
    const rmt_rep *p = rmt_index_rep(&st->rmt.ix, r);
    (void)o;
    for (size_t i = 0; p && i < p->n; i++)
        if (p->e[i].flag == flag)
            return 1;
    return 0;
}

int pxs_fsync(pxs_file *f)
{
    pxs_store *st = f->st;
    LOCK(st);
    int rc = pxs_sfile_fsync(f->h, 0);
    if (!rc)
        rc = catch_up(st);
    pxs_store_forget(st);           /* a sync point: others' synced writes read from now on (plane.h) */
    for (int i = 0; !rc && i < f->nrep; i++) {
        int fresh = has_flag(st, f->fid, f->reps[i].r, RMT_FRESH);
        rc = pxs_sfile_fsync(f->reps[i].h, fresh);   /* the replicator wrote through its own handle */
        if (!rc && fresh) {
            uint64_t u[4] = {f->fid, f->reps[i].r, 0, (uint64_t)1 << 62};
            rc = rmt_change(st, REC_SETFLAG, RMT_FRESH | RMT_CLEAN << 8, u, "a flag change");
        }
    }
    if (!rc) {
        int r1 = pxs_coord_journal_sync(st->co, &st->rmt);
        if (r1)
            rc = rmt_fail(st, r1, "fdatasync");
    }
    UNLOCK(st);
    return rc;
}

/* ------------------------------------------------------------------ the store */
/* originals with unclean entries (names), for recovery and the last close */
static int unclean_files(pxs_store *st, char ***names, size_t *n)
{
    *names = NULL;
    *n = 0;
    const rmt_map *m = &st->rmt.ix.files;
    size_t cap = 0;
    for (size_t i = 0; i < m->cap; i++) {
        const rmt_ofile *f = m->s[i].val;
        if (!m->s[i].key || !f || !f->nunclean)
            continue;
        pxs_meta_rec rec;
        int got = pxs_meta_get_id(&st->meta, (int64_t)f->o, &rec, st->err, sizeof st->err);
        if (got < 0) {
            pxs_strv_free(*names, *n);
            return got;
        }
        if (got == 0)
            continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 8;
            char **v = realloc(*names, cap * sizeof *v);
            if (!v) {
                pxs_meta_rec_free(&rec);
                pxs_strv_free(*names, *n);
                return PXS_ENOMEM;
            }
            *names = v;
        }
        (*names)[(*n)++] = rec.name;
        rec.name = NULL;
        pxs_meta_rec_free(&rec);
    }
    return PXS_OK;
}

static int flush_all(pxs_store *st)
{
    int rc = catch_up(st);
    char **names = NULL;
    size_t n = 0;
    if (!rc)
        rc = unclean_files(st, &names, &n);
    for (size_t i = 0; i < n && !rc; i++) {
        pxs_file *f;
        rc = pxs_open(st, names[i], &f);
        if (!rc) {
            rc = flush_locked(f);
            int r2 = pxs_close(f);
            rc = rc ? rc : r2;
        }
    }
    pxs_strv_free(names, n);
    return rc;
}

int pxs_store_flush(pxs_store *st)
{
    LOCK(st);
    int rc = flush_all(st);
    UNLOCK(st);
    return rc;
}

/* the shadow files of opens that never closed (a killed run): only regular files directly
 * in the directory, which must be a real one (never a link someone planted) */
static void clear_shadows(const char *root)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/" PXS_SHADOW_DIR, root);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0)
        return;
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        struct stat sb;
        if (e->d_name[0] != '.' && fstatat(dfd, e->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(sb.st_mode))
            unlinkat(dfd, e->d_name, 0);
    }
    closedir(d);
}

/* recovery of a crashed store by its first opener (a subset of Store.recover: entries past
 * an original's end dropped, every file with unclean entries flushed, COPYING as STALE) */
static int recover(pxs_store *st)
{
    rmt_core *c = &st->rmt;
    clear_shadows(st->cfg.root);
    if (st->co->ops->counter_clear)      /* the shared pointers of those opens, kept by the member */
        st->co->ops->counter_clear(st->co);
    RS(st)->recovering = 1;
    int rc = PXS_OK;
    /* the originals first (a TRIM changes the table being walked) */
    const rmt_map *m = &c->ix.files;
    uint64_t *ids = malloc((m->n + 1) * sizeof *ids);
    size_t nid = 0;
    if (!ids)
        rc = PXS_ENOMEM;
    for (size_t i = 0; ids && i < m->cap; i++)
        if (m->s[i].key && m->s[i].val)
            ids[nid++] = ((const rmt_ofile *)m->s[i].val)->o;
    for (size_t q = 0; q < nid && !rc; q++) {
        const rmt_ofile *f = rmt_index_file(&c->ix, ids[q]);
        int64_t top = 0;
        for (int k = 0; f && k < f->nrep; k++) {
            const rmt_rep *p = f->reps[k];
            if (p->n && p->e[p->n - 1].off + p->e[p->n - 1].len > top)
                top = p->e[p->n - 1].off + p->e[p->n - 1].len;
        }
        pxs_meta_rec rec;
        int got = pxs_meta_get_id(&st->meta, (int64_t)ids[q], &rec, st->err, sizeof st->err);
        if (got <= 0) {
            rc = got;
            continue;
        }
        pxs_sfile *h;
        rc = pxs_sfile_open(st, rec.name, &h);
        if (!rc) {
            if (top > h->size) {
                uint64_t u[2] = {ids[q], (uint64_t)h->size};
                rc = rmt_change(st, REC_TRIM, 0, u, "trimming entries");
            }
            int r2 = pxs_sfile_close(h);
            rc = rc ? rc : r2;
        }
        pxs_meta_rec_free(&rec);
    }
    free(ids);
    if (!rc)
        rc = flush_all(st);
    if (!rc) {
        int r1 = pxs_coord_journal_sync(st->co, c);
        if (r1)
            rc = rmt_fail(st, r1, "fdatasync");
    }
    RS(st)->recovering = 0;
    return rc;
}

/* fsync the data files of every replica with FRESH entries, then make those entries CLEAN
 * (Store.settle_fresh) */
static int settle_fresh(pxs_store *st)
{
    const rmt_map *m = &st->rmt.ix.reps;
    uint64_t (*todo)[2] = malloc((m->n + 1) * sizeof *todo);
    size_t nt = 0;
    if (!todo)
        return PXS_ENOMEM;
    for (size_t i = 0; i < m->cap; i++) {
        const rmt_rep *p = m->s[i].val;
        if (m->s[i].key && p && has_flag(st, p->o, p->r, RMT_FRESH)) {
            todo[nt][0] = p->r;
            todo[nt++][1] = p->o;
        }
    }
    int rc = PXS_OK;
    for (size_t i = 0; i < nt && !rc; i++) {
        pxs_meta_rec rec;
        int got = pxs_meta_get_id(&st->meta, (int64_t)todo[i][0], &rec, st->err, sizeof st->err);
        if (got <= 0) {
            rc = got;
            continue;
        }
        pxs_sfile *h;
        rc = pxs_sfile_open(st, rec.name, &h);
        pxs_meta_rec_free(&rec);
        if (rc)
            break;
        rc = pxs_sfile_fsync(h, 1);
        int r2 = pxs_sfile_close(h);
        rc = rc ? rc : r2;
        if (!rc) {
            uint64_t u[4] = {todo[i][1], todo[i][0], 0, (uint64_t)1 << 62};
            rc = rmt_change(st, REC_SETFLAG, RMT_FRESH | RMT_CLEAN << 8, u, "a flag change");
        }
    }
    free(todo);
    return rc;
}

static void store_free(pxs_store *st)
{
    if (st->have_rmt)
        pxs_coord_journal_close(st->co, &st->rmt);
    st->have_rmt = 0;
    if (st->meta.db)
        pxs_meta_close(&st->meta);
    pxs_dplane_close(st->dp);
    st->dp = NULL;
    pxs_coord_close(st->co);
    st->co = NULL;
    free(st->names);
    pxs_config_free(&st->cfg);
    pthread_mutex_destroy(&st->mu);
    free(RS(st));
}

int pxs_store_open(const char *root, int flags, pxs_store **out, char *err, size_t errlen)
{
    return pxs_store_open_timeout(root, flags, pxs_store_timeout(), out, err, errlen);
}

/* the store is open on a machine its coordination cannot serve together with this one */
static int remote(pxs_store *st, const char *root)
{
    char msg[PXS_ERRLEN];
    pxs_coord_remote_message(st->co, root, msg, sizeof msg);
    return pxs_fail(st, PXS_EREMOTE, "%s", msg);
}

/* the store lock (store/coord.h): exclusive, or first (exclusive, to recover) or shared
 * with the others, polled until st->timeout */
static int take_store_lock(pxs_store *st, const char *root)
{
    if (!st->shared) {
        st->first = 1;
        int rc = pxs_coord_try_lock(st->co, 1);
        return rc == PXS_EREMOTE ? remote(st, root)
               : rc              ? pxs_fail(st, PXS_EBUSY, "store %s is in use by another process", root)
                                 : PXS_OK;
    }
    /* alone: recover first, then share; else share with the others */
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long nap = 100000;
    for (;;) {
        if (pxs_coord_try_lock(st->co, 1) == PXS_OK) {
            st->first = 1;
            return PXS_OK;
        }
        int rc = pxs_coord_try_lock(st->co, 0);
        if (rc == PXS_OK) {
            st->first = 0;
            return PXS_OK;
        }
        if (rc == PXS_EREMOTE)
            return remote(st, root);
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((double)(now.tv_sec - t0.tv_sec) + (double)(now.tv_nsec - t0.tv_nsec) * 1e-9 >= st->timeout)
            return pxs_fail(st, PXS_EBUSY, "timed out after %g s waiting for store %s: another process has it "
                            "open exclusively (or is recovering it)", st->timeout, root);
        struct timespec ts = {0, nap};
        nanosleep(&ts, NULL);
        nap = nap * 2 > 20000000 ? 20000000 : nap * 2;
    }
}

/* the RMT journal through the coordination (a store made before the journal is refused) */
static int open_journal(pxs_store *st, const char *root)
{
    const char *path = st->co->journal_where;
    int probe = pxs_coord_journal_probe(st->co);
    if (probe == PXS_ENOSYS)
        return pxs_fail(st, PXS_ENOSYS, "store %s was made before the RMT journal: open it once with pario (pario "
                        "store ls --store %s) to migrate it", root, root);
    if (!st->first && probe == PXS_ENOENT)
        return pxs_fail(st, PXS_ENOENT, "replica mapping table (RMT) %s is missing", path);
    int r1 = pxs_coord_journal_open(st->co, &st->rmt, st->shared, st->first);
    if (r1 == RMT_ECORRUPT)
        return pxs_fail(st, PXS_ERMT, "replica mapping table (RMT) %s is damaged or not an RMT journal; salvage the "
                        "store with 'pario store fsck --store %s --repair' (its replicas are dropped: the originals "
                        "hold every byte that was flushed)", path, root);
    if (r1 == RMT_EIO)
        return pxs_fail(st, PXS_ERMT, "replica mapping table (RMT) %s: %s", path, strerror(errno));
    if (r1)
        return pxs_fail(st, PXS_ERMT, "replica mapping table (RMT) %s cannot be opened (code %d)", path, r1);
    st->have_rmt = 1;
    return PXS_OK;
}

/* configuration, data plane, coordination, store lock, metadata, journal */
static int open_parts(pxs_store *st, const char *root)
{
    int rc = pxs_config_read(root, &st->cfg, st->err, sizeof st->err);
    if (!rc) {
        st->names = malloc((size_t)st->cfg.nservers * sizeof *st->names);
        if (!st->names)
            rc = PXS_ENOMEM;
        for (int i = 0; !rc && i < st->cfg.nservers; i++)
            st->names[i] = st->cfg.servers[i].name;
    }
    /* data files held open on several nodes (store/coord.h): reads from the file system */
    const pxs_coord_ops *member = rc ? NULL : pxs_coord_member(st->cfg.coord);
    int cache = st->direct                              ? PXS_CACHE_DIRECT
                : member && member->uncached_data ? PXS_CACHE_SYNC_POINTS
                                                        : PXS_CACHE_KERNEL;
    st->cache = cache;
    if (!rc)     /* the data plane (plane.h): local probes O_DIRECT, rados connects */
        rc = pxs_dplane_open(&st->cfg, cache, &st->dp, st->err, sizeof st->err);
    if (!rc)     /* the coordination member of store.json "coord" (store/coord.h) */
        rc = pxs_coord_open(st->cfg.coord, root, st->timeout, &st->co, st->err, sizeof st->err);
    if (!rc && st->co->timeout > st->timeout)     /* the member's shortest wait (coord/rados.c: leases) */
        st->timeout = st->co->timeout;
    if (!rc)
        rc = take_store_lock(st, root);
    if (!rc)
        rc = pxs_coord_meta_open(st->co, &st->meta, st->err, sizeof st->err);
    if (!rc)
        rc = open_journal(st, root);
    return rc;
}

int pxs_store_open_timeout(const char *root, int flags, double timeout, pxs_store **out, char *err, size_t errlen)
{
    *out = NULL;
    rstore *rs = calloc(1, sizeof *rs);
    if (!rs) {
        snprintf(err, errlen, "out of memory");
        return PXS_ENOMEM;
    }
    pxs_store *st = &rs->base;
    pthread_mutexattr_t at;
    pthread_mutexattr_init(&at);
    pthread_mutexattr_settype(&at, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&st->mu, &at);
    pthread_mutexattr_destroy(&at);
    st->shared = !!(flags & PXS_SHARED);
    st->direct = !!(flags & PXS_DIRECT);
    RS(st)->flush_at_end = !!(flags & PXS_FLUSH_AT_END);
    st->timeout = timeout;
    int rc = open_parts(st, root);
    /* a store that ended uncleanly in another boot serves nothing until its replicas were
     * verified byte for byte (Store.verify_clean); the flag stays in the journal's header
     * until that is done, so every opener refuses, not just the first */
    RS(st)->hold = !!(flags & PXS_HOLD);
    if (!rc && st->rmt.verify && !(RS(st)->hold && st->first) && !(flags & PXS_UNVERIFIED))
        rc = pxs_fail(st, PXS_EVERIFY, "store %s was not closed cleanly before the machine rebooted: its replicas "
                      "must be verified byte for byte before it serves; run 'pario store fsck --store %s' while no "
                      "program uses it", root, root);
    if (!rc && st->first && !(flags & PXS_NORECOVER) && !RS(st)->hold)
        rc = recover(st);
    if (!rc && !RS(st)->hold)
        rc = pxs_store_share(st);
    if (rc) {
        snprintf(err, errlen, "%s", st->err[0] ? st->err : "cannot open the store");
        for (pxs_file *f = RS(st)->files; f;) {     /* recovery leaves none open; be safe */
            pxs_file *nx = f->next;
            f->refs = 1;
            pxs_close(f);
            f = nx;
        }
        store_free(st);
        return rc;
    }
    *out = st;
    return PXS_OK;
}

int pxs_store_share(pxs_store *st)
{
    LOCK(st);
    int rc = PXS_OK;
    if (st->shared && st->first) {
        rc = pxs_store_finalize_sizes(st);
        if (!rc && pxs_coord_downgrade(st->co) != PXS_OK)
            rc = pxs_fail(st, PXS_EBUSY, "store %s: could not share the lock after recovery", st->cfg.root);
    }
    UNLOCK(st);
    return rc;
}

int pxs_store_recover(pxs_store *st)
{
    LOCK(st);
    int rc = recover(st);
    UNLOCK(st);
    return rc;
}

int pxs_store_alone(pxs_store *st)
{
    return !st->shared || pxs_coord_try_lock(st->co, 1) == PXS_OK;
}

int pxs_store_settle_fresh(pxs_store *st)
{
    LOCK(st);
    int rc = catch_up(st);
    if (!rc)
        rc = settle_fresh(st);
    UNLOCK(st);
    return rc;
}

/* the last process out (caller: the store's mutex, alone): finish what others left, final
 * sizes, FRESH -> CLEAN, the journal compacted when it has grown, the clean mark; nothing
 * while a power-loss verification is pending (the store stays as it is for the verifier) */
static int close_alone(pxs_store *st)
{
    if (!st->have_rmt || st->rmt.verify)
        return PXS_OK;
    int r = PXS_OK;
    if (st->shared) {
        r = flush_all(st);
        if (!r)
            r = pxs_store_finalize_sizes(st);
    }
    if (!r)
        r = catch_up(st);
    if (!r)
        r = settle_fresh(st);
    if (!r) {
        const rmt_core *c = &st->rmt;
        uint64_t live = 64 * (c->ix.nent + c->ix.reps.n + c->ix.jobs.n) + 4096;
        uint64_t lim = 4 * live > JOURNAL_COMPACT_MIN ? 4 * live : JOURNAL_COMPACT_MIN;
        if (c->log.end > lim) {
            int r1 = pxs_coord_journal_checkpoint(st->co, &st->rmt);
            if (r1)
                r = rmt_fail(st, r1, "compacting the journal");
        }
    }
    if (!r) {
        int unclean = 0;
        const rmt_map *m = &st->rmt.ix.files;
        for (size_t i = 0; i < m->cap; i++)
            if (m->s[i].key && m->s[i].val && ((const rmt_ofile *)m->s[i].val)->nunclean)
                unclean = 1;
        int r1 = pxs_coord_journal_set_clean(st->co, &st->rmt, !unclean);
        if (r1)
            r = rmt_fail(st, r1, "marking the journal clean");
    }
    return r;
}

/* 1: this process is the last one out: it holds the store lock exclusively.  Two shared
 * holders closing at once each fail to take it while the other still holds its shared lock
 * (fcntl does not drop a lock it cannot convert): each then drops its own and tries once more,
 * so that the second to drop finds nobody (unless a new opener came: it recovers or shares).
 * Without that second try nobody marked the journal clean, and the next opener on another
 * node ran the power-loss verification (and refused to serve until fsck). */
static int last_out(pxs_store *st)
{
    if (pxs_store_alone(st))
        return 1;
    return pxs_coord_unlock(st->co) && pxs_coord_try_lock(st->co, 1) == PXS_OK;
}

int pxs_store_close_alone(pxs_store *st)
{
    LOCK(st);
    int rc = close_alone(st);
    UNLOCK(st);
    return rc;
}

static double mono_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int pxs_store_close(pxs_store *st, char *err, size_t errlen)
{
    return pxs_store_close_stats(st, err, errlen, NULL);
}

int pxs_store_close_stats(pxs_store *st, char *err, size_t errlen, pxs_close_stats *out)
{
    double t0 = mono_s();
    pxs_close_stats cs = {0};
    int rc = RS(st)->lazy ? pxs_lazy_stop(RS(st)->lazy) : PXS_OK;     /* before the mutex: the thread takes it */
    RS(st)->lazy = NULL;
    LOCK(st);
    int64_t synced0 = RS(st)->synced;
    if (RS(st)->flush_at_end && st->have_rmt) {   /* the application ends: its DIRTY bytes home */
        double t1 = mono_s();
        int r = flush_all(st);
        cs.flush_s = mono_s() - t1;
        rc = rc ? rc : r;
    }
    while (RS(st)->files) {
        RS(st)->files->refs = 1;
        int r = pxs_close(RS(st)->files);
        rc = rc ? rc : r;
    }
    if (!RS(st)->hold && last_out(st)) {
        double t1 = mono_s();
        int r = close_alone(st);
        cs.last_out = 1;
        cs.last_out_s = mono_s() - t1;
        rc = rc ? rc : r;
    }
    cs.flushed = RS(st)->synced - synced0;
    while (st->sfiles) {
        st->sfiles->refs = 1;
        pxs_sfile_close(st->sfiles);
    }
    if (rc && err && errlen)
        snprintf(err, errlen, "%s", st->err);
    UNLOCK(st);
    store_free(st);
    cs.close_s = mono_s() - t0;
    if (out)
        *out = cs;
    return rc;
}
