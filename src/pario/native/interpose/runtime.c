/* pario interpose: the core (runtime.h) -- MPI_Init, MPI_Init_thread, MPI_Finalize, the
 * module table and the table of open files.
 *
 * MPI_Init and MPI_Init_thread call PMPI first and, when it succeeded, every module's init
 * hook; MPI_Finalize calls every module's finalize hook, then PMPI_Finalize.  Programs that
 * start MPI through MPI_Session_init only (MPI-4.1 §11.3) reach no module's init.
 * Registration follows Darshan's core (darshan_core_register_module): the modules hand
 * their hooks to the core, which calls them in order and knows none of them.
 */
#define _GNU_SOURCE
#include "interpose/runtime.h"

#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "interpose/handles.h"

int px_core_keep_files;

static const px_module *modules[PX_CORE_MODULES];
static int nmodules;

void px_core_register(const px_module *m)
{
    if (nmodules == PX_CORE_MODULES) {
        fprintf(stderr, "pario: error: interpose: more than %d modules; %s is left out\n", PX_CORE_MODULES, m->name);
        return;
    }
    modules[nmodules++] = m;
}

static void init_modules(void)
{
    for (int i = 0; i < nmodules; i++)
        if (modules[i]->init)
            modules[i]->init();
}

PX_EXPORT int MPI_Init(int *argc, char ***argv)
{
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS)
        init_modules();
    return rc;
}

PX_EXPORT int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS)
        init_modules();
    return rc;
}

PX_EXPORT int MPI_Finalize(void)
{
    for (int i = 0; i < nmodules; i++)
        if (modules[i]->finalize)
            modules[i]->finalize();
    return PMPI_Finalize();
}

int px_core_open(MPI_Comm comm, const char *filename, int amode, MPI_Info info, MPI_File *fh,
                 const struct px_file_ops **ops, void **state)
{
    *ops = NULL;
    *state = NULL;
    for (int i = 0; i < nmodules; i++) {
        if (!modules[i]->open)
            continue;
        int rc = modules[i]->open(comm, filename, amode, info, fh, ops, state);
        if (rc != MPI_SUCCESS || *ops)
            return rc;
    }
    return MPI_SUCCESS;
}

int px_core_delete(const char *filename, MPI_Info info, int *rc)
{
    for (int i = 0; i < nmodules; i++)
        if (modules[i]->del && modules[i]->del(filename, info, rc))
            return 1;
    return 0;
}

const char *px_fs_path(const char *name)
{
    const char *colon = strchr(name, ':');
    if (!colon || colon - name < 2)
        return name;
    for (const char *p = name; p < colon; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9')))
            return name;
    return colon + 1;
}

/* ------------------------------------------------------------------ the open files */

static pthread_mutex_t files_mutex = PTHREAD_MUTEX_INITIALIZER;
static px_map files;       /* MPI_File -> struct px_file */
static int nfiles;         /* entries in `files` (read without the lock as a fast path) */
static int next_file_id;

static uint64_t fkey(MPI_File fh) { return (uint64_t)(uintptr_t)fh; }

/* A handle reaches a data call only after its MPI_File_open has returned, so a file in the
 * table is seen here (the count is stored before the open returns; the program orders its
 * threads' uses of the handle after that). */
struct px_file *px_core_file(MPI_File fh)
{
    if (__atomic_load_n(&nfiles, __ATOMIC_ACQUIRE) == 0)
        return NULL;
    pthread_mutex_lock(&files_mutex);
    struct px_file *f = px_map_get(&files, fkey(fh));
    pthread_mutex_unlock(&files_mutex);
    return f;
}

int px_core_file_add(MPI_File fh, struct px_file *f, int *id)
{
    pthread_mutex_lock(&files_mutex);
    *id = next_file_id++;
    int ok = px_map_put(&files, fkey(fh), f) == 0;
    __atomic_store_n(&nfiles, (int)files.n, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&files_mutex);
    return ok ? 0 : -1;
}

void px_core_file_remove(MPI_File fh)
{
    pthread_mutex_lock(&files_mutex);
    px_map_take(&files, fkey(fh));
    __atomic_store_n(&nfiles, (int)files.n, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&files_mutex);
}

void px_core_file_each(void (*fn)(struct px_file *f, void *ctx), void *ctx)
{
    pthread_mutex_lock(&files_mutex);
    for (size_t i = 0; i < files.cap; i++)
        if (files.vals[i])
            fn(files.vals[i], ctx);
    pthread_mutex_unlock(&files_mutex);
}
