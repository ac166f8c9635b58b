/* pario: two-phase collective I/O with pario's request orders (twophase.h), the driver.
 *
 * ROMIO's extended two-phase method (seed 004 §2.1, Fig. 1-2); docs/serve-twophase.md says
 * what matches ROMIO and what differs.  pario_tp_collective runs the steps of call.h over
 * one tp_call:
 *
 *  1. Offsets (here): PMPI_Allgather of every rank's first and last byte (and an error
 *     code, a signature of the parameters, so that a bad argument or a disagreement on one
 *     rank is reported on every rank before any data moves, and the rank's node once
 *     cached).  With romio_cb_* = disable, or automatic and ranges that do not interleave,
 *     every rank accesses its own extents (independent path, here).
 *  2. Aggregators and file domains (domains.c).
 *  3. Every rank cuts its extents at domain boundaries (domains.c) and sends (offset,
 *     length) to the owning aggregators (exchange.c).
 *  4. Every aggregator cuts its pieces at server boundaries (the layout callback) and
 *     orders them with the plan's order (order.h: pario_orders[], seed 004 Algorithm 1 for
 *     HACIO), the aggregator's index among the aggregators as `a` (domains.c).
 *  5. Cycles: the ordered pieces fill the cb_buffer_size buffer one after the other
 *     (domains.c); the aggregator replies to each source with its segments once; per cycle
 *     only data moves (exchange.c).
 *
 * On a node whose cores are oversubscribed every collective costs a scheduling round of
 * every rank (milliseconds): docs/serve-twophase.md, "Measured".
 *
 * Holes: cycles count data bytes, not windows of the file, so an aggregator's buffer never
 * holds a hole and only the requested bytes are written: no read-modify-write is needed and
 * bytes between the requests are never touched (ROMIO reads the holes of a window and
 * writes them back unchanged -- the same file, at the price of a read and of a race with
 * anyone writing those bytes meanwhile).
 */
#include "collective/call.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

/* The arguments of this rank, and its range: t->st, t->en, t->nbytes.  A PARIO_TP_* code. */
static int check_params(tp_call *t)
{
    const pario_tp_params *p = t->p;
    int64_t n = t->n;
    const int64_t *off = t->off, *len = t->len;
    t->st = t->en = -1;
    t->nbytes = 0;
    if (p == NULL || n < 0 || (n > 0 && (off == NULL || len == NULL)) || (t->write != 0 && t->write != 1))
        return PARIO_TP_EINVAL;
    if (p->cb_buffer_size < 1 || p->cb_buffer_size > TP_MAX_CB)
        return PARIO_TP_EINVAL;
    if (p->order < 0 || p->order >= pario_order_count())
        return PARIO_TP_EINVAL;
    if (p->cb_mode < PARIO_TP_CB_ENABLE || p->cb_mode > PARIO_TP_CB_DISABLE || p->io == NULL)
        return PARIO_TP_EINVAL;
    if (p->naggregators < 0 || p->naggregators > t->size || (p->naggregators > 0 && p->aggregators == NULL))
        return PARIO_TP_EINVAL;
    for (int i = 0; i < p->naggregators; i++) {
        if (p->aggregators[i] < 0 || p->aggregators[i] >= t->size)
            return PARIO_TP_EINVAL;
        for (int j = 0; j < i; j++)
            if (p->aggregators[j] == p->aggregators[i])
                return PARIO_TP_EINVAL;   /* one file domain per aggregator */
    }
    const pario_tp_layout *L = p->layout;
    if (L != NULL && (L->map == NULL || L->nservers < 0 ||
                      (L->nservers > 0 && (L->servers == NULL || L->kinds == NULL))))
        return PARIO_TP_EINVAL;
    for (int i = 0; L != NULL && i < L->nservers; i++)
        if (L->kinds[i] != 0 && L->kinds[i] != 1)
            return PARIO_TP_EINVAL;
    for (int64_t i = 0; i < n; i++) {
        if (off[i] < 0 || len[i] < 0 || off[i] > TP_MAX_OFF || len[i] > TP_MAX_OFF - off[i])
            return PARIO_TP_EINVAL;
        if (len[i] == 0)
            continue;
        if (len[i] > TP_MAX_OFF - t->nbytes)
            return PARIO_TP_EINVAL;
        t->nbytes += len[i];
        t->st = t->st < 0 ? off[i] : tp_min(t->st, off[i]);
        t->en = tp_max(t->en, off[i] + len[i]);
    }
    if (t->nbytes > 0 && t->buf == NULL)
        return PARIO_TP_EINVAL;
    if (n > (int64_t)(INT_MAX / 8))
        return PARIO_TP_ETOOBIG;
    return PARIO_TP_OK;
}

/* The O(size) memory of the whole call, before the first collective: a rank without it
 * cannot take part (the others see MPI fail or hang), the rest of the protocol can fail on
 * any rank and still finish everywhere with one code.  0 or -1. */
static int call_alloc(tp_call *t)
{
    int64_t size = t->size;
    t->all = malloc((size_t)size * TP_ALL * sizeof *t->all);
    t->rk = malloc((size_t)size * 9 * sizeof *t->rk);
    t->ik = malloc((size_t)size * 6 * sizeof *t->ik);
    t->keys = malloc((size_t)size * sizeof *t->keys);
    t->mreq = malloc((size_t)size * 6 * sizeof *t->mreq);
    t->msgs = malloc((size_t)size * sizeof *t->msgs);
    if (!t->all || !t->rk || !t->ik || !t->keys || !t->mreq || !t->msgs)
        return -1;
    t->ecnt = t->rk;   /* aggregator: its sources' piece counts */
    t->efirst = t->rk + size;
    t->acnt = t->rk + 2 * size;   /* source: its aggregators' */
    t->afirst = t->rk + 3 * size;
    t->rbdsp = t->rk + 4 * size;   /* per rank, int64 entries */
    t->rbcnt = t->rk + 5 * size;
    t->cur = t->rk + 6 * size;
    t->soff = t->rk + 7 * size;
    t->ackv = t->rk + 8 * size;
    t->aggs = t->ik;
    t->agg_of = t->ik + size;
    t->info = t->ik + 2 * size;   /* 2 per rank */
    t->esrc = t->ik + 4 * size;
    t->eagg = t->ik + 5 * size;
    t->sreq = t->mreq;   /* 3 per rank: requests, replies, acknowledgements */
    t->ackreq = t->mreq + 3 * size;
    t->reqs = t->mreq + 4 * size;   /* 2 per rank: one cycle's sends and receives */
    return 0;
}

static void call_free(tp_call *t)
{
    void *blocks[] = { t->all, t->rk, t->ik, t->keys, t->mreq, t->msgs, t->po, t->dstart, t->meta, t->rmeta,
                       t->rsrc, t->back, t->rback, t->segs, t->sa, t->sb, t->ssrc, t->cbuf, t->scratch,
                       t->gstart, t->istart, t->gsrc, t->gbytes, t->gdisp, t->bpos, t->iooff };
    for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++)
        free(blocks[i]);
}

/* Step 1: offsets, errors, parameters and (when cached) the node of every rank; the
 * aggregate range and ROMIO's interleave test.  Every rank's code: the largest error of any
 * rank, else EMISMATCH when the ranks' parameters differ. */
static int gather_offsets(tp_call *t)
{
    pario_tp_node_cached(t->comm, t->pair);
    int64_t mine[TP_ALL] = { t->st, t->en, t->err, t->err ? 0 : signature(t->write, t->p), t->n, t->pair[0],
                             t->pair[1] };
    if (PMPI_Allgather(mine, TP_ALL, MPI_INT64_T, t->all, TP_ALL, MPI_INT64_T, t->comm) != MPI_SUCCESS)
        return t->err = PARIO_TP_EMPI;
    int any_err = 0, mismatch = 0;
    int64_t prev_end = -1;
    t->min_st = t->max_end = -1;
    t->cached = 1;
    for (int r = 0; r < t->size; r++) {
        const int64_t *a = &t->all[TP_ALL * r];
        any_err = (int)tp_max(any_err, a[2]);
        if (a[3] != t->all[3])
            mismatch = 1;
        if (a[5] < 0 || a[5] > r || a[6] < 0 || a[6] > INT_MAX)
            t->cached = 0;
        if (a[1] >= 0) {   /* rank r has data */
            t->min_st = t->min_st < 0 ? a[0] : tp_min(t->min_st, a[0]);
            t->max_end = tp_max(t->max_end, a[1]);
            /* ROMIO's interleave test: a rank's range starts before the previous one ends */
            if (prev_end >= 0 && a[0] < prev_end)
                t->interleaved = 1;
            prev_end = a[1];
        }
    }
    return t->err = any_err ? any_err : (mismatch ? PARIO_TP_EMISMATCH : PARIO_TP_OK);
}

/* Independent access (cb_mode disable, or automatic and no interleaving): every rank its
 * own extents, one io call.  No agreement on the outcome: every rank accessed its own
 * extents, and MPI lets each return its own error (MPI-4.1 §14.7), as ROMIO does when it
 * skips collective buffering; an extra collective per call would cost more than the call
 * on a busy node. */
static void independent(tp_call *t, int64_t *moved)
{
    int64_t n = t->n, m = 0, sp = 0;
    int64_t *pos = malloc((size_t)(n ? n : 1) * 3 * sizeof *pos);
    if (pos == NULL) {
        t->err = PARIO_TP_ENOMEM;
        return;
    }
    int64_t *o2 = pos + n, *l2 = pos + 2 * n;
    for (int64_t i = 0; i < n; i++) {
        if (t->len[i] > 0) {
            o2[m] = t->off[i];
            l2[m] = t->len[i];
            pos[m++] = sp;
        }
        sp += t->len[i];
    }
    if (m > 0 && t->p->io(t->p->io_ctx, t->write, -1, (int)m, o2, l2, pos, t->buf) != 0)
        t->err = PARIO_TP_EIO;
    free(pos);
    if (t->err == PARIO_TP_OK && moved)
        *moved = t->nbytes;
}

int pario_tp_collective(MPI_Comm comm, int write, int64_t n, const int64_t *off, const int64_t *len,
                        void *buf, const pario_tp_params *p, int64_t *moved)
{
    if (moved)
        *moved = 0;
    if (comm == MPI_COMM_NULL)
        return PARIO_TP_EINVAL;
    tp_call t;
    memset(&t, 0, sizeof t);
    t.comm = comm;
    t.write = write;
    t.n = n;
    t.off = off;
    t.len = len;
    t.buf = buf;
    t.p = p;
    if (PMPI_Comm_size(comm, &t.size) != MPI_SUCCESS || PMPI_Comm_rank(comm, &t.rank) != MPI_SUCCESS)
        return PARIO_TP_EMPI;
    t.err = check_params(&t);
    if (call_alloc(&t) != 0) {
        call_free(&t);
        return PARIO_TP_ENOMEM;
    }
    /* 1. offsets: a bad argument or a disagreement anywhere, or nobody has data, ends here */
    if (gather_offsets(&t) != PARIO_TP_OK || t.max_end < 0)
        goto out;
    if (p->cb_mode == PARIO_TP_CB_DISABLE || (p->cb_mode == PARIO_TP_CB_AUTOMATIC && !t.interleaved)) {
        independent(&t, moved);
        goto out;
    }
    /* 2. aggregators and file domains (the same outcome on every rank) */
    if (pario_tp_file_domains(&t) != PARIO_TP_OK)
        goto out;
    /* 3. this rank's requests to the aggregators */
    pario_tp_my_requests(&t);
    pario_tp_send_requests(&t);
    /* 4.-5. the aggregator: its sources' pieces, ordered, cut into cycles; the replies */
    if (t.my_agg >= 0) {
        int64_t nrecv = pario_tp_others_requests(&t);
        pario_tp_plan_domain(&t, nrecv);
        pario_tp_cycles(&t);
        pario_tp_send_replies(&t);
    }
    /* the source: its segments from every aggregator */
    pario_tp_recv_replies(&t);
    pario_tp_agree(&t);
    /* the cycles (writes: only when every rank agreed that all is in place) */
    if (!write || t.err == PARIO_TP_OK) {
        int ioerr = 0;
        int64_t ncycles = tp_max(t.agg_ok ? t.ncyc_local : 0, t.src_ok ? t.ncyc_src : 0);
        for (int64_t c = 0; c < ncycles; c++)
            pario_tp_exchange_cycle(&t, c, &ioerr);
        if (ioerr && t.err == PARIO_TP_OK)
            t.err = PARIO_TP_EIO;
    }
    pario_tp_finish(&t);
    if (t.err == PARIO_TP_OK && moved)
        *moved = t.nbytes;
out:
    call_free(&t);
    return t.err;
}
