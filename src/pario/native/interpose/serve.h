/* pario runtime: serving the files a plan covers from a pario store, inside MPI-IO
 * (serve.c; docs/serve.md, "The MPI layer").
 *
 * CEDA's redirector and HACIO's request order live inside MPI-IO (CEDA seed 000 §5.2,
 * HACIO seed 004 §3.2): with PARIO_STORE (or the info hint pario_store) an unmodified
 * program's MPI_File_open of a file the store holds, or the plan (PARIO_PLAN / pario_plan)
 * covers, opens it in the store; its data calls go through the store's layout and RMT
 * (store/redirect.h) and its collective calls through pario's two-phase I/O with the plan's
 * order (collective/twophase.h).  Other files pass straight through to MPICH. */
#ifndef PARIO_TRACER_SERVE_H
#define PARIO_TRACER_SERVE_H

#include <mpi.h>
#include <stdint.h>

#include "interpose/files.h"

/* Nonzero once this process serves (or tried to serve) a file: the MPI-IO layer then keeps
 * file state even when tracing is off. */
extern int px_serving;

/* MPI_File_open (collective over comm).  Decides whether `filename` is served; if so opens
 * it in the store and a shadow MPI file (the handle the program gets: group, amode, info
 * and view are MPI's own), sets *srv and returns MPI_SUCCESS.  Not served: *srv = NULL and
 * MPI_SUCCESS (the caller opens the file with PMPI_File_open).  An error of a served file
 * (no such file without MPI_MODE_CREATE, MPI_MODE_EXCL on an existing one, store I/O):
 * its MPI error code, on every rank. */
int px_serve_open(MPI_Comm comm, const char *filename, int amode, MPI_Info info, MPI_File *fh,
                  struct px_srv **srv);
/* After the MPI layer set up f (view, comm): the collective parameters from the hints. */
void px_serve_attach(px_file *f);
/* MPI_File_close (collective): flush, close the store file and the shadow. */
int px_serve_close(px_file *f, MPI_File *fh);

/* The position (bytes of view data) where a shared-pointer (PX_POS_SHARED) or ordered
 * (PX_POS_ORDERED, collective) access of nbytes begins; the shared pointer advances past
 * it.  -1 on failure. */
int64_t px_serve_shared_pos(px_file *f, int kind, int64_t nbytes);

/* One data call on a served file: `pos` bytes into the view, count x datatype at buf, the
 * op (0 read, 1 write), collective or not, the kind's position (PX_POS_*: the individual
 * pointer advances) and mode (blocking: status filled; nonblocking: *req a completed
 * request; split: kept for the _end call).  MPI error code. */
int px_serve_data(px_file *f, int op, int kind, int coll, int64_t pos, void *buf, int64_t count,
                  MPI_Datatype datatype, MPI_Status *status, MPI_Request *req);
/* The _end of a split collective: its status. */
int px_serve_split_end(px_file *f, MPI_Status *status);

int px_serve_get_size(px_file *f, MPI_Offset *size);
int px_serve_set_size(px_file *f, MPI_Offset size, int preallocate);
int px_serve_sync(px_file *f);
int px_serve_get_amode(px_file *f, int *amode);
int px_serve_seek_shared(px_file *f, MPI_Offset offset, int whence);
int px_serve_get_position_shared(px_file *f, MPI_Offset *offset);
/* MPI_File_delete of a served name: 1 handled (*rc its code), 0 not served. */
int px_serve_delete(const char *filename, MPI_Info info, int *rc);

/* A served call's error goes to the file's error handler, as MPICH's own do (MPI-4.1 §9.3:
 * the handler of the file, of MPI_FILE_NULL for MPI_File_open); returns rc. */
static inline int px_serve_err(MPI_File fh, int rc)
{
    if (rc != MPI_SUCCESS)
        PMPI_File_call_errhandler(fh, rc);
    return rc;
}

/* MPI_Finalize: close the stores. */
void px_serve_finish(void);

#endif
