/* pario tracer: the MPI-IO layer (mpiio.c), as the runtime sees it. */
#ifndef PARIO_TRACER_MPIIO_H
#define PARIO_TRACER_MPIIO_H

#include "interpose/jsonbuf.h"

/* At MPI_Init, tracing on: open the lock file of shared-file-pointer calls.  0 or -1. */
int px_mpiio_start(void);

/* At MPI_Finalize: append this rank's file summaries to `out`, JSON objects separated by
 * ", ": one per file this rank closed as rank 0 of the file's communicator (gathered from
 * all its ranks at MPI_File_close), plus one per file still open (this rank's view only).
 * Each object: {"name", "procs", "hints": {key: value}, "aggregators": [world ranks that
 * did POSIX I/O on the file during collective data calls], "posix_bytes": [[rank,
 * coll_read, coll_write, indep_read, indep_write, other_read, other_write], ...] (ranks
 * with any), "open_at_finalize": bool}. */
void px_mpiio_finish(px_buf *out);

#endif
