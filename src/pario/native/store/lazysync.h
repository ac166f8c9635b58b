/* pario store: lazy synchronisation in a background thread (lazysync.c; docs/store.md,
 * "Replicas and routing").  Knows nothing of what it synchronises: its owner (store/redirect.c)
 * gives it a mutex, a step function and an error buffer, and queues opaque items. */
#ifndef PARIO_SERVE_LAZYSYNC_H
#define PARIO_SERVE_LAZYSYNC_H

#include <pthread.h>
#include <stddef.h>

typedef struct pxs_lazy pxs_lazy;

/* one chunk of item's synchronisation (called with the owner's mutex held); *more: work left;
 * a failure (PXS_*) leaves its one-line message in the owner's error buffer */
typedef int (*pxs_lazy_step)(void *item, int *more);

/* PARIO_LAZY_SYNC is not "0" and the owner did not turn it off (off) */
int pxs_lazy_enabled(int off);
/* a queue (no thread yet) over the owner's recursive mutex mu, its step and error buffer */
pxs_lazy *pxs_lazy_new(pthread_mutex_t *mu, pxs_lazy_step step, char *err, size_t errlen);
/* queue item for background synchronisation (starts the thread); caller holds mu */
int pxs_lazy_enqueue(pxs_lazy *lz, void *item);
/* item is going away: out of the queue; caller holds mu */
void pxs_lazy_forget(pxs_lazy *lz, void *item);
/* stop and join the thread (caller must NOT hold mu), free lz; the first background failure,
 * with its message in the owner's error buffer, or PXS_OK */
int pxs_lazy_stop(pxs_lazy *lz);

#endif
