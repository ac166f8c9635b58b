/* pario tracer: the per-rank record stream (binary format) and its bounded buffer.
 *
 * Every traced rank writes one file, DIR/rank-<R>.pxt:
 *
 *   file header (64 bytes, px_file_header)
 *   chunk*      one per spill of the in-memory buffer:
 *     chunk header (32 bytes, px_chunk_header)
 *     ncalls  call records   (64 bytes each, px_call)
 *     nunits  payload units  (16 bytes each, px_unit)
 *
 * All integers little-endian (the tracer refuses to build elsewhere), doubles IEEE-754.
 *
 * The records of a rank form two logical streams that the chunks cut into pieces: the
 * calls (in the order they were recorded) and the payload units.  Call k owns the next
 * `nunits` units of the unit stream: the units of call k come before those of call k+1,
 * and a call's units may span several chunks (a call with more extents than the buffer
 * holds); a call record always lies in the same chunk as its last unit or a later one.
 * A reader therefore concatenates the calls and the units of all chunks and gives each
 * call its units by a cumulative sum of `nunits` (no per-record parsing).
 *
 * For a data call (PX_REC_DATA) the units are the file extents the call touched, in the
 * order of the data (MPI-4.1 §14.3: through the file view): 16 bytes per extent before
 * any compression (int64 offset, int64 length).  For an open or hints record the units
 * hold text, zero-padded to a multiple of 16 bytes.
 *
 * Memory: one buffer of PARIO_TRACE_BUFFER bytes (default 4 MiB, at least 4 KiB); call
 * records fill it from the front, units from the back; when they would meet, the buffer
 * is written to the rank file as one chunk (one writev(2)) and emptied.  A program killed
 * before MPI_Finalize leaves every chunk spilled so far; a complete rank file ends with a
 * PX_REC_FINAL record.
 */
#ifndef PARIO_TRACER_RECORDS_H
#define PARIO_TRACER_RECORDS_H

#include <stddef.h>
#include <stdint.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the pario tracer writes its records little-endian in host order: little-endian hosts only"
#endif

#define PX_FILE_MAGIC "PXTRACE\n"  /* 8 bytes, no terminating NUL stored */
#define PX_CHUNK_MAGIC "PXCK"      /* 4 bytes */
#define PX_FORMAT_VERSION 1u

typedef struct px_file_header {
    char magic[8];         /* PX_FILE_MAGIC */
    uint32_t version;      /* PX_FORMAT_VERSION */
    uint32_t header_size;  /* sizeof(px_file_header) = 64 */
    uint32_t call_size;    /* sizeof(px_call) = 64 */
    uint32_t unit_size;    /* sizeof(px_unit) = 16 */
    int32_t rank;          /* MPI_COMM_WORLD rank */
    int32_t nprocs;        /* MPI_COMM_WORLD size */
    int64_t pid;
    double t0_unix;        /* wall-clock time (Unix seconds) of this rank's time 0 */
    uint8_t reserved[16];
} px_file_header;

typedef struct px_chunk_header {
    char magic[4];         /* PX_CHUNK_MAGIC */
    uint32_t ncalls;       /* call records in this chunk */
    uint64_t nunits;       /* payload units in this chunk */
    uint64_t seq;          /* chunk number within the rank file: 0, 1, 2, ... */
    uint64_t reserved;
} px_chunk_header;

/* Record types (px_call.type). */
enum {
    PX_REC_DATA = 1,   /* a data access call (MPI-4.1 §14.4); units = its file extents */
    PX_REC_DONE = 2,   /* completion of a nonblocking or split call: id = that call's id */
    PX_REC_OPEN = 3,   /* MPI_File_open; units = the file name; pos = amode; bytes = name length */
    PX_REC_META = 4,   /* a non-data file call: op = PX_META_*; pos/bytes = its arguments */
    PX_REC_HINTS = 5,  /* the file's info (MPI_File_get_info): units = "key=value\n" text */
    PX_REC_CLOSE = 6,  /* MPI_File_close; units = posix counters (px_posix_counts, 96 bytes) */
    PX_REC_FINAL = 7,  /* MPI_Finalize reached: the rank file is complete */
};

/* px_call.op for PX_REC_DATA: 0 read, 1 write.  For PX_REC_META: */
enum {
    PX_META_SET_VIEW = 1,    /* pos = disp; bytes = etype size */
    PX_META_SEEK = 2,        /* pos = offset; bytes = whence */
    PX_META_SEEK_SHARED = 3, /* pos = offset; bytes = whence */
    PX_META_SET_SIZE = 4,    /* pos = size */
    PX_META_PREALLOCATE = 5, /* pos = size */
    PX_META_SYNC = 6,
    PX_META_DELETE = 7,      /* file = -1; units = the file name; bytes = name length */
    PX_META_SET_INFO = 8,
    PX_META_SET_ATOMICITY = 9, /* pos = flag */
};

/* px_call.kind of a data call: where the position came from | how the call completes. */
enum {
    PX_POS_AT = 0,          /* explicit offset (MPI-4.1 §14.4.2) */
    PX_POS_INDIVIDUAL = 1,  /* individual file pointer (§14.4.3) */
    PX_POS_SHARED = 2,      /* shared file pointer, noncollective (§14.4.4) */
    PX_POS_ORDERED = 3,     /* shared file pointer, ordered collective (§14.4.4) */
    PX_MODE_BLOCKING = 0 << 2,
    PX_MODE_NONBLOCKING = 1 << 2,  /* completed by MPI_Wait/Test* (PX_REC_DONE) */
    PX_MODE_SPLIT = 2 << 2,        /* split collective, completed by *_end (§14.4.5) */
};

/* px_call.flags */
enum {
    PX_F_COLLECTIVE = 1,  /* a collective call */
    PX_F_PENDING = 2,     /* end time and moved bytes come with a later PX_REC_DONE */
    PX_F_ERROR = 4,       /* the MPI call returned an error */
    PX_F_NOVIEW = 8,      /* the view could not be flattened: no extents recorded */
    PX_F_FREED = 16,      /* PX_REC_DONE: the request was freed (MPI_Request_free), end = free time */
};

typedef struct px_call {
    uint64_t id;       /* call id, per rank, increasing from 0 (PX_REC_DONE: the completed call's id) */
    uint8_t type;      /* PX_REC_* */
    uint8_t op;        /* data: 0 read / 1 write; meta: PX_META_* */
    uint8_t kind;      /* data: PX_POS_* | PX_MODE_* */
    uint8_t flags;     /* PX_F_* */
    int32_t file;      /* the rank's file id (0, 1, 2, ... in open order); -1 none */
    int64_t nunits;    /* payload units owned by this record */
    int64_t bytes;     /* data: requested data bytes = count x size of the memory datatype */
    int64_t moved;     /* data/done: bytes the status says were moved; -1 unknown */
    int64_t pos;       /* data: position in data bytes within the view where the access began */
    double start;      /* seconds since the job's aligned time 0 (MPI_Init barrier) */
    double end;        /* idem; NaN while pending */
} px_call;

typedef struct px_unit {
    int64_t a;         /* extent: file offset in bytes */
    int64_t b;         /* extent: length in bytes */
} px_unit;

/* POSIX I/O counted on an MPI file's descriptors (posix.c): [class][op], class 0 during
 * collective data calls, 1 during independent data calls, 2 at any other time. */
typedef struct px_posix_counts {
    int64_t bytes[3][2];
    int64_t ops[3][2];
} px_posix_counts;

_Static_assert(sizeof(px_file_header) == 64, "px_file_header is 64 bytes");
_Static_assert(sizeof(px_chunk_header) == 32, "px_chunk_header is 32 bytes");
_Static_assert(sizeof(px_call) == 64, "px_call is 64 bytes");
_Static_assert(sizeof(px_unit) == 16, "px_unit is 16 bytes");
_Static_assert(sizeof(px_posix_counts) == 96, "px_posix_counts is 6 units");

/* ------------------------------------------------------------------ the buffer (records.c)
 * All functions are thread-safe through px_rec_lock()/px_rec_unlock(): a caller that
 * appends a call record with units holds the lock across the units and the record. */

/* Open DIR/rank-<rank>.pxt and write its header; buffer of `bufsize` bytes.  0 or -1. */
int px_rec_open(const char *dir, int rank, int nprocs, double t0_unix, size_t bufsize);
void px_rec_lock(void);
void px_rec_unlock(void);
/* Append one unit (lock held); spills when the buffer is full. */
void px_rec_unit(int64_t a, int64_t b);
/* Append `len` bytes as ceil(len / 16) zero-padded units (lock held); returns the count. */
int64_t px_rec_bytes(const void *data, size_t len);
/* Append a call record (lock held). */
void px_rec_call(const px_call *c);
/* Spill what is buffered (lock held or not: takes it). */
void px_rec_flush(void);
/* Flush and close the rank file (idempotent).  A forked child never writes the file: its
 * copy of the buffer is its parent's. */
void px_rec_close(void);
/* Nonzero while the rank file is open and writable. */
int px_rec_ok(void);

#endif
