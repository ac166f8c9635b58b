/* pario interpose: the core (runtime.c) -- MPI_Init, MPI_Init_thread and MPI_Finalize, the
 * table of modules, and the table of the MPI files the modules keep state for.
 *
 * As Darshan's core (darshan-runtime's darshan_core_register_module: each instrumentation
 * module hands the core its hooks, and the core calls them at start-up and shutdown without
 * knowing the modules), every module of libpario_trace.so registers one px_module from a
 * constructor of its own file: the tracing module (trace.c) and the serving module
 * (serve.c).  The core knows no module by name; the MPI-IO wrappers (mpiio.c) reach a
 * module only through this table (MPI_File_open, MPI_File_delete) and through the ops
 * table of each open file (files.h, as ROMIO's ADIOI_Fns). */
#ifndef PARIO_INTERPOSE_RUNTIME_H
#define PARIO_INTERPOSE_RUNTIME_H

#include <mpi.h>
#include <stdint.h>

/* Interposed entry points stay visible; everything else is hidden (-fvisibility=hidden). */
#define PX_EXPORT __attribute__((visibility("default")))

/* Constructor priorities of the modules' registrations: the core calls the modules' hooks
 * in registration order (tracing before serving: MPI_Finalize writes the trace, then closes
 * the stores). */
#define PX_PRIO_TRACE 101
#define PX_PRIO_SERVE 102

struct px_file;
struct px_file_ops;

/* One module.  Every hook may be NULL. */
typedef struct px_module {
    const char *name;
    /* After PMPI_Init or PMPI_Init_thread succeeded (every rank: may use collectives). */
    void (*init)(void);
    /* In MPI_Finalize, before PMPI_Finalize. */
    void (*finalize)(void);
    /* MPI_File_open (collective over comm): claim the file or not.  Claimed: *ops and *state
     * set (the file's ops table and the module's state of it), MPI_SUCCESS.  Not claimed:
     * *ops left NULL, MPI_SUCCESS.  An error: its MPI error code, the error handler of
     * MPI_FILE_NULL already called (MPI-4.1 §9.3), on every rank. */
    int (*open)(MPI_Comm comm, const char *filename, int amode, MPI_Info info, MPI_File *fh,
                const struct px_file_ops **ops, void **state);
    /* MPI_File_delete: 1 handled (*rc its MPI code), 0 not this module's name. */
    int (*del)(const char *filename, MPI_Info info, int *rc);
} px_module;

#define PX_CORE_MODULES 8

/* Register a module (from a constructor; not thread-safe).  A table already full: the
 * module is left out, one line on stderr. */
void px_core_register(const px_module *m);

/* The modules' open hooks in order, until one claims the file or fails (px_module.open). */
int px_core_open(MPI_Comm comm, const char *filename, int amode, MPI_Info info, MPI_File *fh,
                 const struct px_file_ops **ops, void **state);
/* The modules' delete hooks in order, until one handles the name (px_module.del). */
int px_core_delete(const char *filename, MPI_Info info, int *rc);

/* Nonzero once a module claims (or tried to claim) a file: the MPI-IO layer then keeps file
 * state even when tracing is off. */
extern int px_core_keep_files;

/* The path the file system sees: ROMIO takes "prefix:path" (ufs:, nfs:, lustre:, ...);
 * also the name a served file has in the store. */
const char *px_fs_path(const char *name);

/* ------------------------------------------------------------------ the open files
 * MPI_File -> the MPI-IO layer's state of it (files.h), for the files some module keeps
 * state for; thread-safe. */

/* The state of fh, NULL if none.  While the table is empty: one atomic load, no lock. */
struct px_file *px_core_file(MPI_File fh);
/* Add f as fh's state and give it the next file id of this rank (0, 1, 2, ... in open
 * order: taken even when the table is out of memory).  0, or -1 when out of memory. */
int px_core_file_add(MPI_File fh, struct px_file *f, int *id);
/* Remove fh's state. */
void px_core_file_remove(MPI_File fh);
/* Call fn for each file in the table (the table locked). */
void px_core_file_each(void (*fn)(struct px_file *f, void *ctx), void *ctx);

#endif
