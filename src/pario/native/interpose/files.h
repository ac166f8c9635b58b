/* pario runtime: the state of one open MPI file, shared by the MPI-IO layer (mpiio.c) and
 * the serving of planned files from a pario store (serve.c). */
#ifndef PARIO_TRACER_FILES_H
#define PARIO_TRACER_FILES_H

#include <mpi.h>
#include <stdint.h>
#include <sys/types.h>

#include "interpose/flatten.h"
#include "interpose/posix.h"
#include "interpose/records.h"

struct px_srv;

/* The path the file system sees: ROMIO takes "prefix:path" (ufs:, nfs:, lustre:, ...);
 * also the name a served file has in the store (mpiio.c). */
const char *px_fs_path(const char *name);

typedef struct px_file {
    MPI_File fh;
    int id;                /* this rank's file id: 0, 1, 2, ... in open order */
    char *name;            /* as given to MPI_File_open */
    px_view view;
    int view_ok;           /* the view was flattened */
    int64_t etype_size;
    MPI_Comm comm;         /* a duplicate of the open communicator (ordered calls, close) */
    int comm_rank;
    int comm_size;
    off_t lock_byte;       /* this file's byte in the shared-pointer lock file */
    px_watch watch;        /* POSIX counters (posix.h) */
    char *hints_text;      /* "key=value\n"..., the last hints recorded */
    char *hints_json;      /* {"key": "value", ...} */
    int split_pending;     /* a split collective began (§14.4.5: at most one per file) */
    px_call split;
    struct px_srv *srv;    /* served from a pario store (serve.h), else NULL */
} px_file;

#endif
