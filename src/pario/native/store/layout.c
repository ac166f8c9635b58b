/* pario serve: layout JSON → pxs_layout, byte-count functions, pieces and sub-requests
 * (layout.h).  The arithmetic is pario.layout.types' (SPEC §1) and pario.store.pieces'. */
#define _GNU_SOURCE
#include "store/layout.h"

#include "store/meta.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ERR(...) (snprintf(err, errlen, __VA_ARGS__), PXS_EINVAL)

/* ------------------------------------------------------------------ sizes */
int pxs_parse_size(const pxs_json *v, int64_t *out)
{
    if (!v)
        return PXS_EINVAL;
    if (v->type == PXS_JNUM) {
        if (v->is_int) {
            if (v->i < 0)
                return PXS_EINVAL;
            *out = v->i;
            return PXS_OK;
        }
        /* pario.units.parse_size(str(65536.0)): a whole number written with a fraction */
        if (!(v->d >= 0) || v->d >= 9223372036854775807.0 || floor(v->d) != v->d)
            return PXS_EINVAL;
        *out = (int64_t)v->d;
        return PXS_OK;
    }
    if (v->type != PXS_JSTR || strlen(v->s) != v->slen)
        return PXS_EINVAL;
    /* ^\s*(\d+(\.\d+)?)\s*([kmgtpe]?)(i?b)?\s*$, case-insensitive, exact (pario.units) */
    const char *p = v->s;
    while (isspace((unsigned char)*p))
        p++;
    unsigned __int128 ip = 0, frac = 0, den = 1;
    int nd = 0;
    while (isdigit((unsigned char)*p)) {
        if (++nd > 40)
            return PXS_EINVAL;
        ip = ip * 10 + (unsigned)(*p++ - '0');
    }
    if (!nd)
        return PXS_EINVAL;
    if (*p == '.') {
        p++;
        int nf = 0;
        while (isdigit((unsigned char)*p)) {
            if (++nf > 18)
                return PXS_EINVAL;
            frac = frac * 10 + (unsigned)(*p++ - '0');
            den *= 10;
        }
        if (!nf)
            return PXS_EINVAL;
    }
    while (isspace((unsigned char)*p))
        p++;
    unsigned shift = 0;
    switch (tolower((unsigned char)*p)) {
    case 'k': shift = 10; p++; break;
    case 'm': shift = 20; p++; break;
    case 'g': shift = 30; p++; break;
    case 't': shift = 40; p++; break;
    case 'p': shift = 50; p++; break;
    case 'e': shift = 60; p++; break;
    default: break;
    }
    if (tolower((unsigned char)*p) == 'i' && tolower((unsigned char)p[1]) == 'b')
        p += 2;
    else if (tolower((unsigned char)*p) == 'b')
        p++;
    while (isspace((unsigned char)*p))
        p++;
    if (*p)
        return PXS_EINVAL;
    if (ip > ((unsigned __int128)1 << 64))
        return PXS_EINVAL;
    unsigned __int128 mult = (unsigned __int128)1 << shift;
    unsigned __int128 num = (ip * den + frac) * mult;
    if (num % den)
        return PXS_EINVAL;           /* not a whole number of bytes */
    unsigned __int128 val = num / den;
    if (val > (unsigned __int128)INT64_MAX)
        return PXS_EINVAL;
    *out = (int64_t)val;
    return PXS_OK;
}

/* ------------------------------------------------------------------ construction */
void pxs_layout_free(pxs_layout *l)
{
    if (!l)
        return;
    free(l->srv);
    free(l->kw);
    free(l->kpref);
    free(l->gn);
    free(l->gfirst);
    free(l->gpref);
    for (int k = 0; k < l->nr; k++)
        pxs_layout_free(l->rl[k]);
    free(l->rl);
    free(l->rs);
    free(l->re);
    free(l->pos_of);
    free(l->rbase);
    free(l->eo);
    free(l->el);
    free(l->eloc);
    free(l->es);
    free(l->edf);
    pxs_layout_free(l->def);
    free(l);
}

typedef struct {
    const char *const *names;
    int n;
    char *err;
    size_t errlen;
} ctx;

static int server_of(const ctx *c, const pxs_json *v, int *out)
{
    if (v && v->type == PXS_JSTR) {
        for (int i = 0; i < c->n; i++)
            if (strlen(c->names[i]) == v->slen && memcmp(c->names[i], v->s, v->slen) == 0) {
                *out = i;
                return PXS_OK;
            }
        snprintf(c->err, c->errlen, "layout: unknown server '%.100s'", v->s);
        return PXS_EINVAL;
    }
    snprintf(c->err, c->errlen, "layout: 'servers' must be a list of server names");
    return PXS_EINVAL;
}

/* a list of server names (NULL: every server of the store); unique */
static int servers_list(const ctx *c, const pxs_json *v, int **out, int *n, const char *what)
{
    char *err = c->err;
    size_t errlen = c->errlen;
    if (v && v->type != PXS_JARR)
        return ERR("layout: 'servers' must be a list of server names");
    int m = v ? (int)v->n : c->n;
    if (m <= 0)
        return ERR("%s: needs at least one server", what);
    int *s = malloc((size_t)m * sizeof *s);
    if (!s)
        return PXS_ENOMEM;
    for (int i = 0; i < m; i++) {
        if (!v)
            s[i] = i;
        else if (server_of(c, v->v[i], &s[i])) {
            free(s);
            return PXS_EINVAL;
        }
        for (int k = 0; k < i; k++)
            if (s[k] == s[i]) {
                free(s);
                return ERR("%s: a server appears twice", what);
            }
    }
    *out = s;
    *n = m;
    return PXS_OK;
}

static int finish_striped(pxs_layout *l, const int *servers, const int64_t *stripes, int n, char *err, size_t errlen)
{
    int64_t W = 0;
    for (int i = 0; i < n; i++) {
        if (stripes[i] < 0)
            return ERR("striped layout: stripe sizes must be >= 0 and not all 0");
        if (stripes[i] > PXS_LAYOUT_MAX - W)
            return ERR("striped layout: a round is beyond 2^52 bytes (4 PiB), the largest a layout may use");
        W += stripes[i];
    }
    if (W <= 0)
        return ERR("striped layout: stripe sizes must be >= 0 and not all 0");
    l->kind = PXS_STRIPED;
    l->srv = malloc((size_t)n * sizeof *l->srv);
    l->kw = malloc((size_t)n * sizeof *l->kw);
    l->kpref = malloc((size_t)n * sizeof *l->kpref);
    if (!l->srv || !l->kw || !l->kpref)
        return PXS_ENOMEM;
    int64_t acc = 0;
    for (int i = 0; i < n; i++) {
        if (stripes[i] == 0)
            continue;
        l->srv[l->nsrv] = servers[i];
        l->kw[l->nsrv] = stripes[i];
        l->kpref[l->nsrv] = acc;
        acc += stripes[i];
        l->nsrv++;
    }
    l->W = W;
    return PXS_OK;
}

static int parse_rec(const ctx *c, const pxs_json *d, int depth, pxs_layout **out);

static int set_pos_of(pxs_layout *l, int nall)
{
    l->nall = nall;
    l->pos_of = malloc((size_t)(nall > 0 ? nall : 1) * sizeof *l->pos_of);
    if (!l->pos_of)
        return PXS_ENOMEM;
    for (int i = 0; i < nall; i++)
        l->pos_of[i] = -1;
    for (int i = 0; i < l->nsrv; i++)
        l->pos_of[l->srv[i]] = i;
    return PXS_OK;
}

static int cmp_idx_off(const void *a, const void *b, void *arg);

/* type 'fixed' (pario.layout.FixedStripe): one stripe size on every server */
static int parse_fixed(const ctx *c, const pxs_json *d, pxs_layout *l)
{
    char *err = c->err;
    size_t errlen = c->errlen;
    int rc;
    int64_t stripe;
    int *servers = NULL, n = 0;
    const pxs_json *sv = pxs_json_get(d, "stripe");
    if (!sv)
        return ERR("layout JSON of type 'fixed' is missing key 'stripe'");
    if (pxs_parse_size(sv, &stripe))
        return ERR("bad layout 'fixed': bad stripe size");
    if ((rc = servers_list(c, pxs_json_get(d, "servers"), &servers, &n, "striped layout")))
        return rc;
    int64_t *st = malloc((size_t)n * sizeof *st);
    if (!st) {
        free(servers);
        return PXS_ENOMEM;
    }
    for (int i = 0; i < n; i++)
        st[i] = stripe;
    rc = finish_striped(l, servers, st, n, err, errlen);
    free(servers);
    free(st);
    return rc;
}

/* types 'striped' / 'varied' (pario.layout.VariedStripe): a stripe size per server */
static int parse_striped(const ctx *c, const pxs_json *d, const pxs_json *type, pxs_layout *l)
{
    char *err = c->err;
    size_t errlen = c->errlen;
    int rc;
    int *servers = NULL, n = 0;
    const pxs_json *sl = pxs_json_get(d, "stripes");
    if (!sl)
        return ERR("layout JSON of type '%s' is missing key 'stripes'", type->s);
    if (sl->type != PXS_JARR)
        return ERR("layout: 'stripes' must be a list");
    if ((rc = servers_list(c, pxs_json_get(d, "servers"), &servers, &n, "striped layout")))
        return rc;
    if ((size_t)n != sl->n) {
        free(servers);
        return ERR("striped layout: needs one stripe size per server");
    }
    int64_t *st = malloc((size_t)n * sizeof *st);
    if (!st) {
        free(servers);
        return PXS_ENOMEM;
    }
    rc = PXS_OK;
    for (int i = 0; i < n && !rc; i++)
        if (pxs_parse_size(sl->v[i], &st[i]))
            rc = ERR("bad layout '%s': bad stripe size", type->s);
    if (!rc)
        rc = finish_striped(l, servers, st, n, err, errlen);
    free(servers);
    free(st);
    return rc;
}

/* type 'grouped' (pario.layout.Grouped2D): server groups, one stripe; G = a round's bytes */
static int parse_grouped(const ctx *c, const pxs_json *d, pxs_layout *l)
{
    char *err = c->err;
    size_t errlen = c->errlen;
    int rc;
    const pxs_json *gs = pxs_json_get(d, "groups"), *sv = pxs_json_get(d, "stripe");
    if (!gs)
        return ERR("layout JSON of type 'grouped' is missing key 'groups'");
    if (gs->type != PXS_JARR || gs->n == 0)
        return ERR("layout: 'groups' must be a non-empty list of server-name lists");
    if (!sv)
        return ERR("layout JSON of type 'grouped' is missing key 'stripe'");
    if (pxs_parse_size(sv, &l->stripe) || l->stripe <= 0)
        return ERR("2-D layout: stripe must be > 0");
    l->kind = PXS_GROUPED;
    l->ng = (int)gs->n;
    l->gn = calloc(gs->n, sizeof *l->gn);
    l->gfirst = calloc(gs->n, sizeof *l->gfirst);
    l->gpref = calloc(gs->n, sizeof *l->gpref);
    if (!l->gn || !l->gfirst || !l->gpref)
        return PXS_ENOMEM;
    int64_t acc = 0;
    for (int k = 0; k < l->ng; k++) {
        int *g = NULL, n = 0;
        if (gs->v[k]->type != PXS_JARR)
            return ERR("layout: 'groups' must be a non-empty list of server-name lists");
        if ((rc = servers_list(c, gs->v[k], &g, &n, "2-D layout group")))
            return rc;
        int *ns = realloc(l->srv, (size_t)(l->nsrv + n) * sizeof *ns);
        if (!ns) {
            free(g);
            return PXS_ENOMEM;
        }
        l->srv = ns;
        for (int i = 0; i < n; i++) {
            for (int q = 0; q < l->nsrv; q++)
                if (l->srv[q] == g[i]) {
                    free(g);
                    return ERR("2-D layout: a server appears twice");
                }
            l->srv[l->nsrv + i] = g[i];
        }
        free(g);
        l->gfirst[k] = l->nsrv;
        l->gn[k] = n;
        l->nsrv += n;
        l->gpref[k] = acc;
        if (l->stripe > (PXS_LAYOUT_MAX - acc) / n)
            return ERR("2-D layout: a round is beyond 2^52 bytes (4 PiB), the largest a layout may use");
        acc += l->stripe * n;
    }
    l->G = acc;
    return PXS_OK;
}

/* type 'regions' (pario.layout.Regions): contiguous regions with striped or 2-D layouts,
 * the servers in first-seen order and each region's per-server bases */
static int parse_regions(const ctx *c, const pxs_json *d, int depth, pxs_layout *l)
{
    char *err = c->err;
    size_t errlen = c->errlen;
    int rc;
    const pxs_json *rg = pxs_json_get(d, "regions");
    if (!rg)
        return ERR("layout JSON of type 'regions' is missing key 'regions'");
    if (rg->type != PXS_JARR || rg->n == 0)
        return ERR("region layout: needs at least one region");
    l->kind = PXS_REGIONS;
    l->nr = (int)rg->n;
    l->rs = calloc(rg->n, sizeof *l->rs);
    l->re = calloc(rg->n, sizeof *l->re);
    l->rl = calloc(rg->n, sizeof *l->rl);
    if (!l->rs || !l->re || !l->rl)
        return PXS_ENOMEM;
    for (int k = 0; k < l->nr; k++) {
        const pxs_json *r = rg->v[k];
        const pxs_json *s = pxs_json_get(r, "start"), *e = pxs_json_get(r, "end"), *ly = pxs_json_get(r, "layout");
        if (r->type != PXS_JOBJ || !s || !ly)
            return ERR("layout JSON of type 'regions' is missing key '%s'", !s ? "start" : "layout");
        if (pxs_parse_size(s, &l->rs[k]))
            return ERR("bad layout 'region': bad size");
        if (!e || e->type == PXS_JNULL)
            l->re[k] = INT64_MAX;
        else if (pxs_parse_size(e, &l->re[k]) || l->re[k] == INT64_MAX)
            return ERR("bad layout 'region': bad size");
        if ((rc = parse_rec(c, ly, depth + 1, &l->rl[k])))
            return rc;
        if (l->rl[k]->kind == PXS_REGIONS || l->rl[k]->kind == PXS_EXTENTS)
            return ERR("region layout: a region's layout must be striped or 2-D");
        if (l->re[k] <= l->rs[k])
            return ERR("region layout: a region must have end > start");
        if (l->rs[k] > PXS_LAYOUT_MAX || (l->re[k] != INT64_MAX && l->re[k] > PXS_LAYOUT_MAX))
            return ERR("region layout: a region bound is beyond 2^52 bytes (4 PiB), the largest a layout may use");
    }
    if (l->rs[0] != 0)
        return ERR("region layout: the first region must start at offset 0");
    for (int k = 0; k + 1 < l->nr; k++)
        if (l->re[k] == INT64_MAX || l->re[k] != l->rs[k + 1])
            return ERR("region layout: regions must be contiguous and only the last may be open-ended");
    /* servers_used: first seen, over the regions in order */
    for (int k = 0; k < l->nr; k++)
        for (int i = 0; i < l->rl[k]->nsrv; i++) {
            int s = l->rl[k]->srv[i], seen = 0;
            for (int q = 0; q < l->nsrv; q++)
                seen |= l->srv[q] == s;
            if (seen)
                continue;
            int *ns = realloc(l->srv, (size_t)(l->nsrv + 1) * sizeof *ns);
            if (!ns)
                return PXS_ENOMEM;
            l->srv = ns;
            l->srv[l->nsrv++] = s;
        }
    if ((rc = set_pos_of(l, c->n)))
        return rc;
    /* bases(): per region, server → bytes the earlier regions put there */
    l->rbase = calloc((size_t)l->nr * (size_t)(c->n > 0 ? c->n : 1), sizeof *l->rbase);
    int64_t *cnt = malloc((size_t)(l->nsrv + 1) * sizeof *cnt);
    if (!l->rbase || !cnt) {
        free(cnt);
        return PXS_ENOMEM;
    }
    for (int k = 0; k < l->nr; k++) {
        if (k > 0)
            memcpy(&l->rbase[(size_t)k * c->n], &l->rbase[(size_t)(k - 1) * c->n], (size_t)c->n * sizeof *cnt);
        if (k == 0 || l->re[k - 1] == INT64_MAX)
            continue;
        const pxs_layout *pl = l->rl[k - 1];
        pxs_layout_counts(pl, l->re[k - 1] - l->rs[k - 1], cnt);
        for (int i = 0; i < pl->nsrv; i++)
            l->rbase[(size_t)k * c->n + pl->srv[i]] += cnt[i];
    }
    free(cnt);
    return PXS_OK;
}

/* type 'extents' (pario.layout.ExtentMap): rows [offset, length, server, local, datafile]
 * sorted by offset, and an optional default layout */
/* An extent map's rows (CEDA seed 000 §4.5; any order: sorted here, stably, by offset) into
 * l: every row checked (length > 0, ends below 2^52, server in [0, nservers), data file in
 * [0, 10^6]) and no two extents overlapping. */
static int extents_rows(pxs_layout *l, size_t n, const int64_t *o, const int64_t *ln, const int64_t *sv,
                        const int64_t *lc, const int64_t *df, int nservers, char *err, size_t errlen)
{
    l->kind = PXS_EXTENTS;
    l->ne = n;
    size_t m = n ? n : 1;
    size_t *ix = malloc(m * sizeof *ix);
    l->eo = malloc(m * 8);
    l->el = malloc(m * 8);
    l->eloc = malloc(m * 8);
    l->es = malloc(m * sizeof(int));
    l->edf = malloc(m * sizeof(int));
    int rc = PXS_OK;
    if (!ix || !l->eo || !l->el || !l->eloc || !l->es || !l->edf)
        rc = PXS_ENOMEM;
    for (size_t i = 0; !rc && i < n; i++) {
        ix[i] = i;
        if (ln[i] <= 0 || o[i] < 0 || lc[i] < 0)
            rc = ERR("extent map: extents need length > 0 and non-negative offsets/servers");
        else if (o[i] > PXS_LAYOUT_MAX - ln[i] || lc[i] > PXS_LAYOUT_MAX - ln[i])
            rc = ERR("extent map: an extent ends beyond 2^52 bytes (4 PiB), the largest a layout may use");
        else if (sv[i] < 0 || sv[i] >= nservers)
            rc = ERR("extent map: server index out of range");
        else if (df[i] < 0 || df[i] > 1000000)
            rc = ERR("extent map: bad data file number");
    }
    if (!rc) {
        /* stable sort by offset (numpy argsort kind="stable") */
        qsort_r(ix, n, sizeof *ix, cmp_idx_off, (void *)o);
        for (size_t i = 0; i < n; i++) {
            size_t k = ix[i];
            l->eo[i] = o[k];
            l->el[i] = ln[k];
            l->eloc[i] = lc[k];
            l->es[i] = (int)sv[k];
            l->edf[i] = (int)df[k];
        }
        for (size_t i = 1; i < n && !rc; i++)
            if (l->eo[i] < l->eo[i - 1] + l->el[i - 1])
                rc = ERR("extent map: extents overlap");
    }
    free(ix);
    return rc;
}

/* An extent map's default layout (NULL: none; l owns it from here) and servers_used: the
 * extents' servers (first seen), then the default's. */
static int extents_default(pxs_layout *l, pxs_layout *def, char *err, size_t errlen)
{
    l->def = def;
    if (def && def->kind == PXS_EXTENTS)
        return ERR("extent map: the default layout cannot itself be an extent map");
    l->srv = malloc((size_t)(l->ne + (def ? (size_t)def->nsrv : 0) + 1) * sizeof *l->srv);
    if (!l->srv)
        return PXS_ENOMEM;
    for (size_t i = 0; i < l->ne; i++) {
        int seen = 0;
        for (int q = 0; q < l->nsrv && !seen; q++)
            seen = l->srv[q] == l->es[i];
        if (!seen)
            l->srv[l->nsrv++] = l->es[i];
    }
    for (int i = 0; def && i < def->nsrv; i++) {
        int seen = 0;
        for (int q = 0; q < l->nsrv && !seen; q++)
            seen = l->srv[q] == def->srv[i];
        if (!seen)
            l->srv[l->nsrv++] = def->srv[i];
    }
    return PXS_OK;
}

/* type 'extents': rows [offset, length, server (name or index), local, data file (default 1)] */
static int parse_extents(const ctx *c, const pxs_json *d, int depth, pxs_layout *l)
{
    char *err = c->err;
    size_t errlen = c->errlen;
    const pxs_json *rows = pxs_json_get(d, "extents");
    if (!rows)
        return ERR("layout JSON of type 'extents' is missing key 'extents'");
    if (rows->type != PXS_JARR)
        return ERR("layout: 'extents' must be a list of [offset, length, server, local, datafile]");
    size_t n = rows->n, m = n ? n : 1;
    int64_t *col = malloc(5 * m * sizeof *col);
    if (!col)
        return PXS_ENOMEM;
    int64_t *o = col, *ln = col + m, *sv = col + 2 * m, *lc = col + 3 * m, *df = col + 4 * m;
    int rc = PXS_OK;
    for (size_t i = 0; !rc && i < n; i++) {
        const pxs_json *r = rows->v[i], *s;
        int srv = 0;
        if (r->type != PXS_JARR || r->n < 4)
            rc = ERR("layout JSON of type 'extents' is malformed (a row needs offset, length, server, local)");
        else if (pxs_parse_size(r->v[0], &o[i]) || pxs_parse_size(r->v[1], &ln[i]) || pxs_parse_size(r->v[3], &lc[i]))
            rc = ERR("bad layout 'extents': bad offset, length or local offset");
        else if ((s = r->v[2])->type == PXS_JSTR)
            rc = server_of(c, s, &srv) ? PXS_EINVAL : PXS_OK;
        else if (s->type == PXS_JNUM && s->is_int && s->i >= 0 && s->i < c->n)
            srv = (int)s->i;
        else
            rc = ERR("extent map: server index out of range");
        sv[i] = srv;
        df[i] = 1;
        if (!rc && r->n > 4) {
            const pxs_json *f = r->v[4];
            if (f->type != PXS_JNUM || !f->is_int || f->i < 0 || f->i > 1000000)
                rc = ERR("extent map: bad data file number");
            else
                df[i] = f->i;
        }
    }
    if (!rc)
        rc = extents_rows(l, n, o, ln, sv, lc, df, c->n, err, errlen);
    free(col);
    if (rc)
        return rc;
    pxs_layout *def = NULL;
    const pxs_json *dj = pxs_json_get(d, "default");
    if (dj && dj->type != PXS_JNULL && (rc = parse_rec(c, dj, depth + 1, &def)))
        return rc;
    return extents_default(l, def, err, errlen);
}

static int parse_kind(const ctx *c, const pxs_json *d, int depth, pxs_layout *l)
{
    char *err = c->err;
    size_t errlen = c->errlen;
    const pxs_json *type = pxs_json_get(d, "type");
    if (pxs_json_streq(type, "fixed"))
        return parse_fixed(c, d, l);
    if (pxs_json_streq(type, "striped") || pxs_json_streq(type, "varied"))
        return parse_striped(c, d, type, l);
    if (pxs_json_streq(type, "grouped"))
        return parse_grouped(c, d, l);
    if (pxs_json_streq(type, "regions"))
        return parse_regions(c, d, depth, l);
    if (pxs_json_streq(type, "extents"))
        return parse_extents(c, d, depth, l);
    if (!type)
        return ERR("layout JSON must be an object with a 'type' key");
    return ERR("unknown layout type '%.60s' (striped, fixed, grouped, regions, extents)",
               type->type == PXS_JSTR ? type->s : "?");
}

static int cmp_idx_off(const void *a, const void *b, void *arg)
{
    const int64_t *o = arg;
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    if (o[i] != o[j])
        return o[i] < o[j] ? -1 : 1;
    return i < j ? -1 : (i > j);
}

static int parse_rec(const ctx *c, const pxs_json *d, int depth, pxs_layout **out)
{
    char *err = c->err;
    size_t errlen = c->errlen;
    *out = NULL;
    if (depth > 8)
        return ERR("layout JSON nested too deeply");
    if (!d || d->type != PXS_JOBJ || !pxs_json_get(d, "type"))
        return ERR("layout JSON must be an object with a 'type' key");
    pxs_layout *l = calloc(1, sizeof *l);
    if (!l)
        return PXS_ENOMEM;
    int rc = parse_kind(c, d, depth, l);
    if (!rc && !l->pos_of)
        rc = set_pos_of(l, c->n);
    if (rc) {
        pxs_layout_free(l);
        return rc;
    }
    *out = l;
    return PXS_OK;
}

int pxs_layout_parse(const pxs_json *j, const char *const *names, int nservers, pxs_layout **out, char *err,
                     size_t errlen)
{
    ctx c = {names, nservers, err, errlen};
    return parse_rec(&c, j, 0, out);
}

int pxs_layout_parse_text(const char *text, const char *const *names, int nservers, pxs_layout **out, char *err,
                          size_t errlen)
{
    pxs_json *j = NULL;
    char jerr[160];
    *out = NULL;
    int rc = pxs_json_parse(text, strlen(text), &j, jerr, sizeof jerr);
    if (rc)
        return rc == -2 ? PXS_ENOMEM : ERR("layout is not JSON (%s)", jerr);
    rc = pxs_layout_parse(j, names, nservers, out, err, errlen);
    pxs_json_free(j);
    return rc;
}

int pxs_layout_parse_indexed(const char *text, int nservers, pxs_layout **out, char *err, size_t errlen)
{
    *out = NULL;
    if (nservers < 1 || nservers > 1 << 20)
        return ERR("a layout over %d servers", nservers);
    char **names = calloc((size_t)nservers, sizeof *names);
    char *store = malloc((size_t)nservers * 12);
    int rc = PXS_ENOMEM;
    if (names && store) {
        for (int i = 0; i < nservers; i++) {
            names[i] = store + (size_t)i * 12;
            snprintf(names[i], 12, "%d", i);
        }
        rc = pxs_layout_parse_text(text, (const char *const *)names, nservers, out, err, errlen);
    }
    free(names);
    free(store);
    return rc;
}

int pxs_layout_extents(size_t n, const int64_t *off, const int64_t *len, const int64_t *server, const int64_t *local,
                       const int64_t *datafile, int nservers, pxs_layout *def, pxs_layout **out, char *err,
                       size_t errlen)
{
    *out = NULL;
    pxs_layout *l = calloc(1, sizeof *l);
    if (!l) {
        pxs_layout_free(def);
        return PXS_ENOMEM;
    }
    int rc = extents_rows(l, n, off, len, server, local, datafile, nservers, err, errlen);
    if (rc)
        pxs_layout_free(def);
    else
        rc = extents_default(l, def, err, errlen);
    if (!rc)
        rc = set_pos_of(l, nservers);
    if (rc) {
        pxs_layout_free(l);
        return rc;
    }
    *out = l;
    return PXS_OK;
}

/* ------------------------------------------------------------------ byte-count functions */
static inline int64_t clip(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* C_i(x) = (x div W)·w_i + clip(x mod W − P_i, 0, w_i) (SPEC §1) */
static inline int64_t striped_count(int64_t x, int64_t W, int64_t w, int64_t P)
{
    return (x / W) * w + clip(x % W - P, 0, w);
}

int pxs_layout_counts(const pxs_layout *l, int64_t x, int64_t *c)
{
    switch (l->kind) {
    case PXS_STRIPED:
        for (int i = 0; i < l->nsrv; i++)
            c[i] = striped_count(x, l->W, l->kw[i], l->kpref[i]);
        return PXS_OK;
    case PXS_GROUPED: /* CI-LAYOUT 2-D (seed 002 §3): the group's virtual file, striped inside */
        for (int k = 0; k < l->ng; k++) {
            int m = l->gn[k];
            int64_t v = striped_count(x, l->G, l->stripe * m, l->gpref[k]);
            for (int j = 0; j < m; j++)
                c[l->gfirst[k] + j] = striped_count(v, l->stripe * m, l->stripe, l->stripe * j);
        }
        return PXS_OK;
    case PXS_REGIONS: {
        int64_t tmp[256], *t = tmp;
        int most = 0;
        for (int k = 0; k < l->nr; k++)
            most = l->rl[k]->nsrv > most ? l->rl[k]->nsrv : most;
        if (most > 256 && !(t = malloc((size_t)most * sizeof *t)))
            return PXS_ENOMEM;
        for (int i = 0; i < l->nsrv; i++)
            c[i] = 0;
        for (int k = 0; k < l->nr; k++) {
            const pxs_layout *r = l->rl[k];
            pxs_layout_counts(r, clip(x, l->rs[k], l->re[k]) - l->rs[k], t);
            for (int i = 0; i < r->nsrv; i++)
                c[l->pos_of[r->srv[i]]] += t[i];
        }
        if (t != tmp)
            free(t);
        return PXS_OK;
    }
    default:
        return PXS_EINVAL;   /* an extent map has no byte-count function */
    }
}

/* ------------------------------------------------------------------ pieces */
static int push_piece(pxs_pieces *o, int server, int df, int64_t local, int64_t len, int64_t off)
{
    if (o->n && o->p[o->n - 1].server == server && o->p[o->n - 1].datafile == df
        && o->p[o->n - 1].local + o->p[o->n - 1].len == local && o->p[o->n - 1].off + o->p[o->n - 1].len == off) {
        o->p[o->n - 1].len += len;   /* continues the last piece on both sides */
        return PXS_OK;
    }
    if (o->n == o->cap) {
        size_t nc = o->cap ? o->cap * 2 : 64;
        pxs_piece *p = realloc(o->p, nc * sizeof *p);
        if (!p)
            return PXS_ENOMEM;
        o->p = p;
        o->cap = nc;
    }
    o->p[o->n++] = (pxs_piece){server, df, local, len, off};
    return PXS_OK;
}

/* index of the last prefix <= q */
static inline int upper(const int64_t *pref, int n, int64_t q)
{
    int lo = 0, hi = n;      /* first index with pref > q */
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (pref[mid] <= q)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo - 1;
}

/* the pieces of [x, e) of layout l, logical offsets reported + shift, server-local offsets
 * + base[server] (a region's base; NULL: none) */
static int pieces_rec(const pxs_layout *l, int64_t x, int64_t e, int64_t shift, const int64_t *base, pxs_pieces *o,
                      char *err, size_t errlen)
{
    int rc = PXS_OK;
    int64_t p = x;
    switch (l->kind) {
    case PXS_STRIPED:
        while (p < e && !rc) {
            int64_t r = p / l->W, q = p % l->W;
            int i = upper(l->kpref, l->nsrv, q);
            int64_t end = r * l->W + l->kpref[i] + l->kw[i];
            if (end > e)
                end = e;
            rc = push_piece(o, l->srv[i], 0, r * l->kw[i] + q - l->kpref[i] + (base ? base[l->srv[i]] : 0), end - p,
                            p + shift);
            p = end;
        }
        return rc;
    case PXS_GROUPED:
        while (p < e && !rc) {
            int64_t R = p / l->G, q = p % l->G;
            int k = upper(l->gpref, l->ng, q);
            int64_t m = l->gn[k], s = l->stripe;
            int64_t v = R * s * m + q - l->gpref[k];   /* offset in group k's virtual file */
            int64_t r2 = v / (s * m), q2 = v % (s * m);
            int64_t j = q2 / s, within = q2 % s;
            int64_t end = p + s - within;
            if (end > e)
                end = e;
            int sv = l->srv[l->gfirst[k] + j];
            rc = push_piece(o, sv, 0, r2 * s + within + (base ? base[sv] : 0), end - p, p + shift);
            p = end;
        }
        return rc;
    case PXS_REGIONS:
        for (int k = 0; k < l->nr && !rc; k++) {
            int64_t a = x > l->rs[k] ? x : l->rs[k], b = e < l->re[k] ? e : l->re[k];
            if (a >= b)
                continue;
            /* a region's data on a server follows the earlier regions' data (PSA seed 001 §3.3) */
            rc = pieces_rec(l->rl[k], a - l->rs[k], b - l->rs[k], shift + l->rs[k], &l->rbase[(size_t)k * l->nall], o,
                            err, errlen);
        }
        return rc;
    case PXS_EXTENTS: {
        /* CEDA's extent map (seed 000 §4.5): covered parts to their extent, gaps to the default */
        size_t lo = 0, hi = l->ne;   /* first extent ending after p */
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (l->eo[mid] + l->el[mid] <= p)
                lo = mid + 1;
            else
                hi = mid;
        }
        size_t i = lo;
        while (p < e && !rc) {
            if (i < l->ne && l->eo[i] <= p) {
                int64_t t = l->eo[i] + l->el[i];
                if (t > e)
                    t = e;
                rc = push_piece(o, l->es[i], l->edf[i], l->eloc[i] + (p - l->eo[i]), t - p, p + shift);
                p = t;
                i++;
                continue;
            }
            int64_t t = i < l->ne && l->eo[i] < e ? l->eo[i] : e;
            if (!l->def)
                return ERR("extent map has no default layout and does not cover bytes [%lld, %lld)", (long long)p,
                           (long long)t);
            rc = pieces_rec(l->def, p, t, shift, NULL, o, err, errlen);
            p = t;
        }
        return rc;
    }
    default:
        return ERR("not a layout");
    }
}

int pxs_layout_pieces(const pxs_layout *l, int64_t x, int64_t L, pxs_pieces *out, char *err, size_t errlen)
{
    if (x < 0 || L < 0 || L > INT64_MAX - x)
        return ERR("a request [%lld, +%lld) is beyond 2^63-1 bytes or negative", (long long)x, (long long)L);
    if (L == 0)
        return PXS_OK;
    return pieces_rec(l, x, x + L, 0, NULL, out, err, errlen);
}

/* ------------------------------------------------------------------ map_requests */
static int push_sub(pxs_subs *o, int64_t req, int server, int df, int64_t local, int64_t len)
{
    if (o->n == o->cap) {
        size_t nc = o->cap ? o->cap * 2 : 64;
        pxs_sub *s = realloc(o->s, nc * sizeof *s);
        if (!s)
            return PXS_ENOMEM;
        o->s = s;
        o->cap = nc;
    }
    o->s[o->n++] = (pxs_sub){req, server, df, local, len};
    return PXS_OK;
}

/* _map_monotone: one row per server position with C_j(x+L) − C_j(x) > 0, local C_j(x) */
static int map_monotone(const pxs_layout *l, int64_t req, int64_t x, int64_t e, pxs_subs *o)
{
    int64_t s0[64], s1[64], *c0 = s0, *c1 = s1;
    if (l->nsrv > 64) {
        c0 = malloc((size_t)l->nsrv * 8);
        c1 = malloc((size_t)l->nsrv * 8);
    }
    int rc = (!c0 || !c1) ? PXS_ENOMEM : PXS_OK;
    if (!rc)
        rc = pxs_layout_counts(l, x, c0);
    if (!rc)
        rc = pxs_layout_counts(l, e, c1);
    for (int i = 0; !rc && i < l->nsrv; i++)
        if (c1[i] != c0[i])
            rc = push_sub(o, req, l->srv[i], 0, c0[i], c1[i] - c0[i]);
    if (c0 != s0)
        free(c0);
    if (c1 != s1)
        free(c1);
    return rc;
}

int pxs_layout_map(const pxs_layout *l, int64_t req, int64_t x, int64_t L, pxs_subs *out, char *err, size_t errlen)
{
    if (x < 0 || L < 0 || L > INT64_MAX - x)
        return ERR("a request [%lld, +%lld) is beyond 2^63-1 bytes or negative", (long long)x, (long long)L);
    int64_t e = x + L;
    if (L == 0)
        return PXS_OK;
    if (l->kind != PXS_EXTENTS)
        return map_monotone(l, req, x, e, out);
    /* _map_extents: the covered parts (extent order), then the gaps under the default */
    size_t lo = 0, hi = l->ne;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (l->eo[mid] + l->el[mid] <= x)
            lo = mid + 1;
        else
            hi = mid;
    }
    int rc = PXS_OK;
    for (size_t i = lo; i < l->ne && l->eo[i] < e && !rc; i++) {
        int64_t s = x > l->eo[i] ? x : l->eo[i], t = e < l->eo[i] + l->el[i] ? e : l->eo[i] + l->el[i];
        rc = push_sub(out, req, l->es[i], l->edf[i], l->eloc[i] + (s - l->eo[i]), t - s);
    }
    int64_t p = x;
    for (size_t i = lo; p < e && !rc; i++) {
        int64_t t = i < l->ne && l->eo[i] < e ? l->eo[i] : e;
        if (t > p) {
            if (!l->def)
                return ERR("extent map has no default layout and does not cover bytes [%lld, %lld) of request %lld",
                           (long long)p, (long long)t, (long long)req);
            rc = map_monotone(l->def, req, p, t, out);
        }
        if (i >= l->ne || l->eo[i] >= e)
            break;
        p = l->eo[i] + l->el[i];
    }
    return rc;
}

int pxs_layout_next_piece(const pxs_layout *l, pxs_piece_cursor *cur, int64_t x, int64_t L, int64_t cap,
                          const pxs_piece **out)
{
    const pxs_piece *p = cur->next < cur->pcs.n ? &cur->pcs.p[cur->next] : NULL;
    if (!p || p->off != x || p->len > L) {
        char err[PXS_ERRLEN];
        cur->pcs.n = 0;
        cur->next = 0;
        int rc = pxs_layout_pieces(l, x, cap > 0 && L > cap ? cap : L, &cur->pcs, err, sizeof err);
        if (rc != PXS_OK || cur->pcs.n == 0)
            return rc != PXS_OK ? rc : PXS_EINVAL;
        p = &cur->pcs.p[0];
    }
    cur->next++;
    *out = p;
    return PXS_OK;
}
