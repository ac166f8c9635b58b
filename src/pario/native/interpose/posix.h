/* pario tracer: the POSIX layer under MPI-IO (posix.c).
 *
 * Counts the bytes and calls of read/write-type system calls that MPI-IO (ROMIO) makes on
 * the descriptors of each MPI file, split by what the rank was doing at the time: inside
 * a collective data call (the two-phase aggregators do the file-system I/O there,
 * ROMIO's collective buffering), inside an independent data call, or anything else.
 * Counters only, no per-request log.  Descriptors that are not an MPI file's (a ROMIO
 * hints file, the shared-file-pointer file, the tracer's own files) are ignored: a
 * descriptor is bound to an MPI file only when it was opened during an MPI call on that
 * file and names the same inode (st_dev, st_ino).
 */
#ifndef PARIO_TRACER_POSIX_H
#define PARIO_TRACER_POSIX_H

#include <stdint.h>
#include <sys/types.h>

#include "interpose/records.h"

enum { PX_IO_COLL = 0, PX_IO_INDEP = 1, PX_IO_OTHER = 2 };

#define PX_WATCH_FDS 8

/* One MPI file as the POSIX layer sees it (embedded in mpiio.c's file state). */
typedef struct px_watch {
    const char *path;         /* the path the file system sees (MPI name without a "fs:" prefix) */
    int known;                /* dev and ino are set */
    dev_t dev;
    ino_t ino;
    int fds[PX_WATCH_FDS];    /* descriptors bound to this file */
    int nfds;
    int cand[PX_WATCH_FDS];   /* opened during MPI_File_open, before dev/ino were known */
    int ncand;
    px_posix_counts counts;   /* updated with relaxed atomics */
} px_watch;

/* Set by mpiio.c around each MPI call on a file (this thread): the file and the class. */
extern _Thread_local px_watch *px_io_watch;
extern _Thread_local int px_io_class;

/* After MPI_File_open: learn the file's inode from its path and bind the descriptors
 * opened during the call that name it. */
void px_posix_settle(px_watch *w);
/* Before the file's state is freed: forget its descriptors. */
void px_posix_forget(px_watch *w);
/* A consistent copy of the counters. */
void px_posix_snapshot(const px_watch *w, px_posix_counts *out);

#endif
