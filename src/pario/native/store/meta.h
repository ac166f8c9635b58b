/* pario serve: a store's configuration (DIR/store.json) and file metadata (DIR/meta.db)
 * from C, for the store data path inside MPI ranks (docs/serve.md).
 *
 * The metadata database is SQLite (pario.store.meta: table files(id, name, layout JSON,
 * size, dirty), WAL, synchronous=FULL).  libsqlite3 is loaded at run time with
 * dlopen("libsqlite3.so.0") and the few functions used are declared here by hand: the
 * library is on every machine that runs pario (Python's sqlite3 module links it), its
 * header is not.  Every wait for another process's transaction is bounded by the busy
 * timeout (PARIO_STORE_TIMEOUT seconds, default 60) and ends in a one-line error.
 *
 * The rules are pario.store.meta's and pario.store.local's: a process of a shared store
 * commits sizes with MAX(size, ?) and never clears `dirty`; an exclusive one sets them. */
#ifndef PARIO_SERVE_META_H
#define PARIO_SERVE_META_H

#include <stddef.h>
#include <stdint.h>

#define PXS_ERRLEN 512

/* error codes of the serve library (every function: 0 = success) */
enum {
    PXS_OK = 0,
    PXS_EINVAL = -1,    /* bad argument, bad layout, bad configuration */
    PXS_ENOMEM = -2,
    PXS_EIO = -3,       /* a system call failed */
    PXS_ENOENT = -4,    /* no such store or file */
    PXS_EDB = -5,       /* the metadata database failed (busy beyond the timeout, damaged) */
    PXS_ERMT = -6,      /* the RMT journal refused or failed */
    PXS_EBUSY = -7,     /* the store is in use (exclusive open) / a lock timed out */
    PXS_ENOSYS = -8,    /* something this C library does not do (the message says what) */
    PXS_EVERIFY = -9,   /* the store must be verified after an unclean end in another boot */
    PXS_EEXIST = -10,   /* a file of that name exists already */
    PXS_EREMOTE = -11   /* the store is open on another machine and its coordination serves one */
};

/* one server of the store's profile: where the data plane keeps its data and the α, β the
 * hybrid routing cost uses (pario.store.hybrid.profile_cost: reads, random access) */
typedef struct {
    char *name;
    char *place;        /* the plane's: a directory (local: absolute or relative to the current
                         * directory), a pool (rados) -- store/planes/plane.h */
    double alpha;       /* alpha_read_rand, else alpha */
    double beta;        /* beta_read, else beta */
} pxs_server;

/* store.json (store/config.c) */
typedef struct {
    char *root;
    char *id;           /* the store id (store.json "id"; the RADOS namespace of a rados store) */
    char *system;       /* the profile's name */
    char *plane;        /* the data plane (store.json "backend", default "local"; planes/plane.h) */
    void *plane_cfg;    /* what the plane read from store.json (its configure), freed by plane_free */
    void (*plane_free)(void *plane_cfg);
    char *coord;        /* the coordination member (store.json "coord", default "host"; store/coord.h) */
    int nservers;
    pxs_server *servers;
} pxs_config;

/* read DIR/store.json (store/config.c): the profile's servers, then the data plane's own
 * entries and every server's place (planes/plane.h, the plane's configure) */
int pxs_config_read(const char *root, pxs_config *cfg, char *err, size_t errlen);
void pxs_config_free(pxs_config *cfg);
/* server index of a name, -1 if none */
int pxs_config_server(const pxs_config *cfg, const char *name);

/* seconds every wait for another process may take: $PARIO_STORE_TIMEOUT, else 60 */
double pxs_store_timeout(void);

typedef struct {
    void *db;           /* sqlite3 * */
    char *path;
    double timeout;
    /* where the catalog's lines go when the store's files are not in a directory (the "rados"
     * coordination: an object): NULL, DIR/catalog.log beside the database */
    int (*catalog_append)(void *ctx, const char *line, size_t n, char *err, size_t errlen);
    void *catalog_ctx;
} pxs_meta;

typedef struct {
    int64_t id;
    char *name;
    char *layout;       /* the layout JSON */
    int64_t size;
    int dirty;
} pxs_meta_rec;

/* wal: SQLite's write-ahead log (one machine), else its rollback journal (store/coord.h) */
int pxs_meta_open(pxs_meta *m, const char *path, double timeout, int wal, char *err, size_t errlen);
/* the metadata of a store coordinated in RADOS (store/coord/rados.c): database meta.db of pool's
 * namespace ns through Ceph's SQLite VFS, the cluster of ceph.conf conf; create: made (with its
 * schema) if missing, else a missing one is PXS_ENOENT */
int pxs_meta_open_rados(pxs_meta *m, const char *conf, const char *pool, const char *ns, int create, double timeout,
                        char *err, size_t errlen);
/* fsck --repair of a store coordinated in RADOS (pario.store.repair): its database meta.db
 * copied page by page to the SQLite file local (to_rados 0: a damaged one as far as its pages
 * read; PXS_ENOENT when there is none), or deleted and made anew from local (to_rados 1) */
int pxs_meta_rados_transfer(const char *conf, const char *pool, const char *ns, const char *local, int to_rados,
                            char *err, size_t errlen);
void pxs_meta_close(pxs_meta *m);
void pxs_meta_rec_free(pxs_meta_rec *r);
/* 1 found (rec filled), 0 no such file, < 0 error */
int pxs_meta_get(pxs_meta *m, const char *name, pxs_meta_rec *rec, char *err, size_t errlen);
int pxs_meta_get_id(pxs_meta *m, int64_t id, pxs_meta_rec *rec, char *err, size_t errlen);
/* a new file (id in *id); PXS_EINVAL if the name exists */
int pxs_meta_create(pxs_meta *m, const char *name, const char *layout_json, int64_t *id, char *err, size_t errlen);
/* 1 deleted, 0 no such file, < 0 error */
int pxs_meta_delete(pxs_meta *m, const char *name, char *err, size_t errlen);
/* PXS_ENOENT no such file, PXS_EEXIST the new name is taken */
int pxs_meta_rename(pxs_meta *m, const char *old, const char *new_name, char *err, size_t errlen);
/* every file, by name (malloc'ed arrays; names with pxs_strv_free) */
int pxs_meta_list(pxs_meta *m, int64_t **ids, char ***names, size_t *n, char *err, size_t errlen);
/* the highest id ever handed out (>= 0), < 0 error */
int64_t pxs_meta_top_id(pxs_meta *m, char *err, size_t errlen);
/* a relayout's switch: rows rids renamed rnames, row new_id named name (size, clean), if name is old_id */
int pxs_meta_switch(pxs_meta *m, const char *name, int64_t old_id, int64_t new_id, int64_t size, const int64_t *rids,
                    const char *const *rnames, size_t nr, char *err, size_t errlen);
/* a new, empty database at path (a new store) */
int pxs_meta_init(const char *path, int wal, char *err, size_t errlen);
/* meta_vfs.c: the name of the VFS that reads a shared database coherently between nodes
 * (registered at the first call with SQLite's sqlite3_vfs_find / sqlite3_vfs_register), NULL
 * if the library's default VFS is not one it can wrap */
const char *pxs_meta_vfs(void *(*vfs_find)(const char *), int (*vfs_register)(void *, int));
int pxs_meta_set_dirty(pxs_meta *m, const char *name, int dirty, char *err, size_t errlen);
/* A file deleted by the program it is served to (MPI_File_delete, MPI_MODE_DELETE_ON_CLOSE;
 * interpose/serve.c): emptied, and its id in table `deleted` (a tombstone), so that it keeps
 * its name, layout and replica registrations for the program's next create while it is
 * absent, as on a file system, to an open without MPI_MODE_CREATE and to another delete.
 * on: set the tombstone (1: set now, 0: it was there); off: clear it (1: it was there, 0:
 * it was not: a concurrent create cleared it first).  < 0: an error (err). */
int pxs_meta_tombstone(pxs_meta *m, int64_t id, int on, char *err, size_t errlen);
/* 1: file id has a tombstone, 0: it has none, < 0: an error (err) */
int pxs_meta_tombstoned(pxs_meta *m, int64_t id, char *err, size_t errlen);
int pxs_meta_set_size(pxs_meta *m, const char *name, int64_t size, int dirty, char *err, size_t errlen);
/* size = MAX(size, ?) (shared stores: several processes extend one file) */
int pxs_meta_grow_size(pxs_meta *m, const char *name, int64_t size, char *err, size_t errlen);
/* names of the files with dirty != 0 (malloc'ed array of malloc'ed strings) */
int pxs_meta_dirty_names(pxs_meta *m, char ***names, size_t *n, char *err, size_t errlen);
void pxs_strv_free(char **v, size_t n);

/* read a whole (small) file; NULL and errno on failure */
char *pxs_read_text(const char *path, size_t *len, size_t max);
/* "a/b", malloc'ed (NULL: no memory) */
char *pxs_join(const char *a, const char *b);

/* a library loaded by dlopen: the functions of tab looked up in handle h (store/meta.c's
 * libsqlite3, store/rados_api.c's librados); PXS_OK, or PXS_ENOSYS with "LIB has no NAME" in why */
typedef struct {
    const char *name;
    void **slot;
} pxs_dlsym;
int pxs_dlsym_table(void *h, const char *lib, const pxs_dlsym *tab, size_t n, char *why, size_t whylen);

#endif
