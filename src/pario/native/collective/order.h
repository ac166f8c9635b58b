/* pario serve: the request orders of two-phase collective I/O (seed 004, HACIO).
 *
 * The C twin of pario.plan.collective (romcio_order, cacio_order, hacio_order,
 * request_order): given one aggregator's file-domain pieces -- a piece is a contiguous
 * range of the file that lies on one server -- with the file offset, the server and the
 * server kind (0 = HServer/HDD, 1 = SServer/SSD) of each piece, return the order in which
 * the aggregator issues them and fills its collective buffer (cycle 0 gets the first
 * buffer-full).  The layout mapping (which server and kind a piece lies on) is the
 * caller's: it comes in as arrays.
 *
 * - ROMCIO: logical file-offset order (seed 004 §2.2, Fig. 3).
 * - CACIO: the pieces grouped by server, the groups issued starting at server position
 *   (aggregator mod n) of the layout's server list (seed 004 §2.2, Fig. 4-5; Algorithm 1
 *   lines 15-25 without the type split, as pario.plan.collective.cacio_order).
 * - HACIO: seed 004 §3.2 Algorithm 1 (buckets T[type][number] filled walking the
 *   processes in rank order, line 7 drops a piece already in its bucket; buckets appended
 *   type 0 first, inside a type from server number (a + i) mod count).
 *
 * Every function is pure; no MPI.
 */
#ifndef PARIO_SERVE_ORDER_H
#define PARIO_SERVE_ORDER_H

#include <stdint.h>

enum pario_order_method {
    PARIO_ORDER_ROMCIO = 0,
    PARIO_ORDER_CACIO = 1,
    PARIO_ORDER_HACIO = 2
};

/* Return codes of pario_request_order. */
#define PARIO_ORDER_OK 0
#define PARIO_ORDER_EINVAL 1    /* bad argument (n < 0, NULL array, unknown method, ...) */
#define PARIO_ORDER_ENOMEM 2
#define PARIO_ORDER_ESERVER 3   /* a piece's server is not in the server list (of its kind) */
#define PARIO_ORDER_EKIND 4     /* a piece's kind is not 0 or 1 (HACIO) */

/* The layout's servers, in the layout's order (pario.mpi.placement.Placement.servers), and
 * the kind of each listed server.  CACIO numbers servers by their position in this list;
 * HACIO numbers them by their position among the listed servers of the same kind
 * (Placement.kind_servers: Server_number() of Algorithm 1).  n == 0 (or a NULL pointer to
 * this struct) means "the distinct servers of the pieces, sorted" (and, for HACIO, the
 * distinct servers of each kind, sorted), as the Python functions default. */
typedef struct pario_order_servers {
    int32_t n;
    const int32_t *server;   /* n server ids */
    const int32_t *kind;     /* n kinds (0 or 1); may be NULL when only CACIO is used */
} pario_order_servers;

/* "romcio" | "cacio" | "hacio" (case-insensitive) -> PARIO_ORDER_*, else -1. */
int pario_order_parse(const char *name);
/* PARIO_ORDER_* -> its name, or "?" */
const char *pario_order_name(int method);
/* A one-line description of a PARIO_ORDER_E* code. */
const char *pario_order_strerror(int code);

/* Order n pieces.  offset[n] (file offsets), server[n], kind[n] (0/1), proc[n] (rank of
 * the process each piece comes from; NULL = one process) and `aggregator` (the aggregator's
 * index among the aggregators, >= 0).  server/kind may be NULL for ROMCIO; kind may be
 * NULL for CACIO.
 *
 * Writes *norder indices into order[] (room for n): the pieces to issue, in order.  HACIO
 * (Algorithm 1 line 7) leaves out a piece whose (offset, server) is already in its bucket,
 * so *norder <= n; ROMCIO and CACIO give a permutation of 0..n-1.  twin[n] (may be NULL)
 * receives, for every piece, the index of the issued piece it stands for (itself when it
 * is issued, the piece with the same offset and server issued first otherwise).
 * Returns PARIO_ORDER_OK or an error code (then order/twin are unspecified). */
int pario_request_order(int method, int64_t n, const int64_t *offset, const int32_t *server,
                        const int32_t *kind, const int32_t *proc, int64_t aggregator,
                        const pario_order_servers *servers, int64_t *order, int64_t *norder,
                        int64_t *twin);

/* A stable sort of the index array idx[0..n) by cmp(ctx, a, b) (< 0, 0, > 0 on the two
 * indices).  Bottom-up merge sort, O(n log n), allocates n indices.  0 or -1 (no memory). */
typedef int (*pario_index_cmp)(const void *ctx, int64_t a, int64_t b);
int pario_sort_index(int64_t *idx, int64_t n, pario_index_cmp cmp, const void *ctx);

#endif
