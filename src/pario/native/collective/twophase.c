/* pario serve: two-phase collective I/O with pario's request orders (twophase.h).
 *
 * ROMIO's extended two-phase method (seed 004 §2.1, Fig. 1-2) as pario.mpi.twophase runs
 * it; docs/serve-twophase.md says what matches the Python code exactly and what differs.
 *
 *  1. Offsets: PMPI_Allgather of every rank's first and last byte (and an error code, a
 *     signature of the parameters, so that a bad argument or a disagreement on one rank is
 *     reported on every rank before any data moves, and the rank's node once cached).
 *  2. Aggregators (a plan's list, else cb_nodes as ROMIO chooses them, from the nodes of
 *     the ranks: MPI_Comm_split_type on the first call on a communicator, then cached on
 *     it) and file domains: fd = ceil((max_end - min_st) / naggr), domain k = [min_st +
 *     k fd, min_st + (k+1) fd), not aligned to anything (ROMIO's ADIOI_Calc_file_domains
 *     without striping alignment; seed 004 §2.2: "the required file region is evenly
 *     assigned to two file domains").
 *  3. Every rank cuts its extents at domain boundaries and sends (offset, length) to the
 *     owning aggregators, one message to each domain its range meets (the Allgather tells
 *     every aggregator whom to expect, so no Alltoall of counts is needed).
 *  4. Every aggregator cuts its pieces at server boundaries (the layout callback) and
 *     orders them with pario_request_order (order.h): ROMCIO, CACIO or HACIO (seed 004
 *     Algorithm 1), the aggregator's index among the aggregators as `a`.
 *  5. Cycles: the ordered pieces fill the cb_buffer_size buffer one after the other; cycle
 *     c gets the c-th buffer-full (seed 004 §2.1: "if the I/O size is too large to fit in a
 *     single buffer, ROMIO will perform the two-phase I/O in several cycles"); a piece that
 *     crosses a buffer boundary is split.  The aggregator replies to each source with the
 *     (cycle, piece, offset, length) of its segments once; per cycle only data moves, one
 *     contiguous message per (source, aggregator) pair (PMPI_Isend / PMPI_Irecv), from /
 *     into the user's buffer directly when the segments are consecutive in it.  The
 *     aggregator's buffer holds each source's segments back to back; the io callback gets
 *     the cycle's pieces in the plan's order with their positions in that buffer.
 *
 * Collectives per call: the Allgather, (writes) one Allreduce of the error code before any
 * data moves, and a final Allreduce of the error code; everything else is point to point
 * between the ranks that share pieces.  A read needs no agreement before its data: each
 * source acknowledges its plan to its aggregators, which send data only to sources that
 * acknowledged (the acknowledgements travel while the aggregators read the file), and
 * the final Allreduce gives every rank the one code.  On a node whose cores are
 * oversubscribed every collective costs a scheduling round of every rank (milliseconds):
 * docs/serve-twophase.md, "Measured".
 *
 * Holes: cycles count data bytes, not windows of the file, so an aggregator's buffer never
 * holds a hole and only the requested bytes are written: no read-modify-write is needed and
 * bytes between the requests are never touched (ROMIO reads the holes of a window and
 * writes them back unchanged -- the same file, at the price of a read and of a race with
 * anyone writing those bytes meanwhile).
 */
#include "collective/twophase.h"

#include <limits.h>
#include <pthread.h>
#include <stdint.h>
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

typedef struct agg_key {
    int local, node, rank, below;
} agg_key;

static int cmp_agg_key(const void *a, const void *b)
{
    const agg_key *x = a, *y = b;
    int c = cmp_i64(x->local, y->local);
    if (c == 0)
        c = cmp_i64(x->node, y->node);
    return c ? c : cmp_i64(x->rank, y->rank);
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
                            agg_key *keys, int *ranks, int *n)
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
    qsort(keys, (size_t)size, sizeof *keys, cmp_agg_key);
    for (int i = 0; i < want; i++)
        ranks[i] = keys[i].rank;
    qsort(ranks, (size_t)want, sizeof *ranks, cmp_int);
    *n = want;
    return 0;
}

/* The aggregators with every rank's pair gathered here (info: 2 size ints, keys: size).
 * Every rank must take part in the Allgather: a local failure travels in it, so that every
 * rank returns the same code.  pair: this rank's, for the cache. */
static int choose_with(MPI_Comm comm, int size, int rank, int cb_nodes, int *info, agg_key *keys,
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
    agg_key *keys = malloc((size_t)size * sizeof *keys);
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

static void node_cached(MPI_Comm comm, int pair[2])
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

/* Tags of the private communicator: the cycles' data, the plan messages (requests, replies),
 * the read acknowledgements. */
#define TAG_DATA PARIO_TP_TAG
#define TAG_META (PARIO_TP_TAG + 1)
#define TAG_ACK (PARIO_TP_TAG + 2)

#define MPICHK(call) do { if ((call) != MPI_SUCCESS && err == PARIO_TP_OK) err = PARIO_TP_EMPI; } while (0)

/* A plan message this rank cannot take (no memory for it): received into nothing so that the
 * sender's send completes and nothing is left for a later receive (the truncation error is
 * the point; errors return for this one call). */
static void drain(MPI_Comm comm, int src)
{
    MPI_Errhandler eh;
    int64_t none = 0;
    if (PMPI_Comm_get_errhandler(comm, &eh) != MPI_SUCCESS)
        return;
    PMPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    PMPI_Recv(&none, 0, MPI_INT64_T, src, TAG_META, comm, MPI_STATUS_IGNORE);
    PMPI_Comm_set_errhandler(comm, eh);
    PMPI_Errhandler_free(&eh);
}

/* Receive one plan message from each rank of src[] (nsrc, ascending) but `self`: a header
 * {error code, entries} and `entries` records of w int64.  *out: the records back to back in
 * the order of src[] (headers dropped), first[i] the first record of src[i], cnt[i] their
 * count; self's place (self_cnt records, filled by the caller) is left free at its rank.
 * Every message is received, also after an error here or before (err: then drained, *out
 * NULL); the senders' error codes count. */
static int recv_plan(MPI_Comm comm, int err, int nsrc, const int *src, int self, int64_t self_cnt, int w,
                     int64_t **out, int64_t *first, int64_t *cnt)
{
    int64_t tot = 0;
    for (int i = 0; i < nsrc; i++) {
        MPI_Status s;
        MPI_Count c = 0;
        if (src[i] == self) {
            cnt[i] = self_cnt;
        } else if (PMPI_Probe(src[i], TAG_META, comm, &s) != MPI_SUCCESS ||
                   PMPI_Get_count_c(&s, MPI_INT64_T, &c) != MPI_SUCCESS || c < 2 || (c - 2) % w != 0) {
            cnt[i] = -1;   /* cannot happen: drained below */
            err = (int)maxi(err, PARIO_TP_EMPI);
            continue;
        } else {
            cnt[i] = (int64_t)(c - 2) / w;
        }
        tot += cnt[i];
    }
    int64_t *v = NULL;
    if (err == PARIO_TP_OK && tot > (int64_t)(SIZE_MAX / 8 / (size_t)w) - 2 * (int64_t)nsrc - 2)
        err = PARIO_TP_ETOOBIG;
    if (err == PARIO_TP_OK && (v = malloc((size_t)(w * tot + 2 * (int64_t)nsrc + 2) * sizeof *v)) == NULL)
        err = PARIO_TP_ENOMEM;
    int64_t at = 0;
    for (int i = 0; i < nsrc; i++) {
        if (src[i] == self) {
            first[i] = at;
            at += cnt[i];
            continue;
        }
        if (err != PARIO_TP_OK || cnt[i] < 0) {
            drain(comm, src[i]);
            continue;
        }
        /* header + records at w·at + 2·i (room for the headers so far), then moved to w·at */
        int64_t *m = v + w * at + 2 * (int64_t)i;
        if (PMPI_Recv(m, (int)(2 + w * cnt[i]), MPI_INT64_T, src[i], TAG_META, comm, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
            err = PARIO_TP_EMPI;
            continue;
        }
        if (m[0] < 0 || m[0] > PARIO_TP_EMPI || m[1] != cnt[i])
            err = PARIO_TP_EMPI;   /* cannot happen */
        else
            err = (int)maxi(err, m[0]);
        first[i] = at;
        memmove(v + w * at, m + 2, (size_t)(w * cnt[i]) * sizeof *v);
        at += cnt[i];
    }
    if (err != PARIO_TP_OK) {
        free(v);
        v = NULL;
    }
    *out = v;
    return err;
}

/* A read's acknowledgement: the source's code.  Only a real failure code stops the data to
 * that source (it posted no receive); anything else -- a receive that failed and left bytes
 * nobody sent -- counts as an error of the call but the data still goes, since the source
 * may be waiting for it. */
static int ack_failed(int64_t v) { return v > PARIO_TP_OK && v <= PARIO_TP_EMPI; }

static int acks_error(int err, int nsrc, const int *esrc, int rank, const int64_t *ackv)
{
    for (int i = 0; i < nsrc; i++)
        if (esrc[i] != rank && ackv[esrc[i]] != PARIO_TP_OK)
            err = (int)maxi(err, ack_failed(ackv[esrc[i]]) ? ackv[esrc[i]] : PARIO_TP_EMPI);
    return err;
}

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

    /* The O(size) memory of the whole call, before the first collective: a rank without it
     * cannot take part (the others see MPI fail or hang), the rest of the protocol can fail
     * on any rank and still finish everywhere with one code. */
    int64_t *all = malloc((size_t)size * 7 * sizeof *all);
    int64_t *rk = malloc((size_t)size * 9 * sizeof *rk);
    int *ik = malloc((size_t)size * 6 * sizeof *ik);
    agg_key *keys = malloc((size_t)size * sizeof *keys);
    MPI_Request *mreq = malloc((size_t)size * 6 * sizeof *mreq);
    src_msg *msgs = malloc((size_t)size * sizeof *msgs);
    if (!all || !rk || !ik || !keys || !mreq || !msgs) {
        free(all);
        free(rk);
        free(ik);
        free(keys);
        free(mreq);
        free(msgs);
        return PARIO_TP_ENOMEM;
    }
    int64_t *ecnt = rk, *efirst = rk + size;              /* aggregator: its sources' piece counts */
    int64_t *acnt = rk + 2 * (int64_t)size, *afirst = rk + 3 * (int64_t)size;   /* source: its aggregators' */
    int64_t *rbdsp = rk + 4 * (int64_t)size, *rbcnt = rk + 5 * (int64_t)size;   /* per rank, int64 entries */
    int64_t *cur = rk + 6 * (int64_t)size, *soff = rk + 7 * (int64_t)size, *ackv = rk + 8 * (int64_t)size;
    int *aggs = ik, *agg_of = ik + size, *info = ik + 2 * (int64_t)size;
    int *esrc = ik + 4 * (int64_t)size, *eagg = ik + 5 * (int64_t)size;
    MPI_Request *sreq = mreq, *ackreq = mreq + 3 * (int64_t)size, *reqs = mreq + 4 * (int64_t)size;
    int nsreq = 0, nackreq = 0;

    /* ---- 1. offsets, errors, parameters and (when cached) the node of every rank */
    int pair[2];
    node_cached(comm, pair);
    int64_t mine[7] = { st, en, err, err ? 0 : signature(write, p), n, pair[0], pair[1] };
    if (PMPI_Allgather(mine, 7, MPI_INT64_T, all, 7, MPI_INT64_T, comm) != MPI_SUCCESS) {
        err = PARIO_TP_EMPI;
        goto out;
    }
    int64_t min_st = -1, max_end = -1;
    int any_err = 0, mismatch = 0, interleaved = 0, cached = 1;
    int64_t prev_end = -1;
    for (int r = 0; r < size; r++) {
        const int64_t *a = &all[7 * r];
        any_err = (int)maxi(any_err, a[2]);
        if (a[3] != all[3])
            mismatch = 1;
        if (a[5] < 0 || a[5] > r || a[6] < 0 || a[6] > INT_MAX)
            cached = 0;
        if (a[1] >= 0) {   /* rank r has data */
            min_st = min_st < 0 ? a[0] : mini(min_st, a[0]);
            max_end = maxi(max_end, a[1]);
            /* ROMIO's interleave test: a rank's range starts before the previous one ends */
            if (prev_end >= 0 && a[0] < prev_end)
                interleaved = 1;
            prev_end = a[1];
        }
    }
    err = any_err ? any_err : (mismatch ? PARIO_TP_EMISMATCH : PARIO_TP_OK);
    if (err != PARIO_TP_OK || max_end < 0)
        goto out;   /* a bad argument or a disagreement anywhere, or nobody has data */

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
        goto out;
    }

    /* ---- 2. aggregators and file domains */
    int naggr = 0;
    if (p->naggregators > 0) {
        memcpy(aggs, p->aggregators, (size_t)p->naggregators * sizeof *aggs);
        naggr = p->naggregators;
    } else if (cached) {
        for (int r = 0; r < size; r++) {
            info[2 * r] = (int)all[7 * r + 5];
            info[2 * r + 1] = (int)all[7 * r + 6];
        }
        if (pick_aggregators(size, info, info + 1, 2, p->cb_nodes, keys, aggs, &naggr) != 0)
            err = PARIO_TP_EMPI;   /* cannot happen: checked above, on every rank alike */
    } else {
        err = choose_with(comm, size, rank, p->cb_nodes, info, keys, aggs, &naggr, pair);
        if (err == PARIO_TP_OK)
            node_cache(comm, pair);
    }
    if (err != PARIO_TP_OK)
        goto out;   /* the same on every rank (choose_with agrees in its Allgather) */
    for (int r = 0; r < size; r++)
        agg_of[r] = -1;
    for (int k = 0; k < naggr; k++)
        agg_of[aggs[k]] = k;
    int64_t fd = maxi(1, (max_end - min_st + naggr - 1) / naggr);
    int my_agg = agg_of[rank];

    /* Who talks to whom, from the Allgather alone: rank r sends its requests to the owners
     * of the domains its range [st, en) meets (one message each, possibly without a piece),
     * an aggregator hears from exactly those ranks.  Domains klo(r) .. khi(r). */
    int64_t klo = st >= 0 ? (st - min_st) / fd : 0, khi = st >= 0 ? (en - 1 - min_st) / fd : -1;
    int naggs_mine = 0, nsrc = 0, self_src = 0;
    for (int64_t k = klo; k <= khi; k++)
        eagg[naggs_mine++] = aggs[k];
    if (my_agg >= 0) {
        for (int r = 0; r < size; r++) {
            const int64_t *a = &all[7 * r];
            if (a[1] >= 0 && (a[0] - min_st) / fd <= my_agg && my_agg <= (a[1] - 1 - min_st) / fd) {
                esrc[nsrc++] = r;
                self_src |= r == rank;
            }
        }
    }
    /* the aggregators in rank order (the order their replies are received in) */
    qsort(eagg, (size_t)naggs_mine, sizeof *eagg, cmp_int);

    /* ---- 3. this rank's extents cut at domain boundaries, grouped by domain, sent to the
     * owners: {error, pieces} + (offset, length) per piece, in the rank's data order */
    int64_t np = 0;
    for (int64_t i = 0; i < n; i++)
        if (len[i] > 0)
            np += (off[i] + len[i] - 1 - min_st) / fd - (off[i] - min_st) / fd + 1;
    if (2 * np + 2 > INT_MAX)
        err = PARIO_TP_ETOOBIG;   /* int counts of the messages */
    int64_t *po = NULL, *pl = NULL, *ps = NULL, *dstart = NULL, *meta = NULL;
    int64_t *rmeta = NULL, *back = NULL, *rback = NULL;
    int32_t *rsrc = NULL;
    seg *segs = NULL;
    int64_t *sa = NULL, *sb = NULL, *ssrc = NULL;
    char *cbuf = NULL, *scratch = NULL;
    int64_t *gstart = NULL, *istart = NULL, *bpos = NULL;
    int64_t *iooff = NULL, *iolen = NULL, *iopos = NULL;
    int64_t nseg = 0, ncyc_local = 0, ncyc_src = 0, cbuf_size = 0, max_cyc_segs = 0, ngroups = 0;
    int64_t *gsrc = NULL, *gbytes = NULL, *gdisp = NULL;
    int64_t hdr[2] = { 0, 0 }, rhdr[2] = { 0, 0 };   /* a failed rank's request / reply: {error, 0} */
    int64_t ackval = 0;
    int agg_ok = 0, src_ok = 0;
    if (err == PARIO_TP_OK) {
        int64_t nd = khi - klo + 1;
        po = malloc((size_t)(np + 1) * 3 * sizeof *po);
        dstart = calloc((size_t)naggr + 1, sizeof *dstart);
        meta = malloc((size_t)(np + nd + 1) * 2 * sizeof *meta);
        if (!po || !dstart || !meta)
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
        for (int64_t k = klo; k <= khi; k++) {   /* domain k's message: header at 2 (dstart[k] + k - klo) */
            meta[2 * (dstart[k] + k - klo)] = PARIO_TP_OK;
            meta[2 * (dstart[k] + k - klo) + 1] = dstart[k + 1] - dstart[k];
        }
        int64_t *fill = acnt;   /* scratch: naggr <= size */
        memcpy(fill, dstart, (size_t)naggr * sizeof *fill);
        int64_t sp = 0;
        for (int64_t i = 0; i < n; i++) {
            for (int64_t o = off[i], e = off[i] + len[i]; o < e;) {
                int64_t k = (o - min_st) / fd, b = mini(e, min_st + (k + 1) * fd);
                int64_t j = fill[k]++, at = 2 * (j + k - klo + 1);
                po[j] = o;
                pl[j] = b - o;
                ps[j] = sp + (o - off[i]);
                meta[at] = o;
                meta[at + 1] = b - o;
                o = b;
            }
            sp += len[i];
        }
    }
    hdr[0] = err;
    for (int64_t k = klo; k <= khi; k++) {
        if (aggs[k] == rank)
            continue;
        const int64_t *m = err ? hdr : meta + 2 * (dstart[k] + k - klo);
        int cnt = err ? 2 : (int)(2 + 2 * (dstart[k + 1] - dstart[k]));
        MPICHK(PMPI_Isend(m, cnt, MPI_INT64_T, aggs[k], TAG_META, comm, &sreq[nsreq++]));
    }

    /* ---- 4./5. aggregator: its sources' pieces in rank order (the "array indexed by process
     * rank" that Algorithm 1 walks, seed 004 l. 146-148), ordered, cut into cycles */
    if (my_agg >= 0) {
        int64_t self_cnt = self_src && err == PARIO_TP_OK ? dstart[my_agg + 1] - dstart[my_agg] : 0;
        err = recv_plan(comm, err, nsrc, esrc, rank, self_cnt, 2, &rmeta, efirst, ecnt);
        if (!write)   /* the sources' acknowledgements of the replies (reads, below) */
            for (int i = 0; i < nsrc; i++)
                if (esrc[i] != rank)
                    MPICHK(PMPI_Irecv(&ackv[esrc[i]], 1, MPI_INT64_T, esrc[i], TAG_ACK, comm, &ackreq[nackreq++]));
        int64_t nrecv = 0;
        for (int i = 0; i < nsrc; i++)
            nrecv += ecnt[i] > 0 ? ecnt[i] : 0;
        if (err == PARIO_TP_OK && (rsrc = malloc((size_t)(nrecv + 1) * sizeof *rsrc)) == NULL)
            err = PARIO_TP_ENOMEM;
        if (err == PARIO_TP_OK) {
            for (int i = 0; i < nsrc; i++) {
                if (esrc[i] == rank && ecnt[i] > 0)
                    memcpy(rmeta + 2 * efirst[i], meta + 2 * (dstart[my_agg] + my_agg - klo + 1),
                           (size_t)(2 * ecnt[i]) * sizeof *rmeta);
                for (int64_t q = efirst[i]; q < efirst[i] + ecnt[i]; q++)
                    rsrc[q] = esrc[i];
            }
            err = plan_domain(p, my_agg, nrecv, rmeta, rsrc, &segs, &nseg);
        }
        if (err == PARIO_TP_OK && nseg > 0) {
            sa = malloc((size_t)nseg * sizeof *sa);
            sb = malloc((size_t)nseg * sizeof *sb);
            ssrc = malloc((size_t)nseg * sizeof *ssrc);
            if (!sa || !sb || !ssrc)
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
                if (max_cyc_segs > INT_MAX || ncyc_local > INT_MAX)
                    err = PARIO_TP_ETOOBIG;
            }
        }
        /* the memory of the cycles, before any reply (nothing can fail after it) */
        if (err == PARIO_TP_OK && cbuf_size > 0) {
            cbuf = malloc((size_t)cbuf_size);
            iooff = malloc((size_t)(max_cyc_segs + 1) * 3 * sizeof *iooff);
            if (!cbuf || !iooff)
                err = PARIO_TP_ENOMEM;
            else {
                iolen = iooff + (max_cyc_segs + 1);
                iopos = iooff + 2 * (max_cyc_segs + 1);
            }
        }
        /* the replies: per source {error, segments} + (cycle, piece index in the source's
         * list, offset, length) per segment, in (source, cycle, seq) order (a source whose
         * range meets the domain without a piece in it gets none) */
        if (err == PARIO_TP_OK && (back = malloc((size_t)(nseg * 4 + 2 * (int64_t)nsrc + 2) * sizeof *back)) == NULL)
            err = PARIO_TP_ENOMEM;
        if (err == PARIO_TP_OK) {
            int64_t q = 0;
            for (int i = 0; i < nsrc; i++) {
                int64_t *h = back + 4 * q + 2 * (int64_t)i, q0 = q;
                for (; q < nseg && segs[ssrc[q]].src == esrc[i]; q++) {
                    const seg *g = &segs[ssrc[q]];
                    int64_t *b = h + 2 + 4 * (q - q0);
                    b[0] = g->cyc;
                    b[1] = g->ridx - efirst[i];
                    b[2] = g->off;
                    b[3] = g->len;
                }
                h[0] = PARIO_TP_OK;
                h[1] = q - q0;
                if (2 + 4 * (q - q0) > INT_MAX)
                    err = PARIO_TP_ETOOBIG;
                efirst[i] = 4 * q0 + 2 * (int64_t)i;   /* now: where source i's message starts */
                ecnt[i] = q - q0;
            }
            if (q != nseg)
                err = PARIO_TP_EMPI;   /* a segment of a source that sent nothing: cannot happen */
        }
        agg_ok = err == PARIO_TP_OK;
        rhdr[0] = err;
        for (int i = 0; i < nsrc; i++) {
            if (esrc[i] == rank)
                continue;
            if (agg_ok)
                MPICHK(PMPI_Isend(back + efirst[i], (int)(2 + 4 * ecnt[i]), MPI_INT64_T, esrc[i], TAG_META, comm,
                                  &sreq[nsreq++]));
            else
                MPICHK(PMPI_Isend(rhdr, 2, MPI_INT64_T, esrc[i], TAG_META, comm, &sreq[nsreq++]));
        }
    }

    /* ---- the source's side: the segments each aggregator returns, where they are in buf */
    {
        int64_t self_cnt = 0;
        for (int i = 0; agg_ok && i < nsrc; i++)
            if (esrc[i] == rank)
                self_cnt = ecnt[i];
        int serr = recv_plan(comm, err, naggs_mine, eagg, my_agg >= 0 && self_src ? rank : -1, self_cnt, 4, &rback,
                             afirst, acnt);
        err = (int)maxi(err, serr);
    }
    for (int r = 0; r < size; r++)
        rbdsp[r] = rbcnt[r] = 0;
    int64_t scratch_size = 0;
    if (err == PARIO_TP_OK) {
        for (int i = 0; i < naggs_mine; i++) {
            rbdsp[eagg[i]] = 4 * afirst[i];
            rbcnt[eagg[i]] = 4 * acnt[i];
            if (eagg[i] == rank)   /* this rank's own list, from its aggregator side */
                for (int j = 0; j < nsrc; j++)
                    if (esrc[j] == rank && ecnt[j] > 0)
                        memcpy(rback + 4 * afirst[i], back + efirst[j] + 2, (size_t)(4 * ecnt[j]) * sizeof *rback);
        }
        int64_t nnb = 0;
        for (int i = 0; i < naggs_mine; i++)
            nnb += acnt[i];
        if ((bpos = malloc((size_t)(nnb + 1) * sizeof *bpos)) == NULL)
            err = PARIO_TP_ENOMEM;
    }
    for (int r = 0; err == PARIO_TP_OK && r < size; r++) {
        int k = agg_of[r];
        int64_t q0 = rbdsp[r] / 4, q1 = (rbdsp[r] + rbcnt[r]) / 4, run = 0, maxrun = 0;
        int direct = 1;
        for (int64_t q = q0; q < q1; q++) {
            int64_t c = rback[4 * q], idx = rback[4 * q + 1], o = rback[4 * q + 2], l = rback[4 * q + 3];
            int64_t j = k >= 0 ? dstart[k] + idx : 0;
            if (k < 0 || idx < 0 || idx >= dstart[k + 1] - dstart[k] || c < 0 || c >= INT_MAX ||
                (q > q0 && c < rback[4 * (q - 1)]) || l < 1 || l > INT_MAX || o < po[j] || o + l > po[j] + pl[j]) {
                err = PARIO_TP_EMPI;   /* a corrupt plan message: cannot happen */
                break;
            }
            ncyc_src = maxi(ncyc_src, c + 1);
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
        soff[r] = scratch_size;
        if (r != rank)
            scratch_size += maxrun;
    }
    if (err == PARIO_TP_OK && scratch_size > 0 && (scratch = malloc((size_t)scratch_size)) == NULL)
        err = PARIO_TP_ENOMEM;
    src_ok = err == PARIO_TP_OK;

    if (write) {
        /* writes: every rank learns every error before any data moves (nothing is written
         * unless every rank's plan and memory are in place) */
        int gerr = 0;
        MPICHK(PMPI_Allreduce(&err, &gerr, 1, MPI_INT, MPI_MAX, comm));
        err = (int)maxi(gerr, err);
    } else {
        /* reads: each source acknowledges its replies to its aggregators, which send it data
         * only on a good acknowledgement (a source that failed posts no receive); moving
         * data to the ranks that can take it is harmless, and the final Allreduce gives
         * every rank the one code.  No agreement before the data: the acknowledgements
         * arrive while the aggregators read the file. */
        ackval = err;
        for (int i = 0; i < naggs_mine; i++)
            if (eagg[i] != rank)
                MPICHK(PMPI_Isend(&ackval, 1, MPI_INT64_T, eagg[i], TAG_ACK, comm, &sreq[nsreq++]));
    }
    /* the plan messages sent are received by now or without waiting for any data (the ack
     * receives were posted with the requests') */
    MPICHK(PMPI_Waitall(nsreq, sreq, MPI_STATUSES_IGNORE));
    nsreq = 0;
    if (write && err != PARIO_TP_OK)
        goto done;

    /* ---- the cycles.  Every cycle only moves data between the ranks that share a segment in
     * it, so each rank runs the cycles it takes part in (seed 004 §2.2: "all aggregators need
     * to be synchronized to make sure the buffer can be safely used": cycle c of an aggregator
     * and cycle c of its sources match their messages) */
    int ioerr = 0;
    int64_t ncycles = maxi(agg_ok ? ncyc_local : 0, src_ok ? ncyc_src : 0);
    for (int64_t c = 0; c < ncycles; c++) {
        int nreq = 0;
        /* source side: this cycle's segments for every aggregator (one message each) */
        for (int r = 0; src_ok && r < size; r++) {
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
        int agg_here = agg_ok && c < ncyc_local;
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
                    MPICHK(PMPI_Irecv(cbuf + gdisp[g], (int)gbytes[g], MPI_BYTE, (int)gsrc[g], TAG_DATA, comm, &reqs[nreq++]));
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
                MPICHK(PMPI_Isend(from, (int)mg->bytes, MPI_BYTE, r, TAG_DATA, comm, &reqs[nreq++]));
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
            /* the receives first, so that the aggregators' sends find them posted */
            for (int r = 0; src_ok && r < size; r++) {
                src_msg *mg = &msgs[r];
                if (mg->bytes == 0 || r == rank)
                    continue;
                char *into = mg->direct ? buf + bpos[mg->b] : scratch + mg->soff;
                MPICHK(PMPI_Irecv(into, (int)mg->bytes, MPI_BYTE, r, TAG_DATA, comm, &reqs[nreq++]));
            }
            if (cnt > 0 && !ioerr && p->io(p->io_ctx, 0, (int)c, cnt, iooff, iolen, iopos, cbuf) != 0)
                ioerr = 1;
            if (cnt > 0 && ioerr)
                memset(cbuf, 0, (size_t)cyc_bytes);   /* defined bytes; the call fails anyway */
            if (agg_here && nackreq > 0) {   /* the acknowledgements, once */
                MPICHK(PMPI_Waitall(nackreq, ackreq, MPI_STATUSES_IGNORE));
                nackreq = 0;
                err = acks_error(err, nsrc, esrc, rank, ackv);
            }
            for (int64_t g = g0; g < g1; g++)
                if (gsrc[g] != rank && !ack_failed(ackv[gsrc[g]]))
                    MPICHK(PMPI_Isend(cbuf + gdisp[g], (int)gbytes[g], MPI_BYTE, (int)gsrc[g], TAG_DATA, comm, &reqs[nreq++]));
            if (src_ok)
                for (int64_t q = me->b, at = self_disp; q < me->e; at += rback[4 * q + 3], q++)   /* own data */
                    memcpy(buf + bpos[q], cbuf + at, (size_t)rback[4 * q + 3]);
            MPICHK(PMPI_Waitall(nreq, reqs, MPI_STATUSES_IGNORE));
            for (int r = 0; src_ok && r < size; r++) {   /* unpack */
                src_msg *mg = &msgs[r];
                if (mg->bytes == 0 || r == rank || mg->direct)
                    continue;
                for (int64_t q = mg->b, at = 0; q < mg->e; at += rback[4 * q + 3], q++)
                    memcpy(buf + bpos[q], scratch + mg->soff + at, (size_t)rback[4 * q + 3]);
            }
        }
    }
    if (ioerr && err == PARIO_TP_OK)
        err = PARIO_TP_EIO;
done:
    if (nackreq > 0) {   /* an aggregator without cycles (or failed) still takes its acknowledgements */
        MPICHK(PMPI_Waitall(nackreq, ackreq, MPI_STATUSES_IGNORE));
        err = acks_error(err, nsrc, esrc, rank, ackv);
    }
    if (nsreq > 0)
        MPICHK(PMPI_Waitall(nsreq, sreq, MPI_STATUSES_IGNORE));
    {   /* every rank returns the one code: after the data phase, or (writes) with the code
         * agreed before it -- the same Allreduce on every rank either way */
        int gerr = 0;
        if (PMPI_Allreduce(&err, &gerr, 1, MPI_INT, MPI_MAX, comm) != MPI_SUCCESS)
            gerr = (int)maxi(gerr, PARIO_TP_EMPI);
        err = (int)maxi(gerr, err);
    }
    free(po);
    free(dstart);
    free(meta);
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
    if (err == PARIO_TP_OK && moved)
        *moved = nbytes;
out:
    free(all);
    free(rk);
    free(ik);
    free(keys);
    free(mreq);
    free(msgs);
    return err;
}
