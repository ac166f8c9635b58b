/* pario store: lazy synchronisation of hybrid replicas in the background (CI-LAYOUT seed 002
 * §5: a write goes to the copy the cost model prices cheapest, the other copies become stale
 * and are brought up to date later, off the request's path).  The C twin of
 * pario.store.hybrid.LazySync: a write that leaves unclean entries on a file with "cheapest"
 * routing enqueues the file; one thread per store takes the first queued file and
 * synchronises one chunk (pxs_sync_step, under the store's mutex, so the foreground's calls
 * interleave with it chunk by chunk) until the file is clean.  The thread never calls MPI.
 * PARIO_LAZY_SYNC=0 turns it off (close still synchronises everything).  The queue holds opaque
 * items and the step is its owner's (store/redirect.c: pxs_sync_step): no include of the layer
 * above (docs/store.md, "Replicas and routing").
 */
#define _GNU_SOURCE
#include "store/lazysync.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/meta.h"

struct pxs_lazy {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    int started, stopping;
    void **q;
    int n, cap;
    int err;                    /* the first failure of a background step (PXS_*) */
    char msg[PXS_ERRLEN];
    pthread_mutex_t *owner_mu;  /* the owner's (the store's) mutex: held around every step */
    pxs_lazy_step step;
    char *owner_err;            /* the owner's one-line error */
    size_t owner_errlen;
};

int pxs_lazy_enabled(int off)
{
    const char *v = getenv("PARIO_LAZY_SYNC");
    return !off && !(v && strcmp(v, "0") == 0);
}

pxs_lazy *pxs_lazy_new(pthread_mutex_t *mu, pxs_lazy_step step, char *err, size_t errlen)
{
    pxs_lazy *lz = calloc(1, sizeof *lz);
    if (!lz)
        return NULL;
    pthread_mutex_init(&lz->mu, NULL);
    pthread_cond_init(&lz->cv, NULL);
    lz->owner_mu = mu;
    lz->step = step;
    lz->owner_err = err;
    lz->owner_errlen = errlen;
    return lz;
}

static void *run(void *arg)
{
    pxs_lazy *lz = arg;
    for (;;) {
        pthread_mutex_lock(&lz->mu);
        while (!lz->n && !lz->stopping)
            pthread_cond_wait(&lz->cv, &lz->mu);
        int stop = lz->stopping;
        pthread_mutex_unlock(&lz->mu);
        if (stop)
            return NULL;
        /* the store's mutex first: a close (which forgets its file under that mutex) cannot
         * free the file between the pick and the step */
        pthread_mutex_lock(lz->owner_mu);
        pthread_mutex_lock(&lz->mu);
        void *f = lz->n ? lz->q[0] : NULL;
        pthread_mutex_unlock(&lz->mu);
        int more = 0, rc = PXS_OK;
        if (f)
            rc = lz->step(f, &more);
        pthread_mutex_lock(&lz->mu);
        if (f && (rc || !more) && lz->n && lz->q[0] == f) {
            memmove(lz->q, lz->q + 1, (size_t)(lz->n - 1) * sizeof *lz->q);
            lz->n--;
        }
        if (rc && !lz->err) {
            lz->err = rc;
            snprintf(lz->msg, sizeof lz->msg, "%s", lz->owner_err);
        }
        pthread_cond_broadcast(&lz->cv);
        pthread_mutex_unlock(&lz->mu);
        pthread_mutex_unlock(lz->owner_mu);
        if (more) {     /* let the foreground's calls in between two chunks */
            struct timespec ts = {0, 500000};
            nanosleep(&ts, NULL);
        }
    }
}

int pxs_lazy_enqueue(pxs_lazy *lz, void *f)
{
    int rc = PXS_OK;
    pthread_mutex_lock(&lz->mu);
    int queued = 0;
    for (int i = 0; i < lz->n; i++)
        queued |= lz->q[i] == f;
    if (!queued && lz->n == lz->cap) {
        int nc = lz->cap ? 2 * lz->cap : 8;
        void **q = realloc(lz->q, (size_t)nc * sizeof *q);
        if (q) {
            lz->q = q;
            lz->cap = nc;
        } else {
            rc = PXS_ENOMEM;
        }
    }
    if (!rc && !queued)
        lz->q[lz->n++] = f;
    if (!rc && !lz->started && !lz->stopping) {
        if (pthread_create(&lz->thread, NULL, run, lz) == 0) {
            lz->started = 1;
        } else {
            snprintf(lz->owner_err, lz->owner_errlen, "cannot start the lazy synchronisation thread");
            rc = PXS_EIO;
        }
    }
    pthread_cond_broadcast(&lz->cv);
    pthread_mutex_unlock(&lz->mu);
    return rc;
}

void pxs_lazy_forget(pxs_lazy *lz, void *f)
{
    pthread_mutex_lock(&lz->mu);
    int w = 0;
    for (int i = 0; i < lz->n; i++)
        if (lz->q[i] != f)
            lz->q[w++] = lz->q[i];
    lz->n = w;
    pthread_mutex_unlock(&lz->mu);
}

int pxs_lazy_stop(pxs_lazy *lz)
{
    pthread_mutex_lock(&lz->mu);
    lz->stopping = 1;
    pthread_cond_broadcast(&lz->cv);
    int started = lz->started;
    pthread_mutex_unlock(&lz->mu);
    if (started)
        pthread_join(lz->thread, NULL);
    int rc = lz->err;
    if (rc)
        snprintf(lz->owner_err, lz->owner_errlen, "lazy synchronisation: %.480s", lz->msg);
    pthread_mutex_destroy(&lz->mu);
    pthread_cond_destroy(&lz->cv);
    free(lz->q);
    free(lz);
    return rc;
}
