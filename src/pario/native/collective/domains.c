/* pario: file domains of two-phase collective I/O (call.h, steps 2-5).
 *
 * 2. The aggregators (a plan's list, else cb_nodes as ROMIO chooses them, from the nodes of
 *    the ranks: MPI_Comm_split_type on the first call on a communicator, then cached on
 *    it) and the file domains: fd = ceil((max_end - min_st) / naggr), domain k = [min_st +
 *    k fd, min_st + (k+1) fd), not aligned to anything (ROMIO's ADIOI_Calc_file_domains
 *    without striping alignment; seed 004 §2.2: "the required file region is evenly
 *    assigned to two file domains").  Who talks to whom follows from the Allgather alone.
 * 3. This rank's extents cut at domain boundaries, grouped by domain (ADIOI_Calc_my_req).
 * 4. An aggregator's pieces cut at server boundaries (the layout callback: Server_type()
 *    and Server_number() of seed 004 Algorithm 1, lines 5-6) and ordered by the plan's
 *    order (order.h: ROMCIO, CACIO or HACIO), the aggregator's index as `a`.
 * 5. The cycles: the ordered pieces fill the cb_buffer_size buffer one after the other;
 *    cycle c gets the c-th buffer-full (seed 004 §2.1: "if the I/O size is too large to fit
 *    in a single buffer, ROMIO will perform the two-phase I/O in several cycles"); a piece
 *    that crosses a buffer boundary is split.  The aggregator's buffer holds each source's
 *    segments of a cycle back to back.
 */
#include "collective/call.h"

#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A rank's node: its leader (the lowest rank sharing its memory) and its index on the node
 * (pario.mpi.twophase.choose_aggregators: Split_type(SHARED, key=rank)).  Collective. */
static int node_pair(MPI_Comm comm, int rank, int pair[2])
{
    MPI_Comm node;
    if (PMPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node) != MPI_SUCCESS)
        return PARIO_TP_EMPI;
    pair[0] = rank;
    int rc = PMPI_Bcast(&pair[0], 1, MPI_INT, 0, node);
    if (rc == MPI_SUCCESS)
        rc = PMPI_Comm_rank(node, &pair[1]);
    PMPI_Comm_free(&node);
    return rc == MPI_SUCCESS ? PARIO_TP_OK : PARIO_TP_EMPI;
}

static int cmp_tp_agg_key(const void *a, const void *b)
{
    const tp_agg_key *x = a, *y = b;
    int c = tp_cmp_i64(x->local, y->local);
    if (c == 0)
        c = tp_cmp_i64(x->node, y->node);
    return c ? c : tp_cmp_i64(x->rank, y->rank);
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* ROMIO's choice from every rank's (leader, index on the node) pair (leader[stride r],
 * local[stride r]): ranks sorted by (index on the node, node, rank) -- cb_config_list "*:*"
 * round robin -- the first cb_nodes (default one per node), sorted.  keys: size entries of
 * scratch; no allocation, so no rank can fail here alone.  -1: a pair that cannot be. */
static int pick_aggregators(int size, const int *leader, const int *local, int stride, int cb_nodes,
                            tp_agg_key *keys, int *ranks, int *n)
{
    int nleaders = 0;
    for (int r = 0; r < size; r++) {
        int l = leader[stride * r];
        if (l < 0 || l > r || local[stride * r] < 0)
            return -1;
        keys[r].below = nleaders;   /* leaders below r */
        nleaders += l == r;
    }
    for (int r = 0; r < size; r++) {
        keys[r].local = local[stride * r];
        keys[r].node = keys[leader[stride * r]].below;   /* the node's index among the sorted leaders */
        keys[r].rank = r;
    }
    int want = cb_nodes > 0 ? cb_nodes : nleaders;
    want = want < 1 ? 1 : (want > size ? size : want);
    qsort(keys, (size_t)size, sizeof *keys, cmp_tp_agg_key);
    for (int i = 0; i < want; i++)
        ranks[i] = keys[i].rank;
    qsort(ranks, (size_t)want, sizeof *ranks, cmp_int);
    *n = want;
    return 0;
}

/* The aggregators with every rank's pair gathered here (info: 2 size ints, keys: size).
 * Every rank must take part in the Allgather: a local failure travels in it, so that every
 * rank returns the same code.  pair: this rank's, for the cache. */
static int choose_with(MPI_Comm comm, int size, int rank, int cb_nodes, int *info, tp_agg_key *keys,
                       int *ranks, int *n, int pair[2])
{
    int err = node_pair(comm, rank, pair);
    int sendv[2] = { err ? -1 : pair[0], err ? -1 : pair[1] };
    int dummy[2];
    if (PMPI_Allgather(sendv, 2, MPI_INT, info ? info : dummy, info ? 2 : 0, MPI_INT, comm) != MPI_SUCCESS)
        err = PARIO_TP_EMPI;
    if (err == PARIO_TP_OK && (info == NULL || keys == NULL))
        err = PARIO_TP_ENOMEM;
    for (int r = 0; err == PARIO_TP_OK && r < size; r++)
        if (info[2 * r] < 0)
            err = PARIO_TP_EMPI;   /* another rank failed: every rank says so */
    if (err == PARIO_TP_OK && pick_aggregators(size, info, info + 1, 2, cb_nodes, keys, ranks, n) != 0)
        err = PARIO_TP_EMPI;
    return err;
}

int pario_tp_choose_aggregators(MPI_Comm comm, int cb_nodes, int *ranks, int *n)
{
    if (comm == MPI_COMM_NULL || ranks == NULL || n == NULL)
        return PARIO_TP_EINVAL;
    int size, rank;
    if (PMPI_Comm_size(comm, &size) != MPI_SUCCESS || PMPI_Comm_rank(comm, &rank) != MPI_SUCCESS)
        return PARIO_TP_EMPI;
    int *info = malloc((size_t)size * 2 * sizeof *info);
    tp_agg_key *keys = malloc((size_t)size * sizeof *keys);
    int pair[2];
    int err = choose_with(comm, size, rank, cb_nodes, info, keys, ranks, n, pair);
    free(info);
    free(keys);
    return err;
}

/* The node pair of this rank, cached on the communicator (an attribute) after the first
 * collective call: the nodes do not change, and MPI_Comm_split_type is a collective that
 * costs as much as the rest of a small call.  The pair travels in the first Allgather with a
 * flag, so every rank knows whether every rank has it: all take the cached path, or all
 * split again (a rank that could not cache, e.g. short of memory, just costs a split). */
static int tp_keyval = MPI_KEYVAL_INVALID;
static pthread_once_t tp_keyval_once = PTHREAD_ONCE_INIT;

static int tp_node_delete(MPI_Comm comm, int keyval, void *val, void *extra)
{
    (void)comm;
    (void)keyval;
    (void)extra;
    free(val);
    return MPI_SUCCESS;
}

static void tp_keyval_create(void)
{
    if (PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, tp_node_delete, &tp_keyval, NULL) != MPI_SUCCESS)
        tp_keyval = MPI_KEYVAL_INVALID;
}

void pario_tp_node_cached(MPI_Comm comm, int pair[2])
{
    pair[0] = pair[1] = -1;
    pthread_once(&tp_keyval_once, tp_keyval_create);
    void *val = NULL;
    int flag = 0;
    if (tp_keyval != MPI_KEYVAL_INVALID && PMPI_Comm_get_attr(comm, tp_keyval, &val, &flag) == MPI_SUCCESS && flag) {
        pair[0] = ((int *)val)[0];
        pair[1] = ((int *)val)[1];
    }
}

static void node_cache(MPI_Comm comm, const int pair[2])
{
    int *val;
    if (tp_keyval == MPI_KEYVAL_INVALID || (val = malloc(2 * sizeof *val)) == NULL)
        return;
    val[0] = pair[0];
    val[1] = pair[1];
    if (PMPI_Comm_set_attr(comm, tp_keyval, val) != MPI_SUCCESS)
        free(val);
}
/* Step 2: the aggregators and the file domains, and who talks to whom (from the Allgather
 * alone: rank r sends its requests to the owners of the domains its range [st, en) meets,
 * one message each, possibly without a piece; an aggregator hears from exactly those
 * ranks, so no Alltoall of counts is needed).  The same outcome on every rank. */
int pario_tp_file_domains(tp_call *t)
{
    const pario_tp_params *p = t->p;
    int size = t->size;
    if (p->naggregators > 0) {
        memcpy(t->aggs, p->aggregators, (size_t)p->naggregators * sizeof *t->aggs);
        t->naggr = p->naggregators;
    } else if (t->cached) {
        for (int r = 0; r < size; r++) {
            t->info[2 * r] = (int)t->all[TP_ALL * r + 5];
            t->info[2 * r + 1] = (int)t->all[TP_ALL * r + 6];
        }
        if (pick_aggregators(size, t->info, t->info + 1, 2, p->cb_nodes, t->keys, t->aggs, &t->naggr) != 0)
            t->err = PARIO_TP_EMPI;   /* cannot happen: checked in step 1, on every rank alike */
    } else {
        t->err = choose_with(t->comm, size, t->rank, p->cb_nodes, t->info, t->keys, t->aggs, &t->naggr, t->pair);
        if (t->err == PARIO_TP_OK)
            node_cache(t->comm, t->pair);
    }
    if (t->err != PARIO_TP_OK)
        return t->err;   /* the same on every rank (choose_with agrees in its Allgather) */
    for (int r = 0; r < size; r++)
        t->agg_of[r] = -1;
    for (int k = 0; k < t->naggr; k++)
        t->agg_of[t->aggs[k]] = k;
    int64_t min_st = t->min_st, fd = tp_max(1, (t->max_end - min_st + t->naggr - 1) / t->naggr);
    t->fd = fd;
    t->my_agg = t->agg_of[t->rank];
    t->klo = t->st >= 0 ? (t->st - min_st) / fd : 0;
    t->khi = t->st >= 0 ? (t->en - 1 - min_st) / fd : -1;
    for (int64_t k = t->klo; k <= t->khi; k++)
        t->eagg[t->naggs_mine++] = t->aggs[k];
    for (int r = 0; t->my_agg >= 0 && r < size; r++) {
        const int64_t *a = &t->all[TP_ALL * r];
        if (a[1] >= 0 && (a[0] - min_st) / fd <= t->my_agg && t->my_agg <= (a[1] - 1 - min_st) / fd) {
            t->esrc[t->nsrc++] = r;
            t->self_src |= r == t->rank;
        }
    }
    /* the aggregators in rank order (the order their replies are received in) */
    qsort(t->eagg, (size_t)t->naggs_mine, sizeof *t->eagg, cmp_int);
    return PARIO_TP_OK;
}

/* ------------------------------------------------------------------ 3. this rank's requests */

/* This rank's extents cut at domain boundaries, grouped by domain (a counting sort, stable:
 * a domain's pieces in the rank's data order), and the request message of every domain met:
 * {error, pieces} + (offset, length) per piece, at meta + 2 (dstart[k] + k - klo). */
void pario_tp_my_requests(tp_call *t)
{
    int64_t np = 0, min_st = t->min_st, fd = t->fd;
    for (int64_t i = 0; i < t->n; i++)
        if (t->len[i] > 0)
            np += (t->off[i] + t->len[i] - 1 - min_st) / fd - (t->off[i] - min_st) / fd + 1;
    t->np = np;
    if (2 * np + 2 > INT_MAX)
        t->err = PARIO_TP_ETOOBIG;   /* int counts of the messages */
    if (t->err != PARIO_TP_OK)
        return;
    int64_t klo = t->klo, nd = t->khi - klo + 1;
    t->po = malloc((size_t)(np + 1) * 3 * sizeof *t->po);
    t->dstart = calloc((size_t)t->naggr + 1, sizeof *t->dstart);
    t->meta = malloc((size_t)(np + nd + 1) * 2 * sizeof *t->meta);
    if (!t->po || !t->dstart || !t->meta) {
        t->err = PARIO_TP_ENOMEM;
        return;
    }
    int64_t *po = t->po, *dstart = t->dstart, *meta = t->meta;
    t->pl = po + (np + 1);
    t->ps = po + 2 * (np + 1);
    for (int64_t i = 0; i < t->n; i++)
        for (int64_t o = t->off[i], e = t->off[i] + t->len[i]; o < e;) {
            int64_t k = (o - min_st) / fd, b = tp_min(e, min_st + (k + 1) * fd);
            dstart[k + 1]++;
            o = b;
        }
    for (int k = 0; k < t->naggr; k++)
        dstart[k + 1] += dstart[k];
    for (int64_t k = klo; k <= t->khi; k++) {   /* domain k's message: header at 2 (dstart[k] + k - klo) */
        meta[2 * (dstart[k] + k - klo)] = PARIO_TP_OK;
        meta[2 * (dstart[k] + k - klo) + 1] = dstart[k + 1] - dstart[k];
    }
    int64_t *fill = t->acnt;   /* scratch: naggr <= size */
    memcpy(fill, dstart, (size_t)t->naggr * sizeof *fill);
    int64_t sp = 0;
    for (int64_t i = 0; i < t->n; i++) {
        for (int64_t o = t->off[i], e = t->off[i] + t->len[i]; o < e;) {
            int64_t k = (o - min_st) / fd, b = tp_min(e, min_st + (k + 1) * fd);
            int64_t j = fill[k]++, at = 2 * (j + k - klo + 1);
            po[j] = o;
            t->pl[j] = b - o;
            t->ps[j] = sp + (o - t->off[i]);
            meta[at] = o;
            meta[at + 1] = b - o;
            o = b;
        }
        sp += t->len[i];
    }
}

/* ------------------------------------------------------------------ 4. the aggregator's pieces */

/* growable arrays of the aggregator's unit pieces, in one block */
typedef struct units {
    int64_t n, cap;
    int64_t *off, *len, *rp;
    int32_t *src, *server, *kind;
    void *block;
} units;

static int units_grow(units *u)
{
    int64_t cap = u->cap ? 2 * u->cap : 64;
    int64_t *w = malloc((size_t)cap * 3 * (sizeof(int64_t) + sizeof(int32_t)));
    if (w == NULL)
        return PARIO_TP_ENOMEM;
    int32_t *h = (int32_t *)(w + 3 * cap);
    int64_t *const old64[3] = { u->off, u->len, u->rp };
    int32_t *const old32[3] = { u->src, u->server, u->kind };
    for (int i = 0; i < 3 && u->n > 0; i++) {
        memcpy(w + i * cap, old64[i], (size_t)u->n * sizeof *w);
        memcpy(h + i * cap, old32[i], (size_t)u->n * sizeof *h);
    }
    free(u->block);
    u->block = w;
    u->off = w;
    u->len = w + cap;
    u->rp = w + 2 * cap;
    u->src = h;
    u->server = h + cap;
    u->kind = h + 2 * cap;
    u->cap = cap;
    return PARIO_TP_OK;
}

static int units_push(units *u, int64_t off, int64_t len, int64_t rp, int32_t src, int32_t server, int32_t kind)
{
    if (u->n == u->cap && units_grow(u) != PARIO_TP_OK)
        return PARIO_TP_ENOMEM;
    u->off[u->n] = off;
    u->len[u->n] = len;
    u->rp[u->n] = rp;
    u->src[u->n] = src;
    u->server[u->n] = server;
    u->kind[u->n] = kind;
    u->n++;
    return PARIO_TP_OK;
}

/* The units of the domain: every received piece (rmeta, from rsrc) cut where the layout
 * changes server -- Server_type() / Server_number() of Algorithm 1 (lines 5-6): the layout
 * says which server each stripe unit of the piece lies on.  Without a layout a piece is one
 * unit. */
static int domain_units(const pario_tp_layout *L, int64_t nrecv, const int64_t *rmeta, const int32_t *rsrc, units *u)
{
    int err = PARIO_TP_OK;
    for (int64_t i = 0; i < nrecv && err == PARIO_TP_OK; i++) {
        int64_t o = rmeta[2 * i], l = rmeta[2 * i + 1];
        if (L == NULL) {
            err = units_push(u, o, l, i, rsrc[i], 0, 0);
            continue;
        }
        while (l > 0 && err == PARIO_TP_OK) {
            int64_t pl = 0;
            int32_t sv = -1, kd = -1;
            if (L->map(L->ctx, o, l, &pl, &sv, &kd) != 0 || pl < 1 || pl > l || (kd != 0 && kd != 1))
                return PARIO_TP_ELAYOUT;
            err = units_push(u, o, pl, i, rsrc[i], sv, kd);
            o += pl;
            l -= pl;
        }
    }
    return err;
}

static int map_order_error(int rc)
{
    switch (rc) {
    case PARIO_ORDER_OK: return PARIO_TP_OK;
    case PARIO_ORDER_ENOMEM: return PARIO_TP_ENOMEM;
    case PARIO_ORDER_ESERVER:
    case PARIO_ORDER_EKIND: return PARIO_TP_ELAYOUT;
    default: return PARIO_TP_EINVAL;
    }
}

/* The aggregator's plan (steps 4-5): the units of its domain, their order, the segments per
 * cycle.  On return segs[nseg] in seq order. */
static int plan_domain(const pario_tp_params *p, int my_agg, const int64_t dom[2], int64_t nrecv,
                       const int64_t *rmeta, const int32_t *rsrc, tp_seg **segs_out, int64_t *nseg_out)
{
    units u = { 0 };
    int64_t *order = NULL, *twin = NULL, *first = NULL;
    tp_seg *segs = NULL;
    char *issued = NULL;
    const pario_tp_layout *L = p->layout;
    int err = domain_units(L, nrecv, rmeta, rsrc, &u);
    int64_t U = u.n;
    if (err == PARIO_TP_OK) {
        order = malloc((size_t)(U ? U : 1) * sizeof *order);
        twin = malloc((size_t)(U ? U : 1) * sizeof *twin);
        first = malloc((size_t)(U ? U : 1) * sizeof *first);
        issued = calloc((size_t)(U ? U : 1), 1);
        if (!order || !twin || !first || !issued)
            err = PARIO_TP_ENOMEM;
    }
    int64_t m = 0;
    if (err == PARIO_TP_OK) {
        pario_order_servers sv = { 0, NULL, NULL };
        if (L != NULL)
            sv = (pario_order_servers){ L->nservers, L->servers, L->kinds };
        pario_order_in in = { U, u.off, u.server, u.kind, u.src, my_agg, L != NULL ? &sv : NULL };
        int method = L != NULL ? p->order : PARIO_ORDER_ROMCIO;   /* no placement: ROMCIO */
        err = map_order_error(pario_request_order(method, &in, order, &m, twin));
        if (err == PARIO_TP_OK && p->report != NULL)
            p->report(p->report_ctx, my_agg, dom[0], dom[1], U, u.off, u.len, u.server, u.kind, u.src, m, order);
    }
    /* Cycles: the ordered units fill B-byte buffers one after the other (a unit crossing a
     * buffer boundary is split): as many segments as units plus boundaries crossed. */
    int64_t B = p->cb_buffer_size, nseg = 0;
    if (err == PARIO_TP_OK) {
        int64_t bytes = 0;
        for (int64_t q = 0; q < U; q++)
            bytes += u.len[q];
        if ((segs = malloc((size_t)(U + bytes / B + 1) * sizeof *segs)) == NULL)
            err = PARIO_TP_ENOMEM;
    }
    if (err == PARIO_TP_OK) {
        int64_t bufpos = 0;
        for (int64_t q = 0; q < m; q++) {
            int64_t x = order[q], o = u.off[x], l = u.len[x];
            issued[x] = 1;
            first[x] = bufpos / B;
            while (l > 0) {
                int64_t c = bufpos / B, n = tp_min((c + 1) * B - bufpos, l);
                segs[nseg] = (tp_seg){ o, n, c, u.rp[x], 0, u.src[x] };
                nseg++;
                o += n;
                l -= n;
                bufpos += n;
            }
        }
        /* HACIO line 7 left out a unit with the same offset and server as an issued one: it
         * travels in the cycle of its twin's first byte, after the cycle's issued pieces */
        for (int64_t x = 0; x < U; x++) {
            if (issued[x])
                continue;
            segs[nseg] = (tp_seg){ u.off[x], u.len[x], first[twin[x]], u.rp[x], 0, u.src[x] };
            nseg++;
        }
    }
    free(order);
    free(twin);
    free(first);
    free(issued);
    free(u.block);
    if (err != PARIO_TP_OK) {
        free(segs);
        return err;
    }
    *segs_out = segs;
    *nseg_out = nseg;
    return PARIO_TP_OK;
}

void pario_tp_plan_domain(tp_call *t, int64_t nrecv)
{
    int64_t dom[2] = { t->min_st + t->my_agg * t->fd, tp_min(t->max_end, t->min_st + (t->my_agg + 1) * t->fd) };
    if (t->err == PARIO_TP_OK)
        t->err = plan_domain(t->p, t->my_agg, dom, nrecv, t->rmeta, t->rsrc, &t->segs, &t->nseg);
}

/* ------------------------------------------------------------------ 5. the cycles */

/* The cycle buffer: per cycle, one group per source (its segments back to back), in
 * (cycle, source, seq) order: gstart[c] its first group, rpos of every segment. */
static void cycle_groups(tp_call *t)
{
    int64_t c = -1, s = -1, pos = 0;
    for (int64_t q = 0; q < t->nseg; q++) {
        tp_seg *g = &t->segs[t->sa[q]];
        if (g->cyc != c) {
            for (int64_t cc = c + 1; cc <= g->cyc; cc++)
                t->gstart[cc] = t->ngroups;
            c = g->cyc;
            s = -1;
            pos = 0;
        }
        if (g->src != s) {
            t->gsrc[t->ngroups] = g->src;
            t->gbytes[t->ngroups] = 0;
            t->gdisp[t->ngroups] = pos;
            t->ngroups++;
            s = g->src;
        }
        g->rpos = pos;
        pos += g->len;
        t->gbytes[t->ngroups - 1] += g->len;
        if (t->gbytes[t->ngroups - 1] > INT_MAX)
            t->err = PARIO_TP_ETOOBIG;
        t->cbuf_size = tp_max(t->cbuf_size, pos);
    }
    for (int64_t cc = c + 1; cc <= t->ncyc_local; cc++)
        t->gstart[cc] = t->ngroups;
}

/* The io lists: (cycle, seq) order, istart[c] the first segment of cycle c. */
static void cycle_io_lists(tp_call *t)
{
    int64_t cnt = 0, c = -1;
    for (int64_t q = 0; q < t->nseg; q++) {
        int64_t cy = t->segs[t->sb[q]].cyc;
        if (cy != c) {
            for (int64_t cc = c + 1; cc <= cy; cc++)
                t->istart[cc] = q;
            c = cy;
            cnt = 0;
        }
        t->max_cyc_segs = tp_max(t->max_cyc_segs, ++cnt);
    }
    for (int64_t cc = c + 1; cc <= t->ncyc_local; cc++)
        t->istart[cc] = t->nseg;
    if (t->max_cyc_segs > INT_MAX || t->ncyc_local > INT_MAX)
        t->err = PARIO_TP_ETOOBIG;
}

/* Step 5 on the aggregator: its segments sorted three ways -- (cycle, source, seq), (cycle,
 * seq), (source, cycle, seq): seq is a segment's index, so stable sorts of the identity by
 * the other keys give them --, the cycle buffer's groups and the io lists, and the memory of
 * the cycles (before any reply: nothing can fail after it). */
void pario_tp_cycles(tp_call *t)
{
    int64_t nseg = t->nseg;
    if (t->err == PARIO_TP_OK && nseg > 0) {
        t->sa = malloc((size_t)nseg * sizeof *t->sa);
        t->sb = malloc((size_t)nseg * sizeof *t->sb);
        t->ssrc = malloc((size_t)nseg * sizeof *t->ssrc);
        int64_t *cyc = malloc((size_t)nseg * 2 * sizeof *cyc), *src = cyc ? cyc + nseg : NULL;
        if (!t->sa || !t->sb || !t->ssrc || !cyc)
            t->err = PARIO_TP_ENOMEM;
        for (int64_t i = 0; t->err == PARIO_TP_OK && i < nseg; i++) {
            t->sa[i] = t->sb[i] = t->ssrc[i] = i;   /* = seq: the stable sorts keep it last */
            cyc[i] = t->segs[i].cyc;
            src[i] = t->segs[i].src;
            t->ncyc_local = tp_max(t->ncyc_local, cyc[i] + 1);
        }
        if (t->err == PARIO_TP_OK && (pario_sort_by(t->sa, nseg, cyc, src, NULL) ||
                                      pario_sort_by(t->sb, nseg, cyc, NULL, NULL) ||
                                      pario_sort_by(t->ssrc, nseg, src, cyc, NULL)))
            t->err = PARIO_TP_ENOMEM;
        free(cyc);
        if (t->err == PARIO_TP_OK) {
            t->gstart = calloc((size_t)t->ncyc_local + 1, sizeof *t->gstart);
            t->istart = calloc((size_t)t->ncyc_local + 1, sizeof *t->istart);
            t->gsrc = malloc((size_t)nseg * sizeof *t->gsrc);
            t->gbytes = malloc((size_t)nseg * sizeof *t->gbytes);
            t->gdisp = malloc((size_t)nseg * sizeof *t->gdisp);
            if (!t->gstart || !t->istart || !t->gsrc || !t->gbytes || !t->gdisp)
                t->err = PARIO_TP_ENOMEM;
        }
        if (t->err == PARIO_TP_OK) {
            cycle_groups(t);
            cycle_io_lists(t);
        }
    }
    if (t->err == PARIO_TP_OK && t->cbuf_size > 0) {
        t->cbuf = malloc((size_t)t->cbuf_size);
        t->iooff = malloc((size_t)(t->max_cyc_segs + 1) * 3 * sizeof *t->iooff);
        if (!t->cbuf || !t->iooff) {
            t->err = PARIO_TP_ENOMEM;
        } else {
            t->iolen = t->iooff + (t->max_cyc_segs + 1);
            t->iopos = t->iooff + 2 * (t->max_cyc_segs + 1);
        }
    }
}
