/* pario tracer: process-wide state, set up in MPI_Init and torn down in MPI_Finalize
 * (runtime.c). */
#ifndef PARIO_TRACER_RUNTIME_H
#define PARIO_TRACER_RUNTIME_H

#include <stdint.h>

/* Interposed entry points stay visible; everything else is hidden (-fvisibility=hidden). */
#define PX_EXPORT __attribute__((visibility("default")))

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

#endif
