/* pario interpose: the serving module -- planned files served from a pario store inside
 * MPI-IO (docs/serve.md, "The MPI layer"; docs/serve-mpi.md).
 *
 * A module of the core (runtime.h: px_core_register, at constructor priority
 * PX_PRIO_SERVE): its open hook claims the files it serves and gives them the served ops
 * (files.h: px_file_ops, as ROMIO's ADIOI_Fns), its delete hook empties a served name, its
 * finalize hook closes the stores.  Nothing else in interpose/ calls into this file.
 *
 * CEDA keeps its redirector inside MPI-IO so that applications run unchanged (CEDA seed
 * 000 §5.2); HACIO reorders the aggregators' requests inside ROMIO's two-phase I/O (HACIO
 * seed 004 §3.2).  This file is that layer for unmodified programs:
 *
 * Which files.  PARIO_STORE=DIR (or the info hint pario_store) names the store; PARIO_PLAN
 * (pario_plan) the plan; PARIO_SERVE (pario_serve) is "store" (default: files the store
 * holds, and files the plan covers when the program creates them), "all" (every file the
 * program creates goes to the store) or "off"; a file the store does not hold, opened
 * without MPI_MODE_CREATE, is an input outside the store and passes through.
 * The store's file name is the name given to MPI_File_open (without a ROMIO "fs:" prefix),
 * as the trace and the plan name it.  Everything else passes straight through to MPICH.
 * A store that cannot be opened, or a plan made for another system, is one line on
 * stderr and the file passes through: the program still runs correctly.  The ranks agree
 * first (any rank that cannot serve makes every rank pass through), and a refused store
 * stays refused for the job.  Open semantics are MPICH's, errors included: an access mode
 * MPICH refuses passes through (MPICH reports it); a new file's directory must exist
 * (MPI_ERR_NO_SUCH_FILE); the store's create is create-or-open, so ranks or jobs creating
 * one file at once all open it and only MPI_MODE_EXCL fails (MPI_ERR_FILE_EXISTS); a
 * served call's error goes to the file's error handler.
 *
 * The handle.  A served file is opened in the store on every rank (the store in shared
 * mode, store/redirect.h) and, for the handle the program gets, as a *shadow* MPI file
 * DIR/.pario-shadow/<token> (one per collective open, removed at its close; a killed run's
 * are removed by the store's next first opener) that holds no data: MPI keeps its group,
 * info, view, individual file pointer and error handler, so every MPI-IO routine pario does
 * not intercept still works.  Data never goes to the shadow.
 *
 * Data calls.  The MPI-IO layer (mpiio.c) computes where an access begins (explicit offset,
 * the individual pointer, or the shared pointer kept here: srv_shared_pos) and calls the
 * file's data op (srv_data): the
 * access's bytes are mapped through the file view to file extents (flatten.h, MPI-4.1
 * §14.3), the memory datatype packed when it is not contiguous, and the extents read or
 * written through the store (layout, RMT redirection, hybrid routing: store/redirect.h) —
 * independently, or for collective calls by pario's two-phase I/O (collective/twophase.h) with
 * the plan's order (ROMCIO, CACIO, HACIO: seed 004 Algorithm 1), ROMIO's aggregator count
 * and buffer size (the shadow's hints: cb_nodes, cb_buffer_size, romio_cb_read/write).
 * Nonblocking calls are done at once and return a completed generalized request (as
 * ROMIO's own are for local files); split collectives are done at _begin.
 *
 * Sizes, shared pointers, deletion.  MPI_File_get_size/set_size/preallocate/sync act on
 * the store file.  The shared file pointer of an open lives in DIR/.pario-shadow/<token>.shfp
 * (8 bytes, etype units, under an fcntl lock; MPI-4.1 §14.4.4: each collective open has its
 * own, starting at 0).  MPI_File_delete of a served file empties it (size 0,
 * replica entries trimmed) and tombstones it: its name, layout and replicas stay in the
 * store for the program's next create, and until then it is absent as MPICH's deleted file
 * is (an open without MPI_MODE_CREATE passes through and fails, a second delete fails with
 * MPI_ERR_NO_SUCH_FILE, MPI_MODE_EXCL creates it).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mpi.h>

#include "interpose/files.h"
#include "interpose/jsonbuf.h"
#include "store/json.h"
#include "store/layout.h"
#include "store/coord.h"
#include "store/meta.h"
#include "collective/order.h"
#include "store/redirect.h"
#include "interpose/runtime.h"
#include "collective/twophase.h"

static int serving;   /* this process serves (or tried to serve) a file */

#define SHADOW_DIR PXS_SHADOW_DIR
#define MAP_CAP ((int64_t)64 << 20)   /* longest range handed to the layout at once */

/* ------------------------------------------------------------------ one line on stderr */

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    for (char *p = line; *p; p++)
        if (*p == '\n')
            *p = ' ';
    fprintf(stderr, "pario: serve: %s\n", line);
}

/* ------------------------------------------------------------------ stores and plans */

typedef struct srv_store {
    char *root;
    pxs_store *st;         /* NULL: the store was refused, and stays refused for this process */
    char *why;             /* ... why (said once) */
    int told;
    pxs_coord *hold;       /* refused for a pending verification: the store lock held shared
                              (store/coord.h) until the end of the job, so that nobody verifies
                              it under the job */
    int32_t *kinds;        /* per server of the profile: 0 HServer, 1 SServer */
    struct srv_store *next;
} srv_store;

/* The store lock of the store at root held shared through its coordination member, or NULL
 * (another process holds it exclusively; the store's configuration cannot be read). */
static pxs_coord *hold_shared(const char *root)
{
    pxs_config cfg;
    pxs_coord *co = NULL;
    char err[PXS_ERRLEN];
    if (pxs_config_read(root, &cfg, err, sizeof err) != PXS_OK)
        return NULL;
    if (pxs_coord_open(cfg.coord, root, 0, &co, err, sizeof err) == PXS_OK && pxs_coord_try_lock(co, 0) != PXS_OK) {
        pxs_coord_close(co);
        co = NULL;
    }
    pxs_config_free(&cfg);
    return co;
}

typedef struct srv_plan {
    char *path;
    pxs_json *doc;
    char *err;             /* why the plan cannot be used (read once) */
    struct srv_plan *next;
} srv_plan;

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static srv_store *stores;
static int srv_unlink(srv_store *ss, const char *name);
static srv_plan *plans;

/* The kinds of the profile's servers (store.json "profile"."server"[i]."kind"). */
static int32_t *server_kinds(const pxs_store *st)
{
    int n = st->cfg.nservers;
    int32_t *k = calloc((size_t)(n > 0 ? n : 1), sizeof *k);
    if (!k)
        return NULL;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/store.json", st->cfg.root);
    size_t len = 0;
    char *text = pxs_read_text(path, &len, (size_t)16 << 20);
    pxs_json *doc = NULL;
    char err[256];
    if (text && pxs_json_parse(text, len, &doc, err, sizeof err) == 0) {
        const pxs_json *srv = pxs_json_get(pxs_json_get(doc, "profile"), "server");
        for (size_t i = 0; srv && srv->type == PXS_JARR && i < srv->n; i++) {
            const pxs_json *name = pxs_json_get(srv->v[i], "name");
            const pxs_json *kind = pxs_json_get(srv->v[i], "kind");
            int j = name && name->type == PXS_JSTR ? pxs_config_server(&st->cfg, name->s) : -1;
            if (j >= 0 && j < n)
                k[j] = pxs_json_streq(kind, "ssd") ? 1 : 0;
        }
    }
    pxs_json_free(doc);
    free(text);
    return k;
}

/* The store at root, opened (shared) at its first use by this process; NULL only when out
 * of memory.  A store that cannot be opened is remembered as refused (->st NULL, ->why): one
 * decision per store for the whole job, so that no later open of this process serves a file
 * from the store after an earlier one passed it through (its writes would be missed). */
static srv_store *get_store(const char *root)
{
    pthread_mutex_lock(&reg_mu);
    srv_store *s = stores;
    while (s && strcmp(s->root, root) != 0)
        s = s->next;
    if (!s && (s = calloc(1, sizeof *s)) && (s->root = strdup(root))) {
        char err[PXS_ERRLEN] = "";
        pxs_store *st = NULL;
        int flags = PXS_SHARED | PXS_FLUSH_AT_END |
                    (getenv("PARIO_DIRECT") && strcmp(getenv("PARIO_DIRECT"), "1") == 0 ? PXS_DIRECT : 0);
        int rc = pxs_store_open(root, flags, &st, err, sizeof err);
        if (rc == 0 && !(s->kinds = server_kinds(st))) {
            pxs_store_close(st, err, sizeof err);
            snprintf(err, sizeof err, "out of memory");
            rc = PXS_ENOMEM;
        }
        if (rc == 0) {
            s->st = st;
        } else {
            s->why = strdup(err[0] ? err : "the store cannot be opened");
            if (rc == PXS_EVERIFY)
                s->hold = hold_shared(root);
        }
        s->next = stores;
        stores = s;
    } else if (!s || !s->root) {
        free(s);
        s = NULL;
    }
    pthread_mutex_unlock(&reg_mu);
    return s;
}

/* The plan at path (read once); NULL with *why set when it cannot be used for this store. */
static const pxs_json *get_plan(const char *path, const srv_store *ss, const char **why)
{
    pthread_mutex_lock(&reg_mu);
    srv_plan *p = plans;
    while (p && strcmp(p->path, path) != 0)
        p = p->next;
    if (!p && (p = calloc(1, sizeof *p)) && (p->path = strdup(path))) {
        size_t len = 0;
        char err[300], msg[700];
        char *text = pxs_read_text(path, &len, (size_t)1 << 30);
        if (!text)
            snprintf(msg, sizeof msg, "plan %s: %s", path, strerror(errno));
        else if (pxs_json_parse(text, len, &p->doc, err, sizeof err) != 0)
            snprintf(msg, sizeof msg, "plan %s: not JSON (%s)", path, err);
        else if (!pxs_json_get(p->doc, "pario_plan"))
            snprintf(msg, sizeof msg, "plan %s: not a pario plan", path);
        else
            msg[0] = 0;
        free(text);
        if (msg[0]) {
            pxs_json_free(p->doc);
            p->doc = NULL;
            p->err = strdup(msg);
        }
        p->next = plans;
        plans = p;
    }
    pthread_mutex_unlock(&reg_mu);
    static char other[600];
    if (!p) {
        *why = "out of memory reading the plan";
        return NULL;
    }
    if (!p->doc) {
        *why = p->err ? p->err : "the plan cannot be read";
        return NULL;
    }
    const pxs_json *sys = pxs_json_get(p->doc, "system");
    if (sys && sys->type == PXS_JSTR && ss->st->cfg.system && strcmp(sys->s, ss->st->cfg.system) != 0) {
        snprintf(other, sizeof other, "plan %s was made for system %s, the store %s is for %s", path, sys->s,
                 ss->root, ss->st->cfg.system);
        *why = other;
        return NULL;
    }
    *why = NULL;
    return p->doc;
}

/* The plan's layout of a file ("layouts": {name: layout}), NULL if none. */
static const pxs_json *plan_layout(const pxs_json *plan, const char *name)
{
    const pxs_json *lays = plan ? pxs_json_get(plan, "layouts") : NULL;
    const pxs_json *mine = lays ? pxs_json_get(lays, name) : NULL;
    return mine ? mine : lays ? pxs_json_get(lays, "*") : NULL;   /* "*": every file the plan does not name */
}

static int plan_covers(const pxs_json *plan, const char *name)
{
    if (!plan)
        return 0;
    if (plan_layout(plan, name))
        return 1;
    const pxs_json *reps = pxs_json_get(plan, "replicas");
    const pxs_json *mine = reps ? pxs_json_get(reps, name) : NULL;
    return mine && mine->type == PXS_JARR && mine->n > 0;
}

/* An info value (malloc'ed) or NULL. */
static char *hint(MPI_Info info, const char *key)
{
    if (info == MPI_INFO_NULL)
        return NULL;
    int len = 0, flag = 0;
    char small[1];
    if (PMPI_Info_get_string(info, key, &len, small, &flag) != MPI_SUCCESS || !flag || len <= 0)
        return NULL;
    char *v = malloc((size_t)len);
    if (v && (PMPI_Info_get_string(info, key, &len, v, &flag) != MPI_SUCCESS || !flag)) {
        free(v);
        v = NULL;
    }
    return v;
}

/* hint, else environment variable, else NULL (malloc'ed) */
static char *setting(MPI_Info info, const char *key, const char *env)
{
    char *v = hint(info, key);
    if (v)
        return v;
    const char *e = getenv(env);
    return e && *e ? strdup(e) : NULL;
}

/* ------------------------------------------------------------------ JSON text of a layout */

/* A JSON value written back as text (pxs_meta_create stores the layout's JSON). */
static void json_text(const pxs_json *j, px_buf *b)
{
    switch (j->type) {
    case PXS_JNULL: px_buf_puts(b, "null"); break;
    case PXS_JFALSE: px_buf_puts(b, "false"); break;
    case PXS_JTRUE: px_buf_puts(b, "true"); break;
    case PXS_JNUM:
        if (j->is_int)
            px_buf_printf(b, "%lld", (long long)j->i);
        else
            px_buf_printf(b, "%.17g", j->d);
        break;
    case PXS_JSTR: px_buf_json(b, j->s, j->slen); break;
    case PXS_JARR:
    case PXS_JOBJ:
        px_buf_puts(b, j->type == PXS_JARR ? "[" : "{");
        for (size_t i = 0; i < j->n; i++) {
            if (i)
                px_buf_puts(b, ", ");
            if (j->type == PXS_JOBJ) {
                px_buf_json(b, j->k[i], strlen(j->k[i]));
                px_buf_puts(b, ": ");
            }
            json_text(j->v[i], b);
        }
        px_buf_puts(b, j->type == PXS_JARR ? "]" : "}");
        break;
    default: break;
    }
}

/* The layout of a file the program creates: the plan's, else the striping hints
 * (striping_unit over the first striping_factor servers), else 64 KiB over every server
 * (pario.mpi.storeio._layout_for_create).  malloc'ed JSON text. */
static char *create_layout(const pxs_store *st, const pxs_json *planlay, MPI_Info info)
{
    px_buf b = {0};
    if (planlay) {
        json_text(planlay, &b);
    } else {
        long long unit = 64 * 1024, factor = st->cfg.nservers;
        char *v = hint(info, "striping_unit");
        if (v && atoll(v) > 0)
            unit = atoll(v);
        free(v);
        v = hint(info, "striping_factor");
        if (v && atoll(v) > 0 && atoll(v) < factor)
            factor = atoll(v);
        free(v);
        px_buf_puts(&b, "{\"type\": \"striped\", \"servers\": [");
        for (long long i = 0; i < factor; i++) {
            px_buf_puts(&b, i ? ", " : "");
            px_buf_json(&b, st->cfg.servers[i].name, strlen(st->cfg.servers[i].name));
        }
        px_buf_puts(&b, "], \"stripes\": [");
        for (long long i = 0; i < factor; i++)
            px_buf_printf(&b, "%s%lld", i ? ", " : "", unit);
        px_buf_puts(&b, "]}");
    }
    if (b.oom) {
        px_buf_free(&b);
        return NULL;
    }
    return b.p;
}

/* ------------------------------------------------------------------ a served file */

typedef struct srv_file {
    srv_store *ss;
    pxs_file *pf;
    char *name;
    int amode;
    int shfp;              /* the shared pointer's file (-1 when the coordination member keeps it) */
    pxs_coord *co;         /* the member keeping the shared pointer as a counter (coord.h), or NULL */
    uint64_t token;        /* the open's token: its counter's name */
    char *shadow;          /* the open's shadow MPI file (its .shfp beside it): removed at close */
    int order;             /* a row of pario_orders[] (collective/order.h) */
    int64_t cb_buffer;
    int cb_nodes;
    int cb_read, cb_write; /* PARIO_TP_CB_* */
    pario_tp_layout tpl;
    int32_t *tp_servers, *tp_kinds;
    pxs_piece_cursor pieces;   /* the layout callback's pieces of the range it mapped last */
    int64_t split_moved;
    int split_rc;
} srv_file;

static srv_file *srv_of(const px_file *f) { return f->state; }

/* MPICH's checks of an access mode (ROMIO's MPI_File_open): exactly one of RDONLY, RDWR,
 * WRONLY; no CREATE or EXCL with RDONLY; no SEQUENTIAL with RDWR.  A mode that fails them
 * passes through, so that MPICH itself reports it. */
static int amode_ok(int amode)
{
    int n = !!(amode & MPI_MODE_RDONLY) + !!(amode & MPI_MODE_RDWR) + !!(amode & MPI_MODE_WRONLY);
    if (n != 1)
        return 0;
    if ((amode & MPI_MODE_RDONLY) && (amode & (MPI_MODE_CREATE | MPI_MODE_EXCL)))
        return 0;
    return !((amode & MPI_MODE_RDWR) && (amode & MPI_MODE_SEQUENTIAL));
}

/* pario.names.check_name in C: no control character (C0, DEL, the C1 controls U+0080-U+009F,
 * the line and paragraph separators U+2028/U+2029 in UTF-8), at most 4096 bytes.  A name that
 * is not one is never served (every consumer of the store refuses it). */
static int name_ok(const char *name)
{
    const unsigned char *p = (const unsigned char *)name;
    size_t n = strlen(name);
    if (n == 0 || n > 4096)
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < 0x20 || p[i] == 0x7f)
            return 0;
        if (p[i] == 0xc2 && i + 1 < n && p[i + 1] >= 0x80 && p[i + 1] <= 0x9f)
            return 0;
        if (p[i] == 0xe2 && i + 2 < n && p[i + 1] == 0x80 && (p[i + 2] == 0xa8 || p[i + 2] == 0xa9))
            return 0;
    }
    return 1;
}

/* Where MPICH would fail to create `name` because of its directory (ROMIO's error classes
 * for ENOENT, ENOTDIR, EACCES): MPI_SUCCESS when the directory is there. */
static int create_dir_error(const char *name)
{
    char dir[PATH_MAX];
    const char *slash = strrchr(name, '/');
    if (!slash)
        return MPI_SUCCESS;                  /* the working directory */
    size_t n = (size_t)(slash - name);
    if (n >= sizeof dir)
        return MPI_ERR_BAD_FILE;
    memcpy(dir, name, n);
    dir[n] = 0;
    if (n == 0)
        strcpy(dir, "/");
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return errno == ENOENT ? MPI_ERR_NO_SUCH_FILE : errno == EACCES ? MPI_ERR_ACCESS : MPI_ERR_BAD_FILE;
    if (!S_ISDIR(sb.st_mode))
        return MPI_ERR_BAD_FILE;
    return access(dir, W_OK | X_OK) == 0 ? MPI_SUCCESS : MPI_ERR_ACCESS;
}

/* a random token for a new open (the pid and the clock if the kernel has no randomness) */
static void new_token(uint64_t *token, int tries)
{
    if (getrandom(token, sizeof *token, 0) != (ssize_t)sizeof *token)
        *token = ((uint64_t)getpid() << 32) ^ (uint64_t)time(NULL) ^ ((uint64_t)tries << 56);
}

/* the member when it keeps the shared pointers as counters (coord.h), else NULL: the pointer
 * is a file beside the open's shadow */
static pxs_coord *counters_of(pxs_coord *co)
{
    return co->ops->counter_make ? co : NULL;
}

/* A new open's shadow files, DIR/.pario-shadow/<token> (the MPI file) and <token>.shfp (its
 * shared file pointer, 0): one pair per collective open, removed at its close (MPI-4.1
 * §14.4.4: every collective open has a shared pointer of its own, starting at 0).  The
 * directory must be a real one (never a link someone planted), the pointer's file new. */
static int make_shadow(const char *root, uint64_t *token, char *err, size_t errlen)
{
    char dir[PATH_MAX], shfp[PATH_MAX + 40];
    snprintf(dir, sizeof dir, "%s/" SHADOW_DIR, root);
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "cannot make %.300s: %s", dir, strerror(errno));
        return -1;
    }
    struct stat sb;
    if (lstat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        snprintf(err, errlen, "%.300s is not a directory (a link?): pario does not follow it", dir);
        return -1;
    }
    for (int tries = 0; tries < 8; tries++) {
        new_token(token, tries);
        snprintf(shfp, sizeof shfp, "%s/%016llx.shfp", dir, (unsigned long long)*token);
        int fd = open(shfp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0) {
            int64_t zero = 0;
            int ok = pwrite(fd, &zero, sizeof zero, 0) == (ssize_t)sizeof zero;
            close(fd);
            if (ok)
                return 0;
            snprintf(err, errlen, "cannot write %.300s: %s", shfp, strerror(errno));
            unlink(shfp);
            return -1;
        }
        if (errno != EEXIST) {
            snprintf(err, errlen, "cannot make %.300s: %s", shfp, strerror(errno));
            return -1;
        }
    }
    snprintf(err, errlen, "cannot make a shared file pointer in %.300s", dir);
    return -1;
}

/* A new open's shared pointer kept by the coordination member (coord.h's counters: the store's
 * coordination in RADOS), so that the nodes need no directory they share: a random token
 * whose counter is new, at 0 */
static int make_counter(pxs_coord *co, uint64_t *token, char *err, size_t errlen)
{
    for (int tries = 0; tries < 8; tries++) {
        new_token(token, tries);
        int rc = co->ops->counter_make(co, *token);
        if (rc == PXS_OK)
            return 0;
        if (rc != PXS_EEXIST) {
            snprintf(err, errlen, "cannot make a shared file pointer in the store's coordination (%s)", co->ops->name);
            return -1;
        }
    }
    snprintf(err, errlen, "cannot make a shared file pointer in the store's coordination (%s)", co->ops->name);
    return -1;
}

/* The open's shadow MPI file on this node, made by each rank before MPICH opens it when the
 * member keeps the shared pointer: the store's directory may be one per node (a store
 * coordinated in RADOS needs only its store.json there), and ROMIO creates the file on one
 * rank only.  The directory must be a real one, the file is never a link. */
static int local_shadow(const char *root, const char *shadow)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/" SHADOW_DIR, root);
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return -1;
    struct stat sb;
    if (lstat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return -1;
    int fd = open(shadow, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    close(fd);
    return 0;
}

static void shadow_paths(const char *root, uint64_t token, char *mpi, char *shfp, size_t n)
{
    snprintf(mpi, n, "%s/" SHADOW_DIR "/%016llx", root, (unsigned long long)token);
    snprintf(shfp, n, "%s/" SHADOW_DIR "/%016llx.shfp", root, (unsigned long long)token);
}

/* an open's shared pointer removed: the member's counter, or the file */
static void drop_shfp(pxs_coord *co, uint64_t token, const char *shfp)
{
    if (counters_of(co))
        co->ops->counter_drop(co, token);
    else
        unlink(shfp);
}

/* Rank 0's decision for an open (rank 0 of the file's communicator; with MPI_COMM_SELF
 * every process is its own rank 0): served?, its error, and the open's shadow token.  The
 * store's create is create-or-open: a file another process created at the same moment is
 * opened (MPI: only MPI_MODE_EXCL may fail with MPI_ERR_FILE_EXISTS). */
static void decide(srv_store *ss, const pxs_json *plan, int all, const char *name, int amode, MPI_Info info,
                   const char *root, int64_t dec[3])
{
    char err[PXS_ERRLEN] = "";
    pxs_meta_rec rec;
    memset(&rec, 0, sizeof rec);
    int found = pxs_meta_get(&ss->st->meta, name, &rec, err, sizeof err);
    int64_t id = rec.id;
    pxs_meta_rec_free(&rec);
    int gone = found > 0 ? pxs_meta_tombstoned(&ss->st->meta, id, err, sizeof err) : 0;
    if (found < 0 || gone < 0) {
        say("%s: %s", name, err);
        dec[1] = MPI_ERR_IO;
        return;
    }
    /* a file the store does not hold is created there when the program creates it and the
     * plan covers it (or every file is served); opened without MPI_MODE_CREATE it is an input
     * outside the store: it passes through.  A file the program deleted (a tombstone) is
     * served only to a create, as a new file is: without MPI_MODE_CREATE it passes through
     * (MPICH finds no file there) */
    dec[0] = (found && (!gone || (amode & MPI_MODE_CREATE)))
             || ((plan_covers(plan, name) || all) && (amode & MPI_MODE_CREATE));
    if (!dec[0])
        return;
    int created = 0;        /* a deleted file created again by this open */
    if (gone) {             /* its directory must be there, as for a new file */
        int drc = create_dir_error(name);
        if (drc != MPI_SUCCESS) {
            dec[1] = drc;
            return;
        }
        int cleared = pxs_meta_tombstone(&ss->st->meta, id, 0, err, sizeof err);
        if (cleared < 0) {
            say("cannot create %s in the store %s: %s", name, root, err);
            dec[1] = MPI_ERR_IO;
            return;
        }
        created = cleared;  /* this open created it: MPI_MODE_EXCL succeeds, a racing one's fails */
    }
    if (!found) {
        int drc = create_dir_error(name);        /* MPICH fails there: so does the served open */
        if (drc != MPI_SUCCESS) {
            dec[1] = drc;
            return;
        }
        char *lay = create_layout(ss->st, plan_layout(plan, name), info);
        int64_t id = 0;
        int crc = lay ? pxs_meta_create(&ss->st->meta, name, lay, &id, err, sizeof err) : PXS_ENOMEM;
        free(lay);
        if (crc == PXS_EEXIST)
            found = 1;                           /* another process created it just now */
        else if (crc != PXS_OK) {
            say("cannot create %s in the store %s: %s", name, root, crc == PXS_ENOMEM ? "out of memory" : err);
            dec[1] = MPI_ERR_IO;
            return;
        }
    }
    if (found && !created && (amode & MPI_MODE_EXCL)) {
        dec[1] = MPI_ERR_FILE_EXISTS;
        return;
    }
    uint64_t token = 0;
    pxs_coord *co = counters_of(ss->st->co);
    if (co ? make_counter(co, &token, err, sizeof err) : make_shadow(root, &token, err, sizeof err)) {
        say("%s: %s", name, err);
        dec[1] = MPI_ERR_IO;
        return;
    }
    dec[2] = (int64_t)token;
}

static int srv_open(MPI_Comm comm, const char *filename, int amode, MPI_Info info, MPI_File *fh, srv_file **out)
{
    *out = NULL;
    char *root = setting(info, "pario_store", "PARIO_STORE");
    if (!root)
        return MPI_SUCCESS;
    char *mode = setting(info, "pario_serve", "PARIO_SERVE");
    if (mode && !strcmp(mode, "off")) {
        free(root);
        free(mode);
        return MPI_SUCCESS;
    }
    int all = mode && !strcmp(mode, "all");
    free(mode);
    char *planpath = setting(info, "pario_plan", "PARIO_PLAN");
    char *order_s = setting(info, "pario_order", "PARIO_ORDER");
    const char *name = px_fs_path(filename);
    serving = 1;
    px_core_keep_files = 1;
    int me = 0;
    PMPI_Comm_rank(comm, &me);

    srv_store *ss = get_store(root);
    const pxs_json *plan = NULL;
    const char *why = !ss ? "out of memory" : !ss->st ? ss->why : NULL;
    if (!why && planpath)
        plan = get_plan(planpath, ss, &why);
    if (!why && !name_ok(name))
        why = "the file name is empty, longer than 4096 bytes or has a control character: pario does not store it";
    int ok = why == NULL && amode_ok(amode);
    int rc = MPI_SUCCESS;

    /* one decision for every rank: if any rank cannot serve (its store refused, the plan
     * unusable, an access mode MPICH refuses), every rank passes the file through, and the
     * lowest rank with a reason says it (a refused store once per process: it stays refused
     * for the job; a bad access mode is MPICH's to report) */
    int bad = ok ? INT_MAX : me, first_bad = INT_MAX;
    if (PMPI_Allreduce(&bad, &first_bad, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS)
        first_bad = -1;
    if (first_bad != INT_MAX) {
        if (me == first_bad && why && !(ss && !ss->st && ss->told))
            say("%s; %s passes through to MPI-IO", why, name);
        if (me == first_bad && why && ss && !ss->st)
            ss->told = 1;
        goto done;
    }

    /* rank 0 decides, creates the file and the open's shadow files; one broadcast */
    int64_t dec[3] = {0, MPI_SUCCESS, 0};
    pxs_file *pf = NULL;
    int opened = 0;
    if (me == 0) {
        decide(ss, plan, all, name, amode, info, root, dec);
        /* rank 0 opens it first with every data file, so that the others open existing ones
         * (pxs_open_all: a create racing other nodes' writes stalls them) */
        if (dec[0] && dec[1] == MPI_SUCCESS)
            opened = pxs_open(ss->st, name, &pf) == 0 && pxs_open_all(pf) == 0;
    }
    PMPI_Bcast(dec, 3, MPI_INT64_T, 0, comm);
    if (!dec[0] || dec[1] != MPI_SUCCESS) {
        rc = (int)dec[1];
        goto done;
    }
    char shadow[PATH_MAX + 64], shfp[PATH_MAX + 64];
    shadow_paths(root, (uint64_t)dec[2], shadow, shfp, sizeof shadow);

    /* every rank opens the store file (rank 0 has), then the shadow */
    srv_file *s = calloc(1, sizeof *s);
    if (me != 0)
        opened = pxs_open(ss->st, name, &pf) == 0;
    opened = opened && s;
    int allopen = 0;
    PMPI_Allreduce(&opened, &allopen, 1, MPI_INT, MPI_MIN, comm);
    if (!allopen) {
        if (!opened)
            say("cannot open %s in the store %s: %s", name, root, s ? pxs_store_error(ss->st) : "out of memory");
        if (pf)
            pxs_close(pf);
        free(s);
        rc = MPI_ERR_IO;
        if (me == 0)
            drop_shfp(ss->st->co, (uint64_t)dec[2], shfp);
        goto done;
    }
    pxs_coord *counters = counters_of(ss->st->co);
    int here = !counters || local_shadow(root, shadow) == 0, everywhere = 0;
    PMPI_Allreduce(&here, &everywhere, 1, MPI_INT, MPI_MIN, comm);
    rc = everywhere ? PMPI_File_open(comm, shadow, MPI_MODE_RDWR | MPI_MODE_CREATE, info, fh) : MPI_ERR_IO;
    if (!here)
        say("cannot make %s: %s", shadow, strerror(errno));
    if (rc != MPI_SUCCESS) {
        pxs_close(pf);
        free(s);
        if (me == 0)
            drop_shfp(ss->st->co, (uint64_t)dec[2], shfp);
        if (me == 0 || counters)
            unlink(shadow);
        goto done;
    }
    s->co = counters;
    s->token = (uint64_t)dec[2];
    s->shfp = counters ? -1 : open(shfp, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    s->shadow = strdup(shadow);
    s->ss = ss;
    s->pf = pf;
    s->name = strdup(name);
    s->amode = amode;
    /* the order: the hint, else the plan's collective_order, else ROMCIO (order.h's table) */
    int o = pario_order_find(order_s);
    if (o < 0 && plan) {
        const pxs_json *co = pxs_json_get(plan, "collective_order");
        o = co && co->type == PXS_JSTR ? pario_order_find(co->s) : -1;
    }
    s->order = o < 0 ? PARIO_ORDER_ROMCIO : o;
    if (order_s && pario_order_find(order_s) < 0 && me == 0) {
        char known[256] = "";
        for (int i = 0, at = 0; i < pario_order_count() && at < (int)sizeof known; i++)
            at += snprintf(known + at, sizeof known - (size_t)at, "%s%s", i ? ", " : "", pario_order_name(i));
        say("order %s: not one of %s; %s uses %s", order_s, known, name, pario_order_name(s->order));
    }
    *out = s;
done:
    free(root);
    free(planpath);
    free(order_s);
    return rc;
}

/* ------------------------------------------------------------------ collective parameters */

static int cb_mode(const char *v)
{
    if (!v)
        return PARIO_TP_CB_AUTOMATIC;
    if (!strcmp(v, "enable"))
        return PARIO_TP_CB_ENABLE;
    if (!strcmp(v, "disable"))
        return PARIO_TP_CB_DISABLE;
    return PARIO_TP_CB_AUTOMATIC;
}

/* The layout callback of the two-phase I/O: the first single-server part of a range.  The
 * two-phase code walks a range piece by piece, so the pieces of one mapping (of up to
 * MAP_CAP bytes) answer the calls that follow it. */
static int tp_map(void *ctx, int64_t off, int64_t len, int64_t *piece_len, int32_t *server, int32_t *kind)
{
    srv_file *s = ctx;
    const pxs_piece *p;
    if (pxs_layout_next_piece(s->pf->h->lay, &s->pieces, off, len, MAP_CAP, &p) != PXS_OK)
        return -1;
    *piece_len = p->len;
    *server = p->server;
    *kind = p->server >= 0 && p->server < s->ss->st->cfg.nservers ? s->ss->kinds[p->server] : 0;
    return 0;
}

/* PARIO_SERVE_ORDER_LOG=PREFIX: every access of the two-phase I/O is appended to
 * PREFIX.<world rank> as "cycle n off len off len ..." in the order it is issued (the test of
 * the plan's order: tests/native/test_serve_mpi.py). */
static void log_order(int cycle, int n, const int64_t *off, const int64_t *len)
{
    const char *prefix = getenv("PARIO_SERVE_ORDER_LOG");
    if (!prefix || !*prefix)
        return;
    int me = 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &me);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s.%d", prefix, me);
    FILE *f = fopen(path, "a");
    if (!f)
        return;
    fprintf(f, "%d %d", cycle, n);
    for (int i = 0; i < n; i++)
        fprintf(f, " %lld %lld", (long long)off[i], (long long)len[i]);
    fputc('\n', f);
    fclose(f);
}

static int tp_io(void *ctx, int write, int cycle, int n, const int64_t *off, const int64_t *len, const int64_t *pos,
                 char *buf)
{
    srv_file *s = ctx;
    log_order(cycle, n, off, len);
    int rc = write ? pxs_writev(s->pf, n, off, len, buf, pos) : pxs_readv(s->pf, n, off, len, buf, pos);
    if (rc != 0)
        say("%s: %s", s->name, pxs_store_error(s->ss->st));
    return rc;
}

static void srv_attach(px_file *f)
{
    srv_file *s = srv_of(f);
    s->cb_buffer = (int64_t)16 << 20;
    s->cb_nodes = 0;
    MPI_Info info;
    if (PMPI_File_get_info(f->fh, &info) == MPI_SUCCESS) {
        char *v = hint(info, "cb_buffer_size");
        if (v && atoll(v) > 0)
            s->cb_buffer = atoll(v);
        free(v);
        v = hint(info, "cb_nodes");
        if (v && atoi(v) > 0)
            s->cb_nodes = atoi(v);
        free(v);
        v = hint(info, "romio_cb_read");
        s->cb_read = cb_mode(v);
        free(v);
        v = hint(info, "romio_cb_write");
        s->cb_write = cb_mode(v);
        free(v);
        PMPI_Info_free(&info);
    }
    const pxs_layout *l = s->pf->h->lay;
    s->tp_servers = calloc((size_t)(l->nsrv > 0 ? l->nsrv : 1), sizeof(int32_t));
    s->tp_kinds = calloc((size_t)(l->nsrv > 0 ? l->nsrv : 1), sizeof(int32_t));
    if (s->tp_servers && s->tp_kinds) {
        for (int i = 0; i < l->nsrv; i++) {
            s->tp_servers[i] = l->srv[i];
            s->tp_kinds[i] = l->srv[i] >= 0 && l->srv[i] < s->ss->st->cfg.nservers ? s->ss->kinds[l->srv[i]] : 0;
        }
        s->tpl.nservers = l->nsrv;
    }
    s->tpl.map = tp_map;
    s->tpl.ctx = s;
    s->tpl.servers = s->tp_servers;
    s->tpl.kinds = s->tp_kinds;
}

/* ------------------------------------------------------------------ data */

/* The file extents of one access, with their offsets in the packed data (bo); the few of an
 * access through a simple view (one, for the default view) in the room inside, many on the
 * heap: an independent read or write allocates nothing here. */
#define EXT_INLINE 16

typedef struct {
    int64_t *off, *len, *bo;
    int64_t n, cap;
    int64_t off_in[EXT_INLINE], len_in[EXT_INLINE], bo_in[EXT_INLINE];
} extents;

static void extents_init(extents *e)
{
    e->off = e->off_in;
    e->len = e->len_in;
    e->bo = e->bo_in;
    e->n = 0;
    e->cap = EXT_INLINE;
}

static void extents_free(extents *e)
{
    if (e->off != e->off_in) {
        free(e->off);
        free(e->len);
        free(e->bo);
    }
}

static int add_extent(void *ctx, int64_t off, int64_t len)
{
    extents *e = ctx;
    if (e->n == e->cap) {
        int64_t c = 2 * e->cap;
        int64_t *o = malloc((size_t)c * sizeof *o), *l = malloc((size_t)c * sizeof *l),
                *b = malloc((size_t)c * sizeof *b);
        if (!o || !l || !b) {
            free(o);
            free(l);
            free(b);
            return -1;
        }
        memcpy(o, e->off, (size_t)e->n * sizeof *o);
        memcpy(l, e->len, (size_t)e->n * sizeof *l);
        memcpy(b, e->bo, (size_t)e->n * sizeof *b);
        extents_free(e);
        e->off = o;
        e->len = l;
        e->bo = b;
        e->cap = c;
    }
    e->bo[e->n] = e->n ? e->bo[e->n - 1] + e->len[e->n - 1] : 0;
    e->off[e->n] = off;
    e->len[e->n] = len;
    e->n++;
    return 0;
}

/* The memory datatype is count contiguous bytes at buf (no packing needed). */
static int contiguous(MPI_Datatype dt, int64_t size)
{
    if (dt == MPI_BYTE || dt == MPI_CHAR)
        return 1;
    MPI_Count lb, extent, tlb, textent;
    if (PMPI_Type_get_extent_c(dt, &lb, &extent) != MPI_SUCCESS ||
        PMPI_Type_get_true_extent_c(dt, &tlb, &textent) != MPI_SUCCESS)
        return 0;
    return lb == 0 && tlb == 0 && extent == size && textent == size;
}

static int gq_query(void *extra, MPI_Status *st)
{
    PMPI_Status_set_elements_c(st, MPI_BYTE, (MPI_Count) * (int64_t *)extra);
    PMPI_Status_set_cancelled(st, 0);
    st->MPI_SOURCE = MPI_UNDEFINED;
    st->MPI_TAG = MPI_UNDEFINED;
    return MPI_SUCCESS;
}

static int gq_free(void *extra)
{
    free(extra);
    return MPI_SUCCESS;
}

static int gq_cancel(void *extra, int complete)
{
    (void)extra;
    (void)complete;
    return MPI_SUCCESS;
}

static void set_status(MPI_Status *st, int64_t moved)
{
    if (st == MPI_STATUS_IGNORE)
        return;
    PMPI_Status_set_elements_c(st, MPI_BYTE, (MPI_Count)moved);
    PMPI_Status_set_cancelled(st, 0);
    st->MPI_SOURCE = MPI_UNDEFINED;
    st->MPI_TAG = MPI_UNDEFINED;
}

static int tp_code(int rc)
{
    switch (rc) {
    case PARIO_TP_OK: return MPI_SUCCESS;
    case PARIO_TP_EINVAL: case PARIO_TP_EMISMATCH: return MPI_ERR_ARG;
    case PARIO_TP_ENOMEM: return MPI_ERR_NO_MEM;
    default: return MPI_ERR_IO;
    }
}

static int srv_data(px_file *f, int op, int kind, int coll, int64_t pos, void *buf, int64_t count, MPI_Datatype dt,
                  MPI_Status *status, MPI_Request *req)
{
    srv_file *s = srv_of(f);
    int mode = kind & ~3;
    MPI_Count tsize = 0;
    int64_t nbytes;
    if (count < 0 || PMPI_Type_size_c(dt, &tsize) != MPI_SUCCESS || __builtin_mul_overflow(count, (int64_t)tsize, &nbytes))
        return MPI_ERR_COUNT;
    if (op == 1 && (s->amode & MPI_MODE_RDONLY))
        return MPI_ERR_READ_ONLY;
    if (op == 0 && (s->amode & MPI_MODE_WRONLY))
        return MPI_ERR_ACCESS;
    int rc = MPI_SUCCESS;
    extents e;
    extents_init(&e);
    char *data = buf, *tmp = NULL;
    int64_t moved = 0;
    if (pos < 0) {
        rc = MPI_ERR_ARG;
    } else if (!f->view_ok) {
        if (f->comm_rank == 0)
            say("%s: the file view could not be flattened; the call fails", s->name);
        rc = MPI_ERR_UNSUPPORTED_OPERATION;
    } else if (nbytes > 0 && px_view_map(&f->view, pos, nbytes, add_extent, &e) < 0) {
        rc = MPI_ERR_NO_MEM;
    } else if (nbytes > 0 && !contiguous(dt, (int64_t)tsize)) {
        tmp = malloc((size_t)nbytes);
        MPI_Count where = 0;
        if (!tmp)
            rc = MPI_ERR_NO_MEM;
        else if (op == 1 && PMPI_Pack_c(buf, (MPI_Count)count, dt, tmp, (MPI_Count)nbytes, &where, f->comm) != MPI_SUCCESS)
            rc = MPI_ERR_TYPE;
        data = tmp;
    }
    if (coll) {
        /* every rank takes part, even one whose own call failed (with no extents) */
        pario_tp_params p;
        memset(&p, 0, sizeof p);
        p.order = s->order;
        p.cb_buffer_size = s->cb_buffer;
        p.cb_nodes = s->cb_nodes;
        p.cb_mode = op == 1 ? s->cb_write : s->cb_read;
        p.layout = &s->tpl;
        p.io = tp_io;
        p.io_ctx = s;
        int64_t n = rc == MPI_SUCCESS ? e.n : 0;
        int trc = pario_tp_collective(f->comm, op, n, e.off, e.len, data, &p, &moved);
        if (rc == MPI_SUCCESS && trc != PARIO_TP_OK) {
            if (f->comm_rank == 0)
                say("%s: collective %s failed: %s", s->name, op ? "write" : "read", pario_tp_strerror(trc));
            rc = tp_code(trc);
        }
    } else if (rc == MPI_SUCCESS && e.n > 0) {
        int r = op ? pxs_writev(s->pf, e.n, e.off, e.len, data, e.bo) : pxs_readv(s->pf, e.n, e.off, e.len, data, e.bo);
        if (r != 0) {
            say("%s: %s", s->name, pxs_store_error(s->ss->st));
            rc = MPI_ERR_IO;
        }
    }
    if (rc == MPI_SUCCESS) {
        moved = nbytes;
        if (op == 0 && nbytes > 0) {
            /* a read stops at the end of file: the bytes before it, in data order (the size is
             * asked for, from the metadata and other processes' writes, only when the read
             * reaches past what this process knows) */
            int64_t size = s->pf->h->size, end = 0;
            for (int64_t i = 0; i < e.n; i++)
                if (e.off[i] + e.len[i] > end)
                    end = e.off[i] + e.len[i];
            if (end > size && pxs_size(s->pf, &size) != 0) {
                rc = MPI_ERR_IO;
            } else {
                moved = 0;
                for (int64_t i = 0; i < e.n; i++) {
                    if (e.off[i] + e.len[i] <= size) {
                        moved += e.len[i];
                        continue;
                    }
                    if (e.off[i] < size)
                        moved += size - e.off[i];
                    break;
                }
            }
            if (tmp && rc == MPI_SUCCESS) {
                MPI_Count where = 0;
                if (PMPI_Unpack_c(tmp, (MPI_Count)nbytes, &where, buf, (MPI_Count)count, dt, f->comm) != MPI_SUCCESS)
                    rc = MPI_ERR_TYPE;
            }
        }
    }
    free(tmp);
    extents_free(&e);
    if (rc == MPI_SUCCESS && (kind & 3) == PX_POS_INDIVIDUAL && f->etype_size > 0) {
        /* the individual pointer moves past the data requested (MPI-4.1 §14.4.3) */
        MPI_Offset p = 0;
        if (PMPI_File_get_position(f->fh, &p) == MPI_SUCCESS)
            PMPI_File_seek(f->fh, p + nbytes / f->etype_size, MPI_SEEK_SET);
    }
    if (mode == PX_MODE_SPLIT) {
        s->split_moved = moved;
        s->split_rc = rc;
        return rc;
    }
    if (mode == PX_MODE_NONBLOCKING) {
        if (rc != MPI_SUCCESS || !req)
            return rc;
        int64_t *m = malloc(sizeof *m);
        if (!m)
            return MPI_ERR_NO_MEM;
        *m = moved;
        rc = PMPI_Grequest_start(gq_query, gq_free, gq_cancel, m, req);
        if (rc != MPI_SUCCESS) {
            free(m);
            return rc;
        }
        return PMPI_Grequest_complete(*req);
    }
    if (rc == MPI_SUCCESS)
        set_status(status, moved);
    return rc;
}

static int srv_split_end(px_file *f, MPI_Status *status)
{
    srv_file *s = srv_of(f);
    if (s->split_rc == MPI_SUCCESS)
        set_status(status, s->split_moved);
    return s->split_rc;
}

/* ------------------------------------------------------------------ shared file pointer */

static int shfp_lock(int fd, short type)
{
    struct flock l;
    memset(&l, 0, sizeof l);
    l.l_type = type;
    l.l_whence = SEEK_SET;
    l.l_start = 0;
    l.l_len = 8;
    int rc;
    while ((rc = fcntl(fd, F_OFD_SETLKW, &l)) != 0 && errno == EINTR)
        ;
    return rc;
}

/* the pointer as the file system has it (called with its lock held): the kernel's cached page
 * dropped first, since ranks on other nodes change it (ceph-fuse keeps a kernel page cache
 * its caps do not invalidate: two nodes read the same stale value, their shared-pointer
 * writes overlapped; tests/multinode/test_views.py) */
static int64_t shfp_read(int fd)
{
    int64_t v = 0;
    (void)posix_fadvise(fd, 0, 4096, POSIX_FADV_DONTNEED);
    ssize_t n = pread(fd, &v, sizeof v, 0);
    return n == (ssize_t)sizeof v ? v : n == 0 ? 0 : -1;
}

static int shfp_write(int fd, int64_t v) { return pwrite(fd, &v, sizeof v, 0) == (ssize_t)sizeof v ? 0 : -1; }

/* The shared pointer held (exclusive) with its value: the member's counter, or the file
 * under its fcntl lock; -1 on failure (nothing held) */
static int shfp_hold(srv_file *s, int64_t *v, uint64_t *version)
{
    if (s->co)
        return s->co->ops->counter_lock(s->co, s->token, v, version) == PXS_OK ? 0 : -1;
    *version = 0;
    if (s->shfp < 0 || shfp_lock(s->shfp, F_WRLCK) != 0)
        return -1;
    if ((*v = shfp_read(s->shfp)) < 0) {
        shfp_lock(s->shfp, F_UNLCK);
        return -1;
    }
    return 0;
}

/* ... released, v (when not NULL) written first; -1 when the write failed */
static int shfp_release(srv_file *s, const int64_t *v, uint64_t version)
{
    if (s->co)
        return s->co->ops->counter_unlock(s->co, s->token, v, version) == PXS_OK ? 0 : -1;
    int rc = v ? shfp_write(s->shfp, *v) : 0;
    shfp_lock(s->shfp, F_UNLCK);
    return rc;
}

/* fetch-and-add on the shared pointer (etypes), or set it; the old value, -1 on failure */
static int64_t shfp_add(srv_file *s, int64_t add, int set)
{
    int64_t v = 0;
    uint64_t ver = 0;
    if (shfp_hold(s, &v, &ver) != 0)
        return -1;
    int64_t nv = set ? add : v + add;
    return shfp_release(s, &nv, ver) == 0 ? v : -1;
}

static int64_t srv_shared_pos(px_file *f, int kind, int64_t nbytes)
{
    srv_file *s = srv_of(f);
    int64_t es = f->etype_size > 0 ? f->etype_size : 1, n = nbytes < 0 ? 0 : nbytes / es;
    if ((kind & 3) == PX_POS_SHARED) {
        int64_t p = shfp_add(s, n, 0);
        return p < 0 ? -1 : p * es;
    }
    /* ordered (MPI-4.1 §14.4.4): ranks in rank order from the shared pointer */
    int64_t base = 0, before = 0, total = 0;
    uint64_t ver = 0;
    if (f->comm_rank == 0 && shfp_hold(s, &base, &ver) != 0)
        base = -1;
    /* a failed collective (a rank died, the communicator returns errors) leaves no offset
     * to write at: the call fails instead of writing at a guessed one */
    int bad = PMPI_Exscan(&n, &before, 1, MPI_INT64_T, MPI_SUM, f->comm) != MPI_SUCCESS;
    bad |= PMPI_Allreduce(&n, &total, 1, MPI_INT64_T, MPI_SUM, f->comm) != MPI_SUCCESS;
    if (f->comm_rank == 0) {
        before = 0;
        if (base >= 0) {
            int64_t nv = base + total;
            if (shfp_release(s, bad ? NULL : &nv, ver) != 0 || bad)
                base = -1;
        }
    }
    bad |= PMPI_Bcast(&base, 1, MPI_INT64_T, 0, f->comm) != MPI_SUCCESS;
    return bad || base < 0 ? -1 : (base + before) * es;
}

static int srv_seek_shared(px_file *f, MPI_Offset offset, int whence)
{
    srv_file *s = srv_of(f);
    int rc = MPI_SUCCESS;
    if (f->comm_rank == 0) {
        int64_t cur = 0;
        if (whence == MPI_SEEK_SET) {
            if (shfp_add(s, offset, 1) < 0)
                rc = MPI_ERR_IO;
        } else if (whence == MPI_SEEK_CUR) {
            cur = shfp_add(s, offset, 0);
            if (cur < 0)
                rc = MPI_ERR_IO;
            else if (cur + offset < 0) {
                shfp_add(s, cur, 1);
                rc = MPI_ERR_ARG;
            }
        } else if (whence == MPI_SEEK_END && f->view.contiguous) {
            int64_t size = 0;
            int64_t es = f->etype_size > 0 ? f->etype_size : 1;
            if (pxs_size(s->pf, &size) != 0)
                rc = MPI_ERR_IO;
            else if (shfp_add(s, (size - f->view.disp) / es + offset, 1) < 0)
                rc = MPI_ERR_IO;
        } else {
            rc = whence == MPI_SEEK_END ? MPI_ERR_UNSUPPORTED_OPERATION : MPI_ERR_ARG;
        }
    }
    PMPI_Bcast(&rc, 1, MPI_INT, 0, f->comm);
    return rc;
}

static int srv_get_position_shared(px_file *f, MPI_Offset *offset)
{
    srv_file *s = srv_of(f);
    int64_t v = 0;
    uint64_t ver = 0;
    if (shfp_hold(s, &v, &ver) != 0)
        return MPI_ERR_IO;
    if (shfp_release(s, NULL, ver) != 0)
        return MPI_ERR_IO;
    *offset = (MPI_Offset)v;
    return MPI_SUCCESS;
}

/* ------------------------------------------------------------------ size, sync, close */

static int srv_get_size(px_file *f, MPI_Offset *size)
{
    int64_t v = 0;
    if (pxs_size(srv_of(f)->pf, &v) != 0)
        return MPI_ERR_IO;
    *size = (MPI_Offset)v;
    return MPI_SUCCESS;
}

static int srv_set_size(px_file *f, MPI_Offset size, int preallocate)
{
    srv_file *s = srv_of(f);
    int rc = MPI_SUCCESS;
    if (size < 0)
        return MPI_ERR_ARG;
    if (s->amode & MPI_MODE_RDONLY)
        return MPI_ERR_READ_ONLY;
    PMPI_Barrier(f->comm);   /* every rank's writes are in before the size changes */
    int64_t out[2] = {MPI_SUCCESS, size};    /* outcome, the size now */
    if (f->comm_rank == 0) {
        int64_t cur = 0;
        if (pxs_size(s->pf, &cur) != 0)
            out[0] = MPI_ERR_IO;
        else if (preallocate && size <= cur)
            out[1] = cur;
        else if (size != cur && pxs_truncate(s->pf, size) != 0) {
            say("%s: %s", s->name, pxs_store_error(s->ss->st));
            out[0] = MPI_ERR_IO;
        }
    }
    if (PMPI_Bcast(out, 2, MPI_INT64_T, 0, f->comm) != MPI_SUCCESS)
        return MPI_ERR_IO;
    rc = (int)out[0];
    /* the other ranks' handles learn the size rank 0 set: an extension they made before it
     * is void (their writes past it were cut), and their next write past it must extend */
    if (rc == MPI_SUCCESS && f->comm_rank != 0 && !preallocate)
        pxs_resized(s->pf, out[1]);
    return rc;
}

static int srv_sync(px_file *f)
{
    int rc = pxs_fsync(srv_of(f)->pf) == 0 ? MPI_SUCCESS : MPI_ERR_IO;
    int all = 0;
    if (PMPI_Allreduce(&rc, &all, 1, MPI_INT, MPI_MAX, f->comm) != MPI_SUCCESS)
        return MPI_ERR_IO;
    return all;
}

/* MPI_File_set_atomicity: MPI-IO's answer (the shadow's, collective, errors included), then
 * the store's reads of the file each a sync point while atomic (pxs_set_atomic) */
static int srv_set_atomicity(px_file *f, int flag)
{
    int rc = PMPI_File_set_atomicity(f->fh, flag);
    if (rc == MPI_SUCCESS)
        pxs_set_atomic(srv_of(f)->pf, flag);
    return rc;
}

static int srv_get_amode(px_file *f, int *amode)
{
    *amode = srv_of(f)->amode;
    return MPI_SUCCESS;
}

static int srv_close(px_file *f, MPI_File *fh)
{
    srv_file *s = srv_of(f);
    int rc = pxs_close(s->pf) == 0 ? MPI_SUCCESS : MPI_ERR_IO;
    if (rc != MPI_SUCCESS)
        say("%s: %s", s->name, pxs_store_error(s->ss->st));
    /* every rank's close (its size commit) is done before any rank's close returns: a size
     * asked for right after a close (IOR stats its file) must see every rank's writes, as it
     * does on a file system; and one outcome on every rank */
    int all = rc;
    if (PMPI_Allreduce(&rc, &all, 1, MPI_INT, MPI_MAX, f->comm) != MPI_SUCCESS)
        all = MPI_ERR_IO;
    rc = all;
    if (s->amode & MPI_MODE_DELETE_ON_CLOSE) {
        if (f->comm_rank == 0) {
            int drc = srv_unlink(s->ss, s->name);
            if (drc != MPI_SUCCESS && drc != -1 && rc == MPI_SUCCESS)
                rc = drc;
        }
    }
    int crc = PMPI_File_close(fh);
    if (s->shfp >= 0)
        close(s->shfp);
    if (f->comm_rank == 0 && s->shadow) {      /* the open's shadow files go with it */
        char shfp[PATH_MAX + 80];
        snprintf(shfp, sizeof shfp, "%s.shfp", s->shadow);
        drop_shfp(s->ss->st->co, s->token, shfp);
        unlink(s->shadow);
    } else if (s->co && s->shadow) {
        unlink(s->shadow);                     /* each node's own (the directory may be per node) */
    }
    free(s->shadow);
    free(s->pieces.pcs.p);
    free(s->tp_servers);
    free(s->tp_kinds);
    free(s->name);
    free(s);
    f->state = NULL;
    return rc != MPI_SUCCESS ? rc : crc;
}

/* MPI_File_delete of a served name (and MPI_MODE_DELETE_ON_CLOSE): the file emptied (its
 * replica entries trimmed) and tombstoned (store/meta.h: pxs_meta_tombstone), its name,
 * layout and replicas kept so that the program's next create gets them again.  MPICH's
 * results: MPI_SUCCESS, MPI_ERR_NO_SUCH_FILE for a file deleted already (by this or a racing
 * delete), MPI_ERR_IO; -1: the store does not hold the name (MPICH's own delete decides) */
static int srv_unlink(srv_store *ss, const char *name)
{
    char err[PXS_ERRLEN];
    pxs_meta_rec rec;
    memset(&rec, 0, sizeof rec);
    int found = pxs_meta_get(&ss->st->meta, name, &rec, err, sizeof err);
    int64_t id = rec.id;
    pxs_meta_rec_free(&rec);
    if (found <= 0)
        return -1;
    int gone = pxs_meta_tombstoned(&ss->st->meta, id, err, sizeof err);
    if (gone)
        return gone > 0 ? MPI_ERR_NO_SUCH_FILE : MPI_ERR_IO;
    pxs_file *pf = NULL;
    int rc = pxs_open(ss->st, name, &pf) == 0 && pxs_truncate(pf, 0) == 0 ? MPI_SUCCESS : MPI_ERR_IO;
    if (rc != MPI_SUCCESS)
        say("cannot delete %s: %s", name, pxs_store_error(ss->st));
    if (pf)
        pxs_close(pf);
    if (rc == MPI_SUCCESS) {
        int set = pxs_meta_tombstone(&ss->st->meta, id, 1, err, sizeof err);
        if (set < 0) {
            say("cannot delete %s: %s", name, err);
            rc = MPI_ERR_IO;
        } else if (set == 0) {
            rc = MPI_ERR_NO_SUCH_FILE;  /* a racing delete was first */
        }
    }
    return rc;
}

static int srv_delete(const char *filename, MPI_Info info, int *rc)
{
    char *root = setting(info, "pario_store", "PARIO_STORE");
    if (!root)
        return 0;
    char *mode = setting(info, "pario_serve", "PARIO_SERVE");
    int off = mode && !strcmp(mode, "off");
    free(mode);
    if (off) {
        free(root);
        return 0;
    }
    const char *name = px_fs_path(filename);
    srv_store *ss = get_store(root);
    free(root);
    if (!ss || !ss->st)
        return 0;
    *rc = srv_unlink(ss, name);
    return *rc != -1;
}

/* PARIO_SERVE_STATS=FILE: one JSON line per store this process closed at MPI_Finalize,
 * appended to FILE (pario run's whole-job report reads it): {"rank", "pid", "store", "at":
 * "finalize", "flush_s", "last_out_s", "close_s", "flushed_bytes", "last_out"}
 * (redirect.h: pxs_close_stats).  One write of one line, O_APPEND: the ranks' lines do not mix. */
static void report_close(const char *root, const pxs_close_stats *cs)
{
    const char *path = getenv("PARIO_SERVE_STATS");
    if (!path || !*path)
        return;
    int rank = -1;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    px_buf b = {0};
    px_buf_printf(&b, "{\"rank\": %d, \"pid\": %ld, \"store\": ", rank, (long)getpid());
    px_buf_json(&b, root, strlen(root));
    px_buf_printf(&b, ", \"at\": \"finalize\", \"flush_s\": %.6f, \"last_out_s\": %.6f, \"close_s\": %.6f, "
                      "\"flushed_bytes\": %lld, \"last_out\": %s}\n",
                  cs->flush_s, cs->last_out_s, cs->close_s, (long long)cs->flushed, cs->last_out ? "true" : "false");
    int fd = b.oom ? -1 : open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    ssize_t w = fd < 0 ? -1 : write(fd, b.p, b.n);
    if (fd < 0 || w != (ssize_t)b.n)
        say("cannot write the close statistics to %s: %s", path, b.oom ? "out of memory" : strerror(errno));
    if (fd >= 0)
        close(fd);
    px_buf_free(&b);
}

static void srv_finish(void)
{
    pthread_mutex_lock(&reg_mu);
    while (stores) {
        srv_store *s = stores;
        stores = s->next;
        char err[PXS_ERRLEN];
        pxs_close_stats cs;
        if (s->st && pxs_store_close_stats(s->st, err, sizeof err, &cs) != 0)
            say("closing the store %s: %s", s->root, err);
        else if (s->st)
            report_close(s->root, &cs);
        pxs_coord_close(s->hold);
        free(s->why);
        free(s->kinds);
        free(s->root);
        free(s);
    }
    while (plans) {
        srv_plan *p = plans;
        plans = p->next;
        pxs_json_free(p->doc);
        free(p->err);
        free(p->path);
        free(p);
    }
    pthread_mutex_unlock(&reg_mu);
}

/* ------------------------------------------------------------------ the served ops and the module */

/* A served call's error goes to the file's error handler, as MPICH's own do (MPI-4.1 §9.3:
 * the handler of the file, of MPI_FILE_NULL for MPI_File_open); returns rc. */
static int serve_err(MPI_File fh, int rc)
{
    if (rc != MPI_SUCCESS)
        PMPI_File_call_errhandler(fh, rc);
    return rc;
}

/* The shadow was opened when the file was claimed (srv_open). */
static int ops_open(px_file *f, MPI_Comm comm, const char *filename, int amode, MPI_Info info, MPI_File *fh)
{
    (void)f, (void)comm, (void)filename, (void)amode, (void)info, (void)fh;
    return MPI_SUCCESS;
}

/* Served files need a communicator of their own. */
static int ops_attach(px_file *f)
{
    if (f->comm == MPI_COMM_NULL)
        return MPI_ERR_INTERN;
    srv_attach(f);
    return MPI_SUCCESS;
}

/* The store file and the shadow are closed whatever the outcome. */
static int ops_close(px_file *f, MPI_File *fh, int *closed)
{
    *closed = 1;
    return srv_close(f, fh);
}

static int64_t ops_shared_pos(px_file *f, int kind, int64_t nbytes, int *locked)
{
    (void)locked;
    return srv_shared_pos(f, kind, nbytes);
}

static int ops_data(px_file *f, const px_io_args *a)
{
    return serve_err(f->fh, srv_data(f, a->op, a->kind, a->coll, a->pos, a->buf, a->count, a->datatype, a->status,
                                     a->request));
}

static int ops_split_end(px_file *f, const px_io_args *a) { return serve_err(f->fh, srv_split_end(f, a->status)); }

static int ops_set_size(px_file *f, MPI_Offset size, int preallocate)
{
    return serve_err(f->fh, srv_set_size(f, size, preallocate));
}

static int ops_sync(px_file *f) { return serve_err(f->fh, srv_sync(f)); }

static int ops_seek_shared(px_file *f, MPI_Offset offset, int whence)
{
    return serve_err(f->fh, srv_seek_shared(f, offset, whence));
}

static const px_file_ops served_ops = {
    .name = "pario-store",
    .open = ops_open,
    .attach = ops_attach,
    .close = ops_close,
    .shared_pos = ops_shared_pos,
    .data = ops_data,
    .split_end = ops_split_end,
    .get_size = srv_get_size,
    .set_size = ops_set_size,
    .sync = ops_sync,
    .set_atomicity = srv_set_atomicity,
    .get_amode = srv_get_amode,
    .seek_shared = ops_seek_shared,
    .get_position_shared = srv_get_position_shared,
};

/* The module's open hook: served or not (runtime.h: px_module.open). */
static int serve_claim(MPI_Comm comm, const char *filename, int amode, MPI_Info info, MPI_File *fh,
                       const px_file_ops **ops, void **state)
{
    srv_file *s = NULL;
    int rc = srv_open(comm, filename, amode, info, fh, &s);
    if (rc != MPI_SUCCESS)
        return serve_err(MPI_FILE_NULL, rc);
    if (s) {
        *ops = &served_ops;
        *state = s;
    }
    return MPI_SUCCESS;
}

static void serve_finalize(void)
{
    if (serving)
        srv_finish();
}

__attribute__((constructor(PX_PRIO_SERVE))) static void serve_register(void)
{
    static const px_module serve = {.name = "serve", .finalize = serve_finalize, .open = serve_claim,
                                    .del = srv_delete};
    px_core_register(&serve);
}
