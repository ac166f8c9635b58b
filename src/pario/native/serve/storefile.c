/* pario serve: store files' data through their layouts (storefile.h), as
 * pario.store.local.LocalBackend. */
#define _GNU_SOURCE
#include "storefile.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define ALIGN 4096
#define MAX_IOV 1024
#define RANGE_CHUNK ((int64_t)64 << 20)   /* logical bytes cut into pieces at a time */
#define COPY_BUF ((int64_t)16 << 20)
#define KEEP_SEGS 4096                    /* pieces and segments a handle keeps between calls */

int pxs_fail(pxs_store *st, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(st->err, sizeof st->err, fmt, ap);
    va_end(ap);
    return rc;
}

/* ------------------------------------------------------------------ handles */
static int open_datafile(pxs_sfile *h, int server, int df, int *fd)
{
    if (df == 0 && h->fd0 && server >= 0 && server < h->st->cfg.nservers && h->fd0[server] >= 0) {
        *fd = h->fd0[server];
        return PXS_OK;
    }
    for (int i = 0; i < h->nfd; i++)
        if (h->fds[i].server == server && h->fds[i].datafile == df) {
            *fd = h->fds[i].fd;
            return PXS_OK;
        }
    pxs_store *st = h->st;
    if (server < 0 || server >= st->cfg.nservers)
        return pxs_fail(st, PXS_EINVAL, "layout uses server index %d but the store has %d servers", server,
                        st->cfg.nservers);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%08lld.%d", st->cfg.servers[server].dir, (long long)h->id, df);
    int f = open(path, O_RDWR | O_CREAT | O_CLOEXEC | (st->direct ? O_DIRECT : 0), 0644);
    if (f < 0) {
        if (st->direct && errno == EINVAL)
            return pxs_fail(st, PXS_EIO, "%s: the file system refuses O_DIRECT (tmpfs does); open the store without "
                            "direct I/O", st->cfg.servers[server].dir);
        return pxs_fail(st, PXS_EIO, "cannot open data file %s: %s", path, strerror(errno));
    }
    if (h->nfd == h->capfd) {
        int nc = h->capfd ? h->capfd * 2 : 8;
        pxs_fd *n = realloc(h->fds, (size_t)nc * sizeof *n);
        if (!n) {
            close(f);
            return PXS_ENOMEM;
        }
        h->fds = n;
        h->capfd = nc;
    }
    h->fds[h->nfd++] = (pxs_fd){server, df, f};
    if (df == 0 && h->fd0)
        h->fd0[server] = f;
    *fd = f;
    return PXS_OK;
}

static int is_extents(const pxs_sfile *h)
{
    return h->lay->kind == PXS_EXTENTS;
}

/* logical size from data-file sizes: max over servers j of min{x : C_j(x) >= size_j}
 * (local.py _recover_size; extent-map files commit their size on every extending write) */
static int recover_size(pxs_sfile *h, int64_t committed, int64_t *out)
{
    const pxs_layout *l = h->lay;
    if (l->kind == PXS_EXTENTS) {
        *out = committed;
        return PXS_OK;
    }
    int n = l->nsrv;
    int64_t *target = calloc((size_t)n + 1, 8), *lo = calloc((size_t)n + 1, 8), *hi = calloc((size_t)n + 1, 8),
            *c = calloc((size_t)n + 1, 8);
    int rc = (!target || !lo || !hi || !c) ? PXS_ENOMEM : PXS_OK;
    for (int i = 0; !rc && i < n; i++) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%08lld.0", h->st->cfg.servers[l->srv[i]].dir, (long long)h->id);
        struct stat sb;
        target[i] = stat(path, &sb) == 0 ? (int64_t)sb.st_size : 0;
        lo[i] = 0;
        hi[i] = (int64_t)1 << 61;
    }
    for (int i = 0; !rc && i < n; i++)
        while (lo[i] < hi[i]) {
            int64_t mid = lo[i] + (hi[i] - lo[i]) / 2;
            pxs_layout_counts(l, mid, c);
            if (c[i] >= target[i])
                hi[i] = mid;
            else
                lo[i] = mid + 1;
        }
    int64_t best = 0;
    for (int i = 0; !rc && i < n; i++)
        best = lo[i] > best ? lo[i] : best;
    free(target);
    free(lo);
    free(hi);
    free(c);
    if (!rc)
        *out = best;
    return rc;
}

int pxs_sfile_open(pxs_store *st, const char *name, pxs_sfile **out)
{
    *out = NULL;
    for (pxs_sfile *h = st->sfiles; h; h = h->next)
        if (strcmp(h->name, name) == 0) {
            h->refs++;
            *out = h;
            return PXS_OK;
        }
    pxs_meta_rec rec;
    int rc = pxs_meta_get(&st->meta, name, &rec, st->err, sizeof st->err);
    if (rc < 0)
        return rc;
    if (rc == 0)
        return pxs_fail(st, PXS_ENOENT, "no file '%s' in the store", name);
    pxs_sfile *h = calloc(1, sizeof *h);
    if (!h) {
        pxs_meta_rec_free(&rec);
        return PXS_ENOMEM;
    }
    h->st = st;
    h->name = strdup(name);
    h->id = rec.id;
    h->size = rec.size;
    h->refs = 1;
    h->fd0 = malloc((size_t)(st->cfg.nservers > 0 ? st->cfg.nservers : 1) * sizeof *h->fd0);
    for (int j = 0; h->fd0 && j < st->cfg.nservers; j++)
        h->fd0[j] = -1;
    char lerr[400];
    rc = h->name && h->fd0 ? pxs_layout_parse_text(rec.layout, st->names, st->cfg.nservers, &h->lay, lerr, sizeof lerr)
                 : PXS_ENOMEM;
    if (rc == PXS_EINVAL)
        pxs_fail(st, rc, "file '%s': %s", name, lerr);
    if (!rc && rec.dirty) {
        int64_t rs;
        rc = recover_size(h, rec.size, &rs);
        if (!rc && st->shared) {      /* maybe another process is extending it: do not clear dirty */
            h->size = rs > rec.size ? rs : rec.size;
            h->dirty_marked = 1;
        } else if (!rc) {
            h->size = rs;
            rc = pxs_meta_set_size(&st->meta, name, rs, 0, st->err, sizeof st->err);
        }
    }
    pxs_meta_rec_free(&rec);
    if (rc) {
        pxs_layout_free(h->lay);
        free(h->fd0);
        free(h->name);
        free(h);
        return rc;
    }
    h->next = st->sfiles;
    st->sfiles = h;
    *out = h;
    return PXS_OK;
}

static int sync_fds(pxs_sfile *h)
{
    for (int i = 0; i < h->nfd; i++)
        if (fsync(h->fds[i].fd) != 0)
            return pxs_fail(h->st, PXS_EIO, "fsync of a data file of '%s': %s", h->name, strerror(errno));
    return PXS_OK;
}

static int commit_size(pxs_sfile *h)
{
    pxs_store *st = h->st;
    int rc = st->shared ? pxs_meta_grow_size(&st->meta, h->name, h->size, st->err, sizeof st->err)
                        : pxs_meta_set_size(&st->meta, h->name, h->size, 0, st->err, sizeof st->err);
    if (!rc)
        h->size_dirty = 0;
    return rc;
}

int pxs_sfile_close(pxs_sfile *h)
{
    if (--h->refs > 0)
        return PXS_OK;
    int rc = PXS_OK;
    if (h->size_dirty) {
        rc = sync_fds(h);
        if (!rc)
            rc = commit_size(h);
    }
    for (int i = 0; i < h->nfd; i++)
        close(h->fds[i].fd);
    pxs_store *st = h->st;
    for (pxs_sfile **p = &st->sfiles; *p; p = &(*p)->next)
        if (*p == h) {
            *p = h->next;
            break;
        }
    free(h->fds);
    free(h->fd0);
    free(h->pcs.p);
    free(h->seg);
    pxs_layout_free(h->lay);
    free(h->name);
    free(h);
    return rc;
}

/* ------------------------------------------------------------------ sizes */
/* before the first byte past the committed size reaches a data file: `dirty` committed */
static int mark_extending(pxs_sfile *h)
{
    if (h->size_dirty || is_extents(h))
        return PXS_OK;
    pxs_store *st = h->st;
    int rc = PXS_OK;
    if (!st->shared) {
        rc = pxs_meta_set_dirty(&st->meta, h->name, 1, st->err, sizeof st->err);
    } else if (!h->dirty_marked) {
        pxs_meta_rec rec;
        int got = pxs_meta_get(&st->meta, h->name, &rec, st->err, sizeof st->err);
        if (got < 0)
            return got;
        if (got == 0 || !rec.dirty)     /* another process may have marked it: no commit then */
            rc = pxs_meta_set_dirty(&st->meta, h->name, 1, st->err, sizeof st->err);
        if (got > 0)
            pxs_meta_rec_free(&rec);
        if (!rc)
            h->dirty_marked = 1;
    }
    if (!rc)
        h->size_dirty = 1;
    return rc;
}

static int extend(pxs_sfile *h, int64_t end)
{
    if (end <= h->size)
        return PXS_OK;
    pxs_store *st = h->st;
    if (is_extents(h)) {
        h->size = end;
        return st->shared ? pxs_meta_grow_size(&st->meta, h->name, end, st->err, sizeof st->err)
                          : pxs_meta_set_size(&st->meta, h->name, end, 0, st->err, sizeof st->err);
    }
    int rc = mark_extending(h);
    if (!rc)
        h->size = end;
    return rc;
}

int pxs_sfile_extend(pxs_sfile *h, int64_t end)
{
    return extend(h, end);
}

/* As pxs_sfile_extend, and the data file of byte end - 1 is made to hold it: fallocate(2)
 * allocates, never overwrites a byte and never shrinks (a concurrent writer's bytes past it
 * stay), aligned or not, O_DIRECT too; so the size recovered from the data files after a
 * crash, or read by another process, includes end (LocalBackend.reserve) */
int pxs_sfile_reserve(pxs_sfile *h, int64_t end)
{
    if (end <= h->size || is_extents(h))
        return extend(h, end);
    pxs_store *st = h->st;
    pxs_subs s = {0};
    char lerr[300];
    int rc = pxs_layout_map(h->lay, 0, end - 1, 1, &s, lerr, sizeof lerr);
    if (rc == PXS_EINVAL)
        rc = pxs_fail(st, rc, "%s", lerr);
    if (!rc && s.n != 1)
        rc = pxs_fail(st, PXS_EINVAL, "'%s': byte %lld maps to %zu pieces", h->name, (long long)(end - 1), s.n);
    if (!rc)
        rc = mark_extending(h);
    int fd = -1;
    if (!rc)
        rc = open_datafile(h, s.s[0].server, s.s[0].datafile, &fd);
    if (!rc && fallocate(fd, 0, (off_t)s.s[0].local, 1) != 0)
        rc = pxs_fail(st, PXS_EIO, "fallocate of '%s': %s", h->name, strerror(errno));
    free(s.s);
    if (!rc)
        h->size = end;
    return rc;
}

int pxs_sfile_refresh_size(pxs_sfile *h, int64_t *size)
{
    pxs_store *st = h->st;
    if (!st->shared) {
        *size = h->size;
        return PXS_OK;
    }
    pxs_meta_rec rec;
    int rc = pxs_meta_get(&st->meta, h->name, &rec, st->err, sizeof st->err);
    if (rc < 0)
        return rc;
    if (rc == 0)
        return pxs_fail(st, PXS_ENOENT, "file '%s' was deleted from the store by another process", h->name);
    int64_t s = rec.size;
    rc = PXS_OK;
    if (rec.dirty && !is_extents(h)) {
        int64_t r;
        rc = recover_size(h, s, &r);
        if (!rc && r > s)
            s = r;
    }
    pxs_meta_rec_free(&rec);
    if (rc)
        return rc;
    if (h->size_dirty && h->size > s)
        s = h->size;
    h->size = s;
    *size = s;
    return PXS_OK;
}

int pxs_store_finalize_sizes(pxs_store *st)
{
    char **names;
    size_t n;
    int rc = pxs_meta_dirty_names(&st->meta, &names, &n, st->err, sizeof st->err);
    if (rc)
        return rc;
    for (size_t i = 0; i < n && !rc; i++) {
        pxs_sfile *open_h = NULL;
        for (pxs_sfile *h = st->sfiles; h; h = h->next)
            if (strcmp(h->name, names[i]) == 0)
                open_h = h;
        pxs_meta_rec rec;
        int got = pxs_meta_get(&st->meta, names[i], &rec, st->err, sizeof st->err);
        if (got <= 0) {
            rc = got;
            continue;
        }
        pxs_sfile tmp = {0}, *h = open_h;
        if (!h) {
            tmp.st = st;
            tmp.name = names[i];
            tmp.id = rec.id;
            char lerr[400];
            rc = pxs_layout_parse_text(rec.layout, st->names, st->cfg.nservers, &tmp.lay, lerr, sizeof lerr);
            if (rc == PXS_EINVAL)
                pxs_fail(st, rc, "file '%s': %s", names[i], lerr);
            h = &tmp;
        }
        int64_t size = rec.size, r = 0;
        if (!rc)
            rc = recover_size(h, rec.size, &r);
        if (!rc) {
            if (r > size)
                size = r;
            if (open_h && open_h->size > size)
                size = open_h->size;
            rc = pxs_meta_set_size(&st->meta, names[i], size, 0, st->err, sizeof st->err);
        }
        if (!rc && open_h) {
            open_h->size = size;
            open_h->size_dirty = open_h->dirty_marked = 0;
        }
        pxs_layout_free(tmp.lay);
        pxs_meta_rec_free(&rec);
    }
    pxs_strv_free(names, n);
    return rc;
}

void pxs_sfile_resized(pxs_sfile *h, int64_t size)
{
    h->size = size;
    h->size_dirty = 0;
}

int pxs_sfile_truncate(pxs_sfile *h, int64_t size)
{
    pxs_store *st = h->st;
    if (size < 0)
        return pxs_fail(st, PXS_EINVAL, "truncate: size must be >= 0");
    int keep = st->shared && h->dirty_marked;
    if (is_extents(h)) {
        h->size = size;
        return pxs_meta_set_size(&st->meta, h->name, size, keep, st->err, sizeof st->err);
    }
    int64_t c[h->lay->nsrv + 1];
    int rc = pxs_layout_counts(h->lay, size, c);
    /* data files first, then the committed size: a shrink durable first (bytes past a
     * committed size mean lost metadata), a growth needs no fsync */
    int shrink = size < h->size;
    for (int i = 0; !rc && i < h->lay->nsrv; i++) {
        int fd;
        rc = open_datafile(h, h->lay->srv[i], 0, &fd);
        if (!rc && ftruncate(fd, c[i]) != 0)
            rc = pxs_fail(st, PXS_EIO, "truncate of '%s': %s", h->name, strerror(errno));
        if (!rc && shrink && fsync(fd) != 0)
            rc = pxs_fail(st, PXS_EIO, "fsync of '%s': %s", h->name, strerror(errno));
    }
    if (rc)
        return rc;
    h->size = size;
    rc = pxs_meta_set_size(&st->meta, h->name, size, keep, st->err, sizeof st->err);
    if (!rc)
        h->size_dirty = 0;
    return rc;
}

int pxs_sfile_fsync(pxs_sfile *h, int everything)
{
    pxs_store *st = h->st;
    if (everything) {
        char prefix[32];
        int np = snprintf(prefix, sizeof prefix, "%08lld.", (long long)h->id);
        for (int j = 0; j < st->cfg.nservers; j++) {
            DIR *d = opendir(st->cfg.servers[j].dir);
            if (!d)
                continue;
            struct dirent *e;
            while ((e = readdir(d))) {
                if (strncmp(e->d_name, prefix, (size_t)np) != 0)
                    continue;
                char *end;
                long df = strtol(e->d_name + np, &end, 10);
                if (*end || end == e->d_name + np || df < 0 || df > INT_MAX)
                    continue;
                int fd, rc = open_datafile(h, j, (int)df, &fd);
                if (rc) {
                    closedir(d);
                    return rc;
                }
            }
            closedir(d);
        }
    }
    int rc = sync_fds(h);
    if (!rc && h->size_dirty)
        rc = commit_size(h);
    return rc;
}

/* ------------------------------------------------------------------ I/O */
typedef struct pxs_ioseg {
    int fd;
    int server, datafile;
    int64_t local, len, bo;
} ioseg;

/* order: data file (server, data file number), then server-local offset, then buffer offset */
static inline int seg_before(const ioseg *x, const ioseg *y)
{
    if (x->server != y->server)
        return x->server < y->server;
    if (x->datafile != y->datafile)
        return x->datafile < y->datafile;
    if (x->local != y->local)
        return x->local < y->local;
    return x->bo < y->bo;
}

static int cmp_seg(const void *a, const void *b)
{
    const ioseg *x = a, *y = b;
    return seg_before(x, y) ? -1 : seg_before(y, x);
}

/* a request's few segments (a 64 KiB transfer over a striping: one per server touched) are
 * put in order by insertion, stably; many by qsort */
static void sort_segs(ioseg *sg, size_t n)
{
    if (n > 32) {
        qsort(sg, n, sizeof *sg, cmp_seg);
        return;
    }
    for (size_t i = 1; i < n; i++) {
        if (!seg_before(&sg[i], &sg[i - 1]))
            continue;
        ioseg t = sg[i];
        size_t j = i;
        for (; j > 0 && seg_before(&t, &sg[j - 1]); j--)
            sg[j] = sg[j - 1];
        sg[j] = t;
    }
}

/* complete a short transfer of iov (want bytes at pos, done so far): piece by piece; a read
 * that reaches the end of the data file fills zeros (a hole) */
static int finish(int fd, struct iovec *iov, int n, int64_t pos, int64_t done, int write)
{
    for (int i = 0; i < n; i++) {
        int64_t len = (int64_t)iov[i].iov_len;
        if (done >= len) {
            done -= len;
            pos += len;
            continue;
        }
        char *b = (char *)iov[i].iov_base + done;
        int64_t left = len - done, p = pos + done;
        while (left > 0) {
            ssize_t r = write ? pwrite(fd, b, (size_t)left, p) : pread(fd, b, (size_t)left, p);
            if (r < 0 && errno == EINTR)
                continue;
            if (r < 0)
                return -1;
            if (r == 0) {
                if (write) {
                    errno = EIO;
                    return -1;
                }
                memset(b, 0, (size_t)left);
                break;
            }
            b += r;
            p += r;
            left -= r;
        }
        pos += len;
        done = 0;
    }
    return 0;
}

/* move one sorted set of segments: a run contiguous on a data file is one system call
 * (buffers adjacent in memory joined; one buffer: pread/pwrite, several: preadv/pwritev) */
static int transfer(pxs_sfile *h, const ioseg *sg, size_t n, char *buf, int write)
{
    struct iovec iov[MAX_IOV];
    size_t i = 0;
    while (i < n) {
        int k = 0;
        int64_t pos = sg[i].local, want = 0;
        size_t j = i;
        while (j < n && sg[j].fd == sg[i].fd && sg[j].local == pos + want) {
            char *b = buf + sg[j].bo;
            if (k > 0 && (char *)iov[k - 1].iov_base + iov[k - 1].iov_len == b) {
                iov[k - 1].iov_len += (size_t)sg[j].len;
            } else {
                if (k == MAX_IOV)
                    break;
                iov[k].iov_base = b;
                iov[k].iov_len = (size_t)sg[j].len;
                k++;
            }
            want += sg[j].len;
            j++;
        }
        ssize_t r;
        do {
            if (k == 1)
                r = write ? pwrite(sg[i].fd, iov[0].iov_base, iov[0].iov_len, pos)
                          : pread(sg[i].fd, iov[0].iov_base, iov[0].iov_len, pos);
            else
                r = write ? pwritev(sg[i].fd, iov, k, pos) : preadv(sg[i].fd, iov, k, pos);
        } while (r < 0 && errno == EINTR);
        if (r < 0 || (r < want && finish(sg[i].fd, iov, k, pos, r, write)))
            return pxs_fail(h->st, PXS_EIO, "%s of '%s' (server %s): %s", write ? "write" : "read", h->name,
                            h->st->cfg.servers[sg[i].server].name, strerror(errno));
        i = j;
    }
    return PXS_OK;
}

/* the segments of n ranges, in the handle's scratch (h->seg, *nout of them), in order */
static int segments(pxs_sfile *h, int64_t n, const int64_t *off, const int64_t *len, const int64_t *bo, size_t *nout)
{
    pxs_pieces *pc = &h->pcs;
    size_t ns = 0;
    int rc = PXS_OK;
    char lerr[300];
    for (int64_t k = 0; k < n && !rc; k++) {
        if (len[k] <= 0)
            continue;
        if (off[k] < 0 || bo[k] < 0)
            rc = pxs_fail(h->st, PXS_EINVAL, "'%s': negative offset", h->name);
        for (int64_t a = 0; !rc && a < len[k]; a += RANGE_CHUNK) {
            int64_t m = len[k] - a < RANGE_CHUNK ? len[k] - a : RANGE_CHUNK;
            pc->n = 0;
            rc = pxs_layout_pieces(h->lay, off[k] + a, m, pc, lerr, sizeof lerr);
            if (rc == PXS_EINVAL)
                pxs_fail(h->st, rc, "'%s': %s", h->name, lerr);
            if (!rc && ns + pc->n > h->capseg) {
                size_t cap = h->capseg ? h->capseg : 16;
                while (cap < ns + pc->n)
                    cap *= 2;
                ioseg *nsg = realloc(h->seg, cap * sizeof *nsg);
                if (!nsg)
                    rc = PXS_ENOMEM;
                else {
                    h->seg = nsg;
                    h->capseg = cap;
                }
            }
            for (size_t i = 0; !rc && i < pc->n; i++) {
                const pxs_piece *p = &pc->p[i];
                ioseg *s = &h->seg[ns++];
                s->server = p->server;
                s->datafile = p->datafile;
                s->local = p->local;
                s->len = p->len;
                s->bo = bo[k] + (p->off - off[k]);
                rc = open_datafile(h, p->server, p->datafile, &s->fd);
            }
        }
    }
    if (rc)
        return rc;
    sort_segs(h->seg, ns);
    *nout = ns;
    return PXS_OK;
}

/* the scratch of a large request is not kept (a handle keeps at most KEEP_SEGS entries) */
static void trim_scratch(pxs_sfile *h)
{
    if (h->capseg > KEEP_SEGS) {
        free(h->seg);
        h->seg = NULL;
        h->capseg = 0;
    }
    if (h->pcs.cap > KEEP_SEGS) {
        free(h->pcs.p);
        h->pcs = (pxs_pieces){0};
    }
}

static int move(pxs_sfile *h, int64_t n, const int64_t *off, const int64_t *len, char *buf, const int64_t *bo,
                int write)
{
    size_t ns = 0;
    int rc = segments(h, n, off, len, bo, &ns);
    if (rc || ns == 0)
        return rc;
    const ioseg *sg = h->seg;
    if (!h->st->direct)
        return transfer(h, sg, ns, buf, write);
    /* O_DIRECT (local.py direct mode): through a page-aligned buffer; pieces 4 KiB aligned */
    int64_t top = 0;
    for (size_t i = 0; i < ns; i++) {
        if ((sg[i].local | sg[i].len | sg[i].bo) % ALIGN)
            return pxs_fail(h->st, PXS_EINVAL, "O_DIRECT needs %d-byte aligned offsets, lengths and stripes", ALIGN);
        if (sg[i].bo + sg[i].len > top)
            top = sg[i].bo + sg[i].len;
    }
    void *tmp = NULL;
    if (posix_memalign(&tmp, ALIGN, (size_t)top))
        return PXS_ENOMEM;
    if (write)
        for (size_t i = 0; i < ns; i++)
            memcpy((char *)tmp + sg[i].bo, buf + sg[i].bo, (size_t)sg[i].len);
    rc = transfer(h, sg, ns, tmp, write);
    if (!rc && !write)
        for (size_t i = 0; i < ns; i++)
            memcpy(buf + sg[i].bo, (char *)tmp + sg[i].bo, (size_t)sg[i].len);
    free(tmp);
    return rc;
}

static int do_io(pxs_sfile *h, int64_t n, const int64_t *off, const int64_t *len, char *buf, const int64_t *bo,
                 int write)
{
    int rc = move(h, n, off, len, buf, bo, write);
    trim_scratch(h);
    return rc;
}

int pxs_sfile_readv(pxs_sfile *h, int64_t n, const int64_t *off, const int64_t *len, void *buf, const int64_t *bo)
{
    return do_io(h, n, off, len, buf, bo, 0);
}

int pxs_sfile_writev(pxs_sfile *h, int64_t n, const int64_t *off, const int64_t *len, const void *buf,
                     const int64_t *bo)
{
    int64_t end = 0;
    int any = 0;
    for (int64_t k = 0; k < n; k++) {
        if (len[k] <= 0)
            continue;
        if (off[k] < 0 || len[k] > INT64_MAX - off[k])
            return pxs_fail(h->st, PXS_EINVAL, "write: offset must be >= 0 and the end below 2^63");
        any = 1;
        if (off[k] + len[k] > end)
            end = off[k] + len[k];
    }
    if (!any)
        return PXS_OK;
    int rc = end > h->size ? mark_extending(h) : PXS_OK;
    if (!rc)
        rc = do_io(h, n, off, len, (char *)(uintptr_t)buf, bo, 1);
    if (!rc)
        rc = extend(h, end);
    return rc;
}

int pxs_sfile_copy(pxs_sfile *src, const int64_t *so, pxs_sfile *dst, const int64_t *dof, const int64_t *len,
                   int64_t n)
{
    /* through a buffer of at most COPY_BUF bytes: a batch of ranges read from src (holes read
     * as zeros), written to dst */
    int64_t i = 0;
    int rc = PXS_OK;
    char *buf = NULL;
    int64_t *bo = malloc((size_t)(n > 0 ? n : 1) * sizeof *bo);
    if (!bo)
        return PXS_ENOMEM;
    while (i < n && !rc) {
        int64_t j = i, tot = 0;
        while (j < n && (j == i || tot + len[j] <= COPY_BUF)) {
            bo[j] = tot;
            tot += len[j] > 0 ? len[j] : 0;
            j++;
        }
        if (tot > 0) {
            /* a single range over COPY_BUF is split */
            if (j == i + 1 && tot > COPY_BUF) {
                char *b = malloc((size_t)COPY_BUF);
                if (!b) {
                    rc = PXS_ENOMEM;
                    break;
                }
                for (int64_t a = 0; a < tot && !rc; a += COPY_BUF) {
                    int64_t m = tot - a < COPY_BUF ? tot - a : COPY_BUF, z = 0, x = so[i] + a, y = dof[i] + a;
                    rc = pxs_sfile_readv(src, 1, &x, &m, b, &z);
                    if (!rc)
                        rc = pxs_sfile_writev(dst, 1, &y, &m, b, &z);
                }
                free(b);
                i = j;
                continue;
            }
            char *nb = realloc(buf, (size_t)tot);
            if (!nb) {
                rc = PXS_ENOMEM;
                break;
            }
            buf = nb;
            rc = pxs_sfile_readv(src, j - i, so + i, len + i, buf, bo + i);
            if (!rc)
                rc = pxs_sfile_writev(dst, j - i, dof + i, len + i, buf, bo + i);
        }
        i = j;
    }
    free(buf);
    free(bo);
    return rc;
}
