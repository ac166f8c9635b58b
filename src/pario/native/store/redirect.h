/* pario serve: the C API of a pario store for the runtime inside MPI ranks — opening a
 * store, CEDA redirection with the RMT and hybrid routing (docs/serve.md).
 *
 * As pario.store.redirect.File (CEDA seed 000 §4.6, §5.2; CI-LAYOUT seed 002 §5):
 *  - every read asks the RMT core (rmt.h, the same journal and code as the Python store)
 *    where it goes: no entry overlaps → the original; else segments of uniform coverage,
 *    each from its DIRTY replica, else a CLEAN replica (route "replica": the one of least
 *    id; route "cheapest": the up-to-date copy of least cost, max over servers touched of
 *    α_j + bytes_j·β_j from the store's profile, pario.store.hybrid.profile_cost), else the
 *    original; stale copies are never read;
 *  - a write goes to the copy a read would use, its flag change recorded first (MARK);
 *    hybrid full replicas grow with the file (GROW) before an extending write;
 *  - shared stores: a write holds its byte range of DIR/.sync.lock shared from the lookup to
 *    its last byte, a synchronisation batch holds its ranges exclusive from the copy to the
 *    flag change;
 *  - flush (and close) copies DIRTY replica bytes to the original, then refreshes STALE
 *    replicas, in batches of up to 64 MiB: copy, fsync of the destinations, then one
 *    transaction marking the batch CLEAN.
 *
 * Every function returns 0 or a negative PXS_E* code; pxs_store_error() is then a one-line
 * message.  Every call takes the store's mutex. */
#ifndef PARIO_SERVE_REDIRECT_H
#define PARIO_SERVE_REDIRECT_H

#include <stdint.h>

#include "store/storefile.h"

/* PXS_FLUSH_AT_END: a file's close leaves DIRTY replica bytes in the replicas (the RMT keeps
 * serving them); the store's close flushes them (CEDA seed 000 §5: "we flush the data to the
 * original files if the dirty flag in the entry is set when the application ends its
 * execution") -- the MPI runtime's mode: MPI_Finalize closes the store */
enum { PXS_SHARED = 1, PXS_DIRECT = 2, PXS_NORECOVER = 4, PXS_FLUSH_AT_END = 8, PXS_HOLD = 16, PXS_UNVERIFIED = 32 };

#define PXS_SYNC_CHUNK ((int64_t)4 << 20)   /* lazy synchronisation: bytes per step */
#define PXS_SYNC_BATCH ((int64_t)64 << 20)  /* flush: bytes per batch */

typedef struct {
    uint64_t reads, writes;                 /* calls */
    uint64_t redirected_reads, redirected_writes;   /* calls with a part served by a replica */
    int64_t read_original, read_replica;    /* bytes */
    int64_t written_original, written_replica;
    uint64_t choices;                       /* segments routed by cost ("cheapest") */
    int64_t synced;                         /* bytes copied by flush / sync steps */
} pxs_stats;

typedef struct {
    uint64_t r;
    pxs_sfile *h;
    int slot;       /* a registered partial replica with its own extents: writes may land in them */
} pxs_rep;

typedef struct pxs_file pxs_file;

struct pxs_file {
    pxs_store *st;
    char *name;
    pxs_sfile *h;
    uint64_t fid;
    int refs;
    uint64_t regver;
    int cheapest;                           /* any replica routes "cheapest" */
    int nfull;
    uint64_t *full;                         /* hybrid full replicas */
    int nrep, caprep;
    pxs_rep *reps;
    int nslot;                              /* reps with slot = 1 */
    int atomic;                             /* MPI atomic mode: every read a sync point (pxs_set_atomic) */
    pxs_stats stats;
    pxs_file *next;
};

/* open the store at root (flags PXS_SHARED, PXS_DIRECT).  Exclusive: refused while another
 * process has it open.  Shared: the first opener recovers (flushes files a crash left
 * unclean, drops entries past a file's end, commits sizes) while the others wait.  On
 * failure *out is NULL and err holds the one-line message. */
/* The directory of the MPI layer's per-open shadow files (interpose/serve.c): a first opener
 * (alone) removes what a killed run left there. */
#define PXS_SHADOW_DIR ".pario-shadow"

int pxs_store_open(const char *root, int flags, pxs_store **out, char *err, size_t errlen);
/* as pxs_store_open, every wait bounded by timeout seconds (pxs_store_open: PARIO_STORE_TIMEOUT) */
int pxs_store_open_timeout(const char *root, int flags, double timeout, pxs_store **out, char *err, size_t errlen);
/* PXS_HOLD (the Python store, pario.store.root): the opener drives the rest itself.  A first
 * opener keeps the store to itself, unrecovered (no refusal of a pending verification: it
 * verifies), until pxs_store_share; the close does no last-closer work (pxs_store_alone,
 * pxs_store_close_alone do, when the opener asks).  PXS_UNVERIFIED: a store whose power-loss
 * verification is pending opens anyway (fsck reports it; nothing may be served). */
/* recovery of a first opener (shadows, entries past a file's end, unclean files flushed) */
int pxs_store_recover(pxs_store *st);
/* commit final sizes and share the store (shared) after a held first open */
int pxs_store_share(pxs_store *st);
/* 1 if this process can have the store to itself now (exclusive, or LOCK_EX on .lock) */
int pxs_store_alone(pxs_store *st);
/* the last process out: flush, final sizes, FRESH -> CLEAN, compaction, the clean mark
 * (nothing while a power-loss verification is pending) */
int pxs_store_close_alone(pxs_store *st);
/* fsync the data files of replicas with FRESH entries, then make those entries CLEAN */
int pxs_store_settle_fresh(pxs_store *st);
/* the routing cost of hybrid replication: a caller's function instead of the profile's */
typedef int (*pxs_cost_fn)(void *ctx, int64_t file_id, int64_t off, int64_t len, double *cost);
void pxs_store_set_cost(pxs_store *st, pxs_cost_fn fn, void *ctx);
/* hybrid replicas synchronised in the background (on, the default) or only by flush and close */
void pxs_store_set_lazy(pxs_store *st, int on);
/* close every file; the last process out flushes, commits final sizes, settles FRESH
 * entries, compacts the journal when large and marks it closed cleanly; the store is freed
 * in any case (err: the one-line message on failure) */
int pxs_store_close(pxs_store *st, char *err, size_t errlen);
/* what one process's close of a store did (pxs_store_close_stats; CLOCK_MONOTONIC seconds):
 * flush_s, the flush of the application's DIRTY replica bytes to the originals at the close
 * (PXS_FLUSH_AT_END: the MPI runtime's at MPI_Finalize; CEDA seed 000 §5); last_out_s, the last
 * process's work (what others left flushed, final sizes, FRESH -> CLEAN, compaction, the clean
 * mark; 0 when this process was not the last one out); flushed, the bytes every flush and
 * synchronisation step of the close copied (DIRTY replica bytes home, STALE replicas
 * refreshed); close_s, the whole close */
typedef struct {
    double flush_s, last_out_s, close_s;
    int64_t flushed;
    int last_out;
} pxs_close_stats;
/* pxs_store_close, and what it did in *out (NULL: nothing reported) */
int pxs_store_close_stats(pxs_store *st, char *err, size_t errlen, pxs_close_stats *out);
const char *pxs_store_error(const pxs_store *st);
/* flush every file with unclean RMT entries */
int pxs_store_flush(pxs_store *st);

int pxs_open(pxs_store *st, const char *name, pxs_file **out);
/* every data file of the file's layout opened, created if missing (pxs_sfile_open_all) */
int pxs_open_all(pxs_file *f);
/* flush, then close (the last reference) */
int pxs_close(pxs_file *f);
/* read n bytes at off into buf: bytes past the end read as 0, *got = bytes inside the file */
int pxs_read(pxs_file *f, int64_t off, void *buf, int64_t n, int64_t *got);
int pxs_write(pxs_file *f, int64_t off, const void *buf, int64_t n);
/* vectored: ranges [off[k], +len[k]) <-> buf + bo[k] (reads: zeros past the end) */
int pxs_readv(pxs_file *f, int64_t n, const int64_t *off, const int64_t *len, void *buf, const int64_t *bo);
int pxs_writev(pxs_file *f, int64_t n, const int64_t *off, const int64_t *len, const void *buf, const int64_t *bo);
int pxs_truncate(pxs_file *f, int64_t size);
/* the size, including other processes' writes (shared store) */
/* another process of the job set the file's size to size (MPI_File_set_size): this
 * handle's size is that, and an extension it made before is void */
void pxs_resized(pxs_file *f, int64_t size);
int pxs_size(pxs_file *f, int64_t *size);
/* DIRTY replica bytes → original only (a relayout, before it copies the original) */
int pxs_writeback(pxs_file *f);
/* DIRTY replica bytes → original, then original → STALE replicas; journal durable */
int pxs_flush(pxs_file *f);
/* every byte written so far durable (data files, size, RMT records; FRESH → CLEAN); a sync
 * point: data files cached between sync points are read afresh from now on (plane.h) */
int pxs_fsync(pxs_file *f);
/* MPI_File_set_atomicity (MPI 4.0 §14.6.1): on, every read of f is a sync point of its own
 * (data files cached between sync points drop their cached pages before it) */
void pxs_set_atomic(pxs_file *f, int on);
/* synchronise at most chunk bytes (hybrid lazy synchronisation); *more: unclean entries left */
int pxs_sync_step(pxs_file *f, int64_t chunk, int *more);
/* where a read of [x, e) goes now, segment by segment (r = 0: the original), the cheapest
 * copy chosen where the route is hybrid; *out malloc'ed (reports, tests) */
typedef struct {
    int64_t s, t;
    uint64_t r;
} pxs_served;
int pxs_served_by(pxs_file *f, int64_t x, int64_t e, pxs_served **out, int *n);
/* the replicator's step: ranges (sorted, disjoint) of the original copied to replica r under
 * the exclusive range lock, COPYING then FRESH; *copied: bytes (clipped to the size) */
int pxs_replicate(pxs_file *f, uint64_t r, int64_t n, const int64_t *off, const int64_t *len, int64_t *copied);
/* the routing cost of [off, +len) of store file h (profile_cost: reads, random α) */
int pxs_cost(pxs_store *st, const pxs_sfile *h, int64_t off, int64_t len, double *cost);

#endif
