/* pario tracer: the POSIX layer (see posix.h).
 *
 * Interposes the libc I/O entry points that the MPICH library imports (nm -D libmpi.so:
 * open, openat, close, read, write, pread, pwrite, readv, writev, aio_read, aio_write;
 * the *64 aliases too, for programs built with large-file names).  Each wrapper calls the
 * next definition (dlsym RTLD_NEXT) and, when the descriptor belongs to an MPI file,
 * adds the bytes to that file's counters.  The cost on other descriptors is one table
 * look-up.  Descriptors at or above PX_MAXFD are not watched.
 */
#define _GNU_SOURCE
#undef _FORTIFY_SOURCE
#include "interpose/posix.h"

#include <aio.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "interpose/runtime.h"

#define PX_MAXFD 65536

_Thread_local px_watch *px_io_watch;
_Thread_local int px_io_class = PX_IO_OTHER;

static px_watch *fdmap[PX_MAXFD];

static ssize_t (*r_read)(int, void *, size_t);
static ssize_t (*r_write)(int, const void *, size_t);
static ssize_t (*r_pread)(int, void *, size_t, off_t);
static ssize_t (*r_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*r_pread64)(int, void *, size_t, off64_t);
static ssize_t (*r_pwrite64)(int, const void *, size_t, off64_t);
static ssize_t (*r_readv)(int, const struct iovec *, int);
static ssize_t (*r_writev)(int, const struct iovec *, int);
static int (*r_open)(const char *, int, ...);
static int (*r_open64)(const char *, int, ...);
static int (*r_openat)(int, const char *, int, ...);
static int (*r_openat64)(int, const char *, int, ...);
static int (*r_close)(int);
static int (*r_aio_read)(struct aiocb *);
static int (*r_aio_write)(struct aiocb *);

/* POSIX's way to store dlsym's object pointer into a function pointer */
#define REAL(name) (r_##name ? r_##name : (*(void **)(&r_##name) = dlsym(RTLD_NEXT, #name), r_##name))

static inline void count(int fd, int op, ssize_t n)
{
    if (n <= 0 || fd < 0 || fd >= PX_MAXFD)
        return;
    px_watch *w = __atomic_load_n(&fdmap[fd], __ATOMIC_RELAXED);
    if (!w)
        return;
    int cls = px_io_class;
    __atomic_fetch_add(&w->counts.bytes[cls][op], (int64_t)n, __ATOMIC_RELAXED);
    __atomic_fetch_add(&w->counts.ops[cls][op], 1, __ATOMIC_RELAXED);
}

static void bind(px_watch *w, int fd)
{
    if (fd < 0 || fd >= PX_MAXFD || w->nfds >= PX_WATCH_FDS)
        return;
    w->fds[w->nfds++] = fd;
    __atomic_store_n(&fdmap[fd], w, __ATOMIC_RELAXED);
}

static int same_file(const px_watch *w, int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 && st.st_dev == w->dev && st.st_ino == w->ino;
}

/* A descriptor was opened: bind it when it is the file of the running MPI call. */
static void opened(int fd)
{
    px_watch *w = px_io_watch;
    if (!w || fd < 0)
        return;
    if (w->known) {
        if (same_file(w, fd))
            bind(w, fd);
    } else if (w->ncand < PX_WATCH_FDS) {
        w->cand[w->ncand++] = fd;
    }
}

void px_posix_settle(px_watch *w)
{
    struct stat st;
    if (!w->known && w->path && stat(w->path, &st) == 0) {
        w->dev = st.st_dev;
        w->ino = st.st_ino;
        w->known = 1;
    }
    for (int i = 0; i < w->ncand && w->known; i++)
        if (same_file(w, w->cand[i]))
            bind(w, w->cand[i]);
    w->ncand = 0;
}

void px_posix_forget(px_watch *w)
{
    for (int i = 0; i < w->nfds; i++) {
        px_watch *expected = w;
        __atomic_compare_exchange_n(&fdmap[w->fds[i]], &expected, NULL, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    }
    w->nfds = 0;
}

void px_posix_snapshot(const px_watch *w, px_posix_counts *out)
{
    for (int c = 0; c < 3; c++)
        for (int o = 0; o < 2; o++) {
            out->bytes[c][o] = __atomic_load_n(&w->counts.bytes[c][o], __ATOMIC_RELAXED);
            out->ops[c][o] = __atomic_load_n(&w->counts.ops[c][o], __ATOMIC_RELAXED);
        }
}

static void unbind(int fd)
{
    if (fd < 0 || fd >= PX_MAXFD)
        return;
    px_watch *w = __atomic_exchange_n(&fdmap[fd], NULL, __ATOMIC_RELAXED);
    if (!w)
        return;
    for (int i = 0; i < w->nfds; i++)
        if (w->fds[i] == fd) {
            w->fds[i] = w->fds[--w->nfds];
            break;
        }
}

/* ------------------------------------------------------------------ opens and closes */

static int open_mode(int flags, va_list ap)
{
    return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? va_arg(ap, int) : 0;
}

/* open and its relatives: the mode argument exists with O_CREAT or O_TMPFILE */
#define PX_OPEN(NAME, PARAMS, ARGS)                   \
    PX_EXPORT int NAME PARAMS                         \
    {                                                 \
        va_list ap;                                   \
        va_start(ap, flags);                          \
        int mode = open_mode(flags, ap);              \
        va_end(ap);                                   \
        int fd = REAL(NAME) ARGS;                     \
        opened(fd);                                   \
        return fd;                                    \
    }

PX_OPEN(open, (const char *path, int flags, ...), (path, flags, mode))
PX_OPEN(open64, (const char *path, int flags, ...), (path, flags, mode))
PX_OPEN(openat, (int dirfd, const char *path, int flags, ...), (dirfd, path, flags, mode))
PX_OPEN(openat64, (int dirfd, const char *path, int flags, ...), (dirfd, path, flags, mode))

PX_EXPORT int close(int fd)
{
    unbind(fd);
    return REAL(close)(fd);
}

/* ------------------------------------------------------------------ data */

/* A read (OP 0) or write (OP 1) call on descriptor fd that returns the bytes moved. */
#define PX_IO(NAME, OP, PARAMS, ARGS)          \
    PX_EXPORT ssize_t NAME PARAMS              \
    {                                          \
        ssize_t r = REAL(NAME) ARGS;           \
        count(fd, OP, r);                      \
        return r;                              \
    }

PX_IO(read, 0, (int fd, void *buf, size_t n), (fd, buf, n))
PX_IO(write, 1, (int fd, const void *buf, size_t n), (fd, buf, n))
PX_IO(pread, 0, (int fd, void *buf, size_t n, off_t off), (fd, buf, n, off))
PX_IO(pwrite, 1, (int fd, const void *buf, size_t n, off_t off), (fd, buf, n, off))
PX_IO(pread64, 0, (int fd, void *buf, size_t n, off64_t off), (fd, buf, n, off))
PX_IO(pwrite64, 1, (int fd, const void *buf, size_t n, off64_t off), (fd, buf, n, off))
PX_IO(readv, 0, (int fd, const struct iovec *iov, int n), (fd, iov, n))
PX_IO(writev, 1, (int fd, const struct iovec *iov, int n), (fd, iov, n))

/* Asynchronous I/O (ROMIO's nonblocking independent path may use it): counted when
 * submitted, with the requested size. */
PX_EXPORT int aio_read(struct aiocb *cb)
{
    int r = REAL(aio_read)(cb);
    if (r == 0)
        count(cb->aio_fildes, 0, (ssize_t)cb->aio_nbytes);
    return r;
}

PX_EXPORT int aio_write(struct aiocb *cb)
{
    int r = REAL(aio_write)(cb);
    if (r == 0)
        count(cb->aio_fildes, 1, (ssize_t)cb->aio_nbytes);
    return r;
}
