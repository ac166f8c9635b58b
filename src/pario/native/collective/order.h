/* pario: the request orders of two-phase collective I/O (seed 004, HACIO), one table.
 *
 * Given one aggregator's file-domain pieces -- a piece is a contiguous range of the file
 * that lies on one server -- with the file offset, the server and the server kind
 * (0 = HServer/HDD, 1 = SServer/SSD) of each piece, an order returns the sequence in which
 * the aggregator issues them and fills its collective buffer (cycle 0 gets the first
 * buffer-full).  The layout mapping (which server and kind a piece lies on) is the
 * caller's: it comes in as arrays.
 *
 * pario_orders[] is the one list of the orders, {name, fn} per row: the two-phase I/O
 * (twophase.h: pario_tp_params.order is a row index), the served MPI-IO front end
 * (interpose/serve.c: the pario_order hint and the plan's collective_order, looked up with
 * pario_order_find) and Python (pario.plan.collective.ORDERS and request_order, through
 * the extension pario.native._rmt: python/pyorder.c) all take the orders from it.  A new
 * order is one pario_order_fn in order.c and one row of the table (and its tests:
 * tests/plan/test_order_contract.py checks every row).
 *
 * - romcio: logical file-offset order (seed 004 §2.2, Fig. 3).
 * - cacio: the pieces grouped by server, the groups issued starting at server position
 *   (aggregator mod n) of the layout's server list (seed 004 §2.2, Fig. 4-5; Algorithm 1
 *   lines 15-25 without the type split).
 * - hacio: seed 004 §3.2 Algorithm 1 (buckets T[type][number] filled walking the
 *   processes in rank order, line 7 drops a piece already in its bucket; buckets appended
 *   type 0 first, inside a type from server number (a + i) mod count).
 *
 * Every function is pure; no MPI.
 */
#ifndef PARIO_COLLECTIVE_ORDER_H
#define PARIO_COLLECTIVE_ORDER_H

#include <stdint.h>

/* Row 0 of pario_orders[] is ROMCIO, the default: the order without a layout. */
#define PARIO_ORDER_ROMCIO 0

/* Return codes of the orders and of pario_request_order. */
#define PARIO_ORDER_OK 0
#define PARIO_ORDER_EINVAL 1    /* bad argument (n < 0, NULL array, unknown method, ...) */
#define PARIO_ORDER_ENOMEM 2
#define PARIO_ORDER_ESERVER 3   /* a piece's server is not in the server list (of its kind) */
#define PARIO_ORDER_EKIND 4     /* a piece's kind is not 0 or 1 (HACIO) */

/* The layout's servers, in the layout's order (pario.mpi.placement.Placement.servers), and
 * the kind of each listed server.  CACIO numbers servers by their position in this list;
 * HACIO numbers them by their position among the listed servers of the same kind
 * (Server_number() of Algorithm 1).  n == 0 (or a NULL pointer to this struct) means "the
 * distinct servers of the pieces, sorted" (and, for HACIO, the distinct servers of each
 * kind, sorted). */
typedef struct pario_order_servers {
    int32_t n;
    const int32_t *server;   /* n server ids */
    const int32_t *kind;     /* n kinds (0 or 1); may be NULL when no order asks for kinds */
} pario_order_servers;

/* One aggregator's pieces. */
typedef struct pario_order_in {
    int64_t n;
    const int64_t *offset;     /* n file offsets */
    const int32_t *server;     /* n servers; NULL: no layout (an order that needs it: EINVAL) */
    const int32_t *kind;       /* n kinds (0/1); NULL: none (an order that needs it: EINVAL) */
    const int32_t *proc;       /* n ranks of the process each piece comes from; NULL: one process */
    int64_t aggregator;        /* the aggregator's index among the aggregators, >= 0 */
    const pario_order_servers *servers;   /* may be NULL */
} pario_order_in;

/* An order.  Writes the pieces to issue, in order, into order[0 .. *norder) (room for n).
 * On entry *norder = n and twin[i] = i (twin may be NULL): every piece issued, standing for
 * itself.  An order that leaves a piece out (HACIO line 7: a piece with the offset and
 * server of one already in its bucket) lowers *norder and sets twin[i] to the issued piece
 * that piece i stands for.  Returns PARIO_ORDER_OK or an error code. */
typedef int (*pario_order_fn)(const pario_order_in *in, int64_t *order, int64_t *norder, int64_t *twin);

typedef struct pario_order_def {
    const char *name;   /* lower case; the name in hints, plans and the CLI */
    pario_order_fn fn;
} pario_order_def;

/* The table, ended by a {NULL, NULL} row; its rows are the methods 0 .. count-1. */
extern const pario_order_def pario_orders[];

/* The number of rows. */
int pario_order_count(void);
/* The row of `name` (case-insensitive), else -1. */
int pario_order_find(const char *name);
/* The name of row `method`, or "?" */
const char *pario_order_name(int method);
/* A one-line description of a PARIO_ORDER_E* code. */
const char *pario_order_strerror(int code);

/* Run row `method` of the table on `in` (the arguments checked first: EINVAL for a bad
 * one).  Writes *norder indices into order[] (room for in->n) and, when twin is not NULL,
 * twin[in->n] (see pario_order_fn).  order/twin are unspecified after an error. */
int pario_request_order(int method, const pario_order_in *in, int64_t *order, int64_t *norder, int64_t *twin);

/* A stable sort of the index array idx[0..n) by the keys k1[idx[i]], then k2, then k3,
 * ascending (a NULL key array: no such key); ties keep the order of idx.  Bottom-up merge
 * sort of (keys, index) records, O(n log n), allocates 2n records.  0 or -1 (no memory). */
int pario_sort_by(int64_t *idx, int64_t n, const int64_t *k1, const int64_t *k2, const int64_t *k3);

#endif
