/* pario: the messages of two-phase collective I/O (call.h): requests, replies, cycles.
 *
 * 3. Every rank sends (offset, length) of its pieces to the owning aggregators, one message
 *    to each domain its range meets (ROMIO's ADIOI_Calc_others_req, without its Alltoall of
 *    counts: the Allgather tells every aggregator whom to expect).
 * 4.-5. The aggregator replies to each source with the (cycle, piece, offset, length) of its
 *    segments once; per cycle only data moves, one contiguous message per (source,
 *    aggregator) pair (PMPI_Isend / PMPI_Irecv), from / into the user's buffer directly when
 *    the segments are consecutive in it (ROMIO's ADIOI_Exch_and_write / Read_and_exch, with
 *    pario's order of the pieces).  The io callback gets the cycle's pieces in the plan's
 *    order with their positions in the aggregator's buffer.
 *
 * Collectives: (writes) one Allreduce of the error code before any data moves, and a final
 * Allreduce of the error code; everything else is point to point between the ranks that
 * share pieces.  A read needs no agreement before its data: each source acknowledges its
 * plan to its aggregators, which send data only to sources that acknowledged (the
 * acknowledgements travel while the aggregators read the file), and the final Allreduce
 * gives every rank the one code.
 */
#include "collective/call.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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
    PMPI_Recv(&none, 0, MPI_INT64_T, src, TP_TAG_META, comm, MPI_STATUS_IGNORE);
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
        } else if (PMPI_Probe(src[i], TP_TAG_META, comm, &s) != MPI_SUCCESS ||
                   PMPI_Get_count_c(&s, MPI_INT64_T, &c) != MPI_SUCCESS || c < 2 || (c - 2) % w != 0) {
            cnt[i] = -1;   /* cannot happen: drained below */
            err = (int)tp_max(err, PARIO_TP_EMPI);
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
        if (PMPI_Recv(m, (int)(2 + w * cnt[i]), MPI_INT64_T, src[i], TP_TAG_META, comm, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
            err = PARIO_TP_EMPI;
            continue;
        }
        if (m[0] < 0 || m[0] > PARIO_TP_EMPI || m[1] != cnt[i])
            err = PARIO_TP_EMPI;   /* cannot happen */
        else
            err = (int)tp_max(err, m[0]);
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
            err = (int)tp_max(err, ack_failed(ackv[esrc[i]]) ? ackv[esrc[i]] : PARIO_TP_EMPI);
    return err;
}

/* ------------------------------------------------------------------ 3. the requests */

/* This rank's request to the owner of every domain its range meets (a failed rank's:
 * {error, 0}); the aggregator's own domain is read in place. */
void pario_tp_send_requests(tp_call *t)
{
    t->hdr[0] = t->err;
    for (int64_t k = t->klo; k <= t->khi; k++) {
        if (t->aggs[k] == t->rank)
            continue;
        const int64_t *m = t->err ? t->hdr : t->meta + 2 * (t->dstart[k] + k - t->klo);
        int cnt = t->err ? 2 : (int)(2 + 2 * (t->dstart[k + 1] - t->dstart[k]));
        TP_MPICHK(t, PMPI_Isend(m, cnt, MPI_INT64_T, t->aggs[k], TP_TAG_META, t->comm, &t->sreq[t->nsreq++]));
    }
}

/* The aggregator: its sources' pieces in rank order (the "array indexed by process rank"
 * that Algorithm 1 walks, seed 004 l. 146-148) into rmeta / rsrc; for a read, the
 * receives of the sources' acknowledgements are posted.  Returns the number of pieces. */
int64_t pario_tp_others_requests(tp_call *t)
{
    int64_t self_cnt = t->self_src && t->err == PARIO_TP_OK ? t->dstart[t->my_agg + 1] - t->dstart[t->my_agg] : 0;
    t->err = recv_plan(t->comm, t->err, t->nsrc, t->esrc, t->rank, self_cnt, 2, &t->rmeta, t->efirst, t->ecnt);
    if (!t->write)   /* the sources' acknowledgements of the replies (reads, pario_tp_agree) */
        for (int i = 0; i < t->nsrc; i++)
            if (t->esrc[i] != t->rank)
                TP_MPICHK(t, PMPI_Irecv(&t->ackv[t->esrc[i]], 1, MPI_INT64_T, t->esrc[i], TP_TAG_ACK, t->comm,
                                        &t->ackreq[t->nackreq++]));
    int64_t nrecv = 0;
    for (int i = 0; i < t->nsrc; i++)
        nrecv += t->ecnt[i] > 0 ? t->ecnt[i] : 0;
    if (t->err == PARIO_TP_OK && (t->rsrc = malloc((size_t)(nrecv + 1) * sizeof *t->rsrc)) == NULL)
        t->err = PARIO_TP_ENOMEM;
    if (t->err != PARIO_TP_OK)
        return nrecv;
    for (int i = 0; i < t->nsrc; i++) {
        if (t->esrc[i] == t->rank && t->ecnt[i] > 0)
            memcpy(t->rmeta + 2 * t->efirst[i], t->meta + 2 * (t->dstart[t->my_agg] + t->my_agg - t->klo + 1),
                   (size_t)(2 * t->ecnt[i]) * sizeof *t->rmeta);
        for (int64_t q = t->efirst[i]; q < t->efirst[i] + t->ecnt[i]; q++)
            t->rsrc[q] = t->esrc[i];
    }
    return nrecv;
}

/* ------------------------------------------------------------------ 4.-5. the replies */

/* The aggregator's replies: per source {error, segments} + (cycle, piece index in the
 * source's list, offset, length) per segment, in (source, cycle, seq) order (a source whose
 * range meets the domain without a piece in it gets none); a failed aggregator's: {error, 0}.
 * efirst[i] / ecnt[i] become where source i's message starts in back and its segments. */
void pario_tp_send_replies(tp_call *t)
{
    int64_t nseg = t->nseg, nsrc = t->nsrc;
    if (t->err == PARIO_TP_OK && (t->back = malloc((size_t)(nseg * 4 + 2 * nsrc + 2) * sizeof *t->back)) == NULL)
        t->err = PARIO_TP_ENOMEM;
    if (t->err == PARIO_TP_OK) {
        int64_t q = 0;
        for (int i = 0; i < nsrc; i++) {
            int64_t *h = t->back + 4 * q + 2 * (int64_t)i, q0 = q;
            for (; q < nseg && t->segs[t->ssrc[q]].src == t->esrc[i]; q++) {
                const tp_seg *g = &t->segs[t->ssrc[q]];
                int64_t *b = h + 2 + 4 * (q - q0);
                b[0] = g->cyc;
                b[1] = g->ridx - t->efirst[i];
                b[2] = g->off;
                b[3] = g->len;
            }
            h[0] = PARIO_TP_OK;
            h[1] = q - q0;
            if (2 + 4 * (q - q0) > INT_MAX)
                t->err = PARIO_TP_ETOOBIG;
            t->efirst[i] = 4 * q0 + 2 * (int64_t)i;
            t->ecnt[i] = q - q0;
        }
        if (q != nseg)
            t->err = PARIO_TP_EMPI;   /* a segment of a source that sent nothing: cannot happen */
    }
    t->agg_ok = t->err == PARIO_TP_OK;
    t->rhdr[0] = t->err;
    for (int i = 0; i < nsrc; i++) {
        if (t->esrc[i] == t->rank)
            continue;
        if (t->agg_ok)
            TP_MPICHK(t, PMPI_Isend(t->back + t->efirst[i], (int)(2 + 4 * t->ecnt[i]), MPI_INT64_T, t->esrc[i],
                                    TP_TAG_META, t->comm, &t->sreq[t->nsreq++]));
        else
            TP_MPICHK(t, PMPI_Isend(t->rhdr, 2, MPI_INT64_T, t->esrc[i], TP_TAG_META, t->comm, &t->sreq[t->nsreq++]));
    }
}

/* The source's segments from aggregator rank r (rback[4 q0 .. 4 q1)): where each lies in buf
 * (bpos), checked; returns the largest run of one cycle's segments that is not consecutive
 * in buf (it travels through scratch), -1 for a corrupt plan message (cannot happen). */
static int64_t source_positions(tp_call *t, int r)
{
    int k = t->agg_of[r];
    int64_t q0 = t->rbdsp[r] / 4, q1 = (t->rbdsp[r] + t->rbcnt[r]) / 4, run = 0, maxrun = 0;
    const int64_t *rb = t->rback;
    int direct = 1;
    for (int64_t q = q0; q < q1; q++) {
        int64_t c = rb[4 * q], idx = rb[4 * q + 1], o = rb[4 * q + 2], l = rb[4 * q + 3];
        int64_t j = k >= 0 ? t->dstart[k] + idx : 0;
        if (k < 0 || idx < 0 || idx >= t->dstart[k + 1] - t->dstart[k] || c < 0 || c >= INT_MAX ||
            (q > q0 && c < rb[4 * (q - 1)]) || l < 1 || l > INT_MAX || o < t->po[j] || o + l > t->po[j] + t->pl[j])
            return -1;
        t->ncyc_src = tp_max(t->ncyc_src, c + 1);
        t->bpos[q] = t->ps[j] + (o - t->po[j]);
        if (q == q0 || c != rb[4 * (q - 1)]) {   /* a new cycle's message */
            if (!direct)
                maxrun = tp_max(maxrun, run);
            run = 0;
            direct = 1;
        } else if (t->bpos[q] != t->bpos[q - 1] + rb[4 * (q - 1) + 3]) {
            direct = 0;
        }
        run += l;
    }
    if (!direct)
        maxrun = tp_max(maxrun, run);
    t->cur[r] = q0;
    return maxrun;
}

/* The source's side: the segments each aggregator returns (its own list, when it is its
 * own aggregator, from its aggregator side), where they are in buf, the scratch memory. */
void pario_tp_recv_replies(tp_call *t)
{
    int64_t self_cnt = 0;
    for (int i = 0; t->agg_ok && i < t->nsrc; i++)
        if (t->esrc[i] == t->rank)
            self_cnt = t->ecnt[i];
    int serr = recv_plan(t->comm, t->err, t->naggs_mine, t->eagg, t->my_agg >= 0 && t->self_src ? t->rank : -1,
                         self_cnt, 4, &t->rback, t->afirst, t->acnt);
    t->err = (int)tp_max(t->err, serr);
    for (int r = 0; r < t->size; r++)
        t->rbdsp[r] = t->rbcnt[r] = 0;
    if (t->err == PARIO_TP_OK) {
        int64_t nnb = 0;
        for (int i = 0; i < t->naggs_mine; i++) {
            t->rbdsp[t->eagg[i]] = 4 * t->afirst[i];
            t->rbcnt[t->eagg[i]] = 4 * t->acnt[i];
            nnb += t->acnt[i];
            if (t->eagg[i] == t->rank)   /* this rank's own list, from its aggregator side */
                for (int j = 0; j < t->nsrc; j++)
                    if (t->esrc[j] == t->rank && t->ecnt[j] > 0)
                        memcpy(t->rback + 4 * t->afirst[i], t->back + t->efirst[j] + 2,
                               (size_t)(4 * t->ecnt[j]) * sizeof *t->rback);
        }
        if ((t->bpos = malloc((size_t)(nnb + 1) * sizeof *t->bpos)) == NULL)
            t->err = PARIO_TP_ENOMEM;
    }
    int64_t scratch_size = 0;
    for (int r = 0; t->err == PARIO_TP_OK && r < t->size; r++) {
        int64_t maxrun = source_positions(t, r);
        if (maxrun < 0) {
            t->err = PARIO_TP_EMPI;   /* a corrupt plan message: cannot happen */
            break;
        }
        t->soff[r] = scratch_size;
        if (r != t->rank)
            scratch_size += maxrun;
    }
    if (t->err == PARIO_TP_OK && scratch_size > 0 && (t->scratch = malloc((size_t)scratch_size)) == NULL)
        t->err = PARIO_TP_ENOMEM;
    t->src_ok = t->err == PARIO_TP_OK;
}

/* Before the data.  Writes: every rank learns every error before any data moves (nothing is
 * written unless every rank's plan and memory are in place).  Reads: each source
 * acknowledges its replies to its aggregators, which send it data only on a good
 * acknowledgement (a source that failed posts no receive); moving data to the ranks that
 * can take it is harmless, and the final Allreduce gives every rank the one code.  No
 * agreement before the data: the acknowledgements arrive while the aggregators read the
 * file.  Then the plan messages sent are received (or without waiting for any data: the
 * ack receives were posted with the requests'). */
void pario_tp_agree(tp_call *t)
{
    if (t->write) {
        int gerr = 0;
        TP_MPICHK(t, PMPI_Allreduce(&t->err, &gerr, 1, MPI_INT, MPI_MAX, t->comm));
        t->err = (int)tp_max(gerr, t->err);
    } else {
        t->ackval = t->err;
        for (int i = 0; i < t->naggs_mine; i++)
            if (t->eagg[i] != t->rank)
                TP_MPICHK(t, PMPI_Isend(&t->ackval, 1, MPI_INT64_T, t->eagg[i], TP_TAG_ACK, t->comm,
                                        &t->sreq[t->nsreq++]));
    }
    TP_MPICHK(t, PMPI_Waitall(t->nsreq, t->sreq, MPI_STATUSES_IGNORE));
    t->nsreq = 0;
}

/* ------------------------------------------------------------------ the cycles */

typedef struct tp_cycle {   /* one cycle on this rank */
    int64_t c;
    int agg_here;           /* this rank aggregates in this cycle */
    int64_t g0, g1;         /* its groups */
    int64_t self_disp;      /* this rank's own group in cbuf */
    int64_t cyc_bytes;
    int cnt;                /* its io list: iooff / iolen / iopos[cnt] */
    int nreq;
} tp_cycle;

/* Source side: this cycle's segments for every aggregator (one message each). */
static void source_messages(tp_call *t, int64_t c)
{
    for (int r = 0; t->src_ok && r < t->size; r++) {
        tp_src_msg *mg = &t->msgs[r];
        int64_t end = (t->rbdsp[r] + t->rbcnt[r]) / 4, b = t->cur[r], e = b;
        mg->bytes = 0;
        mg->direct = 1;
        while (e < end && t->rback[4 * e] == c) {
            if (e > b && t->bpos[e] != t->bpos[e - 1] + t->rback[4 * (e - 1) + 3])
                mg->direct = 0;
            mg->bytes += t->rback[4 * e + 3];
            e++;
        }
        mg->b = b;
        mg->e = e;
        mg->soff = t->soff[r];
        t->cur[r] = e;
    }
}

/* Aggregator side: this cycle's groups, one per source, back to back in cbuf, and its
 * pieces in the plan's order with their place in cbuf (the io list). */
static void aggregator_cycle(tp_call *t, tp_cycle *y)
{
    y->agg_here = t->agg_ok && y->c < t->ncyc_local;
    y->g0 = y->agg_here ? t->gstart[y->c] : 0;
    y->g1 = y->agg_here ? t->gstart[y->c + 1] : 0;
    for (int64_t g = y->g0; g < y->g1; g++) {
        if (t->gsrc[g] == t->rank)
            y->self_disp = t->gdisp[g];
        y->cyc_bytes = tp_max(y->cyc_bytes, t->gdisp[g] + t->gbytes[g]);
    }
    if (!y->agg_here)
        return;
    for (int64_t q = t->istart[y->c]; q < t->istart[y->c + 1]; q++) {
        const tp_seg *g = &t->segs[t->sb[q]];
        t->iooff[y->cnt] = g->off;
        t->iolen[y->cnt] = g->len;
        t->iopos[y->cnt] = g->rpos;
        y->cnt++;
    }
}

/* Copy this rank's own segments of the cycle between buf and cbuf (to_cbuf: a write). */
static void own_data(tp_call *t, const tp_cycle *y, int to_cbuf)
{
    const tp_src_msg *me = &t->msgs[t->rank];
    for (int64_t q = me->b, at = y->self_disp; q < me->e; at += t->rback[4 * q + 3], q++) {
        if (to_cbuf)
            memcpy(t->cbuf + at, t->buf + t->bpos[q], (size_t)t->rback[4 * q + 3]);
        else
            memcpy(t->buf + t->bpos[q], t->cbuf + at, (size_t)t->rback[4 * q + 3]);
    }
}

/* A write cycle (ROMIO's ADIOI_W_Exchange_data, then the write): the sources' data into
 * the aggregators' buffers, then the aggregator's io callback. */
static void cycle_write(tp_call *t, tp_cycle *y, int *ioerr)
{
    for (int64_t g = y->g0; g < y->g1; g++)
        if (t->gsrc[g] != t->rank)
            TP_MPICHK(t, PMPI_Irecv(t->cbuf + t->gdisp[g], (int)t->gbytes[g], MPI_BYTE, (int)t->gsrc[g], TP_TAG_DATA,
                                    t->comm, &t->reqs[y->nreq++]));
    for (int r = 0; r < t->size; r++) {
        tp_src_msg *mg = &t->msgs[r];
        if (mg->bytes == 0 || r == t->rank)
            continue;
        char *from = t->buf + t->bpos[mg->b];
        if (!mg->direct) {   /* pack */
            from = t->scratch + mg->soff;
            for (int64_t q = mg->b, at = 0; q < mg->e; at += t->rback[4 * q + 3], q++)
                memcpy(from + at, t->buf + t->bpos[q], (size_t)t->rback[4 * q + 3]);
        }
        TP_MPICHK(t, PMPI_Isend(from, (int)mg->bytes, MPI_BYTE, r, TP_TAG_DATA, t->comm, &t->reqs[y->nreq++]));
    }
    own_data(t, y, 1);
    TP_MPICHK(t, PMPI_Waitall(y->nreq, t->reqs, MPI_STATUSES_IGNORE));
    /* no write after a failed exchange: a receive that failed (a sender died, the
     * communicator returns errors) left undefined bytes in cbuf, and a write of them would
     * put bytes in the file that no rank wrote (serve_kill one-rank 16000183) */
    if (y->cnt > 0 && !*ioerr && t->err == PARIO_TP_OK &&
        t->p->io(t->p->io_ctx, 1, (int)y->c, y->cnt, t->iooff, t->iolen, t->iopos, t->cbuf) != 0)
        *ioerr = 1;   /* no more writes; the exchange goes on so that no rank waits forever */
}

/* A read cycle (ROMIO's ADIOI_R_Exchange_data after the read): the receives first, so that
 * the aggregators' sends find them posted; the aggregator's io callback; the data to the
 * sources that acknowledged their plans. */
static void cycle_read(tp_call *t, tp_cycle *y, int *ioerr)
{
    for (int r = 0; t->src_ok && r < t->size; r++) {
        tp_src_msg *mg = &t->msgs[r];
        if (mg->bytes == 0 || r == t->rank)
            continue;
        char *into = mg->direct ? t->buf + t->bpos[mg->b] : t->scratch + mg->soff;
        TP_MPICHK(t, PMPI_Irecv(into, (int)mg->bytes, MPI_BYTE, r, TP_TAG_DATA, t->comm, &t->reqs[y->nreq++]));
    }
    if (y->cnt > 0 && !*ioerr && t->p->io(t->p->io_ctx, 0, (int)y->c, y->cnt, t->iooff, t->iolen, t->iopos, t->cbuf) != 0)
        *ioerr = 1;
    if (y->cnt > 0 && *ioerr)
        memset(t->cbuf, 0, (size_t)y->cyc_bytes);   /* defined bytes; the call fails anyway */
    if (y->agg_here && t->nackreq > 0) {   /* the acknowledgements, once */
        TP_MPICHK(t, PMPI_Waitall(t->nackreq, t->ackreq, MPI_STATUSES_IGNORE));
        t->nackreq = 0;
        t->err = acks_error(t->err, t->nsrc, t->esrc, t->rank, t->ackv);
    }
    for (int64_t g = y->g0; g < y->g1; g++)
        if (t->gsrc[g] != t->rank && !ack_failed(t->ackv[t->gsrc[g]]))
            TP_MPICHK(t, PMPI_Isend(t->cbuf + t->gdisp[g], (int)t->gbytes[g], MPI_BYTE, (int)t->gsrc[g], TP_TAG_DATA,
                                    t->comm, &t->reqs[y->nreq++]));
    if (t->src_ok)
        own_data(t, y, 0);
    TP_MPICHK(t, PMPI_Waitall(y->nreq, t->reqs, MPI_STATUSES_IGNORE));
    for (int r = 0; t->src_ok && r < t->size; r++) {   /* unpack */
        tp_src_msg *mg = &t->msgs[r];
        if (mg->bytes == 0 || r == t->rank || mg->direct)
            continue;
        for (int64_t q = mg->b, at = 0; q < mg->e; at += t->rback[4 * q + 3], q++)
            memcpy(t->buf + t->bpos[q], t->scratch + mg->soff + at, (size_t)t->rback[4 * q + 3]);
    }
}

/* Cycle c.  It only moves data between the ranks that share a segment in it, so each rank
 * runs the cycles it takes part in (seed 004 §2.2: "all aggregators need to be synchronized
 * to make sure the buffer can be safely used": cycle c of an aggregator and cycle c of its
 * sources match their messages).  ioerr: an io callback failed (no more file access). */
void pario_tp_exchange_cycle(tp_call *t, int64_t c, int *ioerr)
{
    tp_cycle y = { .c = c };
    source_messages(t, c);
    aggregator_cycle(t, &y);
    if (t->write)
        cycle_write(t, &y, ioerr);
    else
        cycle_read(t, &y, ioerr);
}

/* The end of the call: an aggregator without cycles (or failed) still takes its
 * acknowledgements, the sends complete, and every rank returns the one code: after the data
 * phase, or (writes) with the code agreed before it -- the same Allreduce on every rank
 * either way. */
void pario_tp_finish(tp_call *t)
{
    if (t->nackreq > 0) {
        TP_MPICHK(t, PMPI_Waitall(t->nackreq, t->ackreq, MPI_STATUSES_IGNORE));
        t->err = acks_error(t->err, t->nsrc, t->esrc, t->rank, t->ackv);
    }
    if (t->nsreq > 0)
        TP_MPICHK(t, PMPI_Waitall(t->nsreq, t->sreq, MPI_STATUSES_IGNORE));
    int gerr = 0;
    if (PMPI_Allreduce(&t->err, &gerr, 1, MPI_INT, MPI_MAX, t->comm) != MPI_SUCCESS)
        gerr = (int)tp_max(gerr, PARIO_TP_EMPI);
    t->err = (int)tp_max(gerr, t->err);
}
