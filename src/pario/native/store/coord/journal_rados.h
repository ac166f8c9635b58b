/* pario store: the RMT journal as one RADOS object (rmt_journal_ops, core/rmt.h), for the
 * "rados" coordination member (coord/rados.c; docs/multinode.md, "rados"):
 *
 *   storage     object "rmt.log" of the store's coordination namespace, read and written at
 *               offsets (rados_read, write operations); a single-object write operation is
 *               atomic and RADOS is strongly consistent: a read after a write's
 *               acknowledgement sees it from every client, with no client cache to drop;
 *   journal lock  the cls_lock exclusive lock "journal" on the separate object "rmt.lock"
 *               (a lock operation changes the version of the object it is on), leased and
 *               renewed (coord/rados_lease.h); a dead holder's is taken over one lease later;
 *   fencing     the new holder's first act is a write that changes the journal object's
 *               version (xattr "pario.holder" = its cookie); every append and header write of
 *               the holder asserts the version its own last write left
 *               (rados_write_op_assert_version): a holder whose lease expired and was taken
 *               over fails (-ERANGE) instead of writing between the new holder's reads and
 *               writes;
 *   publish     the header's end and seq written after the records (one write operation);
 *   follow      the header read again on every follow (one round trip; no watch yet);
 *   durable     an acknowledged write is on every replica of the object: sync does nothing;
 *   checkpoint  the rewritten journal is made as "rmt.log.new" and copied over "rmt.log" with
 *               one write_full (atomic), then removed.
 * The path given to open is "rados:POOL/NAMESPACE/OBJECT"; only the object name is used. */
#ifndef PARIO_STORE_COORD_JOURNAL_RADOS_H
#define PARIO_STORE_COORD_JOURNAL_RADOS_H

#include "core/rmt.h"
#include "store/coord/rados_lease.h"

typedef struct {
    rmt_journal_ops ops;       /* first: a journal's lg->ops points here */
    rd_handle io;              /* the journal's own I/O context (its last version is this journal's) */
    pxs_lease *lease;          /* the journal lock's set */
} pxs_rjournal;

/* the storage of one coordination instance over io, its lock in lease */
void pxs_rjournal_init(pxs_rjournal *j, rd_handle io, pxs_lease *lease);

#endif
