/* pario serve: an open pario store and its files' data in C — pario.store.local's logic
 * over the store's data plane (datafile.h: the `local` backend's files, the `rados`
 * backend's objects; docs/serve.md).
 *
 * A logical file with metadata id i keeps the bytes its layout puts on server j in the
 * server's data file (i, d) (d = 0 its own data, d >= 1 an extent map's replica data
 * files) at the server-local offsets of pario.layout.map_requests (layout.h).  Data files
 * are opened lazily; a request is cut into single-server pieces in logical order, sorted by
 * data file and server-local offset, and handed to the plane in one call (the local plane
 * makes the pieces contiguous on a data file one system call, the rados plane one object
 * operation each, all in flight at once); bytes a data file does not have read as 0 (holes
 * stay holes).  The mapping reuses per-handle arrays: a served read or write allocates
 * nothing in this file once they have grown to its number of pieces (arrays of more than
 * 4096 pieces, for large requests, are freed after the call).
 *
 * Sizes are local.py's: kept in memory while a file is open; the first write past the
 * committed size marks the file `dirty` in the metadata before its first byte; close and
 * fsync commit the size (an exclusive store sets it and clears `dirty`; a shared store
 * commits MAX(size, ?) and never clears `dirty`); an open of a dirty file recovers the size
 * from the data files (max over servers j of min{x : C_j(x) >= data file size_j}); files
 * with an extent-map layout commit their size on every extending write.
 *
 * Thread safety: every public call of the serve library takes the store's (recursive)
 * mutex: calls of several threads on one store are serialised. */
#ifndef PARIO_SERVE_STOREFILE_H
#define PARIO_SERVE_STOREFILE_H

#include <pthread.h>
#include <stdint.h>

#include "store/planes/plane.h"
#include "store/layout.h"
#include "store/meta.h"
#include "core/rmt.h"
#include "store/coord.h"

typedef struct pxs_sfile pxs_sfile;

/* the data path's store; the redirection's own state (open files, lazy synchronisation,
 * the opener's modes, the routing cost) is in redirect.c's object around it */
typedef struct pxs_store {
    pxs_config cfg;
    pxs_meta meta;
    pxs_dplane *dp;             /* the data plane (datafile.h) */
    const char **names;         /* server names, for layout parsing */
    int direct, shared, first;
    int cache;                  /* the data files' use of the client cache (plane.h PXS_CACHE_*) */
    double timeout;             /* PARIO_STORE_TIMEOUT */
    pxs_coord *co;              /* the coordination member (store/coord.h): store lock, journal, range locks */
    int have_rmt;
    rmt_core rmt;               /* the RMT (redirect.c opens it) */
    pthread_mutex_t mu;         /* recursive: one call at a time */
    pxs_sfile *sfiles;          /* open data handles (one per name, counted) */
    char err[PXS_ERRLEN];       /* the last error, one line */
} pxs_store;

typedef struct {
    int server, datafile;
    pxs_datafile *df;
} pxs_fd;

struct pxs_sfile {
    pxs_store *st;
    char *name;
    int64_t id;
    pxs_layout *lay;
    int64_t size;
    int size_dirty;             /* extended here, size not committed yet */
    int dirty_marked;           /* shared mode: meta dirty = 1 committed for this file */
    int refs;
    pxs_fd *fds;
    int nfd, capfd;
    pxs_datafile **fd0;         /* nservers: server j's own data file (datafile 0), or NULL */
    /* the request mapping's scratch, kept between calls (no allocation per call once grown;
     * every call on a handle holds the store's mutex) */
    pxs_pieces pcs;
    pxs_dseg *seg;
    size_t capseg;
    pxs_sfile *next;
};

/* set the store's one-line error; returns rc */
int pxs_fail(pxs_store *st, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* open a data handle of a store file (refcounted per name; PXS_ENOENT if no such file) */
int pxs_sfile_open(pxs_store *st, const char *name, pxs_sfile **out);
/* drop a reference; the last one commits an uncommitted size (after fsync) and closes fds */
int pxs_sfile_close(pxs_sfile *h);
/* n ranges [off[k], +len[k]) <-> buf + bo[k] (no size clamp: bytes past the data read as 0) */
int pxs_sfile_readv(pxs_sfile *h, int64_t n, const int64_t *off, const int64_t *len, void *buf, const int64_t *bo);
int pxs_sfile_writev(pxs_sfile *h, int64_t n, const int64_t *off, const int64_t *len, const void *buf,
                     const int64_t *bo);
/* the size the data files hold (max over servers j of min{x : C_j(x) >= data file size_j};
 * extent maps: the handle's), whatever the metadata says (fsck: a lost committed size) */
int pxs_sfile_recovered_size(pxs_sfile *h, int64_t *size);
/* the logical size grows to end (bytes written elsewhere, e.g. a replica) */
/* every data file of the layout opened, created if missing */
int pxs_sfile_open_all(pxs_sfile *h);
int pxs_sfile_extend(pxs_sfile *h, int64_t end);
int pxs_sfile_reserve(pxs_sfile *h, int64_t end);
/* another process truncated the file to size: the handle's size, no extension to commit */
void pxs_sfile_resized(pxs_sfile *h, int64_t size);
/* shared store: the size all processes made (metadata, data files while dirty) */
int pxs_sfile_refresh_size(pxs_sfile *h, int64_t *size);
int pxs_sfile_truncate(pxs_sfile *h, int64_t size);
/* the bytes written through this handle and its size durable; everything: every data file
 * of the file, whoever wrote it */
int pxs_sfile_fsync(pxs_sfile *h, int everything);
/* PXS_CACHE_SYNC_POINTS (plane.h): the client's cached pages of every open data file of the
 * store dropped (their next reads ask the file system); other cache modes: nothing */
void pxs_store_forget(pxs_store *st);
/* copy ranges [so[k], +len[k]) of src to do[k] of dst (replication, flush); a range past
 * src's data reads as zeros */
int pxs_sfile_copy(pxs_sfile *src, const int64_t *so, pxs_sfile *dst, const int64_t *dof, const int64_t *len,
                   int64_t n);
/* recover and commit the size of every dirty file, clearing the flag (alone in the store) */
int pxs_store_finalize_sizes(pxs_store *st);

#endif
