/* pario.native._rmt: the RMT core (rmt.c) as a Python type, for pario.store.rmt; the
 * module also carries the collective orders (pyorder.c, for pario.plan.collective).
 *
 * One Core per open store.  Calls never release the GIL except to wait for another
 * process (journal lock, range locks) or for another thread of this process that is in
 * the middle of a transaction; a recursive mutex per Core keeps the C state consistent
 * between Python threads (the replicator, lazy synchronisation and the caller).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/rmt.h"
#include "python/bindings.h"
#include "python/pylayout.h"
#include "store/coord.h"
#include "python/pyorder.h"

static PyObject *error_class;   /* pario.ParioError, set by set_error_class() */

typedef struct {
    PyObject_HEAD
    rmt_core *c;             /* own_c, or the RMT of a store engine (borrowed: pyx_rmt_borrow) */
    pxs_coord *co;           /* its coordination (store/coord.h): own (the host member over the
                                given files) or the engine's */
    pxs_coord *own_co;
    pthread_mutex_t *mu;     /* own_mu, or the engine's mutex (one lock for one RMT) */
    PyObject *owner;         /* borrowed: the engine object, kept alive */
    rmt_core own_c;
    pthread_mutex_t own_mu;
    int open;
    PyObject *last;          /* the last (r, delta) returned: requests in one replica reuse it */
} Core;

/* ------------------------------------------------------------------ helpers */
static void lock_mu(Core *self)
{
    if (pthread_mutex_trylock(self->mu) == 0)
        return;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(self->mu);
    Py_END_ALLOW_THREADS
}

static void unlock_mu(Core *self)
{
    pthread_mutex_unlock(self->mu);
}

static PyObject *fail(Core *self, int rc, const char *what)
{
    PyObject *cls = error_class ? error_class : PyExc_RuntimeError;
    const char *path = self && self->c->path ? self->c->path : "rmt.log";
    switch (rc) {
    case RMT_ENOMEM:
        return PyErr_NoMemory();
    case RMT_EIO:
        return PyErr_Format(cls, "%s: %s (%s)", path, strerror(errno), what);
    case RMT_ECORRUPT:
        return PyErr_Format(cls, "replica mapping table (RMT) %s is damaged or not an RMT journal (%s)", path,
                            what);
    case RMT_ETIMEDOUT: {
        char t[32];     /* PyErr_Format has no %g */
        snprintf(t, sizeof t, "%g", self ? self->c->timeout : 0.0);
        return PyErr_Format(cls, "timed out after %s s waiting for a lock of %s (%s: another process holds it; "
                            "stopped or hung?)", t, path, what);
    }
    case RMT_EFULL:
        return PyErr_Format(cls, "replica mapping table (RMT) %s is full; close every process using the store "
                            "so that it is compacted", path);
    case RMT_EMORE:
        return PyErr_Format(cls, "RMT: too many segments (%s)", what);
    default:
        return PyErr_Format(cls, "replica mapping table (RMT) %s refused %s (inconsistent with its state)", path,
                            what);
    }
}

static int check_open(Core *self)
{
    if (!self->open) {
        PyErr_SetString(error_class ? error_class : PyExc_RuntimeError, "the RMT is closed");
        return -1;
    }
    return 0;
}

static int get_u64(PyObject *o, uint64_t *v)
{
    unsigned long long x = PyLong_AsUnsignedLongLong(o);
    if (x == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    *v = x;
    return 0;
}

static int get_i64(PyObject *o, int64_t *v)
{
    long long x = PyLong_AsLongLong(o);
    if (x == -1 && PyErr_Occurred())
        return -1;
    *v = x;
    return 0;
}

static int nargs(Py_ssize_t n, Py_ssize_t want, const char *name)
{
    if (n != want) {
        PyErr_Format(PyExc_TypeError, "%s() takes %zd arguments (%zd given)", name, want, n);
        return -1;
    }
    return 0;
}

/* begin a transaction: first without waiting, then, if another process holds the journal
 * lock, with the GIL released */
static int begin(Core *self)
{
    int rc = pxs_coord_journal_lock(self->co, self->c, 0);
    if (rc == RMT_ETIMEDOUT && self->c->timeout > 0) {
        Py_BEGIN_ALLOW_THREADS
        rc = pxs_coord_journal_lock(self->co, self->c, self->c->timeout);
        Py_END_ALLOW_THREADS
    }
    return rc;
}

/* one change in a transaction of its own (or the caller's, if one is open) */
static PyObject *do_op(Core *self, int type, int a16, const uint64_t *u, const void *bytes, size_t nbytes,
                       const char *what)
{
    if (check_open(self))
        return NULL;
    lock_mu(self);
    int rc = begin(self);
    if (rc) {
        unlock_mu(self);
        return fail(self, rc, what);
    }
    rc = rmt_op(self->c, type, a16, u, bytes, nbytes);
    int rc2 = pxs_coord_journal_publish(self->co, self->c);
    unlock_mu(self);
    if (rc || rc2)
        return fail(self, rc ? rc : rc2, what);
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ type */
static void Core_dealloc(Core *self)
{
    Py_CLEAR(self->last);
    if (self->open && !self->owner)
        pxs_coord_journal_close(self->co, self->c);
    self->open = 0;
    pxs_coord_close(self->own_co);
    self->own_co = NULL;
    if (self->mu == &self->own_mu)
        pthread_mutex_destroy(self->mu);
    Py_CLEAR(self->owner);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Core_init(Core *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"path", "sync_path", "shared", "first", "timeout", "coord", NULL};
    const char *path, *sync_path = NULL, *member = NULL;
    int shared = 0, first = 1;
    double timeout = 60.0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s|zppdz", kwlist, &path, &sync_path, &shared, &first, &timeout,
                                     &member))
        return -1;
    if (self->open) {
        PyErr_SetString(PyExc_RuntimeError, "Core already open");
        return -1;
    }
    self->c = &self->own_c;
    self->mu = &self->own_mu;
    pthread_mutexattr_t at;
    pthread_mutexattr_init(&at);
    pthread_mutexattr_settype(&at, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(self->mu, &at);
    pthread_mutexattr_destroy(&at);
    pxs_coord_close(self->own_co);       /* the member (default "host") over these files (store/coord.h) */
    self->own_co = NULL;
    int crc = pxs_coord_files(member, path, sync_path, NULL, timeout, &self->own_co);
    if (crc != PXS_OK) {
        if (crc == PXS_ENOSYS)
            PyErr_Format(error_class ? error_class : PyExc_RuntimeError, "unknown coordination member '%s'", member);
        else
            PyErr_NoMemory();
        return -1;
    }
    self->co = self->own_co;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pxs_coord_journal_open(self->co, self->c, shared, first);
    Py_END_ALLOW_THREADS
    if (rc) {
        PyObject *cls = error_class ? error_class : PyExc_RuntimeError;
        if (rc == RMT_ECORRUPT)
            PyErr_Format(cls, "replica mapping table (RMT) %s is damaged or not an RMT journal", path);
        else if (rc == RMT_EIO)
            PyErr_Format(cls, "replica mapping table (RMT) %s: %s", path, strerror(errno));
        else if (rc == RMT_ENOMEM)
            PyErr_NoMemory();
        else
            PyErr_Format(cls, "replica mapping table (RMT) %s cannot be opened (code %d)", path, rc);
        return -1;
    }
    self->open = 1;
    return 0;
}

/* segments -> None | (r, delta) | [(s, t, r, delta, choice), ...] */
static PyObject *segs_result(Core *self, const rmt_seg *sg, int n)
{
    if (n == 0)
        Py_RETURN_NONE;
    if (n == 1 && !sg[0].choice) {
        if (sg[0].r == 0)
            Py_RETURN_NONE;
        /* the hot case (a request inside one replica extent): the same tuple as last time
         * when the copy and shift are the same (a CEDA replica: always), else a new one */
        PyObject *l = self->last;
        if (l && PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(l, 0)) == sg[0].r
            && PyLong_AsLongLong(PyTuple_GET_ITEM(l, 1)) == sg[0].delta) {
            Py_INCREF(l);
            return l;
        }
        PyObject *t = PyTuple_New(2), *r = PyLong_FromUnsignedLongLong(sg[0].r), *d = PyLong_FromLongLong(sg[0].delta);
        if (!t || !r || !d) {
            Py_XDECREF(t);
            Py_XDECREF(r);
            Py_XDECREF(d);
            return NULL;
        }
        PyTuple_SET_ITEM(t, 0, r);
        PyTuple_SET_ITEM(t, 1, d);
        Py_INCREF(t);
        Py_XSETREF(self->last, t);
        return t;
    }
    PyObject *out = PyList_New(n);
    if (!out)
        return NULL;
    for (int i = 0; i < n; i++) {
        PyObject *t = Py_BuildValue("(LLKLi)", (long long)sg[i].s, (long long)sg[i].t, (unsigned long long)sg[i].r,
                                    (long long)sg[i].delta, sg[i].choice);
        if (!t) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, t);
    }
    return out;
}

#define NSEG 64

static PyObject *route_or_write(Core *self, PyObject *const *args, Py_ssize_t n, int write)
{
    uint64_t o;
    int64_t x, e;
    if (nargs(n, 3, write ? "write" : "route") || get_u64(args[0], &o) || get_i64(args[1], &x)
        || get_i64(args[2], &e) || check_open(self))
        return NULL;
    rmt_seg small[NSEG], *sg = small;
    int max = NSEG, nseg = 0, rc;
    lock_mu(self);
    for (;;) {
        if (write) {
            rc = rmt_write(self->c, o, x, e, sg, max, &nseg, 0);
            if (rc == RMT_ETIMEDOUT && self->c->timeout > 0) {
                Py_BEGIN_ALLOW_THREADS
                rc = rmt_write(self->c, o, x, e, sg, max, &nseg, self->c->timeout);
                Py_END_ALLOW_THREADS
            }
        } else {
            rc = rmt_route(self->c, o, x, e, sg, max, &nseg);
        }
        if (rc != RMT_EMORE)
            break;
        /* a request over many entries: a larger buffer (a write's marks so far are done and
         * not needed again: the second pass finds them DIRTY/STALE) */
        if (sg != small)
            PyMem_Free(sg);
        max *= 8;
        sg = PyMem_Malloc((size_t)max * sizeof *sg);
        if (!sg) {
            unlock_mu(self);
            return PyErr_NoMemory();
        }
    }
    unlock_mu(self);
    PyObject *res = rc ? fail(self, rc, write ? "a write's flag change" : "a lookup") : segs_result(self, sg, nseg);
    if (sg != small)
        PyMem_Free(sg);
    return res;
}

static PyObject *Core_route(Core *self, PyObject *const *args, Py_ssize_t n)
{
    return route_or_write(self, args, n, 0);
}

static PyObject *Core_write(Core *self, PyObject *const *args, Py_ssize_t n)
{
    return route_or_write(self, args, n, 1);
}

/* a yes/no question about [x, e) of original o, asked of the index after catching up */
static PyObject *range_query(Core *self, PyObject *const *args, Py_ssize_t n, const char *name,
                             int (*q)(const rmt_index *, uint64_t, int64_t, int64_t))
{
    uint64_t o;
    int64_t x, e;
    if (nargs(n, 3, name) || get_u64(args[0], &o) || get_i64(args[1], &x) || get_i64(args[2], &e)
        || check_open(self))
        return NULL;
    lock_mu(self);
    int rc = self->c->shared ? pxs_coord_journal_follow(self->co, self->c) : RMT_OK;
    int yes = rc ? 0 : q(&self->c->ix, o, x, e);
    unlock_mu(self);
    if (rc)
        return fail(self, rc, "a lookup");
    return PyBool_FromLong(yes);
}

static PyObject *Core_hits(Core *self, PyObject *const *args, Py_ssize_t n)
{
    return range_query(self, args, n, "hits", rmt_index_hits);
}

static PyObject *Core_all_stale(Core *self, PyObject *const *args, Py_ssize_t n)
{
    return range_query(self, args, n, "all_stale", rmt_all_stale);
}

static PyObject *Core_claim(Core *self, PyObject *const *args, Py_ssize_t n)
{
    uint64_t o, r;
    int64_t x, e;
    if (nargs(n, 4, "claim") || get_u64(args[0], &o) || get_u64(args[1], &r) || get_i64(args[2], &x)
        || get_i64(args[3], &e) || check_open(self))
        return NULL;
    lock_mu(self);
    int rc = begin(self);     /* the journal lock, waited for without the GIL; rmt_claim nests */
    if (rc) {
        unlock_mu(self);
        return fail(self, rc, "a write to a replica's extents");
    }
    rc = rmt_claim(self->c, o, r, x, e, self->c->timeout);
    int rc2 = pxs_coord_journal_publish(self->co, self->c);
    unlock_mu(self);
    if (rc < 0 || rc2)
        return fail(self, rc < 0 ? rc : rc2, "a write to a replica's extents");
    return PyBool_FromLong(rc == 0);
}

static int get_i64_buffer(PyObject *obj, Py_buffer *view)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) != 0)
        return -1;
    if (view->itemsize != 8 || !view->format || !strchr("qlL", view->format[0])) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_TypeError, "expected a contiguous int64 buffer");
        return -1;
    }
    return 0;
}

/* hit_mask(o, offsets, ends) -> bytes: 1 where [offsets[i], ends[i]) overlaps an entry */
static PyObject *Core_hit_mask(Core *self, PyObject *const *args, Py_ssize_t n)
{
    uint64_t o;
    if (nargs(n, 3, "hit_mask") || get_u64(args[0], &o) || check_open(self))
        return NULL;
    Py_buffer a, b;
    if (get_i64_buffer(args[1], &a))
        return NULL;
    if (get_i64_buffer(args[2], &b)) {
        PyBuffer_Release(&a);
        return NULL;
    }
    Py_ssize_t m = a.len / 8;
    PyObject *out = NULL;
    if (b.len / 8 != m) {
        PyErr_SetString(PyExc_ValueError, "offsets and ends differ in length");
        goto done;
    }
    out = PyBytes_FromStringAndSize(NULL, m);
    if (!out)
        goto done;
    char *mask = PyBytes_AS_STRING(out);
    const int64_t *xs = a.buf, *es = b.buf;
    lock_mu(self);
    int rc = self->c->shared ? pxs_coord_journal_follow(self->co, self->c) : RMT_OK;
    for (Py_ssize_t i = 0; !rc && i < m; i++)
        mask[i] = (char)rmt_index_hits(&self->c->ix, o, xs[i], es[i]);
    unlock_mu(self);
    if (rc) {
        Py_CLEAR(out);
        fail(self, rc, "a lookup");
    }
done:
    PyBuffer_Release(&a);
    PyBuffer_Release(&b);
    return out;
}

static PyObject *Core_covers(Core *self, PyObject *const *args, Py_ssize_t n)
{
    uint64_t o;
    int64_t s;
    if (nargs(n, 2, "covers") || get_u64(args[0], &o) || get_i64(args[1], &s) || check_open(self))
        return NULL;
    rmt_cover cov[64];
    lock_mu(self);
    int rc = self->c->shared ? pxs_coord_journal_follow(self->co, self->c) : RMT_OK;
    int k = rc ? 0 : rmt_index_covers(&self->c->ix, o, s, cov, 64);
    unlock_mu(self);
    if (rc)
        return fail(self, rc, "a lookup");
    if (k > 64)
        k = 64;
    PyObject *out = PyList_New(k);
    for (int i = 0; out && i < k; i++) {
        PyObject *t = Py_BuildValue("(KLi)", (unsigned long long)cov[i].r, (long long)cov[i].delta, cov[i].flag);
        if (!t) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, i, t);
    }
    return out;
}

/* ------------------------------------------------------------------ changes */
static PyObject *Core_begin(Core *self, PyObject *unused)
{
    (void)unused;
    if (check_open(self))
        return NULL;
    lock_mu(self);   /* held until commit(): other threads wait for the whole transaction */
    int rc = begin(self);
    if (rc) {
        unlock_mu(self);
        return fail(self, rc, "a transaction");
    }
    Py_RETURN_NONE;
}

static PyObject *Core_commit(Core *self, PyObject *unused)
{
    (void)unused;
    if (check_open(self))
        return NULL;
    if (self->c->depth <= 0)
        return fail(self, RMT_EINVAL, "a commit without a transaction");
    int rc = pxs_coord_journal_publish(self->co, self->c);
    unlock_mu(self);   /* the hold begin() took */
    if (rc)
        return fail(self, rc, "a commit");
    Py_RETURN_NONE;
}

static PyObject *Core_add(Core *self, PyObject *const *args, Py_ssize_t n)
{
    uint64_t u[5];
    int64_t flag;
    if (nargs(n, 6, "add") || get_u64(args[0], &u[0]) || get_u64(args[1], &u[1]) || get_u64(args[2], &u[2])
        || get_u64(args[3], &u[3]) || get_u64(args[4], &u[4]) || get_i64(args[5], &flag))
        return NULL;
    if (flag < 0 || flag >= RMT_NFLAGS)
        return fail(self, RMT_EINVAL, "an entry with a bad flag");
    return do_op(self, REC_ADD, (int)flag, u, NULL, 0, "adding an entry");
}

static PyObject *Core_mark(Core *self, PyObject *const *args, Py_ssize_t n)
{
    uint64_t u[4];
    if (nargs(n, 4, "mark") || get_u64(args[0], &u[0]) || get_u64(args[1], &u[1]) || get_u64(args[2], &u[2])
        || get_u64(args[3], &u[3]))
        return NULL;
    return do_op(self, REC_MARK, 0, u, NULL, 0, "marking a write");
}

static PyObject *Core_set_flag(Core *self, PyObject *const *args, Py_ssize_t n)
{
    uint64_t u[4];
    int64_t old, nw;
    if (nargs(n, 6, "set_flag") || get_u64(args[0], &u[0]) || get_u64(args[1], &u[1]) || get_u64(args[2], &u[2])
        || get_u64(args[3], &u[3]) || get_i64(args[4], &old) || get_i64(args[5], &nw))
        return NULL;
    if (old < 0 || old >= RMT_NFLAGS || nw < 0 || nw >= RMT_NFLAGS)
        return fail(self, RMT_EINVAL, "a bad flag");
    return do_op(self, REC_SETFLAG, (int)(old | nw << 8), u, NULL, 0, "a flag change");
}

static PyObject *Core_trim(Core *self, PyObject *const *args, Py_ssize_t n)
{
    uint64_t u[2];
    if (nargs(n, 2, "trim") || get_u64(args[0], &u[0]) || get_u64(args[1], &u[1]))
        return NULL;
    return do_op(self, REC_TRIM, 0, u, NULL, 0, "trimming entries");
}

static PyObject *Core_grow(Core *self, PyObject *const *args, Py_ssize_t n)
{
    uint64_t u[3];
    if (nargs(n, 3, "grow") || get_u64(args[0], &u[0]) || get_u64(args[1], &u[1]) || get_u64(args[2], &u[2]))
        return NULL;
    return do_op(self, REC_GROW, 0, u, NULL, 0, "growing a full replica");
}

static PyObject *Core_drop(Core *self, PyObject *const *args, Py_ssize_t n)
{
    uint64_t u[1];
    if (nargs(n, 1, "drop") || get_u64(args[0], &u[0]))
        return NULL;
    return do_op(self, REC_DROP, 0, u, NULL, 0, "dropping a replica");
}

static PyObject *Core_register(Core *self, PyObject *const *args, Py_ssize_t n)
{
    uint64_t u[2];
    int64_t mode, route;
    if (nargs(n, 5, "register") || get_u64(args[0], &u[0]) || get_u64(args[1], &u[1]) || get_i64(args[2], &mode)
        || get_i64(args[3], &route))
        return NULL;
    Py_ssize_t len;
    const char *name = PyUnicode_AsUTF8AndSize(args[4], &len);
    if (!name)
        return NULL;
    if (mode < 0 || mode > RMT_FULL || route < 0 || route > RMT_ROUTE_CHEAPEST)
        return fail(self, RMT_EINVAL, "a replica registration");
    return do_op(self, REC_REGISTER, (int)(mode | route << 8), u, name, (size_t)len, "registering a replica");
}

static PyObject *Core_job(Core *self, PyObject *const *args, Py_ssize_t n)
{
    uint64_t u[1];
    int64_t done;
    if (nargs(n, 3, "job") || get_u64(args[0], &u[0]) || get_i64(args[1], &done))
        return NULL;
    Py_ssize_t len;
    const char *spec = PyUnicode_AsUTF8AndSize(args[2], &len);
    if (!spec)
        return NULL;
    return do_op(self, REC_JOB, done ? 1 : 0, u, spec, (size_t)len, "a replicator job");
}

/* ------------------------------------------------------------------ queries */
static int catch_up_locked(Core *self)
{
    int rc = self->c->shared ? pxs_coord_journal_follow(self->co, self->c) : RMT_OK;
    if (rc)
        fail(self, rc, "reading the journal");
    return rc ? -1 : 0;
}

/* a query's start: the core locked and every published record applied (-1: not locked,
 * exception set) */
static int query_begin(Core *self)
{
    if (check_open(self))
        return -1;
    lock_mu(self);
    if (catch_up_locked(self)) {
        unlock_mu(self);
        return -1;
    }
    return 0;
}

/* a query's end: the core unlocked, the list sorted */
static PyObject *query_end_sorted(Core *self, PyObject *out)
{
    unlock_mu(self);
    if (out && PyList_Sort(out))
        Py_CLEAR(out);
    return out;
}

/* entries(o, unclean_only=False, a=0, b=2**63-1) -> [(r, off, len, r_off, flag)] of the
 * entries overlapping [a, b), sorted by (off, r) */
static PyObject *Core_entries(Core *self, PyObject *const *args, Py_ssize_t n)
{
    uint64_t o;
    int only = 0;
    int64_t a = 0, b = INT64_MAX;
    if ((n < 1 || n > 4) || get_u64(args[0], &o) || check_open(self)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "entries(o, unclean_only=False, a=0, b=2**63-1)");
        return NULL;
    }
    if (n >= 2 && (only = PyObject_IsTrue(args[1])) < 0)
        return NULL;
    if ((n >= 3 && get_i64(args[2], &a)) || (n >= 4 && get_i64(args[3], &b)))
        return NULL;
    if (query_begin(self))
        return NULL;
    PyObject *out = PyList_New(0);
    const rmt_ofile *f = rmt_index_file(&self->c->ix, o);
    for (int k = 0; out && f && k < f->nrep; k++) {
        const rmt_rep *p = f->reps[k];
        for (size_t i = rmt_rep_first_after(p, a); i < p->n && p->e[i].off < b; i++) {
            const rmt_ent *c = &p->e[i];
            if (only && RMT_READABLE_CLEAN(c->flag))
                continue;
            PyObject *t = Py_BuildValue("(LKLLi)", (long long)c->off, (unsigned long long)p->r, (long long)c->len,
                                        (long long)(c->off + c->delta), c->flag);
            if (!t || PyList_Append(out, t)) {
                Py_XDECREF(t);
                Py_CLEAR(out);
                break;
            }
            Py_DECREF(t);
        }
    }
    unlock_mu(self);
    if (out && PyList_Sort(out)) {
        Py_CLEAR(out);
        return NULL;
    }
    /* reorder the tuples' fields to (r, off, len, r_off, flag) */
    for (Py_ssize_t i = 0; out && i < PyList_GET_SIZE(out); i++) {
        PyObject *t = PyList_GET_ITEM(out, i);
        PyObject *u = PyTuple_Pack(5, PyTuple_GET_ITEM(t, 1), PyTuple_GET_ITEM(t, 0), PyTuple_GET_ITEM(t, 2),
                                   PyTuple_GET_ITEM(t, 3), PyTuple_GET_ITEM(t, 4));
        if (!u) {
            Py_CLEAR(out);
            break;
        }
        PyList_SetItem(out, i, u);
    }
    return out;
}

/* coverage(r) -> [(off, len)] of replica r's entries */
static PyObject *Core_coverage(Core *self, PyObject *const *args, Py_ssize_t n)
{
    uint64_t r;
    if (nargs(n, 1, "coverage") || get_u64(args[0], &r) || check_open(self))
        return NULL;
    if (query_begin(self))
        return NULL;
    PyObject *out = PyList_New(0);
    const rmt_rep *p = rmt_index_rep(&self->c->ix, r);
    int64_t s = 0, t = -1;
    for (size_t i = 0; out && p && i <= p->n; i++) {
        if (i < p->n && t == p->e[i].off) {
            t += p->e[i].len;
            continue;
        }
        if (t > s) {
            PyObject *x = Py_BuildValue("(LL)", (long long)s, (long long)(t - s));
            if (!x || PyList_Append(out, x))
                Py_CLEAR(out);
            Py_XDECREF(x);
        }
        if (i < p->n) {
            s = p->e[i].off;
            t = s + p->e[i].len;
        }
    }
    unlock_mu(self);
    return out;
}

static PyObject *Core_replicas(Core *self, PyObject *unused)
{
    (void)unused;
    if (query_begin(self))
        return NULL;
    PyObject *out = PyList_New(0);
    const rmt_map *m = &self->c->ix.reps;
    for (size_t i = 0; out && i < m->cap; i++) {
        const rmt_rep *p = m->s[i].val;
        if (!m->s[i].key || !p)
            continue;
        uint64_t bytes = 0;
        for (size_t j = 0; j < p->n; j++)
            bytes += (uint64_t)p->e[j].len;
        PyObject *t = Py_BuildValue("(KKiiisKn)", (unsigned long long)p->r, (unsigned long long)p->o, p->registered,
                                    p->mode, p->route, p->name ? p->name : "", (unsigned long long)bytes,
                                    (Py_ssize_t)p->n);
        if (!t || PyList_Append(out, t))
            Py_CLEAR(out);
        Py_XDECREF(t);
    }
    return query_end_sorted(self, out);
}

static PyObject *Core_jobs(Core *self, PyObject *unused)
{
    (void)unused;
    if (query_begin(self))
        return NULL;
    PyObject *out = PyList_New(0);
    const rmt_map *m = &self->c->ix.jobs;
    for (size_t i = 0; out && i < m->cap; i++) {
        const rmt_job *j = m->s[i].val;
        if (!m->s[i].key || !j)
            continue;
        PyObject *t = Py_BuildValue("(Kis#)", (unsigned long long)j->r, j->done, j->spec, (Py_ssize_t)j->len);
        if (!t || PyList_Append(out, t))
            Py_CLEAR(out);
        Py_XDECREF(t);
    }
    return query_end_sorted(self, out);
}

/* files(unclean_only=False) -> [o] of originals with replicas */
static PyObject *Core_files(Core *self, PyObject *const *args, Py_ssize_t n)
{
    int only = 0;
    if (n > 1 || check_open(self) || (n == 1 && (only = PyObject_IsTrue(args[0])) < 0)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "files(unclean_only=False)");
        return NULL;
    }
    if (query_begin(self))
        return NULL;
    PyObject *out = PyList_New(0);
    const rmt_map *m = &self->c->ix.files;
    for (size_t i = 0; out && i < m->cap; i++) {
        const rmt_ofile *f = m->s[i].val;
        if (!m->s[i].key || !f || (only && !f->nunclean))
            continue;
        PyObject *t = PyLong_FromUnsignedLongLong(f->o);
        if (!t || PyList_Append(out, t))
            Py_CLEAR(out);
        Py_XDECREF(t);
    }
    return query_end_sorted(self, out);
}

/* state(o) -> (nentries, nunclean, cheapest, nreplicas) of one original (after catching up) */
static PyObject *Core_state(Core *self, PyObject *const *args, Py_ssize_t n)
{
    uint64_t o;
    if (nargs(n, 1, "state") || get_u64(args[0], &o) || check_open(self))
        return NULL;
    if (query_begin(self))
        return NULL;
    const rmt_ofile *f = rmt_index_file(&self->c->ix, o);
    size_t ne = 0;
    for (int k = 0; f && k < f->nrep; k++)
        ne += f->reps[k]->n;
    PyObject *t = Py_BuildValue("(nKii)", (Py_ssize_t)ne, (unsigned long long)(f ? f->nunclean : 0),
                                f ? f->cheapest : 0, f ? f->nrep : 0);
    unlock_mu(self);
    return t;
}

static PyObject *Core_stats(Core *self, PyObject *unused)
{
    (void)unused;
    if (query_begin(self))
        return NULL;
    const rmt_core *c = self->c;
    uint64_t synced, epoch;
    int clean, verify;
    rmt_header_state(c, &synced, &epoch, &clean, &verify);
    PyObject *d = Py_BuildValue(
        "{s:K,s:K,s:K,s:K,s:K,s:K,s:n,s:n,s:n,s:K,s:K,s:i,s:i,s:i,s:i,s:s,s:s,s:i,s:K}", "end",
        (unsigned long long)c->log.end, "seq", (unsigned long long)c->log.seq, "synced",
        (unsigned long long)synced, "epoch", (unsigned long long)epoch, "entries",
        (unsigned long long)c->ix.nent, "skipped", (unsigned long long)c->skipped, "files", (Py_ssize_t)c->ix.files.n,
        "replicas", (Py_ssize_t)c->ix.reps.n, "jobs", (Py_ssize_t)c->ix.jobs.n, "regver",
        (unsigned long long)c->ix.regver, "file_bytes", (unsigned long long)c->log.fsize, "clean",
        clean, "prev_clean", c->prev_clean, "prev_other_boot", c->prev_other_boot, "verify",
        verify, "boot_id",
        c->boot_id, "path", c->path, "shared", c->shared, "dead_holders", (unsigned long long)c->dead_holders);
    unlock_mu(self);
    return d;
}

static PyObject *Core_get_regver(Core *self, void *closure)
{
    (void)closure;
    if (check_open(self))
        return NULL;
    lock_mu(self);
    int rc = self->c->shared ? pxs_coord_journal_follow(self->co, self->c) : RMT_OK;
    uint64_t v = self->c->ix.regver;
    unlock_mu(self);
    if (rc)
        return fail(self, rc, "reading the journal");
    return PyLong_FromUnsignedLongLong(v);
}

/* ------------------------------------------------------------------ durability, locks */
static PyObject *Core_sync(Core *self, PyObject *unused)
{
    (void)unused;
    if (check_open(self))
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pxs_coord_journal_sync(self->co, self->c);
    Py_END_ALLOW_THREADS
    if (rc)
        return fail(self, rc, "fdatasync");
    Py_RETURN_NONE;
}

static PyObject *Core_set_clean(Core *self, PyObject *arg)
{
    int v = PyObject_IsTrue(arg);
    if (v < 0 || check_open(self))
        return NULL;
    lock_mu(self);
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pxs_coord_journal_set_clean(self->co, self->c, v);
    Py_END_ALLOW_THREADS
    unlock_mu(self);
    if (rc)
        return fail(self, rc, "marking the journal clean");
    Py_RETURN_NONE;
}

/* a whole-journal operation of the core, under the mutex with the GIL released */
static PyObject *core_op(Core *self, int (*op)(pxs_coord *, rmt_core *), const char *what)
{
    if (check_open(self))
        return NULL;
    lock_mu(self);
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = op(self->co, self->c);
    Py_END_ALLOW_THREADS
    unlock_mu(self);
    if (rc)
        return fail(self, rc, what);
    Py_RETURN_NONE;
}

/* the journal's header: verification done (core/, whatever the coordination) */
static int verified(pxs_coord *co, rmt_core *c)
{
    (void)co;
    return rmt_verified(c);
}

static PyObject *Core_verified(Core *self, PyObject *unused)
{
    (void)unused;
    return core_op(self, verified, "clearing the verification flag");
}

static PyObject *Core_checkpoint(Core *self, PyObject *unused)
{
    (void)unused;
    return core_op(self, pxs_coord_journal_checkpoint, "compacting the journal");
}

/* lock(fid, x, e, exclusive): the store's range lock; waits (GIL released) up to the timeout */
static PyObject *Core_lock(Core *self, PyObject *const *args, Py_ssize_t n)
{
    uint64_t fid;
    int64_t x, e;
    int ex;
    if (nargs(n, 4, "lock") || get_u64(args[0], &fid) || get_i64(args[1], &x) || get_i64(args[2], &e)
        || (ex = PyObject_IsTrue(args[3])) < 0 || check_open(self))
        return NULL;
    int rc = pxs_coord_range_lock(self->co, self->c, fid, x, e, ex, 0);
    if (rc == RMT_ETIMEDOUT && self->c->timeout > 0) {
        Py_BEGIN_ALLOW_THREADS
        rc = pxs_coord_range_lock(self->co, self->c, fid, x, e, ex, self->c->timeout);
        Py_END_ALLOW_THREADS
    }
    if (rc)
        return fail(self, rc, ex ? "the exclusive range lock of a synchronisation"
                                 : "the shared range lock of a write (another process is synchronising it)");
    Py_RETURN_NONE;
}

static PyObject *Core_unlock(Core *self, PyObject *const *args, Py_ssize_t n)
{
    uint64_t fid;
    int64_t x, e;
    if (nargs(n, 3, "unlock") || get_u64(args[0], &fid) || get_i64(args[1], &x) || get_i64(args[2], &e)
        || check_open(self))
        return NULL;
    int rc = pxs_coord_range_unlock(self->co, self->c, fid, x, e);
    if (rc)
        return fail(self, rc, "a range unlock");
    Py_RETURN_NONE;
}

static PyObject *Core_close(Core *self, PyObject *unused)
{
    (void)unused;
    if (self->open) {
        lock_mu(self);
        if (!self->owner)       /* a borrowed RMT is closed with its engine */
            pxs_coord_journal_close(self->co, self->c);
        self->open = 0;
        unlock_mu(self);
    }
    Py_RETURN_NONE;
}

static PyTypeObject CoreType;

PyObject *pyx_rmt_borrow(rmt_core *c, pxs_coord *co, pthread_mutex_t *mu, PyObject *owner)
{
    Core *self = (Core *)CoreType.tp_alloc(&CoreType, 0);
    if (!self)
        return NULL;
    self->c = c;
    self->co = co;
    self->mu = mu;
    Py_INCREF(owner);
    self->owner = owner;
    self->open = 1;
    return (PyObject *)self;
}

void pyx_rmt_disown(PyObject *core)
{
    ((Core *)core)->open = 0;
}

static PyMethodDef Core_methods[] = {
    {"route", (PyCFunction)(void (*)(void))Core_route, METH_FASTCALL,
     "route(o, x, e): None (the original serves [x, e)), (r, delta) (replica r at x + delta) or "
     "[(s, t, r, delta, choice)]"},
    {"write", (PyCFunction)(void (*)(void))Core_write, METH_FASTCALL,
     "write(o, x, e): as route(), after recording the flag changes of a write (MARK)"},
    {"hits", (PyCFunction)(void (*)(void))Core_hits, METH_FASTCALL, "hits(o, x, e): any entry overlaps [x, e)"},
    {"all_stale", (PyCFunction)(void (*)(void))Core_all_stale, METH_FASTCALL,
     "all_stale(o, x, e): every entry overlapping [x, e) is STALE (or there is none)"},
    {"claim", (PyCFunction)(void (*)(void))Core_claim, METH_FASTCALL,
     "claim(o, r, x, e) -> bool: the bytes written to partial replica r's extents become its DIRTY entries "
     "(False: a copy became readable meanwhile, nothing recorded)"},
    {"hit_mask", (PyCFunction)(void (*)(void))Core_hit_mask, METH_FASTCALL,
     "hit_mask(o, offsets, ends) -> bytes of 0/1 (int64 buffers)"},
    {"covers", (PyCFunction)(void (*)(void))Core_covers, METH_FASTCALL,
     "covers(o, s) -> [(r, delta, flag)] of the replicas covering byte s"},
    {"begin", (PyCFunction)Core_begin, METH_NOARGS, "start a transaction (journal lock)"},
    {"commit", (PyCFunction)Core_commit, METH_NOARGS, "publish the transaction's records, release the lock"},
    {"add", (PyCFunction)(void (*)(void))Core_add, METH_FASTCALL, "add(o, r, o_off, r_off, length, flag)"},
    {"mark", (PyCFunction)(void (*)(void))Core_mark, METH_FASTCALL, "mark(o, t, a, b)"},
    {"set_flag", (PyCFunction)(void (*)(void))Core_set_flag, METH_FASTCALL, "set_flag(o, r, a, b, old, new)"},
    {"trim", (PyCFunction)(void (*)(void))Core_trim, METH_FASTCALL, "trim(o, size)"},
    {"grow", (PyCFunction)(void (*)(void))Core_grow, METH_FASTCALL, "grow(o, r, end)"},
    {"drop", (PyCFunction)(void (*)(void))Core_drop, METH_FASTCALL, "drop(r)"},
    {"register", (PyCFunction)(void (*)(void))Core_register, METH_FASTCALL, "register(r, o, mode, route, name)"},
    {"job", (PyCFunction)(void (*)(void))Core_job, METH_FASTCALL, "job(r, done, spec)"},
    {"entries", (PyCFunction)(void (*)(void))Core_entries, METH_FASTCALL,
     "entries(o, unclean_only=False, a=0, b=2**63-1) -> [(r, off, len, r_off, flag)] overlapping [a, b)"},
    {"coverage", (PyCFunction)(void (*)(void))Core_coverage, METH_FASTCALL, "coverage(r) -> [(off, len)]"},
    {"replicas", (PyCFunction)Core_replicas, METH_NOARGS,
     "replicas() -> [(r, o, registered, mode, route, name, bytes, entries)]"},
    {"jobs", (PyCFunction)Core_jobs, METH_NOARGS, "jobs() -> [(r, done, spec)]"},
    {"files", (PyCFunction)(void (*)(void))Core_files, METH_FASTCALL, "files(unclean_only=False) -> [o]"},
    {"state", (PyCFunction)(void (*)(void))Core_state, METH_FASTCALL,
     "state(o) -> (entries, unclean, cheapest, replicas)"},
    {"stats", (PyCFunction)Core_stats, METH_NOARGS, "journal and table statistics"},
    {"sync", (PyCFunction)Core_sync, METH_NOARGS, "fdatasync the journal"},
    {"set_clean", (PyCFunction)Core_set_clean, METH_O, "mark the journal closed cleanly (durable) or not"},
    {"verified", (PyCFunction)Core_verified, METH_NOARGS,
     "the power-loss verification is complete and durable: clear the header's verify flag"},
    {"checkpoint", (PyCFunction)Core_checkpoint, METH_NOARGS, "rewrite the journal as its state (alone only)"},
    {"lock", (PyCFunction)(void (*)(void))Core_lock, METH_FASTCALL, "lock(fid, x, e, exclusive)"},
    {"unlock", (PyCFunction)(void (*)(void))Core_unlock, METH_FASTCALL, "unlock(fid, x, e)"},
    {"close", (PyCFunction)Core_close, METH_NOARGS, "close the journal"},
    {NULL, NULL, 0, NULL}};

static PyObject *Core_get_follow(Core *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(self->c->follow);
}

static int Core_set_follow(Core *self, PyObject *v, void *closure)
{
    (void)closure;
    int b = v ? PyObject_IsTrue(v) : -1;
    if (b < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "follow must be a bool");
        return -1;
    }
    self->c->follow = b;
    return 0;
}

static PyGetSetDef Core_getset[] = {
    {"regver", (getter)Core_get_regver, NULL, "registration version (changes when replicas come or go)", NULL},
    {"follow", (getter)Core_get_follow, (setter)Core_set_follow,
     "reads apply other processes' records first (default True; a negative control in tests turns it off)", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject CoreType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pario.native._rmt.Core",
    .tp_basicsize = sizeof(Core),
    .tp_dealloc = (destructor)Core_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The replica mapping table of a store (journal + in-memory index)",
    .tp_methods = Core_methods,
    .tp_getset = Core_getset,
    .tp_init = (initproc)Core_init,
    .tp_new = PyType_GenericNew,
};

PyObject *pyx_error_class(void)
{
    return error_class;
}

static PyObject *set_error_class(PyObject *mod, PyObject *cls)
{
    (void)mod;
    Py_XINCREF(cls);
    Py_XSETREF(error_class, cls);
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"set_error_class", set_error_class, METH_O, "the exception class raised for RMT errors"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "_rmt", "pario's RMT core (C)", -1, module_methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__rmt(void)
{
    if (PyType_Ready(&CoreType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&moddef);
    if (!m)
        return NULL;
    Py_INCREF(&CoreType);
    if (PyModule_AddObject(m, "Core", (PyObject *)&CoreType) < 0) {
        Py_DECREF(&CoreType);
        Py_DECREF(m);
        return NULL;
    }
    PyModule_AddIntConstant(m, "CLEAN", RMT_CLEAN);
    PyModule_AddIntConstant(m, "DIRTY", RMT_DIRTY);
    PyModule_AddIntConstant(m, "STALE", RMT_STALE);
    PyModule_AddIntConstant(m, "COPYING", RMT_COPYING);
    PyModule_AddIntConstant(m, "FRESH", RMT_FRESH);
    PyModule_AddIntConstant(m, "PARTIAL", RMT_PARTIAL);
    PyModule_AddIntConstant(m, "FULL", RMT_FULL);
    PyModule_AddIntConstant(m, "ROUTE_REPLICA", RMT_ROUTE_REPLICA);
    PyModule_AddIntConstant(m, "ROUTE_CHEAPEST", RMT_ROUTE_CHEAPEST);
    PyModule_AddIntConstant(m, "VERSION", RMT_VERSION);
    if (pyx_meta_register(m) < 0 || pyx_store_register(m) < 0 || pyx_coord_register(m) < 0
        || pyx_orders_register(m) < 0 || pyx_layout_register(m) < 0) {   /* metadata, the store engine, its store
                                                   lock, the collective orders, the layout mapping */
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
