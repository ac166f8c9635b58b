/* pario store: coordination between the processes of a store behind one small interface
 * (docs/store.md, "Coordination"): the store lock, the RMT journal's lock, publication and
 * following, the byte-range synchronisation locks and the metadata's opening.  One table of
 * functions per member (as the data planes, store/planes/plane.h); store.json "coord"
 * chooses the member (absent: "host"); every caller (store/redirect.c, the bindings in
 * python/) goes through the table, never through flock, the journal's mapping or
 * DIR/.sync.lock itself.
 *
 * Members:
 *   host   coord/posix.c: one machine: flock on DIR/.lock, the journal DIR/rmt.log mapped
 *          MAP_SHARED with its robust process-shared mutex (core/journal_map.c), fcntl
 *          open-file-description locks on DIR/.sync.lock, SQLite WAL DIR/meta.db; a store
 *          another machine has open is refused (PXS_EREMOTE);
 *   pfs    coord/posix.c: nodes sharing a parallel file system: fcntl locks on DIR/.lock, the
 *          journal with pread/pwrite and a byte-range lock (core/journal_file.c), the same
 *          range locks, SQLite with a rollback journal (docs/multinode.md);
 *   rados  coord/rados.c: clients of the RADOS cluster holding a rados store: leased cls_lock
 *          locks, the journal as an object with version-fenced writes
 *          (coord/journal_rados.c), per-file range locks, SQLite through Ceph's VFS.
 *
 * What every member guarantees:
 *  - store lock: exclusive excludes every other holder, shared excludes only an exclusive
 *    one; PXS_EREMOTE (nothing held) when the member cannot serve this process together with
 *    the holders (co->remote names them); try_lock never waits (the caller polls under its timeout); downgrade exclusive ->
 *    shared never lets an exclusive holder in between; a dead holder's lock is released;
 *  - journal: journal_lock (+ journal_publish) makes appends one process at a time and a
 *    published record visible to every opener's journal_follow, in order; journal_sync makes
 *    the published records durable; a dead holder's journal lock is taken over;
 *  - range locks: [x, e) of file fid, shared or exclusive, waits at most timeout seconds
 *    (RMT_ETIMEDOUT), released by the holder's death;
 *  - metadata: the store's database opened with every wait bounded by the timeout.
 * Store-lock and metadata functions return PXS_* codes (store/meta.h), journal and range
 * functions the core's RMT_* codes (core/rmt.h). */
#ifndef PARIO_STORE_COORD_H
#define PARIO_STORE_COORD_H

#include <stddef.h>
#include <stdint.h>

#include "core/rmt.h"
#include "store/meta.h"

typedef struct pxs_coord pxs_coord;

typedef struct pxs_coord_ops {
    const char *name;                   /* store.json "coord" */
    /* 1: the store's data files cached only between sync points (PXS_CACHE_SYNC_POINTS, plane.h:
     * their cached pages dropped at open, sync and a change of the RMT by another process):
     * processes of several nodes hold them open at once, and a parallel file system's client
     * cache may not be coherent for files held open (ceph-fuse with its kernel page cache;
     * docs/multinode.md) */
    int uncached_data;
    /* 1: the metadata database in SQLite's WAL mode (one machine: its index is a shared
     * mapping); 0: a rollback journal through store/meta_vfs.c (several nodes) */
    int meta_wal;
    /* the coordination of the store at root (nothing locked yet); err: one line */
    int (*open)(const char *root, double timeout, pxs_coord **out, char *err, size_t errlen);
    void (*close)(pxs_coord *co);       /* releases everything it holds */

    /* ---- the store lock: PXS_OK, PXS_EBUSY (held elsewhere), PXS_EIO */
    int (*try_lock)(pxs_coord *co, int exclusive);
    int (*downgrade)(pxs_coord *co);    /* exclusive -> shared */
    void (*release)(pxs_coord *co);     /* what a killed process leaves: the lock dropped */
    /* optional (NULL: not offered): the lock dropped, the member able to take it again (a last
     * closer's second try: two shared holders closing at once each fail to take it exclusive
     * while the other still holds it; dropping first, one of them gets it) */
    void (*unlock)(pxs_coord *co);

    /* ---- the metadata (store/meta.h) */
    int (*meta_open)(pxs_coord *co, pxs_meta *m, char *err, size_t errlen);
    /* a new, empty database with the schema (a new store; pario.store.init_store) */
    int (*meta_init)(pxs_coord *co, char *err, size_t errlen);

    /* optional (NULL: the store's files are in its directory, read them there): the bytes of
     * the store's shared record name ("rmt.log", "catalog.log") for pario.store's independent
     * readers (fsck, repair); *buf malloc'ed; PXS_ENOENT: there is none */
    int (*read_shared)(pxs_coord *co, const char *name, char **buf, size_t *n, char *err, size_t errlen);
    /* optional (NULL: the database is the file DIR/meta.db, repaired there): the database copied
     * page by page to the SQLite file local (to_shared 0), or replaced by local's (1): fsck
     * --repair (pario.store.repair); PXS_ENOENT: there is none to copy */
    int (*meta_transfer)(pxs_coord *co, const char *local, int to_shared, char *err, size_t errlen);

    /* ---- the RMT journal (core/rmt.h's rmt_core, owned by the caller) */
    /* PXS_OK the journal exists, PXS_ENOENT none, PXS_ENOSYS only a pre-journal table */
    int (*journal_probe)(pxs_coord *co);
    int (*journal_open)(pxs_coord *co, rmt_core *c, int shared, int first);
    void (*journal_close)(pxs_coord *co, rmt_core *c);
    int (*journal_lock)(pxs_coord *co, rmt_core *c, double timeout);    /* a transaction begins */
    int (*journal_publish)(pxs_coord *co, rmt_core *c);                 /* ... ends: published */
    int (*journal_follow)(pxs_coord *co, rmt_core *c);                  /* others' records applied */
    int (*journal_sync)(pxs_coord *co, rmt_core *c);
    int (*journal_checkpoint)(pxs_coord *co, rmt_core *c);              /* rewritten compact */
    int (*journal_set_clean)(pxs_coord *co, rmt_core *c, int clean);

    /* ---- the byte-range synchronisation locks */
    int (*range_lock)(pxs_coord *co, rmt_core *c, uint64_t fid, int64_t x, int64_t e, int exclusive,
                      double timeout);
    int (*range_unlock)(pxs_coord *co, rmt_core *c, uint64_t fid, int64_t x, int64_t e);

    /* ---- shared counters, optional (NULL: not offered): the served runtime's shared file
     * pointers (MPI-4.1 §14.4.4: one per collective open, named by the open's token), kept by
     * the member so that no directory the nodes share is needed (without them: a file beside
     * the open's shadow, locked with fcntl: interpose/serve.c).  PXS_OK, PXS_EEXIST (make: the
     * token is taken), PXS_ETIMEDOUT (lock), PXS_EIO */
    int (*counter_make)(pxs_coord *co, uint64_t token);                   /* a new counter at 0 */
    /* the counter held exclusively, its value and the version its next write must find */
    int (*counter_lock)(pxs_coord *co, uint64_t token, int64_t *value, uint64_t *version);
    /* value != NULL: written first, failing if another writer came after version (the holder
     * outlived its lease); then released */
    int (*counter_unlock)(pxs_coord *co, uint64_t token, const int64_t *value, uint64_t version);
    void (*counter_drop)(pxs_coord *co, uint64_t token);                  /* removed */
    void (*counter_clear)(pxs_coord *co);         /* every counter (a first opener's recovery) */
} pxs_coord_ops;

/* every member's instance starts with this header */
struct pxs_coord {
    const pxs_coord_ops *ops;
    double timeout;                     /* every wait of the member; open may raise the one asked for */
    char *journal_where;                /* the journal, for messages ("DIR/rmt.log") */
    char *lock_where;                   /* the store lock, for messages ("DIR/.lock") */
    char remote[160];                   /* after PXS_EREMOTE: the machine that has the store open */
};

/* the journal operations after the open, the same for every member (store/coord.c: core/rmt.c
 * over the member's journal storage) */
void pxs_coord_core_close(pxs_coord *co, rmt_core *c);
int pxs_coord_core_lock(pxs_coord *co, rmt_core *c, double timeout);
int pxs_coord_core_publish(pxs_coord *co, rmt_core *c);
int pxs_coord_core_follow(pxs_coord *co, rmt_core *c);
int pxs_coord_core_sync(pxs_coord *co, rmt_core *c);
int pxs_coord_core_checkpoint(pxs_coord *co, rmt_core *c);
int pxs_coord_core_set_clean(pxs_coord *co, rmt_core *c, int clean);
/* a member table's journal entries after the open: the functions above */
#define PXS_COORD_CORE_JOURNAL                                                                              \
    .journal_close = pxs_coord_core_close, .journal_lock = pxs_coord_core_lock,                               \
    .journal_publish = pxs_coord_core_publish, .journal_follow = pxs_coord_core_follow,                       \
    .journal_sync = pxs_coord_core_sync, .journal_checkpoint = pxs_coord_core_checkpoint,                     \
    .journal_set_clean = pxs_coord_core_set_clean

extern const pxs_coord_ops pxs_coord_host;     /* coord/posix.c: one machine */
extern const pxs_coord_ops pxs_coord_pfs;      /* coord/posix.c: nodes of a parallel file system */
extern const pxs_coord_ops pxs_coord_rados;    /* coord/rados.c: clients of the RADOS cluster of a rados store */

/* the member named name (NULL or "": "host"); NULL if there is none */
const pxs_coord_ops *pxs_coord_member(const char *name);
/* the i-th registered member, NULL past the last */
const pxs_coord_ops *pxs_coord_nth(size_t i);
/* open the member named name for the store at root; an unknown name: PXS_ENOSYS with
 * "store ROOT: coordination 'NAME' is not available (members: host)" */
int pxs_coord_open(const char *name, const char *root, double timeout, pxs_coord **out, char *err, size_t errlen);
void pxs_coord_close(pxs_coord *co);

/* the member ("host" or "pfs"; NULL: "host") over explicit files instead of a store directory
 * (a journal or metadata database by path: tests, migration, repair); any path may be NULL
 * (that part unused); PXS_ENOSYS for another member */
int pxs_coord_files(const char *member, const char *journal, const char *sync, const char *meta, double timeout,
                    pxs_coord **out);
/* the one line for PXS_EREMOTE from the store lock of the store at root */
void pxs_coord_remote_message(const pxs_coord *co, const char *root, char *err, size_t errlen);

/* the calls, through the member's table */
static inline int pxs_coord_try_lock(pxs_coord *co, int exclusive) { return co->ops->try_lock(co, exclusive); }
static inline int pxs_coord_downgrade(pxs_coord *co) { return co->ops->downgrade(co); }
static inline void pxs_coord_release(pxs_coord *co) { co->ops->release(co); }
/* 1: the lock was dropped and can be taken again (the member offers unlock), 0: nothing done */
static inline int pxs_coord_unlock(pxs_coord *co)
{
    if (!co->ops->unlock)
        return 0;
    co->ops->unlock(co);
    return 1;
}
static inline int pxs_coord_meta_open(pxs_coord *co, pxs_meta *m, char *err, size_t errlen)
{
    return co->ops->meta_open(co, m, err, errlen);
}
static inline int pxs_coord_meta_init(pxs_coord *co, char *err, size_t errlen)
{
    return co->ops->meta_init(co, err, errlen);
}
static inline int pxs_coord_journal_probe(pxs_coord *co) { return co->ops->journal_probe(co); }
static inline int pxs_coord_journal_open(pxs_coord *co, rmt_core *c, int shared, int first)
{
    return co->ops->journal_open(co, c, shared, first);
}
static inline void pxs_coord_journal_close(pxs_coord *co, rmt_core *c) { co->ops->journal_close(co, c); }
static inline int pxs_coord_journal_lock(pxs_coord *co, rmt_core *c, double timeout)
{
    return co->ops->journal_lock(co, c, timeout);
}
static inline int pxs_coord_journal_publish(pxs_coord *co, rmt_core *c) { return co->ops->journal_publish(co, c); }
static inline int pxs_coord_journal_follow(pxs_coord *co, rmt_core *c) { return co->ops->journal_follow(co, c); }
static inline int pxs_coord_journal_sync(pxs_coord *co, rmt_core *c) { return co->ops->journal_sync(co, c); }
static inline int pxs_coord_journal_checkpoint(pxs_coord *co, rmt_core *c)
{
    return co->ops->journal_checkpoint(co, c);
}
static inline int pxs_coord_journal_set_clean(pxs_coord *co, rmt_core *c, int clean)
{
    return co->ops->journal_set_clean(co, c, clean);
}
static inline int pxs_coord_range_lock(pxs_coord *co, rmt_core *c, uint64_t fid, int64_t x, int64_t e, int exclusive,
                                       double timeout)
{
    return co->ops->range_lock(co, c, fid, x, e, exclusive, timeout);
}
static inline int pxs_coord_range_unlock(pxs_coord *co, rmt_core *c, uint64_t fid, int64_t x, int64_t e)
{
    return co->ops->range_unlock(co, c, fid, x, e);
}

#endif
