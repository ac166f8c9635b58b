/* pario tracer: a file view maps data positions to file extents (flatten.h).
 *
 * MPI-4.1 §14.3: a view is (disp, etype, filetype); the file is tiled with copies of the
 * filetype from byte disp, copy k displaced by k * extent(filetype) (the replication rule of
 * §5.1), and only the bytes of the filetype's typemap are visible, in typemap order.  A data
 * position p (bytes of visible data, offset_in_etypes * etype_size) therefore falls in copy
 * k = p / size(filetype) at data byte p mod size within it; a binary search over the prefix
 * sums of the run lengths finds the run, and the walk goes on run by run and copy by copy,
 * merging extents that continue each other (also across copies).  A filetype that is one
 * run as long as its extent (wherever its lb) maps linearly in O(1).
 */
#include "interpose/flatten.h"

#include <stdlib.h>
#include <string.h>

/* The default view's filetype (MPI_BYTE): shared, never written, never freed. */
static px_run byte_run[1] = {{0, 1}};
static int64_t byte_prefix[2] = {0, 1};

void px_view_default(px_view *v)
{
    memset(v, 0, sizeof *v);
    v->disp = 0;
    v->etype_size = 1;
    v->ft.runs = byte_run;
    v->ft.nruns = 1;
    v->ft.size = 1;
    v->ft.lb = 0;
    v->ft.extent = 1;
    v->contiguous = 1;
    v->prefix = byte_prefix;
}

int px_view_set(px_view *v, MPI_Offset disp, MPI_Datatype etype, MPI_Datatype filetype)
{
    MPI_Count esize;
    if (PMPI_Type_size_c(etype, &esize) != MPI_SUCCESS || esize <= 0)
        return -1;
    px_view nv;
    memset(&nv, 0, sizeof nv);
    if (px_flatten(filetype, &nv.ft))
        return -1;
    if (nv.ft.size <= 0 || nv.ft.nruns == 0) {
        px_flat_free(&nv.ft);
        return -1;
    }
    nv.prefix = malloc((nv.ft.nruns + 1) * sizeof *nv.prefix);
    if (!nv.prefix) {
        px_flat_free(&nv.ft);
        return -1;
    }
    nv.prefix[0] = 0;
    for (size_t j = 0; j < nv.ft.nruns; j++)
        nv.prefix[j + 1] = nv.prefix[j] + nv.ft.runs[j].len; /* <= size: no overflow */
    nv.disp = (int64_t)disp;
    nv.etype_size = (int64_t)esize;
    nv.contiguous = nv.ft.nruns == 1 && nv.ft.runs[0].off == 0 && nv.ft.runs[0].len == nv.ft.extent;
    *v = nv;
    return 0;
}

void px_view_free(px_view *v)
{
    if (!v)
        return;
    if (v->ft.runs != byte_run)
        px_flat_free(&v->ft);
    if (v->prefix != byte_prefix)
        free(v->prefix);
    px_view_default(v);
}

/* The last j with prefix[j] <= x, for 0 <= x < prefix[n] (prefix strictly increasing). */
static size_t find_run(const int64_t *prefix, size_t n, int64_t x)
{
    size_t lo = 0, hi = n; /* prefix[lo] <= x < prefix[hi] */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (prefix[mid] <= x)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

int64_t px_view_map(const px_view *v, int64_t pos, int64_t nbytes, px_emit_fn emit, void *ctx)
{
    if (pos < 0 || nbytes < 0)
        return -2;
    if (nbytes == 0)
        return 0;
    const px_flat *ft = &v->ft;
    if (v->contiguous || (ft->nruns == 1 && ft->runs[0].len == ft->extent)) {
        /* copies abut: file offset = disp + run.off + pos */
        int64_t off, end;
        if (__builtin_add_overflow(v->disp, ft->runs[0].off, &off) || __builtin_add_overflow(off, pos, &off) ||
            __builtin_add_overflow(off, nbytes, &end))
            return -2;
        return emit(ctx, off, nbytes) ? -1 : 1;
    }
    const int64_t size = ft->size;
    int64_t k = pos / size, within = pos % size, base;
    if (__builtin_mul_overflow(k, ft->extent, &base) || __builtin_add_overflow(base, v->disp, &base))
        return -2;
    size_t j = find_run(v->prefix, ft->nruns, within);
    within -= v->prefix[j];
    int64_t left = nbytes, count = 0, poff = 0, plen = 0;
    int have = 0;
    for (;;) {
        const px_run *r = &ft->runs[j];
        int64_t len = r->len - within, off, end;
        if (len > left)
            len = left;
        if (__builtin_add_overflow(base, r->off, &off) || __builtin_add_overflow(off, within, &off) ||
            __builtin_add_overflow(off, len, &end))
            return -2;
        if (have && poff + plen == off) {
            plen += len;
        } else {
            if (have) {
                if (emit(ctx, poff, plen))
                    return -1;
                count++;
            }
            poff = off;
            plen = len;
            have = 1;
        }
        left -= len;
        if (left == 0)
            break;
        within = 0;
        if (++j == ft->nruns) {
            j = 0;
            if (__builtin_add_overflow(base, ft->extent, &base))
                return -2;
        }
    }
    if (emit(ctx, poff, plen))
        return -1;
    return count + 1;
}
