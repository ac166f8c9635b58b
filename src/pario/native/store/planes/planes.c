/* pario serve: the registry of the data planes (planes/plane.h; as IOR's aiori.c keeps its
 * table of backends): store.json "backend" names one of them. */
#include "store/planes/plane.h"

#include <stdio.h>
#include <string.h>

static const pxs_dfops *const planes[] = { &pxs_df_local, &pxs_df_rados };

const pxs_dfops *pxs_plane_find(const char *name)
{
    for (size_t i = 0; name && i < sizeof planes / sizeof planes[0]; i++)
        if (strcmp(planes[i]->kind, name) == 0)
            return planes[i];
    return NULL;
}

int pxs_dplane_open(const pxs_config *cfg, int cache, pxs_dplane **out, char *err, size_t errlen)
{
    const pxs_dfops *ops = pxs_plane_find(cfg->plane);
    if (!ops) {
        *out = NULL;
        snprintf(err, errlen, "store backend %s is not available", cfg->plane ? cfg->plane : "(none)");
        return PXS_ENOSYS;
    }
    return ops->open_plane(cfg, cache, out, err, errlen);
}

void pxs_dplane_close(pxs_dplane *dp)
{
    if (dp)
        dp->ops->close_plane(dp);
}
