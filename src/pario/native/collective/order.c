/* pario serve: request orders of two-phase collective I/O (order.h).
 *
 * Each function reproduces pario.plan.collective exactly (same order, ties included):
 * the Python functions are the reference and tests/test_serve_twophase.py compares the two.
 * Seed 004 = HACIO (He, Wang, Sun, Huang, Xu), /work/shared/seeds/004_159a205ecef4be05.txt.
 */
#include "collective/order.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

int pario_order_parse(const char *name)
{
    if (name == NULL)
        return -1;
    if (strcasecmp(name, "romcio") == 0)
        return PARIO_ORDER_ROMCIO;
    if (strcasecmp(name, "cacio") == 0)
        return PARIO_ORDER_CACIO;
    if (strcasecmp(name, "hacio") == 0)
        return PARIO_ORDER_HACIO;
    return -1;
}

const char *pario_order_name(int method)
{
    switch (method) {
    case PARIO_ORDER_ROMCIO: return "romcio";
    case PARIO_ORDER_CACIO: return "cacio";
    case PARIO_ORDER_HACIO: return "hacio";
    default: return "?";
    }
}

const char *pario_order_strerror(int code)
{
    switch (code) {
    case PARIO_ORDER_OK: return "ok";
    case PARIO_ORDER_EINVAL: return "collective order: bad argument";
    case PARIO_ORDER_ENOMEM: return "collective order: out of memory";
    case PARIO_ORDER_ESERVER: return "collective order: a piece lies on a server which is not in the server list";
    case PARIO_ORDER_EKIND: return "collective order: server kind must be 0 (HDD) or 1 (SSD)";
    default: return "collective order: unknown error";
    }
}

/* ------------------------------------------------------------------ stable index sort */

int pario_sort_index(int64_t *idx, int64_t n, pario_index_cmp cmp, const void *ctx)
{
    if (n < 2)
        return 0;
    int64_t *tmp = malloc((size_t)n * sizeof *tmp);
    if (tmp == NULL)
        return -1;
    int64_t *src = idx, *dst = tmp;
    for (int64_t w = 1; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            int64_t mid = lo + w < n ? lo + w : n;
            int64_t hi = lo + 2 * w < n ? lo + 2 * w : n;
            int64_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                dst[k++] = cmp(ctx, src[j], src[i]) < 0 ? src[j++] : src[i++];   /* ties: left first */
            while (i < mid)
                dst[k++] = src[i++];
            while (j < hi)
                dst[k++] = src[j++];
        }
        int64_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != idx)
        memcpy(idx, src, (size_t)n * sizeof *idx);
    free(tmp);
    return 0;
}

static int cmp_i64(int64_t a, int64_t b) { return (a > b) - (a < b); }

/* ------------------------------------------------------------------ keys */

typedef struct keys {
    const int64_t *k1;   /* primary (may be NULL) */
    const int64_t *k2;   /* secondary (may be NULL) */
    const int64_t *k3;
} keys;

static int cmp_keys(const void *ctx, int64_t a, int64_t b)
{
    const keys *k = ctx;
    int c;
    if (k->k1 && (c = cmp_i64(k->k1[a], k->k1[b])) != 0)
        return c;
    if (k->k2 && (c = cmp_i64(k->k2[a], k->k2[b])) != 0)
        return c;
    if (k->k3 && (c = cmp_i64(k->k3[a], k->k3[b])) != 0)
        return c;
    return 0;   /* stable sort: input order breaks the tie (numpy kind="stable" / lexsort) */
}

static int sort_by(int64_t *idx, int64_t n, const int64_t *k1, const int64_t *k2, const int64_t *k3)
{
    keys k = { k1, k2, k3 };
    return pario_sort_index(idx, n, cmp_keys, &k);
}

static int64_t mod_pos(int64_t x, int64_t m) /* x mod m in [0, m), m > 0 (Python %) */
{
    int64_t r = x % m;
    return r < 0 ? r + m : r;
}

/* Position of every piece's server in `list` (len nlist) -> pos[]; a server missing from a
 * non-empty list is PARIO_ORDER_ESERVER (pario.plan.collective._positions raises).  An
 * empty list maps every piece to 0 (as _positions does).  sel: the pieces to map (nsel). */
static int positions(const int64_t *sel, int64_t nsel, const int32_t *server, const int32_t *list,
                     int64_t nlist, int64_t *pos)
{
    if (nlist == 0) {
        for (int64_t i = 0; i < nsel; i++)
            pos[sel[i]] = 0;
        return PARIO_ORDER_OK;
    }
    /* sorted (server, position) pairs: binary search per piece */
    int64_t *ord = malloc((size_t)nlist * sizeof *ord);
    int64_t *sv = malloc((size_t)nlist * sizeof *sv);
    if (ord == NULL || sv == NULL) {
        free(ord);
        free(sv);
        return PARIO_ORDER_ENOMEM;
    }
    for (int64_t i = 0; i < nlist; i++) {
        ord[i] = i;
        sv[i] = list[i];
    }
    int rc = sort_by(ord, nlist, sv, NULL, NULL) ? PARIO_ORDER_ENOMEM : PARIO_ORDER_OK;
    for (int64_t i = 0; rc == PARIO_ORDER_OK && i < nsel; i++) {
        int64_t s = server[sel[i]], lo = 0, hi = nlist;
        while (lo < hi) {   /* first sorted entry with server > s */
            int64_t mid = lo + (hi - lo) / 2;
            if (sv[ord[mid]] <= s)
                lo = mid + 1;
            else
                hi = mid;
        }
        /* the entry before it is the last position of s (a listed twice server takes its
         * last position, as the dict in _positions does) */
        if (lo == 0 || sv[ord[lo - 1]] != s)
            rc = PARIO_ORDER_ESERVER;
        else
            pos[sel[i]] = ord[lo - 1];
    }
    free(ord);
    free(sv);
    return rc;
}

/* The distinct servers of the selected pieces, sorted (np.unique): *out malloc'd. */
static int distinct_servers(const int64_t *sel, int64_t nsel, const int32_t *server, int32_t **out, int64_t *nout)
{
    int32_t *v = malloc((size_t)(nsel > 0 ? nsel : 1) * sizeof *v);
    int64_t *ord = malloc((size_t)(nsel > 0 ? nsel : 1) * sizeof *ord);
    int64_t *key = malloc((size_t)(nsel > 0 ? nsel : 1) * sizeof *key);
    if (v == NULL || ord == NULL || key == NULL) {
        free(v);
        free(ord);
        free(key);
        return PARIO_ORDER_ENOMEM;
    }
    for (int64_t i = 0; i < nsel; i++) {
        ord[i] = i;
        key[i] = server[sel[i]];
    }
    if (sort_by(ord, nsel, key, NULL, NULL)) {
        free(v);
        free(ord);
        free(key);
        return PARIO_ORDER_ENOMEM;
    }
    int64_t m = 0;
    for (int64_t i = 0; i < nsel; i++)
        if (m == 0 || v[m - 1] != key[ord[i]])
            v[m++] = (int32_t)key[ord[i]];
    free(ord);
    free(key);
    *out = v;
    *nout = m;
    return PARIO_ORDER_OK;
}

/* ------------------------------------------------------------------ the orders */

/* ROMCIO: logical offset order, stable (seed 004 §2.2: "Traditional strategy naively
 * selects the requests according to the request logical address", Fig. 3). */
static int romcio(int64_t n, const int64_t *offset, int64_t *order)
{
    for (int64_t i = 0; i < n; i++)
        order[i] = i;
    return sort_by(order, n, offset, NULL, NULL) ? PARIO_ORDER_ENOMEM : PARIO_ORDER_OK;
}

/* CACIO (seed 004 §2.2, Fig. 4-5): "each aggregator takes responsibility for the data that
 * resides in a different server in each cycle" -- A1 issues 5, 6, 7, 4 instead of 4, 5, 6, 7.
 * pario.plan.collective.cacio_order: the offset order, then a stable sort by the server's
 * position rotated by the aggregator, (pos - a) mod n: Algorithm 1 lines 22-24 without the
 * type split. */
static int cacio(int64_t n, const int64_t *offset, const int32_t *server, int64_t a,
                 const pario_order_servers *sv, int64_t *order)
{
    int rc = romcio(n, offset, order);
    if (rc != PARIO_ORDER_OK || n == 0)
        return rc;
    int64_t *all = malloc((size_t)n * sizeof *all);
    int64_t *rot = malloc((size_t)n * sizeof *rot);
    int32_t *dflt = NULL;
    if (all == NULL || rot == NULL) {
        rc = PARIO_ORDER_ENOMEM;
        goto out;
    }
    for (int64_t i = 0; i < n; i++)
        all[i] = i;
    const int32_t *list;
    int64_t nlist;
    if (sv != NULL && sv->n > 0) {
        list = sv->server;
        nlist = sv->n;
    } else {
        if ((rc = distinct_servers(all, n, server, &dflt, &nlist)) != PARIO_ORDER_OK)
            goto out;
        list = dflt;
    }
    if ((rc = positions(all, n, server, list, nlist, rot)) != PARIO_ORDER_OK)
        goto out;
    int64_t cnt = nlist > 0 ? nlist : 1;
    for (int64_t i = 0; i < n; i++)
        rot[i] = mod_pos(rot[i] - a, cnt);
    rc = sort_by(order, n, rot, NULL, NULL) ? PARIO_ORDER_ENOMEM : PARIO_ORDER_OK;
out:
    free(all);
    free(rot);
    free(dflt);
    return rc;
}

/* HACIO: seed 004 §3.2 Algorithm 1 (Heterogeneity-Aware Request Reordering). */
static int hacio(int64_t n, const int64_t *offset, const int32_t *server, const int32_t *kind,
                 const int32_t *proc, int64_t a, const pario_order_servers *sv, int64_t *order,
                 int64_t *norder, int64_t *twin)
{
    int rc = PARIO_ORDER_OK;
    *norder = 0;
    if (n == 0)
        return PARIO_ORDER_OK;
    for (int64_t i = 0; i < n; i++)
        if (kind[i] != 0 && kind[i] != 1)
            return PARIO_ORDER_EKIND;   /* Server_type() returns 0 or 1 (§3.2) */
    int64_t *walk = malloc((size_t)n * sizeof *walk);
    int64_t *pk = malloc((size_t)n * sizeof *pk);     /* proc key */
    int64_t *wpos = malloc((size_t)n * sizeof *wpos); /* position of each piece in the walk */
    int64_t *sk = malloc((size_t)n * sizeof *sk);     /* server key / later rotated number */
    int64_t *kk = malloc((size_t)n * sizeof *kk);     /* kind key */
    int64_t *tmp = malloc((size_t)n * sizeof *tmp);
    char *keep = malloc((size_t)n);
    int32_t *dflt = NULL;
    if (!walk || !pk || !wpos || !sk || !kk || !tmp || !keep) {
        rc = PARIO_ORDER_ENOMEM;
        goto out;
    }
    /* Lines 2-13: walk req[0..p-1] (processes in rank order) and, inside one process, its
     * requests -- in offset order, as pario.plan.collective.hacio_order does
     * (np.lexsort((arange, offset, proc))) -- appending each to T[type][number]. */
    for (int64_t i = 0; i < n; i++) {
        walk[i] = i;
        pk[i] = proc ? proc[i] : 0;
        sk[i] = server[i];
        kk[i] = kind[i];
    }
    if (sort_by(walk, n, pk, offset, NULL)) {
        rc = PARIO_ORDER_ENOMEM;
        goto out;
    }
    for (int64_t i = 0; i < n; i++)
        wpos[walk[i]] = i;
    /* Line 7: "if (req[i].of[j] not in T[type][number])": a piece with the same offset on the
     * same server (hence the same bucket) is already in T; it is not appended again.  Group
     * the pieces by (offset, server) and keep the first of each group in walk order. */
    for (int64_t i = 0; i < n; i++) {
        tmp[i] = i;
        keep[i] = 1;
    }
    if (sort_by(tmp, n, offset, sk, wpos)) {
        rc = PARIO_ORDER_ENOMEM;
        goto out;
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t p = tmp[i];
        if (i > 0 && offset[tmp[i - 1]] == offset[p] && server[tmp[i - 1]] == server[p]) {
            keep[p] = 0;
            if (twin)
                twin[p] = twin[tmp[i - 1]];
        } else if (twin) {
            twin[p] = p;
        }
    }
    /* Server_number() (line 6): the server's number among the servers of its type, 0..hn-1
     * for HServers and 0..sn-1 for SServers: its position among the listed servers of that
     * kind (Placement.kind_servers), or among the distinct servers of the pieces of that kind. */
    int64_t count[2] = { 1, 1 };
    for (int t = 0; t < 2; t++) {
        int64_t nsel = 0;
        for (int64_t i = 0; i < n; i++)
            if (kind[i] == t)
                tmp[nsel++] = i;
        const int32_t *list;
        int64_t nlist = 0;
        free(dflt);
        dflt = NULL;
        if (sv != NULL && sv->n > 0) {
            if (sv->kind == NULL) {
                rc = PARIO_ORDER_EINVAL;
                goto out;
            }
            dflt = malloc((size_t)sv->n * sizeof *dflt);
            if (dflt == NULL) {
                rc = PARIO_ORDER_ENOMEM;
                goto out;
            }
            for (int32_t j = 0; j < sv->n; j++)
                if (sv->kind[j] == t)
                    dflt[nlist++] = sv->server[j];
        } else if ((rc = distinct_servers(tmp, nsel, server, &dflt, &nlist)) != PARIO_ORDER_OK) {
            goto out;
        }
        list = dflt;
        count[t] = nlist > 0 ? nlist : 1;
        if (nsel > 0 && (rc = positions(tmp, nsel, server, list, nlist, sk)) != PARIO_ORDER_OK)
            goto out;
    }
    /* Lines 15-25: for type = 0, 1 (count = hn, sn): for i = 0..count-1, number = (a + i) %
     * count, append T[type][number] to S.  Bucket `number` comes at step i = (number - a) mod
     * count; a stable sort of the walk by (type, step) keeps the walk order inside a bucket. */
    for (int64_t i = 0; i < n; i++)
        sk[i] = mod_pos(sk[i] - a, count[kind[i]]);
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++)
        if (keep[walk[i]])
            order[m++] = walk[i];
    if (sort_by(order, m, kk, sk, NULL)) {
        rc = PARIO_ORDER_ENOMEM;
        goto out;
    }
    *norder = m;
out:
    free(walk);
    free(pk);
    free(wpos);
    free(sk);
    free(kk);
    free(tmp);
    free(keep);
    free(dflt);
    return rc;
}

int pario_request_order(int method, int64_t n, const int64_t *offset, const int32_t *server,
                        const int32_t *kind, const int32_t *proc, int64_t aggregator,
                        const pario_order_servers *servers, int64_t *order, int64_t *norder,
                        int64_t *twin)
{
    if (norder == NULL || n < 0 || aggregator < 0)
        return PARIO_ORDER_EINVAL;
    *norder = 0;
    if (n > 0 && (offset == NULL || order == NULL))
        return PARIO_ORDER_EINVAL;
    if (servers != NULL && servers->n < 0)
        return PARIO_ORDER_EINVAL;
    if (servers != NULL && servers->n > 0 && servers->server == NULL)
        return PARIO_ORDER_EINVAL;
    int rc;
    switch (method) {
    case PARIO_ORDER_ROMCIO:
        rc = romcio(n, offset, order);
        break;
    case PARIO_ORDER_CACIO:
        if (n > 0 && server == NULL)
            return PARIO_ORDER_EINVAL;
        rc = cacio(n, offset, server, aggregator, servers, order);
        break;
    case PARIO_ORDER_HACIO:
        if (n > 0 && (server == NULL || kind == NULL))
            return PARIO_ORDER_EINVAL;
        return hacio(n, offset, server, kind, proc, aggregator, servers, order, norder, twin);
    default:
        return PARIO_ORDER_EINVAL;
    }
    if (rc == PARIO_ORDER_OK) {
        *norder = n;
        if (twin)
            for (int64_t i = 0; i < n; i++)
                twin[i] = i;
    }
    return rc;
}
