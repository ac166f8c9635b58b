/* pario: one two-phase collective call's state, shared by the steps of collective/ (private).
 *
 * pario_tp_collective (twophase.c, the driver) runs the steps of ROMIO's extended
 * two-phase method over one tp_call, in the split ROMIO uses (ad_write_coll.c):
 *
 *   twophase.c   1. the offsets: arguments checked, the Allgather of every rank's range
 *                   (ROMIO: ADIOI_Calc_my_off_len and the Allgather of st/end offsets);
 *                   the independent path; the driver
 *   domains.c    2. aggregators and file domains (ADIOI_Calc_aggregator / _file_domains),
 *                3. this rank's requests cut at domain boundaries (ADIOI_Calc_my_req),
 *                4.-5. an aggregator's pieces: server pieces, their order (order.h), the
 *                   cycles and the layout of its cycle buffer
 *   exchange.c   the messages: requests to the aggregators and their replies
 *                   (ADIOI_Calc_others_req), the agreement before the data, every cycle's
 *                   data exchange and file access (ADIOI_Exch_and_write / Read_and_exch),
 *                   the final agreement
 *
 * Every step reads and writes the tp_call; an error sets t->err and the later steps of the
 * protocol still run (every message posted is matched, every rank returns one code).
 */
#ifndef PARIO_COLLECTIVE_CALL_H
#define PARIO_COLLECTIVE_CALL_H

#include <stdint.h>
#include <mpi.h>

#include "collective/twophase.h"

#define TP_MAX_OFF ((int64_t)1 << 62)
#define TP_MAX_CB ((int64_t)1 << 30)
#define TP_ALL 7   /* int64 per rank in the Allgather: st, en, error, signature, n, node pair */

/* Tags of the private communicator: the cycles' data, the plan messages (requests, replies),
 * the read acknowledgements. */
#define TP_TAG_DATA PARIO_TP_TAG
#define TP_TAG_META (PARIO_TP_TAG + 1)
#define TP_TAG_ACK (PARIO_TP_TAG + 2)

#define TP_MPICHK(t, call)                                                                   \
    do {                                                                                     \
        if ((call) != MPI_SUCCESS && (t)->err == PARIO_TP_OK)                                \
            (t)->err = PARIO_TP_EMPI;                                                        \
    } while (0)

static inline int64_t tp_min(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t tp_max(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int tp_cmp_i64(int64_t a, int64_t b) { return (a > b) - (a < b); }

/* An aggregator's segment: a piece (or the part of one that fits a cycle), with its cycle,
 * its source, the index of the source's piece it belongs to and its position in the cycle
 * buffer.  The segments are kept in the plan's order: a segment's index is its sequence
 * number (seq). */
typedef struct tp_seg {
    int64_t off, len, cyc, ridx, rpos;
    int32_t src;
} tp_seg;

typedef struct tp_src_msg {   /* this rank's message to / from one aggregator in one cycle */
    int64_t b, e, bytes, soff;
    int direct;
} tp_src_msg;

typedef struct tp_agg_key {   /* a rank in ROMIO's aggregator order */
    int local, node, rank, below;
} tp_agg_key;

typedef struct tp_call {
    /* the arguments */
    MPI_Comm comm;
    int size, rank, write;
    int64_t n;
    const int64_t *off, *len;
    char *buf;
    const pario_tp_params *p;
    int err;                    /* PARIO_TP_*: this rank's code so far */
    int64_t st, en, nbytes;     /* this rank's first byte, end, bytes (-1, -1, 0: none) */

    /* 1. the Allgather: TP_ALL int64 per rank */
    int64_t *all;
    int64_t min_st, max_end;    /* the aggregate access range */
    int interleaved, cached;    /* ROMIO's interleave test; every rank's node pair known */
    int pair[2];                /* this rank's node: leader, index on the node */

    /* 2. aggregators and file domains: domain k = [min_st + k fd, min_st + (k+1) fd) */
    int naggr, my_agg;          /* my_agg: this rank's domain, -1 if not an aggregator */
    int *aggs, *agg_of, *info;  /* aggs[k]: the rank of domain k; agg_of[rank]: k or -1 */
    tp_agg_key *keys;
    int64_t fd;
    int64_t klo, khi;           /* the domains this rank's range meets */
    int naggs_mine, nsrc, self_src;
    int *eagg, *esrc;           /* this rank's aggregators (rank order); the aggregator's sources */

    /* 3. this rank's pieces, cut at domain boundaries, grouped by domain */
    int64_t np;
    int64_t *po, *pl, *ps;      /* offset, length, position in buf */
    int64_t *dstart;            /* domain k's pieces: [dstart[k], dstart[k + 1]) */
    int64_t *meta;              /* the request messages, one per domain met */
    int64_t hdr[2];             /* a failed rank's request: {error, 0} */

    /* 4.-5. the aggregator */
    int64_t *ecnt, *efirst;     /* per source: its pieces, then its segments */
    int64_t *rmeta;             /* the sources' pieces (offset, length), in source order */
    int32_t *rsrc;
    tp_seg *segs;
    int64_t nseg;
    int64_t *sa, *sb, *ssrc;    /* segs by (cyc, src, seq), (cyc, seq), (src, cyc, seq) */
    int64_t ncyc_local, cbuf_size, max_cyc_segs, ngroups;
    int64_t *gstart, *istart;   /* per cycle: its first group, its first io segment */
    int64_t *gsrc, *gbytes, *gdisp;   /* per group (a source's segments in one cycle) */
    char *cbuf;
    int64_t *iooff, *iolen, *iopos;   /* one cycle's io list */
    int64_t *back;              /* the replies */
    int64_t rhdr[2];            /* a failed aggregator's reply: {error, 0} */
    int agg_ok;
    int64_t *ackv;              /* reads: every source's acknowledgement */
    MPI_Request *ackreq;
    int nackreq;

    /* the source: its segments from each aggregator */
    int64_t *acnt, *afirst;     /* per aggregator of eagg: its segments */
    int64_t *rbdsp, *rbcnt;     /* per rank: its segments in rback (int64 entries) */
    int64_t *cur, *soff;        /* per rank: the next segment, the place in scratch */
    int64_t *rback, *bpos;      /* (cycle, piece, offset, length) per segment; its place in buf */
    char *scratch;
    tp_src_msg *msgs;
    int64_t ncyc_src;
    int src_ok;
    int64_t ackval;

    /* sends in flight (plan messages, acknowledgements); one cycle's requests */
    MPI_Request *sreq, *reqs;
    int nsreq;

    /* the O(size) blocks the arrays above lie in */
    int64_t *rk;
    int *ik;
    MPI_Request *mreq;
} tp_call;

/* domains.c */
void pario_tp_node_cached(MPI_Comm comm, int pair[2]);
int pario_tp_file_domains(tp_call *t);
void pario_tp_my_requests(tp_call *t);
void pario_tp_plan_domain(tp_call *t, int64_t nrecv);
void pario_tp_cycles(tp_call *t);

/* exchange.c */
void pario_tp_send_requests(tp_call *t);
int64_t pario_tp_others_requests(tp_call *t);
void pario_tp_send_replies(tp_call *t);
void pario_tp_recv_replies(tp_call *t);
void pario_tp_agree(tp_call *t);
void pario_tp_exchange_cycle(tp_call *t, int64_t c, int *ioerr);
void pario_tp_finish(tp_call *t);

#endif
