/* pario: request orders of two-phase collective I/O, and their table (order.h).
 *
 * Each order reproduces the reference implementation pario had in Python (same order, ties
 * included; the numpy reference is now tests/oracles/order.py, and
 * tests/plan/test_order_contract.py / tests/native/test_serve_twophase.py compare against it).
 * Seed 004 = HACIO (He, Wang, Sun, Huang, Xu), /work/shared/seeds/004_159a205ecef4be05.txt.
 */
#include "collective/order.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

typedef struct keyed {   /* one index with its keys, compared in place (no lookups while merging) */
    int64_t k1, k2, k3, i;
} keyed;

static int keyed_less(const keyed *a, const keyed *b)
{
    if (a->k1 != b->k1)
        return a->k1 < b->k1;
    if (a->k2 != b->k2)
        return a->k2 < b->k2;
    return a->k3 < b->k3;
}

int pario_sort_by(int64_t *idx, int64_t n, const int64_t *k1, const int64_t *k2, const int64_t *k3)
{
    if (n < 2)
        return 0;
    keyed *src = malloc((size_t)n * 2 * sizeof *src);
    if (src == NULL)
        return -1;
    keyed *dst = src + n, *mem = src;
    for (int64_t i = 0; i < n; i++) {
        int64_t x = idx[i];
        src[i] = (keyed){ k1 ? k1[x] : 0, k2 ? k2[x] : 0, k3 ? k3[x] : 0, x };
    }
    const int64_t run = 32;   /* insertion sort of short runs (stable), then merges */
    for (int64_t lo = 0; lo < n; lo += run)
        for (int64_t i = lo + 1; i < n && i < lo + run; i++) {
            keyed x = src[i];
            int64_t j = i;
            for (; j > lo && keyed_less(&x, &src[j - 1]); j--)
                src[j] = src[j - 1];
            src[j] = x;
        }
    for (int64_t w = run; w < n; w *= 2) {   /* bottom-up merge sort */
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            int64_t mid = lo + w < n ? lo + w : n;
            int64_t hi = lo + 2 * w < n ? lo + 2 * w : n;
            int64_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)   /* ties: left first (numpy kind="stable" / lexsort) */
                dst[k++] = keyed_less(&src[j], &src[i]) ? src[j++] : src[i++];
            while (i < mid)
                dst[k++] = src[i++];
            while (j < hi)
                dst[k++] = src[j++];
        }
        keyed *t = src;
        src = dst;
        dst = t;
    }
    for (int64_t i = 0; i < n; i++)
        idx[i] = src[i].i;
    free(mem);
    return 0;
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
    int rc = pario_sort_by(ord, nlist, sv, NULL, NULL) ? PARIO_ORDER_ENOMEM : PARIO_ORDER_OK;
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
    int64_t *key = calloc((size_t)(nsel > 0 ? nsel : 1), sizeof *key);   /* calloc: see hacio */
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
    if (pario_sort_by(ord, nsel, key, NULL, NULL)) {
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
static int romcio(const pario_order_in *in, int64_t *order, int64_t *norder, int64_t *twin)
{
    (void)norder;
    (void)twin;
    for (int64_t i = 0; i < in->n; i++)
        order[i] = i;
    return pario_sort_by(order, in->n, in->offset, NULL, NULL) ? PARIO_ORDER_ENOMEM : PARIO_ORDER_OK;
}

/* CACIO (seed 004 §2.2, Fig. 4-5): "each aggregator takes responsibility for the data that
 * resides in a different server in each cycle" -- A1 issues 5, 6, 7, 4 instead of 4, 5, 6, 7.
 * The offset order, then a stable sort by the server's position rotated by the aggregator,
 * (pos - a) mod n: Algorithm 1 lines 22-24 without the type split. */
static int cacio(const pario_order_in *in, int64_t *order, int64_t *norder, int64_t *twin)
{
    int64_t n = in->n;
    if (n > 0 && in->server == NULL)
        return PARIO_ORDER_EINVAL;
    int rc = romcio(in, order, norder, twin);
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
    const pario_order_servers *sv = in->servers;
    const int32_t *list;
    int64_t nlist;
    if (sv != NULL && sv->n > 0) {
        list = sv->server;
        nlist = sv->n;
    } else {
        if ((rc = distinct_servers(all, n, in->server, &dflt, &nlist)) != PARIO_ORDER_OK)
            goto out;
        list = dflt;
    }
    if ((rc = positions(all, n, in->server, list, nlist, rot)) != PARIO_ORDER_OK)
        goto out;
    int64_t cnt = nlist > 0 ? nlist : 1;
    for (int64_t i = 0; i < n; i++)
        rot[i] = mod_pos(rot[i] - in->aggregator, cnt);
    rc = pario_sort_by(order, n, rot, NULL, NULL) ? PARIO_ORDER_ENOMEM : PARIO_ORDER_OK;
out:
    free(all);
    free(rot);
    free(dflt);
    return rc;
}

/* HACIO's Server_number() (Algorithm 1 line 6): the number of every piece's server among
 * the servers of its type, 0..hn-1 for HServers and 0..sn-1 for SServers -- its position
 * among the listed servers of that kind (in the layout's order), or among the distinct
 * servers of the pieces of that kind -- rotated for the aggregator a (lines 15-25: for
 * i = 0..count-1, number = (a + i) % count, so bucket `number` comes at step
 * i = (number - a) mod count) into step[].  tmp: n indices of scratch. */
static int hacio_steps(const pario_order_in *in, int64_t *tmp, int64_t *step)
{
    const pario_order_servers *sv = in->servers;
    int64_t count[2] = { 1, 1 };
    int rc = PARIO_ORDER_OK;
    int32_t *list = NULL;
    for (int t = 0; t < 2 && rc == PARIO_ORDER_OK; t++) {
        int64_t nsel = 0, nlist = 0;
        for (int64_t i = 0; i < in->n; i++)
            if (in->kind[i] == t)
                tmp[nsel++] = i;
        free(list);
        list = NULL;
        if (sv != NULL && sv->n > 0) {
            if (sv->kind == NULL)
                return PARIO_ORDER_EINVAL;
            if ((list = malloc((size_t)sv->n * sizeof *list)) == NULL)
                return PARIO_ORDER_ENOMEM;
            for (int32_t j = 0; j < sv->n; j++)
                if (sv->kind[j] == t)
                    list[nlist++] = sv->server[j];
        } else if ((rc = distinct_servers(tmp, nsel, in->server, &list, &nlist)) != PARIO_ORDER_OK) {
            break;
        }
        count[t] = nlist > 0 ? nlist : 1;
        if (nsel > 0)
            rc = positions(tmp, nsel, in->server, list, nlist, step);
    }
    free(list);
    for (int64_t i = 0; rc == PARIO_ORDER_OK && i < in->n; i++)
        step[i] = mod_pos(step[i] - in->aggregator, count[in->kind[i]]);
    return rc;
}

/* HACIO: seed 004 §3.2 Algorithm 1 (Heterogeneity-Aware Request Reordering). */
static int hacio(const pario_order_in *in, int64_t *order, int64_t *norder, int64_t *twin)
{
    int64_t n = in->n;
    const int64_t *offset = in->offset;
    const int32_t *server = in->server;
    if (n > 0 && (server == NULL || in->kind == NULL))
        return PARIO_ORDER_EINVAL;
    for (int64_t i = 0; i < n; i++)
        if (in->kind[i] != 0 && in->kind[i] != 1)
            return PARIO_ORDER_EKIND;   /* Server_type() returns 0 or 1 (§3.2) */
    if (n == 0)
        return PARIO_ORDER_OK;
    int rc = PARIO_ORDER_OK;
    /* the sort keys are calloc'd: GCC cannot see that the loops below fill every entry (a
     * permutation's inverse) and warns when pario_sort_by, inlined, reads them */
    int64_t *walk = malloc((size_t)n * sizeof *walk);
    int64_t *pk = calloc((size_t)n, sizeof *pk);       /* proc key */
    int64_t *wpos = calloc((size_t)n, sizeof *wpos);   /* position of each piece in the walk */
    int64_t *sk = calloc((size_t)n, sizeof *sk);       /* server key, then the bucket's step */
    int64_t *kk = malloc((size_t)n * sizeof *kk);     /* kind key */
    int64_t *tmp = malloc((size_t)n * sizeof *tmp);
    char *keep = malloc((size_t)n);
    if (!walk || !pk || !wpos || !sk || !kk || !tmp || !keep) {
        rc = PARIO_ORDER_ENOMEM;
        goto out;
    }
    /* Lines 2-13: walk req[0..p-1] (processes in rank order) and, inside one process, its
     * requests in offset order, appending each to T[type][number]. */
    for (int64_t i = 0; i < n; i++) {
        walk[i] = i;
        pk[i] = in->proc ? in->proc[i] : 0;
        sk[i] = server[i];
        kk[i] = in->kind[i];
    }
    if (pario_sort_by(walk, n, pk, offset, NULL)) {
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
    if (pario_sort_by(tmp, n, offset, sk, wpos)) {
        rc = PARIO_ORDER_ENOMEM;
        goto out;
    }
    for (int64_t i = 1; i < n; i++) {
        int64_t p = tmp[i], q = tmp[i - 1];
        if (offset[q] == offset[p] && server[q] == server[p]) {
            keep[p] = 0;
            if (twin)
                twin[p] = twin[q];
        }
    }
    if ((rc = hacio_steps(in, tmp, sk)) != PARIO_ORDER_OK)
        goto out;
    /* Lines 15-25: the buckets appended type 0 first, inside a type by step; a stable sort of
     * the walk by (type, step) keeps the walk order inside a bucket. */
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++)
        if (keep[walk[i]])
            order[m++] = walk[i];
    if (pario_sort_by(order, m, kk, sk, NULL)) {
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
    return rc;
}

/* ------------------------------------------------------------------ the table */

const pario_order_def pario_orders[] = {
    { "romcio", romcio },   /* row 0: PARIO_ORDER_ROMCIO */
    { "cacio", cacio },
    { "hacio", hacio },
    { NULL, NULL }
};

int pario_order_count(void)
{
    int n = 0;
    while (pario_orders[n].name != NULL)
        n++;
    return n;
}

int pario_order_find(const char *name)
{
    for (int i = 0; name != NULL && pario_orders[i].name != NULL; i++)
        if (strcasecmp(name, pario_orders[i].name) == 0)
            return i;
    return -1;
}

const char *pario_order_name(int method)
{
    return method >= 0 && method < pario_order_count() ? pario_orders[method].name : "?";
}

int pario_request_order(int method, const pario_order_in *in, int64_t *order, int64_t *norder, int64_t *twin)
{
    if (norder == NULL)
        return PARIO_ORDER_EINVAL;
    *norder = 0;
    if (in == NULL || in->n < 0 || in->aggregator < 0 || method < 0 || method >= pario_order_count())
        return PARIO_ORDER_EINVAL;
    if (in->n > 0 && (in->offset == NULL || order == NULL))
        return PARIO_ORDER_EINVAL;
    const pario_order_servers *sv = in->servers;
    if (sv != NULL && (sv->n < 0 || (sv->n > 0 && sv->server == NULL)))
        return PARIO_ORDER_EINVAL;
    *norder = in->n;
    if (twin)
        for (int64_t i = 0; i < in->n; i++)
            twin[i] = i;
    int rc = pario_orders[method].fn(in, order, norder, twin);
    if (rc != PARIO_ORDER_OK)
        *norder = 0;
    return rc;
}
