/* pario store: cls_lock leases renewed by a thread (coord/rados_lease.h). */
#define _GNU_SOURCE
#include "store/coord/rados_lease.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "store/meta.h"

#define TAG "pario"          /* the tag every shared holder gives (cls_lock: shared holders agree on it) */

typedef struct {
    char *oid, *name;
    int exclusive;
} held;

struct pxs_lease {
    rd_handle io;
    double lease;
    char cookie[96];
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    int stop, lost;
    held *h;
    size_t n, cap;
};

static struct timeval duration(const pxs_lease *l)
{
    struct timeval tv = {(time_t)l->lease, (suseconds_t)((l->lease - (double)(time_t)l->lease) * 1e6)};
    return tv;
}

static int lock_op(pxs_lease *l, const char *oid, const char *name, int exclusive, int renew)
{
    struct timeval tv = duration(l);
    uint8_t flags = renew ? PXS_RADOS_LOCK_MUST_RENEW : 0;
    if (exclusive)
        return pxs_rados.lock_exclusive(l->io, oid, name, l->cookie, "pario store", &tv, flags);
    return pxs_rados.lock_shared(l->io, oid, name, l->cookie, TAG, "pario store", &tv, flags);
}

static void *renewer(void *arg)
{
    pxs_lease *l = arg;
    pthread_mutex_lock(&l->mu);
    while (!l->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        double every = l->lease / 3.0;
        ts.tv_sec += (time_t)every;
        ts.tv_nsec += (long)((every - (double)(time_t)every) * 1e9);
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        while (!l->stop && pthread_cond_timedwait(&l->cv, &l->mu, &ts) != ETIMEDOUT)
            ;
        /* renewed under the mutex: a drop or a new lock waits for the round (each a few ms) */
        for (size_t i = 0; !l->stop && i < l->n; i++)
            if (lock_op(l, l->h[i].oid, l->h[i].name, l->h[i].exclusive, 1) < 0)
                __atomic_store_n(&l->lost, 1, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

pxs_lease *pxs_lease_new(rd_handle io, double lease)
{
    static unsigned long seq;
    pxs_lease *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->io = io;
    l->lease = lease > 0.3 ? lease : 0.3;
    char host[48] = "?";
    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "?");
    host[sizeof host - 1] = 0;
    snprintf(l->cookie, sizeof l->cookie, "%s:%ld:%lu", host, (long)getpid(), __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED));
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    if (pthread_create(&l->thread, NULL, renewer, l) != 0) {
        pthread_mutex_destroy(&l->mu);
        pthread_cond_destroy(&l->cv);
        free(l);
        return NULL;
    }
    return l;
}

static ssize_t find(const pxs_lease *l, const char *oid, const char *name)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->h[i].oid, oid) == 0 && strcmp(l->h[i].name, name) == 0)
            return (ssize_t)i;
    return -1;
}

static void forget(pxs_lease *l, size_t i)
{
    free(l->h[i].oid);
    free(l->h[i].name);
    l->h[i] = l->h[--l->n];
}

void pxs_lease_free(pxs_lease *l)
{
    if (!l)
        return;
    pthread_mutex_lock(&l->mu);
    l->stop = 1;
    pthread_cond_signal(&l->cv);
    pthread_mutex_unlock(&l->mu);
    pthread_join(l->thread, NULL);
    while (l->n) {
        (void)pxs_rados.unlock(l->io, l->h[l->n - 1].oid, l->h[l->n - 1].name, l->cookie);
        forget(l, l->n - 1);
    }
    free(l->h);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
    free(l);
}

int pxs_lease_try(pxs_lease *l, const char *oid, const char *name, int exclusive)
{
    if (!l)
        return PXS_EIO;     /* released (an abandoned opener) */
    pthread_mutex_lock(&l->mu);
    int rc = PXS_OK;
    if (l->lost) {
        rc = PXS_EIO;
    } else if (find(l, oid, name) >= 0) {
        rc = PXS_EINVAL;      /* the caller's bookkeeping is wrong: a set holds a lock once */
    } else {
        int rv = lock_op(l, oid, name, exclusive, 0);
        if (rv == -EBUSY || rv == -EEXIST)
            rc = PXS_EBUSY;
        else if (rv < 0)
            rc = PXS_EIO;
        if (!rc) {
            if (l->n == l->cap) {
                size_t nc = l->cap ? 2 * l->cap : 8;
                held *nh = realloc(l->h, nc * sizeof *nh);
                if (nh) {
                    l->h = nh;
                    l->cap = nc;
                }
            }
            char *o = strdup(oid), *nm = strdup(name);
            if (l->n < l->cap && o && nm) {
                l->h[l->n++] = (held){o, nm, exclusive};
            } else {
                free(o);
                free(nm);
                (void)pxs_rados.unlock(l->io, oid, name, l->cookie);
                rc = PXS_ENOMEM;
            }
        }
    }
    pthread_mutex_unlock(&l->mu);
    return rc;
}

int pxs_lease_wait(pxs_lease *l, const char *oid, const char *name, int exclusive, double timeout)
{
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long nap = 20000000L;
    for (;;) {
        int rc = pxs_lease_try(l, oid, name, exclusive);
        if (rc != PXS_EBUSY)
            return rc;
        clock_gettime(CLOCK_MONOTONIC, &now);
        double waited = (double)(now.tv_sec - t0.tv_sec) + (double)(now.tv_nsec - t0.tv_nsec) * 1e-9;
        if (waited >= timeout)
            return PXS_EBUSY;
        struct timespec ts = {0, nap};
        nanosleep(&ts, NULL);
        nap = nap * 3 / 2 > 200000000L ? 200000000L : nap * 3 / 2;
    }
}

void pxs_lease_drop(pxs_lease *l, const char *oid, const char *name)
{
    if (!l)
        return;
    pthread_mutex_lock(&l->mu);
    ssize_t i = find(l, oid, name);
    if (i >= 0) {
        (void)pxs_rados.unlock(l->io, oid, name, l->cookie);
        forget(l, (size_t)i);
    }
    pthread_mutex_unlock(&l->mu);
}

int pxs_lease_lost(const pxs_lease *l)
{
    return !l || __atomic_load_n(&l->lost, __ATOMIC_RELAXED);
}

const char *pxs_lease_cookie(const pxs_lease *l)
{
    return l ? l->cookie : "";
}
