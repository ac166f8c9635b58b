/* pario serve: meta.db from C (meta.h); store.json is store/config.c's. */
#define _GNU_SOURCE
#include "store/meta.h"

#include "store/json.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------ small helpers */
char *pxs_read_text(const char *path, size_t *len, size_t max)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        if (n == cap) {
            if (cap >= max) {
                free(buf);
                buf = NULL;
                errno = EFBIG;
                break;
            }
            cap *= 2;
            char *nb = realloc(buf, cap + 1);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
        }
        size_t k = fread(buf + n, 1, cap - n, f);
        n += k;
        if (k == 0) {
            if (ferror(f)) {
                free(buf);
                buf = NULL;
            }
            break;
        }
    }
    fclose(f);
    if (buf) {
        buf[n] = 0;
        if (len)
            *len = n;
    }
    return buf;
}

char *pxs_join(const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b);
    char *p = malloc(na + nb + 2);
    if (!p)
        return NULL;
    memcpy(p, a, na);
    p[na] = '/';
    memcpy(p + na + 1, b, nb + 1);
    return p;
}

double pxs_store_timeout(void)
{
    const char *s = getenv("PARIO_STORE_TIMEOUT");
    if (s && *s) {
        char *end;
        double v = strtod(s, &end);
        if (*end == 0 && v >= 0 && v < 1e9)
            return v;
    }
    return 60.0;
}

void pxs_strv_free(char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

/* ------------------------------------------------------------------ libsqlite3, by hand */
#define SQ_OK 0
#define SQ_BUSY 5
#define SQ_LOCKED 6
#define SQ_CORRUPT 11
#define SQ_IOERR_DELETE_NOENT (10 | (23 << 8))
#define SQ_NOTADB 26
#define SQ_CONSTRAINT 19
#define SQ_ROW 100
#define SQ_DONE 101
#define SQ_OPEN_READONLY 0x1
#define SQ_OPEN_READWRITE 0x2
#define SQ_OPEN_CREATE 0x4
#define SQ_OPEN_NOFOLLOW 0x01000000   /* SQLite >= 3.31: the path may not contain a link */
#define SQ_OPEN_NOMUTEX 0x8000
#define SQ_OPEN_URI 0x40
#define SQ_CANTOPEN 14
#define SQ_TRANSIENT ((void (*)(void *))-1)

static struct {
    int (*open_v2)(const char *, void **, int, const char *);
    int (*close_v2)(void *);
    int (*prepare_v2)(void *, const char *, int, void **, const char **);
    int (*step)(void *);
    int (*finalize)(void *);
    int (*bind_text)(void *, int, const char *, int, void (*)(void *));
    int (*bind_int64)(void *, int, int64_t);
    int64_t (*column_int64)(void *, int);
    const unsigned char *(*column_text)(void *, int);
    int (*column_bytes)(void *, int);
    const char *(*errmsg)(void *);
    int (*busy_timeout)(void *, int);
    int64_t (*last_insert_rowid)(void *);
    int (*changes)(void *);
    int (*extended_errcode)(void *);
    void *(*vfs_find)(const char *);
    int (*vfs_register)(void *, int);
    int (*enable_load_extension)(void *, int);
    int (*load_extension)(void *, const char *, const char *, char **);
    void (*free)(void *);
    void *(*backup_init)(void *, const char *, void *, const char *);
    int (*backup_step)(void *, int);
    int (*backup_finish)(void *);
} sq;
static int sq_loaded;          /* 1 ok, -1 failed */
static char sq_why[256];
static pthread_once_t sq_once = PTHREAD_ONCE_INIT;

static void sq_load(void)
{
    void *h = dlopen("libsqlite3.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        h = dlopen("libsqlite3.so", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(sq_why, sizeof sq_why, "cannot load libsqlite3.so.0 (%s)", e ? e : "not found");
        sq_loaded = -1;
        return;
    }
    const pxs_dlsym tab[] = {
        {"sqlite3_open_v2", (void **)&sq.open_v2},       {"sqlite3_close_v2", (void **)&sq.close_v2},
        {"sqlite3_prepare_v2", (void **)&sq.prepare_v2}, {"sqlite3_step", (void **)&sq.step},
        {"sqlite3_finalize", (void **)&sq.finalize},     {"sqlite3_bind_text", (void **)&sq.bind_text},
        {"sqlite3_bind_int64", (void **)&sq.bind_int64}, {"sqlite3_column_int64", (void **)&sq.column_int64},
        {"sqlite3_column_text", (void **)&sq.column_text}, {"sqlite3_column_bytes", (void **)&sq.column_bytes},
        {"sqlite3_errmsg", (void **)&sq.errmsg},         {"sqlite3_busy_timeout", (void **)&sq.busy_timeout},
        {"sqlite3_last_insert_rowid", (void **)&sq.last_insert_rowid},
        {"sqlite3_changes", (void **)&sq.changes},       {"sqlite3_extended_errcode", (void **)&sq.extended_errcode},
        {"sqlite3_vfs_find", (void **)&sq.vfs_find},     {"sqlite3_vfs_register", (void **)&sq.vfs_register},
        {"sqlite3_enable_load_extension", (void **)&sq.enable_load_extension},
        {"sqlite3_load_extension", (void **)&sq.load_extension}, {"sqlite3_free", (void **)&sq.free},
        {"sqlite3_backup_init", (void **)&sq.backup_init}, {"sqlite3_backup_step", (void **)&sq.backup_step},
        {"sqlite3_backup_finish", (void **)&sq.backup_finish},
    };
    sq_loaded = pxs_dlsym_table(h, "libsqlite3.so.0", tab, sizeof tab / sizeof tab[0], sq_why, sizeof sq_why) ? -1 : 1;
}

int pxs_dlsym_table(void *h, const char *lib, const pxs_dlsym *tab, size_t n, char *why, size_t whylen)
{
    for (size_t i = 0; i < n; i++) {
        void *p = dlsym(h, tab[i].name);
        if (!p) {
            snprintf(why, whylen, "%s has no %s", lib, tab[i].name);
            return PXS_ENOSYS;
        }
        memcpy(tab[i].slot, &p, sizeof p);
    }
    return PXS_OK;
}

/* the store directory of a metadata database's path (its parent) */
static void store_dir(const char *path, char *out, size_t n)
{
    const char *slash = strrchr(path, '/');
    if (!strncmp(path, "rados:", 6))     /* in RADOS (pxs_meta_open_rados): its name holds no directory */
        snprintf(out, n, "DIR");
    else if (!slash)
        snprintf(out, n, ".");
    else if (slash == path)
        snprintf(out, n, "/");
    else
        snprintf(out, n, "%.*s", (int)(slash - path), path);
}

/* pario.store.meta.SCHEMA: the one table (AUTOINCREMENT: an id is never handed out twice) */
static const char *SCHEMA = "CREATE TABLE IF NOT EXISTS files(id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL "
                            "UNIQUE, layout TEXT NOT NULL, size INTEGER NOT NULL DEFAULT 0, dirty INTEGER NOT NULL "
                            "DEFAULT 0)";

/* the one-line message of a failed SQLite call */
static int db_fail(pxs_meta *m, int rc, const char *what, char *err, size_t errlen)
{
    const char *msg = m->db ? sq.errmsg(m->db) : "cannot open";
    int prim = rc & 0xFF;
    char dir[PATH_MAX];
    store_dir(m->path ? m->path : "meta.db", dir, sizeof dir);
    if (prim == SQ_BUSY || prim == SQ_LOCKED)
        snprintf(err, errlen, "metadata database %s: still locked by another process after %g s (%s)", m->path,
                 m->timeout, msg);
    else if (prim == SQ_CORRUPT || prim == SQ_NOTADB)
        snprintf(err, errlen, "metadata database %.200s is damaged (%.100s); salvage what is left with 'pario store "
                 "fsck --store %.200s --repair' (%s)", m->path, msg, dir, what);
    else
        snprintf(err, errlen, "metadata database %s: %s (%s)", m->path, msg, what);
    return PXS_EDB;
}

/* prepare, bind (fmt: 't' text, 'i' int64) and take the first step */
static int run(pxs_meta *m, const char *sql, const char *fmt, va_list ap, void **out_stmt, int *step_rc)
{
    void *st = NULL;
    int rc = sq.prepare_v2(m->db, sql, -1, &st, NULL);
    if (rc != SQ_OK)
        return rc;
    for (int i = 0; fmt && fmt[i]; i++) {
        if (fmt[i] == 't')
            rc = sq.bind_text(st, i + 1, va_arg(ap, const char *), -1, SQ_TRANSIENT);
        else
            rc = sq.bind_int64(st, i + 1, va_arg(ap, int64_t));
        if (rc != SQ_OK) {
            sq.finalize(st);
            return rc;
        }
    }
    *step_rc = sq.step(st);
    *out_stmt = st;
    return SQ_OK;
}

/* execute a statement that returns no rows we need */
static int exec_sql(pxs_meta *m, const char *what, char *err, size_t errlen, const char *sql, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    void *st = NULL;
    int src = 0;
    int rc = run(m, sql, fmt, ap, &st, &src);
    va_end(ap);
    if (rc != SQ_OK)
        return db_fail(m, rc, what, err, errlen);
    while (src == SQ_ROW)
        src = sq.step(st);
    if (src != SQ_DONE) {
        int e = sq.extended_errcode(m->db);
        db_fail(m, e ? e : src, what, err, errlen);
        sq.finalize(st);
        return (src & 0xFF) == SQ_CONSTRAINT ? PXS_EINVAL : PXS_EDB;
    }
    sq.finalize(st);
    return PXS_OK;
}

static int opened(pxs_meta *m, const char *path, double timeout, const char *journal_mode, char *err, size_t errlen);

int pxs_meta_open(pxs_meta *m, const char *path, double timeout, int wal, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    pthread_once(&sq_once, sq_load);
    if (sq_loaded != 1) {
        snprintf(err, errlen, "metadata database %s: %s", path, sq_why);
        return PXS_ENOSYS;
    }
    m->path = strdup(path);
    if (!m->path)
        return PXS_ENOMEM;
    m->timeout = timeout;
    /* never created here (pario.store.init_store makes it): a missing or emptied database next
     * to a store's data would hand a new file the id, and so the data files, of an old one; and
     * never through a link someone planted */
    char side[PATH_MAX + 8];
    const char *sfx[] = {"", "-wal", "-shm", "-journal"};
    for (int i = 0; i < 4; i++) {
        struct stat sb;
        snprintf(side, sizeof side, "%s%s", path, sfx[i]);
        if (lstat(side, &sb) == 0 && S_ISLNK(sb.st_mode)) {
            snprintf(err, errlen, "%.300s is a symbolic link: pario never follows a link it did not make", side);
            pxs_meta_close(m);
            return PXS_EINVAL;
        }
        if (i == 0 && (lstat(side, &sb) != 0 || sb.st_size == 0)) {
            const char *slash = strrchr(path, '/');
            snprintf(err, errlen, "metadata database %.300s is missing or empty: rebuild it with 'pario store fsck "
                     "--store %.*s --repair'", path, slash ? (int)(slash - path) : 1, slash ? path : ".");
            pxs_meta_close(m);
            return PXS_ENOENT;
        }
    }
    const char *vfs = NULL;
    if (!wal && !(vfs = pxs_meta_vfs(sq.vfs_find, sq.vfs_register))) {
        snprintf(err, errlen, "metadata database %s: this SQLite's default VFS cannot be made coherent between nodes",
                 path);
        pxs_meta_close(m);
        return PXS_ENOSYS;
    }
    int rc = sq.open_v2(path, &m->db, SQ_OPEN_READWRITE | SQ_OPEN_NOMUTEX | SQ_OPEN_NOFOLLOW, vfs);
    if (rc != SQ_OK) {
        db_fail(m, rc, "open", err, errlen);
        pxs_meta_close(m);
        return PXS_EDB;
    }
    return opened(m, path, timeout, wal ? "WAL" : "PERSIST", err, errlen);
}

/* an open database made ready: busy timeout, journal mode, synchronous=FULL, a quick integrity
 * check, the files table there (closed on failure) */
static int opened(pxs_meta *m, const char *path, double timeout, const char *journal_mode, char *err, size_t errlen)
{
    int rc;
    double ms = timeout * 1000.0;
    sq.busy_timeout(m->db, ms > 2e9 ? 2000000000 : (int)ms);
    /* the coordination's journal mode, synchronous=FULL, a quick integrity check */
    if ((rc = exec_sql(m, "journal mode", err, errlen, strcmp(journal_mode, "WAL") == 0 ? "PRAGMA journal_mode=WAL"
                                                                                       : "PRAGMA journal_mode=PERSIST",
                       NULL))
        || (rc = exec_sql(m, "synchronous", err, errlen, "PRAGMA synchronous=FULL", NULL)))
        goto fail;
    void *st = NULL;
    int src = 0;
    rc = sq.prepare_v2(m->db, "PRAGMA quick_check", -1, &st, NULL);
    if (rc != SQ_OK) {
        rc = db_fail(m, rc, "quick_check", err, errlen);
        goto fail;
    }
    src = sq.step(st);
    if (src != SQ_ROW || !sq.column_text(st, 0) || strcmp((const char *)sq.column_text(st, 0), "ok") != 0) {
        const char *why = src == SQ_ROW && sq.column_text(st, 0) ? (const char *)sq.column_text(st, 0)
                                                                 : sq.errmsg(m->db);
        if ((src & 0xFF) == SQ_BUSY || (src & 0xFF) == SQ_LOCKED)
            db_fail(m, src, "quick_check", err, errlen);
        else
        {
            char dir[PATH_MAX];
            store_dir(path, dir, sizeof dir);
            snprintf(err, errlen, "metadata database %.200s is damaged (%.150s); salvage what is left with 'pario "
                     "store fsck --store %.200s --repair'", path, why, dir);
        }
        sq.finalize(st);
        rc = PXS_EDB;
        goto fail;
    }
    sq.finalize(st);
    st = NULL;
    if (sq.prepare_v2(m->db, "SELECT 1 FROM sqlite_master WHERE type='table' AND name='files'", -1, &st, NULL) != SQ_OK
        || sq.step(st) != SQ_ROW) {
        if (st)
            sq.finalize(st);
        const char *slash = strrchr(path, '/');
        snprintf(err, errlen, "metadata database %.300s is missing or empty (no files table): rebuild it with 'pario "
                 "store fsck --store %.*s --repair'", path, slash ? (int)(slash - path) : 1, slash ? path : ".");
        rc = PXS_ENOENT;
        goto fail;
    }
    sq.finalize(st);
    return PXS_OK;
fail:
    pxs_meta_close(m);
    return rc ? rc : PXS_EDB;
}

void pxs_meta_close(pxs_meta *m)
{
    if (m->db)
        sq.close_v2(m->db);
    m->db = NULL;
    free(m->path);
    m->path = NULL;
}

void pxs_meta_rec_free(pxs_meta_rec *r)
{
    free(r->name);
    free(r->layout);
    memset(r, 0, sizeof *r);
}

static char *col_str(void *st, int i)
{
    const unsigned char *t = sq.column_text(st, i);
    int n = sq.column_bytes(st, i);
    char *s = malloc((size_t)(n > 0 ? n : 0) + 1);
    if (!s)
        return NULL;
    if (t && n > 0)
        memcpy(s, t, (size_t)n);
    s[n > 0 ? n : 0] = 0;
    return s;
}

static int get_row(pxs_meta *m, const char *sql, const char *fmt, pxs_meta_rec *rec, char *err, size_t errlen, ...)
{
    memset(rec, 0, sizeof *rec);
    va_list ap;
    va_start(ap, errlen);
    void *st = NULL;
    int src = 0;
    int rc = run(m, sql, fmt, ap, &st, &src);
    va_end(ap);
    if (rc != SQ_OK)
        return db_fail(m, rc, "looking up a file", err, errlen);
    if (src == SQ_DONE) {
        sq.finalize(st);
        return 0;
    }
    if (src != SQ_ROW) {
        db_fail(m, sq.extended_errcode(m->db) ? sq.extended_errcode(m->db) : src, "looking up a file", err, errlen);
        sq.finalize(st);
        return PXS_EDB;
    }
    rec->id = sq.column_int64(st, 0);
    rec->name = col_str(st, 1);
    rec->layout = col_str(st, 2);
    rec->size = sq.column_int64(st, 3);
    rec->dirty = sq.column_int64(st, 4) != 0;
    sq.finalize(st);
    if (!rec->name || !rec->layout) {
        pxs_meta_rec_free(rec);
        return PXS_ENOMEM;
    }
    return 1;
}

int pxs_meta_get(pxs_meta *m, const char *name, pxs_meta_rec *rec, char *err, size_t errlen)
{
    return get_row(m, "SELECT id, name, layout, size, dirty FROM files WHERE name=?", "t", rec, err, errlen, name);
}

int pxs_meta_get_id(pxs_meta *m, int64_t id, pxs_meta_rec *rec, char *err, size_t errlen)
{
    return get_row(m, "SELECT id, name, layout, size, dirty FROM files WHERE id=?", "i", rec, err, errlen, id);
}

/* A JSON string of s (UTF-8 passes through; quotes, backslashes and control bytes escaped). */
static char *json_string(const char *s)
{
    size_t n = strlen(s);
    char *out = malloc(6 * n + 3), *p = out;
    if (!out)
        return NULL;
    *p++ = '"';
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\') {
            *p++ = '\\';
            *p++ = (char)*c;
        } else if (*c < 0x20) {
            p += sprintf(p, "\\u%04x", *c);
        } else {
            *p++ = (char)*c;
        }
    }
    *p++ = '"';
    *p = 0;
    return out;
}

/* The store's catalog (pario.store.catalog): one line a change of the namespace, durable
 * before the change is acknowledged, from which fsck --repair rebuilds a lost database. */
static int catalog_append(pxs_meta *m, const char *line, size_t n, char *err, size_t errlen)
{
    if (m->catalog_append)
        return m->catalog_append(m->catalog_ctx, line, n, err, errlen);
    char dir[PATH_MAX], path[PATH_MAX + 16];
    store_dir(m->path, dir, sizeof dir);
    snprintf(path, sizeof path, "%s/catalog.log", dir);
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    int rc = PXS_OK;
    if (fd < 0 || write(fd, line, n) != (ssize_t)n || fdatasync(fd) != 0) {
        snprintf(err, errlen, "store catalog %.300s: %s", path, strerror(errno));
        rc = PXS_EIO;
    }
    if (fd >= 0)
        close(fd);
    return rc;
}

/* {"op":OP,"id":ID[,"name":NAME][,"layout":LAYOUT]} */
static int catalog(pxs_meta *m, const char *op, int64_t id, const char *name, const char *layout_json, char *err,
                   size_t errlen)
{
    char *qname = name ? json_string(name) : NULL;
    size_t cap = (qname ? strlen(qname) : 0) + (layout_json ? strlen(layout_json) : 0) + 96;
    char *line = (!name || qname) ? malloc(cap) : NULL;
    if (!line) {
        free(qname);
        return PXS_ENOMEM;
    }
    int n = snprintf(line, cap, "{\"op\":\"%s\",\"id\":%lld%s%s%s%s}\n", op, (long long)id, qname ? ",\"name\":" : "",
                     qname ? qname : "", layout_json ? ",\"layout\":" : "", layout_json ? layout_json : "");
    free(qname);
    int rc = catalog_append(m, line, (size_t)n, err, errlen);
    free(line);
    return rc;
}

int pxs_meta_create(pxs_meta *m, const char *name, const char *layout_json, int64_t *id, char *err, size_t errlen)
{
    int rc = exec_sql(m, "creating a file", err, errlen, "INSERT INTO files(name, layout, size) VALUES (?, ?, 0)",
                      "tt", name, layout_json);
    if (rc == PXS_EINVAL) {
        snprintf(err, errlen, "file '%s' already exists in the store", name);
        rc = PXS_EEXIST;
    }
    if (rc)
        return rc;
    *id = sq.last_insert_rowid(m->db);
    return catalog(m, "create", *id, name, layout_json, err, errlen);
}

static int64_t id_of(pxs_meta *m, const char *name, char *err, size_t errlen)
{
    pxs_meta_rec rec;
    int got = pxs_meta_get(m, name, &rec, err, errlen);
    int64_t id = got > 0 ? rec.id : got == 0 ? 0 : got;
    if (got > 0)
        pxs_meta_rec_free(&rec);
    return id;
}

int pxs_meta_delete(pxs_meta *m, const char *name, char *err, size_t errlen)
{
    int64_t id = id_of(m, name, err, errlen);
    if (id <= 0)
        return (int)id;
    int rc = exec_sql(m, "deleting a file", err, errlen, "DELETE FROM files WHERE id=?", "i", id);
    return rc ? rc : catalog(m, "delete", id, NULL, NULL, err, errlen) ? PXS_EIO : 1;
}

int pxs_meta_rename(pxs_meta *m, const char *old, const char *new_name, char *err, size_t errlen)
{
    int64_t id = id_of(m, old, err, errlen);
    if (id < 0)
        return (int)id;
    if (id == 0) {
        snprintf(err, errlen, "no file '%.400s' in the store", old);
        return PXS_ENOENT;
    }
    int rc = exec_sql(m, "renaming a file", err, errlen, "UPDATE files SET name=? WHERE id=?", "ti", new_name, id);
    if (rc == PXS_EINVAL) {
        snprintf(err, errlen, "file '%.400s' already exists in the store", new_name);
        return PXS_EEXIST;
    }
    return rc ? rc : catalog(m, "rename", id, new_name, NULL, err, errlen);
}

int pxs_meta_list(pxs_meta *m, int64_t **ids, char ***names, size_t *n, char *err, size_t errlen)
{
    *ids = NULL;
    *names = NULL;
    *n = 0;
    void *st = NULL;
    int rc = sq.prepare_v2(m->db, "SELECT id, name FROM files ORDER BY name", -1, &st, NULL);
    if (rc != SQ_OK)
        return db_fail(m, rc, "listing files", err, errlen);
    size_t cap = 0;
    int src;
    while ((src = sq.step(st)) == SQ_ROW) {
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            int64_t *vi = realloc(*ids, cap * sizeof *vi);
            if (vi)
                *ids = vi;
            char **vn = vi ? realloc(*names, cap * sizeof *vn) : NULL;
            if (!vi || !vn) {
                sq.finalize(st);
                return PXS_ENOMEM;
            }
            *names = vn;
        }
        (*ids)[*n] = sq.column_int64(st, 0);
        if (!((*names)[*n] = col_str(st, 1))) {
            sq.finalize(st);
            return PXS_ENOMEM;
        }
        (*n)++;
    }
    sq.finalize(st);
    return src == SQ_DONE ? PXS_OK : db_fail(m, src, "listing files", err, errlen);
}

int64_t pxs_meta_top_id(pxs_meta *m, char *err, size_t errlen)
{
    void *st = NULL;
    int rc = sq.prepare_v2(m->db, "SELECT seq FROM sqlite_sequence WHERE name='files'", -1, &st, NULL);
    if (rc != SQ_OK)     /* no sequence table yet: no id was ever handed out */
        return 0;
    int src = sq.step(st);
    int64_t v = src == SQ_ROW ? sq.column_int64(st, 0) : 0;
    sq.finalize(st);
    if (src != SQ_ROW && src != SQ_DONE)
        return db_fail(m, src, "reading the id sequence", err, errlen);
    return v;
}

/* a relayout's switch (pario.store.relayout): in one transaction, the rows `rids` renamed
 * `rnames` (the old copy and its replicas out of the way) and row new_id named `name` with its
 * final size, provided `name` is still old_id; then the renames in the catalog */
int pxs_meta_switch(pxs_meta *m, const char *name, int64_t old_id, int64_t new_id, int64_t size, const int64_t *rids,
                    const char *const *rnames, size_t nr, char *err, size_t errlen)
{
    int rc = exec_sql(m, "starting a transaction", err, errlen, "BEGIN IMMEDIATE", NULL);
    if (rc)
        return rc;
    int64_t cur = id_of(m, name, err, errlen);
    if (cur != old_id) {
        if (cur >= 0)
            snprintf(err, errlen, "the file was replaced while it was copied");
        rc = cur < 0 ? (int)cur : PXS_EINVAL;
    }
    for (size_t i = 0; !rc && i < nr; i++)
        rc = exec_sql(m, "switching a relaid file", err, errlen, "UPDATE files SET name=? WHERE id=?", "ti", rnames[i],
                      rids[i]);
    if (!rc)
        rc = exec_sql(m, "switching a relaid file", err, errlen, "UPDATE files SET name=?, size=?, dirty=0 WHERE id=?",
                      "tii", name, size, new_id);
    if (!rc)
        rc = exec_sql(m, "committing a switch", err, errlen, "COMMIT", NULL);
    if (rc) {
        char ignored[PXS_ERRLEN];
        exec_sql(m, "rolling back", ignored, sizeof ignored, "ROLLBACK", NULL);
        return rc;
    }
    for (size_t i = 0; !rc && i <= nr; i++)
        rc = catalog(m, "rename", i < nr ? rids[i] : new_id, i < nr ? rnames[i] : name, NULL, err, errlen);
    return rc;
}

int pxs_meta_init(const char *path, int wal, char *err, size_t errlen)
{
    pthread_once(&sq_once, sq_load);
    if (sq_loaded != 1) {
        snprintf(err, errlen, "metadata database %s: %s", path, sq_why);
        return PXS_ENOSYS;
    }
    pxs_meta m;
    memset(&m, 0, sizeof m);
    m.path = strdup(path);
    if (!m.path)
        return PXS_ENOMEM;
    const char *vfs = wal ? NULL : pxs_meta_vfs(sq.vfs_find, sq.vfs_register);
    int rc = sq.open_v2(path, &m.db, SQ_OPEN_READWRITE | SQ_OPEN_CREATE | SQ_OPEN_NOMUTEX | SQ_OPEN_NOFOLLOW, vfs);
    if (rc != SQ_OK)
        rc = db_fail(&m, rc, "creating it", err, errlen);
    else if (!(rc = exec_sql(&m, "journal mode", err, errlen,
                             wal ? "PRAGMA journal_mode=WAL" : "PRAGMA journal_mode=PERSIST", NULL)))
        rc = exec_sql(&m, "schema", err, errlen, SCHEMA, NULL);
    pxs_meta_close(&m);
    return rc;
}

int pxs_meta_set_dirty(pxs_meta *m, const char *name, int dirty, char *err, size_t errlen)
{
    return exec_sql(m, "marking a file dirty", err, errlen, "UPDATE files SET dirty=? WHERE name=?", "it",
                    (int64_t)dirty, name);
}

/* the tombstones' table: made by the first delete (older stores have none) */
static const char *TOMBSTONES = "CREATE TABLE IF NOT EXISTS deleted(id INTEGER PRIMARY KEY)";

static int no_table(pxs_meta *m)
{
    const char *msg = sq.errmsg(m->db);
    return msg && strncmp(msg, "no such table", 13) == 0;
}

int pxs_meta_tombstone(pxs_meta *m, int64_t id, int on, char *err, size_t errlen)
{
    int rc = on ? exec_sql(m, "making the table of deleted files", err, errlen, TOMBSTONES, NULL) : PXS_OK;
    if (rc)
        return rc;
    rc = on ? exec_sql(m, "marking a file deleted", err, errlen, "INSERT OR IGNORE INTO deleted(id) VALUES (?)", "i", id)
            : exec_sql(m, "clearing a file's deletion", err, errlen, "DELETE FROM deleted WHERE id=?", "i", id);
    if (rc && !on && no_table(m))
        return 0;               /* no file was ever deleted in this store */
    return rc ? rc : sq.changes(m->db) > 0;
}

int pxs_meta_tombstoned(pxs_meta *m, int64_t id, char *err, size_t errlen)
{
    void *st = NULL;
    int rc = sq.prepare_v2(m->db, "SELECT 1 FROM deleted WHERE id=?", -1, &st, NULL);
    if (rc != SQ_OK)
        return no_table(m) ? 0 : db_fail(m, rc, "looking up deleted files", err, errlen);
    int src = sq.bind_int64(st, 1, id);
    if (src == SQ_OK)
        src = sq.step(st);
    int found = src == SQ_ROW;
    if (src != SQ_ROW && src != SQ_DONE) {
        int e = sq.extended_errcode(m->db);
        sq.finalize(st);
        return db_fail(m, e ? e : src, "looking up deleted files", err, errlen);
    }
    sq.finalize(st);
    return found;
}

int pxs_meta_set_size(pxs_meta *m, const char *name, int64_t size, int dirty, char *err, size_t errlen)
{
    return exec_sql(m, "committing a size", err, errlen, "UPDATE files SET size=?, dirty=? WHERE name=?", "iit", size,
                    (int64_t)dirty, name);
}

int pxs_meta_grow_size(pxs_meta *m, const char *name, int64_t size, char *err, size_t errlen)
{
    return exec_sql(m, "committing a size", err, errlen, "UPDATE files SET size=MAX(size, ?) WHERE name=?", "it", size,
                    name);
}

int pxs_meta_dirty_names(pxs_meta *m, char ***names, size_t *n, char *err, size_t errlen)
{
    *names = NULL;
    *n = 0;
    void *st = NULL;
    int rc = sq.prepare_v2(m->db, "SELECT name FROM files WHERE dirty != 0", -1, &st, NULL);
    if (rc != SQ_OK)
        return db_fail(m, rc, "listing dirty files", err, errlen);
    size_t cap = 0;
    int src;
    while ((src = sq.step(st)) == SQ_ROW) {
        if (*n == cap) {
            cap = cap ? cap * 2 : 8;
            char **v = realloc(*names, cap * sizeof *v);
            if (!v) {
                sq.finalize(st);
                return PXS_ENOMEM;
            }
            *names = v;
        }
        char *s = col_str(st, 0);
        if (!s) {
            sq.finalize(st);
            return PXS_ENOMEM;
        }
        (*names)[(*n)++] = s;
    }
    if (src != SQ_DONE) {
        db_fail(m, src, "listing dirty files", err, errlen);
        sq.finalize(st);
        return PXS_EDB;
    }
    sq.finalize(st);
    return PXS_OK;
}

/* ------------------------------------------------------------------ metadata in RADOS
 * Ceph's SQLite VFS (libcephsqlite, "ceph"; docs.ceph.com, "Ceph SQLite VFS"): the database
 * striped over objects of a pool's namespace, every transaction under RADOS locks the VFS
 * keeps (clients one after another), SQLite's rollback journal (no WAL: its index is a shared
 * mapping).  Loaded once into this process's libsqlite3 as an extension; its RADOS client
 * reads the cluster's configuration from CEPH_CONF at its first open: one cluster per process. */
static int ceph_loaded;        /* 1 ok, -1 failed */
static char ceph_why[300];
static pthread_once_t ceph_once = PTHREAD_ONCE_INIT;
static char ceph_conf[PATH_MAX];

static void ceph_load(void)
{
    void *db = NULL;
    char *msg = NULL;
    ceph_loaded = -1;
    if (sq.open_v2(":memory:", &db, SQ_OPEN_READWRITE | SQ_OPEN_CREATE, NULL) != SQ_OK) {
        snprintf(ceph_why, sizeof ceph_why, "SQLite cannot open a database in memory");
    } else if (sq.enable_load_extension(db, 1) != SQ_OK) {
        snprintf(ceph_why, sizeof ceph_why, "this SQLite does not load extensions");
    } else if (setenv("CEPH_CONF", ceph_conf, 1) != 0
               || sq.load_extension(db, "libcephsqlite.so", NULL, &msg) != SQ_OK) {
        snprintf(ceph_why, sizeof ceph_why, "cannot load Ceph's SQLite VFS libcephsqlite.so (%s): a store coordinated "
                 "in RADOS needs it (scripts/setup.sh ceph installs libsqlite3-mod-ceph)", msg ? msg : "?");
    } else {
        ceph_loaded = 1;
    }
    if (msg)
        sq.free(msg);
    if (db)
        sq.close_v2(db);
}

/* libsqlite3 and Ceph's VFS loaded for the cluster of conf: PXS_OK, or the one line why not */
static int ceph_ready(const char *conf, char *err, size_t errlen)
{
    pthread_once(&sq_once, sq_load);
    if (sq_loaded != 1) {
        snprintf(err, errlen, "metadata database in RADOS: %s", sq_why);
        return PXS_ENOSYS;
    }
    if (!ceph_conf[0])
        snprintf(ceph_conf, sizeof ceph_conf, "%s", conf);
    pthread_once(&ceph_once, ceph_load);
    if (ceph_loaded != 1) {
        snprintf(err, errlen, "%s", ceph_why);
        return PXS_ENOSYS;
    }
    if (strcmp(ceph_conf, conf) != 0) {
        snprintf(err, errlen, "metadata database in RADOS: this process already uses the cluster of %s (Ceph's SQLite "
                 "VFS serves one cluster per process), not %s", ceph_conf, conf);
        return PXS_EINVAL;
    }
    return PXS_OK;
}

int pxs_meta_open_rados(pxs_meta *m, const char *conf, const char *pool, const char *ns, int create, double timeout,
                        char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    int crc = ceph_ready(conf, err, errlen);
    if (crc)
        return crc;
    char uri[PATH_MAX + 64];
    snprintf(uri, sizeof uri, "file:///%s:%s/meta.db?vfs=ceph", pool, ns);
    char where[PATH_MAX + 64];
    snprintf(where, sizeof where, "rados:%s/%s/meta.db", pool, ns);
    if (!(m->path = strdup(where)))
        return PXS_ENOMEM;
    m->timeout = timeout;
    int rc = sq.open_v2(uri, &m->db, SQ_OPEN_READWRITE | SQ_OPEN_NOMUTEX | SQ_OPEN_URI | (create ? SQ_OPEN_CREATE : 0),
                        NULL);
    if (rc != SQ_OK) {
        if (!create && (rc & 0xFF) == SQ_CANTOPEN) {
            snprintf(err, errlen, "metadata database %s is missing: rebuild it with 'pario store fsck --store DIR "
                     "--repair'", where);
            pxs_meta_close(m);
            return PXS_ENOENT;
        }
        db_fail(m, rc, "open", err, errlen);
        pxs_meta_close(m);
        return PXS_EDB;
    }
    if (create) {
        /* 64 KiB pages (libcephsqlite's advice: fewer object operations per transaction) */
        if ((rc = exec_sql(m, "page size", err, errlen, "PRAGMA page_size=65536", NULL))
            || (rc = exec_sql(m, "journal mode", err, errlen, "PRAGMA journal_mode=PERSIST", NULL))
            || (rc = exec_sql(m, "schema", err, errlen, SCHEMA, NULL))) {
            pxs_meta_close(m);
            return rc;
        }
    }
    return opened(m, where, timeout, "PERSIST", err, errlen);
}


/* ------------------------------------------------------------------ repair of the database in RADOS */
/* the first slots of SQLite's sqlite3_vfs (sqlite3.h), as far as xDelete */
typedef struct sq_vfs_head {
    int iVersion, szOsFile, mxPathname;
    void *pNext;
    const char *zName;
    void *pAppData;
    void *xOpen;
    int (*xDelete)(struct sq_vfs_head *, const char *zName, int syncDir);
} sq_vfs_head;

/* one database copied into another, page by page (SQLite's online backup: pages are copied as
 * they are, a damaged b-tree included); PXS_OK, PXS_ENOENT (src missing), PXS_EDB */
static int backup(const char *src, int src_flags, const char *dst, int dst_flags, const char *what, char *err,
                  size_t errlen)
{
    void *from = NULL, *to = NULL;
    int rc = sq.open_v2(src, &from, src_flags, NULL);
    if (rc != SQ_OK) {
        int missing = (rc & 0xFF) == SQ_CANTOPEN;
        snprintf(err, errlen, "%s: cannot open %s: %s", what, src, from ? sq.errmsg(from) : "cannot open");
        if (from)
            sq.close_v2(from);
        return missing ? PXS_ENOENT : PXS_EDB;
    }
    rc = sq.open_v2(dst, &to, dst_flags, NULL);
    if (rc != SQ_OK) {
        snprintf(err, errlen, "%s: cannot open %s: %s", what, dst, to ? sq.errmsg(to) : "cannot open");
        if (to)
            sq.close_v2(to);
        sq.close_v2(from);
        return PXS_EDB;
    }
    void *b = sq.backup_init(to, "main", from, "main");
    if (!b)
        snprintf(err, errlen, "%s: %s", what, sq.errmsg(to));
    else {
        while ((rc = sq.backup_step(b, -1)) == SQ_BUSY || rc == SQ_LOCKED)
            usleep(20000);
        sq.backup_finish(b);
        if (rc != SQ_DONE)
            snprintf(err, errlen, "%s: %s", what, sq.errmsg(to));
    }
    int ok = b && rc == SQ_DONE;
    sq.close_v2(to);
    sq.close_v2(from);
    return ok ? PXS_OK : PXS_EDB;
}

int pxs_meta_rados_transfer(const char *conf, const char *pool, const char *ns, const char *local, int to_rados,
                            char *err, size_t errlen)
{
    int rc = ceph_ready(conf, err, errlen);
    if (rc)
        return rc;
    char uri[PATH_MAX + 64], path[PATH_MAX + 64];
    snprintf(uri, sizeof uri, "file:///%s:%s/meta.db?vfs=ceph", pool, ns);
    if (!to_rados)
        return backup(uri, SQ_OPEN_READONLY | SQ_OPEN_URI, local, SQ_OPEN_READWRITE | SQ_OPEN_CREATE | SQ_OPEN_NOFOLLOW,
                      "copying the metadata database out of RADOS", err, errlen);
    /* the damaged database and its rollback journal deleted (the VFS's own names: the URI's
     * path), then the new one made from local */
    sq_vfs_head *vfs = sq.vfs_find("ceph");
    if (!vfs || !vfs->xDelete) {
        snprintf(err, errlen, "Ceph's SQLite VFS is not registered");
        return PXS_ENOSYS;
    }
    const char *suffix[] = {"-journal", ""};
    for (size_t i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "/%s:%s/meta.db%s", pool, ns, suffix[i]);
        int d = vfs->xDelete(vfs, path, 0);
        if (d != SQ_OK && d != SQ_IOERR_DELETE_NOENT) {
            snprintf(err, errlen, "cannot delete the damaged metadata database rados:%s/%s/meta.db%s (SQLite error %d)",
                     pool, ns, suffix[i], d);
            return PXS_EDB;
        }
    }
    return backup(local, SQ_OPEN_READONLY | SQ_OPEN_NOFOLLOW, uri, SQ_OPEN_READWRITE | SQ_OPEN_CREATE | SQ_OPEN_URI,
                  "writing the rebuilt metadata database into RADOS", err, errlen);
}
