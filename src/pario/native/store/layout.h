/* pario serve: layouts and the request → server mapping in C, exactly as
 * pario.layout.map_requests (src/pario/layout/mapping.py) and pario.store.pieces place
 * every byte (docs/serve.md).
 *
 * Kinds (the JSON of pario.layout.spec.layout_to_dict / layout_from_dict, server names
 * resolved against the store's profile; sizes may be integers or size strings):
 *   striped  round-robin, one stripe per server (fixed; PADP's ⟨h, s⟩, seed 003 §3.3; a
 *            stripe of 0 leaves a server out);
 *   grouped  CI-LAYOUT's 2-D layout (seed 002 §3): blocks of stripe·|group| round-robin over
 *            the groups, striped inside a group;
 *   regions  PSA's offset ranges (seed 001 §3.3), each with a striped or 2-D layout, a
 *            region's data on a server after the earlier regions' data;
 *   extents  CEDA's extent map (seed 000 §4.3, §4.5): (offset, length, server, local, data
 *            file) rows, bytes outside them under the default layout (data file 0).
 *
 * Monotone layouts (all but extents) have the byte-count function C_j(x) = bytes of [0, x)
 * on server j (SPEC §1: round r = x div W, q = x mod W, C_i = r·w_i + clip(q − P_i, 0, w_i)),
 * and the sub-request of [x, x+L) on server j is local C_j(x), length C_j(x+L) − C_j(x). */
#ifndef PARIO_SERVE_LAYOUT_H
#define PARIO_SERVE_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "store/json.h"

enum { PXS_STRIPED = 1, PXS_GROUPED, PXS_REGIONS, PXS_EXTENTS };

/* the largest byte offset a layout may name (a round, a region bound, an extent's end):
 * 2^52, the store's offset limit (pario.layout.types.LAYOUT_MAX) */
#define PXS_LAYOUT_MAX ((int64_t)1 << 52)

typedef struct pxs_layout {
    int kind;
    int nsrv;               /* servers_used(), in pario's order: the rows of counts() */
    int *srv;
    /* striped: the servers with a stripe > 0 (= srv), their stripes and prefix sums, W */
    int64_t *kw, *kpref, W;
    /* grouped */
    int ng;
    int *gn;                /* servers per group */
    int *gfirst;            /* index in srv of a group's first server */
    int64_t stripe, *gpref, G;
    /* regions */
    int nr;
    int64_t *rs, *re;       /* [rs, re), re = INT64_MAX when open-ended */
    struct pxs_layout **rl;
    int nall;               /* servers of the store */
    int *pos_of;            /* nall: server → index in srv, or -1 */
    int64_t *rbase;         /* nr × nall: server-local base of region k's data on a server */
    /* extents (sorted by offset) */
    size_t ne;
    int64_t *eo, *el, *eloc;
    int *es, *edf;
    struct pxs_layout *def;
} pxs_layout;

/* one single-server piece of a range, in logical order (pario.store.pieces) */
typedef struct {
    int server, datafile;
    int64_t local, len;
    int64_t off;            /* logical offset of the piece */
} pxs_piece;

/* one sub-request as pario.layout.map_requests gives it (req, server, local, length, datafile) */
typedef struct {
    int64_t req;
    int server, datafile;
    int64_t local, len;
} pxs_sub;

/* growing arrays */
typedef struct {
    pxs_piece *p;
    size_t n, cap;
} pxs_pieces;

typedef struct {
    pxs_sub *s;
    size_t n, cap;
} pxs_subs;

/* parse a layout JSON value; server names resolved in names[0..nservers) */
int pxs_layout_parse(const pxs_json *j, const char *const *names, int nservers, pxs_layout **out, char *err,
                     size_t errlen);
int pxs_layout_parse_text(const char *text, const char *const *names, int nservers, pxs_layout **out, char *err,
                          size_t errlen);
/* the same over servers named by their index ("0" .. "nservers-1": pario.layout.mapping's
 * engine form, the JSON of a layout whose servers are indices) */
int pxs_layout_parse_indexed(const char *text, int nservers, pxs_layout **out, char *err, size_t errlen);
void pxs_layout_free(pxs_layout *l);
/* an extent map from its rows (any order; checked as the JSON's are) over nservers servers,
 * with default layout def (NULL: none; owned by the map from here, freed on failure too) */
int pxs_layout_extents(size_t n, const int64_t *off, const int64_t *len, const int64_t *server, const int64_t *local,
                       const int64_t *datafile, int nservers, pxs_layout *def, pxs_layout **out, char *err,
                       size_t errlen);

/* C_j(x) for the nsrv servers of srv (monotone layouts only; PXS_EINVAL for extents) */
int pxs_layout_counts(const pxs_layout *l, int64_t x, int64_t *c);
/* append the pieces of [x, x+L) in logical order (PXS_EINVAL: an extent map without a
 * default that does not cover the range; err says which bytes) */
int pxs_layout_pieces(const pxs_layout *l, int64_t x, int64_t L, pxs_pieces *out, char *err, size_t errlen);
/* The pieces of a range handed out in order (the two-phase layout callbacks of the served
 * runtime and of pario.mpi walk a range piece by piece): the first single-server piece of
 * [x, x+L), computed with the pieces of up to `cap` bytes of the range (0: all of it) that the
 * next calls most likely ask for.  PXS_EINVAL as pxs_layout_pieces (or no piece). */
typedef struct {
    pxs_pieces pcs;         /* the pieces last computed, pcs.p[next] the next one expected */
    size_t next;
} pxs_piece_cursor;
int pxs_layout_next_piece(const pxs_layout *l, pxs_piece_cursor *cur, int64_t x, int64_t L, int64_t cap,
                          const pxs_piece **out);
/* append map_requests' rows of request number req = [x, x+L), in map_requests' order */
int pxs_layout_map(const pxs_layout *l, int64_t req, int64_t x, int64_t L, pxs_subs *out, char *err, size_t errlen);
/* parse a size (an integer ≥ 0 or a size string like "64k"): 0 or PXS_EINVAL */
int pxs_parse_size(const pxs_json *v, int64_t *out);

#endif
