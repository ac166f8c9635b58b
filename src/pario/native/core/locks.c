/* Byte-range locks between processes: fcntl open-file-description locks (F_OFD_SETLK).
 *
 * They belong to the open file, not to the process, so two stores opened in one process
 * exclude each other like two processes do, and the kernel drops them when the holder
 * dies (SIGKILL included): nothing to clean up after a crash.  fcntl has no timed wait,
 * so a busy lock is polled with growing naps (50 µs … 20 ms) until `timeout` seconds. */
#define _GNU_SOURCE
#include "core/rmt_private.h"

#include <errno.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

static int try_lock(int fd, int64_t start, int64_t len, short type)
{
    struct flock fl = {0};
    fl.l_type = type;
    fl.l_whence = SEEK_SET;
    fl.l_start = start;
    fl.l_len = len;
    for (;;) {
        if (fcntl(fd, F_OFD_SETLK, &fl) == 0)
            return RMT_OK;
        if (errno == EINTR)
            continue;
        return (errno == EAGAIN || errno == EACCES) ? RMT_ETIMEDOUT : RMT_EIO;
    }
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int rmt_lock(int fd, int64_t start, int64_t len, int exclusive, double timeout)
{
    short type = exclusive ? F_WRLCK : F_RDLCK;
    int rc = try_lock(fd, start, len, type);
    if (rc != RMT_ETIMEDOUT || timeout <= 0)
        return rc;
    double t0 = now();
    long nap = 50000;
    for (;;) {
        struct timespec ts = {0, nap};
        nanosleep(&ts, NULL);
        rc = try_lock(fd, start, len, type);
        if (rc != RMT_ETIMEDOUT)
            return rc;
        if (now() - t0 >= timeout)
            return RMT_ETIMEDOUT;
        nap = nap * 2 > 20000000 ? 20000000 : nap * 2;
    }
}

int rmt_unlock(int fd, int64_t start, int64_t len)
{
    return try_lock(fd, start, len, F_UNLCK) == RMT_OK ? RMT_OK : RMT_EIO;
}
