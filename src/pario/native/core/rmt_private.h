/* The RMT core's own declarations (the files of core/ only; store/ and python/ use core/rmt.h): the
 * journal's format, the index's updates and hash maps, the journal file, the byte-range lock
 * primitives and the range-lock geometry (docs/store.md, "The RMT journal"). */
#ifndef PARIO_RMT_PRIVATE_H
#define PARIO_RMT_PRIVATE_H

#include "core/rmt.h"

/* ------------------------------------------------------------------ journal format
 * All integers little-endian.  The file starts with a 4096-byte header page, then records.
 * Every record starts with rmt_rec_head; size is a multiple of 8; crc is CRC-32 (the zlib
 * polynomial) of the record's bytes from offset 8 (seq) to its end; seq counts 1, 2, 3 ...
 * A reader replays records in order and stops at the first one that is incomplete, has a
 * bad crc or a seq that does not follow: that is the end of the journal. */
#define RMT_MAGIC "PARIORMT"
#define RMT_HDR_SIZE 4096u

typedef struct rmt_hdr {
    char magic[8];         /*  0: "PARIORMT" */
    uint32_t version;      /*  8 */
    uint32_t hdr_size;     /* 12: 4096 */
    uint64_t epoch;        /* 16: random, new for every rewritten (checkpointed) journal */
    uint64_t end;          /* 24: offset after the last published record (the generation) */
    uint64_t seq;          /* 32: seq of the last published record */
    uint64_t synced;       /* 40: offset up to which the journal was fdatasync'ed */
    uint32_t clean;        /* 48: 1 = closed cleanly (no copy pending, everything durable) */
    uint32_t verify;       /* 52: 1 = ended uncleanly in another boot (a power loss?): every CLEAN
                              entry must be verified byte for byte (and FRESH ones refreshed)
                              before the store serves anything; set before boot_id changes,
                              cleared only by the opener that completed the verification */
    char boot_id[40];      /* 56: boot of the session that opened the store first */
    char pad[32];          /* 96 */
    union {                /* 128: the journal lock of a shared store: a process-shared, robust
                              pthread mutex (the kernel hands it on when its holder dies);
                              initialised by every first opener */
        pthread_mutex_t m;
        char bytes[64];
    } lock;
} rmt_hdr;

typedef struct {
    uint32_t size;         /* bytes of the whole record, multiple of 8 */
    uint32_t crc;          /* CRC-32 of bytes [8, size) */
    uint64_t seq;
    uint16_t type;
    uint16_t a16;          /* type-specific small field */
    uint32_t a32;          /* type-specific small field */
} rmt_rec_head;            /* 24 bytes; the payload follows: u64 fields, then bytes */

/* crc32.c */
uint32_t rmt_crc32(uint32_t crc, const void *buf, size_t n);

/* rmt_index.c: the state, and applying one record to it (no I/O) */
void rmt_index_init(rmt_index *ix);
void rmt_index_free(rmt_index *ix);
int rmt_index_check(const rmt_index *ix, const rmt_rec_head *h, const uint64_t *u, const char *bytes);
int rmt_index_apply(rmt_index *ix, const rmt_rec_head *h, const uint64_t *u, const char *bytes);
int rmt_index_noop(const rmt_index *ix, const rmt_rec_head *h, const uint64_t *u);
rmt_job *rmt_index_job(const rmt_index *ix, uint64_t r);
int rmt_index_route(const rmt_index *ix, uint64_t o, int64_t x, int64_t e, rmt_seg *segs, int max, int *nseg);
void rmt_map_init(rmt_map *m);
void rmt_map_free(rmt_map *m);
void *rmt_map_get(const rmt_map *m, uint64_t key);
int rmt_map_put(rmt_map *m, uint64_t key, void *val);
void *rmt_map_del(rmt_map *m, uint64_t key);

/* rmt_log.c: the journal over any storage (rmt_journal_ops in core/rmt.h) */
int rmt_log_open(rmt_log *lg, const rmt_journal_ops *storage, const char *path, int how);
void rmt_log_close(rmt_log *lg);
/* replay records from lg->end up to limit (0: scan until the first invalid record) */
int rmt_log_replay(rmt_log *lg, rmt_index *ix, uint64_t limit, uint64_t *applied);
int rmt_log_append(rmt_log *lg, rmt_rec_head *h, const uint64_t *u, int nu, const void *bytes, size_t nbytes);
void rmt_log_publish(rmt_log *lg);
int rmt_log_sync(rmt_log *lg);
int rmt_log_put(rmt_log *lg, size_t off, size_t len);
int rmt_log_repair(rmt_log *lg, const char *boot_id, int verify);
/* a new journal at path describing ix (the checkpoint), checked by replaying it; *out open on it */
int rmt_log_rewrite(const rmt_log *lg, const rmt_index *ix, const char *path, rmt_log *out);
void rmt_log_header_init(rmt_hdr *h, uint64_t end, uint64_t seq);

/* rmt_log.c: bytes of a journal read ahead in windows (a storage's read: replay asks for
 * one record after the other); fill reads n bytes at pos exactly (RMT_ECORRUPT if short) */
typedef struct {
    uint8_t *buf;          /* bytes [pos, pos + len) of the storage as last read */
    size_t cap, len;
    uint64_t pos;
} rmt_window;
typedef int (*rmt_fill)(void *ctx, void *buf, size_t n, uint64_t pos);
#define RMT_WINDOW ((size_t)1 << 20)    /* bytes read ahead */
/* *p: bytes [pos, pos + n) (pos + n <= fsize), valid until the next call; len = 0 forgets */
int rmt_window_read(rmt_window *w, uint64_t pos, size_t n, uint64_t fsize, rmt_fill fill, void *ctx,
                    const uint8_t **p);
void rmt_window_free(rmt_window *w);
/* the end of a storage's open (rc: its own part's result): the size, at least a header, the
 * header read (read_header: the storage's); on failure the storage closed, errno kept */
int rmt_storage_opened(rmt_log *lg, int rc, int (*read_header)(rmt_log *lg));

/* journal_posix.c: what the members over a POSIX file share */
typedef struct {
    int fd;
    char *path;
} rmt_posix;
int rmt_posix_open(rmt_posix *f, const char *path, int how);
void rmt_posix_close(rmt_posix *f);
int rmt_posix_write_all(int fd, const void *buf, size_t n, uint64_t pos);
int rmt_posix_size(int fd, uint64_t *size);
int rmt_posix_allocate(int fd, uint64_t *fsize, uint64_t need, uint64_t limit);
int rmt_posix_replace(rmt_posix *f, const char *path);
#define RMT_GROW_MIN ((uint64_t)1 << 20)
#define RMT_GROW_MAX ((uint64_t)64 << 20)

/* locks.c: fcntl open-file-description locks with a timeout */
int rmt_lock(int fd, int64_t start, int64_t len, int exclusive, double timeout);
int rmt_unlock(int fd, int64_t start, int64_t len);

/* range locks: file `fid`'s bytes [x, e) map to lock bytes (fid << 40) + x / 4096 ... */
#define RMT_LOCK_SHIFT 40
#define RMT_LOCK_BLOCK 12

#endif
