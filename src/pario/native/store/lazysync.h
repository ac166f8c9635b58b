/* pario serve: lazy synchronisation of hybrid replicas in a background thread (lazysync.c) */
#ifndef PARIO_SERVE_LAZYSYNC_H
#define PARIO_SERVE_LAZYSYNC_H

#include "store/storefile.h"

/* PARIO_LAZY_SYNC is not "0" and the store's opener did not turn it off (st->lazy_off) */
int pxs_lazy_enabled(const pxs_store *st);
/* queue f for background synchronisation (starts the store's thread); caller holds st->mu */
int pxs_lazy_enqueue(pxs_store *st, pxs_file *f);
/* f is closing: out of the queue; caller holds st->mu */
void pxs_lazy_forget(pxs_store *st, pxs_file *f);
/* stop and join the thread (caller must NOT hold st->mu); the first background failure, with
 * its message in st->err, or PXS_OK */
int pxs_lazy_stop(pxs_store *st);

#endif
