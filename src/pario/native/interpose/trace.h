/* pario interpose: the tracing module (trace.c) -- the rank's record stream from MPI_Init to
 * MPI_Finalize, DIR/job.json, and the tracer's lock of shared-file-pointer calls.  The
 * MPI-IO layer (mpiio.c) records each call through records.h while px_on. */
#ifndef PARIO_INTERPOSE_TRACE_H
#define PARIO_INTERPOSE_TRACE_H

#include <stdint.h>
#include <sys/types.h>

#include "interpose/files.h"
#include "interpose/records.h"

/* Tracing is on: PARIO_TRACE_DIR was set, MPI_Init succeeded on every rank and every rank
 * opened its record file (decided collectively, so the tracer's own collectives match). */
extern int px_on;
extern int px_rank;     /* MPI_COMM_WORLD rank */
extern int px_nprocs;   /* MPI_COMM_WORLD size */
extern const char *px_dir;

/* Seconds since the job's time 0: CLOCK_MONOTONIC, zeroed on every rank when the barrier
 * in MPI_Init returns, so ranks' times are comparable (to the barrier's exit skew). */
double px_now(void);
/* The next call id of this rank (thread-safe). */
uint64_t px_next_id(void);

/* The lock of shared-pointer calls: one byte per file in DIR/shared.lock (an fcntl lock,
 * with a mutex for this process's threads).  px_trace_shared_lock returns 0 when there is
 * no lock file (nothing locked), else 1; F_UNLCK releases. */
int px_trace_shared_lock(off_t byte, short type);

/* At MPI_File_close of a traced file (collective over f->comm): the POSIX counters of all
 * its ranks gathered to its rank 0, which keeps the file's summary for job.json. */
void px_trace_file_closed(const px_file *f, const px_posix_counts *pc);

#endif
