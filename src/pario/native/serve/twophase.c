/* pario serve: two-phase collective I/O with pario's request orders (twophase.h).
 *
 * ROMIO's extended two-phase method (seed 004 §2.1, Fig. 1-2) as pario.mpi.twophase runs
 * it; docs/serve-twophase.md says what matches the Python code exactly and what differs.
 *
 *  1. Offsets: PMPI_Allgather of every rank's first and last byte (and an error code and a
 *     signature of the parameters, so a bad argument or a disagreement on one rank is
 *     reported on every rank before any data moves).
 *  2. Aggregators (a plan's list, else cb_nodes as ROMIO chooses them) and file domains:
 *     fd = ceil((max_end - min_st) / naggr), domain k = [min_st + k fd, min_st + (k+1) fd),
 *     not aligned to anything (ROMIO's ADIOI_Calc_file_domains without striping alignment;
 *     seed 004 §2.2: "the required file region is evenly assigned to two file domains").
 *  3. Every rank cuts its extents at domain boundaries and sends (offset, length) to the
 *     owning aggregator (PMPI_Alltoall + PMPI_Alltoallv).
 *  4. Every aggregator cuts its pieces at server boundaries (the layout callback) and
 *     orders them with pario_request_order (order.h): ROMCIO, CACIO or HACIO (seed 004
 *     Algorithm 1), the aggregator's index among the aggregators as `a`.
 *  5. Cycles: the ordered pieces fill the cb_buffer_size buffer one after the other; cycle
 *     c gets the c-th buffer-full (seed 004 §2.1: "if the I/O size is too large to fit in a
 *     single buffer, ROMIO will perform the two-phase I/O in several cycles"); a piece that
 *     crosses a buffer boundary is split.  The aggregator tells each source the (cycle,
 *     piece, offset, length) of its segments once; per cycle only data moves, one
 *     contiguous message per (source, aggregator) pair (PMPI_Isend / PMPI_Irecv), from /
 *     into the user's buffer directly when the segments are consecutive in it.  The
 *     aggregator's buffer holds each source's segments back to back; the io callback gets
 *     the cycle's pieces in the plan's order with their positions in that buffer.
 *
 * Holes: cycles count data bytes, not windows of the file, so an aggregator's buffer never
 * holds a hole and only the requested bytes are written: no read-modify-write is needed and
 * bytes between the requests are never touched (ROMIO reads the holes of a window and
 * writes them back unchanged -- the same file, at the price of a read and of a race with
 * anyone writing those bytes meanwhile).
 */
#include "twophase.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define TP_MAX_OFF ((int64_t)1 << 62)
#define TP_MAX_CB ((int64_t)1 << 30)

const char *pario_tp_strerror(int code)
{
    switch (code) {
    case PARIO_TP_OK: return "ok";
    case PARIO_TP_EINVAL: return "collective I/O: bad argument (negative or too large offset or length, no buffer, bad order, buffer size or aggregator list)";
    case PARIO_TP_EMISMATCH: return "collective I/O: the ranks passed different parameters (order, cb_buffer_size, aggregators, cb_mode, layout servers)";
    case PARIO_TP_ENOMEM: return "collective I/O: out of memory";
    case PARIO_TP_ETOOBIG: return "collective I/O: too many pieces or bytes for MPI's int counts";
    case PARIO_TP_ELAYOUT: return "collective I/O: the layout mapping failed or named a server not in the layout's list";
    case PARIO_TP_EIO: return "collective I/O: a file access failed";
    case PARIO_TP_EMPI: return "collective I/O: an MPI call failed";
    default: return "collective I/O: unknown error";
    }
}

static int64_t mini(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t maxi(int64_t a, int64_t b) { return a > b ? a : b; }

static int cmp_i64(int64_t a, int64_t b) { return (a > b) - (a < b); }

/* ------------------------------------------------------------------ aggregators */

typedef struct agg_keys {
    const int *local, *node;
} agg_keys;

static int cmp_agg(const void *ctx, int64_t a, int64_t b)
{
    const agg_keys *k = ctx;
    int c = cmp_i64(k->local[a], k->local[b]);
    if (c == 0)
        c = cmp_i64(k->node[a], k->node[b]);
    return c ? c : cmp_i64(a, b);
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

int pario_tp_choose_aggregators(MPI_Comm comm, int cb_nodes, int *ranks, int *n)
{
    if (comm == MPI_COMM_NULL || ranks == NULL || n == NULL)
        return PARIO_TP_EINVAL;
    int size, rank;
    if (PMPI_Comm_size(comm, &size) != MPI_SUCCESS || PMPI_Comm_rank(comm, &rank) != MPI_SUCCESS)
        return PARIO_TP_EMPI;
    /* the node of every rank: the lowest rank sharing its memory (the leader), and its
     * index on the node (pario.mpi.twophase.choose_aggregators: Split_type(SHARED, key=rank)) */
    MPI_Comm node;
    if (PMPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node) != MPI_SUCCESS)
        return PARIO_TP_EMPI;
    int mine[2] = { rank, 0 };
    int rc = PMPI_Bcast(&mine[0], 1, MPI_INT, 0, node);
    if (rc == MPI_SUCCESS)
        rc = PMPI_Comm_rank(node, &mine[1]);
    PMPI_Comm_free(&node);
    int *info = malloc((size_t)size * 2 * sizeof *info);
    int *local = malloc((size_t)size * sizeof *local);
    int *nodeix = malloc((size_t)size * sizeof *nodeix);
    int64_t *idx = malloc((size_t)size * sizeof *idx);
    int err = PARIO_TP_OK;
    if (rc != MPI_SUCCESS)
        err = PARIO_TP_EMPI;
    else if (info == NULL || local == NULL || nodeix == NULL || idx == NULL)
        err = PARIO_TP_ENOMEM;
    /* every rank must take part in the Allgather: a local failure travels in it */
    int sendv[2] = { err ? -1 : mine[0], err ? -1 : mine[1] };
    int dummy[2];
    if (PMPI_Allgather(sendv, 2, MPI_INT, info ? info : dummy, info ? 2 : 0, MPI_INT, comm) != MPI_SUCCESS)
        err = PARIO_TP_EMPI;
    if (info == NULL && err == PARIO_TP_OK)
        err = PARIO_TP_ENOMEM;
    for (int r = 0; err == PARIO_TP_OK && r < size; r++)
        if (info[2 * r] < 0)
            err = PARIO_TP_EMPI;   /* another rank failed: every rank says so */
    if (err == PARIO_TP_OK) {
        /* node index = rank of the leader among the sorted leaders (a leader is its own) */
        int nleaders = 0;
        for (int r = 0; r < size; r++) {
            local[r] = info[2 * r + 1];
            if (info[2 * r] == r)
                nleaders++;
        }
        for (int r = 0; r < size; r++) {
            int below = 0;
            for (int q = 0; q < info[2 * r]; q++)
                below += info[2 * q] == q;
            nodeix[r] = below;
        }
        int want = cb_nodes > 0 ? cb_nodes : nleaders;
        want = want < 1 ? 1 : (want > size ? size : want);
        /* ROMIO cb_config_list "*:*" round robin: index on the node first, node second */
        for (int r = 0; r < size; r++)
            idx[r] = r;
        agg_keys k = { local, nodeix };
        if (pario_sort_index(idx, size, cmp_agg, &k) != 0) {
            err = PARIO_TP_ENOMEM;
        } else {
            for (int i = 0; i < want; i++)
                ranks[i] = (int)idx[i];
            qsort(ranks, (size_t)want, sizeof *ranks, cmp_int);
            *n = want;
        }
    }
    free(info);
    free(local);
    free(nodeix);
    free(idx);
    return err;
}

/* ------------------------------------------------------------------ helpers */

static uint64_t fnv(uint64_t h, int64_t v)
{
    for (int i = 0; i < 8; i++) {
        h ^= (uint64_t)(v >> (8 * i)) & 0xffu;
        h *= 1099511628211ull;
    }
    return h;
}

/* The parameters every rank must agree on, hashed (0 is never returned). */
static int64_t signature(int write, const pario_tp_params *p)
{
    uint64_t h = 1469598103934665603ull;
    h = fnv(h, write);
    h = fnv(h, p->order);
    h = fnv(h, p->cb_buffer_size);
    h = fnv(h, p->cb_mode);
    h = fnv(h, p->naggregators > 0 ? 0 : (p->cb_nodes > 0 ? p->cb_nodes : 0));
    h = fnv(h, p->naggregators > 0 ? p->naggregators : 0);
    for (int i = 0; i < p->naggregators; i++)
        h = fnv(h, p->aggregators[i]);
    h = fnv(h, p->layout != NULL);
    if (p->layout != NULL) {
        h = fnv(h, p->layout->nservers);
        for (int i = 0; i < p->layout->nservers; i++) {
            h = fnv(h, p->layout->servers[i]);
            h = fnv(h, p->layout->kinds[i]);
        }
    }
    return (int64_t)(h | 1u);
}

static int check_params(MPI_Comm comm, int size, int write, int64_t n, const int64_t *off,
                        const int64_t *len, const void *buf, const pario_tp_params *p,
                        int64_t *st, int64_t *en, int64_t *nbytes)
{
    (void)comm;
    *st = *en = -1;
    *nbytes = 0;
    if (p == NULL || n < 0 || (n > 0 && (off == NULL || len == NULL)) || (write != 0 && write != 1))
        return PARIO_TP_EINVAL;
    if (p->cb_buffer_size < 1 || p->cb_buffer_size > TP_MAX_CB)
        return PARIO_TP_EINVAL;
    if (p->order < PARIO_ORDER_ROMCIO || p->order > PARIO_ORDER_HACIO)
        return PARIO_TP_EINVAL;
    if (p->cb_mode < PARIO_TP_CB_ENABLE || p->cb_mode > PARIO_TP_CB_DISABLE || p->io == NULL)
        return PARIO_TP_EINVAL;
    if (p->naggregators < 0 || p->naggregators > size || (p->naggregators > 0 && p->aggregators == NULL))
        return PARIO_TP_EINVAL;
    for (int i = 0; i < p->naggregators; i++) {
        if (p->aggregators[i] < 0 || p->aggregators[i] >= size)
            return PARIO_TP_EINVAL;
        for (int j = 0; j < i; j++)
            if (p->aggregators[j] == p->aggregators[i])
                return PARIO_TP_EINVAL;   /* one file domain per aggregator */
    }
    const pario_tp_layout *L = p->layout;
    if (L != NULL && (L->map == NULL || L->nservers < 0 ||
                      (L->nservers > 0 && (L->servers == NULL || L->kinds == NULL))))
        return PARIO_TP_EINVAL;
    if (L != NULL)
        for (int i = 0; i < L->nservers; i++)
            if (L->kinds[i] != 0 && L->kinds[i] != 1)
                return PARIO_TP_EINVAL;
    for (int64_t i = 0; i < n; i++) {
        if (off[i] < 0 || len[i] < 0 || off[i] > TP_MAX_OFF || len[i] > TP_MAX_OFF - off[i])
            return PARIO_TP_EINVAL;
        if (len[i] == 0)
            continue;
        if (len[i] > TP_MAX_OFF - *nbytes)
            return PARIO_TP_EINVAL;
        *nbytes += len[i];
        *st = *st < 0 ? off[i] : mini(*st, off[i]);
        *en = maxi(*en, off[i] + len[i]);
    }
    if (*nbytes > 0 && buf == NULL)
        return PARIO_TP_EINVAL;
    if (n > (int64_t)(INT_MAX / 8))
        return PARIO_TP_ETOOBIG;
    return PARIO_TP_OK;
}

/* An aggregator's segment: a piece (or the part of one that fits a cycle) in the plan's
 * order (seq), with its source, the index of the source's piece it belongs to and its
 * position in the cycle buffer. */
typedef struct seg {
    int64_t off, len, cyc, seq, ridx, rpos;
    int32_t src;
} seg;

typedef struct seg_keys {
    const seg *s;
    int by;   /* 0: (cyc, src, seq)  1: (cyc, seq)  2: (src, cyc, seq) */
} seg_keys;

static int cmp_seg(const void *ctx, int64_t a, int64_t b)
{
    const seg_keys *k = ctx;
    const seg *x = &k->s[a], *y = &k->s[b];
    int c;
    switch (k->by) {
    case 0:
        if ((c = cmp_i64(x->cyc, y->cyc)) || (c = cmp_i64(x->src, y->src)))
            return c;
        return cmp_i64(x->seq, y->seq);
    case 1:
        if ((c = cmp_i64(x->cyc, y->cyc)))
            return c;
        return cmp_i64(x->seq, y->seq);
    default:
        if ((c = cmp_i64(x->src, y->src)) || (c = cmp_i64(x->cyc, y->cyc)))
            return c;
        return cmp_i64(x->seq, y->seq);
    }
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

/* growable arrays of the aggregator's unit pieces */
typedef struct units {
    int64_t n, cap;
    int64_t *off, *len, *rp;
    int32_t *src, *server, *kind;
} units;

static int units_push(units *u, int64_t off, int64_t len, int64_t rp, int32_t src, int32_t server, int32_t kind)
{
    if (u->n == u->cap) {
        int64_t cap = u->cap ? 2 * u->cap : 64;
        int64_t *o = realloc(u->off, (size_t)cap * sizeof *o);
        if (o) u->off = o;
        int64_t *l = realloc(u->len, (size_t)cap * sizeof *l);
        if (l) u->len = l;
        int64_t *r = realloc(u->rp, (size_t)cap * sizeof *r);
        if (r) u->rp = r;
        int32_t *s = realloc(u->src, (size_t)cap * sizeof *s);
        if (s) u->src = s;
        int32_t *v = realloc(u->server, (size_t)cap * sizeof *v);
        if (v) u->server = v;
        int32_t *k = realloc(u->kind, (size_t)cap * sizeof *k);
        if (k) u->kind = k;
        if (!o || !l || !r || !s || !v || !k)
            return PARIO_TP_ENOMEM;
        u->cap = cap;
    }
    u->off[u->n] = off;
    u->len[u->n] = len;
    u->rp[u->n] = rp;
    u->src[u->n] = src;
    u->server[u->n] = server;
    u->kind[u->n] = kind;
    u->n++;
    return PARIO_TP_OK;
}

static void units_free(units *u)
{
    free(u->off);
    free(u->len);
    free(u->rp);
    free(u->src);
    free(u->server);
    free(u->kind);
}

/* The aggregator's plan (steps 4-5): the units of its domain from the received pieces,
 * their order, the segments per cycle.  On return segs[nseg] in seq order. */
static int plan_domain(const pario_tp_params *p, int my_agg, int64_t nrecv, const int64_t *rmeta,
                       const int32_t *rsrc, seg **segs_out, int64_t *nseg_out)
{
    units u = { 0 };
    int err = PARIO_TP_OK;
    int64_t *order = NULL, *twin = NULL, *first = NULL;
    seg *segs = NULL;
    char *issued = NULL;
    const pario_tp_layout *L = p->layout;
    for (int64_t i = 0; i < nrecv && err == PARIO_TP_OK; i++) {
        int64_t o = rmeta[2 * i], l = rmeta[2 * i + 1];
        if (L == NULL) {
            err = units_push(&u, o, l, i, rsrc[i], 0, 0);
            continue;
        }
        /* Server_type() / Server_number() of Algorithm 1 (lines 5-6): the layout says which
         * server each stripe unit of the piece lies on */
        while (l > 0 && err == PARIO_TP_OK) {
            int64_t pl = 0;
            int32_t sv = -1, kd = -1;
            if (L->map(L->ctx, o, l, &pl, &sv, &kd) != 0 || pl < 1 || pl > l || (kd != 0 && kd != 1)) {
                err = PARIO_TP_ELAYOUT;
                break;
            }
            err = units_push(&u, o, pl, i, rsrc[i], sv, kd);
            o += pl;
            l -= pl;
        }
    }
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
        int method = L != NULL ? p->order : PARIO_ORDER_ROMCIO;   /* no placement: ROMCIO */
        pario_order_servers sv = { 0, NULL, NULL };
        if (L != NULL)
            sv = (pario_order_servers){ L->nservers, L->servers, L->kinds };
        err = map_order_error(pario_request_order(method, U, u.off, u.server, u.kind, u.src, my_agg,
                                                  L != NULL ? &sv : NULL, order, &m, twin));
    }
    /* Cycles: the ordered units fill B-byte buffers one after the other (a unit crossing a
     * buffer boundary is split): as many segments as units plus boundaries crossed. */
    int64_t B = p->cb_buffer_size, nseg = 0, cap = 0;
    if (err == PARIO_TP_OK) {
        int64_t bytes = 0;
        for (int64_t q = 0; q < U; q++)
            bytes += u.len[q];
        cap = U + bytes / B + 1;
        segs = malloc((size_t)cap * sizeof *segs);
        if (segs == NULL)
            err = PARIO_TP_ENOMEM;
    }
    if (err == PARIO_TP_OK) {
        int64_t bufpos = 0;
        for (int64_t q = 0; q < m; q++) {
            int64_t x = order[q], o = u.off[x], l = u.len[x];
            issued[x] = 1;
            first[x] = bufpos / B;
            while (l > 0) {
                int64_t c = bufpos / B, t = mini((c + 1) * B - bufpos, l);
                segs[nseg] = (seg){ o, t, c, nseg, u.rp[x], 0, u.src[x] };
                nseg++;
                o += t;
                l -= t;
                bufpos += t;
            }
        }
        /* HACIO line 7 left out a unit with the same offset and server as an issued one: it
         * travels in the cycle of its twin's first byte, after the cycle's issued pieces (as
         * pario.mpi.twophase._plan_domain appends the dropped pieces) */
        for (int64_t x = 0; x < U; x++) {
            if (issued[x])
                continue;
            segs[nseg] = (seg){ u.off[x], u.len[x], first[twin[x]], nseg, u.rp[x], 0, u.src[x] };
            nseg++;
        }
    }
    free(order);
    free(twin);
    free(first);
    free(issued);
    units_free(&u);
    if (err != PARIO_TP_OK) {
        free(segs);
        return err;
    }
    *segs_out = segs;
    *nseg_out = nseg;
    return PARIO_TP_OK;
}

/* ------------------------------------------------------------------ the collective call */

typedef struct src_msg {   /* this rank's message to / from one aggregator in one cycle */
    int64_t b, e, bytes, soff;
    int direct;
} src_msg;

#define MPICHK(call) do { if ((call) != MPI_SUCCESS && err == PARIO_TP_OK) err = PARIO_TP_EMPI; } while (0)

int pario_tp_collective(MPI_Comm comm, int write, int64_t n, const int64_t *off,
                        const int64_t *len, void *vbuf, const pario_tp_params *p,
                        int64_t *moved)
{
    char *buf = vbuf;
    if (moved)
        *moved = 0;
    if (comm == MPI_COMM_NULL)
        return PARIO_TP_EINVAL;
    int size, rank;
    if (PMPI_Comm_size(comm, &size) != MPI_SUCCESS || PMPI_Comm_rank(comm, &rank) != MPI_SUCCESS)
        return PARIO_TP_EMPI;
    int64_t st, en, nbytes;
    int err = check_params(comm, size, write, n, off, len, buf, p, &st, &en, &nbytes);

    /* ---- 1. offsets, errors and parameters of every rank */
    int64_t mine[5] = { st, en, err, err ? 0 : signature(write, p), n };
    int64_t *all = malloc((size_t)size * 5 * sizeof *all);
    if (all == NULL)
        return PARIO_TP_ENOMEM;   /* cannot take part: the others see MPI fail or hang: malloc of 40 B per rank */
    if (PMPI_Allgather(mine, 5, MPI_INT64_T, all, 5, MPI_INT64_T, comm) != MPI_SUCCESS) {
        free(all);
        return PARIO_TP_EMPI;
    }
    int64_t min_st = -1, max_end = -1;
    int any_err = 0, mismatch = 0, interleaved = 0;
    int64_t prev_end = -1;
    for (int r = 0; r < size; r++) {
        const int64_t *a = &all[5 * r];
        any_err = (int)maxi(any_err, a[2]);
        if (a[3] != all[3])
            mismatch = 1;
        if (a[1] >= 0) {   /* rank r has data */
            min_st = min_st < 0 ? a[0] : mini(min_st, a[0]);
            max_end = maxi(max_end, a[1]);
            /* ROMIO's interleave test: a rank's range starts before the previous one ends */
            if (prev_end >= 0 && a[0] < prev_end)
                interleaved = 1;
            prev_end = a[1];
        }
    }
    free(all);
    if (any_err)
        return any_err;
    if (mismatch)
        return PARIO_TP_EMISMATCH;
    if (max_end < 0)
        return PARIO_TP_OK;   /* nobody has data */

    /* ---- independent access: cb_mode disable, or automatic and no interleaving */
    if (p->cb_mode == PARIO_TP_CB_DISABLE || (p->cb_mode == PARIO_TP_CB_AUTOMATIC && !interleaved)) {
        int64_t *pos = malloc((size_t)(n ? n : 1) * 3 * sizeof *pos);
        if (pos == NULL) {
            err = PARIO_TP_ENOMEM;
        } else {
            int64_t *o2 = pos + n, *l2 = pos + 2 * n, m = 0, sp = 0;
            for (int64_t i = 0; i < n; i++) {
                if (len[i] > 0) {
                    o2[m] = off[i];
                    l2[m] = len[i];
                    pos[m++] = sp;
                }
                sp += len[i];
            }
            if (m > 0 && p->io(p->io_ctx, write, -1, (int)m, o2, l2, pos, buf) != 0)
                err = PARIO_TP_EIO;
            free(pos);
        }
        /* no agreement on the outcome here: every rank accessed its own extents, and MPI lets
         * each return its own error (MPI-4.1 §14.7), as ROMIO does when it skips collective
         * buffering; an extra collective per call would cost more than the call on a busy node */
        if (err == PARIO_TP_OK && moved)
            *moved = nbytes;
        return err;
    }

    /* ---- 2. aggregators and file domains */
    int *aggs = malloc((size_t)size * sizeof *aggs);
    int *agg_of = malloc((size_t)size * sizeof *agg_of);   /* rank -> aggregator index or -1 */
    int naggr = 0;
    if (aggs == NULL || agg_of == NULL)
        err = PARIO_TP_ENOMEM;
    if (p->naggregators > 0) {
        if (aggs)
            memcpy(aggs, p->aggregators, (size_t)p->naggregators * sizeof *aggs);
        naggr = p->naggregators;
    } else {
        /* collective: every rank calls it, even one without memory */
        int dummy[1];
        int rc = pario_tp_choose_aggregators(comm, p->cb_nodes, aggs ? aggs : dummy, &naggr);
        if (aggs == NULL)
            naggr = 0;
        else if (rc != PARIO_TP_OK && err == PARIO_TP_OK)
            err = rc;
    }
    if (agg_of != NULL && aggs != NULL) {
        for (int r = 0; r < size; r++)
            agg_of[r] = -1;
        for (int k = 0; k < naggr; k++)
            agg_of[aggs[k]] = k;
    }
    int64_t fd = naggr > 0 ? maxi(1, (max_end - min_st + naggr - 1) / naggr) : 1;

    /* ---- 3. this rank's extents cut at domain boundaries, grouped by domain */
    int64_t np = 0;
    for (int64_t i = 0; i < n && err == PARIO_TP_OK; i++)
        if (len[i] > 0)
            np += (off[i] + len[i] - 1 - min_st) / fd - (off[i] - min_st) / fd + 1;
    if (np > (int64_t)(INT_MAX / 2) && err == PARIO_TP_OK)
        err = PARIO_TP_ETOOBIG;   /* int counts and displacements of the Alltoallv */
    int64_t *po = NULL, *pl = NULL, *ps = NULL, *dstart = NULL, *meta = NULL;
    int *scnt = NULL, *sdsp = NULL, *rcnt = NULL, *rdsp = NULL;
    int64_t *rmeta = NULL, *back = NULL, *rback = NULL;
    int32_t *rsrc = NULL;
    seg *segs = NULL;
    int64_t *sa = NULL, *sb = NULL, *ssrc = NULL;
    char *cbuf = NULL, *scratch = NULL;
    int64_t *gstart = NULL, *istart = NULL, *bpos = NULL;
    int64_t *iooff = NULL, *iolen = NULL, *iopos = NULL;
    MPI_Request *reqs = NULL;
    src_msg *msgs = NULL;
    int64_t *cur = NULL;
    int64_t nseg = 0, ncyc_local = 0, cbuf_size = 0, max_cyc_segs = 0, ngroups = 0;
    int *bcnt = NULL, *bdsp = NULL, *rbcnt = NULL, *rbdsp = NULL;
    int64_t *gsrc = NULL, *gbytes = NULL, *gdisp = NULL;
    if (err == PARIO_TP_OK) {
        po = malloc((size_t)(np + 1) * 3 * sizeof *po);
        dstart = calloc((size_t)naggr + 1, sizeof *dstart);
        meta = malloc((size_t)(np + 1) * 2 * sizeof *meta);
        scnt = calloc((size_t)size, sizeof *scnt);
        sdsp = calloc((size_t)size, sizeof *sdsp);
        rcnt = calloc((size_t)size, sizeof *rcnt);
        rdsp = calloc((size_t)size, sizeof *rdsp);
        if (!po || !dstart || !meta || !scnt || !sdsp || !rcnt || !rdsp)
            err = PARIO_TP_ENOMEM;
    }
    if (err == PARIO_TP_OK) {
        pl = po + (np + 1);
        ps = po + 2 * (np + 1);
        /* counting sort by domain, stable: a domain's pieces in the rank's data order */
        for (int64_t i = 0; i < n; i++)
            for (int64_t o = off[i], e = off[i] + len[i]; o < e;) {
                int64_t k = (o - min_st) / fd, b = mini(e, min_st + (k + 1) * fd);
                dstart[k + 1]++;
                o = b;
            }
        for (int k = 0; k < naggr; k++)
            dstart[k + 1] += dstart[k];
        int64_t *fill = malloc((size_t)(naggr ? naggr : 1) * sizeof *fill);
        if (fill == NULL) {
            err = PARIO_TP_ENOMEM;
        } else {
            memcpy(fill, dstart, (size_t)naggr * sizeof *fill);
            int64_t sp = 0;
            for (int64_t i = 0; i < n; i++) {
                for (int64_t o = off[i], e = off[i] + len[i]; o < e;) {
                    int64_t k = (o - min_st) / fd, b = mini(e, min_st + (k + 1) * fd);
                    int64_t j = fill[k]++;
                    po[j] = o;
                    pl[j] = b - o;
                    ps[j] = sp + (o - off[i]);
                    meta[2 * j] = o;
                    meta[2 * j + 1] = b - o;
                    o = b;
                }
                sp += len[i];
            }
            free(fill);
            for (int k = 0; k < naggr; k++) {
                scnt[aggs[k]] = (int)(2 * (dstart[k + 1] - dstart[k]));
                sdsp[aggs[k]] = (int)(2 * dstart[k]);
            }
        }
    }
    /* every rank takes part in the exchanges below, with zero counts after a local error */
    if (err != PARIO_TP_OK && scnt != NULL)
        memset(scnt, 0, (size_t)size * sizeof *scnt);
    int zero_cnt = 0;
    MPICHK(PMPI_Alltoall(scnt ? scnt : &zero_cnt, scnt ? 1 : 0, MPI_INT, rcnt ? rcnt : &zero_cnt, rcnt ? 1 : 0, MPI_INT, comm));
    int64_t nrecv = 0;
    if (rcnt && rdsp) {
        for (int r = 0; r < size; r++) {
            if (nrecv > INT_MAX - (int64_t)rcnt[r] && err == PARIO_TP_OK)
                err = PARIO_TP_ETOOBIG;
            rdsp[r] = (int)nrecv;
            nrecv += rcnt[r];
        }
        nrecv /= 2;
    }
    if (err == PARIO_TP_OK) {
        rmeta = malloc((size_t)(nrecv + 1) * 2 * sizeof *rmeta);
        rsrc = malloc((size_t)(nrecv + 1) * sizeof *rsrc);
        if (rmeta == NULL || rsrc == NULL)
            err = PARIO_TP_ENOMEM;
    }
    {   /* a rank that cannot receive its pieces stops every rank here */
        int gerr = 0;
        MPICHK(PMPI_Allreduce(&err, &gerr, 1, MPI_INT, MPI_MAX, comm));
        if (gerr != PARIO_TP_OK || err != PARIO_TP_OK) {
            err = (int)maxi(gerr, err);
            goto done;
        }
    }
    MPICHK(PMPI_Alltoallv(meta, scnt, sdsp, MPI_INT64_T, rmeta, rcnt, rdsp, MPI_INT64_T, comm));

    /* ---- 4./5. aggregator: order its domain's pieces, cut them into cycles */
    int my_agg = (agg_of != NULL) ? agg_of[rank] : -1;
    bcnt = calloc((size_t)size, sizeof *bcnt);
    bdsp = calloc((size_t)size, sizeof *bdsp);
    rbcnt = calloc((size_t)size, sizeof *rbcnt);
    rbdsp = calloc((size_t)size, sizeof *rbdsp);
    if ((!bcnt || !bdsp || !rbcnt || !rbdsp) && err == PARIO_TP_OK)
        err = PARIO_TP_ENOMEM;
    if (my_agg >= 0 && err == PARIO_TP_OK) {
        for (int r = 0; r < size; r++)
            for (int64_t i = rdsp[r] / 2; i < (rdsp[r] + rcnt[r]) / 2; i++)
                rsrc[i] = r;
        err = plan_domain(p, my_agg, nrecv, rmeta, rsrc, &segs, &nseg);
    }
    if (my_agg >= 0 && err == PARIO_TP_OK && nseg > 0) {
        sa = malloc((size_t)nseg * sizeof *sa);
        sb = malloc((size_t)nseg * sizeof *sb);
        ssrc = malloc((size_t)nseg * sizeof *ssrc);
        back = malloc((size_t)nseg * 4 * sizeof *back);
        if (!sa || !sb || !ssrc || !back)
            err = PARIO_TP_ENOMEM;
        for (int64_t i = 0; err == PARIO_TP_OK && i < nseg; i++) {
            sa[i] = sb[i] = ssrc[i] = i;
            ncyc_local = maxi(ncyc_local, segs[i].cyc + 1);
        }
        seg_keys ka = { segs, 0 }, kb = { segs, 1 }, kc = { segs, 2 };
        if (err == PARIO_TP_OK && (pario_sort_index(sa, nseg, cmp_seg, &ka) || pario_sort_index(sb, nseg, cmp_seg, &kb) ||
                                   pario_sort_index(ssrc, nseg, cmp_seg, &kc)))
            err = PARIO_TP_ENOMEM;
        /* the cycle buffer: each source's segments back to back, in (cycle, source, seq) order */
        if (err == PARIO_TP_OK) {
            gstart = calloc((size_t)ncyc_local + 1, sizeof *gstart);
            istart = calloc((size_t)ncyc_local + 1, sizeof *istart);
            gsrc = malloc((size_t)nseg * sizeof *gsrc);
            gbytes = malloc((size_t)nseg * sizeof *gbytes);
            gdisp = malloc((size_t)nseg * sizeof *gdisp);
            if (!gstart || !istart || !gsrc || !gbytes || !gdisp)
                err = PARIO_TP_ENOMEM;
        }
        if (err == PARIO_TP_OK) {
            int64_t c = -1, s = -1, pos = 0;
            for (int64_t q = 0; q < nseg; q++) {
                seg *g = &segs[sa[q]];
                if (g->cyc != c) {
                    for (int64_t cc = c + 1; cc <= g->cyc; cc++)
                        gstart[cc] = ngroups;
                    c = g->cyc;
                    s = -1;
                    pos = 0;
                }
                if (g->src != s) {
                    gsrc[ngroups] = g->src;
                    gbytes[ngroups] = 0;
                    gdisp[ngroups] = pos;
                    ngroups++;
                    s = g->src;
                }
                g->rpos = pos;
                pos += g->len;
                gbytes[ngroups - 1] += g->len;
                if (gbytes[ngroups - 1] > INT_MAX)
                    err = PARIO_TP_ETOOBIG;
                cbuf_size = maxi(cbuf_size, pos);
            }
            for (int64_t cc = c + 1; cc <= ncyc_local; cc++)
                gstart[cc] = ngroups;
            /* the io lists: (cycle, seq) order */
            int64_t cnt = 0;
            c = -1;
            for (int64_t q = 0; q < nseg; q++) {
                int64_t cy = segs[sb[q]].cyc;
                if (cy != c) {
                    for (int64_t cc = c + 1; cc <= cy; cc++)
                        istart[cc] = q;
                    c = cy;
                    cnt = 0;
                }
                max_cyc_segs = maxi(max_cyc_segs, ++cnt);
            }
            for (int64_t cc = c + 1; cc <= ncyc_local; cc++)
                istart[cc] = nseg;
            if (max_cyc_segs > INT_MAX)
                err = PARIO_TP_ETOOBIG;
        }
        /* back to the sources: (cycle, piece index in the source's list, offset, length) in
         * (source, cycle, seq) order */
        if (err == PARIO_TP_OK) {
            int64_t tot = 0;
            for (int64_t q = 0; q < nseg; q++) {
                const seg *g = &segs[ssrc[q]];
                back[4 * q] = g->cyc;
                back[4 * q + 1] = g->ridx - rdsp[g->src] / 2;
                back[4 * q + 2] = g->off;
                back[4 * q + 3] = g->len;
                tot = maxi(tot, 4 * (q + 1));
            }
            if (tot > INT_MAX) {
                err = PARIO_TP_ETOOBIG;
            } else {
                for (int64_t q = 0; q < nseg; q++)
                    bcnt[segs[ssrc[q]].src] += 4;
                int d = 0;
                for (int r = 0; r < size; r++) {
                    bdsp[r] = d;
                    d += bcnt[r];
                }
            }
        }
    }
    if (err != PARIO_TP_OK && bcnt != NULL)
        memset(bcnt, 0, (size_t)size * sizeof *bcnt);
    MPICHK(PMPI_Alltoall(bcnt ? bcnt : &zero_cnt, bcnt ? 1 : 0, MPI_INT, rbcnt ? rbcnt : &zero_cnt, rbcnt ? 1 : 0, MPI_INT, comm));
    int64_t nback = 0;
    if (rbcnt && rbdsp) {
        for (int r = 0; r < size; r++) {
            if (nback > INT_MAX - (int64_t)rbcnt[r] && err == PARIO_TP_OK)
                err = PARIO_TP_ETOOBIG;
            rbdsp[r] = (int)nback;
            nback += rbcnt[r];
        }
    }
    rback = malloc((size_t)(nback + 1) * sizeof *rback);
    if (rback == NULL && err == PARIO_TP_OK)
        err = PARIO_TP_ENOMEM;
    /* every rank learns every error and the number of cycles before any data moves */
    int64_t red[2] = { ncyc_local, err }, gred[2] = { 0, 0 };
    MPICHK(PMPI_Allreduce(red, gred, 2, MPI_INT64_T, MPI_MAX, comm));
    if (gred[1] != PARIO_TP_OK || err != PARIO_TP_OK) {
        err = (int)maxi(gred[1], err);
        goto done;
    }
    int64_t ncycles = gred[0];
    {
        int64_t none = 0;
        MPICHK(PMPI_Alltoallv(back ? back : &none, bcnt, bdsp, MPI_INT64_T, rback, rbcnt, rbdsp, MPI_INT64_T, comm));
    }
    /* the memory of the cycles, allocated before they start (so that a rank short of memory
     * stops every rank before any data moves): the aggregator's cycle buffer and io lists;
     * every rank's stream position of each returned segment and its pack/unpack scratch
     * (per aggregator the largest non-consecutive cycle message) */
    int64_t nnb = nback / 4, scratch_size = 0;
    int64_t *soff = calloc((size_t)size, sizeof *soff);
    if (soff == NULL && err == PARIO_TP_OK)
        err = PARIO_TP_ENOMEM;
    if (err == PARIO_TP_OK && my_agg >= 0 && cbuf_size > 0) {
        cbuf = malloc((size_t)cbuf_size);
        iooff = malloc((size_t)(max_cyc_segs + 1) * 3 * sizeof *iooff);
        if (!cbuf || !iooff)
            err = PARIO_TP_ENOMEM;
    }
    if (err == PARIO_TP_OK) {
        bpos = malloc((size_t)(nnb + 1) * sizeof *bpos);
        reqs = malloc((size_t)size * 2 * sizeof *reqs);
        msgs = malloc((size_t)size * sizeof *msgs);
        cur = calloc((size_t)size, sizeof *cur);
        if (!bpos || !reqs || !msgs || !cur)
            err = PARIO_TP_ENOMEM;
    }
    for (int r = 0; err == PARIO_TP_OK && r < size; r++) {
        int k = agg_of[r];
        int64_t q0 = rbdsp[r] / 4, q1 = (rbdsp[r] + rbcnt[r]) / 4, run = 0, maxrun = 0;
        int direct = 1;
        for (int64_t q = q0; q < q1; q++) {
            int64_t c = rback[4 * q], idx = rback[4 * q + 1], o = rback[4 * q + 2], l = rback[4 * q + 3];
            int64_t j = k >= 0 ? dstart[k] + idx : 0;
            if (k < 0 || idx < 0 || idx >= dstart[k + 1] - dstart[k] || c < 0 || c >= ncycles ||
                (q > q0 && c < rback[4 * (q - 1)]) || l < 1 || o < po[j] || o + l > po[j] + pl[j]) {
                err = PARIO_TP_EMPI;   /* a corrupt plan message: cannot happen */
                break;
            }
            bpos[q] = ps[j] + (o - po[j]);
            if (q == q0 || c != rback[4 * (q - 1)]) {   /* a new cycle's message */
                if (!direct)
                    maxrun = maxi(maxrun, run);
                run = 0;
                direct = 1;
            } else if (bpos[q] != bpos[q - 1] + rback[4 * (q - 1) + 3]) {
                direct = 0;
            }
            run += l;
        }
        if (!direct)
            maxrun = maxi(maxrun, run);
        cur[r] = q0;
        if (r != rank) {
            soff[r] = scratch_size;
            scratch_size += maxrun;
        }
    }
    if (err == PARIO_TP_OK && scratch_size > 0 && (scratch = malloc((size_t)scratch_size)) == NULL)
        err = PARIO_TP_ENOMEM;
    {
        int gerr = 0;
        MPICHK(PMPI_Allreduce(&err, &gerr, 1, MPI_INT, MPI_MAX, comm));
        if (gerr != PARIO_TP_OK || err != PARIO_TP_OK) {
            err = (int)maxi(gerr, err);
            free(soff);
            goto done;
        }
    }
    if (my_agg >= 0) {
        iolen = iooff + (max_cyc_segs + 1);
        iopos = iooff + 2 * (max_cyc_segs + 1);
    }

    /* ---- the cycles: all ranks run all of them (seed 004 §2.2: "as all aggregators need
     * to be synchronized to make sure the buffer can be safely used") */
    int ioerr = 0;
    for (int64_t c = 0; c < ncycles; c++) {
        int nreq = 0;
        /* source side: this cycle's segments for every aggregator (one message each) */
        for (int r = 0; r < size; r++) {
            src_msg *mg = &msgs[r];
            int64_t end = (rbdsp[r] + rbcnt[r]) / 4, b = cur[r], e = b;
            mg->bytes = 0;
            mg->direct = 1;
            while (e < end && rback[4 * e] == c) {
                if (e > b && bpos[e] != bpos[e - 1] + rback[4 * (e - 1) + 3])
                    mg->direct = 0;
                mg->bytes += rback[4 * e + 3];
                e++;
            }
            mg->b = b;
            mg->e = e;
            mg->soff = soff[r];
            cur[r] = e;
        }
        /* aggregator side: this cycle's groups, one per source, back to back in cbuf */
        int agg_here = my_agg >= 0 && c < ncyc_local;
        int64_t g0 = agg_here ? gstart[c] : 0, g1 = agg_here ? gstart[c + 1] : 0, self_disp = 0, cyc_bytes = 0;
        for (int64_t g = g0; g < g1; g++) {
            if (gsrc[g] == rank)
                self_disp = gdisp[g];
            cyc_bytes = maxi(cyc_bytes, gdisp[g] + gbytes[g]);
        }
        int cnt = 0;
        if (agg_here) {   /* the cycle's pieces in the plan's order, with their place in cbuf */
            for (int64_t q = istart[c]; q < istart[c + 1]; q++) {
                const seg *g = &segs[sb[q]];
                iooff[cnt] = g->off;
                iolen[cnt] = g->len;
                iopos[cnt] = g->rpos;
                cnt++;
            }
        }
        const src_msg *me = &msgs[rank];
        if (write) {
            for (int64_t g = g0; g < g1; g++)
                if (gsrc[g] != rank)
                    MPICHK(PMPI_Irecv(cbuf + gdisp[g], (int)gbytes[g], MPI_BYTE, (int)gsrc[g], PARIO_TP_TAG, comm, &reqs[nreq++]));
            for (int r = 0; r < size; r++) {
                src_msg *mg = &msgs[r];
                if (mg->bytes == 0 || r == rank)
                    continue;
                char *from = buf + bpos[mg->b];
                if (!mg->direct) {   /* pack */
                    from = scratch + mg->soff;
                    for (int64_t q = mg->b, at = 0; q < mg->e; at += rback[4 * q + 3], q++)
                        memcpy(from + at, buf + bpos[q], (size_t)rback[4 * q + 3]);
                }
                MPICHK(PMPI_Isend(from, (int)mg->bytes, MPI_BYTE, r, PARIO_TP_TAG, comm, &reqs[nreq++]));
            }
            for (int64_t q = me->b, at = self_disp; q < me->e; at += rback[4 * q + 3], q++)   /* own data */
                memcpy(cbuf + at, buf + bpos[q], (size_t)rback[4 * q + 3]);
            MPICHK(PMPI_Waitall(nreq, reqs, MPI_STATUSES_IGNORE));
            /* no write after a failed exchange: a receive that failed (a sender died, the
             * communicator returns errors) left undefined bytes in cbuf, and a write of them
             * would put bytes in the file that no rank wrote (serve_kill one-rank 16000183) */
            if (cnt > 0 && !ioerr && err == PARIO_TP_OK &&
                p->io(p->io_ctx, 1, (int)c, cnt, iooff, iolen, iopos, cbuf) != 0)
                ioerr = 1;   /* no more writes; the exchange goes on so that no rank waits forever */
        } else {
            for (int r = 0; r < size; r++) {
                src_msg *mg = &msgs[r];
                if (mg->bytes == 0 || r == rank)
                    continue;
                char *into = mg->direct ? buf + bpos[mg->b] : scratch + mg->soff;
                MPICHK(PMPI_Irecv(into, (int)mg->bytes, MPI_BYTE, r, PARIO_TP_TAG, comm, &reqs[nreq++]));
            }
            if (cnt > 0 && !ioerr && p->io(p->io_ctx, 0, (int)c, cnt, iooff, iolen, iopos, cbuf) != 0)
                ioerr = 1;
            if (cnt > 0 && ioerr)
                memset(cbuf, 0, (size_t)cyc_bytes);   /* defined bytes; the call fails anyway */
            for (int64_t g = g0; g < g1; g++)
                if (gsrc[g] != rank)
                    MPICHK(PMPI_Isend(cbuf + gdisp[g], (int)gbytes[g], MPI_BYTE, (int)gsrc[g], PARIO_TP_TAG, comm, &reqs[nreq++]));
            for (int64_t q = me->b, at = self_disp; q < me->e; at += rback[4 * q + 3], q++)   /* own data */
                memcpy(buf + bpos[q], cbuf + at, (size_t)rback[4 * q + 3]);
            MPICHK(PMPI_Waitall(nreq, reqs, MPI_STATUSES_IGNORE));
            for (int r = 0; r < size; r++) {   /* unpack */
                src_msg *mg = &msgs[r];
                if (mg->bytes == 0 || r == rank || mg->direct)
                    continue;
                for (int64_t q = mg->b, at = 0; q < mg->e; at += rback[4 * q + 3], q++)
                    memcpy(buf + bpos[q], scratch + mg->soff + at, (size_t)rback[4 * q + 3]);
            }
        }
    }
    free(soff);
    if (ioerr && err == PARIO_TP_OK)
        err = PARIO_TP_EIO;
    {
        int gerr = 0;
        if (PMPI_Allreduce(&err, &gerr, 1, MPI_INT, MPI_MAX, comm) != MPI_SUCCESS)
            gerr = maxi(gerr, PARIO_TP_EMPI);
        err = (int)maxi(gerr, err);
    }
done:
    free(aggs);
    free(agg_of);
    free(po);
    free(dstart);
    free(meta);
    free(scnt);
    free(sdsp);
    free(rcnt);
    free(rdsp);
    free(rmeta);
    free(rsrc);
    free(back);
    free(rback);
    free(segs);
    free(sa);
    free(sb);
    free(ssrc);
    free(cbuf);
    free(scratch);
    free(gstart);
    free(istart);
    free(gsrc);
    free(gbytes);
    free(gdisp);
    free(bpos);
    free(iooff);
    free(reqs);
    free(msgs);
    free(cur);
    free(bcnt);
    free(bdsp);
    free(rbcnt);
    free(rbdsp);
    if (err == PARIO_TP_OK && moved)
        *moved = nbytes;
    return err;
}
