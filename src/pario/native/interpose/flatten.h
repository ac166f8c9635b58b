/* pario tracer: MPI datatypes flattened to byte runs, and file views mapped to file extents.
 *
 * The contract between the flattening code (flatten.c, view.c) and the interposed MPI-IO
 * layer (mpiio.c).  A datatype's typemap (MPI-4.1 §5.1) is reduced to the byte runs one
 * instance of the type covers, in typemap order, adjacent runs merged.  A file view
 * (MPI-4.1 §14.3: displacement, etype, filetype) maps "data bytes" (positions counted in
 * bytes of data visible through the view, i.e. offset_in_etypes * etype_size) to absolute
 * file extents: instance k of the filetype lies at disp + k * extent.
 */
#ifndef PARIO_TRACER_FLATTEN_H
#define PARIO_TRACER_FLATTEN_H

#include <stddef.h>
#include <stdint.h>
#include <mpi.h>

/* One run of bytes: [off, off + len), off relative to the start of the instance (may be
 * negative: a type's lower bound can be below 0). */
typedef struct px_run {
    int64_t off;
    int64_t len;
} px_run;

/* One instance of a datatype, flattened. */
typedef struct px_flat {
    px_run *runs;     /* in typemap order, adjacent runs merged, zero-length runs dropped */
    size_t nruns;
    int64_t size;     /* data bytes per instance (MPI_Type_size_x): sum of run lengths */
    int64_t lb;       /* MPI_Type_get_extent_x lower bound */
    int64_t extent;   /* MPI_Type_get_extent_x extent: instance k starts at k * extent */
} px_flat;

/* Flatten `type` (any combiner MPI-4 defines, nested to any depth, named types included).
 * Only PMPI_ entry points are called.  Returns 0 on success, -1 when memory runs out, the
 * type cannot be decoded, an offset leaves int64 or the type needs more runs than the cap
 * (then *out is zeroed).  A contiguous named type gives one run.  Cost: linear in the runs
 * produced (copies of a type that fills its extent collapse to one run in O(1)). */
int px_flatten(MPI_Datatype type, px_flat *out);
void px_flat_free(px_flat *f);

/* The cap on the runs of any one flattened type (1 GiB of px_run at the default). */
#ifndef PX_FLAT_MAX_RUNS
#define PX_FLAT_MAX_RUNS ((size_t)64 << 20)
#endif
/* Set the cap (0 keeps it); returns the previous one.  Not thread-safe: set it at startup. */
size_t px_flat_set_max_runs(size_t cap);

/* A file view. */
typedef struct px_view {
    int64_t disp;        /* displacement in bytes */
    int64_t etype_size;  /* bytes per etype (offsets and file pointers count etypes) */
    px_flat ft;          /* the filetype, flattened */
    int contiguous;      /* 1 when the filetype is one run starting at 0 with extent == size */
    int64_t *prefix;     /* ft.nruns + 1 prefix sums of the run lengths (view.c's own) */
} px_view;

/* The default view (disp 0, etype = filetype = MPI_BYTE).  It owns no memory. */
void px_view_default(px_view *v);
/* Build a view from MPI_File_set_view's arguments; 0 on success, -1 on failure (etype of
 * size 0, a filetype of size 0 or that px_flatten refuses).  *v is written only on success
 * and never read: free the view it held first (or build into a temporary and swap). */
int px_view_set(px_view *v, MPI_Offset disp, MPI_Datatype etype, MPI_Datatype filetype);
/* Free a view made by either function (never px_flat_free its ft); leaves the default view. */
void px_view_free(px_view *v);

/* Map `nbytes` data bytes starting `pos` data bytes into the view to absolute file extents,
 * in the order the data is laid out (ascending: MPI requires a filetype's displacements to be
 * monotonically nondecreasing), adjacent extents merged.  emit(ctx, file_offset, length) is
 * called once per extent; the return value is the number of extents emitted, -1 when
 * emit returned nonzero (stop), or -2 when pos or nbytes is negative or an offset would leave
 * int64.  Instance k's runs lie at disp + k * extent + run.off (MPI-4.1 §14.3: the filetype
 * tiles the file from disp, copy k displaced by k * extent as in §5.1; run.off includes the
 * type's own displacements, so a filetype with lb != 0 is placed exactly).
 * Cost: O(log runs + extents). */
typedef int (*px_emit_fn)(void *ctx, int64_t off, int64_t len);
int64_t px_view_map(const px_view *v, int64_t pos, int64_t nbytes, px_emit_fn emit, void *ctx);

#endif
