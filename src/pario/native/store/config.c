/* pario serve: a store's configuration, DIR/store.json (pario.store.root.init_store writes
 * it; docs/store.md, "Directory layout").
 *
 * What every store has is read here: the format version, the id, the profile's servers (their
 * names, "count" expanded, and the α, β of the hybrid routing cost), the coordination member
 * ("coord", store/coord.h).  What only its data plane knows -- the plane is "backend"
 * (default "local"), found in the planes' registry (planes/plane.h, pxs_plane_find) -- is
 * read by the plane's configure: every server's place (a directory, a pool) and the plane's
 * own entries (the rados plane's cluster and object size).  Every error is one line naming
 * the file. */
#define _GNU_SOURCE
#include "store/meta.h"

#include "store/json.h"
#include "store/planes/plane.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double num_or(const pxs_json *tab, const char *key, double dflt, int *bad)
{
    const pxs_json *v = pxs_json_get(tab, key);
    if (!v || v->type == PXS_JNULL)
        return dflt;
    if (v->type != PXS_JNUM || !(v->d >= 0) || v->d > 1e6) {
        *bad = 1;
        return dflt;
    }
    return v->d;
}

static int add_server(pxs_config *cfg, int *cap, const char *name, double alpha, double beta)
{
    if (cfg->nservers == *cap) {
        int nc = *cap ? *cap * 2 : 16;
        pxs_server *s = realloc(cfg->servers, (size_t)nc * sizeof *s);
        if (!s)
            return PXS_ENOMEM;
        cfg->servers = s;
        *cap = nc;
    }
    pxs_server *s = &cfg->servers[cfg->nservers];
    memset(s, 0, sizeof *s);
    s->name = strdup(name);
    if (!s->name)
        return PXS_ENOMEM;
    s->alpha = alpha;
    s->beta = beta;
    cfg->nservers++;
    return PXS_OK;
}

int pxs_config_server(const pxs_config *cfg, const char *name)
{
    for (int i = 0; i < cfg->nservers; i++)
        if (strcmp(cfg->servers[i].name, name) == 0)
            return i;
    return -1;
}

void pxs_config_free(pxs_config *cfg)
{
    for (int i = 0; i < cfg->nservers; i++) {
        free(cfg->servers[i].name);
        free(cfg->servers[i].place);
    }
    if (cfg->plane_free)
        cfg->plane_free(cfg->plane_cfg);
    free(cfg->servers);
    free(cfg->root);
    free(cfg->id);
    free(cfg->system);
    free(cfg->plane);
    free(cfg->coord);
    memset(cfg, 0, sizeof *cfg);
}

/* store.json parsed (*j) from its text (*text); PXS_OK or an error with its message */
static int config_json(const char *root, const char *path, char **text, pxs_json **j, char *err, size_t errlen)
{
    size_t len = 0;
    *text = pxs_read_text(path, &len, 64u << 20);
    if (!*text) {
        if (errno == ENOENT) {
            snprintf(err, errlen, "%s is not a pario store (no store.json; create one with 'pario store init')", root);
            return PXS_ENOENT;
        }
        snprintf(err, errlen, "%s: unreadable store configuration (%s)", path, strerror(errno));
        return PXS_EIO;
    }
    char jerr[160];
    int jr = pxs_json_parse(*text, len, j, jerr, sizeof jerr);
    if (jr) {
        snprintf(err, errlen, "%s: unreadable store configuration (%s)", path, jerr);
        return jr == -2 ? PXS_ENOMEM : PXS_EINVAL;
    }
    const pxs_json *ver = pxs_json_get(*j, "pario_store");
    if ((*j)->type != PXS_JOBJ || !ver || ver->type != PXS_JNUM || !ver->is_int || ver->i != 1) {
        snprintf(err, errlen, "%s: not a pario store configuration", path);
        return PXS_EINVAL;
    }
    return PXS_OK;
}

/* "backend" (the data plane, from the registry) and "coord" (docs/store.md, "Coordination":
 * absent = "host") */
static int config_kind(const pxs_json *j, pxs_config *cfg, const pxs_dfops **plane, const char *path, char *err,
                       size_t errlen)
{
    const pxs_json *be = pxs_json_get(j, "backend");
    *plane = pxs_plane_find(be ? (be->type == PXS_JSTR && strlen(be->s) == be->slen ? be->s : "") : "local");
    if (!*plane) {
        snprintf(err, errlen, "store backend %s is not available", be->type == PXS_JSTR ? be->s : "(not a string)");
        return PXS_ENOSYS;
    }
    const pxs_json *co = pxs_json_get(j, "coord");
    if (co && (co->type != PXS_JSTR || strlen(co->s) != co->slen)) {
        snprintf(err, errlen, "%s: \"coord\" must be the name of a coordination member", path);
        return PXS_EINVAL;
    }
    cfg->plane = strdup((*plane)->kind);
    cfg->coord = strdup(co && co->slen ? co->s : "host");
    return cfg->plane && cfg->coord ? PXS_OK : PXS_ENOMEM;
}

/* the profile's servers (srv: "profile" "server"), "count" expanded */
static int config_servers(const pxs_json *srv, pxs_config *cfg, const char *path, char *err, size_t errlen)
{
    int cap = 0, rc;
    for (size_t i = 0; i < srv->n; i++) {
        const pxs_json *t = srv->v[i];
        const pxs_json *nm = pxs_json_get(t, "name");
        if (t->type != PXS_JOBJ || !nm || nm->type != PXS_JSTR || nm->slen == 0 || strlen(nm->s) != nm->slen) {
            snprintf(err, errlen, "%s: profile server #%zu has no name", path, i + 1);
            return PXS_EINVAL;
        }
        int bad = 0;
        double alpha = num_or(t, "alpha", -1, &bad), beta = num_or(t, "beta", -1, &bad);
        double ar = num_or(t, "alpha_read_rand", alpha, &bad), br = num_or(t, "beta_read", beta, &bad);
        const pxs_json *cnt = pxs_json_get(t, "count");
        int64_t count = 1;
        if (cnt && cnt->type == PXS_JNUM && cnt->is_int)
            count = cnt->i;
        else if (cnt)
            bad = 1;
        if (bad || alpha < 0 || beta < 0 || count < 1 || count > 65536 - cfg->nservers) {
            snprintf(err, errlen, "%s: profile server %s: bad alpha, beta or count", path, nm->s);
            return PXS_EINVAL;
        }
        for (int64_t k = 0; k < count; k++) {
            char name[512];
            if (count == 1)
                snprintf(name, sizeof name, "%s", nm->s);
            else
                snprintf(name, sizeof name, "%s%lld", nm->s, (long long)k);
            if (pxs_config_server(cfg, name) >= 0) {
                snprintf(err, errlen, "%s: duplicate server name '%s'", path, name);
                return PXS_EINVAL;
            }
            if ((rc = add_server(cfg, &cap, name, ar, br)) != PXS_OK)
                return rc;
        }
    }
    return PXS_OK;
}

/* what store.json says once its text is a store configuration */
static int config_parse(const pxs_json *j, pxs_config *cfg, const char *root, const char *path, char *err,
                        size_t errlen)
{
    const pxs_dfops *plane;
    int rc = config_kind(j, cfg, &plane, path, err, errlen);
    if (rc)
        return rc;
    const pxs_json *prof = pxs_json_get(j, "profile");
    const pxs_json *srv = prof ? pxs_json_get(prof, "server") : NULL;
    if (!srv || srv->type != PXS_JARR || srv->n == 0)
        return plane->configure(NULL, cfg, path, err, errlen);     /* the plane's message */
    cfg->root = strdup(root);
    const pxs_json *id = pxs_json_get(j, "id");
    cfg->id = strdup(id && id->type == PXS_JSTR ? id->s : "");
    const pxs_json *sys = pxs_json_get(j, "system");
    cfg->system = strdup(sys && sys->type == PXS_JSTR ? sys->s : "");
    if (!cfg->root || !cfg->id || !cfg->system)
        return PXS_ENOMEM;
    if ((rc = config_servers(srv, cfg, path, err, errlen)))
        return rc;
    return plane->configure(j, cfg, path, err, errlen);
}

int pxs_config_read(const char *root, pxs_config *cfg, char *err, size_t errlen)
{
    memset(cfg, 0, sizeof *cfg);
    char *path = pxs_join(root, "store.json");
    if (!path)
        return PXS_ENOMEM;
    pxs_json *j = NULL;
    char *text = NULL;
    int rc = config_json(root, path, &text, &j, err, errlen);
    if (!rc)
        rc = config_parse(j, cfg, root, path, err, errlen);
    if (rc)
        pxs_config_free(cfg);
    pxs_json_free(j);
    free(text);
    free(path);
    return rc;
}
