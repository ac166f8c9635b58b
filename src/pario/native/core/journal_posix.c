/* What the journal storages over one POSIX file share (core/journal_map.c, core/journal_file.c):
 * making a new journal file (header page, first room allocated, durable), opening it without
 * following a planted link, allocating room ahead of appends, and the rename that makes a
 * rewritten journal the store's (docs/store.md, "The RMT journal"). */
#define _GNU_SOURCE
#include "core/rmt_private.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int rmt_posix_write_all(int fd, const void *buf, size_t n, uint64_t pos)
{
    const char *p = buf;
    while (n) {
        ssize_t w = pwrite(fd, p, n, (off_t)pos);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return RMT_EIO;
        }
        p += w;
        pos += (uint64_t)w;
        n -= (size_t)w;
    }
    return RMT_OK;
}

int rmt_posix_size(int fd, uint64_t *size)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return RMT_EIO;
    *size = (uint64_t)st.st_size;
    return RMT_OK;
}

/* a new, empty journal in fd: header page, room for the first records (allocated, not sparse:
 * see rmt_posix_allocate; may not fit), durable */
static int init_file(int fd)
{
    char page[RMT_HDR_SIZE];
    memset(page, 0, sizeof page);
    rmt_log_header_init((rmt_hdr *)page, RMT_HDR_SIZE, 0);
    int rc = rmt_posix_write_all(fd, page, sizeof page, 0);
    if (!rc)
        (void)posix_fallocate(fd, RMT_HDR_SIZE, (off_t)RMT_GROW_MIN);
    if (!rc && fsync(fd) != 0)
        rc = RMT_EIO;
    return rc;
}

int rmt_posix_open(rmt_posix *f, const char *path, int how)
{
    f->fd = -1;
    f->path = strdup(path);
    if (!f->path)
        return RMT_ENOMEM;
    int flags = O_RDWR | O_NOFOLLOW | O_CLOEXEC;      /* never through a planted link */
    int rc = RMT_OK;
    if (how == RMT_OPEN_CREATE) {
        /* the caller makes sure nobody else creates it at the same time */
        int fd = open(path, flags | O_CREAT | O_EXCL, 0644);
        if (fd >= 0) {
            rc = init_file(fd);
            close(fd);
        } else if (errno != EEXIST) {
            rc = RMT_EIO;
        }
    } else if (how == RMT_OPEN_NEW) {
        flags |= O_CREAT | O_TRUNC;
    }
    if (!rc)
        f->fd = open(path, flags, 0644);
    if (!rc && f->fd < 0)
        rc = RMT_EIO;
    if (!rc && how == RMT_OPEN_NEW)
        rc = init_file(f->fd);
    if (rc) {
        int e = errno;
        rmt_posix_close(f);
        errno = e;
    }
    return rc;
}

void rmt_posix_close(rmt_posix *f)
{
    if (f->fd >= 0)
        close(f->fd);
    f->fd = -1;
    free(f->path);
    f->path = NULL;
}

/* Make the file hold at least `need` bytes of *allocated* space (a page of a mapping that the
 * file system has not allocated raises SIGBUS when written on a full file system: tmpfs, or any
 * disk without free blocks).  Allocates a step beyond `need`, or exactly `need` when the step
 * does not fit, never beyond `limit`; a file system without fallocate gets a sparse extension.
 * A full file system is RMT_EIO with errno ENOSPC. */
int rmt_posix_allocate(int fd, uint64_t *fsize, uint64_t need, uint64_t limit)
{
    if (need <= *fsize)
        return RMT_OK;
    if (rmt_posix_size(fd, fsize))
        return RMT_EIO;
    if (need <= *fsize)
        return RMT_OK;
    uint64_t grow = *fsize / 2;
    grow = grow < RMT_GROW_MIN ? RMT_GROW_MIN : grow > RMT_GROW_MAX ? RMT_GROW_MAX : grow;
    uint64_t nsize = need + grow;
    if (nsize > limit)
        nsize = limit;
    int e = posix_fallocate(fd, (off_t)*fsize, (off_t)(nsize - *fsize));
    if (e == ENOSPC && nsize > need) {
        nsize = need;
        e = posix_fallocate(fd, (off_t)*fsize, (off_t)(nsize - *fsize));
    }
    if (e == EOPNOTSUPP || e == EINVAL) {
        if (ftruncate(fd, (off_t)nsize) != 0)
            return RMT_EIO;
    } else if (e) {
        errno = e;
        return RMT_EIO;
    }
    *fsize = nsize;
    return RMT_OK;
}

/* rename f's file over path, then make the directory entry durable */
int rmt_posix_replace(rmt_posix *f, const char *path)
{
    if (rename(f->path, path) != 0)
        return RMT_EIO;
    char *np = strdup(path);
    if (!np)
        return RMT_ENOMEM;
    free(f->path);
    f->path = np;
    char *dir = strdup(path);
    if (dir) {
        char *slash = strrchr(dir, '/');
        if (slash)
            *slash = 0;
        int dfd = open(slash ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            fsync(dfd);
            close(dfd);
        }
        free(dir);
    }
    return RMT_OK;
}
