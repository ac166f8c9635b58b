/* The RMT journal over any storage (rmt_journal_ops, core/rmt.h): the header page, appending
 * and publishing records, replaying them, the first opener's repair and the rewrite of a
 * checkpoint.  The storage (core/journal_map.c one host, core/journal_file.c several) only
 * keeps bytes, the header and the journal lock.
 *
 * The header's `end` is the generation: an appender publishes a record by storing the new end
 * (release) after the record's bytes; a reader compares `end` with what it has applied.
 * Durability against power failure comes from rmt_log_sync at sync points; the record format
 * (size, crc, consecutive seq) lets a replay find the end of what reached the disk.  Format:
 * core/rmt_private.h and docs/store.md.
 */
#define _GNU_SOURCE
#include "core/rmt_private.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

_Static_assert(sizeof(rmt_rec_head) == 24, "record head is 24 bytes");
_Static_assert(offsetof(rmt_hdr, boot_id) == 56 && offsetof(rmt_hdr, lock) == 128, "header layout");
_Static_assert(sizeof(pthread_mutex_t) <= 64 && sizeof(rmt_hdr) <= RMT_HDR_SIZE, "header fits its page");

static const int NU[REC_NTYPES] = {0, 5, 4, 4, 2, 3, 1, 2, 1};   /* u64 fields per type */

static uint64_t pad8(uint64_t n)
{
    return (n + 7) & ~(uint64_t)7;
}

static uint64_t random64(void)
{
    uint64_t v = 0;
    if (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v)
        v = (uint64_t)getpid() * 0x9E3779B97F4A7C15ULL ^ (uint64_t)(uintptr_t)&v;
    return v ? v : 1;
}

void rmt_log_header_init(rmt_hdr *h, uint64_t end, uint64_t seq)
{
    memset(h, 0, sizeof *h);
    memcpy(h->magic, RMT_MAGIC, 8);
    h->version = RMT_VERSION;
    h->hdr_size = RMT_HDR_SIZE;
    h->epoch = random64();
    h->end = end;
    h->seq = seq;
    h->synced = end;
}

int rmt_log_open(rmt_log *lg, const rmt_journal_ops *storage, const char *path, int how)
{
    memset(lg, 0, sizeof *lg);
    lg->ops = storage;
    int rc = storage->open(lg, path, how);
    if (rc) {
        lg->ops = NULL;
        return rc;
    }
    if (memcmp(lg->hdr->magic, RMT_MAGIC, 8) != 0 || lg->hdr->version != RMT_VERSION
        || lg->hdr->hdr_size != RMT_HDR_SIZE) {
        rmt_log_close(lg);
        return RMT_ECORRUPT;
    }
    lg->end = RMT_HDR_SIZE;
    lg->seq = 0;
    return RMT_OK;
}

void rmt_log_close(rmt_log *lg)
{
    if (lg->ops)
        lg->ops->close(lg);
    lg->ops = NULL;
    lg->hdr = NULL;
}

/* the record at pos if it is complete and valid (fits in size bytes, crc, next seq) */
static int valid_at(rmt_log *lg, uint64_t pos, uint64_t size, const rmt_rec_head **out)
{
    *out = NULL;
    if (pos + sizeof(rmt_rec_head) > size)
        return RMT_OK;
    const uint8_t *p;
    int rc = lg->ops->read(lg, pos, sizeof(rmt_rec_head), &p);
    if (rc)
        return rc;
    rmt_rec_head h;
    memcpy(&h, p, sizeof h);
    uint32_t n = h.size;
    if (n < sizeof(rmt_rec_head) || (n & 7) || pos + n > size || h.seq != lg->seq + 1)
        return RMT_OK;
    if (h.type == 0 || h.type >= REC_NTYPES)
        return RMT_OK;
    uint64_t want = sizeof(rmt_rec_head) + 8 * (uint64_t)NU[h.type];
    if (h.type == REC_REGISTER || h.type == REC_JOB)
        want += pad8(h.a32);
    if (want != n)
        return RMT_OK;
    rc = lg->ops->read(lg, pos, n, &p);
    if (rc)
        return rc;
    if (rmt_crc32(0, p + 8, n - 8) != h.crc)
        return RMT_OK;
    *out = (const rmt_rec_head *)p;
    return RMT_OK;
}

/* Apply the records from lg->end on.  limit > 0: up to the published end `limit`, every
 * record of which must be valid (else RMT_ECORRUPT); limit = 0: as far as valid records
 * go (recovery: the first invalid record is the end of the journal).  Records the state
 * refuses (only a damaged journal has them) are skipped and counted in *skipped. */
int rmt_log_replay(rmt_log *lg, rmt_index *ix, uint64_t limit, uint64_t *skipped)
{
    if ((limit > lg->fsize || !limit) && lg->ops->stat(lg))
        return RMT_EIO;
    uint64_t size = lg->fsize;
    if (limit && limit > size)
        return RMT_ECORRUPT;
    uint64_t stop = limit ? limit : size;
    while (lg->end < stop) {
        const rmt_rec_head *h;
        int rc = valid_at(lg, lg->end, stop, &h);
        if (rc)
            return rc;
        if (!h) {
            if (limit)
                return RMT_ECORRUPT;
            break;
        }
        const uint64_t *u = (const uint64_t *)(h + 1);
        const char *bytes = (const char *)(u + NU[h->type]);
        if (rmt_index_check(ix, h, u, bytes) == RMT_OK) {
            rc = rmt_index_apply(ix, h, u, bytes);
            if (rc)
                return rc;
        } else if (skipped) {
            (*skipped)++;
        }
        lg->end += h->size;
        lg->seq = h->seq;
    }
    return RMT_OK;
}

/* Write one record at lg->end (not yet published: rmt_log_publish).  Fills h->size, seq,
 * crc.  A zero word after the record marks the end for a recovery scan. */
int rmt_log_append(rmt_log *lg, rmt_rec_head *h, const uint64_t *u, int nu, const void *bytes, size_t nbytes)
{
    uint64_t size = sizeof *h + 8 * (uint64_t)nu + pad8(nbytes);
    if (size > UINT32_MAX)
        return RMT_EINVAL;
    uint8_t local[512];
    uint8_t *p = size + 8 <= sizeof local ? local : malloc(size + 8);
    if (!p)
        return RMT_ENOMEM;
    h->size = (uint32_t)size;
    h->seq = lg->seq + 1;
    h->crc = 0;
    memcpy(p, h, sizeof *h);
    memcpy(p + sizeof *h, u, 8 * (size_t)nu);
    uint8_t *b = p + sizeof *h + 8 * (size_t)nu;
    if (nbytes)
        memcpy(b, bytes, nbytes);
    memset(b + nbytes, 0, pad8(nbytes) - nbytes + 8);
    uint32_t crc = rmt_crc32(0, p + 8, size - 8);
    memcpy(p + 4, &crc, 4);
    h->crc = crc;
    int rc = lg->ops->write(lg, lg->end, p, size + 8);
    if (p != local)
        free(p);
    if (rc)
        return rc;
    lg->end += size;
    lg->seq++;
    return RMT_OK;
}

int rmt_log_put(rmt_log *lg, size_t off, size_t len)
{
    return lg->ops->put_header(lg, off, len);
}

void rmt_log_publish(rmt_log *lg)
{
    __atomic_store_n(&lg->hdr->seq, lg->seq, __ATOMIC_RELAXED);
    __atomic_store_n(&lg->hdr->end, lg->end, __ATOMIC_RELEASE);
    _Static_assert(offsetof(rmt_hdr, seq) == offsetof(rmt_hdr, end) + 8, "end and seq are one store");
    (void)rmt_log_put(lg, offsetof(rmt_hdr, end), 16);
}

int rmt_log_sync(rmt_log *lg)
{
    uint64_t end = __atomic_load_n(&lg->hdr->end, __ATOMIC_ACQUIRE);
    if (lg->ops->sync(lg))
        return RMT_EIO;
    uint64_t old = __atomic_load_n(&lg->hdr->synced, __ATOMIC_RELAXED);
    if (end > old) {
        __atomic_store_n(&lg->hdr->synced, end, __ATOMIC_RELAXED);
        return rmt_log_put(lg, offsetof(rmt_hdr, synced), 8);
    }
    return RMT_OK;
}

/* ------------------------------------------------------------------ the rewrite (checkpoint)
 * A new journal that recreates the state: REGISTER per registered replica, JOB per job,
 * ADD per entry (with its flag), written through the storage in large pieces. */
typedef struct {
    rmt_log *lg;
    uint8_t *buf;
    size_t n, cap;
    uint64_t pos, seq, records;
    int err;
} writer;

static void w_flush(writer *w)
{
    if (w->n && !w->err)
        w->err = w->lg->ops->write(w->lg, w->pos, w->buf, w->n);
    w->pos += w->n;
    w->n = 0;
}

static void w_rec(writer *w, int type, int a16, uint32_t a32, const uint64_t *u, const void *bytes, size_t nbytes)
{
    size_t size = sizeof(rmt_rec_head) + 8 * (size_t)NU[type] + pad8(nbytes);
    if (w->n + size > w->cap)
        w_flush(w);
    if (size > w->cap) {
        uint8_t *nb = realloc(w->buf, size);
        if (!nb) {
            w->err = RMT_ENOMEM;
            return;
        }
        w->buf = nb;
        w->cap = size;
    }
    uint8_t *p = w->buf + w->n;
    rmt_rec_head h = {(uint32_t)size, 0, ++w->seq, (uint16_t)type, (uint16_t)a16, a32};
    memcpy(p, &h, sizeof h);
    memcpy(p + sizeof h, u, 8 * (size_t)NU[type]);
    uint8_t *b = p + sizeof h + 8 * (size_t)NU[type];
    if (nbytes)
        memcpy(b, bytes, nbytes);
    memset(b + nbytes, 0, pad8(nbytes) - nbytes);
    uint32_t crc = rmt_crc32(0, p + 8, size - 8);
    memcpy(p + 4, &crc, 4);
    w->n += size;
    w->records++;
}

static void write_state(writer *w, const rmt_index *ix)
{
    for (size_t i = 0; i < ix->files.cap; i++) {
        const rmt_ofile *f = ix->files.s[i].val;
        if (!ix->files.s[i].key || !f)
            continue;
        for (int k = 0; k < f->nrep; k++) {
            const rmt_rep *p = f->reps[k];
            if (p->registered) {
                uint64_t u[2] = {p->r, p->o};
                size_t nl = p->name ? strlen(p->name) : 0;
                w_rec(w, REC_REGISTER, p->mode | p->route << 8, (uint32_t)nl, u, p->name, nl);
            }
            for (size_t j = 0; j < p->n; j++) {
                const rmt_ent *c = &p->e[j];
                uint64_t u[5] = {p->o, p->r, (uint64_t)c->off, (uint64_t)(c->off + c->delta), (uint64_t)c->len};
                w_rec(w, REC_ADD, c->flag, 0, u, NULL, 0);
            }
        }
    }
    for (size_t i = 0; i < ix->jobs.cap; i++) {
        const rmt_job *j = ix->jobs.s[i].val;
        if (!ix->jobs.s[i].key || !j)
            continue;
        uint64_t u[1] = {j->r};
        w_rec(w, REC_JOB, j->done, (uint32_t)j->len, u, j->spec, j->len);
    }
    uint64_t zero = 0;
    if (w->n + 8 > w->cap)
        w_flush(w);
    memcpy(w->buf + w->n, &zero, 8);     /* the end mark of a recovery scan */
    w->n += 8;
    w_flush(w);
    w->pos -= 8;
}

/* does the journal just written describe exactly ix?  (replayed into a scratch index) */
static int check_rewrite(rmt_log *lg, const rmt_index *ix, uint64_t records)
{
    rmt_index sx;
    rmt_index_init(&sx);
    uint64_t skipped = 0;
    lg->end = RMT_HDR_SIZE;
    lg->seq = 0;
    int rc = rmt_log_replay(lg, &sx, 0, &skipped);
    if (!rc && (skipped || lg->seq != records || sx.nent != ix->nent || sx.reps.n != ix->reps.n
                || sx.jobs.n != ix->jobs.n || sx.files.n != ix->files.n))
        rc = RMT_ECORRUPT;
    rmt_index_free(&sx);
    return rc;
}

/* A new journal at `path` (through lg's storage) that recreates ix, with lg's boot id and
 * pending verification, not clean, its lock initialised, durable, and replayed to check it;
 * *out is open on it.  The caller makes it the store's journal (storage replace). */
int rmt_log_rewrite(const rmt_log *lg, const rmt_index *ix, const char *path, rmt_log *out)
{
    int rc = rmt_log_open(out, lg->ops, path, RMT_OPEN_NEW);
    if (rc)
        return rc;
    writer w = {.lg = out, .cap = 1 << 20, .pos = RMT_HDR_SIZE};
    w.buf = malloc(w.cap);
    if (!w.buf) {
        rmt_log_close(out);
        return RMT_ENOMEM;
    }
    write_state(&w, ix);
    free(w.buf);
    rc = w.err;
    if (!rc)
        rc = check_rewrite(out, ix, w.records);
    if (!rc) {
        rmt_hdr *h = out->hdr;
        memcpy(h->boot_id, lg->hdr->boot_id, sizeof h->boot_id);
        h->verify = lg->hdr->verify;     /* a pending verification survives the rewrite */
        h->clean = 0;
        h->end = h->synced = out->end;
        h->seq = out->seq;
        rc = rmt_log_put(out, 0, offsetof(rmt_hdr, lock));
    }
    if (!rc)
        rc = out->ops->lock_init(out);
    if (!rc && out->ops->sync(out))
        rc = RMT_EIO;
    if (rc)
        rmt_log_close(out);
    return rc;
}

/* First opener (alone): make the header describe what the replay found, end the journal
 * there, and record this boot as the one that opened it; durable before anything else
 * happens.  verify: the previous session ended uncleanly in another boot (or a verification
 * it demanded was never completed): the flag is set *before* the boot id changes (program
 * order on the shared header: a process killed between the two stores leaves the flag, a
 * power loss leaves the old boot id), and never cleared here (rmt_verified does, after the
 * verification). */
int rmt_log_repair(rmt_log *lg, const char *boot_id, int verify)
{
    if (verify) {
        __atomic_store_n(&lg->hdr->verify, 1u, __ATOMIC_SEQ_CST);
        if (rmt_log_put(lg, offsetof(rmt_hdr, verify), 4))
            return RMT_EIO;
    }
    /* zeros from the end on: records of a lost session beyond the end (power loss keeps
     * pages in any order) must never line up with new ones and look valid */
    if (lg->ops->truncate(lg, lg->end))
        return RMT_EIO;
    lg->hdr->seq = lg->seq;
    lg->hdr->end = lg->end;
    if (lg->hdr->synced > lg->end)
        lg->hdr->synced = lg->end;
    memset(lg->hdr->boot_id, 0, sizeof lg->hdr->boot_id);
    strncpy(lg->hdr->boot_id, boot_id, sizeof lg->hdr->boot_id - 1);
    lg->hdr->clean = 0;
    if (rmt_log_put(lg, 0, offsetof(rmt_hdr, lock)) || lg->ops->sync(lg))
        return RMT_EIO;
    lg->hdr->synced = lg->end;
    return rmt_log_put(lg, offsetof(rmt_hdr, synced), 8);
}

int rmt_window_read(rmt_window *w, uint64_t pos, size_t n, uint64_t fsize, rmt_fill fill, void *ctx,
                    const uint8_t **p)
{
    if (w->len && pos >= w->pos && pos + n <= w->pos + w->len) {
        *p = w->buf + (pos - w->pos);
        return RMT_OK;
    }
    size_t want = n > RMT_WINDOW ? n : RMT_WINDOW;
    if (pos + want > fsize)
        want = pos + n > fsize ? n : (size_t)(fsize - pos);
    if (want > w->cap) {
        uint8_t *nb = realloc(w->buf, want);
        if (!nb)
            return RMT_ENOMEM;
        w->buf = nb;
        w->cap = want;
    }
    w->len = 0;
    int rc = fill(ctx, w->buf, want, pos);
    if (rc)
        return rc;
    w->pos = pos;
    w->len = want;
    *p = w->buf;
    return RMT_OK;
}

void rmt_window_free(rmt_window *w)
{
    free(w->buf);
    memset(w, 0, sizeof *w);
}

int rmt_storage_opened(rmt_log *lg, int rc, int (*read_header)(rmt_log *lg))
{
    if (!rc)
        rc = lg->ops->stat(lg);
    if (!rc && lg->fsize < RMT_HDR_SIZE)
        rc = RMT_ECORRUPT;
    if (!rc)
        rc = read_header(lg);
    if (rc) {
        int e = errno;
        lg->ops->close(lg);
        errno = e;
    }
    return rc;
}
