/* pario interpose: the state of one open MPI file (kept by the MPI-IO layer, mpiio.c) and
 * the ops table every open file dispatches through.
 *
 * As ROMIO gives each open file a table of its file system's functions (ADIOI_Fns, chosen
 * at open), every px_file carries the ops of the module that claimed it at MPI_File_open
 * (runtime.h: px_core_open): the serving module's (serve.c) for a file served from a pario
 * store, else the pass-through ops (mpiio.c: MPICH's own routines).  The MPI-IO wrappers
 * call f->ops->...; tracing (records.h) wraps every call whichever the ops.  An op behaves
 * as the MPI routine it stands for, errors included (MPI-4.1 §9.3: an op that fails has
 * called the file's error handler when the MPI routine would have). */
#ifndef PARIO_INTERPOSE_FILES_H
#define PARIO_INTERPOSE_FILES_H

#include <mpi.h>
#include <stdint.h>
#include <sys/types.h>

#include "interpose/flatten.h"
#include "interpose/posix.h"
#include "interpose/records.h"

struct px_file_ops;

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
    off_t lock_byte;       /* this file's byte in the shared-pointer lock file (trace.h) */
    px_watch watch;        /* POSIX counters (posix.h) */
    char *hints_text;      /* "key=value\n"..., the last hints recorded */
    char *hints_json;      /* {"key": "value", ...} */
    int split_pending;     /* a split collective began (§14.4.5: at most one per file) */
    px_call split;
    const struct px_file_ops *ops;  /* how its calls are done (never NULL once open) */
    void *state;           /* the claiming module's state of the file (serve.c), else NULL */
} px_file;

/* One data call (MPI-4.1 §14.4) as the wrapper received it: the routine's arguments, what
 * the position and mode are (records.h: PX_POS_* | PX_MODE_*), the position in bytes of view
 * data where the access begins (-1 unknown), the status the call fills, and the MPI routine
 * itself (pmpi: calls PMPI_File_<routine> with these arguments). */
typedef struct px_io_args {
    MPI_File fh;
    int op;                /* 0 read, 1 write */
    int kind;              /* PX_POS_* | PX_MODE_* */
    int coll;              /* a collective routine */
    int64_t pos;
    MPI_Offset offset;     /* explicit-offset routines: the offset argument (etypes) */
    void *buf;
    int64_t count;
    MPI_Datatype datatype;
    MPI_Status *status;    /* blocking routines and split _end: never MPI_STATUS_IGNORE */
    MPI_Request *request;  /* nonblocking routines, else NULL */
    int (*pmpi)(const struct px_io_args *a);
} px_io_args;

typedef struct px_file_ops {
    const char *name;
    /* MPI_File_open, after the module claimed the file: open what the handle *fh is. */
    int (*open)(px_file *f, MPI_Comm comm, const char *filename, int amode, MPI_Info info, MPI_File *fh);
    /* After the MPI layer set f up (view, comm); an error closes the file again. */
    int (*attach)(px_file *f);
    /* MPI_File_close (collective); *closed: the file is closed (its state goes) even when
     * the call failed. */
    int (*close)(px_file *f, MPI_File *fh, int *closed);
    /* Where a shared-pointer (PX_POS_SHARED) or ordered (PX_POS_ORDERED, collective) access of
     * nbytes begins, in bytes of view data; -1 unknown.  *locked = 1: the tracer's shared lock
     * is held until the call returns (trace.h). */
    int64_t (*shared_pos)(px_file *f, int kind, int64_t nbytes, int *locked);
    /* A data routine; its _end for a split collective (buf and status of the _end call). */
    int (*data)(px_file *f, const px_io_args *a);
    int (*split_end)(px_file *f, const px_io_args *a);
    int (*get_size)(px_file *f, MPI_Offset *size);
    /* MPI_File_set_size, or MPI_File_preallocate when preallocate is nonzero. */
    int (*set_size)(px_file *f, MPI_Offset size, int preallocate);
    int (*sync)(px_file *f);
    int (*set_atomicity)(px_file *f, int flag);
    int (*get_amode)(px_file *f, int *amode);
    int (*seek_shared)(px_file *f, MPI_Offset offset, int whence);
    int (*get_position_shared)(px_file *f, MPI_Offset *offset);
} px_file_ops;

#endif
