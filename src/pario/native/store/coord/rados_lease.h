/* pario store: the locks of the "rados" coordination member (coord/rados.c) -- RADOS object
 * class locks (cls_lock, librados' rados_lock_exclusive / rados_lock_shared) held with a
 * duration, the lease, and renewed by one thread per set every third of it
 * (LIBRADOS_LOCK_FLAG_MUST_RENEW: only a lock still held is renewed).  A holder that dies stops renewing: its locks are gone one lease
 * after its last renewal, and another client's try succeeds (docs/multinode.md, "rados":
 * measured 3.0-3.1 s with a 2 s lease).  A renewal that fails (the lock expired and someone
 * else took it: a process stalled for longer than the lease) marks the set lost; every later
 * use of it fails.
 *
 * One set per coordination instance, one cookie per set ("HOST:PID:N"): locks of the same name
 * on the same object taken by two sets of one process are two holders, as two processes. */
#ifndef PARIO_STORE_COORD_RADOS_LEASE_H
#define PARIO_STORE_COORD_RADOS_LEASE_H

#include "store/rados_api.h"

typedef struct pxs_lease pxs_lease;

/* a set of locks over io (an I/O context of its own: lock operations run from the renewal
 * thread too), lease seconds long; NULL: out of memory or no thread */
pxs_lease *pxs_lease_new(rd_handle io, double lease);
/* every lock of the set released, the thread stopped (io stays the caller's) */
void pxs_lease_free(pxs_lease *l);
/* (a NULL set: released; every try fails with PXS_EIO) */
/* one try: PXS_OK held, PXS_EBUSY held by another holder, PXS_EIO (the set was lost or RADOS
 * failed: err says why when given) */
int pxs_lease_try(pxs_lease *l, const char *oid, const char *name, int exclusive);
/* tried every 20..200 ms until taken or timeout seconds passed (PXS_EBUSY) */
int pxs_lease_wait(pxs_lease *l, const char *oid, const char *name, int exclusive, double timeout);
/* released (nothing if not held) */
void pxs_lease_drop(pxs_lease *l, const char *oid, const char *name);
/* 1: a renewal failed: the set's locks may be held by others now */
int pxs_lease_lost(const pxs_lease *l);
const char *pxs_lease_cookie(const pxs_lease *l);

#endif
