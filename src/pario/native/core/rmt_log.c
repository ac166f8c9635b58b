/* The RMT journal file (DIR/rmt.log): header page, appending records, replaying them.
 *
 * Every process maps the whole file MAP_SHARED into one large reservation, so an append is
 * a copy into the page cache (no system call; it survives the process being killed), and
 * a reader sees other processes' records without reading the file.  The header's `end` is
 * the generation: an appender publishes a record by storing the new end (release) after
 * the record's bytes; a reader compares `end` with what it has applied (one load).
 * Durability against power failure comes from rmt_log_sync (fdatasync) at sync points;
 * the record format (size, crc, consecutive seq) lets a replay find the end of what
 * reached the disk.  Format: rmt.h and docs/store.md.
 */
#define _GNU_SOURCE
#include "core/rmt_private.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

_Static_assert(sizeof(rmt_rec_head) == 24, "record head is 24 bytes");
_Static_assert(offsetof(rmt_hdr, boot_id) == 56 && offsetof(rmt_hdr, lock) == 128, "header layout");
_Static_assert(sizeof(pthread_mutex_t) <= 64 && sizeof(rmt_hdr) <= RMT_HDR_SIZE, "header fits its page");

#define RESERVE ((size_t)1 << 36)   /* 64 GiB of address space for the mapping */
#define GROW_MIN ((uint64_t)1 << 20)
#define GROW_MAX ((uint64_t)64 << 20)

static const int NU[REC_NTYPES] = {0, 5, 4, 4, 2, 3, 1, 2, 1};   /* u64 fields per type */

static uint64_t pad8(uint64_t n)
{
    return (n + 7) & ~(uint64_t)7;
}

static int file_size(int fd, uint64_t *size)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return RMT_EIO;
    *size = (uint64_t)st.st_size;
    return RMT_OK;
}

static uint64_t random64(void)
{
    uint64_t v = 0;
    if (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v)
        v = (uint64_t)getpid() * 0x9E3779B97F4A7C15ULL ^ (uint64_t)(uintptr_t)&v;
    return v ? v : 1;
}

static int write_all(int fd, const void *buf, size_t n, off_t pos)
{
    const char *p = buf;
    while (n) {
        ssize_t w = pwrite(fd, p, n, pos);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return RMT_EIO;
        }
        p += w;
        pos += w;
        n -= (size_t)w;
    }
    return RMT_OK;
}

static void header_init(rmt_hdr *h, uint64_t end, uint64_t seq)
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

/* a new, empty journal at path (the caller makes sure nobody else creates it) */
static int create_file(const char *path)
{
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return errno == EEXIST ? RMT_OK : RMT_EIO;
    char page[RMT_HDR_SIZE];
    memset(page, 0, sizeof page);
    header_init((rmt_hdr *)page, RMT_HDR_SIZE, 0);
    int rc = write_all(fd, page, sizeof page, 0);
    if (!rc)    /* room for the first records, allocated (not sparse: see grow_to); may not fit */
        (void)posix_fallocate(fd, RMT_HDR_SIZE, (off_t)GROW_MIN);
    if (!rc && fsync(fd) != 0)
        rc = RMT_EIO;
    close(fd);
    return rc;
}

int rmt_log_open(rmt_log *lg, const char *path, int create)
{
    memset(lg, 0, sizeof *lg);
    lg->fd = -1;
    if (create) {
        int rc = create_file(path);
        if (rc)
            return rc;
    }
    lg->fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);   /* never through a planted link */
    if (lg->fd < 0)
        return RMT_EIO;
    if (file_size(lg->fd, &lg->fsize) || lg->fsize < RMT_HDR_SIZE) {
        int rc = lg->fsize < RMT_HDR_SIZE ? RMT_ECORRUPT : RMT_EIO;
        close(lg->fd);
        lg->fd = -1;
        return rc;
    }
    void *m = mmap(NULL, RESERVE, PROT_READ | PROT_WRITE, MAP_SHARED, lg->fd, 0);
    if (m == MAP_FAILED) {
        close(lg->fd);
        lg->fd = -1;
        return RMT_EIO;
    }
    lg->map = m;
    lg->reserve = RESERVE;
    lg->hdr = (rmt_hdr *)m;
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
    if (lg->map)
        munmap(lg->map, lg->reserve);
    if (lg->fd >= 0)
        close(lg->fd);
    lg->map = NULL;
    lg->hdr = NULL;
    lg->fd = -1;
}

/* the record at pos if it is complete and valid (fits in size bytes, crc, next seq) */
static const rmt_rec_head *valid_at(const rmt_log *lg, uint64_t pos, uint64_t size)
{
    if (pos + sizeof(rmt_rec_head) > size)
        return NULL;
    const rmt_rec_head *h = (const rmt_rec_head *)(lg->map + pos);
    uint32_t n = h->size;
    if (n < sizeof(rmt_rec_head) || (n & 7) || pos + n > size || h->seq != lg->seq + 1)
        return NULL;
    if (h->type == 0 || h->type >= REC_NTYPES)
        return NULL;
    uint64_t want = sizeof(rmt_rec_head) + 8 * (uint64_t)NU[h->type];
    if (h->type == REC_REGISTER || h->type == REC_JOB)
        want += pad8(h->a32);
    if (want != n)
        return NULL;
    if (rmt_crc32(0, (const uint8_t *)h + 8, n - 8) != h->crc)
        return NULL;
    return h;
}

/* Apply the records from lg->end on.  limit > 0: up to the published end `limit`, every
 * record of which must be valid (else RMT_ECORRUPT); limit = 0: as far as valid records
 * go (recovery: the first invalid record is the end of the journal).  Records the state
 * refuses (only a damaged journal has them) are skipped and counted in *skipped. */
int rmt_log_replay(rmt_log *lg, rmt_index *ix, uint64_t limit, uint64_t *skipped)
{
    uint64_t size = lg->fsize;
    if (limit > size || !limit) {
        if (file_size(lg->fd, &size))
            return RMT_EIO;
        lg->fsize = size;
        if (size > lg->reserve)
            size = lg->reserve;
    }
    if (limit && limit > size)
        return RMT_ECORRUPT;
    uint64_t stop = limit ? limit : size;
    while (lg->end < stop) {
        const rmt_rec_head *h = valid_at(lg, lg->end, stop);
        if (!h) {
            if (limit)
                return RMT_ECORRUPT;
            break;
        }
        const uint64_t *u = (const uint64_t *)(h + 1);
        const char *bytes = (const char *)(u + NU[h->type]);
        if (rmt_index_check(ix, h, u, bytes) == RMT_OK) {
            int rc = rmt_index_apply(ix, h, u, bytes);
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
/* Make the file hold at least `need` bytes of *allocated* space: a page of the mapping that
 * the file system has not allocated would raise SIGBUS when written on a full file system
 * (tmpfs, or any disk without free blocks).  Allocates a step beyond `need`, or exactly
 * `need` when the step does not fit; a file system without fallocate gets a sparse
 * extension.  A full file system is RMT_EIO with errno ENOSPC. */
static int grow_to(rmt_log *lg, uint64_t need)
{
    if (need <= lg->fsize)
        return RMT_OK;
    if (file_size(lg->fd, &lg->fsize))
        return RMT_EIO;
    if (need <= lg->fsize)
        return RMT_OK;
    uint64_t grow = lg->fsize / 2;
    grow = grow < GROW_MIN ? GROW_MIN : grow > GROW_MAX ? GROW_MAX : grow;
    uint64_t nsize = need + grow;
    if (nsize > lg->reserve)
        nsize = lg->reserve;
    int e = posix_fallocate(lg->fd, (off_t)lg->fsize, (off_t)(nsize - lg->fsize));
    if (e == ENOSPC && nsize > need) {
        nsize = need;
        e = posix_fallocate(lg->fd, (off_t)lg->fsize, (off_t)(nsize - lg->fsize));
    }
    if (e == EOPNOTSUPP || e == EINVAL) {
        if (ftruncate(lg->fd, (off_t)nsize) != 0)
            return RMT_EIO;
    } else if (e) {
        errno = e;
        return RMT_EIO;
    }
    lg->fsize = nsize;
    return RMT_OK;
}

int rmt_log_append(rmt_log *lg, rmt_rec_head *h, const uint64_t *u, int nu, const void *bytes, size_t nbytes)
{
    uint64_t size = sizeof *h + 8 * (uint64_t)nu + pad8(nbytes);
    uint64_t need = lg->end + size + 8;
    if (need > lg->reserve)
        return RMT_EFULL;
    int rc = grow_to(lg, need);
    if (rc)
        return rc;
    uint8_t *p = lg->map + lg->end;
    h->size = (uint32_t)size;
    h->seq = lg->seq + 1;
    h->crc = 0;
    memcpy(p, h, sizeof *h);
    memcpy(p + sizeof *h, u, 8 * (size_t)nu);
    uint8_t *b = p + sizeof *h + 8 * (size_t)nu;
    if (nbytes)
        memcpy(b, bytes, nbytes);
    memset(b + nbytes, 0, pad8(nbytes) - nbytes);
    memset(p + size, 0, 8);
    uint32_t crc = rmt_crc32(0, p + 8, size - 8);
    memcpy(p + 4, &crc, 4);
    h->crc = crc;
    lg->end += size;
    lg->seq++;
    return RMT_OK;
}

void rmt_log_publish(rmt_log *lg)
{
    __atomic_store_n(&lg->hdr->seq, lg->seq, __ATOMIC_RELAXED);
    __atomic_store_n(&lg->hdr->end, lg->end, __ATOMIC_RELEASE);
}

int rmt_log_sync(rmt_log *lg)
{
    uint64_t end = __atomic_load_n(&lg->hdr->end, __ATOMIC_ACQUIRE);
    if (fdatasync(lg->fd) != 0)
        return RMT_EIO;
    uint64_t old = __atomic_load_n(&lg->hdr->synced, __ATOMIC_RELAXED);
    if (end > old)
        __atomic_store_n(&lg->hdr->synced, end, __ATOMIC_RELAXED);
    return RMT_OK;
}

/* ------------------------------------------------------------------ snapshot (checkpoint)
 * A new journal that recreates the state: REGISTER per registered replica, JOB per job,
 * ADD per entry (with its flag).  Written with pwrite to `path` and fsync'ed; the caller
 * renames it over the journal. */
typedef struct {
    int fd;
    char *buf;
    size_t n, cap;
    uint64_t pos, seq, records;
    int err;
} writer;

static void w_flush(writer *w)
{
    if (w->n && !w->err) {
        if (write_all(w->fd, w->buf, w->n, (off_t)w->pos))
            w->err = RMT_EIO;
        w->pos += w->n;
    }
    w->n = 0;
}

static void w_rec(writer *w, int type, int a16, uint32_t a32, const uint64_t *u, const void *bytes, size_t nbytes)
{
    size_t size = sizeof(rmt_rec_head) + 8 * (size_t)NU[type] + pad8(nbytes);
    if (w->n + size > w->cap)
        w_flush(w);
    if (size > w->cap) {
        char *nb = realloc(w->buf, size);
        if (!nb) {
            w->err = RMT_ENOMEM;
            return;
        }
        w->buf = nb;
        w->cap = size;
    }
    char *p = w->buf + w->n;
    rmt_rec_head h = {(uint32_t)size, 0, ++w->seq, (uint16_t)type, (uint16_t)a16, a32};
    memcpy(p, &h, sizeof h);
    memcpy(p + sizeof h, u, 8 * (size_t)NU[type]);
    char *b = p + sizeof h + 8 * (size_t)NU[type];
    if (nbytes)
        memcpy(b, bytes, nbytes);
    memset(b + nbytes, 0, pad8(nbytes) - nbytes);
    uint32_t crc = rmt_crc32(0, p + 8, size - 8);
    memcpy(p + 4, &crc, 4);
    w->n += size;
    w->records++;
}

int rmt_log_write_snapshot(const rmt_index *ix, const char *path, uint64_t *records)
{
    writer w = {0};
    w.fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (w.fd < 0)
        return RMT_EIO;
    w.cap = 1 << 20;
    w.buf = malloc(w.cap);
    if (!w.buf) {
        close(w.fd);
        return RMT_ENOMEM;
    }
    w.pos = RMT_HDR_SIZE;
    for (size_t i = 0; i < ix->files.cap; i++) {
        const rmt_ofile *f = ix->files.s[i].val;
        if (!ix->files.s[i].key || !f)
            continue;
        for (int k = 0; k < f->nrep; k++) {
            const rmt_rep *p = f->reps[k];
            if (p->registered) {
                uint64_t u[2] = {p->r, p->o};
                size_t nl = p->name ? strlen(p->name) : 0;
                w_rec(&w, REC_REGISTER, p->mode | p->route << 8, (uint32_t)nl, u, p->name, nl);
            }
            for (size_t j = 0; j < p->n; j++) {
                const rmt_ent *c = &p->e[j];
                uint64_t u[5] = {p->o, p->r, (uint64_t)c->off, (uint64_t)(c->off + c->delta), (uint64_t)c->len};
                w_rec(&w, REC_ADD, c->flag, 0, u, NULL, 0);
            }
        }
    }
    for (size_t i = 0; i < ix->jobs.cap; i++) {
        const rmt_job *j = ix->jobs.s[i].val;
        if (!ix->jobs.s[i].key || !j)
            continue;
        uint64_t u[1] = {j->r};
        w_rec(&w, REC_JOB, j->done, (uint32_t)j->len, u, j->spec, j->len);
    }
    w_flush(&w);
    int rc = w.err;
    if (!rc) {
        char page[RMT_HDR_SIZE];
        memset(page, 0, sizeof page);
        header_init((rmt_hdr *)page, w.pos, w.seq);
        rc = write_all(w.fd, page, sizeof page, 0);
    }
    if (!rc)
        (void)posix_fallocate(w.fd, (off_t)w.pos, (off_t)GROW_MIN);
    if (!rc && fsync(w.fd) != 0)
        rc = RMT_EIO;
    free(w.buf);
    close(w.fd);
    if (records)
        *records = w.records;
    return rc;
}

/* First opener (alone): make the header describe what the replay found, end the journal
 * there, and record this boot as the one that opened it; durable before anything else
 * happens.  verify: the previous session ended uncleanly in another boot (or a verification
 * it demanded was never completed): the flag is set *before* the boot id changes (program
 * order on the shared page: a process killed between the two stores leaves the flag, a power
 * loss leaves the old boot id), and never cleared here (rmt_verified does, after the
 * verification). */
int rmt_log_repair(rmt_log *lg, const char *boot_id, int verify)
{
    if (verify)
        __atomic_store_n(&lg->hdr->verify, 1u, __ATOMIC_SEQ_CST);
    /* zeros from the end on: records of a lost session beyond the end (power loss keeps
     * pages in any order) must never line up with new ones and look valid */
    if (ftruncate(lg->fd, (off_t)lg->end) != 0)
        return RMT_EIO;
    lg->fsize = lg->end;
    (void)grow_to(lg, lg->end + 8);     /* room for records, allocated; a full disk leaves it for later */
    lg->hdr->seq = lg->seq;
    lg->hdr->end = lg->end;
    if (lg->hdr->synced > lg->end)
        lg->hdr->synced = lg->end;
    memset(lg->hdr->boot_id, 0, sizeof lg->hdr->boot_id);
    strncpy(lg->hdr->boot_id, boot_id, sizeof lg->hdr->boot_id - 1);
    lg->hdr->clean = 0;
    if (fdatasync(lg->fd) != 0)
        return RMT_EIO;
    lg->hdr->synced = lg->end;
    return RMT_OK;
}
