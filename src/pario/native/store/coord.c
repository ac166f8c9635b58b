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
