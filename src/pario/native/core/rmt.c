/* The RMT of a store, as one process uses it: the journal (rmt_log.c) plus the in-memory
 * index that follows it (rmt_index.c), transactions, and the store's range locks.
 *
 * Seed 000 (CEDA §5.1) writes RMT updates synchronously so they survive power failures.
 * Here a change is a journal record, appended to the shared mapping before the bytes it
 * describes are written (so it survives the process being killed at any point), and made
 * durable with the data at every sync point (fsync, close, flush): a write that was
 * acknowledged as durable has its record on disk, and a record that makes a copy readable
 * (-> CLEAN) is only appended after that copy's bytes were fsync'ed.  docs/store.md has
 * the whole argument.
 */
#define _GNU_SOURCE
#include "core/rmt_private.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void rmt_boot_id(char *out, size_t n)
{
    const char *env = getenv("PARIO_BOOT_ID");   /* tests: pretend the machine rebooted */
    memset(out, 0, n);
    if (env && *env) {
        strncpy(out, env, n - 1);
        return;
    }
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (!f)
        return;
    if (fgets(out, (int)n, f)) {
        char *nl = strchr(out, '\n');
        if (nl)
            *nl = 0;
    }
    fclose(f);
}

static int journal_lock(rmt_core *c, double timeout)
{
    int dead = 0;
    int rc = c->log.ops->lock(&c->log, timeout, &dead);
    if (!rc && dead)
        c->dead_holders++;
    return rc;
}

int rmt_open(rmt_core *c, const rmt_journal_ops *storage, const char *path, const char *sync_path, int shared, int first,
             double timeout)
{
    memset(c, 0, sizeof *c);
    c->sync_fd = -1;
    c->shared = shared;
    c->follow = 1;
    c->timeout = timeout;
    c->path = strdup(path);
    if (!c->path)
        return RMT_ENOMEM;
    rmt_index_init(&c->ix);
    rmt_boot_id(c->boot_id, sizeof c->boot_id);
    int rc = rmt_log_open(&c->log, storage, path, first ? RMT_OPEN_CREATE : RMT_OPEN_EXISTING);
    if (rc)
        goto fail;
    if (sync_path) {
        c->sync_fd = open(sync_path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (c->sync_fd < 0) {
            rc = RMT_EIO;
            goto fail;
        }
    }
    if (first) {
        rmt_hdr *h = c->log.hdr;
        c->prev_clean = h->clean == 1;
        c->prev_other_boot = h->boot_id[0] && strncmp(h->boot_id, c->boot_id, sizeof h->boot_id) != 0;
        /* the power-loss decision, made before anything rewrites the header (docs/store.md,
         * "Durability"): an unclean end in another boot, or a verification still pending */
        c->verify = h->verify == 1 || (c->prev_other_boot && !c->prev_clean);
        rc = rmt_log_replay(&c->log, &c->ix, 0, &c->skipped);
        if (!rc)
            rc = c->log.ops->lock_init(&c->log);
        if (!rc)
            rc = rmt_log_repair(&c->log, c->boot_id, c->verify);
    } else {
        uint64_t end = c->log.ops->published(&c->log);
        c->verify = __atomic_load_n(&c->log.hdr->verify, __ATOMIC_ACQUIRE) == 1;
        rc = rmt_log_replay(&c->log, &c->ix, end, &c->skipped);
    }
    if (rc)
        goto fail;
    return RMT_OK;
fail: {
        int e = errno;
        rmt_close(c);
        errno = e;
        return rc;
    }
}

void rmt_close(rmt_core *c)
{
    rmt_log_close(&c->log);
    rmt_index_free(&c->ix);
    if (c->sync_fd >= 0)
        close(c->sync_fd);
    c->sync_fd = -1;
    free(c->path);
    c->path = NULL;
}

/* apply what other processes published since we last looked */
int rmt_catch_up(rmt_core *c)
{
    if (c->broken)
        return RMT_EINVAL;
    uint64_t end = c->log.ops->published(&c->log);
    if (end == c->log.end)
        return RMT_OK;
    if (end < c->log.end)
        return RMT_ECORRUPT;   /* rewritten under us: only an exclusive opener rewrites it */
    c->followed++;
    return rmt_log_replay(&c->log, &c->ix, end, &c->skipped);
}

/* start a transaction: the journal lock (shared stores), then everything published so far.
 * timeout 0: do not wait (RMT_ETIMEDOUT when another process holds the lock). */
int rmt_begin(rmt_core *c, double timeout)
{
    if (c->broken)
        return RMT_EINVAL;
    if (c->depth++ > 0)
        return RMT_OK;
    if (c->shared) {
        int rc = journal_lock(c, timeout);
        if (rc) {
            c->depth--;
            return rc;
        }
    }
    int rc = rmt_catch_up(c);
    if (rc) {
        c->depth--;
        if (c->shared)
            c->log.ops->unlock(&c->log);
    }
    return rc;
}

/* end a transaction: publish its records, release the lock */
int rmt_commit(rmt_core *c)
{
    if (c->depth <= 0)
        return RMT_EINVAL;
    if (--c->depth > 0)
        return RMT_OK;
    if (!c->broken)
        rmt_log_publish(&c->log);
    if (c->shared)
        c->log.ops->unlock(&c->log);
    return RMT_OK;
}

static const int NU[REC_NTYPES] = {0, 5, 4, 4, 2, 3, 1, 2, 1};

/* inside a transaction: check the change against the state, append it, apply it */
int rmt_op(rmt_core *c, int type, int a16, const uint64_t *u, const void *bytes, size_t nbytes)
{
    if (c->depth <= 0 || type <= 0 || type >= REC_NTYPES || nbytes > UINT32_MAX)
        return RMT_EINVAL;
    if (c->broken)
        return RMT_EINVAL;
    rmt_rec_head h = {0, 0, 0, (uint16_t)type, (uint16_t)a16, (uint32_t)nbytes};
    int rc = rmt_index_check(&c->ix, &h, u, bytes);
    if (rc)
        return rc;
    if (rmt_index_noop(&c->ix, &h, u))
        return RMT_OK;      /* nothing would change: no record */
    rc = rmt_log_append(&c->log, &h, u, NU[type], bytes, nbytes);
    if (rc)
        return rc;
    rc = rmt_index_apply(&c->ix, &h, u, bytes);
    if (rc)
        c->broken = 1;   /* the journal has it, the index not: this process must reopen */
    return rc;
}

int rmt_route(rmt_core *c, uint64_t o, int64_t x, int64_t e, rmt_seg *segs, int max, int *nseg)
{
    if (c->shared && c->follow) {
        int rc = rmt_catch_up(c);
        if (rc)
            return rc;
    }
    return rmt_index_route(&c->ix, o, x, e, segs, max, nseg);
}

/* A write of [x, e): the segments and the copy each goes to (as a read would be served),
 * with the flag changes recorded first (MARK: the target DIRTY, or for the original,
 * every replica there STALE).  Segments with choice = 1 are not marked: the caller picks
 * a copy and calls MARK itself.  One transaction. */
int rmt_write(rmt_core *c, uint64_t o, int64_t x, int64_t e, rmt_seg *segs, int max, int *nseg, double timeout)
{
    int rc = c->shared ? rmt_catch_up(c) : RMT_OK;
    if (!rc)
        rc = rmt_index_route(&c->ix, o, x, e, segs, max, nseg);
    if (rc || *nseg == 0)
        return rc;
    int need = 0;
    for (int i = 0; i < *nseg; i++)
        need |= segs[i].mark && !segs[i].choice;
    if (!need)
        return RMT_OK;     /* e.g. rewriting a DIRTY extent: no record, no lock */
    rc = rmt_begin(c, timeout);
    if (rc)
        return rc;
    if (c->shared)         /* another process may have changed the state before we got the lock */
        rc = rmt_index_route(&c->ix, o, x, e, segs, max, nseg);
    for (int i = 0; !rc && i < *nseg; i++) {
        if (!segs[i].mark || segs[i].choice)
            continue;
        uint64_t u[4] = {o, segs[i].r, (uint64_t)segs[i].s, (uint64_t)segs[i].t};
        rc = rmt_op(c, REC_MARK, 0, u, NULL, 0);
        if (!rc)
            segs[i].mark = 0;
    }
    int rc2 = rmt_commit(c);
    return rc ? rc : rc2;
}

/* is every entry of every replica of o overlapping [x, e) STALE (or is there none)?  Then no
 * replica holds a readable or newer copy of those bytes: the original alone has them. */
int rmt_all_stale(const rmt_index *ix, uint64_t o, int64_t x, int64_t e)
{
    const rmt_ofile *f = rmt_index_file(ix, o);
    for (int k = 0; f && k < f->nrep; k++) {
        const rmt_rep *p = f->reps[k];
        for (size_t i = rmt_rep_first_after(p, x); i < p->n && p->e[i].off < e; i++)
            if (p->e[i].flag != RMT_STALE)
                return 0;
    }
    return 1;
}

/* A write of [x, e) into partial replica r's own extents (a slot: the bytes a CEDA plan
 * replicates, seed 000 §4.5), where no replica holds a readable copy (rmt_all_stale: after a
 * truncation, past the file's end, or where every copy is STALE).  The caller wrote the bytes
 * to r at the same offsets FIRST (r then holds the only up-to-date copy; a crash before this
 * leaves the original's old bytes in force), and now r's entries there become DIRTY: an ADD
 * of the parts r does not cover, then a MARK of the whole range if r covered part of it.  One
 * transaction, re-checked under the journal lock; returns 1 (nothing recorded) when another
 * process made a copy readable meanwhile: the caller then writes the bytes the usual way. */
int rmt_claim(rmt_core *c, uint64_t o, uint64_t r, int64_t x, int64_t e, double timeout)
{
    if (x < 0 || e <= x)
        return RMT_EINVAL;
    int rc = rmt_begin(c, timeout);
    if (rc)
        return rc;
    const rmt_rep *p = rmt_index_rep(&c->ix, r);
    if (!p || p->o != o || !p->registered || p->mode != RMT_PARTIAL || !rmt_all_stale(&c->ix, o, x, e)) {
        rc = rmt_commit(c);
        return rc ? rc : 1;
    }
    size_t i = rmt_rep_first_after(p, x);
    int some = i < p->n && p->e[i].off < e;
    uint64_t add[5] = {o, r, (uint64_t)x, (uint64_t)x, (uint64_t)(e - x)};
    rc = rmt_op(c, REC_ADD, RMT_DIRTY, add, NULL, 0);
    if (!rc && some) {
        uint64_t mark[4] = {o, r, (uint64_t)x, (uint64_t)e};
        rc = rmt_op(c, REC_MARK, 0, mark, NULL, 0);
    }
    int rc2 = rmt_commit(c);
    return rc ? rc : rc2;
}

int rmt_sync(rmt_core *c)
{
    return rmt_log_sync(&c->log);
}

int rmt_set_clean(rmt_core *c, int clean)
{
    if (clean) {
        int rc = rmt_log_sync(&c->log);
        if (rc)
            return rc;
    }
    c->log.hdr->clean = clean ? 1 : 0;
    int rc = rmt_log_put(&c->log, offsetof(rmt_hdr, clean), 4);
    return rc ? rc : clean ? rmt_log_sync(&c->log) : RMT_OK;
}

/* The first opener verified every CLEAN entry byte for byte, refreshed the FRESH ones and
 * flushed (all of it durable, the journal synced): the store may serve again. */
int rmt_verified(rmt_core *c)
{
    int rc = rmt_log_sync(&c->log);
    if (rc)
        return rc;
    __atomic_store_n(&c->log.hdr->verify, 0u, __ATOMIC_SEQ_CST);
    rc = rmt_log_put(&c->log, offsetof(rmt_hdr, verify), 4);
    if (!rc)
        rc = rmt_log_sync(&c->log);
    if (!rc)
        c->verify = 0;
    return rc;
}

/* Rewrite the journal as the state it describes (one record per replica, job and entry),
 * then continue on the new one.  Only when no other process has the store open. */
int rmt_checkpoint(rmt_core *c)
{
    if (c->depth > 0 || c->broken)
        return RMT_EINVAL;
    size_t n = strlen(c->path);
    char *tmp = malloc(n + 5);
    if (!tmp)
        return RMT_ENOMEM;
    memcpy(tmp, c->path, n);
    memcpy(tmp + n, ".new", 5);
    rmt_log lg;
    int rc = rmt_log_rewrite(&c->log, &c->ix, tmp, &lg);
    if (!rc) {
        rc = lg.ops->replace(&lg, c->path);
        if (rc)
            rmt_log_close(&lg);
    }
    if (rc)
        unlink(tmp);
    free(tmp);
    if (rc)
        return rc;
    rmt_log_close(&c->log);
    c->log = lg;
    return RMT_OK;
}

static void lock_range(uint64_t fid, int64_t x, int64_t e, int64_t *start, int64_t *len)
{
    int64_t b0 = x >> RMT_LOCK_BLOCK, b1 = (e - 1) >> RMT_LOCK_BLOCK;
    *start = (int64_t)(fid << RMT_LOCK_SHIFT) + b0;
    *len = b1 - b0 + 1;
}

/* writers hold [x, e) of file fid shared from their lookup to their last byte; a
 * synchronisation step or the replicator holds its range exclusive (docs/store.md) */
int rmt_range_lock(rmt_core *c, uint64_t fid, int64_t x, int64_t e, int exclusive, double timeout)
{
    if (c->sync_fd < 0)
        return RMT_OK;
    if (x < 0 || e <= x || fid >= ((uint64_t)1 << (62 - RMT_LOCK_SHIFT))
        || ((e - 1) >> RMT_LOCK_BLOCK) >= ((int64_t)1 << RMT_LOCK_SHIFT))
        return RMT_EINVAL;   /* ids below 2^22, offsets below 2^52 */
    int64_t s, n;
    lock_range(fid, x, e, &s, &n);
    return rmt_lock(c->sync_fd, s, n, exclusive, timeout);
}

int rmt_range_unlock(rmt_core *c, uint64_t fid, int64_t x, int64_t e)
{
    if (c->sync_fd < 0)
        return RMT_OK;
    if (x < 0 || e <= x)
        return RMT_EINVAL;
    int64_t s, n;
    lock_range(fid, x, e, &s, &n);
    return rmt_unlock(c->sync_fd, s, n);
}

void rmt_header_state(const rmt_core *c, uint64_t *synced, uint64_t *epoch, int *clean, int *verify)
{
    *synced = c->log.hdr->synced;
    *epoch = c->log.hdr->epoch;
    *clean = (int)c->log.hdr->clean;
    *verify = (int)__atomic_load_n(&c->log.hdr->verify, __ATOMIC_ACQUIRE);
}
