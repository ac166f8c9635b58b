/* The in-memory RMT: replicas, their entries, and the effect of every journal record.
 *
 * Per original file: its replicas (sorted by replica file id); per replica: its entries,
 * sorted by offset, never overlapping, and canonical (neighbours that continue each other
 * with the same R_offset shift and flag are one entry).  So every process that applies the
 * same records in the same order holds the same entries, entry for entry, and a request
 * is located with one binary search per replica (CEDA seed 000 §5.2: the redirector looks
 * up the RMT on every request; §6.4.1 Fig. 17 measures that lookup).
 *
 * Nothing here does I/O; rmt_log.c feeds records, rmt.c appends them.
 */
#include "core/rmt_private.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ u64 -> pointer map */
static size_t hash64(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ULL;
    k ^= k >> 33;
    return (size_t)k;
}

void rmt_map_init(rmt_map *m)
{
    m->s = NULL;
    m->cap = m->n = 0;
}

void rmt_map_free(rmt_map *m)
{
    free(m->s);
    rmt_map_init(m);
}

void *rmt_map_get(const rmt_map *m, uint64_t key)
{
    if (!m->cap || !key)
        return NULL;
    size_t mask = m->cap - 1, i = hash64(key) & mask;
    while (m->s[i].key) {
        if (m->s[i].key == key)
            return m->s[i].val;
        i = (i + 1) & mask;
    }
    return NULL;
}

static int map_grow(rmt_map *m)
{
    size_t nc = m->cap ? m->cap * 2 : 16;
    rmt_slot *ns = calloc(nc, sizeof *ns);
    if (!ns)
        return RMT_ENOMEM;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->s[i].key)
            continue;
        size_t j = hash64(m->s[i].key) & (nc - 1);
        while (ns[j].key)
            j = (j + 1) & (nc - 1);
        ns[j] = m->s[i];
    }
    free(m->s);
    m->s = ns;
    m->cap = nc;
    return RMT_OK;
}

int rmt_map_put(rmt_map *m, uint64_t key, void *val)
{
    if (!key)
        return RMT_EINVAL;
    if ((m->n + 1) * 4 > m->cap * 3) {
        int rc = map_grow(m);
        if (rc)
            return rc;
    }
    size_t mask = m->cap - 1, i = hash64(key) & mask;
    while (m->s[i].key) {
        if (m->s[i].key == key) {
            m->s[i].val = val;
            return RMT_OK;
        }
        i = (i + 1) & mask;
    }
    m->s[i].key = key;
    m->s[i].val = val;
    m->n++;
    return RMT_OK;
}

void *rmt_map_del(rmt_map *m, uint64_t key)
{
    if (!m->cap || !key)
        return NULL;
    size_t mask = m->cap - 1, i = hash64(key) & mask;
    while (m->s[i].key && m->s[i].key != key)
        i = (i + 1) & mask;
    if (!m->s[i].key)
        return NULL;
    void *val = m->s[i].val;
    /* backward-shift deletion keeps every probe chain unbroken */
    size_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (!m->s[j].key)
            break;
        size_t k = hash64(m->s[j].key) & mask;
        int stays = (i <= j) ? (i < k && k <= j) : (i < k || k <= j);
        if (stays)
            continue;
        m->s[i] = m->s[j];
        i = j;
    }
    m->s[i].key = 0;
    m->s[i].val = NULL;
    m->n--;
    return val;
}

/* ------------------------------------------------------------------ index */
void rmt_index_init(rmt_index *ix)
{
    rmt_map_init(&ix->files);
    rmt_map_init(&ix->reps);
    rmt_map_init(&ix->jobs);
    ix->regver = 1;
    ix->nent = 0;
}

static void rep_free(rmt_rep *p)
{
    free(p->e);
    free(p->ends);
    free(p->name);
    free(p);
}

static void job_free(rmt_job *j)
{
    free(j->spec);
    free(j);
}

void rmt_index_free(rmt_index *ix)
{
    for (size_t i = 0; i < ix->files.cap; i++) {
        rmt_ofile *f = ix->files.s[i].val;
        if (!ix->files.s[i].key || !f)
            continue;
        for (int k = 0; k < f->nrep; k++)
            rep_free(f->reps[k]);
        free(f->reps);
        free(f);
    }
    for (size_t i = 0; i < ix->jobs.cap; i++)
        if (ix->jobs.s[i].key && ix->jobs.s[i].val)
            job_free(ix->jobs.s[i].val);
    rmt_map_free(&ix->files);
    rmt_map_free(&ix->reps);
    rmt_map_free(&ix->jobs);
    ix->nent = 0;
}

rmt_ofile *rmt_index_file(const rmt_index *ix, uint64_t o)
{
    return rmt_map_get(&ix->files, o);
}

rmt_rep *rmt_index_rep(const rmt_index *ix, uint64_t r)
{
    return rmt_map_get(&ix->reps, r);
}

rmt_job *rmt_index_job(const rmt_index *ix, uint64_t r)
{
    return rmt_map_get(&ix->jobs, r);
}

static void file_route(rmt_ofile *f)
{
    f->cheapest = 0;
    for (int k = 0; k < f->nrep; k++)
        if (f->reps[k]->registered && f->reps[k]->route == RMT_ROUTE_CHEAPEST)
            f->cheapest = 1;
}

/* the replica r of original o, created (unregistered, no entries) if missing */
static int rep_get(rmt_index *ix, uint64_t o, uint64_t r, rmt_rep **out)
{
    rmt_rep *p = rmt_map_get(&ix->reps, r);
    if (p) {
        if (p->o != o)
            return RMT_EINVAL;
        *out = p;
        return RMT_OK;
    }
    rmt_ofile *f = rmt_map_get(&ix->files, o);
    if (!f) {
        f = calloc(1, sizeof *f);
        if (!f || rmt_map_put(&ix->files, o, f)) {
            free(f);
            return RMT_ENOMEM;
        }
        f->o = o;
    }
    if (f->nrep == f->caprep) {
        int nc = f->caprep ? f->caprep * 2 : 2;
        rmt_rep **nr = realloc(f->reps, (size_t)nc * sizeof *nr);
        if (!nr)
            return RMT_ENOMEM;
        f->reps = nr;
        f->caprep = nc;
    }
    p = calloc(1, sizeof *p);
    if (!p || rmt_map_put(&ix->reps, r, p)) {
        free(p);
        return RMT_ENOMEM;
    }
    p->r = r;
    p->o = o;
    int k = f->nrep;
    while (k > 0 && f->reps[k - 1]->r > r) {
        f->reps[k] = f->reps[k - 1];
        k--;
    }
    f->reps[k] = p;
    f->nrep++;
    *out = p;
    return RMT_OK;
}

/* ------------------------------------------------------------------ entries of one replica */
static int ent_reserve(rmt_rep *p, size_t need)
{
    if (need <= p->cap)
        return RMT_OK;
    size_t nc = p->cap ? p->cap : 8;
    while (nc < need)
        nc *= 2;
    rmt_ent *ne = realloc(p->e, nc * sizeof *ne);
    if (!ne)
        return RMT_ENOMEM;
    p->e = ne;
    int64_t *nd = realloc(p->ends, nc * sizeof *nd);
    if (!nd)
        return RMT_ENOMEM;      /* p->e grew, p->cap did not: consistent */
    p->ends = nd;
    p->cap = nc;
    return RMT_OK;
}

/* index of the first entry that ends after x (entries are sorted and disjoint, so their
 * ends increase too) */
static size_t first_after(const rmt_rep *p, int64_t x)
{
    /* branchless lower bound (a conditional move per level, no mispredicted branches) over
     * the packed array of ends (8 bytes per entry: few cache lines per search; this runs
     * on every request of a file with replicas) */
    const int64_t *base = p->ends;
    size_t len = p->n;
    if (len == 0)
        return 0;
    while (len > 1) {
        size_t half = len / 2;
        base = (base[half] <= x) ? base + half : base;
        len -= half;
    }
    return (size_t)(base - p->ends) + (*base <= x);
}

size_t rmt_rep_first_after(const rmt_rep *p, int64_t x)
{
    return first_after(p, x);
}

static uint64_t count_unclean(const rmt_rep *p, size_t a, size_t b)
{
    uint64_t n = 0;
    for (size_t i = a; i < b && i < p->n; i++)
        n += !RMT_READABLE_CLEAN(p->e[i].flag);
    return n;
}

/* replace entries [i0, i1) by buf[0..k), then merge canonical neighbours in the window
 * around the change; keeps f->nunclean and ix->nent current */
static int splice(rmt_index *ix, rmt_ofile *f, rmt_rep *p, size_t i0, size_t i1, const rmt_ent *buf, size_t k)
{
    size_t wa = i0 ? i0 - 1 : 0;
    size_t wb = i1 < p->n ? i1 + 1 : p->n;
    uint64_t before = count_unclean(p, wa, wb);
    size_t n0 = p->n;
    size_t n2 = p->n - (i1 - i0) + k;
    int rc = ent_reserve(p, n2);
    if (rc)
        return rc;
    memmove(p->e + i0 + k, p->e + i1, (p->n - i1) * sizeof(rmt_ent));
    memmove(p->ends + i0 + k, p->ends + i1, (p->n - i1) * sizeof(int64_t));
    memcpy(p->e + i0, buf, k * sizeof(rmt_ent));
    for (size_t i = i0; i < i0 + k; i++)
        p->ends[i] = p->e[i].off + p->e[i].len;
    p->n = n2;
    wb = wb + k - (i1 - i0);
    /* merge: in the window [wa, wb) */
    if (wb > p->n)
        wb = p->n;
    size_t w = wa;
    if (wb > wa) {
        for (size_t i = wa + 1; i < wb; i++) {
            rmt_ent *q = &p->e[w], *c = &p->e[i];
            if (q->off + q->len == c->off && q->delta == c->delta && q->flag == c->flag) {
                q->len += c->len;
                p->ends[w] = q->off + q->len;
            } else {
                p->e[++w] = *c;
                p->ends[w] = c->off + c->len;
            }
        }
        size_t removed = (wb - 1) - w;
        if (removed) {
            memmove(p->e + w + 1, p->e + wb, (p->n - wb) * sizeof(rmt_ent));
            memmove(p->ends + w + 1, p->ends + wb, (p->n - wb) * sizeof(int64_t));
            p->n -= removed;
            wb -= removed;
        }
    }
    uint64_t after = count_unclean(p, wa, wb);
    f->nunclean = f->nunclean - before + after;
    ix->nent = ix->nent - n0 + p->n;
    return RMT_OK;
}

/* the flags of p's entries inside [x, e): new flag = fn(old, arg) (-1 = keep) */
typedef int (*flag_fn)(int old, int arg);

static int fn_set(int old, int arg)
{
    (void)old;
    return arg;
}

static int fn_if(int old, int arg)      /* arg = old | new << 8 */
{
    return old == (arg & 0xFF) ? (arg >> 8) : -1;
}

static int fn_not_dirty_to_stale(int old, int arg)
{
    (void)arg;
    return old == RMT_DIRTY ? -1 : RMT_STALE;
}

#define SMALL 48
#define MAXGONE 64

static int set_flags(rmt_index *ix, rmt_ofile *f, rmt_rep *p, int64_t x, int64_t e, flag_fn fn, int arg)
{
    size_t i0 = first_after(p, x), i1 = i0;
    int change = 0;
    while (i1 < p->n && p->e[i1].off < e) {
        int nf = fn(p->e[i1].flag, arg);
        if (nf >= 0 && nf != p->e[i1].flag)
            change = 1;
        i1++;
    }
    if (!change)
        return RMT_OK;
    rmt_ent small[SMALL], *buf = small;
    size_t need = 3 * (i1 - i0);
    if (need > SMALL) {
        buf = malloc(need * sizeof *buf);
        if (!buf)
            return RMT_ENOMEM;
    }
    size_t k = 0;
    for (size_t i = i0; i < i1; i++) {
        rmt_ent c = p->e[i];
        int nf = fn(c.flag, arg);
        if (nf < 0 || nf == c.flag) {
            buf[k++] = c;
            continue;
        }
        int64_t end = c.off + c.len;
        int64_t s = c.off > x ? c.off : x, t = end < e ? end : e;
        if (s > c.off) {
            buf[k] = c;
            buf[k].len = s - c.off;
            k++;
        }
        buf[k] = c;
        buf[k].off = s;
        buf[k].len = t - s;
        buf[k].flag = nf;
        k++;
        if (end > t) {
            buf[k] = c;
            buf[k].off = t;
            buf[k].len = end - t;
            k++;
        }
    }
    int rc = splice(ix, f, p, i0, i1, buf, k);
    if (buf != small)
        free(buf);
    return rc;
}

/* does p cover every byte of [x, e)? */
static int rep_covers(const rmt_rep *p, int64_t x, int64_t e)
{
    size_t i = first_after(p, x);
    int64_t pos = x;
    while (pos < e) {
        if (i >= p->n || p->e[i].off > pos)
            return 0;
        pos = p->e[i].off + p->e[i].len;
        i++;
    }
    return 1;
}

/* is every entry of the other replicas of f than p that overlaps [x, e) STALE? */
static int others_stale(const rmt_ofile *f, const rmt_rep *p, int64_t x, int64_t e)
{
    for (int k = 0; f && k < f->nrep; k++) {
        const rmt_rep *q = f->reps[k];
        if (q == p)
            continue;
        for (size_t i = first_after(q, x); i < q->n && q->e[i].off < e; i++)
            if (q->e[i].flag != RMT_STALE)
                return 0;
    }
    return 1;
}

/* SETFLAG old -> new (CLEAN, FRESH or COPYING) on the parts of [a, b) where no other replica is
 * DIRTY: a copy of the original's bytes is never up to date where another copy is newer */
static int set_flags_outside_dirty(rmt_index *ix, rmt_ofile *f, rmt_rep *p, int64_t a, int64_t b, int arg)
{
    int64_t pos = a;
    while (pos < b) {
        int64_t ds = b, de = b;
        for (int k = 0; k < f->nrep; k++) {
            const rmt_rep *q = f->reps[k];
            if (q == p)
                continue;
            for (size_t i = first_after(q, pos); i < q->n && q->e[i].off < ds; i++) {
                if (q->e[i].flag != RMT_DIRTY)
                    continue;
                int64_t s = q->e[i].off > pos ? q->e[i].off : pos;
                int64_t t = q->e[i].off + q->e[i].len;
                ds = s;
                de = t < b ? t : b;
                break;
            }
        }
        if (ds > pos) {
            int rc = set_flags(ix, f, p, pos, ds, fn_if, arg);
            if (rc)
                return rc;
        }
        pos = de;
    }
    return RMT_OK;
}

static int op_add(rmt_index *ix, uint64_t o, uint64_t r, int64_t x, int64_t r_off, int64_t len, int flag)
{
    rmt_rep *p;
    int rc = rep_get(ix, o, r, &p);
    if (rc)
        return rc;
    rmt_ofile *f = rmt_map_get(&ix->files, o);
    int64_t e = x + len, delta = r_off - x;
    /* the existing entries in the window and the holes between them, in order */
    size_t i0 = first_after(p, x), i1 = i0;
    while (i1 < p->n && p->e[i1].off < e)
        i1++;
    rmt_ent small[SMALL], *buf = small;
    size_t need = 2 * (i1 - i0) + 1;
    if (need > SMALL) {
        buf = malloc(need * sizeof *buf);
        if (!buf)
            return RMT_ENOMEM;
    }
    size_t k = 0;
    int64_t pos = x;
    for (size_t i = i0; i < i1; i++) {
        if (p->e[i].off > pos)
            buf[k++] = (rmt_ent){pos, p->e[i].off - pos, delta, flag, 0};
        buf[k++] = p->e[i];
        int64_t end = p->e[i].off + p->e[i].len;
        if (end > pos)
            pos = end;
    }
    if (pos < e)
        buf[k++] = (rmt_ent){pos, e - pos, delta, flag, 0};
    rc = splice(ix, f, p, i0, i1, buf, k);
    if (buf != small)
        free(buf);
    if (rc || flag == RMT_DIRTY)
        return rc;
    /* bytes another replica has DIRTY: the original is not up to date there, so the new
     * copy (of the original's bytes) is stale; the old entries there are STALE already */
    for (int q = 0; q < f->nrep; q++) {
        rmt_rep *d = f->reps[q];
        if (d == p)
            continue;
        for (size_t i = first_after(d, x); i < d->n && d->e[i].off < e; i++) {
            if (d->e[i].flag != RMT_DIRTY)
                continue;
            int64_t s = d->e[i].off > x ? d->e[i].off : x;
            int64_t t = d->e[i].off + d->e[i].len < e ? d->e[i].off + d->e[i].len : e;
            rc = set_flags(ix, f, p, s, t, fn_not_dirty_to_stale, 0);
            if (rc)
                return rc;
        }
    }
    return RMT_OK;
}

static int op_mark(rmt_index *ix, uint64_t o, uint64_t t, int64_t a, int64_t b)
{
    rmt_ofile *f = rmt_map_get(&ix->files, o);
    if (!f)
        return RMT_OK;
    for (int k = 0; k < f->nrep; k++) {
        rmt_rep *p = f->reps[k];
        int rc = set_flags(ix, f, p, a, b, fn_set, p->r == t ? RMT_DIRTY : RMT_STALE);
        if (rc)
            return rc;
    }
    return RMT_OK;
}

static int op_drop(rmt_index *ix, uint64_t r);

/* entries end at size; an unregistered replica left without entries is gone (as if never
 * added: a journal rewritten from the state has no record of it) */
static int op_trim(rmt_index *ix, uint64_t o, int64_t size)
{
    rmt_ofile *f = rmt_map_get(&ix->files, o);
    if (!f)
        return RMT_OK;
    uint64_t gone[MAXGONE];
    int ngone = 0;
    for (int k = 0; k < f->nrep; k++) {
        rmt_rep *p = f->reps[k];
        size_t i0 = first_after(p, size);
        if (i0 < p->n) {
            rmt_ent keep = p->e[i0];
            size_t nk = 0;
            if (keep.off < size) {
                keep.len = size - keep.off;
                nk = 1;
            }
            int rc = splice(ix, f, p, i0, p->n, &keep, nk);
            if (rc)
                return rc;
        }
        if (!p->n && !p->registered && ngone < MAXGONE)
            gone[ngone++] = p->r;
    }
    for (int k = 0; k < ngone; k++)
        op_drop(ix, gone[k]);   /* frees f when it was the last replica */
    return RMT_OK;
}

static int op_grow(rmt_index *ix, uint64_t o, uint64_t r, int64_t end)
{
    rmt_rep *p = rmt_map_get(&ix->reps, r);
    if (!p || p->o != o)
        return RMT_EINVAL;
    rmt_ofile *f = rmt_map_get(&ix->files, o);
    int64_t top = p->n ? p->e[p->n - 1].off + p->e[p->n - 1].len : 0;
    if (top >= end)
        return RMT_OK;
    rmt_ent add = {top, end - top, 0, RMT_STALE, 0};
    return splice(ix, f, p, p->n, p->n, &add, 1);
}

static void file_drop_if_empty(rmt_index *ix, rmt_ofile *f)
{
    if (f->nrep)
        return;
    rmt_map_del(&ix->files, f->o);
    free(f->reps);
    free(f);
}

static int op_drop(rmt_index *ix, uint64_t r)
{
    rmt_job *j = rmt_map_del(&ix->jobs, r);
    if (j)
        job_free(j);
    rmt_rep *p = rmt_map_del(&ix->reps, r);
    if (!p)
        return RMT_OK;
    rmt_ofile *f = rmt_map_get(&ix->files, p->o);
    if (f) {
        int w = 0;
        for (int k = 0; k < f->nrep; k++)
            if (f->reps[k] != p)
                f->reps[w++] = f->reps[k];
        f->nrep = w;
        f->nunclean -= count_unclean(p, 0, p->n);
        ix->nent -= p->n;
        file_route(f);
        file_drop_if_empty(ix, f);
    }
    rep_free(p);
    ix->regver++;
    return RMT_OK;
}

static char *dup_bytes(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

static int op_register(rmt_index *ix, uint64_t r, uint64_t o, int mode, int route, const char *name, size_t n)
{
    rmt_rep *p;
    int rc = rep_get(ix, o, r, &p);
    if (rc)
        return rc;
    char *nm = dup_bytes(name, n);
    if (!nm)
        return RMT_ENOMEM;
    free(p->name);
    p->name = nm;
    p->registered = 1;
    p->mode = mode;
    p->route = route;
    file_route(rmt_map_get(&ix->files, o));
    ix->regver++;
    return RMT_OK;
}

static int op_job(rmt_index *ix, uint64_t r, int done, const char *spec, size_t n)
{
    rmt_job *j = rmt_map_get(&ix->jobs, r);
    char *sp = dup_bytes(spec, n);
    if (!sp)
        return RMT_ENOMEM;
    if (!j) {
        j = calloc(1, sizeof *j);
        if (!j || rmt_map_put(&ix->jobs, r, j)) {
            free(j);
            free(sp);
            return RMT_ENOMEM;
        }
        j->r = r;
    }
    free(j->spec);
    j->spec = sp;
    j->len = n;
    j->done = done;
    return RMT_OK;
}

/* ------------------------------------------------------------------ records */
#define I64(v) ((int64_t)(v))

/* may this record be applied to the state?  (appenders check before they append; a replay
 * skips a record that fails, which only a damaged journal can contain) */
int rmt_index_check(const rmt_index *ix, const rmt_rec_head *h, const uint64_t *u, const char *bytes)
{
    (void)bytes;
    const rmt_rep *p;
    switch (h->type) {
    case REC_ADD:
        if (!u[0] || !u[1] || u[0] == u[1] || I64(u[2]) < 0 || I64(u[3]) < 0 || I64(u[4]) <= 0
            || I64(u[2]) > INT64_MAX - I64(u[4]) || I64(u[3]) > INT64_MAX - I64(u[4]) || h->a16 >= RMT_NFLAGS)
            return RMT_EINVAL;
        p = rmt_map_get(&ix->reps, u[1]);
        if (p && p->o != u[0])
            return RMT_EINVAL;
        if (rmt_map_get(&ix->reps, u[0]) || rmt_map_get(&ix->files, u[1]))
            return RMT_EINVAL;          /* a replica is never an original, nor the reverse */
        /* a DIRTY entry (a journal rewritten from its state) only where every other copy is STALE */
        if (h->a16 == RMT_DIRTY && !others_stale(rmt_map_get(&ix->files, u[0]), p, I64(u[2]), I64(u[2]) + I64(u[4])))
            return RMT_EINVAL;
        return RMT_OK;
    case REC_MARK:
        if (!u[0] || I64(u[2]) < 0 || I64(u[3]) <= I64(u[2]))
            return RMT_EINVAL;
        if (u[1]) {
            p = rmt_map_get(&ix->reps, u[1]);
            if (!p || p->o != u[0] || !rep_covers(p, I64(u[2]), I64(u[3])))
                return RMT_EINVAL;
        }
        return RMT_OK;
    case REC_SETFLAG:
        if (!u[0] || !u[1] || I64(u[2]) < 0 || I64(u[3]) <= I64(u[2]) || (h->a16 & 0xFF) >= RMT_NFLAGS
            || (h->a16 >> 8) >= RMT_NFLAGS)
            return RMT_EINVAL;
        p = rmt_map_get(&ix->reps, u[1]);
        if (p && p->o != u[0])
            return RMT_EINVAL;
        /* a copy becomes DIRTY only by a write (MARK); to CLEAN / COPYING is applied only
         * outside other replicas' DIRTY bytes (rmt_index_apply) */
        if ((h->a16 >> 8) == RMT_DIRTY)
            return RMT_EINVAL;
        return RMT_OK;
    case REC_TRIM:
        return (!u[0] || I64(u[1]) < 0) ? RMT_EINVAL : RMT_OK;
    case REC_GROW:
        p = rmt_map_get(&ix->reps, u[1]);
        return (!p || p->o != u[0] || I64(u[2]) < 0) ? RMT_EINVAL : RMT_OK;
    case REC_DROP:
        return u[0] ? RMT_OK : RMT_EINVAL;
    case REC_REGISTER:
        if (!u[0] || !u[1] || u[0] == u[1] || (h->a16 & 0xFF) > RMT_FULL || (h->a16 >> 8) > RMT_ROUTE_CHEAPEST)
            return RMT_EINVAL;
        p = rmt_map_get(&ix->reps, u[0]);
        if (p && p->o != u[1])
            return RMT_EINVAL;
        if (rmt_map_get(&ix->reps, u[1]) || rmt_map_get(&ix->files, u[0]))
            return RMT_EINVAL;
        return RMT_OK;
    case REC_JOB:
        return (u[0] && h->a16 <= 1) ? RMT_OK : RMT_EINVAL;
    default:
        return RMT_EINVAL;
    }
}

/* would applying this record change nothing?  (Such records are not appended: a flag
 * change over entries that do not have the old flag, a trim past every entry, a growth
 * that does not grow.  Conservative: 0 when unsure.) */
int rmt_index_noop(const rmt_index *ix, const rmt_rec_head *h, const uint64_t *u)
{
    const rmt_rep *p;
    const rmt_ofile *f;
    switch (h->type) {
    case REC_SETFLAG:
        p = rmt_map_get(&ix->reps, u[1]);
        if (!p)
            return 1;
        for (size_t i = first_after(p, I64(u[2])); i < p->n && p->e[i].off < I64(u[3]); i++)
            if (p->e[i].flag == (h->a16 & 0xFF) && (h->a16 & 0xFF) != (h->a16 >> 8))
                return 0;
        return 1;
    case REC_TRIM:
        f = rmt_map_get(&ix->files, u[0]);
        for (int k = 0; f && k < f->nrep; k++) {
            p = f->reps[k];
            if (p->n && p->e[p->n - 1].off + p->e[p->n - 1].len > I64(u[1]))
                return 0;
        }
        return 1;
    case REC_GROW:
        p = rmt_map_get(&ix->reps, u[1]);
        return p && p->n && p->e[p->n - 1].off + p->e[p->n - 1].len >= I64(u[2]);
    default:
        return 0;
    }
}

int rmt_index_apply(rmt_index *ix, const rmt_rec_head *h, const uint64_t *u, const char *bytes)
{
    switch (h->type) {
    case REC_ADD:
        return op_add(ix, u[0], u[1], I64(u[2]), I64(u[3]), I64(u[4]), h->a16);
    case REC_MARK:
        return op_mark(ix, u[0], u[1], I64(u[2]), I64(u[3]));
    case REC_SETFLAG: {
        rmt_rep *p = rmt_map_get(&ix->reps, u[1]);
        if (!p)
            return RMT_OK;
        rmt_ofile *f = rmt_map_get(&ix->files, u[0]);
        int nf = h->a16 >> 8;
        if (nf == RMT_CLEAN || nf == RMT_COPYING || nf == RMT_FRESH)
            return set_flags_outside_dirty(ix, f, p, I64(u[2]), I64(u[3]), h->a16);
        return set_flags(ix, f, p, I64(u[2]), I64(u[3]), fn_if, h->a16);
    }
    case REC_TRIM:
        return op_trim(ix, u[0], I64(u[1]));
    case REC_GROW:
        return op_grow(ix, u[0], u[1], I64(u[2]));
    case REC_DROP:
        return op_drop(ix, u[0]);
    case REC_REGISTER:
        return op_register(ix, u[0], u[1], h->a16 & 0xFF, h->a16 >> 8, bytes, h->a32);
    case REC_JOB:
        return op_job(ix, u[0], h->a16, bytes, h->a32);
    default:
        return RMT_EINVAL;
    }
}

/* ------------------------------------------------------------------ lookups */
int rmt_index_hits(const rmt_index *ix, uint64_t o, int64_t x, int64_t e)
{
    const rmt_ofile *f = rmt_map_get(&ix->files, o);
    if (!f)
        return 0;
    for (int k = 0; k < f->nrep; k++) {
        const rmt_rep *p = f->reps[k];
        size_t i = first_after(p, x);
        if (i < p->n && p->e[i].off < e)
            return 1;
    }
    return 0;
}

/* the copies covering byte s: (replica, shift, flag) */
int rmt_index_covers(const rmt_index *ix, uint64_t o, int64_t s, rmt_cover *cov, int max)
{
    const rmt_ofile *f = rmt_map_get(&ix->files, o);
    int n = 0;
    if (!f)
        return 0;
    for (int k = 0; k < f->nrep; k++) {
        const rmt_rep *p = f->reps[k];
        size_t i = first_after(p, s);
        if (i < p->n && p->e[i].off <= s) {
            if (n < max)
                cov[n] = (rmt_cover){p->r, p->e[i].delta, p->e[i].flag};
            n++;
        }
    }
    return n;
}

#define MAXREP 64

/* Cut [x, e) into segments of uniform coverage and give each the copy that serves it
 * (CEDA seed 000 §4.6: the redirector sends a request to the replica the RMT names):
 * the DIRTY replica if one covers the segment; else the original when no replica is
 * CLEAN there; else, for route "replica" (CEDA), the CLEAN replica of least file id, and
 * for route "cheapest" (hybrid, CI-LAYOUT seed 002 §5) the caller's choice (choice = 1).
 * Neighbouring segments with the same copy and shift are one.  nseg = 0: no entry
 * overlaps the request (the original serves all of it).  A segment's mark says whether a
 * write to its copy changes flags (the copy is not DIRTY yet, or, for the original, some
 * replica there is not STALE yet). */
int rmt_index_route(const rmt_index *ix, uint64_t o, int64_t x, int64_t e, rmt_seg *segs, int max, int *nseg)
{
    const rmt_ofile *f = rmt_map_get(&ix->files, o);
    *nseg = 0;
    if (!f || x >= e)
        return RMT_OK;
    int nrep = f->nrep < MAXREP ? f->nrep : MAXREP;
    size_t idx[MAXREP];
    int any = 0;
    for (int k = 0; k < nrep; k++) {
        const rmt_rep *p = f->reps[k];
        idx[k] = first_after(p, x);
        if (idx[k] < p->n && p->e[idx[k]].off < e)
            any = 1;
    }
    if (!any)
        return RMT_OK;
    int n = 0;
    int64_t pos = x;
    while (pos < e) {
        int64_t nxt = e;
        const rmt_ent *dirty = NULL, *clean = NULL;
        uint64_t dirty_r = 0, clean_r = 0;
        int nclean = 0, notstale = 0;
        for (int k = 0; k < nrep; k++) {
            const rmt_rep *p = f->reps[k];
            while (idx[k] < p->n && p->e[idx[k]].off + p->e[idx[k]].len <= pos)
                idx[k]++;
            if (idx[k] >= p->n)
                continue;
            const rmt_ent *c = &p->e[idx[k]];
            if (c->off > pos) {
                if (c->off < nxt)
                    nxt = c->off;
                continue;
            }
            if (c->off + c->len < nxt)
                nxt = c->off + c->len;
            if (c->flag != RMT_STALE)
                notstale = 1;
            if (c->flag == RMT_DIRTY) {
                dirty = c;
                dirty_r = p->r;
            } else if (RMT_READABLE_CLEAN(c->flag)) {
                if (!clean) {
                    clean = c;
                    clean_r = p->r;
                }
                nclean++;
            }
        }
        rmt_seg sg = {pos, nxt, 0, 0, 0, 0};
        if (dirty) {
            sg.r = dirty_r;
            sg.delta = dirty->delta;
        } else if (clean && f->cheapest) {
            sg.choice = 1;
            sg.mark = 1;
        } else if (clean) {
            sg.r = clean_r;
            sg.delta = clean->delta;
            sg.mark = 1;
        } else {
            sg.mark = notstale;
        }
        if (n > 0 && !sg.choice && !segs[n - 1].choice && segs[n - 1].r == sg.r && segs[n - 1].delta == sg.delta
            && segs[n - 1].t == sg.s) {
            segs[n - 1].t = sg.t;
            segs[n - 1].mark |= sg.mark;
        } else {
            if (n >= max)
                return RMT_EMORE;
            segs[n++] = sg;
        }
        pos = nxt;
    }
    *nseg = n;
    return RMT_OK;
}
