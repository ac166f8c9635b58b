/* pario: two-phase collective I/O in C with pario's request orders (issue 16).
 *
 * The C twin of pario.mpi.twophase.collective_io (docs/serve-twophase.md): a collective
 * read or write of an arbitrary list of file extents per rank, the data in one contiguous
 * user buffer (the caller packs / unpacks its memory datatype).  Every rank of `comm`
 * calls pario_tp_collective; the aggregators split the aggregate access range into file
 * domains, order their pieces with the plan's order (order.h: pario_orders[], ROMCIO /
 * CACIO / HACIO of seed 004 Algorithm 1), fill cb_buffer_size bytes per cycle, exchange the
 * data with the ranks (PMPI_ calls only) and access the file through the caller's io callback: where the bytes finally go
 * (a POSIX file, pario's store) is not this file's business.
 *
 * `comm` should be private to the library (a duplicate of the file's communicator, as
 * ROMIO keeps one): the exchange uses point-to-point messages with tags PARIO_TP_TAG to
 * PARIO_TP_TAG + 2, and the node of each rank is cached on it (an attribute) after the
 * first call that chose aggregators.
 */
#ifndef PARIO_COLLECTIVE_TWOPHASE_H
#define PARIO_COLLECTIVE_TWOPHASE_H

#include <stdint.h>
#include <mpi.h>

#include "collective/order.h"

#define PARIO_TP_TAG 0x7043

/* Return codes: every rank returns the same code (the largest raised on any rank), except
 * that an io failure of the independent path (cb_mode disable, or automatic without
 * interleaving) is returned by the ranks it happened on only (MPI-4.1 §14.7). */
#define PARIO_TP_OK 0
#define PARIO_TP_EINVAL 1     /* bad argument on some rank */
#define PARIO_TP_EMISMATCH 2  /* ranks passed different parameters (order, buffer, aggregators ...) */
#define PARIO_TP_ENOMEM 3
#define PARIO_TP_ETOOBIG 4    /* a count does not fit the MPI int counts used */
#define PARIO_TP_ELAYOUT 5    /* the layout callback failed or named a server not in its list */
#define PARIO_TP_EIO 6        /* the io callback failed */
#define PARIO_TP_EMPI 7       /* an MPI call failed */

/* romio_cb_read / romio_cb_write */
enum pario_tp_cb_mode {
    PARIO_TP_CB_ENABLE = 0,     /* always two-phase */
    PARIO_TP_CB_AUTOMATIC = 1,  /* two-phase only when the ranks' ranges interleave (ROMIO's test) */
    PARIO_TP_CB_DISABLE = 2     /* every rank accesses its own extents */
};

/* The file accesses.  n pieces to write (write = 1) or read (write = 0), to be issued in
 * the order given (i = 0..n-1): piece i is the file range [off[i], off[i] + len[i]) and its
 * bytes are buf[pos[i] .. pos[i] + len[i]).  `cycle` is the two-phase cycle (0, 1, ...) of
 * an aggregator's call, -1 for a rank's own extents (cb_mode disable / automatic without
 * interleaving).  A read must fill every byte (bytes past the end of the file read as 0).
 * Return 0, or nonzero on failure (reported as PARIO_TP_EIO on every rank).  Pieces of one
 * call never overlap unless the ranks' requests do. */
typedef int (*pario_tp_io_fn)(void *ctx, int write, int cycle, int n, const int64_t *off,
                              const int64_t *len, const int64_t *pos, char *buf);

/* The layout: split [off, off + len) -- set *piece_len (1..len) to the length of its first
 * part that lies on one server, *server to that server's id and *kind to its kind
 * (0 = HServer, 1 = SServer).  Return 0, nonzero on failure. */
typedef int (*pario_tp_map_fn)(void *ctx, int64_t off, int64_t len, int64_t *piece_len,
                               int32_t *server, int32_t *kind);

typedef struct pario_tp_layout {
    pario_tp_map_fn map;
    void *ctx;
    /* The layout's servers in its order and their kinds (pario_order_servers); nservers 0:
     * the distinct servers of each aggregator's pieces, sorted (the Python default). */
    int32_t nservers;
    const int32_t *servers;
    const int32_t *kinds;
} pario_tp_layout;

/* An aggregator's plan, reported once per call after its pieces were ordered (optional):
 * its index among the aggregators, its file domain [lo, hi), and its n pieces (units cut at
 * server boundaries) -- piece order[q] (q = 0..m-1) is the q-th issued, its offset, length,
 * server, kind and source rank off[], len[], server[], kind[], proc[]; a piece HACIO left out
 * (line 7) is not in order[].  The arrays live for the duration of the call only.  What
 * pario.mpi.File.last_schedule shows. */
typedef void (*pario_tp_report_fn)(void *ctx, int aggregator, int64_t lo, int64_t hi, int64_t n,
                                   const int64_t *off, const int64_t *len, const int32_t *server,
                                   const int32_t *kind, const int32_t *proc, int64_t m, const int64_t *order);

typedef struct pario_tp_params {
    int order;                 /* a row of pario_orders[] (order.h); without a layout: ROMCIO */
    int64_t cb_buffer_size;    /* bytes per aggregator and cycle, 1 .. 2^30 */
    int cb_nodes;              /* aggregators when no list is given; <= 0: one per node */
    int naggregators;          /* > 0: the aggregator ranks, in file-domain order (a plan's list) */
    const int *aggregators;
    int cb_mode;               /* PARIO_TP_CB_* */
    const pario_tp_layout *layout;   /* NULL: no placement (every piece as received, ROMCIO) */
    pario_tp_io_fn io;
    void *io_ctx;
    pario_tp_report_fn report;       /* NULL (the served runtime): no report */
    void *report_ctx;
} pario_tp_params;

/* One collective access.  n extents (off[i], len[i]) in the rank's data order; buf holds
 * (write) or receives (read) their sum(len) bytes back to back.  Offsets and off + len must
 * lie in [0, 2^62]; zero-length extents are allowed and ignored.  *moved (may be NULL)
 * receives this rank's bytes on success.  Collective over comm; returns PARIO_TP_*. */
int pario_tp_collective(MPI_Comm comm, int write, int64_t n, const int64_t *off,
                        const int64_t *len, void *buf, const pario_tp_params *p,
                        int64_t *moved);

/* ROMIO-like aggregators, as pario.mpi.twophase.choose_aggregators: the first rank of every
 * node (MPI_COMM_TYPE_SHARED), then the second of every node, ...; cb_nodes <= 0 means one
 * per node; at most the communicator size.  ranks[] needs room for the communicator size;
 * *n receives the count; ranks come out sorted.  Collective; returns PARIO_TP_*. */
int pario_tp_choose_aggregators(MPI_Comm comm, int cb_nodes, int *ranks, int *n);

/* A one-line description of a PARIO_TP_* code. */
const char *pario_tp_strerror(int code);

#endif
