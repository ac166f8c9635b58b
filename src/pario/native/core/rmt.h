/* The replica mapping table (RMT) of a pario store: journal format, in-memory index, API.
 *
 * CEDA (seed 000 §4.5, Fig. 8; §5.1) keeps, for every replicated range, an entry
 * (O_file, O_offset, R_file, R_offset, Length, R_flag) and writes RMT changes
 * synchronously "to survive power failures".  pario keeps the RMT as an append-only
 * journal (DIR/rmt.log) that every process maps and replays, plus an in-memory index per
 * process that follows the journal incrementally (docs/store.md, "The RMT journal").
 *
 * This is the core's public header: what store/ and python/ use (the flags, the record types
 * a change names, the index a lookup reads, the RMT of a store and its calls).  The journal's
 * format, the index's updates, the journal file and the lock primitives are core/'s own
 * (core/rmt_private.h).  The calls that coordinate processes (open, journal lock, publish,
 * follow, range locks) are made by the coordination members only (store/coord.h; docs/store.md,
 * "Coordination").
 *
 * Flags (R_flag):
 *   CLEAN   the replica holds the same bytes as the original;
 *   DIRTY   the replica holds the newest bytes (a redirected write), every other copy of
 *           those bytes is stale until flushed;
 *   STALE   the replica is older than the up-to-date copy and is never read;
 *   COPYING the replicator is filling the replica (never read; a write to those bytes turns
 *           it STALE, so the replicator's publication COPYING -> FRESH then does nothing);
 *   FRESH   as CLEAN (the same bytes as the original, read like CLEAN), but the replica's
 *           bytes may not be on disk yet: after a power failure it is refreshed from the
 *           original; it becomes CLEAN once the replica's data files were fsync'ed.
 * Invariant: a byte has at most one DIRTY entry; if it has one, every other entry of that
 * byte is STALE.  The original is up to date where no DIRTY entry covers a byte.
 */
#ifndef PARIO_RMT_H
#define PARIO_RMT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

enum { RMT_CLEAN = 0, RMT_DIRTY = 1, RMT_STALE = 2, RMT_COPYING = 3, RMT_FRESH = 4, RMT_NFLAGS = 5 };

/* CLEAN or FRESH: holds the original's bytes, readable */
#define RMT_READABLE_CLEAN(f) ((f) == RMT_CLEAN || (f) == RMT_FRESH)
enum { RMT_PARTIAL = 0, RMT_FULL = 1 };                  /* replica modes */
enum { RMT_ROUTE_REPLICA = 0, RMT_ROUTE_CHEAPEST = 1 };  /* read routing of an original */

#define RMT_VERSION 1u      /* the journal format's version (core/rmt_private.h) */

/* ------------------------------------------------------------------ record types (rmt_op) */
enum {
    REC_ADD = 1,      /* u64 o, r, o_off, r_off, len; a16 = flag.  Fill the parts of
                         [o_off, +len) that replica r does not cover yet; a non-DIRTY
                         entry over bytes another replica has DIRTY becomes STALE; a DIRTY
                         one only where every other copy is STALE */
    REC_MARK = 2,     /* u64 o, t, a, b.  A write of [a, b) went to copy t (0 = the original):
                         t's entries there become DIRTY, every other entry STALE */
    REC_SETFLAG = 3,  /* u64 o, r, a, b; a16 = old | new << 8.  Entries of r in [a, b) with
                         flag old get flag new (never DIRTY: only a MARK makes a copy
                         DIRTY); to CLEAN, FRESH or COPYING only outside other replicas'
                         DIRTY bytes */
    REC_TRIM = 4,     /* u64 o, size.  The original was truncated: entries end at size */
    REC_GROW = 5,     /* u64 o, r, end.  Full replica r grows with the file: STALE from its
                         last entry's end (r_off = o_off) to end */
    REC_DROP = 6,     /* u64 r.  Replica r, its entries and its job are gone */
    REC_REGISTER = 7, /* u64 r, o; a16 = mode | route << 8; a32 = name length; name bytes */
    REC_JOB = 8,      /* u64 r; a16 = done; a32 = spec length; spec bytes (JSON) */
    REC_NTYPES = 9
};

/* ------------------------------------------------------------------ in-memory index */
typedef struct {
    int64_t off, len;      /* [off, off + len) of the original */
    int64_t delta;         /* R_offset - O_offset */
    int32_t flag, pad;
} rmt_ent;

typedef struct rmt_rep {
    uint64_t r, o;         /* replica file id, original file id */
    int registered, mode, route;
    char *name;            /* replica name (registered replicas) */
    size_t n, cap;         /* entries: sorted by off, never overlapping, canonical */
    rmt_ent *e;
    int64_t *ends;         /* ends[i] = e[i].off + e[i].len (packed: the search reads only these) */
} rmt_rep;

typedef struct rmt_ofile {
    uint64_t o;
    int nrep, caprep;
    rmt_rep **reps;        /* sorted by r */
    int cheapest;          /* route: 1 if any registered replica routes "cheapest" */
    uint64_t nunclean;     /* entries that need synchronisation (not CLEAN or FRESH) */
} rmt_ofile;

typedef struct {
    uint64_t r;
    int done;
    char *spec;
    size_t len;
} rmt_job;

typedef struct {
    uint64_t key;
    void *val;
} rmt_slot;

typedef struct {
    rmt_slot *s;
    size_t cap, n;          /* key 0 = empty */
} rmt_map;

typedef struct {
    rmt_map files;          /* o -> rmt_ofile* */
    rmt_map reps;           /* r -> rmt_rep* */
    rmt_map jobs;           /* r -> rmt_job* */
    uint64_t regver;        /* bumped by REGISTER / DROP (routing of files may change) */
    uint64_t nent;          /* entries in all replicas */
} rmt_index;

/* a segment of a request with uniform coverage and the copy that serves it */
typedef struct {
    int64_t s, t;           /* [s, t) */
    uint64_t r;             /* serving copy: 0 = original, else replica file id */
    int64_t delta;          /* replica offset = offset + delta */
    int choice;             /* 1: route "cheapest" and a clean replica could serve: the caller chooses */
    int mark;               /* a write of [s, t) to r changes flags (a MARK record is needed) */
} rmt_seg;

/* one copy covering a segment (for callers that choose the copy themselves) */
typedef struct {
    uint64_t r;
    int64_t delta;
    int flag;
} rmt_cover;

/* ------------------------------------------------------------------ errors */
enum {
    RMT_OK = 0,
    RMT_EINVAL = -1,    /* bad argument or an operation the state does not allow */
    RMT_ENOMEM = -2,
    RMT_EIO = -3,       /* system call failed: errno is set */
    RMT_ECORRUPT = -4,  /* not a journal, or unreadable header */
    RMT_ETIMEDOUT = -5, /* a lock was not granted in time */
    RMT_EFULL = -6,     /* the journal reached its reserved size */
    RMT_EMORE = -7      /* more segments than the caller's buffer */
};

/* rmt_index.c: lookups in the index (no I/O) */
rmt_ofile *rmt_index_file(const rmt_index *ix, uint64_t o);
rmt_rep *rmt_index_rep(const rmt_index *ix, uint64_t r);
int rmt_index_hits(const rmt_index *ix, uint64_t o, int64_t x, int64_t e);
size_t rmt_rep_first_after(const rmt_rep *p, int64_t x);
int rmt_index_covers(const rmt_index *ix, uint64_t o, int64_t s, rmt_cover *cov, int max);

/* ------------------------------------------------------------------ the journal's storage
 * The journal's records and header (format: core/rmt_private.h) live in a storage that one
 * member of this table reaches; the format, replay, appends, publication, repair and rewrite
 * are core/rmt_log.c's, the same for every member.  The coordination member of a store
 * (store/coord.h) chooses the storage; core/ calls only the table, so a storage for several
 * machines needs no change above it (docs/store.md, "The RMT journal"; docs/multinode.md).
 *
 * Members:
 *   rmt_journal_map   core/journal_map.c: DIR/rmt.log mapped MAP_SHARED by every opener, the
 *                     journal lock a robust process-shared mutex in the header page; one host;
 *   rmt_journal_file  core/journal_file.c: DIR/rmt.log read and written with pread/pwrite
 *                     (the kernel's page cache dropped before every read of others' bytes), the
 *                     journal lock a byte-range lock of the file: only what a parallel file
 *                     system guarantees between nodes (byte-range locks, close-to-open data).
 */
typedef struct rmt_hdr rmt_hdr;
typedef struct rmt_log rmt_log;

enum { RMT_OPEN_EXISTING = 0, RMT_OPEN_CREATE = 1, RMT_OPEN_NEW = 2 };   /* rmt_journal_ops.open */

typedef struct rmt_journal_ops {
    const char *name;
    /* the journal at path: RMT_OPEN_EXISTING it must exist, RMT_OPEN_CREATE an empty one is made
     * if there is none, RMT_OPEN_NEW an empty one replaces any; never through a symbolic link.
     * Sets lg->impl, lg->hdr (the header as this process sees it) and lg->fsize. */
    int (*open)(rmt_log *lg, const char *path, int how);
    void (*close)(rmt_log *lg);
    /* bytes [pos, pos + n) of the journal, pos + n <= lg->fsize; *p is valid until the next call */
    int (*read)(rmt_log *lg, uint64_t pos, size_t n, const uint8_t **p);
    /* n bytes at pos, the space allocated first (a full device: RMT_EIO, errno ENOSPC;
     * beyond what the storage can hold: RMT_EFULL); lg->fsize grows to cover them */
    int (*write)(rmt_log *lg, uint64_t pos, const void *buf, size_t n);
    int (*stat)(rmt_log *lg);                                  /* lg->fsize as the storage has it now */
    int (*truncate)(rmt_log *lg, uint64_t size);               /* the journal ends at size */
    int (*sync)(rmt_log *lg);                                  /* everything written durable */
    /* the header as published now (lg->hdr refreshed), returns its end: the generation */
    uint64_t (*published)(rmt_log *lg);
    int (*put_header)(rmt_log *lg, size_t off, size_t len);    /* lg->hdr bytes [off, +len) to every opener */
    int (*lock_init)(rmt_log *lg);                             /* first opener, alone */
    /* the journal lock: RMT_OK, RMT_ETIMEDOUT; *dead_holder = 1 when taken over from a process
     * that died holding it (when the storage can tell) */
    int (*lock)(rmt_log *lg, double timeout, int *dead_holder);
    void (*unlock)(rmt_log *lg);
    int (*replace)(rmt_log *lg, const char *path);             /* this journal becomes the one at path, durably */
} rmt_journal_ops;

struct rmt_log {
    const rmt_journal_ops *ops;
    void *impl;            /* the member's own state */
    rmt_hdr *hdr;          /* the header as this process sees it */
    uint64_t fsize;        /* bytes the storage holds, as this process last saw or made it */
    uint64_t end, seq;     /* what this process has applied */
};

extern const rmt_journal_ops rmt_journal_map;    /* core/journal_map.c */
extern const rmt_journal_ops rmt_journal_file;   /* core/journal_file.c */

/* ------------------------------------------------------------------ rmt.c: the RMT of a store
 * One per process and store.  Exclusive (shared = 0): this process alone uses the journal.
 * Shared: appends take the journal lock (the storage's), and every lookup first applies the
 * records other processes published (rmt_catch_up: with the mapped journal one load when nothing
 * changed). */
typedef struct {
    rmt_log log;
    rmt_index ix;
    int shared;
    double timeout;        /* seconds any wait for another process may take */
    int sync_fd;           /* DIR/.sync.lock: range locks of writers and synchronisation (-1: none) */
    int depth;             /* nesting of rmt_begin */
    int broken;            /* a record was appended but could not be applied: reopen */
    int follow;            /* lookups apply other processes' records first (tests switch it off) */
    uint64_t skipped;      /* records the replay refused (a damaged journal) */
    uint64_t followed;     /* times rmt_catch_up applied records other processes published */
    uint64_t dead_holders; /* journal locks taken over from a process that died holding them */
    int prev_clean;        /* first opener: the journal was closed cleanly */
    int prev_other_boot;   /* first opener: ... last opened in another boot (power loss?) */
    int verify;            /* the header's verify flag as this process found it: the store
                              serves nothing until a first opener verified it (rmt_verified) */
    char *path;
    char boot_id[40];
} rmt_core;

/* ---- coordination (made by store/coord.h's members only: store/coord/host.c, ...) */
int rmt_open(rmt_core *c, const rmt_journal_ops *storage, const char *path, const char *sync_path, int shared, int first,
             double timeout);
void rmt_close(rmt_core *c);
int rmt_catch_up(rmt_core *c);
int rmt_begin(rmt_core *c, double timeout);
int rmt_commit(rmt_core *c);
int rmt_sync(rmt_core *c);
int rmt_checkpoint(rmt_core *c);
int rmt_set_clean(rmt_core *c, int clean);
int rmt_range_lock(rmt_core *c, uint64_t fid, int64_t x, int64_t e, int exclusive, double timeout);
int rmt_range_unlock(rmt_core *c, uint64_t fid, int64_t x, int64_t e);

/* ---- the RMT's changes and lookups */
int rmt_op(rmt_core *c, int type, int a16, const uint64_t *u, const void *bytes, size_t nbytes);
int rmt_route(rmt_core *c, uint64_t o, int64_t x, int64_t e, rmt_seg *segs, int max, int *nseg);
int rmt_write(rmt_core *c, uint64_t o, int64_t x, int64_t e, rmt_seg *segs, int max, int *nseg, double timeout);
int rmt_all_stale(const rmt_index *ix, uint64_t o, int64_t x, int64_t e);
int rmt_claim(rmt_core *c, uint64_t o, uint64_t r, int64_t x, int64_t e, double timeout);
int rmt_verified(rmt_core *c);
/* this machine's boot id (/proc/sys/kernel/random/boot_id; tests: PARIO_BOOT_ID) */
void rmt_boot_id(char *out, size_t n);
/* the journal header's state, for reports (pario.native._rmt Core.stats) */
void rmt_header_state(const rmt_core *c, uint64_t *synced, uint64_t *epoch, int *clean, int *verify);

#endif
