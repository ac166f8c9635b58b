/* pario serve: store files' data through their layouts (storefile.h), as
 * pario.store.local.LocalBackend; every data-file operation goes through the store's data
 * plane (datafile.h). */
#define _GNU_SOURCE
#include "store/storefile.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RANGE_CHUNK ((int64_t)64 << 20)   /* logical bytes cut into pieces at a time */
#define COPY_BUF ((int64_t)16 << 20)
#define KEEP_SEGS 4096                    /* pieces and segments a handle keeps between calls */

int pxs_fail(pxs_store *st, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(st->err, sizeof st->err, fmt, ap);
    va_end(ap);
    return rc;
}

/* ------------------------------------------------------------------ handles */
static int open_datafile(pxs_sfile *h, int server, int df, pxs_datafile **out)
{
    if (df == 0 && h->fd0 && server >= 0 && server < h->st->cfg.nservers && h->fd0[server]) {
        *out = h->fd0[server];
        return PXS_OK;
    }
    for (int i = 0; i < h->nfd; i++)
        if (h->fds[i].server == server && h->fds[i].datafile == df) {
            *out = h->fds[i].df;
            return PXS_OK;
        }
    pxs_store *st = h->st;
    if (server < 0 || server >= st->cfg.nservers)
        return pxs_fail(st, PXS_EINVAL, "layout uses server index %d but the store has %d servers", server,
                        st->cfg.nservers);
    if (h->nfd == h->capfd) {
        int nc = h->capfd ? h->capfd * 2 : 8;
        pxs_fd *n = realloc(h->fds, (size_t)nc * sizeof *n);
        if (!n)
            return PXS_ENOMEM;
        h->fds = n;
        h->capfd = nc;
    }
    pxs_datafile *f = NULL;
    int rc = st->dp->ops->open(st->dp, server, h->id, df, h->name, &f, st->err, sizeof st->err);
    if (rc)
        return rc;
    h->fds[h->nfd++] = (pxs_fd){server, df, f};
    if (df == 0 && h->fd0)
        h->fd0[server] = f;
    *out = f;
    return PXS_OK;
}

static int is_extents(const pxs_sfile *h)
{
    return h->lay->kind == PXS_EXTENTS;
}

/* logical size from data-file sizes: max over servers j of min{x : C_j(x) >= size_j}
 * (local.py _recover_size; extent-map files commit their size on every extending write) */
static int recover_size(pxs_sfile *h, int64_t committed, int64_t *out)
{
    const pxs_layout *l = h->lay;
    if (l->kind == PXS_EXTENTS) {
        *out = committed;
        return PXS_OK;
    }
    int n = l->nsrv;
    int64_t *target = calloc((size_t)n + 1, 8), *lo = calloc((size_t)n + 1, 8), *hi = calloc((size_t)n + 1, 8),
            *c = calloc((size_t)n + 1, 8);
    int rc = (!target || !lo || !hi || !c) ? PXS_ENOMEM : PXS_OK;
    pxs_store *st = h->st;
    for (int i = 0; !rc && i < n; i++) {
        if (l->srv[i] < 0 || l->srv[i] >= st->cfg.nservers)
            rc = pxs_fail(st, PXS_EINVAL, "layout uses server index %d but the store has %d servers", l->srv[i],
                          st->cfg.nservers);
        else
            rc = st->dp->ops->size(st->dp, l->srv[i], h->id, 0, &target[i], st->err, sizeof st->err);
        lo[i] = 0;
        hi[i] = (int64_t)1 << 61;
    }
    for (int i = 0; !rc && i < n; i++)
        while (lo[i] < hi[i]) {
            int64_t mid = lo[i] + (hi[i] - lo[i]) / 2;
            pxs_layout_counts(l, mid, c);
            if (c[i] >= target[i])
                hi[i] = mid;
            else
                lo[i] = mid + 1;
        }
    int64_t best = 0;
    for (int i = 0; !rc && i < n; i++)
        best = lo[i] > best ? lo[i] : best;
    free(target);
    free(lo);
    free(hi);
    free(c);
    if (!rc)
        *out = best;
    return rc;
}

int pxs_sfile_open(pxs_store *st, const char *name, pxs_sfile **out)
{
    *out = NULL;
    for (pxs_sfile *h = st->sfiles; h; h = h->next)
        if (strcmp(h->name, name) == 0) {
            h->refs++;
            *out = h;
            return PXS_OK;
        }
    pxs_meta_rec rec;
    int rc = pxs_meta_get(&st->meta, name, &rec, st->err, sizeof st->err);
    if (rc < 0)
        return rc;
    if (rc == 0)
        return pxs_fail(st, PXS_ENOENT, "no file '%s' in the store", name);
    pxs_sfile *h = calloc(1, sizeof *h);
    if (!h) {
        pxs_meta_rec_free(&rec);
        return PXS_ENOMEM;
    }
    h->st = st;
    h->name = strdup(name);
    h->id = rec.id;
    h->size = rec.size;
    h->refs = 1;
    h->fd0 = calloc((size_t)(st->cfg.nservers > 0 ? st->cfg.nservers : 1), sizeof *h->fd0);
    char lerr[400];
    rc = h->name && h->fd0 ? pxs_layout_parse_text(rec.layout, st->names, st->cfg.nservers, &h->lay, lerr, sizeof lerr)
                 : PXS_ENOMEM;
    if (rc == PXS_EINVAL)
        pxs_fail(st, rc, "file '%s': %s", name, lerr);
    if (!rc && rec.dirty) {
        int64_t rs;
        rc = recover_size(h, rec.size, &rs);
        if (!rc && st->shared) {      /* maybe another process is extending it: do not clear dirty */
            h->size = rs > rec.size ? rs : rec.size;
            h->dirty_marked = 1;
        } else if (!rc) {
            h->size = rs;
            rc = pxs_meta_set_size(&st->meta, name, rs, 0, st->err, sizeof st->err);
        }
    }
    pxs_meta_rec_free(&rec);
    if (rc) {
        pxs_layout_free(h->lay);
        free(h->fd0);
        free(h->name);
        free(h);
        return rc;
    }
    h->next = st->sfiles;
    st->sfiles = h;
    *out = h;
    return PXS_OK;
}

static int sync_fds(pxs_sfile *h)
{
    pxs_store *st = h->st;
    for (int i = 0; i < h->nfd; i++) {
        int rc = st->dp->ops->sync(h->fds[i].df, st->err, sizeof st->err);
        if (rc)
            return rc;
    }
    return PXS_OK;
}

static int commit_size(pxs_sfile *h)
{
    pxs_store *st = h->st;
    int rc = st->shared ? pxs_meta_grow_size(&st->meta, h->name, h->size, st->err, sizeof st->err)
                        : pxs_meta_set_size(&st->meta, h->name, h->size, 0, st->err, sizeof st->err);
    if (!rc)
        h->size_dirty = 0;
    return rc;
}

int pxs_sfile_close(pxs_sfile *h)
{
    if (--h->refs > 0)
        return PXS_OK;
    int rc = PXS_OK;
    if (h->size_dirty) {
        rc = sync_fds(h);
        if (!rc)
            rc = commit_size(h);
    }
    pxs_store *st = h->st;
    for (int i = 0; i < h->nfd; i++)
        st->dp->ops->close(h->fds[i].df);
    for (pxs_sfile **p = &st->sfiles; *p; p = &(*p)->next)
        if (*p == h) {
            *p = h->next;
            break;
        }
    free(h->fds);
    free(h->fd0);
    free(h->pcs.p);
    free(h->seg);
    pxs_layout_free(h->lay);
    free(h->name);
    free(h);
    return rc;
}

/* ------------------------------------------------------------------ sizes */
/* before the first byte past the committed size reaches a data file: `dirty` committed */
static int mark_extending(pxs_sfile *h)
{
    if (h->size_dirty || is_extents(h))
        return PXS_OK;
    pxs_store *st = h->st;
    int rc = PXS_OK;
    if (!st->shared) {
        rc = pxs_meta_set_dirty(&st->meta, h->name, 1, st->err, sizeof st->err);
    } else if (!h->dirty_marked) {
        pxs_meta_rec rec;
        int got = pxs_meta_get(&st->meta, h->name, &rec, st->err, sizeof st->err);
        if (got < 0)
            return got;
        if (got == 0 || !rec.dirty)     /* another process may have marked it: no commit then */
            rc = pxs_meta_set_dirty(&st->meta, h->name, 1, st->err, sizeof st->err);
        if (got > 0)
            pxs_meta_rec_free(&rec);
        if (!rc)
            h->dirty_marked = 1;
    }
    if (!rc)
        h->size_dirty = 1;
    return rc;
}

static int extend(pxs_sfile *h, int64_t end)
{
    if (end <= h->size)
        return PXS_OK;
    pxs_store *st = h->st;
    if (is_extents(h)) {
        h->size = end;
        return st->shared ? pxs_meta_grow_size(&st->meta, h->name, end, st->err, sizeof st->err)
                          : pxs_meta_set_size(&st->meta, h->name, end, 0, st->err, sizeof st->err);
    }
    int rc = mark_extending(h);
    if (!rc)
        h->size = end;
    return rc;
}

int pxs_sfile_recovered_size(pxs_sfile *h, int64_t *size)
{
    return recover_size(h, h->size, size);
}

/* Every data file the layout names, opened (created if missing, as a first write would).
 * The served runtime's first rank does it at a collective open, so the ranks of other nodes
 * open existing files: on a parallel file system a create racing another client's open and
 * write stalls that write for the file system's cap timeouts (docs/multinode.md). */
int pxs_sfile_open_all(pxs_sfile *h)
{
    const pxs_layout *l = h->lay;
    pxs_datafile *df = NULL;
    int rc = PXS_OK;
    if (l->kind == PXS_EXTENTS) {
        for (size_t i = 0; !rc && i < l->ne; i++)
            rc = open_datafile(h, l->es[i], l->edf[i], &df);
        l = l->def;
    }
    for (int i = 0; !rc && l && i < l->nsrv; i++)
        rc = open_datafile(h, l->srv[i], 0, &df);
    return rc;
}

int pxs_sfile_extend(pxs_sfile *h, int64_t end)
{
    return extend(h, end);
}

/* As pxs_sfile_extend, and the data file of byte end - 1 is made to hold it: the plane's
 * reserve never overwrites a byte and never shrinks (a concurrent writer's bytes past it
 * stay; local: fallocate(2), aligned or not, O_DIRECT too; rados: the object grown, guarded
 * by its version); so the size recovered from the data files after a crash, or read by
 * another process, includes end (LocalBackend.reserve) */
int pxs_sfile_reserve(pxs_sfile *h, int64_t end)
{
    if (end <= h->size || is_extents(h))
        return extend(h, end);
    pxs_store *st = h->st;
    pxs_subs s = {0};
    char lerr[300];
    int rc = pxs_layout_map(h->lay, 0, end - 1, 1, &s, lerr, sizeof lerr);
    if (rc == PXS_EINVAL)
        rc = pxs_fail(st, rc, "%s", lerr);
    if (!rc && s.n != 1)
        rc = pxs_fail(st, PXS_EINVAL, "'%s': byte %lld maps to %zu pieces", h->name, (long long)(end - 1), s.n);
    if (!rc)
        rc = mark_extending(h);
    pxs_datafile *df = NULL;
    if (!rc)
        rc = open_datafile(h, s.s[0].server, s.s[0].datafile, &df);
    if (!rc)
        rc = st->dp->ops->reserve(df, s.s[0].local + 1, st->err, sizeof st->err);
    free(s.s);
    if (!rc)
        h->size = end;
    return rc;
}

int pxs_sfile_refresh_size(pxs_sfile *h, int64_t *size)
{
    pxs_store *st = h->st;
    if (!st->shared) {
        *size = h->size;
        return PXS_OK;
    }
    pxs_meta_rec rec;
    int rc = pxs_meta_get(&st->meta, h->name, &rec, st->err, sizeof st->err);
    if (rc < 0)
        return rc;
    if (rc == 0)
        return pxs_fail(st, PXS_ENOENT, "file '%s' was deleted from the store by another process", h->name);
    int64_t s = rec.size;
    rc = PXS_OK;
    if (rec.dirty && !is_extents(h)) {
        int64_t r;
        rc = recover_size(h, s, &r);
        if (!rc && r > s)
            s = r;
    }
    pxs_meta_rec_free(&rec);
    if (rc)
        return rc;
    if (h->size_dirty && h->size > s)
        s = h->size;
    h->size = s;
    *size = s;
    return PXS_OK;
}

int pxs_store_finalize_sizes(pxs_store *st)
{
    char **names;
    size_t n;
    int rc = pxs_meta_dirty_names(&st->meta, &names, &n, st->err, sizeof st->err);
    if (rc)
        return rc;
    for (size_t i = 0; i < n && !rc; i++) {
        pxs_sfile *open_h = NULL;
        for (pxs_sfile *h = st->sfiles; h; h = h->next)
            if (strcmp(h->name, names[i]) == 0)
                open_h = h;
        pxs_meta_rec rec;
        int got = pxs_meta_get(&st->meta, names[i], &rec, st->err, sizeof st->err);
        if (got <= 0) {
            rc = got;
            continue;
        }
        pxs_sfile tmp = {0}, *h = open_h;
        if (!h) {
            tmp.st = st;
            tmp.name = names[i];
            tmp.id = rec.id;
            char lerr[400];
            rc = pxs_layout_parse_text(rec.layout, st->names, st->cfg.nservers, &tmp.lay, lerr, sizeof lerr);
            if (rc == PXS_EINVAL)
                pxs_fail(st, rc, "file '%s': %s", names[i], lerr);
            h = &tmp;
        }
        int64_t size = rec.size, r = 0;
        if (!rc)
            rc = recover_size(h, rec.size, &r);
        if (!rc) {
            if (r > size)
                size = r;
            if (open_h && open_h->size > size)
                size = open_h->size;
            rc = pxs_meta_set_size(&st->meta, names[i], size, 0, st->err, sizeof st->err);
        }
        if (!rc && open_h) {
            open_h->size = size;
            open_h->size_dirty = open_h->dirty_marked = 0;
        }
        pxs_layout_free(tmp.lay);
        pxs_meta_rec_free(&rec);
    }
    pxs_strv_free(names, n);
    return rc;
}

void pxs_sfile_resized(pxs_sfile *h, int64_t size)
{
    h->size = size;
    h->size_dirty = 0;
}

int pxs_sfile_truncate(pxs_sfile *h, int64_t size)
{
    pxs_store *st = h->st;
    if (size < 0)
        return pxs_fail(st, PXS_EINVAL, "truncate: size must be >= 0");
    int keep = st->shared && h->dirty_marked;
    if (is_extents(h)) {
        h->size = size;
        return pxs_meta_set_size(&st->meta, h->name, size, keep, st->err, sizeof st->err);
    }
    int64_t c[h->lay->nsrv + 1];
    int rc = pxs_layout_counts(h->lay, size, c);
    /* data files first, then the committed size: a shrink durable first (bytes past a
     * committed size mean lost metadata), a growth needs no fsync */
    int shrink = size < h->size;
    for (int i = 0; !rc && i < h->lay->nsrv; i++) {
        pxs_datafile *df = NULL;
        rc = open_datafile(h, h->lay->srv[i], 0, &df);
        if (!rc)
            rc = st->dp->ops->truncate(df, c[i], shrink, st->err, sizeof st->err);
    }
    if (rc)
        return rc;
    h->size = size;
    rc = pxs_meta_set_size(&st->meta, h->name, size, keep, st->err, sizeof st->err);
    if (!rc)
        h->size_dirty = 0;
    return rc;
}

void pxs_store_forget(pxs_store *st)
{
    if (st->cache != PXS_CACHE_SYNC_POINTS || !st->dp->ops->forget)
        return;
    for (pxs_sfile *h = st->sfiles; h; h = h->next)
        for (int i = 0; i < h->nfd; i++)
            st->dp->ops->forget(h->fds[i].df);
}

int pxs_sfile_fsync(pxs_sfile *h, int everything)
{
    pxs_store *st = h->st;
    if (everything) {        /* every data file of the file, whoever wrote it */
        for (int j = 0; j < st->cfg.nservers; j++) {
            int *ds = NULL;
            size_t nd = 0;
            int rc = st->dp->ops->list(st->dp, j, h->id, &ds, &nd, st->err, sizeof st->err);
            for (size_t k = 0; !rc && k < nd; k++) {
                pxs_datafile *df;
                rc = open_datafile(h, j, ds[k], &df);
            }
            free(ds);
            if (rc)
                return rc;
        }
    }
    int rc = sync_fds(h);
    if (!rc && h->size_dirty)
        rc = commit_size(h);
    return rc;
}

/* ------------------------------------------------------------------ I/O */
typedef pxs_dseg ioseg;

/* order: data file (server, data file number), then server-local offset, then buffer offset */
static inline int seg_before(const ioseg *x, const ioseg *y)
{
    if (x->order != y->order)
        return x->order < y->order;
    if (x->datafile != y->datafile)
        return x->datafile < y->datafile;
    if (x->local != y->local)
        return x->local < y->local;
    return x->bo < y->bo;
}

static int cmp_seg(const void *a, const void *b)
{
    const ioseg *x = a, *y = b;
    return seg_before(x, y) ? -1 : seg_before(y, x);
}

/* a request's few segments (a 64 KiB transfer over a striping: one per server touched) are
 * put in order by insertion, stably; many by qsort */
static void sort_segs(ioseg *sg, size_t n)
{
    if (n > 32) {
        qsort(sg, n, sizeof *sg, cmp_seg);
        return;
    }
    for (size_t i = 1; i < n; i++) {
        if (!seg_before(&sg[i], &sg[i - 1]))
            continue;
        ioseg t = sg[i];
        size_t j = i;
        for (; j > 0 && seg_before(&t, &sg[j - 1]); j--)
            sg[j] = sg[j - 1];
        sg[j] = t;
    }
}

#define ORDERED_SERVERS 128

/* the segments of n ranges, in the handle's scratch (h->seg, *nout of them), in order: server
 * by server in the order the ranges first reach each server (the caller's: a two-phase cycle's
 * pieces come in the collective order, ROMCIO / CACIO / HACIO, seed 004 §3, and the servers
 * are visited in that order, not by their index), contiguous pieces of a data file merged */
static int segments(pxs_sfile *h, int64_t n, const int64_t *off, const int64_t *len, const int64_t *bo, size_t *nout)
{
    pxs_pieces *pc = &h->pcs;
    size_t ns = 0;
    int rc = PXS_OK;
    int first[ORDERED_SERVERS], nfirst = 0;
    for (int i = 0; i < ORDERED_SERVERS; i++)
        first[i] = -1;
    char lerr[300];
    for (int64_t k = 0; k < n && !rc; k++) {
        if (len[k] <= 0)
            continue;
        if (off[k] < 0 || bo[k] < 0)
            rc = pxs_fail(h->st, PXS_EINVAL, "'%s': negative offset", h->name);
        for (int64_t a = 0; !rc && a < len[k]; a += RANGE_CHUNK) {
            int64_t m = len[k] - a < RANGE_CHUNK ? len[k] - a : RANGE_CHUNK;
            pc->n = 0;
            rc = pxs_layout_pieces(h->lay, off[k] + a, m, pc, lerr, sizeof lerr);
            if (rc == PXS_EINVAL)
                pxs_fail(h->st, rc, "'%s': %s", h->name, lerr);
            if (!rc && ns + pc->n > h->capseg) {
                size_t cap = h->capseg ? h->capseg : 16;
                while (cap < ns + pc->n)
                    cap *= 2;
                ioseg *nsg = realloc(h->seg, cap * sizeof *nsg);
                if (!nsg)
                    rc = PXS_ENOMEM;
                else {
                    h->seg = nsg;
                    h->capseg = cap;
                }
            }
            for (size_t i = 0; !rc && i < pc->n; i++) {
                const pxs_piece *p = &pc->p[i];
                ioseg *s = &h->seg[ns++];
                s->server = p->server;
                if (p->server >= 0 && p->server < ORDERED_SERVERS) {
                    if (first[p->server] < 0)
                        first[p->server] = nfirst++;
                    s->order = first[p->server];
                } else {
                    s->order = ORDERED_SERVERS + p->server;   /* beyond: after, by index */
                }
                s->datafile = p->datafile;
                s->local = p->local;
                s->len = p->len;
                s->bo = bo[k] + (p->off - off[k]);
                rc = open_datafile(h, p->server, p->datafile, &s->df);
            }
        }
    }
    if (rc)
        return rc;
    sort_segs(h->seg, ns);
    *nout = ns;
    return PXS_OK;
}

/* the scratch of a large request is not kept (a handle keeps at most KEEP_SEGS entries) */
static void trim_scratch(pxs_sfile *h)
{
    if (h->capseg > KEEP_SEGS) {
        free(h->seg);
        h->seg = NULL;
        h->capseg = 0;
    }
    if (h->pcs.cap > KEEP_SEGS) {
        free(h->pcs.p);
        h->pcs = (pxs_pieces){0};
    }
}

static int move(pxs_sfile *h, int64_t n, const int64_t *off, const int64_t *len, char *buf, const int64_t *bo,
                int write)
{
    size_t ns = 0;
    int rc = segments(h, n, off, len, bo, &ns);
    if (rc || ns == 0)
        return rc;
    pxs_store *st = h->st;
    return st->dp->ops->transfer(st->dp, h->seg, ns, buf, write, st->err, sizeof st->err);
}

static int do_io(pxs_sfile *h, int64_t n, const int64_t *off, const int64_t *len, char *buf, const int64_t *bo,
                 int write)
{
    int rc = move(h, n, off, len, buf, bo, write);
    trim_scratch(h);
    return rc;
}

int pxs_sfile_readv(pxs_sfile *h, int64_t n, const int64_t *off, const int64_t *len, void *buf, const int64_t *bo)
{
    return do_io(h, n, off, len, buf, bo, 0);
}

int pxs_sfile_writev(pxs_sfile *h, int64_t n, const int64_t *off, const int64_t *len, const void *buf,
                     const int64_t *bo)
{
    int64_t end = 0;
    int any = 0;
    for (int64_t k = 0; k < n; k++) {
        if (len[k] <= 0)
            continue;
        if (off[k] < 0 || len[k] > INT64_MAX - off[k])
            return pxs_fail(h->st, PXS_EINVAL, "write: offset must be >= 0 and the end below 2^63");
        any = 1;
        if (off[k] + len[k] > end)
            end = off[k] + len[k];
    }
    if (!any)
        return PXS_OK;
    int rc = end > h->size ? mark_extending(h) : PXS_OK;
    if (!rc)
        rc = do_io(h, n, off, len, (char *)(uintptr_t)buf, bo, 1);
    if (!rc)
        rc = extend(h, end);
    return rc;
}

static int copy_buffered(pxs_sfile *src, const int64_t *so, pxs_sfile *dst, const int64_t *dof, const int64_t *len,
                         int64_t n);

/* one range [x, +L) of src to y of dst inside the plane (its copy op): both sides cut into
 * single-server pieces, walked together in logical order; PXS_ENOSYS when the plane cannot */
static int copy_in_plane(pxs_sfile *src, int64_t x, pxs_sfile *dst, int64_t y, int64_t L)
{
    pxs_store *st = src->st;
    pxs_pieces a = {0}, b = {0};
    char lerr[300];
    int rc = pxs_layout_pieces(src->lay, x, L, &a, lerr, sizeof lerr);
    if (!rc)
        rc = pxs_layout_pieces(dst->lay, y, L, &b, lerr, sizeof lerr);
    if (rc == PXS_EINVAL)
        pxs_fail(st, rc, "%s", lerr);
    size_t i = 0, j = 0;
    int64_t ai = 0, bj = 0;          /* bytes of piece i of a, piece j of b done */
    while (!rc && i < a.n && j < b.n) {
        const pxs_piece *p = &a.p[i], *q = &b.p[j];
        int64_t m = p->len - ai < q->len - bj ? p->len - ai : q->len - bj;
        pxs_datafile *fs, *fd;
        rc = open_datafile(src, p->server, p->datafile, &fs);
        if (!rc)
            rc = open_datafile(dst, q->server, q->datafile, &fd);
        if (!rc)
            rc = st->dp->ops->copy(fs, p->local + ai, fd, q->local + bj, m, st->err, sizeof st->err);
        if ((ai += m) == p->len) {
            i++;
            ai = 0;
        }
        if ((bj += m) == q->len) {
            j++;
            bj = 0;
        }
    }
    free(a.p);
    free(b.p);
    return rc;
}

int pxs_sfile_copy(pxs_sfile *src, const int64_t *so, pxs_sfile *dst, const int64_t *dof, const int64_t *len,
                   int64_t n)
{
    if (src->st->dp->ops->copy && !src->st->direct) {     /* in the plane (copy_file_range) */
        int64_t end = 0;
        int rc = PXS_OK, in_plane = 1;
        for (int64_t k = 0; k < n; k++)
            if (len[k] > 0 && dof[k] + len[k] > end)
                end = dof[k] + len[k];
        if (end > dst->size)
            rc = mark_extending(dst);
        for (int64_t k = 0; !rc && in_plane && k < n; k++)
            if (len[k] > 0) {
                rc = copy_in_plane(src, so[k], dst, dof[k], len[k]);
                if (rc == PXS_ENOSYS) {      /* not this file system: the rest through a buffer */
                    rc = PXS_OK;
                    in_plane = 0;
                    so += k;
                    dof += k;
                    len += k;
                    n -= k;
                }
            }
        if (!rc && in_plane)
            return end > 0 ? extend(dst, end) : PXS_OK;
        if (rc)
            return rc;
    }
    return copy_buffered(src, so, dst, dof, len, n);
}

/* through a buffer (any plane, O_DIRECT) */
static int copy_buffered(pxs_sfile *src, const int64_t *so, pxs_sfile *dst, const int64_t *dof, const int64_t *len,
                         int64_t n)
{
    /* through a buffer of at most COPY_BUF bytes: a batch of ranges read from src (holes read
     * as zeros), written to dst */
    int64_t i = 0;
    int rc = PXS_OK;
    char *buf = NULL;
    int64_t *bo = malloc((size_t)(n > 0 ? n : 1) * sizeof *bo);
    if (!bo)
        return PXS_ENOMEM;
    while (i < n && !rc) {
        int64_t j = i, tot = 0;
        while (j < n && (j == i || tot + len[j] <= COPY_BUF)) {
            bo[j] = tot;
            tot += len[j] > 0 ? len[j] : 0;
            j++;
        }
        if (tot > 0) {
            /* a single range over COPY_BUF is split */
            if (j == i + 1 && tot > COPY_BUF) {
                char *b = malloc((size_t)COPY_BUF);
                if (!b) {
                    rc = PXS_ENOMEM;
                    break;
                }
                for (int64_t a = 0; a < tot && !rc; a += COPY_BUF) {
                    int64_t m = tot - a < COPY_BUF ? tot - a : COPY_BUF, z = 0, x = so[i] + a, y = dof[i] + a;
                    rc = pxs_sfile_readv(src, 1, &x, &m, b, &z);
                    if (!rc)
                        rc = pxs_sfile_writev(dst, 1, &y, &m, b, &z);
                }
                free(b);
                i = j;
                continue;
            }
            char *nb = realloc(buf, (size_t)tot);
            if (!nb) {
                rc = PXS_ENOMEM;
                break;
            }
            buf = nb;
            rc = pxs_sfile_readv(src, j - i, so + i, len + i, buf, bo + i);
            if (!rc)
                rc = pxs_sfile_writev(dst, j - i, dof + i, len + i, buf, bo + i);
        }
        i = j;
    }
    free(buf);
    free(bo);
    return rc;
}
