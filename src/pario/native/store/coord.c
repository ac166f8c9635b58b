/* pario store: the registry of coordination members (store/coord.h; docs/store.md,
 * "Coordination"): a member by its store.json "coord" name, and opening one. */
#include "store/coord.h"

#include <stdio.h>
#include <string.h>

static const pxs_coord_ops *const members[] = {&pxs_coord_host, &pxs_coord_pfs, &pxs_coord_rados};

const pxs_coord_ops *pxs_coord_member(const char *name)
{
    if (!name || !name[0])
        name = "host";
    for (size_t i = 0; i < sizeof members / sizeof members[0]; i++)
        if (strcmp(members[i]->name, name) == 0)
            return members[i];
    return NULL;
}

const pxs_coord_ops *pxs_coord_nth(size_t i)
{
    return i < sizeof members / sizeof members[0] ? members[i] : NULL;
}

int pxs_coord_open(const char *name, const char *root, double timeout, pxs_coord **out, char *err, size_t errlen)
{
    *out = NULL;
    const pxs_coord_ops *ops = pxs_coord_member(name);
    if (!ops) {
        char known[256] = "";
        for (size_t i = 0; i < sizeof members / sizeof members[0]; i++)
            snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "", members[i]->name);
        snprintf(err, errlen, "store %s: coordination '%s' is not available (members: %s)", root, name, known);
        return PXS_ENOSYS;
    }
    return ops->open(root, timeout, out, err, errlen);
}

void pxs_coord_close(pxs_coord *co)
{
    if (co)
        co->ops->close(co);
}

void pxs_coord_remote_message(const pxs_coord *co, const char *root, char *err, size_t errlen)
{
    snprintf(err, errlen, "store %s is open on another machine, %s: its coordination '%s' serves the processes of "
             "one machine (a store for several nodes is made with 'pario store init --coord pfs'; docs/multinode.md)",
             root, co->remote[0] ? co->remote : "?", co->ops->name);
}

/* ------------------------------------------------------------------ the journal over core/rmt.c
 * Every member keeps its journal as an rmt_core over its own storage (rmt_journal_ops): from the
 * open on, locking, publishing, following, syncing, compacting and the clean mark are the
 * core's, the same for all (coord.h: PXS_COORD_CORE_JOURNAL). */
void pxs_coord_core_close(pxs_coord *co, rmt_core *c)
{
    (void)co;
    rmt_close(c);
}

int pxs_coord_core_lock(pxs_coord *co, rmt_core *c, double timeout)
{
    (void)co;
    return rmt_begin(c, timeout);
}

int pxs_coord_core_publish(pxs_coord *co, rmt_core *c)
{
    (void)co;
    return rmt_commit(c);
}

int pxs_coord_core_follow(pxs_coord *co, rmt_core *c)
{
    (void)co;
    return rmt_catch_up(c);
}

int pxs_coord_core_sync(pxs_coord *co, rmt_core *c)
{
    (void)co;
    return rmt_sync(c);
}

int pxs_coord_core_checkpoint(pxs_coord *co, rmt_core *c)
{
    (void)co;
    return rmt_checkpoint(c);
}

int pxs_coord_core_set_clean(pxs_coord *co, rmt_core *c, int clean)
{
    (void)co;
    return rmt_set_clean(c, clean);
}
