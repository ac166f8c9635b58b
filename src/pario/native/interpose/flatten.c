/* pario tracer: an MPI datatype's typemap as byte runs (flatten.h).
 *
 * px_flatten decodes a datatype with PMPI_Type_get_envelope_c / PMPI_Type_get_contents_c
 * (MPI-4.1 §5.1.13, the large-count forms, so counts and displacements beyond int work for
 * types made by either constructor family) and rebuilds its typemap (MPI-4.1 §5.1) as the
 * byte runs one instance covers, in typemap order, adjacent runs merged:
 *
 *   NAMED, F90_*        one run over the true extent (the pair type MPI_SHORT_INT, whose
 *                       C struct has padding, two runs; MPI-4.1 §6.9.4)
 *   DUP, RESIZED        the old type's runs (RESIZED changes only lb/extent, §5.1.7)
 *   CONTIGUOUS, VECTOR, HVECTOR, INDEXED, HINDEXED, INDEXED_BLOCK, HINDEXED_BLOCK, STRUCT
 *                       copies of the old type(s) at the displacements of §5.1.2
 *   SUBARRAY            §5.1.3, C and Fortran order
 *   DARRAY              §5.1.4 (the "distributed array" constructor): the standard's
 *                       cyclic() definition applied dimension by dimension, BLOCK, NONE
 *                       and MPI_DISTRIBUTE_DFLT_DARG reduced to CYCLIC as the standard says
 *   VALUE_INDEX         MPI-4.1 §6.9.4: the value type at 0, the index type ending at the
 *                       pair's true upper bound (MPICH returns named pair types instead)
 *
 * Cost: linear in the runs produced.  n copies of a type that is one run as long as its
 * extent collapse to one run in O(1) (a contiguous of 2^40 bytes costs nothing), and before
 * any copying the runs that copying must produce (at least n-1 for one run, n*(m-1) for m)
 * are checked against the cap, so a type beyond the cap is refused before memory is used.
 * The cap (px_flat_set_max_runs, default PX_FLAT_MAX_RUNS = 64 Mi runs = 1 GiB of runs) bounds
 * any one run array; every offset is computed with overflow checks.  A type that cannot be
 * decoded, overflows int64, or whose runs do not add up to PMPI_Type_size_c gives -1.
 *
 * Datatypes returned by get_contents that are not predefined (NAMED or F90_*, which MPI
 * says cannot be freed) are freed with PMPI_Type_free as MPI-4.1 §5.1.13 requires.
 * Only PMPI_ entry points are called, so the tracer's own MPI_ wrappers never see these.
 */
#include "interpose/flatten.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- run buffers */

static size_t max_runs = PX_FLAT_MAX_RUNS;

size_t px_flat_set_max_runs(size_t cap)
{
    size_t old = max_runs;
    if (cap > 0)
        max_runs = cap;
    return old;
}

typedef struct {
    px_run *r;
    size_t n, cap;
} rbuf;

static void rbuf_free(rbuf *b)
{
    free(b->r);
    b->r = NULL;
    b->n = b->cap = 0;
}

/* Append [off, off + len), merged into the last run when it continues it. */
static int push(rbuf *b, int64_t off, int64_t len)
{
    int64_t end;
    if (len < 0 || __builtin_add_overflow(off, len, &end))
        return -1;
    if (len == 0)
        return 0;
    if (b->n && b->r[b->n - 1].off + b->r[b->n - 1].len == off) {
        /* cannot overflow: the merged run ends at `end` */
        b->r[b->n - 1].len += len;
        return 0;
    }
    if (b->n >= max_runs)
        return -1;
    if (b->n == b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 16;
        if (nc > max_runs)
            nc = max_runs;
        px_run *nr = realloc(b->r, nc * sizeof *nr);
        if (!nr)
            return -1;
        b->r = nr;
        b->cap = nc;
    }
    b->r[b->n].off = off;
    b->r[b->n].len = len;
    b->n++;
    return 0;
}

/* Append n copies of runs r[0..m) (one instance of a type), copy k displaced by
 * base + k * stride: the replication every constructor of MPI-4.1 §5.1.2 is made of. */
static int tile(rbuf *dst, const px_run *r, size_t m, int64_t n, int64_t stride, int64_t base)
{
    if (n < 0)
        return -1;
    if (m == 0 || n == 0)
        return 0;
    if (m == 1 && r[0].len == stride) {
        /* copies abut: one run of n * stride bytes */
        int64_t off, len;
        if (__builtin_add_overflow(base, r[0].off, &off) || __builtin_mul_overflow(n, stride, &len))
            return -1;
        return push(dst, off, len);
    }
    /* Each copy adds at least m-1 runs that cannot merge (m >= 2), or one run that cannot
     * merge with the previous copy's (m == 1, length != stride): refuse early. */
    uint64_t least;
    if (m == 1)
        least = (uint64_t)n - 1;
    else if (__builtin_mul_overflow((uint64_t)n, (uint64_t)(m - 1), &least))
        return -1;
    if (least > max_runs || dst->n + least > max_runs)
        return -1;
    for (int64_t k = 0; k < n; k++) {
        int64_t at;
        if (__builtin_mul_overflow(k, stride, &at) || __builtin_add_overflow(at, base, &at))
            return -1;
        for (size_t i = 0; i < m; i++) {
            int64_t off;
            if (__builtin_add_overflow(at, r[i].off, &off) || push(dst, off, r[i].len))
                return -1;
        }
    }
    return 0;
}

/* ---------------------------------------------------------------- decoding */

static int is_predefined(int combiner)
{
    return combiner == MPI_COMBINER_NAMED || combiner == MPI_COMBINER_F90_REAL ||
           combiner == MPI_COMBINER_F90_COMPLEX || combiner == MPI_COMBINER_F90_INTEGER;
}

/* What PMPI_Type_get_contents_c returned for one type (MPI-4.1 §5.1.13). */
typedef struct {
    int combiner;
    MPI_Count ni, na, nc, nd;
    int *i;
    MPI_Aint *a;
    MPI_Count *c;
    MPI_Datatype *d;
} contents;

static void contents_free(contents *ct)
{
    for (MPI_Count k = 0; ct->d && k < ct->nd; k++) {
        MPI_Count ni, na, nc, nd;
        int comb;
        if (ct->d[k] == MPI_DATATYPE_NULL)
            continue;
        if (PMPI_Type_get_envelope_c(ct->d[k], &ni, &na, &nc, &nd, &comb) == MPI_SUCCESS && !is_predefined(comb))
            PMPI_Type_free(&ct->d[k]);
    }
    free(ct->i);
    free(ct->a);
    free(ct->c);
    free(ct->d);
    memset(ct, 0, sizeof *ct);
}

static void *alloc_n(MPI_Count n, size_t sz)
{
    if (n < 0 || (uint64_t)n > SIZE_MAX / sz)
        return NULL;
    return malloc(n ? (size_t)n * sz : 1);
}

static int contents_get(MPI_Datatype t, contents *ct)
{
    memset(ct, 0, sizeof *ct);
    if (PMPI_Type_get_envelope_c(t, &ct->ni, &ct->na, &ct->nc, &ct->nd, &ct->combiner) != MPI_SUCCESS)
        return -1;
    if (is_predefined(ct->combiner))
        return 0;
    ct->i = alloc_n(ct->ni, sizeof *ct->i);
    ct->a = alloc_n(ct->na, sizeof *ct->a);
    ct->c = alloc_n(ct->nc, sizeof *ct->c);
    ct->d = alloc_n(ct->nd, sizeof *ct->d);
    if (!ct->i || !ct->a || !ct->c || !ct->d) {
        free(ct->d);
        ct->d = NULL;
        contents_free(ct);
        return -1;
    }
    for (MPI_Count k = 0; k < ct->nd; k++)
        ct->d[k] = MPI_DATATYPE_NULL;
    if (PMPI_Type_get_contents_c(t, ct->ni, ct->na, ct->nc, ct->nd, ct->i, ct->a, ct->c, ct->d) != MPI_SUCCESS) {
        for (MPI_Count k = 0; k < ct->nd; k++)
            ct->d[k] = MPI_DATATYPE_NULL;
        contents_free(ct);
        return -1;
    }
    return 0;
}

static int extent_of(MPI_Datatype t, int64_t *lb, int64_t *ext)
{
    MPI_Count l, e;
    if (PMPI_Type_get_extent_c(t, &l, &e) != MPI_SUCCESS)
        return -1;
    *lb = (int64_t)l;
    *ext = (int64_t)e;
    return 0;
}

static int decode(MPI_Datatype t, rbuf *out, int depth);

/* Decode `t` into a fresh buffer and append n copies of it (base + k*extent(t)). */
static int tile_type(rbuf *dst, MPI_Datatype t, int64_t n, int64_t base, int depth)
{
    rbuf child = {0};
    int64_t lb, ext;
    int rc = -1;
    if (extent_of(t, &lb, &ext) == 0 && decode(t, &child, depth + 1) == 0)
        rc = tile(dst, child.r, child.n, n, ext, base);
    rbuf_free(&child);
    return rc;
}

/* Predefined types: one run over the true extent when the data fills it. */
static int decode_leaf(MPI_Datatype t, rbuf *out)
{
    MPI_Count size, tlb, text;
    if (PMPI_Type_size_c(t, &size) != MPI_SUCCESS || PMPI_Type_get_true_extent_c(t, &tlb, &text) != MPI_SUCCESS)
        return -1;
    if (size == 0)
        return 0;
    if (size == text)
        return push(out, (int64_t)tlb, (int64_t)size);
    if (t == MPI_SHORT_INT) {
        /* MPI-4.1 §6.9.4: the C struct { short value; int index; } */
        struct si { short v; int i; };
        if (push(out, 0, (int64_t)sizeof(short)) || push(out, (int64_t)offsetof(struct si, i), (int64_t)sizeof(int)))
            return -1;
        return 0;
    }
    return -1; /* a predefined type with holes we do not know */
}

/* The element count or displacement number k of a combiner's argument list: from the
 * large counts when the type was made by a _c constructor, else from `ints`. */
#define ARG(ct, k) ((ct)->nc ? (int64_t)(ct)->c[k] : (int64_t)(ct)->i[k])

static int decode_vector(const contents *ct, rbuf *out, int bytes_stride, int depth)
{
    int64_t count = ARG(ct, 0), bl = ARG(ct, 1), stride, lb, ext;
    if (extent_of(ct->d[0], &lb, &ext))
        return -1;
    if (bytes_stride)
        stride = ct->nc ? (int64_t)ct->c[2] : (int64_t)ct->a[0];
    else if (__builtin_mul_overflow((int64_t)ARG(ct, 2), ext, &stride))
        return -1;
    rbuf child = {0}, block = {0};
    int rc = -1;
    if (decode(ct->d[0], &child, depth + 1) == 0 && tile(&block, child.r, child.n, bl, ext, 0) == 0)
        rc = tile(out, block.r, block.n, count, stride, 0);
    rbuf_free(&child);
    rbuf_free(&block);
    return rc;
}

/* INDEXED, HINDEXED, INDEXED_BLOCK, HINDEXED_BLOCK (MPI-4.1 §5.1.2). */
static int decode_indexed(const contents *ct, rbuf *out, int bytes_disp, int one_blocklength, int depth)
{
    int64_t count = ARG(ct, 0), lb, ext;
    if (count < 0 || extent_of(ct->d[0], &lb, &ext))
        return -1;
    rbuf child = {0};
    if (decode(ct->d[0], &child, depth + 1)) {
        rbuf_free(&child);
        return -1;
    }
    int rc = 0;
    for (int64_t k = 0; k < count && rc == 0; k++) {
        int64_t bl, disp;
        if (one_blocklength)
            bl = ARG(ct, 1);
        else
            bl = ARG(ct, 1 + k);
        int64_t dk = one_blocklength ? 2 + k : 1 + count + k; /* position among the counts */
        if (bytes_disp) {
            if (ct->nc)
                disp = (int64_t)ct->c[dk];
            else
                disp = (int64_t)ct->a[k];
        } else if (__builtin_mul_overflow((int64_t)ARG(ct, dk), ext, &disp)) {
            rc = -1;
            break;
        }
        rc = tile(out, child.r, child.n, bl, ext, disp);
    }
    rbuf_free(&child);
    return rc;
}

static int decode_struct(const contents *ct, rbuf *out, int depth)
{
    int64_t count = ARG(ct, 0);
    if (count < 0)
        return -1;
    for (int64_t k = 0; k < count; k++) {
        int64_t bl = ARG(ct, 1 + k);
        int64_t disp = ct->nc ? (int64_t)ct->c[1 + count + k] : (int64_t)ct->a[k];
        if (tile_type(out, ct->d[k], bl, disp, depth))
            return -1;
    }
    return 0;
}

/* SUBARRAY (MPI-4.1 §5.1.3): element (i_0..i_{n-1}) of the subarray lies at
 * sum_d (starts[d] + i_d) * stride_d * extent(oldtype), the last dimension fastest in C
 * order and the first in Fortran order.  Built from the fastest dimension outwards. */
static int decode_subarray(const contents *ct, rbuf *out, int depth)
{
    int ndims = ct->i[0];
    int order = ct->nc ? ct->i[1] : ct->i[1 + 3 * ndims];
    int64_t lb, ext;
    if (ndims <= 0 || extent_of(ct->d[0], &lb, &ext))
        return -1;
    rbuf cur = {0}, next = {0};
    if (decode(ct->d[0], &cur, depth + 1)) {
        rbuf_free(&cur);
        return -1;
    }
    int64_t stride = ext;
    int rc = 0;
    for (int s = 0; s < ndims && rc == 0; s++) {
        int d = order == MPI_ORDER_FORTRAN ? s : ndims - 1 - s;
        int64_t size, sub, start;
        if (ct->nc) {
            size = ct->c[d];
            sub = ct->c[ndims + d];
            start = ct->c[2 * ndims + d];
        } else {
            size = ct->i[1 + d];
            sub = ct->i[1 + ndims + d];
            start = ct->i[1 + 2 * ndims + d];
        }
        int64_t base;
        next.n = 0;
        if (__builtin_mul_overflow(start, stride, &base) || tile(&next, cur.r, cur.n, sub, stride, base) ||
            __builtin_mul_overflow(stride, size, &stride)) {
            rc = -1;
            break;
        }
        rbuf tmp = cur;
        cur = next;
        next = tmp;
    }
    rbuf_free(&next);
    if (rc == 0) {
        for (size_t k = 0; k < cur.n && rc == 0; k++)
            rc = push(out, cur.r[k].off, cur.r[k].len);
    }
    rbuf_free(&cur);
    return rc;
}

/* DARRAY (MPI-4.1 §5.1.4).  The process grid is row-major in both orders; dimension by
 * dimension (the first fastest in Fortran order, the last in C order) the standard's
 * cyclic(darg, gsize, r, psize, oldtype) keeps this process's `count` blocks of `darg`
 * elements, block c at element r*darg + c*psize*darg, the last one `darg_last` long, and
 * has extent gsize * extent(oldtype) (its lb/ub markers at 0 and gsize*ex). */
static int decode_darray(const contents *ct, rbuf *out, int depth)
{
    int large = ct->nc > 0;
    int64_t rank = ct->i[1];
    int ndims = ct->i[2];
    if (ndims <= 0)
        return -1;
    const int *distribs = ct->i + (large ? 3 : 3 + ndims);
    const int *dargs = distribs + ndims;
    const int *psizes = dargs + ndims;
    int order = psizes[ndims];
    int64_t lb, ex;
    if (extent_of(ct->d[0], &lb, &ex))
        return -1;
    int64_t *r = malloc((size_t)ndims * sizeof *r);
    if (!r)
        return -1;
    /* the position of `rank` in the row-major process grid */
    int64_t t_rank = rank, t_size = 1;
    for (int i = 0; i < ndims; i++)
        t_size *= psizes[i] > 0 ? psizes[i] : 1;
    for (int i = 0; i < ndims; i++) {
        t_size /= psizes[i] > 0 ? psizes[i] : 1;
        r[i] = t_rank / t_size;
        t_rank %= t_size;
    }
    rbuf cur = {0}, next = {0};
    int rc = decode(ct->d[0], &cur, depth + 1);
    for (int s = 0; s < ndims && rc == 0; s++) {
        int d = order == MPI_ORDER_FORTRAN ? s : ndims - 1 - s;
        int64_t gsize = large ? (int64_t)ct->c[d] : (int64_t)ct->i[3 + d];
        int64_t psize = psizes[d], darg = dargs[d], rr = r[d];
        if (distribs[d] == MPI_DISTRIBUTE_NONE) {
            darg = gsize;
        } else if (darg == MPI_DISTRIBUTE_DFLT_DARG) {
            darg = distribs[d] == MPI_DISTRIBUTE_BLOCK ? (gsize + psize - 1) / psize : 1;
        }
        if (gsize < 0 || psize <= 0 || darg <= 0 || rr < 0 || rr >= psize) {
            rc = -1;
            break;
        }
        next.n = 0;
        if (psize == 1) {
            /* one process: its blocks abut and cover the dimension (count = nblocks,
             * darg_last = gsize mod darg) */
            rc = tile(&next, cur.r, cur.n, gsize, ex, 0);
        } else if (gsize > 0 && cur.n > 0) {
            int64_t nblocks = gsize / darg + (gsize % darg != 0);
            int64_t count = nblocks / psize;
            if (rr < nblocks - count * psize)
                count++;
            int64_t darg_last = darg, in_last = gsize % (psize * darg);
            if (in_last != 0) {
                darg_last = in_last - darg * rr;
                if (darg_last > darg)
                    darg_last = darg;
                if (darg_last <= 0)
                    darg_last = darg;
            }
            for (int64_t c = 0; c < count && rc == 0; c++) {
                int64_t first = rr * darg + c * psize * darg, at;
                if (__builtin_mul_overflow(first, ex, &at))
                    rc = -1;
                else
                    rc = tile(&next, cur.r, cur.n, c == count - 1 ? darg_last : darg, ex, at);
            }
        }
        if (rc == 0 && __builtin_mul_overflow(ex, gsize, &ex))
            rc = -1;
        rbuf tmp = cur;
        cur = next;
        next = tmp;
    }
    free(r);
    rbuf_free(&next);
    for (size_t k = 0; k < cur.n && rc == 0; k++)
        rc = push(out, cur.r[k].off, cur.r[k].len);
    rbuf_free(&cur);
    return rc;
}

#if MPI_VERSION > 4 || (MPI_VERSION == 4 && MPI_SUBVERSION >= 1)
/* VALUE_INDEX (MPI-4.1 §6.9.4): the value type at 0 and the index type as the pair's last
 * member, so ending at the pair's true upper bound. */
static int decode_value_index(MPI_Datatype t, const contents *ct, rbuf *out, int depth)
{
    MPI_Count tlb, text, ilb, iext;
    if (ct->nd < 2 || PMPI_Type_get_true_extent_c(t, &tlb, &text) != MPI_SUCCESS ||
        PMPI_Type_get_true_extent_c(ct->d[1], &ilb, &iext) != MPI_SUCCESS)
        return -1;
    if (tile_type(out, ct->d[0], 1, 0, depth))
        return -1;
    return tile_type(out, ct->d[1], 1, (int64_t)(tlb + text) - (int64_t)(ilb + iext), depth);
}
#endif

#define PX_MAX_DEPTH 64

static int decode(MPI_Datatype t, rbuf *out, int depth)
{
    contents ct;
    if (depth > PX_MAX_DEPTH || contents_get(t, &ct))
        return -1;
    int rc;
    switch (ct.combiner) {
    case MPI_COMBINER_NAMED:
    case MPI_COMBINER_F90_REAL:
    case MPI_COMBINER_F90_COMPLEX:
    case MPI_COMBINER_F90_INTEGER:
        rc = decode_leaf(t, out);
        break;
    case MPI_COMBINER_DUP:
    case MPI_COMBINER_RESIZED:
        rc = tile_type(out, ct.d[0], 1, 0, depth);
        break;
    case MPI_COMBINER_CONTIGUOUS:
        rc = tile_type(out, ct.d[0], ARG(&ct, 0), 0, depth);
        break;
    case MPI_COMBINER_VECTOR:
        rc = decode_vector(&ct, out, 0, depth);
        break;
    case MPI_COMBINER_HVECTOR:
    case MPI_COMBINER_HVECTOR_INTEGER:
        rc = decode_vector(&ct, out, 1, depth);
        break;
    case MPI_COMBINER_INDEXED:
        rc = decode_indexed(&ct, out, 0, 0, depth);
        break;
    case MPI_COMBINER_HINDEXED:
    case MPI_COMBINER_HINDEXED_INTEGER:
        rc = decode_indexed(&ct, out, 1, 0, depth);
        break;
    case MPI_COMBINER_INDEXED_BLOCK:
        rc = decode_indexed(&ct, out, 0, 1, depth);
        break;
    case MPI_COMBINER_HINDEXED_BLOCK:
        rc = decode_indexed(&ct, out, 1, 1, depth);
        break;
    case MPI_COMBINER_STRUCT:
    case MPI_COMBINER_STRUCT_INTEGER:
        rc = decode_struct(&ct, out, depth);
        break;
    case MPI_COMBINER_SUBARRAY:
        rc = decode_subarray(&ct, out, depth);
        break;
    case MPI_COMBINER_DARRAY:
        rc = decode_darray(&ct, out, depth);
        break;
#if MPI_VERSION > 4 || (MPI_VERSION == 4 && MPI_SUBVERSION >= 1)
    case MPI_COMBINER_VALUE_INDEX:
        rc = decode_value_index(t, &ct, out, depth);
        break;
#endif
    default:
        rc = -1;
    }
    contents_free(&ct);
    return rc;
}

/* ---------------------------------------------------------------- public */

int px_flatten(MPI_Datatype type, px_flat *out)
{
    memset(out, 0, sizeof *out);
    if (type == MPI_DATATYPE_NULL)
        return -1;
    MPI_Count size, lb, ext;
    if (PMPI_Type_size_c(type, &size) != MPI_SUCCESS || PMPI_Type_get_extent_c(type, &lb, &ext) != MPI_SUCCESS ||
        size < 0)
        return -1;
    rbuf b = {0};
    if (decode(type, &b, 0)) {
        rbuf_free(&b);
        return -1;
    }
    int64_t sum = 0;
    for (size_t k = 0; k < b.n; k++)
        if (__builtin_add_overflow(sum, b.r[k].len, &sum))
            break;
    if (sum != (int64_t)size) { /* a typemap we decoded wrong: better no answer than a wrong one */
        rbuf_free(&b);
        return -1;
    }
    if (b.n && b.n < b.cap) {
        px_run *shrunk = realloc(b.r, b.n * sizeof *shrunk);
        if (shrunk)
            b.r = shrunk;
    }
    out->runs = b.r;
    out->nruns = b.n;
    out->size = (int64_t)size;
    out->lb = (int64_t)lb;
    out->extent = (int64_t)ext;
    return 0;
}

void px_flat_free(px_flat *f)
{
    if (!f)
        return;
    free(f->runs);
    memset(f, 0, sizeof *f);
}
