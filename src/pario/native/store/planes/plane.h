/* pario serve: the data files of a store behind one small interface, one file per data
 * plane (in the style of IOR's aiori backends: a table of functions per backend, the store
 * code calls only the table; docs/serve.md).
 *
 * A logical file with metadata id i keeps the bytes its layout puts on server j in the
 * server's data file (i, d) (d = 0 its own data, d >= 1 an extent map's replica data files),
 * at the server-local offsets of pario.layout.map_requests.  Where a data file lives is the
 * plane's business:
 *
 *   local.c   store.json "backend": "local" (pario.store.local): the file
 *             `<server j dir>/<i:08d>.<d>`, pread/pwrite(v), ftruncate, fallocate,
 *             fsync; O_DIRECT in direct mode;
 *   rados.c   "backend": "rados" (pario.store.rados): the RADOS objects
 *             `<i:08d>.<d>.<k:08x>` of object_size bytes in server j's pool, in the
 *             store's namespace; librados loaded with dlopen at the first open.
 *
 * planes.c is the registry (as IOR's aiori.c: one table of the available planes, found by
 * name); a new plane is its file and one line there, and its Python half in
 * pario.store.PLANES.
 *
 * Every plane reads bytes a data file does not have as 0 (holes, past its end).  Every
 * function returns PXS_OK or a negative PXS_E* code with a one-line message in err.  The
 * caller serialises calls on one plane (the store's mutex). */
#ifndef PARIO_SERVE_DATAFILE_H
#define PARIO_SERVE_DATAFILE_H

#include <stddef.h>
#include <stdint.h>

#include "store/json.h"
#include "store/meta.h"

typedef struct pxs_dplane pxs_dplane;       /* a store's data plane (one per store open) */
/* how data files use the client's page cache: as the kernel does; O_DIRECT (local only); or
 * cached between sync points (data files held open on several nodes of a file system whose
 * client cache is not coherent: store/coord.h): a data file's cached pages are dropped when it
 * is opened and whenever the store calls `forget` -- at a file's (re)open, at every sync
 * (MPI_File_sync: MPI-IO's sync-barrier-sync consistency, MPI 4.0 §14.6.1) and when the RMT
 * changed by another process (a copy may have been refreshed behind this node's cache) */
enum { PXS_CACHE_KERNEL = 0, PXS_CACHE_DIRECT = 1, PXS_CACHE_SYNC_POINTS = 2 };

typedef struct pxs_datafile pxs_datafile;   /* one open data file (server, id, d) */

/* one piece of a transfer: len bytes at server-local offset `local` of data file df <->
 * the caller's buffer at bo */
typedef struct {
    pxs_datafile *df;
    int server, datafile;
    int64_t local, len, bo;
    int order;              /* the caller's order of servers (storefile.c; planes ignore it) */
} pxs_dseg;

typedef struct pxs_dfops {
    const char *kind;               /* "local", "rados": store.json "backend" */
    /* store.json's entries of this plane (store/config.c, after the profile's servers): every
     * server's place (cfg->servers[i].place) and the plane's own settings (cfg->plane_cfg,
     * cfg->plane_free), checked; j NULL: store.json has no profile servers (say what a store
     * of this plane needs).  path: store.json, for messages */
    int (*configure)(const pxs_json *j, pxs_config *cfg, const char *path, char *err, size_t errlen);
    /* the plane of a store (cfg stays valid until close_plane); cache: PXS_CACHE_* below */
    int (*open_plane)(const pxs_config *cfg, int cache, pxs_dplane **out, char *err, size_t errlen);
    void (*close_plane)(pxs_dplane *dp);
    /* data file (id, d) of server (created when needed: at open or at its first write);
     * name: the logical file's, for messages (the caller keeps it until close) */
    int (*open)(pxs_dplane *dp, int server, int64_t id, int d, const char *name, pxs_datafile **out, char *err,
                size_t errlen);
    void (*close)(pxs_datafile *f);
    /* move n segments grouped by server (in the order the caller first reached each, storefile.c),
     * each server's sorted by (data file, local, bo): write from / read into buf;
     * reads fill what a data file does not have with 0 */
    int (*transfer)(pxs_dplane *dp, const pxs_dseg *sg, size_t n, char *buf, int write, char *err, size_t errlen);
    /* the size of data file (id, d) of server, 0 if it has none (no data file is created) */
    int (*size)(pxs_dplane *dp, int server, int64_t id, int d, int64_t *size, char *err, size_t errlen);
    /* the data file holds exactly n bytes (durable before return if sync) */
    int (*truncate)(pxs_datafile *f, int64_t n, int sync, char *err, size_t errlen);
    /* the data file holds at least end bytes: grows only, never overwrites a byte */
    int (*reserve)(pxs_datafile *f, int64_t end, char *err, size_t errlen);
    /* the bytes written to the data file durable */
    int (*sync)(pxs_datafile *f, char *err, size_t errlen);
    /* optional (NULL: the plane keeps no client cache): PXS_CACHE_SYNC_POINTS: drop the client's
     * cached pages of the data file, its next reads ask the file system; otherwise nothing */
    void (*forget)(pxs_datafile *f);
    /* the data file numbers d of id on server (malloc'ed, *n of them; none: *n = 0) */
    int (*list)(pxs_dplane *dp, int server, int64_t id, int **ds, size_t *n, char *err, size_t errlen);
    /* optional (NULL: the caller copies through a buffer): n bytes at spos of src to dpos of dst
     * inside the plane (bytes past src's end copy as zeros); PXS_ENOSYS: not here, use a buffer */
    int (*copy)(pxs_datafile *src, int64_t spos, pxs_datafile *dst, int64_t dpos, int64_t n, char *err,
                size_t errlen);
} pxs_dfops;

extern const pxs_dfops pxs_df_local;   /* local.c */
extern const pxs_dfops pxs_df_rados;   /* rados.c */

/* the plane named name (planes.c), NULL if there is none */
const pxs_dfops *pxs_plane_find(const char *name);

/* every plane starts with this header */
struct pxs_dplane {
    const pxs_dfops *ops;
    const pxs_config *cfg;
};

/* the plane of cfg->plane, opened (planes.c) */
int pxs_dplane_open(const pxs_config *cfg, int cache, pxs_dplane **out, char *err, size_t errlen);
void pxs_dplane_close(pxs_dplane *dp);

#endif
