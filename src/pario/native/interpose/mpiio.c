/* pario interpose: the MPI-IO layer -- the MPI_File_* wrappers, their dispatch through
 * each file's ops table (files.h) and their trace records.
 *
 * Interposes every data-access routine of MPI-4.1 §14.4 and their large-count (_c)
 * variants (§14.4.1, Table 14.1):
 *   explicit offsets   read_at, write_at, read_at_all, write_at_all                 (§14.4.2)
 *   individual pointer read, write, read_all, write_all                             (§14.4.3)
 *   shared pointer     read_shared, write_shared, read_ordered, write_ordered       (§14.4.4)
 *   nonblocking        iread_at, iwrite_at, iread_at_all, iwrite_at_all, iread, iwrite,
 *                      iread_all, iwrite_all, iread_shared, iwrite_shared
 *   split collective   {read,write}_{at_all,all,ordered}_{begin,end}                (§14.4.5)
 * the completion of nonblocking file requests (MPI_Wait, Waitall, Waitany, Waitsome,
 * Test, Testall, Testany, Testsome, Request_free; §3.7.3-3.7.5), and the file
 * manipulation calls open, close, delete, set_size, preallocate, sync, set_info,
 * set_atomicity, set_view, seek, seek_shared (§14.2, §14.3, §14.4.3-4, §14.6.1).
 *
 * Each data call is one record (records.h): call id, op, kind, collective flag, file,
 * start and end time, the data bytes (count x size of the memory datatype), the bytes the
 * status reports (a short read at EOF moves fewer), and its file extents.  The extents
 * come from the position where the access began, mapped through the file's current view
 * (flatten.h: MPI-4.1 §14.3):
 *   explicit offset:    offset x etype size;
 *   individual pointer: MPI_File_get_position before the call (§14.4.3);
 *   shared pointer:     MPI_File_get_position_shared before the call, while an fcntl lock
 *                       (one byte per file in DIR/shared.lock) keeps every other traced
 *                       rank's shared-pointer calls on the file out until the call returns;
 *   ordered:            rank 0 of the file's communicator reads the shared pointer and
 *                       broadcasts it; each rank adds the exclusive prefix sum (MPI_Exscan)
 *                       of the ranks' data bytes: ranks access in rank order (§14.4.4).
 * Nonblocking and split calls are recorded at issue (with the extents) and completed by a
 * PX_REC_DONE record carrying the completion time and the status's byte count.
 *
 * Dispatch.  MPI_File_open asks the core's modules whether one claims the file
 * (px_core_open: the serving module, serve.c, claims the files it serves); a file no module
 * claims gets the pass-through ops below (MPICH's PMPI_File_* routines).  Every wrapper of a
 * file the layer keeps state for calls f->ops, and records the call around it while tracing
 * is on (trace.h), whichever the ops.  This file knows no module but through the core.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "interpose/files.h"
#include "interpose/flatten.h"
#include "interpose/handles.h"
#include "interpose/jsonbuf.h"
#include "interpose/posix.h"
#include "interpose/records.h"
#include "interpose/runtime.h"
#include "interpose/trace.h"

_Static_assert(sizeof(MPI_Request) <= sizeof(uint64_t), "a request handle fits a map key");

typedef struct px_pending {
    uint64_t key;          /* the request handle */
    px_call c;             /* the issued call (id, op, kind, flags, file) */
    px_watch *watch;
} px_pending;

static pthread_mutex_t map_mutex = PTHREAD_MUTEX_INITIALIZER;
static px_map pending;     /* MPI_Request -> px_pending */
static int npending;       /* entries in `pending` (read without the lock as a fast path) */

static uint64_t rkey(MPI_Request r)
{
    uint64_t k = 0;
    memcpy(&k, &r, sizeof r);
    return k;
}

/* The layer's state of a file, NULL for a file it neither traces nor a module claimed.  A
 * file that passes through costs this call only: while no file is traced or claimed (the
 * core's table is empty) no lock either (runtime.h: px_core_file). */
static px_file *lookup(MPI_File fh)
{
    if (!px_on && !px_core_keep_files)
        return NULL;
    return px_core_file(fh);
}

static int64_t type_size(MPI_Datatype dt)
{
    MPI_Count s = 0;
    return PMPI_Type_size_c(dt, &s) == MPI_SUCCESS ? (int64_t)s : -1;
}

static int64_t mul(int64_t a, int64_t b)
{
    int64_t r;
    return a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r) ? -1 : r;
}

/* Bytes a completed call moved, from its status (MPICH keeps the count in bytes: MPI_Get_count
 * with MPI_BYTE); -1 when unknown. */
static int64_t status_bytes(const MPI_Status *st)
{
    MPI_Count n = 0;
    if (!st || PMPI_Get_count_c(st, MPI_BYTE, &n) != MPI_SUCCESS || n == MPI_UNDEFINED)
        return -1;
    return (int64_t)n;
}

/* ------------------------------------------------------------------ records */

static int emit_extent(void *ctx, int64_t off, int64_t len)
{
    px_rec_unit(off, len);
    ++*(int64_t *)ctx;
    return 0;
}

/* Append a data call with its extents (unless it failed or the view is unknown). */
static void record_data(px_file *f, px_call *c)
{
    if (!px_on)
        return;
    int64_t n = 0;
    px_rec_lock();
    if (!(c->flags & PX_F_ERROR) && c->bytes > 0) {
        /* units emitted before a failure stay this call's (the stream's counts must hold) */
        if (!f->view_ok || c->pos < 0 || px_view_map(&f->view, c->pos, c->bytes, emit_extent, &n) < 0)
            c->flags |= PX_F_NOVIEW;
    }
    c->nunits = n;
    px_rec_call(c);
    px_rec_unlock();
}

/* Append a record whose units hold `text`. */
static void record_text(px_call *c, const char *text, size_t len)
{
    if (!px_on)
        return;
    px_rec_lock();
    c->nunits = px_rec_bytes(text, len);
    px_rec_call(c);
    px_rec_unlock();
}

static px_call new_call(int type, int op, int file)
{
    px_call c;
    memset(&c, 0, sizeof c);
    c.id = px_next_id();
    c.type = (uint8_t)type;
    c.op = (uint8_t)op;
    c.file = file;
    c.moved = -1;
    c.end = NAN;
    return c;
}

static void record_meta(px_file *f, int op, int64_t pos, int64_t bytes, uint64_t id, double t0, double t1, int rc)
{
    if (!px_on)
        return;
    px_call c = new_call(PX_REC_META, op, f ? f->id : -1);
    c.id = id;
    c.pos = pos;
    c.bytes = bytes;
    c.start = t0;
    c.end = t1;
    if (rc != MPI_SUCCESS)
        c.flags |= PX_F_ERROR;
    px_rec_lock();
    px_rec_call(&c);
    px_rec_unlock();
}

/* The file's hints (MPI_File_get_info: what the implementation uses, MPI-4.1 §14.2.8);
 * recorded when they changed since the last record. */
static void snapshot_hints(px_file *f)
{
    if (!px_on)
        return;
    MPI_Info info;
    if (PMPI_File_get_info(f->fh, &info) != MPI_SUCCESS)
        return;
    int n = 0;
    PMPI_Info_get_nkeys(info, &n);
    px_buf text = {0}, json = {0};
    px_buf_puts(&json, "{");
    char key[MPI_MAX_INFO_KEY + 1], small[1024];
    for (int i = 0; i < n; i++) {
        if (PMPI_Info_get_nthkey(info, i, key) != MPI_SUCCESS)
            continue;
        int len = (int)sizeof small, flag = 0;
        char *val = small;
        if (PMPI_Info_get_string(info, key, &len, small, &flag) != MPI_SUCCESS || !flag)
            continue;
        if (len > (int)sizeof small) {  /* len is now the size the value needs */
            val = malloc((size_t)len);
            if (!val || PMPI_Info_get_string(info, key, &len, val, &flag) != MPI_SUCCESS) {
                free(val);
                continue;
            }
        }
        px_buf_printf(&text, "%s=%s\n", key, val);
        if (json.n > 1)
            px_buf_puts(&json, ", ");
        px_buf_json(&json, key, strlen(key));
        px_buf_puts(&json, ": ");
        px_buf_json(&json, val, strlen(val));
        if (val != small)
            free(val);
    }
    px_buf_puts(&json, "}");
    PMPI_Info_free(&info);
    if (!text.oom && !json.oom && (!f->hints_text || strcmp(f->hints_text, text.p ? text.p : "") != 0)) {
        free(f->hints_text);
        free(f->hints_json);
        f->hints_text = text.p ? text.p : strdup("");
        f->hints_json = json.p;
        px_call c = new_call(PX_REC_HINTS, 0, f->id);
        c.bytes = (int64_t)text.n;
        c.start = c.end = px_now();
        record_text(&c, f->hints_text, text.n);
        return;
    }
    px_buf_free(&text);
    px_buf_free(&json);
}

/* ------------------------------------------------------------------ POSIX class */

/* What the POSIX layer attributes I/O to while an MPI call runs (posix.h). */
typedef struct px_io_scope {
    px_watch *watch;
    int cls;
} px_io_scope;

static px_io_scope io_set(px_watch *w, int cls)
{
    px_io_scope saved = {px_io_watch, px_io_class};
    px_io_watch = w;
    px_io_class = cls;
    return saved;
}

static void io_restore(px_io_scope saved)
{
    px_io_watch = saved.watch;
    px_io_class = saved.cls;
}

/* ------------------------------------------------------------------ data calls */

typedef struct px_op {
    px_file *f;
    px_call c;
    MPI_Status own;
    MPI_Status *st;        /* the status the MPI call fills (the caller's or `own`) */
    int locked;
    px_io_scope io;
} px_op;

/* Before the MPI call: the record's fields, the position, the POSIX class; start time last. */
static void op_begin(px_op *o, px_file *f, int op, int kind, int coll, int64_t count, MPI_Datatype dt,
                     MPI_Offset offset, MPI_Status *status)
{
    o->f = f;
    o->c = new_call(PX_REC_DATA, op, f->id);
    o->c.kind = (uint8_t)kind;
    o->c.flags = coll ? PX_F_COLLECTIVE : 0;
    o->c.bytes = mul(count, type_size(dt));
    o->st = status == MPI_STATUS_IGNORE ? &o->own : status;
    o->locked = 0;
    int64_t es = f->etype_size;
    MPI_Offset p = 0;
    switch (kind & 3) {
    case PX_POS_AT:
        o->c.pos = mul(offset, es);
        break;
    case PX_POS_INDIVIDUAL:
        o->c.pos = PMPI_File_get_position(f->fh, &p) == MPI_SUCCESS ? mul(p, es) : -1;
        break;
    case PX_POS_SHARED:
    case PX_POS_ORDERED:
        o->c.pos = f->ops->shared_pos(f, kind, o->c.bytes, &o->locked);
        break;
    }
    o->io = io_set(&f->watch, coll ? PX_IO_COLL : PX_IO_INDEP);
    o->c.start = px_now();
}

/* Right after the MPI call. */
static void op_after(px_op *o, int rc)
{
    double t = px_now();
    io_restore(o->io);
    if (o->locked)
        px_trace_shared_lock(o->f->lock_byte, F_UNLCK);
    if (rc != MPI_SUCCESS)
        o->c.flags |= PX_F_ERROR;
    if ((o->c.kind & ~3) == PX_MODE_BLOCKING) {
        o->c.end = t;
        if (rc == MPI_SUCCESS)
            o->c.moved = status_bytes(o->st);
    } else if (rc == MPI_SUCCESS) {
        o->c.flags |= PX_F_PENDING;
    }
}

static void op_blocking(px_op *o, int rc)
{
    op_after(o, rc);
    record_data(o->f, &o->c);
}

static void op_nonblocking(px_op *o, int rc, MPI_Request *req)
{
    op_after(o, rc);
    record_data(o->f, &o->c);
    if (rc != MPI_SUCCESS || !req || !px_on)
        return;
    px_pending *p = malloc(sizeof *p);
    if (!p)
        return;
    p->key = rkey(*req);
    p->c = o->c;
    p->watch = &o->f->watch;
    pthread_mutex_lock(&map_mutex);
    if (px_map_put(&pending, p->key, p) == 0)
        __atomic_store_n(&npending, (int)pending.n, __ATOMIC_RELAXED);
    else
        free(p);
    pthread_mutex_unlock(&map_mutex);
}

static void op_split_begin(px_op *o, int rc)
{
    op_after(o, rc);
    record_data(o->f, &o->c);
    if (rc == MPI_SUCCESS) {
        o->f->split = o->c;
        o->f->split_pending = 1;
    }
}

/* The completion of an issued call (nonblocking or split): a PX_REC_DONE record. */
static void record_done(const px_call *issued, double t0, double t1, int failed, const MPI_Status *st, int flags)
{
    px_call c = *issued;
    c.type = PX_REC_DONE;
    c.flags = (uint8_t)((issued->flags & PX_F_COLLECTIVE) | flags | (failed ? PX_F_ERROR : 0));
    c.nunits = 0;
    c.start = t0;
    c.end = t1;
    c.moved = status_bytes(st);  /* kept with an error: MPICH 5.0.2's MPI_Testall can report
                                    MPI_ERR_IN_STATUS with a garbage MPI_ERROR for ROMIO
                                    requests that completed (their counts are right) */
    px_rec_lock();
    px_rec_call(&c);
    px_rec_unlock();
}

/* One interposed data routine.  PARAMS: its parameter list; ARGS: the pass-through call's
 * arguments; PARGS: the MPI routine's arguments from a px_io_args `a` (its pmpi function);
 * KIND, COLL, OFF, ST: for op_begin; REQ: its request (nonblocking) or NULL; FINISH: the
 * step after the call (blocking, nonblocking or split begin). */
#define PX_DATA(NAME, PARAMS, ARGS, PARGS, OP, KIND, COLL, OFF, ST, REQ, FINISH)                         \
    static int pmpi_##NAME(const px_io_args *a) { return PMPI_File_##NAME PARGS; }                       \
    PX_EXPORT int MPI_File_##NAME PARAMS                                                                 \
    {                                                                                                    \
        px_file *f = lookup(fh);                                                                         \
        if (!f)                                                                                          \
            return PMPI_File_##NAME ARGS;                                                                \
        px_op o;                                                                                         \
        op_begin(&o, f, OP, KIND, COLL, (int64_t)count, datatype, OFF, ST);                              \
        px_io_args a = {fh, OP, KIND, COLL, o.c.pos, OFF, (void *)buf, (int64_t)count, datatype, o.st,   \
                        REQ, pmpi_##NAME};                                                               \
        int rc = f->ops->data(f, &a);                                                                    \
        FINISH;                                                                                          \
        return rc;                                                                                       \
    }

/* The MPI routine's arguments from `a`: explicit offset or file pointer, then the tail. */
#define PX_A_AT(CT, BUF) a->fh, a->offset, (BUF)a->buf, (CT)a->count, a->datatype
#define PX_A_FP(CT, BUF) a->fh, (BUF)a->buf, (CT)a->count, a->datatype

/* Explicit offset, blocking. */
#define PX_BLK_AT(NAME, CT, BUF, OP, COLL)                                                                    \
    PX_DATA(NAME, (MPI_File fh, MPI_Offset offset, BUF buf, CT count, MPI_Datatype datatype, MPI_Status *status), \
            (fh, offset, buf, count, datatype, status), (PX_A_AT(CT, BUF), a->status), OP,                    \
            PX_POS_AT | PX_MODE_BLOCKING, COLL, offset, status, NULL, op_blocking(&o, rc))

/* File pointer (individual, shared or ordered), blocking. */
#define PX_BLK_FP(NAME, CT, BUF, OP, POS, COLL)                                                               \
    PX_DATA(NAME, (MPI_File fh, BUF buf, CT count, MPI_Datatype datatype, MPI_Status *status),                \
            (fh, buf, count, datatype, status), (PX_A_FP(CT, BUF), a->status), OP, POS | PX_MODE_BLOCKING,    \
            COLL, 0, status, NULL, op_blocking(&o, rc))

/* Explicit offset, nonblocking. */
#define PX_NB_AT(NAME, CT, BUF, OP, COLL)                                                                     \
    PX_DATA(NAME, (MPI_File fh, MPI_Offset offset, BUF buf, CT count, MPI_Datatype datatype,                  \
                   MPI_Request *request),                                                                     \
            (fh, offset, buf, count, datatype, request), (PX_A_AT(CT, BUF), a->request), OP,                  \
            PX_POS_AT | PX_MODE_NONBLOCKING, COLL, offset, MPI_STATUS_IGNORE, request,                        \
            op_nonblocking(&o, rc, request))

/* File pointer, nonblocking. */
#define PX_NB_FP(NAME, CT, BUF, OP, POS, COLL)                                                                \
    PX_DATA(NAME, (MPI_File fh, BUF buf, CT count, MPI_Datatype datatype, MPI_Request *request),              \
            (fh, buf, count, datatype, request), (PX_A_FP(CT, BUF), a->request), OP,                          \
            POS | PX_MODE_NONBLOCKING, COLL, 0, MPI_STATUS_IGNORE, request, op_nonblocking(&o, rc, request))

/* Split collective begin, explicit offset (POS is PX_POS_AT). */
#define PX_SPLIT_AT(NAME, CT, BUF, OP, POS)                                                                   \
    PX_DATA(NAME, (MPI_File fh, MPI_Offset offset, BUF buf, CT count, MPI_Datatype datatype),                 \
            (fh, offset, buf, count, datatype), (PX_A_AT(CT, BUF)), OP, POS | PX_MODE_SPLIT, 1, offset,       \
            MPI_STATUS_IGNORE, NULL, op_split_begin(&o, rc))

/* Split collective begin, file pointer (individual or ordered). */
#define PX_SPLIT_FP(NAME, CT, BUF, OP, POS)                                                                   \
    PX_DATA(NAME, (MPI_File fh, BUF buf, CT count, MPI_Datatype datatype), (fh, buf, count, datatype),        \
            (PX_A_FP(CT, BUF)), OP, POS | PX_MODE_SPLIT, 1, 0, MPI_STATUS_IGNORE, NULL,                       \
            op_split_begin(&o, rc))

/* Split collective end. */
#define PX_SPLIT_END(NAME, BUF)                                                                                 \
    static int pmpi_##NAME(const px_io_args *a) { return PMPI_File_##NAME(a->fh, (BUF)a->buf, a->status); }   \
    PX_EXPORT int MPI_File_##NAME(MPI_File fh, BUF buf, MPI_Status *status)                                    \
    {                                                                                                          \
        px_file *f = lookup(fh);                                                                               \
        if (!f || !f->split_pending)                                                                           \
            return PMPI_File_##NAME(fh, buf, status);                                                          \
        MPI_Status own, *st = status == MPI_STATUS_IGNORE ? &own : status;                                     \
        px_io_args a;                                                                                          \
        memset(&a, 0, sizeof a);                                                                               \
        a.fh = fh;                                                                                             \
        a.buf = (void *)buf;                                                                                   \
        a.status = st;                                                                                         \
        a.pmpi = pmpi_##NAME;                                                                                  \
        px_io_scope io = io_set(&f->watch, PX_IO_COLL);                                                        \
        double t0 = px_now();                                                                                  \
        int rc = f->ops->split_end(f, &a);                                                                     \
        double t1 = px_now();                                                                                  \
        io_restore(io);                                                                                        \
        f->split_pending = 0;                                                                                  \
        record_done(&f->split, t0, t1, rc != MPI_SUCCESS, st, 0);                                              \
        return rc;                                                                                             \
    }

/* Both the int-count routine and its MPI_Count (_c) variant. */
#define PX_BOTH(M, NAME, ...) M(NAME, int, __VA_ARGS__) M(NAME##_c, MPI_Count, __VA_ARGS__)

#define RBUF void *
#define WBUF const void *
/* The read and the write routine of one kind, each in both count widths. */
#define PX_RW(M, R, W, ...) PX_BOTH(M, R, RBUF, 0, __VA_ARGS__) PX_BOTH(M, W, WBUF, 1, __VA_ARGS__)

PX_RW(PX_BLK_AT, read_at, write_at, 0)
PX_RW(PX_BLK_AT, read_at_all, write_at_all, 1)
PX_RW(PX_BLK_FP, read, write, PX_POS_INDIVIDUAL, 0)
PX_RW(PX_BLK_FP, read_all, write_all, PX_POS_INDIVIDUAL, 1)
PX_RW(PX_BLK_FP, read_shared, write_shared, PX_POS_SHARED, 0)
PX_RW(PX_BLK_FP, read_ordered, write_ordered, PX_POS_ORDERED, 1)
PX_RW(PX_NB_AT, iread_at, iwrite_at, 0)
PX_RW(PX_NB_AT, iread_at_all, iwrite_at_all, 1)
PX_RW(PX_NB_FP, iread, iwrite, PX_POS_INDIVIDUAL, 0)
PX_RW(PX_NB_FP, iread_all, iwrite_all, PX_POS_INDIVIDUAL, 1)
PX_RW(PX_NB_FP, iread_shared, iwrite_shared, PX_POS_SHARED, 0)
PX_RW(PX_SPLIT_AT, read_at_all_begin, write_at_all_begin, PX_POS_AT)
PX_RW(PX_SPLIT_FP, read_all_begin, write_all_begin, PX_POS_INDIVIDUAL)
PX_RW(PX_SPLIT_FP, read_ordered_begin, write_ordered_begin, PX_POS_ORDERED)
PX_SPLIT_END(read_at_all_end, RBUF)
PX_SPLIT_END(write_at_all_end, WBUF)
PX_SPLIT_END(read_all_end, RBUF)
PX_SPLIT_END(write_all_end, WBUF)
PX_SPLIT_END(read_ordered_end, RBUF)
PX_SPLIT_END(write_ordered_end, WBUF)

/* ------------------------------------------------------------------ request completion */

/* The file requests among reqs[0..n): pointers into the pending table (NULL for others). */
typedef struct px_set {
    px_pending **p;
    px_pending *small[16];
    int n;
    int any;
    int coll;
    px_watch *watch;
} px_set;

static int set_scan(px_set *s, int n, const MPI_Request *reqs)
{
    s->any = s->coll = 0;
    s->watch = NULL;
    s->n = n;
    if (n <= 0 || !reqs || !px_on || __atomic_load_n(&npending, __ATOMIC_RELAXED) == 0)
        return 0;
    s->p = n <= 16 ? s->small : calloc((size_t)n, sizeof *s->p);
    if (!s->p)
        return 0;
    pthread_mutex_lock(&map_mutex);
    for (int i = 0; i < n; i++) {
        px_pending *p = px_map_get(&pending, rkey(reqs[i]));
        s->p[i] = p;
        if (p) {
            s->any = 1;
            s->coll |= p->c.flags & PX_F_COLLECTIVE;
            if (!s->watch)
                s->watch = p->watch;
        }
    }
    pthread_mutex_unlock(&map_mutex);
    if (!s->any && s->p != s->small)
        free(s->p);
    return s->any;
}

/* Request i of the set completed (status st, or failed). */
static void set_done(px_set *s, int i, double t0, double t1, int failed, const MPI_Status *st, int flags)
{
    px_pending *p = s->p[i];
    if (!p)
        return;
    s->p[i] = NULL;
    pthread_mutex_lock(&map_mutex);
    px_map_take(&pending, p->key);
    __atomic_store_n(&npending, (int)pending.n, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&map_mutex);
    record_done(&p->c, t0, t1, failed, st, flags);
    free(p);
}

static void set_free(px_set *s)
{
    if (s->p != s->small)
        free(s->p);
}

/* One completion call (MPI_Wait ... MPI_Testsome) that involves file requests: the POSIX
 * class while it runs (collective when a nonblocking collective is among them: ROMIO
 * progresses those inside MPI_Wait/Test), its times, and the statuses the MPI call fills
 * (the caller's, or the tracer's own when the caller ignores them). */
typedef struct px_cmp {
    px_set s;
    MPI_Status small[16];
    MPI_Status *st;
    MPI_Status *given;
    px_io_scope io;
    double t0;
    double t1;
} px_cmp;

/* Before the MPI call; 0 when no file request is among reqs[0..n) (then pass through). */
static int cmp_begin(px_cmp *c, int n, const MPI_Request *reqs, MPI_Status *given, int nstatus)
{
    if (!set_scan(&c->s, n, reqs))
        return 0;
    c->given = given;
    c->st = given != MPI_STATUS_IGNORE ? given
            : nstatus <= 16 ? c->small : malloc((size_t)nstatus * sizeof(MPI_Status));
    if (!c->st) {
        set_free(&c->s);
        return 0;
    }
    c->io = io_set(c->s.watch, c->s.coll ? PX_IO_COLL : PX_IO_INDEP);
    c->t0 = px_now();
    return 1;
}

/* Right after the MPI call. */
static void cmp_after(px_cmp *c)
{
    c->t1 = px_now();
    io_restore(c->io);
}

/* Request i completed with status j: a single-status call failed when rc says so; in an
 * array of statuses (MPI_ERR_IN_STATUS) each status's MPI_ERROR says, and MPI_ERR_PENDING
 * means not completed (MPI-4.1 §3.7.5). */
static void cmp_done(px_cmp *c, int rc, int i, int j, int array)
{
    const MPI_Status *st = &c->st[j];
    if (array && rc == MPI_ERR_IN_STATUS) {
        if (st->MPI_ERROR == MPI_ERR_PENDING)
            return;
        set_done(&c->s, i, c->t0, c->t1, st->MPI_ERROR != MPI_SUCCESS, st, 0);
    } else {
        set_done(&c->s, i, c->t0, c->t1, rc != MPI_SUCCESS, st, 0);
    }
}

static void cmp_end(px_cmp *c)
{
    if (c->st != c->given && c->st != c->small)
        free(c->st);
    set_free(&c->s);
}

PX_EXPORT int MPI_Wait(MPI_Request *request, MPI_Status *status)
{
    px_cmp c;
    if (!request || !cmp_begin(&c, 1, request, status, 1))
        return PMPI_Wait(request, status);
    int rc = PMPI_Wait(request, c.st);
    cmp_after(&c);
    cmp_done(&c, rc, 0, 0, 0);
    cmp_end(&c);
    return rc;
}

PX_EXPORT int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status)
{
    px_cmp c;
    if (!request || !cmp_begin(&c, 1, request, status, 1))
        return PMPI_Test(request, flag, status);
    int rc = PMPI_Test(request, flag, c.st);
    cmp_after(&c);
    if (rc != MPI_SUCCESS || *flag)
        cmp_done(&c, rc, 0, 0, 0);
    cmp_end(&c);
    return rc;
}

PX_EXPORT int MPI_Waitany(int count, MPI_Request array_of_requests[], int *indx, MPI_Status *status)
{
    px_cmp c;
    if (!cmp_begin(&c, count, array_of_requests, status, 1))
        return PMPI_Waitany(count, array_of_requests, indx, status);
    int rc = PMPI_Waitany(count, array_of_requests, indx, c.st);
    cmp_after(&c);
    if (*indx >= 0 && *indx < count)  /* MPI_UNDEFINED: nothing was active */
        cmp_done(&c, rc, *indx, 0, 0);
    cmp_end(&c);
    return rc;
}

PX_EXPORT int MPI_Testany(int count, MPI_Request array_of_requests[], int *indx, int *flag, MPI_Status *status)
{
    px_cmp c;
    if (!cmp_begin(&c, count, array_of_requests, status, 1))
        return PMPI_Testany(count, array_of_requests, indx, flag, status);
    int rc = PMPI_Testany(count, array_of_requests, indx, flag, c.st);
    cmp_after(&c);
    if (*flag && *indx >= 0 && *indx < count)
        cmp_done(&c, rc, *indx, 0, 0);
    cmp_end(&c);
    return rc;
}

PX_EXPORT int MPI_Waitall(int count, MPI_Request array_of_requests[], MPI_Status array_of_statuses[])
{
    px_cmp c;
    if (!cmp_begin(&c, count, array_of_requests, array_of_statuses, count))
        return PMPI_Waitall(count, array_of_requests, array_of_statuses);
    int rc = PMPI_Waitall(count, array_of_requests, c.st);
    cmp_after(&c);
    for (int i = 0; i < count; i++)
        cmp_done(&c, rc, i, i, 1);
    cmp_end(&c);
    return rc;
}

PX_EXPORT int MPI_Testall(int count, MPI_Request array_of_requests[], int *flag, MPI_Status array_of_statuses[])
{
    px_cmp c;
    if (!cmp_begin(&c, count, array_of_requests, array_of_statuses, count))
        return PMPI_Testall(count, array_of_requests, flag, array_of_statuses);
    int rc = PMPI_Testall(count, array_of_requests, flag, c.st);
    cmp_after(&c);
    if (*flag || rc == MPI_ERR_IN_STATUS)
        for (int i = 0; i < count; i++)
            cmp_done(&c, rc, i, i, 1);
    cmp_end(&c);
    return rc;
}

/* Waitsome and Testsome: request indices[j] completed with status j (§3.7.5). */
#define PX_SOME(NAME)                                                                                    \
    PX_EXPORT int MPI_##NAME(int incount, MPI_Request array_of_requests[], int *outcount,                \
                             int array_of_indices[], MPI_Status array_of_statuses[])                     \
    {                                                                                                    \
        px_cmp c;                                                                                        \
        if (!cmp_begin(&c, incount, array_of_requests, array_of_statuses, incount))                      \
            return PMPI_##NAME(incount, array_of_requests, outcount, array_of_indices, array_of_statuses); \
        int rc = PMPI_##NAME(incount, array_of_requests, outcount, array_of_indices, c.st);              \
        cmp_after(&c);                                                                                   \
        for (int j = 0; *outcount != MPI_UNDEFINED && j < *outcount; j++)                                \
            if (array_of_indices[j] >= 0 && array_of_indices[j] < incount)                               \
                cmp_done(&c, rc, array_of_indices[j], j, 1);                                             \
        cmp_end(&c);                                                                                     \
        return rc;                                                                                       \
    }

PX_SOME(Waitsome)
PX_SOME(Testsome)

/* A freed file request completes unseen (§3.7.3): its end is the time it was freed. */
PX_EXPORT int MPI_Request_free(MPI_Request *request)
{
    px_set s;
    if (!request || !set_scan(&s, 1, request))
        return PMPI_Request_free(request);
    double t0 = px_now();
    int rc = PMPI_Request_free(request);
    set_done(&s, 0, t0, t0, rc != MPI_SUCCESS, NULL, PX_F_FREED);
    set_free(&s);
    return rc;
}

/* ------------------------------------------------------------------ the pass-through ops
 * A file no module claimed: MPICH's own routines (files.h: px_file_ops). */

static int pass_open(px_file *f, MPI_Comm comm, const char *filename, int amode, MPI_Info info, MPI_File *fh)
{
    (void)f;
    return PMPI_File_open(comm, filename, amode, info, fh);
}

static int pass_attach(px_file *f)
{
    (void)f;
    return MPI_SUCCESS;
}

static int pass_close(px_file *f, MPI_File *fh, int *closed)
{
    (void)f;
    int rc = PMPI_File_close(fh);
    *closed = rc == MPI_SUCCESS;
    return rc;
}

/* The position of a shared-pointer access, for its record: the shared pointer read under the
 * tracer's lock (trace.h); of an ordered access: rank 0 of the file's communicator reads the
 * shared pointer and broadcasts it, each rank adds the exclusive prefix sum of the ranks'
 * data bytes (§14.4.4). */
static int64_t pass_shared_pos(px_file *f, int kind, int64_t nbytes, int *locked)
{
    int64_t es = f->etype_size;
    MPI_Offset p = 0;
    if ((kind & 3) == PX_POS_SHARED) {
        if (!px_trace_shared_lock(f->lock_byte, F_WRLCK))
            return 0;
        *locked = 1;
        return PMPI_File_get_position_shared(f->fh, &p) == MPI_SUCCESS ? mul(p, es) : -1;
    }
    int64_t base = 0, before = 0, mine = nbytes < 0 ? 0 : nbytes;
    if (f->comm == MPI_COMM_NULL)  /* no communicator of our own: position unknown */
        return -1;
    if (f->comm_rank == 0)
        base = PMPI_File_get_position_shared(f->fh, &p) == MPI_SUCCESS ? mul(p, es) : -1;
    PMPI_Bcast(&base, 1, MPI_INT64_T, 0, f->comm);
    PMPI_Exscan(&mine, &before, 1, MPI_INT64_T, MPI_SUM, f->comm);
    if (f->comm_rank == 0)
        before = 0;  /* MPI_Exscan leaves rank 0's result undefined */
    return base < 0 ? -1 : base + before;
}

static int pass_data(px_file *f, const px_io_args *a)
{
    (void)f;
    return a->pmpi(a);
}

static int pass_get_size(px_file *f, MPI_Offset *size) { return PMPI_File_get_size(f->fh, size); }

static int pass_set_size(px_file *f, MPI_Offset size, int preallocate)
{
    return preallocate ? PMPI_File_preallocate(f->fh, size) : PMPI_File_set_size(f->fh, size);
}

static int pass_sync(px_file *f) { return PMPI_File_sync(f->fh); }
static int pass_set_atomicity(px_file *f, int flag) { return PMPI_File_set_atomicity(f->fh, flag); }
static int pass_get_amode(px_file *f, int *amode) { return PMPI_File_get_amode(f->fh, amode); }

static int pass_seek_shared(px_file *f, MPI_Offset offset, int whence)
{
    return PMPI_File_seek_shared(f->fh, offset, whence);
}

static int pass_get_position_shared(px_file *f, MPI_Offset *offset)
{
    return PMPI_File_get_position_shared(f->fh, offset);
}

static const px_file_ops pass_ops = {
    .name = "mpich",
    .open = pass_open,
    .attach = pass_attach,
    .close = pass_close,
    .shared_pos = pass_shared_pos,
    .data = pass_data,
    .split_end = pass_data,
    .get_size = pass_get_size,
    .set_size = pass_set_size,
    .sync = pass_sync,
    .set_atomicity = pass_set_atomicity,
    .get_amode = pass_get_amode,
    .seek_shared = pass_seek_shared,
    .get_position_shared = pass_get_position_shared,
};

/* ------------------------------------------------------------------ opening and closing */

static void free_file(px_file *f);

PX_EXPORT int MPI_File_open(MPI_Comm comm, const char *filename, int amode, MPI_Info info, MPI_File *fh)
{
    const px_file_ops *ops = NULL;
    void *state = NULL;
    uint64_t id = px_on ? px_next_id() : 0;
    double t0 = px_on ? px_now() : 0;
    int rc = filename && fh ? px_core_open(comm, filename, amode, info, fh, &ops, &state) : MPI_SUCCESS;
    if (rc != MPI_SUCCESS)
        return rc;
    int claimed = ops != NULL;
    px_file *f = px_on || claimed ? calloc(1, sizeof *f) : NULL;
    char *name = f ? strdup(filename) : NULL;
    if (!name) {
        free(f);
        if (claimed) {  /* out of memory: the module cannot keep the file (it is open) */
            px_file tmp;
            memset(&tmp, 0, sizeof tmp);
            tmp.ops = ops;
            tmp.state = state;
            tmp.comm = comm;
            int closed;
            ops->close(&tmp, fh, &closed);
            return MPI_ERR_NO_MEM;
        }
        return PMPI_File_open(comm, filename, amode, info, fh);
    }
    f->name = name;
    f->ops = claimed ? ops : &pass_ops;
    f->state = state;
    f->watch.path = px_fs_path(name);
    px_io_scope io = io_set(&f->watch, PX_IO_OTHER);
    rc = f->ops->open(f, comm, filename, amode, info, fh);
    double t1 = px_on ? px_now() : 0;
    io_restore(io);
    if (rc != MPI_SUCCESS) {
        free(name);
        free(f);
        return rc;
    }
    px_posix_settle(&f->watch);
    f->fh = *fh;
    px_view_default(&f->view);
    f->view_ok = 1;
    f->etype_size = 1;
    if (PMPI_Comm_dup(comm, &f->comm) != MPI_SUCCESS)
        f->comm = MPI_COMM_NULL;
    else {
        PMPI_Comm_rank(f->comm, &f->comm_rank);
        PMPI_Comm_size(f->comm, &f->comm_size);
    }
    rc = f->ops->attach(f);
    if (rc != MPI_SUCCESS) {
        int closed;
        f->ops->close(f, fh, &closed);
        px_posix_forget(&f->watch);
        free(name);
        free(f);
        return rc;
    }
    uint64_t h = f->watch.known ? (uint64_t)f->watch.ino : 1469598103934665603ULL;
    for (const char *p = f->watch.known ? "" : name; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;  /* FNV-1a of the name */
    f->lock_byte = (off_t)(h % 1000003u);
    if (px_core_file_add(*fh, f, &f->id) != 0) {
        if (claimed) {  /* out of memory: a claimed file cannot be left without its state */
            int closed;
            f->ops->close(f, fh, &closed);
            free_file(f);
            return MPI_ERR_NO_MEM;
        }
        return rc;  /* out of memory: this file is not traced */
    }
    px_call c = new_call(PX_REC_OPEN, 0, f->id);
    c.id = id;
    c.pos = amode;
    c.bytes = (int64_t)strlen(name);
    c.moved = f->comm_size;
    c.start = t0;
    c.end = t1;
    record_text(&c, name, strlen(name));
    snapshot_hints(f);
    return rc;
}

static void free_file(px_file *f)
{
    px_posix_forget(&f->watch);
    px_view_free(&f->view);
    if (f->comm != MPI_COMM_NULL)
        PMPI_Comm_free(&f->comm);
    free(f->hints_text);
    free(f->hints_json);
    free(f->name);
    free(f);
}

PX_EXPORT int MPI_File_close(MPI_File *fh)
{
    px_file *f = fh ? lookup(*fh) : NULL;
    if (!f)
        return PMPI_File_close(fh);
    MPI_File handle = *fh;
    px_io_scope io = io_set(&f->watch, PX_IO_OTHER);
    uint64_t id = px_next_id();
    double t0 = px_now();
    int closed = 0;
    int rc = f->ops->close(f, fh, &closed);
    double t1 = px_now();
    io_restore(io);
    if (!closed) {
        record_meta(f, 0, 0, 0, id, t0, t1, rc);
        return rc;
    }
    px_core_file_remove(handle);
    px_posix_counts pc;
    px_posix_snapshot(&f->watch, &pc);
    px_call c = new_call(PX_REC_CLOSE, 0, f->id);
    c.id = id;
    c.start = t0;
    c.end = t1;
    record_text(&c, (const char *)&pc, sizeof pc);
    /* the counters of all the file's ranks, to its rank 0 (MPI_File_close is collective) */
    px_trace_file_closed(f, &pc);
    free_file(f);
    return rc;
}

/* ------------------------------------------------------------------ other file calls */

PX_EXPORT int MPI_File_delete(const char *filename, MPI_Info info)
{
    int rc = MPI_SUCCESS;
    uint64_t id = px_on ? px_next_id() : 0;
    double t0 = px_on ? px_now() : 0;
    if (!filename || !px_core_delete(filename, info, &rc))
        rc = PMPI_File_delete(filename, info);
    if (!px_on)
        return rc;
    px_call c = new_call(PX_REC_META, PX_META_DELETE, -1);
    c.id = id;
    c.bytes = (int64_t)strlen(filename);
    c.start = t0;
    c.end = px_now();
    if (rc != MPI_SUCCESS)
        c.flags |= PX_F_ERROR;
    record_text(&c, filename, strlen(filename));
    return rc;
}

PX_EXPORT int MPI_File_set_view(MPI_File fh, MPI_Offset disp, MPI_Datatype etype, MPI_Datatype filetype,
                                const char *datarep, MPI_Info info)
{
    px_file *f = lookup(fh);
    if (!f)
        return PMPI_File_set_view(fh, disp, etype, filetype, datarep, info);
    uint64_t id = px_next_id();
    double t0 = px_now();
    int rc = PMPI_File_set_view(fh, disp, etype, filetype, datarep, info);
    double t1 = px_now();
    if (rc == MPI_SUCCESS) {
        px_view_free(&f->view);  /* leaves the default view, kept when the new one fails */
        f->view_ok = px_view_set(&f->view, disp, etype, filetype) == 0;
        f->etype_size = type_size(etype);
    }
    record_meta(f, PX_META_SET_VIEW, disp, f->etype_size, id, t0, t1, rc);
    if (rc == MPI_SUCCESS)
        snapshot_hints(f);
    return rc;
}

PX_EXPORT int MPI_File_set_info(MPI_File fh, MPI_Info info)
{
    px_file *f = lookup(fh);
    if (!f)
        return PMPI_File_set_info(fh, info);
    uint64_t id = px_next_id();
    double t0 = px_now();
    int rc = PMPI_File_set_info(fh, info);
    record_meta(f, PX_META_SET_INFO, 0, 0, id, t0, px_now(), rc);
    if (rc == MPI_SUCCESS)
        snapshot_hints(f);
    return rc;
}

/* A file call with one MPI_Offset argument (and maybe an int), recorded as PX_REC_META. */
#define PX_META2(NAME, CODE, CALL)                                                            \
    PX_EXPORT int MPI_File_##NAME(MPI_File fh, MPI_Offset offset, int whence)                \
    {                                                                                        \
        px_file *f = lookup(fh);                                                             \
        if (!f)                                                                              \
            return PMPI_File_##NAME(fh, offset, whence);                                     \
        uint64_t id = px_next_id();                                                          \
        double t0 = px_now();                                                                \
        int rc = CALL;                                                                       \
        record_meta(f, CODE, offset, whence, id, t0, px_now(), rc);                          \
        return rc;                                                                           \
    }

#define PX_META1(NAME, CODE, T, CALL)                                                         \
    PX_EXPORT int MPI_File_##NAME(MPI_File fh, T arg)                                        \
    {                                                                                        \
        px_file *f = lookup(fh);                                                             \
        if (!f)                                                                              \
            return PMPI_File_##NAME(fh, arg);                                                \
        uint64_t id = px_next_id();                                                          \
        px_io_scope io = io_set(&f->watch, PX_IO_OTHER);                                     \
        double t0 = px_now();                                                                \
        int rc = CALL;                                                                       \
        double t1 = px_now();                                                                \
        io_restore(io);                                                                      \
        record_meta(f, CODE, (int64_t)arg, 0, id, t0, t1, rc);                               \
        return rc;                                                                           \
    }

PX_META2(seek, PX_META_SEEK, PMPI_File_seek(fh, offset, whence))
PX_META2(seek_shared, PX_META_SEEK_SHARED, f->ops->seek_shared(f, offset, whence))
PX_META1(set_size, PX_META_SET_SIZE, MPI_Offset, f->ops->set_size(f, arg, 0))
PX_META1(preallocate, PX_META_PREALLOCATE, MPI_Offset, f->ops->set_size(f, arg, 1))
PX_META1(set_atomicity, PX_META_SET_ATOMICITY, int, f->ops->set_atomicity(f, arg))

/* Queries the file's ops answer (a served file's: the shadow holds no data). */
PX_EXPORT int MPI_File_get_size(MPI_File fh, MPI_Offset *size)
{
    px_file *f = lookup(fh);
    return f && size ? f->ops->get_size(f, size) : PMPI_File_get_size(fh, size);
}

PX_EXPORT int MPI_File_get_position_shared(MPI_File fh, MPI_Offset *offset)
{
    px_file *f = lookup(fh);
    return f && offset ? f->ops->get_position_shared(f, offset) : PMPI_File_get_position_shared(fh, offset);
}

PX_EXPORT int MPI_File_get_amode(MPI_File fh, int *amode)
{
    px_file *f = lookup(fh);
    return f && amode ? f->ops->get_amode(f, amode) : PMPI_File_get_amode(fh, amode);
}

PX_EXPORT int MPI_File_sync(MPI_File fh)
{
    px_file *f = lookup(fh);
    if (!f)
        return PMPI_File_sync(fh);
    uint64_t id = px_next_id();
    double t0 = px_now();
    int rc = f->ops->sync(f);
    record_meta(f, PX_META_SYNC, 0, 0, id, t0, px_now(), rc);
    return rc;
}
