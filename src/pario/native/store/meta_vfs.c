/* pario store: the SQLite VFS of a metadata database shared by nodes ("pfs" coordination,
 * store/coord.h; docs/multinode.md).
 *
 * SQLite's rollback journal keeps a database consistent between processes with fcntl locks
 * only, which parallel file systems make cluster-wide; what it also assumes is that a read
 * made under a lock returns what the last writer committed.  A client whose kernel page cache
 * its file system does not invalidate breaks that (ceph-fuse: a node read a row count another
 * node had raised, for seconds -- measured in tests/multinode).  This VFS is the system's
 * default one with one change: when a connection takes its SHARED lock (the start of every
 * transaction, before SQLite reads the change counter), the kernel's cached pages of the file
 * are dropped (POSIX_FADV_DONTNEED), so the reads of the transaction ask the file system,
 * whose own cache is coherent.  Nothing can commit while the lock is held, so no stale page
 * can come back during the transaction.
 *
 * SQLite's VFS structures are its stable, documented ABI (sqlite3.h: sqlite3_vfs version 3,
 * sqlite3_io_methods); they are declared here because the library is loaded at run time
 * (store/meta.c).  The shim keeps the default VFS's file object and points it at a copy of
 * its methods table whose xLock and xClose are these; our part of the file (a descriptor of
 * the same file for the drop) follows the default VFS's. */
#define _GNU_SOURCE
#include "store/meta.h"

#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

typedef struct sq_file {
    const struct sq_io_methods *pMethods;
} sq_file;

typedef struct sq_io_methods {        /* version 3; the slots this file does not call as void * */
    int iVersion;
    int (*xClose)(sq_file *);
    void *xRead, *xWrite, *xTruncate, *xSync, *xFileSize;
    int (*xLock)(sq_file *, int);
    void *xUnlock, *xCheckReservedLock, *xFileControl, *xSectorSize, *xDeviceCharacteristics;
    void *xShmMap, *xShmLock, *xShmBarrier, *xShmUnmap;
    void *xFetch, *xUnfetch;
} sq_io_methods;

typedef struct sq_vfs {
    int iVersion;
    int szOsFile;
    int mxPathname;
    struct sq_vfs *pNext;
    const char *zName;
    void *pAppData;
    int (*xOpen)(struct sq_vfs *, const char *zName, sq_file *, int flags, int *pOutFlags);
    void *xDelete, *xAccess, *xFullPathname, *xDlOpen, *xDlError, *xDlSym, *xDlClose, *xRandomness, *xSleep,
        *xCurrentTime, *xGetLastError, *xCurrentTimeInt64, *xSetSystemCall, *xGetSystemCall, *xNextSystemCall;
} sq_vfs;

_Static_assert(offsetof(sq_io_methods, xLock) == offsetof(sq_io_methods, xClose) + 6 * sizeof(void *),
               "xLock is the 8th member");
_Static_assert(sizeof(sq_vfs) == 3 * sizeof(int) + 4 + 19 * sizeof(void *), "sqlite3_vfs version 3");

enum { SQ_OPEN_MAIN_DB = 0x100, SQ_LOCK_SHARED = 1 };
#define VFS_NAME "pario-pfs"

static sq_vfs *base;            /* the default VFS */
static sq_vfs shim;
static sq_io_methods methods;   /* the default's methods with our xLock and xClose */
static int (*base_lock)(sq_file *, int);
static int (*base_close)(sq_file *);
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

/* our part of a file, after the default VFS's */
static int *our_fd(sq_file *f)
{
    return (int *)((char *)f + ((base->szOsFile + 7) & ~7));
}

static int shim_lock(sq_file *f, int level)
{
    int rc = base_lock(f, level);
    if (rc == 0 && level == SQ_LOCK_SHARED && *our_fd(f) >= 0)
        (void)posix_fadvise(*our_fd(f), 0, 0, POSIX_FADV_DONTNEED);
    return rc;
}

static int shim_close(sq_file *f)
{
    if (*our_fd(f) >= 0)
        close(*our_fd(f));
    *our_fd(f) = -1;
    return base_close(f);
}

static int shim_open(sq_vfs *vfs, const char *name, sq_file *f, int flags, int *out_flags)
{
    (void)vfs;
    *our_fd(f) = -1;
    int rc = base->xOpen(base, name, f, flags, out_flags);
    if (rc != 0 || !f->pMethods || !(flags & SQ_OPEN_MAIN_DB) || !name)
        return rc;
    pthread_mutex_lock(&mu);
    int same = 1;
    if (!methods.xClose && f->pMethods->iVersion == 3) {   /* the first main database: the default's table */
        memcpy(&methods, f->pMethods, sizeof methods);
        base_lock = f->pMethods->xLock;
        base_close = f->pMethods->xClose;
        methods.xClose = shim_close;
        methods.xLock = shim_lock;
    }
    same = methods.xClose && f->pMethods->xClose == base_close && f->pMethods->xLock == base_lock;
    pthread_mutex_unlock(&mu);
    if (!same)                  /* another kind of file object: leave it as the default made it */
        return rc;
    *our_fd(f) = open(name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    f->pMethods = &methods;
    return rc;
}

const char *pxs_meta_vfs(void *(*vfs_find)(const char *), int (*vfs_register)(void *, int))
{
    static const char *name;
    pthread_mutex_lock(&mu);
    if (!name && vfs_find && vfs_register) {
        sq_vfs *v = vfs_find(NULL);
        if (v && v->iVersion == 3) {
            base = v;
            memcpy(&shim, v, sizeof shim);
            shim.pNext = NULL;
            shim.zName = VFS_NAME;
            shim.szOsFile = ((v->szOsFile + 7) & ~7) + (int)sizeof(int);
            shim.xOpen = shim_open;
            if (vfs_register(&shim, 0) == 0)
                name = VFS_NAME;
        }
    }
    pthread_mutex_unlock(&mu);
    return name;
}
