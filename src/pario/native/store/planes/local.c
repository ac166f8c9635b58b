/* pario serve: the `local` data plane (plane.h): a data file is a file of its server's
 * directory, as pario.store.local.LocalBackend keeps it.
 *
 * Data file (i, d) of server j is `<server j dir>/<i:08d>.<d>`, opened if it exists, else
 * created with O_EXCL, never through a symbolic link (O_NOFOLLOW), O_DIRECT in direct mode.  A transfer's segments contiguous on one data file become one
 * system call (pread/pwrite for one buffer, preadv/pwritev for several: at most MAX_IOV
 * buffers, buffers adjacent in memory joined); a short read at the end of a data file fills
 * zeros (a hole).  Direct mode moves the bytes through a page-aligned buffer and needs 4 KiB
 * aligned pieces.  Sizes are st_size; truncate is ftruncate (+ fsync), reserve fallocate(2)
 * (allocates, never overwrites a byte, never shrinks), sync fsync. */
#define _GNU_SOURCE
#include "store/planes/plane.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define ALIGN 4096
#define MAX_IOV 1024

typedef struct {
    pxs_dplane hdr;
    int direct;             /* O_DIRECT */
    int sync_points;        /* cached between sync points (PXS_CACHE_SYNC_POINTS): dropped at open, forget */
} lplane;

struct pxs_datafile {
    lplane *dp;
    int server, fd;
    const char *name;
};

static const char *dir_of(const lplane *p, int server)
{
    return p->hdr.cfg->servers[server].place;
}

/* store.json "servers": every server's directory (relative to the store, else absolute),
 * which must exist (pario.store.local.LocalBackend.options) */
static int configure(const pxs_json *j, pxs_config *cfg, const char *path, char *err, size_t errlen)
{
    const pxs_json *dirs = j ? pxs_json_get(j, "servers") : NULL;
    if (!dirs || dirs->type != PXS_JOBJ) {
        snprintf(err, errlen, "%s: not a pario store configuration (no profile servers or server directories)", path);
        return PXS_EINVAL;
    }
    for (int i = 0; i < cfg->nservers; i++) {
        const pxs_json *d = pxs_json_get(dirs, cfg->servers[i].name);
        if (!d || d->type != PXS_JSTR || d->slen == 0 || strlen(d->s) != d->slen) {
            snprintf(err, errlen, "store.json has no directory for server %s", cfg->servers[i].name);
            return PXS_EINVAL;
        }
        cfg->servers[i].place = d->s[0] == '/' ? strdup(d->s) : pxs_join(cfg->root, d->s);
        if (!cfg->servers[i].place)
            return PXS_ENOMEM;
        struct stat sb;
        if (stat(cfg->servers[i].place, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
            snprintf(err, errlen, "server %s directory %s is missing (is its mount there?)", cfg->servers[i].name,
                     cfg->servers[i].place);
            return PXS_ENOENT;
        }
    }
    return PXS_OK;
}

static int open_plane(const pxs_config *cfg, int cache, pxs_dplane **out, char *err, size_t errlen)
{
    *out = NULL;
    int direct = cache == PXS_CACHE_DIRECT;
    if (direct) {      /* a file system refusing O_DIRECT is one line */
        for (int i = 0; i < cfg->nservers; i++) {
            char path[PATH_MAX];
            snprintf(path, sizeof path, "%s/.pario-direct-probe", cfg->servers[i].place);
            int fd = open(path, O_RDWR | O_CREAT | O_DIRECT | O_NOFOLLOW | O_CLOEXEC, 0644);
            if (fd < 0) {
                snprintf(err, errlen, errno == EINVAL ? "%s: the file system refuses O_DIRECT (older tmpfs does); "
                         "open the store without direct I/O" : "%s: cannot probe O_DIRECT", cfg->servers[i].place);
                return PXS_EINVAL;
            }
            close(fd);
            unlink(path);
        }
    }
    lplane *p = calloc(1, sizeof *p);
    if (!p)
        return PXS_ENOMEM;
    p->hdr.ops = &pxs_df_local;
    p->hdr.cfg = cfg;
    p->direct = direct;
    p->sync_points = cache == PXS_CACHE_SYNC_POINTS;
    *out = &p->hdr;
    return PXS_OK;
}

static void close_plane(pxs_dplane *dp)
{
    free(dp);
}

static void df_forget(pxs_datafile *f)
{
    if (f->dp->sync_points)     /* the next reads from the file system, not a stale page */
        (void)posix_fadvise(f->fd, 0, 0, POSIX_FADV_DONTNEED);
}

static int df_open(pxs_dplane *dp, int server, int64_t id, int d, const char *name, pxs_datafile **out, char *err,
                   size_t errlen)
{
    lplane *p = (lplane *)dp;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%08lld.%d", dir_of(p, server), (long long)id, d);
    /* an existing data file, else a new one (O_EXCL: another process creating it at the
     * same moment: opened); never through a link (the store never follows one it did not make) */
    int flags = O_RDWR | O_NOFOLLOW | O_CLOEXEC | (p->direct ? O_DIRECT : 0);
    int f = open(path, flags);
    if (f < 0 && errno == ENOENT) {
        f = open(path, flags | O_CREAT | O_EXCL, 0644);
        if (f < 0 && errno == EEXIST)
            f = open(path, flags);
    }
    if (f < 0) {
        if (errno == ELOOP) {
            snprintf(err, errlen, "data file %s is a symbolic link: pario never follows a link it did not make", path);
            return PXS_EIO;
        }
        if (p->direct && errno == EINVAL) {
            snprintf(err, errlen, "%s: the file system refuses O_DIRECT (tmpfs does); open the store without direct "
                     "I/O", dir_of(p, server));
            return PXS_EIO;
        }
        snprintf(err, errlen, "cannot open data file %s: %s", path, strerror(errno));
        return PXS_EIO;
    }
    pxs_datafile *df = malloc(sizeof *df);
    if (!df) {
        close(f);
        return PXS_ENOMEM;
    }
    *df = (pxs_datafile){p, server, f, name};
    df_forget(df);          /* pages another node's writes made stale since this node read them */
    *out = df;
    return PXS_OK;
}

static void df_close(pxs_datafile *f)
{
    if (f) {
        close(f->fd);
        free(f);
    }
}

/* 1: the file system says fd's file extends past pos (the end this client met may lag another
 * node's writes: its size reaches this node late) */
static int extends_past(int fd, int64_t pos)
{
    struct stat sb;
    return fstat(fd, &sb) == 0 && sb.st_size > pos;
}

/* complete a short transfer of iov (want bytes at pos, done so far): piece by piece; a read
 * that reaches the end of the data file (its size asked of the file system once: this
 * client's may lag another node's writes) fills zeros (a hole) */
static int finish(int fd, struct iovec *iov, int n, int64_t pos, int64_t done, int write)
{
    int asked = 0;          /* the file system asked for the size once (a read at the end) */
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
                if (!asked && (asked = 1) && extends_past(fd, p))
                    continue;
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

/* a run contiguous on a data file is one system call (buffers adjacent in memory joined; one
 * buffer: pread/pwrite, several: preadv/pwritev) */
static int runs(const pxs_dseg *sg, size_t n, char *buf, int write, char *err, size_t errlen)
{
    struct iovec iov[MAX_IOV];
    size_t i = 0;
    while (i < n) {
        int k = 0;
        int64_t pos = sg[i].local, want = 0;
        size_t j = i;
        int fd = sg[i].df->fd;
        while (j < n && sg[j].df == sg[i].df && sg[j].local == pos + want) {
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
            if (k == 1 && write)
                r = pwrite(fd, iov[0].iov_base, iov[0].iov_len, pos);
            else if (k == 1)
                r = pread(fd, iov[0].iov_base, iov[0].iov_len, pos);
            else
                r = write ? pwritev(fd, iov, k, pos) : preadv(fd, iov, k, pos);
        } while (r < 0 && errno == EINTR);
        if (r < 0 || (r < want && finish(fd, iov, k, pos, r, write))) {
            const pxs_datafile *f = sg[i].df;
            snprintf(err, errlen, "%s of '%s' (server %s): %s", write ? "write" : "read", f->name,
                     f->dp->hdr.cfg->servers[f->server].name, strerror(errno));
            return PXS_EIO;
        }
        i = j;
    }
    return PXS_OK;
}

static int transfer(pxs_dplane *dp, const pxs_dseg *sg, size_t n, char *buf, int write, char *err, size_t errlen)
{
    if (!((lplane *)dp)->direct)
        return runs(sg, n, buf, write, err, errlen);
    /* O_DIRECT (local.py direct mode): through a page-aligned buffer; pieces 4 KiB aligned */
    int64_t top = 0;
    for (size_t i = 0; i < n; i++) {
        if ((sg[i].local | sg[i].len | sg[i].bo) % ALIGN) {
            snprintf(err, errlen, "O_DIRECT needs %d-byte aligned offsets, lengths and stripes", ALIGN);
            return PXS_EINVAL;
        }
        if (sg[i].bo + sg[i].len > top)
            top = sg[i].bo + sg[i].len;
    }
    void *tmp = NULL;
    if (posix_memalign(&tmp, ALIGN, (size_t)top))
        return PXS_ENOMEM;
    if (write)
        for (size_t i = 0; i < n; i++)
            memcpy((char *)tmp + sg[i].bo, buf + sg[i].bo, (size_t)sg[i].len);
    int rc = runs(sg, n, tmp, write, err, errlen);
    if (!rc && !write)
        for (size_t i = 0; i < n; i++)
            memcpy(buf + sg[i].bo, (char *)tmp + sg[i].bo, (size_t)sg[i].len);
    free(tmp);
    return rc;
}

static int df_size(pxs_dplane *dp, int server, int64_t id, int d, int64_t *size, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%08lld.%d", dir_of((lplane *)dp, server), (long long)id, d);
    struct stat sb;
    *size = stat(path, &sb) == 0 ? (int64_t)sb.st_size : 0;
    return PXS_OK;
}

static int df_truncate(pxs_datafile *f, int64_t n, int sync, char *err, size_t errlen)
{
    if (ftruncate(f->fd, (off_t)n) != 0) {
        snprintf(err, errlen, "truncate of '%s': %s", f->name, strerror(errno));
        return PXS_EIO;
    }
    if (sync && fsync(f->fd) != 0) {
        snprintf(err, errlen, "fsync of '%s': %s", f->name, strerror(errno));
        return PXS_EIO;
    }
    return PXS_OK;
}

static int df_reserve(pxs_datafile *f, int64_t end, char *err, size_t errlen)
{
    if (fallocate(f->fd, 0, (off_t)(end - 1), 1) != 0) {
        snprintf(err, errlen, "fallocate of '%s': %s", f->name, strerror(errno));
        return PXS_EIO;
    }
    return PXS_OK;
}

static int df_sync(pxs_datafile *f, char *err, size_t errlen)
{
    if (fsync(f->fd) != 0) {
        snprintf(err, errlen, "fsync of a data file of '%s': %s", f->name, strerror(errno));
        return PXS_EIO;
    }
    return PXS_OK;
}

static int df_list(pxs_dplane *dp, int server, int64_t id, int **ds, size_t *n, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    *ds = NULL;
    *n = 0;
    char prefix[32];
    int np = snprintf(prefix, sizeof prefix, "%08lld.", (long long)id);
    DIR *dir = opendir(dir_of((lplane *)dp, server));
    if (!dir)
        return PXS_OK;
    size_t cap = 0;
    int rc = PXS_OK;
    struct dirent *e;
    while (!rc && (e = readdir(dir))) {
        if (strncmp(e->d_name, prefix, (size_t)np) != 0)
            continue;
        char *end;
        long d = strtol(e->d_name + np, &end, 10);
        if (*end || end == e->d_name + np || d < 0 || d > INT_MAX)
            continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 8;
            int *nd = realloc(*ds, cap * sizeof *nd);
            if (!nd) {
                rc = PXS_ENOMEM;
                break;
            }
            *ds = nd;
        }
        (*ds)[(*n)++] = (int)d;
    }
    closedir(dir);
    if (rc) {
        free(*ds);
        *ds = NULL;
        *n = 0;
    }
    return rc;
}

/* copy_file_range in the kernel, as cp does (pario.store.local used it too): page cache to
 * page cache, no user-space buffer; a file system that refuses it (EXDEV, EINVAL, ENOSYS,
 * EOPNOTSUPP) is PXS_ENOSYS (the caller copies through a buffer); past the source's end:
 * zeros */
static int df_copy(pxs_datafile *src, int64_t spos, pxs_datafile *dst, int64_t dpos, int64_t n, char *err,
                   size_t errlen)
{
    if (src->dp->direct || dst->dp->direct)
        return PXS_ENOSYS;
    int refreshed = 0;
    while (n > 0) {
        loff_t a = spos, b = dpos;
        ssize_t k = copy_file_range(src->fd, &a, dst->fd, &b, (size_t)n, 0);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP)
                return PXS_ENOSYS;
            snprintf(err, errlen, "copying data file %s: %s", src->name ? src->name : "?", strerror(errno));
            return PXS_EIO;
        }
        if (k == 0 && !refreshed) {
            /* ask the file system once before calling the rest a hole (node_kill.py: a flush
             * after a node died copied zeros over redirected writes) */
            refreshed = 1;
            if (extends_past(src->fd, spos))
                continue;
        }
        if (k == 0) {            /* the source ends here: the rest is a hole, zeros */
            static const char zeros[65536];
            while (n > 0) {
                ssize_t w = pwrite(dst->fd, zeros, n < (int64_t)sizeof zeros ? (size_t)n : sizeof zeros, dpos);
                if (w < 0 && errno == EINTR)
                    continue;
                if (w <= 0) {
                    snprintf(err, errlen, "writing data file %s: %s", dst->name ? dst->name : "?",
                             strerror(errno));
                    return PXS_EIO;
                }
                n -= w;
                dpos += w;
            }
            break;
        }
        spos += k;
        dpos += k;
        n -= k;
    }
    return PXS_OK;
}

const pxs_dfops pxs_df_local = {
    .kind = "local",
    .configure = configure,
    .open_plane = open_plane,
    .close_plane = close_plane,
    .open = df_open,
    .close = df_close,
    .transfer = transfer,
    .size = df_size,
    .truncate = df_truncate,
    .reserve = df_reserve,
    .sync = df_sync,
    .forget = df_forget,
    .list = df_list,
    .copy = df_copy,
};
