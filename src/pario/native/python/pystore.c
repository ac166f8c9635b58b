/* pario.native._rmt.Engine: the store engine (store/redirect.h, store/storefile.h) as Python
 * types, for pario.store -- one implementation of the store's data path for the Python store
 * and the C runtime of MPI programs (issue 25).
 *
 *   Engine(root, shared=False, direct=False)   an open store (PXS_HOLD: the Python store
 *       drives recovery, sharing and the last close); .first, .core() and .meta() (the
 *       engine's own RMT and metadata, borrowed), open(name) -> File, sfile(name) -> SFile,
 *       copy(src, so, dst, do, len), recover(), share(), alone(), close_alone(), flush_all(),
 *       finalize_sizes(), settle_fresh(), set_cost(fn), close()
 *   File   a redirected file (store/redirect.h: RMT redirection, hybrid routing, flush,
 *          lazy synchronisation)
 *   SFile  a store file's own data (store/storefile.h: layout, data files, sizes)
 *
 * Every call releases the GIL (the engine serialises calls on one store with its mutex and may
 * wait for other processes' locks).  Vectors are int64 buffers (numpy arrays).  Errors are
 * pario.ParioError with the engine's one-line message. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "python/bindings.h"
#include "store/redirect.h"

typedef struct {
    PyObject_HEAD
    pxs_store *st;
    PyObject *core, *meta;   /* borrowed views, made on first use */
    PyObject *cost;          /* cost(file_id, offset, length) -> float, or NULL */
    int abandoned;           /* abandon(): as a process that died (tests): never closed, never freed */
    char err[PXS_ERRLEN];
} Engine;

typedef struct {
    PyObject_HEAD
    Engine *eng;
    pxs_file *f;
} File;

typedef struct {
    PyObject_HEAD
    Engine *eng;
    pxs_sfile *h;
} SFile;

static PyTypeObject EngineType, FileType, SFileType;

static PyObject *fail_msg(const char *msg)
{
    PyObject *cls = pyx_error_class();
    PyErr_SetString(cls ? cls : PyExc_RuntimeError, msg);
    return NULL;
}

static PyObject *fail_st(Engine *e)
{
    if (PyErr_Occurred())      /* a Python cost function raised */
        return NULL;
    return fail_msg(e->st ? pxs_store_error(e->st) : "the store is closed");
}

static int engine_open(Engine *e)
{
    if (!e->st) {
        fail_msg("the store is closed");
        return -1;
    }
    return 0;
}

/* an int64 vector argument: a C-contiguous buffer of 8-byte integers */
static int vec(PyObject *o, Py_buffer *b, const char *what)
{
    if (PyObject_GetBuffer(o, b, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return -1;
    if (b->itemsize != 8 || !b->format || !strchr("qlQL", b->format[0])) {
        PyBuffer_Release(b);
        PyErr_Format(PyExc_TypeError, "%s must be an int64 array", what);
        return -1;
    }
    return 0;
}

#define CALL(rc, EXPR)                                                                                       \
    do {                                                                                                     \
        Py_BEGIN_ALLOW_THREADS                                                                               \
        rc = (EXPR);                                                                                         \
        Py_END_ALLOW_THREADS                                                                                 \
    } while (0)

/* a storefile.h call: under the store's mutex (redirect.h's calls take it themselves) */
#define SCALL(eng, rc, EXPR)                                                                                 \
    do {                                                                                                     \
        Py_BEGIN_ALLOW_THREADS                                                                               \
        pthread_mutex_lock(&(eng)->st->mu);                                                                  \
        rc = (EXPR);                                                                                         \
        pthread_mutex_unlock(&(eng)->st->mu);                                                                \
        Py_END_ALLOW_THREADS                                                                                 \
    } while (0)

/* ------------------------------------------------------------------ Engine */
static int cost_trampoline(void *ctx, int64_t file_id, int64_t off, int64_t len, double *cost)
{
    Engine *e = ctx;
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *r = PyObject_CallFunction(e->cost, "LLL", (long long)file_id, (long long)off, (long long)len);
    int rc = PXS_OK;
    if (!r) {
        rc = PXS_EINVAL;
        snprintf(e->st->err, sizeof e->st->err, "the routing cost function raised");
    } else {
        *cost = PyFloat_AsDouble(r);
        if (PyErr_Occurred())
            rc = PXS_EINVAL;
        Py_DECREF(r);
    }
    PyGILState_Release(g);
    return rc;
}

static int Engine_init(Engine *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"root", "shared", "direct", "timeout", "unverified_ok", NULL};
    const char *root;
    int shared = 0, direct = 0, unverified = 0;
    double timeout = pxs_store_timeout();
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s|ppdp", kwlist, &root, &shared, &direct, &timeout, &unverified))
        return -1;
    if (self->st) {
        PyErr_SetString(PyExc_RuntimeError, "Engine already open");
        return -1;
    }
    int flags = PXS_HOLD | PXS_NORECOVER | (shared ? PXS_SHARED : 0) | (direct ? PXS_DIRECT : 0) |
                (unverified ? PXS_UNVERIFIED : 0), rc;
    CALL(rc, pxs_store_open_timeout(root, flags, timeout, &self->st, self->err, sizeof self->err));
    if (rc) {
        self->st = NULL;
        fail_msg(self->err);
        return -1;
    }
    return 0;
}

static void engine_drop_views(Engine *self)
{
    if (self->core)
        pyx_rmt_disown(self->core);
    if (self->meta)
        pyx_meta_disown(self->meta);
    Py_CLEAR(self->core);
    Py_CLEAR(self->meta);
}

/* abandon(): what a process killed now leaves (crash tests in one process): the store's lock
 * released, nothing flushed, closed or committed, ever; the engine unusable from here on */
static PyObject *Engine_abandon(Engine *self, PyObject *unused)
{
    (void)unused;
    if (!self->st)
        Py_RETURN_NONE;
    engine_drop_views(self);
    pxs_coord_release(self->st->co);     /* the store lock dropped, as a dead process's */
    self->abandoned = 1;
    self->st = NULL;         /* leaked on purpose: a dead process frees nothing either */
    Py_RETURN_NONE;
}

static PyObject *Engine_close(Engine *self, PyObject *unused)
{
    (void)unused;
    if (!self->st)
        Py_RETURN_NONE;
    engine_drop_views(self);
    pxs_store *st = self->st;
    self->st = NULL;
    int rc;
    CALL(rc, pxs_store_close(st, self->err, sizeof self->err));
    if (rc)
        return fail_msg(self->err);
    Py_RETURN_NONE;
}

static void Engine_dealloc(Engine *self)
{
    if (self->st) {
        engine_drop_views(self);
        pxs_store_close(self->st, self->err, sizeof self->err);
        self->st = NULL;
    }
    Py_CLEAR(self->cost);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Engine_core(Engine *self, PyObject *unused)
{
    (void)unused;
    if (engine_open(self))
        return NULL;
    if (!self->core && !(self->core = pyx_rmt_borrow(&self->st->rmt, self->st->co, &self->st->mu, (PyObject *)self)))
        return NULL;
    return Py_NewRef(self->core);
}

static PyObject *Engine_meta(Engine *self, PyObject *unused)
{
    (void)unused;
    if (engine_open(self))
        return NULL;
    if (!self->meta && !(self->meta = pyx_meta_borrow(&self->st->meta, &self->st->mu, (PyObject *)self)))
        return NULL;
    return Py_NewRef(self->meta);
}

/* one store-level step: rc = FN(st) */
static PyObject *step(Engine *self, int (*fn)(pxs_store *))
{
    if (engine_open(self))
        return NULL;
    int rc;
    CALL(rc, fn(self->st));
    if (rc)
        return fail_st(self);
    Py_RETURN_NONE;
}

static PyObject *Engine_recover(Engine *self, PyObject *u) { (void)u; return step(self, pxs_store_recover); }
static PyObject *Engine_share(Engine *self, PyObject *u) { (void)u; return step(self, pxs_store_share); }
static PyObject *Engine_close_alone(Engine *self, PyObject *u) { (void)u; return step(self, pxs_store_close_alone); }
static PyObject *Engine_flush_all(Engine *self, PyObject *u) { (void)u; return step(self, pxs_store_flush); }
static int finalize_locked(pxs_store *st)
{
    pthread_mutex_lock(&st->mu);
    int rc = pxs_store_finalize_sizes(st);
    pthread_mutex_unlock(&st->mu);
    return rc;
}

static PyObject *Engine_finalize_sizes(Engine *self, PyObject *u) { (void)u; return step(self, finalize_locked); }
static PyObject *Engine_settle_fresh(Engine *self, PyObject *u) { (void)u; return step(self, pxs_store_settle_fresh); }

static PyObject *Engine_alone(Engine *self, PyObject *unused)
{
    (void)unused;
    if (engine_open(self))
        return NULL;
    return PyBool_FromLong(pxs_store_alone(self->st));
}

/* set_lazy(on): hybrid replicas synchronised in the background (default) or only by flush */
static PyObject *Engine_set_lazy(Engine *self, PyObject *on)
{
    int v = PyObject_IsTrue(on);
    if (v < 0 || engine_open(self))
        return NULL;
    pxs_store_set_lazy(self->st, v);
    Py_RETURN_NONE;
}

static PyObject *Engine_set_cost(Engine *self, PyObject *fn)
{
    if (engine_open(self))
        return NULL;
    if (fn == Py_None) {
        pxs_store_set_cost(self->st, NULL, NULL);
        Py_CLEAR(self->cost);
    } else {
        Py_INCREF(fn);
        Py_XSETREF(self->cost, fn);
        pxs_store_set_cost(self->st, cost_trampoline, self);
    }
    Py_RETURN_NONE;
}

static PyObject *Engine_open(Engine *self, PyObject *args)
{
    const char *name;
    if (!PyArg_ParseTuple(args, "s", &name) || engine_open(self))
        return NULL;
    pxs_file *f = NULL;
    int rc;
    CALL(rc, pxs_open(self->st, name, &f));
    if (rc)
        return fail_st(self);
    File *o = PyObject_New(File, &FileType);
    if (!o) {
        pxs_close(f);
        return NULL;
    }
    Py_INCREF(self);
    o->eng = self;
    o->f = f;
    return (PyObject *)o;
}

static PyObject *Engine_sfile(Engine *self, PyObject *args)
{
    const char *name;
    if (!PyArg_ParseTuple(args, "s", &name) || engine_open(self))
        return NULL;
    pxs_sfile *h = NULL;
    int rc;
    SCALL(self, rc, pxs_sfile_open(self->st, name, &h));
    if (rc)
        return fail_st(self);
    SFile *o = PyObject_New(SFile, &SFileType);
    if (!o) {
        pthread_mutex_lock(&self->st->mu);
        pxs_sfile_close(h);
        pthread_mutex_unlock(&self->st->mu);
        return NULL;
    }
    Py_INCREF(self);
    o->eng = self;
    o->h = h;
    return (PyObject *)o;
}

static int sfile_ok(SFile *s)
{
    if (!s->h || !s->eng->st) {
        fail_msg("the store file is closed");
        return -1;
    }
    return 0;
}

/* copy(src, so, dst, do, len): ranges [so[k], +len[k]) of SFile src to do[k] of SFile dst */
static PyObject *Engine_copy(Engine *self, PyObject *args)
{
    SFile *src, *dst;
    PyObject *so, *dof, *len;
    if (!PyArg_ParseTuple(args, "O!OO!OO", &SFileType, &src, &so, &SFileType, &dst, &dof, &len) || sfile_ok(src)
        || sfile_ok(dst))
        return NULL;
    Py_buffer a, b, c;
    if (vec(so, &a, "src offsets"))
        return NULL;
    if (vec(dof, &b, "dst offsets")) {
        PyBuffer_Release(&a);
        return NULL;
    }
    if (vec(len, &c, "lengths")) {
        PyBuffer_Release(&a);
        PyBuffer_Release(&b);
        return NULL;
    }
    int64_t n = (int64_t)(a.len / 8);
    int rc = PXS_OK;
    if (b.len / 8 != n || c.len / 8 != n)
        PyErr_SetString(PyExc_ValueError, "copy: vectors of different lengths");
    else
        SCALL(self, rc, pxs_sfile_copy(src->h, a.buf, dst->h, b.buf, c.buf, n));
    PyBuffer_Release(&a);
    PyBuffer_Release(&b);
    PyBuffer_Release(&c);
    if (PyErr_Occurred())
        return NULL;
    if (rc)
        return fail_st(self);
    Py_RETURN_NONE;
}

/* cost(sfile, offset, length) -> the routing cost of hybrid replication (the profile's, or set_cost's) */
static PyObject *Engine_cost(Engine *self, PyObject *args)
{
    SFile *sf;
    long long off, len;
    if (!PyArg_ParseTuple(args, "O!LL", &SFileType, &sf, &off, &len) || sfile_ok(sf))
        return NULL;
    double c = 0;
    int rc;
    SCALL(self, rc, pxs_cost(self->st, sf->h, off, len, &c));   /* a set_cost function takes the GIL back */
    if (rc)
        return fail_st(self);
    return PyFloat_FromDouble(c);
}

static PyObject *Engine_get_first(Engine *self, void *c)
{
    (void)c;
    return PyBool_FromLong(self->st && self->st->first);
}

static PyObject *Engine_get_open(Engine *self, void *c)
{
    (void)c;
    return PyBool_FromLong(self->st != NULL);
}

static PyObject *Engine_get_timeout(Engine *self, void *c)
{
    (void)c;
    if (!self->st) {
        PyErr_SetString(PyExc_ValueError, "the store is closed");
        return NULL;
    }
    return PyFloat_FromDouble(self->st->timeout);
}

static PyMethodDef Engine_methods[] = {
    {"core", (PyCFunction)Engine_core, METH_NOARGS, "the store's RMT (a Core over the engine's)"},
    {"meta", (PyCFunction)Engine_meta, METH_NOARGS, "the store's metadata (a Meta over the engine's)"},
    {"open", (PyCFunction)Engine_open, METH_VARARGS, "open(name) -> File (redirected)"},
    {"sfile", (PyCFunction)Engine_sfile, METH_VARARGS, "sfile(name) -> SFile (the file's own data)"},
    {"copy", (PyCFunction)Engine_copy, METH_VARARGS, "copy(src, so, dst, do, len)"},
    {"recover", (PyCFunction)Engine_recover, METH_NOARGS, "a first opener's recovery (store/redirect.c recover)"},
    {"share", (PyCFunction)Engine_share, METH_NOARGS, "final sizes, then share the store (after a held first open)"},
    {"alone", (PyCFunction)Engine_alone, METH_NOARGS, "whether this process can have the store to itself now"},
    {"close_alone", (PyCFunction)Engine_close_alone, METH_NOARGS, "the last process out's work"},
    {"flush_all", (PyCFunction)Engine_flush_all, METH_NOARGS, "flush every file with unclean RMT entries"},
    {"finalize_sizes", (PyCFunction)Engine_finalize_sizes, METH_NOARGS, "commit every dirty file's size"},
    {"settle_fresh", (PyCFunction)Engine_settle_fresh, METH_NOARGS, "FRESH replicas fsynced, then CLEAN"},
    {"set_lazy", (PyCFunction)Engine_set_lazy, METH_O, "set_lazy(on): background synchronisation of hybrid replicas"},
    {"cost", (PyCFunction)Engine_cost, METH_VARARGS, "cost(sfile, offset, length) -> routing cost"},
    {"set_cost", (PyCFunction)Engine_set_cost, METH_O, "set_cost(fn(file_id, offset, length) -> float | None)"},
    {"close", (PyCFunction)Engine_close, METH_NOARGS, "close the store (no last-closer work: close_alone)"},
    {"abandon", (PyCFunction)Engine_abandon, METH_NOARGS, "what a killed process leaves (crash tests)"},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef Engine_getset[] = {
    {"first", (getter)Engine_get_first, NULL, "this process opened the store first (alone: it recovers)", NULL},
    {"open_", (getter)Engine_get_open, NULL, "the store is open", NULL},
    {"timeout", (getter)Engine_get_timeout, NULL,
     "the bound of every wait, seconds: the one asked for, raised by the coordination member where it must be", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject EngineType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pario.native._rmt.Engine",
    .tp_basicsize = sizeof(Engine),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Engine(root, shared=False, direct=False, timeout=$PARIO_STORE_TIMEOUT): an open store (store/redirect.h)",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Engine_init,
    .tp_dealloc = (destructor)Engine_dealloc,
    .tp_methods = Engine_methods,
    .tp_getset = Engine_getset,
};

/* ------------------------------------------------------------------ File */
static int file_ok(File *f)
{
    if (!f->f || !f->eng->st) {
        fail_msg("the file is closed");
        return -1;
    }
    return 0;
}

static void File_dealloc(File *self)
{
    if (self->f && self->eng->st)
        pxs_close(self->f);
    self->f = NULL;
    Py_CLEAR(self->eng);
    PyObject_Free(self);
}

/* readinto(offset, buffer) -> bytes inside the file (the rest of the buffer: zeros) */
static PyObject *File_readinto(File *self, PyObject *args)
{
    long long off;
    Py_buffer b;
    if (!PyArg_ParseTuple(args, "Lw*", &off, &b))
        return NULL;
    if (file_ok(self)) {
        PyBuffer_Release(&b);
        return NULL;
    }
    int64_t got = 0;
    int rc;
    CALL(rc, pxs_read(self->f, off, b.buf, b.len, &got));
    PyBuffer_Release(&b);
    if (rc)
        return fail_st(self->eng);
    return PyLong_FromLongLong(got);
}

static PyObject *File_write(File *self, PyObject *args)
{
    long long off;
    Py_buffer b;
    if (!PyArg_ParseTuple(args, "Ly*", &off, &b))
        return NULL;
    if (file_ok(self)) {
        PyBuffer_Release(&b);
        return NULL;
    }
    int rc;
    CALL(rc, pxs_write(self->f, off, b.buf, b.len));
    Py_ssize_t n = b.len;
    PyBuffer_Release(&b);
    if (rc)
        return fail_st(self->eng);
    return PyLong_FromSsize_t(n);
}

/* readv / writev (offsets, lengths, buffer, buffer_offsets) */
static PyObject *vector_io(File *fo, SFile *so, PyObject *args, int write)
{
    PyObject *o, *l, *bo, *buf;
    if (!PyArg_ParseTuple(args, "OOOO", &o, &l, &buf, &bo))
        return NULL;
    if (fo ? file_ok(fo) : sfile_ok(so))
        return NULL;
    Py_buffer a, b, c, d;
    if (vec(o, &a, "offsets"))
        return NULL;
    if (vec(l, &b, "lengths")) {
        PyBuffer_Release(&a);
        return NULL;
    }
    if (vec(bo, &c, "buffer offsets")) {
        PyBuffer_Release(&a);
        PyBuffer_Release(&b);
        return NULL;
    }
    if (PyObject_GetBuffer(buf, &d, write ? PyBUF_SIMPLE : PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&a);
        PyBuffer_Release(&b);
        PyBuffer_Release(&c);
        return NULL;
    }
    int64_t n = (int64_t)(a.len / 8);
    const int64_t *off = a.buf, *len = b.buf, *bof = c.buf;
    int rc = PXS_OK, bad = b.len / 8 != n || c.len / 8 != n;
    for (int64_t k = 0; !bad && k < n; k++)
        bad = len[k] < 0 || bof[k] < 0 || bof[k] + len[k] > (int64_t)d.len;
    if (bad)
        PyErr_SetString(PyExc_ValueError, "vectored I/O: vectors of different lengths, or a range outside the buffer");
    else if (fo)
        CALL(rc, write ? pxs_writev(fo->f, n, off, len, d.buf, bof) : pxs_readv(fo->f, n, off, len, d.buf, bof));
    else
        SCALL(so->eng, rc, write ? pxs_sfile_writev(so->h, n, off, len, d.buf, bof) : pxs_sfile_readv(so->h, n, off, len, d.buf, bof));
    PyBuffer_Release(&a);
    PyBuffer_Release(&b);
    PyBuffer_Release(&c);
    PyBuffer_Release(&d);
    if (bad)
        return NULL;
    if (rc)
        return fail_st(fo ? fo->eng : so->eng);
    Py_RETURN_NONE;
}

static PyObject *File_readv(File *self, PyObject *args) { return vector_io(self, NULL, args, 0); }
static PyObject *File_writev(File *self, PyObject *args) { return vector_io(self, NULL, args, 1); }

static PyObject *File_truncate(File *self, PyObject *args)
{
    long long size;
    if (!PyArg_ParseTuple(args, "L", &size) || file_ok(self))
        return NULL;
    int rc;
    CALL(rc, pxs_truncate(self->f, size));
    if (rc)
        return fail_st(self->eng);
    Py_RETURN_NONE;
}

static PyObject *File_resized(File *self, PyObject *args)
{
    long long size;
    if (!PyArg_ParseTuple(args, "L", &size) || file_ok(self))
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    pxs_resized(self->f, size);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

/* current_size(): the size including other processes' writes (shared store) */
static PyObject *File_current_size(File *self, PyObject *unused)
{
    (void)unused;
    if (file_ok(self))
        return NULL;
    int64_t size = 0;
    int rc;
    CALL(rc, pxs_size(self->f, &size));
    if (rc)
        return fail_st(self->eng);
    return PyLong_FromLongLong(size);
}

static PyObject *file_step(File *self, int (*fn)(pxs_file *))
{
    if (file_ok(self))
        return NULL;
    int rc;
    CALL(rc, fn(self->f));
    if (rc)
        return fail_st(self->eng);
    Py_RETURN_NONE;
}

static PyObject *File_flush(File *self, PyObject *u) { (void)u; return file_step(self, pxs_flush); }
static PyObject *File_fsync(File *self, PyObject *u) { (void)u; return file_step(self, pxs_fsync); }
static PyObject *File_writeback(File *self, PyObject *u) { (void)u; return file_step(self, pxs_writeback); }

static PyObject *File_sync_step(File *self, PyObject *args)
{
    long long chunk = PXS_SYNC_CHUNK;
    if (!PyArg_ParseTuple(args, "|L", &chunk) || file_ok(self))
        return NULL;
    int more = 0, rc;
    CALL(rc, pxs_sync_step(self->f, chunk, &more));
    if (rc)
        return fail_st(self->eng);
    return PyBool_FromLong(more);
}

/* replicate(r, offsets, lengths) -> bytes copied: the replicator's step (pxs_replicate) */
static PyObject *File_replicate(File *self, PyObject *args)
{
    unsigned long long r;
    PyObject *o, *l;
    if (!PyArg_ParseTuple(args, "KOO", &r, &o, &l) || file_ok(self))
        return NULL;
    Py_buffer a, b;
    if (vec(o, &a, "offsets"))
        return NULL;
    if (vec(l, &b, "lengths")) {
        PyBuffer_Release(&a);
        return NULL;
    }
    int64_t n = (int64_t)(a.len / 8), copied = 0;
    int rc = PXS_OK;
    if (b.len / 8 != n)
        PyErr_SetString(PyExc_ValueError, "replicate: offsets and lengths differ in length");
    else
        CALL(rc, pxs_replicate(self->f, r, n, a.buf, b.buf, &copied));
    PyBuffer_Release(&a);
    PyBuffer_Release(&b);
    if (PyErr_Occurred())
        return NULL;
    if (rc)
        return fail_st(self->eng);
    return PyLong_FromLongLong(copied);
}

/* served_by(x, e) -> [(start, end, replica id or 0)] */
static PyObject *File_served_by(File *self, PyObject *args)
{
    long long x, e;
    if (!PyArg_ParseTuple(args, "LL", &x, &e) || file_ok(self))
        return NULL;
    pxs_served *sv = NULL;
    int n = 0, rc;
    CALL(rc, pxs_served_by(self->f, x, e, &sv, &n));
    if (rc) {
        free(sv);
        return fail_st(self->eng);
    }
    PyObject *out = PyList_New(n);
    for (int i = 0; out && i < n; i++) {
        PyObject *t = Py_BuildValue("(LLK)", (long long)sv[i].s, (long long)sv[i].t, (unsigned long long)sv[i].r);
        if (!t) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, i, t);
    }
    free(sv);
    return out;
}

static PyObject *File_close(File *self, PyObject *unused)
{
    (void)unused;
    if (!self->f)
        Py_RETURN_NONE;
    pxs_file *f = self->f;
    self->f = NULL;
    if (!self->eng->st)
        Py_RETURN_NONE;
    int rc;
    CALL(rc, pxs_close(f));
    if (rc)
        return fail_st(self->eng);
    Py_RETURN_NONE;
}

static PyObject *File_stats(File *self, PyObject *unused)
{
    (void)unused;
    if (file_ok(self))
        return NULL;
    const pxs_stats *s = &self->f->stats;
    return Py_BuildValue("{s:K,s:K,s:K,s:K,s:L,s:L,s:L,s:L,s:K,s:L}", "reads", (unsigned long long)s->reads, "writes",
                         (unsigned long long)s->writes, "redirected_reads", (unsigned long long)s->redirected_reads,
                         "redirected_writes", (unsigned long long)s->redirected_writes, "read_original",
                         (long long)s->read_original, "read_replica", (long long)s->read_replica,
                         "written_original", (long long)s->written_original, "written_replica",
                         (long long)s->written_replica, "choices", (unsigned long long)s->choices, "synced",
                         (long long)s->synced);
}

static PyObject *File_get_size(File *self, void *c)
{
    (void)c;
    if (file_ok(self))
        return NULL;
    return PyLong_FromLongLong(self->f->h->size);
}

static PyObject *File_get_fid(File *self, void *c)
{
    (void)c;
    if (file_ok(self))
        return NULL;
    return PyLong_FromLongLong((long long)self->f->fid);
}

static PyMethodDef File_methods[] = {
    {"readinto", (PyCFunction)File_readinto, METH_VARARGS, "readinto(offset, buffer) -> bytes inside the file"},
    {"write", (PyCFunction)File_write, METH_VARARGS, "write(offset, data) -> bytes written"},
    {"readv", (PyCFunction)File_readv, METH_VARARGS, "readv(offsets, lengths, buffer, buffer_offsets)"},
    {"writev", (PyCFunction)File_writev, METH_VARARGS, "writev(offsets, lengths, buffer, buffer_offsets)"},
    {"truncate", (PyCFunction)File_truncate, METH_VARARGS, "truncate(size)"},
    {"resized", (PyCFunction)File_resized, METH_VARARGS, "resized(size): another process set the size"},
    {"current_size", (PyCFunction)File_current_size, METH_NOARGS, "the size with other processes' writes"},
    {"flush", (PyCFunction)File_flush, METH_NOARGS, "DIRTY replica bytes home, STALE replicas refreshed"},
    {"fsync", (PyCFunction)File_fsync, METH_NOARGS, "every byte written so far durable"},
    {"writeback", (PyCFunction)File_writeback, METH_NOARGS, "DIRTY replica bytes to the original only"},
    {"sync_step", (PyCFunction)File_sync_step, METH_VARARGS, "sync_step(chunk) -> unclean entries left"},
    {"stats", (PyCFunction)File_stats, METH_NOARGS, "the file's counters"},
    {"served_by", (PyCFunction)File_served_by, METH_VARARGS, "served_by(x, e) -> [(start, end, replica id or 0)]"},
    {"replicate", (PyCFunction)File_replicate, METH_VARARGS, "replicate(r, offsets, lengths) -> bytes copied"},
    {"close", (PyCFunction)File_close, METH_NOARGS, "flush, then close"},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef File_getset[] = {
    {"size", (getter)File_get_size, NULL, "the size this process knows", NULL},
    {"fid", (getter)File_get_fid, NULL, "the file id", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject FileType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pario.native._rmt.EngineFile",
    .tp_basicsize = sizeof(File),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "a redirected file of an Engine",
    .tp_dealloc = (destructor)File_dealloc,
    .tp_methods = File_methods,
    .tp_getset = File_getset,
};

/* ------------------------------------------------------------------ SFile */
static void SFile_dealloc(SFile *self)
{
    if (self->h && self->eng->st) {
        pthread_mutex_lock(&self->eng->st->mu);
        pxs_sfile_close(self->h);
        pthread_mutex_unlock(&self->eng->st->mu);
    }
    self->h = NULL;
    Py_CLEAR(self->eng);
    PyObject_Free(self);
}

static PyObject *SFile_readv(SFile *self, PyObject *args) { return vector_io(NULL, self, args, 0); }
static PyObject *SFile_writev(SFile *self, PyObject *args) { return vector_io(NULL, self, args, 1); }

/* an int64 argument, one engine call */
static PyObject *sfile_i64(SFile *self, PyObject *args, int (*fn)(pxs_sfile *, int64_t))
{
    long long v;
    if (!PyArg_ParseTuple(args, "L", &v) || sfile_ok(self))
        return NULL;
    int rc;
    SCALL(self->eng, rc, fn(self->h, v));
    if (rc)
        return fail_st(self->eng);
    Py_RETURN_NONE;
}

static int resized_rc(pxs_sfile *h, int64_t size)
{
    pxs_sfile_resized(h, size);
    return PXS_OK;
}

static PyObject *SFile_extend(SFile *self, PyObject *a) { return sfile_i64(self, a, pxs_sfile_extend); }
static PyObject *SFile_reserve(SFile *self, PyObject *a) { return sfile_i64(self, a, pxs_sfile_reserve); }
static PyObject *SFile_truncate(SFile *self, PyObject *a) { return sfile_i64(self, a, pxs_sfile_truncate); }
static PyObject *SFile_resized(SFile *self, PyObject *a) { return sfile_i64(self, a, resized_rc); }

static PyObject *SFile_refresh_size(SFile *self, PyObject *unused)
{
    (void)unused;
    if (sfile_ok(self))
        return NULL;
    int64_t size = 0;
    int rc;
    SCALL(self->eng, rc, pxs_sfile_refresh_size(self->h, &size));
    if (rc)
        return fail_st(self->eng);
    return PyLong_FromLongLong(size);
}

static PyObject *SFile_recovered_size(SFile *self, PyObject *unused)
{
    (void)unused;
    if (sfile_ok(self))
        return NULL;
    int64_t size = 0;
    int rc;
    SCALL(self->eng, rc, pxs_sfile_recovered_size(self->h, &size));
    if (rc)
        return fail_st(self->eng);
    return PyLong_FromLongLong(size);
}

static PyObject *SFile_fsync(SFile *self, PyObject *args)
{
    int everything = 0;
    if (!PyArg_ParseTuple(args, "|p", &everything) || sfile_ok(self))
        return NULL;
    int rc;
    SCALL(self->eng, rc, pxs_sfile_fsync(self->h, everything));
    if (rc)
        return fail_st(self->eng);
    Py_RETURN_NONE;
}

static PyObject *SFile_close(SFile *self, PyObject *unused)
{
    (void)unused;
    if (!self->h)
        Py_RETURN_NONE;
    pxs_sfile *h = self->h;
    self->h = NULL;
    if (!self->eng->st)
        Py_RETURN_NONE;
    int rc;
    SCALL(self->eng, rc, pxs_sfile_close(h));
    if (rc)
        return fail_st(self->eng);
    Py_RETURN_NONE;
}

static PyObject *SFile_get_size(SFile *self, void *c)
{
    (void)c;
    if (sfile_ok(self))
        return NULL;
    return PyLong_FromLongLong(self->h->size);
}

static PyObject *SFile_get_id(SFile *self, void *c)
{
    (void)c;
    if (sfile_ok(self))
        return NULL;
    return PyLong_FromLongLong(self->h->id);
}

static PyMethodDef SFile_methods[] = {
    {"readv", (PyCFunction)SFile_readv, METH_VARARGS, "readv(offsets, lengths, buffer, buffer_offsets): zeros past the data"},
    {"writev", (PyCFunction)SFile_writev, METH_VARARGS, "writev(offsets, lengths, buffer, buffer_offsets)"},
    {"extend", (PyCFunction)SFile_extend, METH_VARARGS, "extend(end): the size grows to end"},
    {"reserve", (PyCFunction)SFile_reserve, METH_VARARGS, "reserve(end): as extend, the data file holds byte end - 1"},
    {"truncate", (PyCFunction)SFile_truncate, METH_VARARGS, "truncate(size)"},
    {"resized", (PyCFunction)SFile_resized, METH_VARARGS, "resized(size): another process set the size"},
    {"refresh_size", (PyCFunction)SFile_refresh_size, METH_NOARGS, "the size as all processes made it"},
    {"fsync", (PyCFunction)SFile_fsync, METH_VARARGS, "fsync(everything=False)"},
    {"recovered_size", (PyCFunction)SFile_recovered_size, METH_NOARGS, "the size the data files hold"},
    {"close", (PyCFunction)SFile_close, METH_NOARGS, "close (the last reference commits the size)"},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef SFile_getset[] = {
    {"size", (getter)SFile_get_size, NULL, "the size this process knows", NULL},
    {"id", (getter)SFile_get_id, NULL, "the file id", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject SFileType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pario.native._rmt.SFile",
    .tp_basicsize = sizeof(SFile),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "a store file's own data, of an Engine",
    .tp_dealloc = (destructor)SFile_dealloc,
    .tp_methods = SFile_methods,
    .tp_getset = SFile_getset,
};

int pyx_store_register(PyObject *module)
{
    PyTypeObject *types[] = {&EngineType, &FileType, &SFileType};
    const char *names[] = {"Engine", "EngineFile", "SFile"};
    for (int i = 0; i < 3; i++) {
        if (PyType_Ready(types[i]) < 0)
            return -1;
        Py_INCREF(types[i]);
        if (PyModule_AddObject(module, names[i], (PyObject *)types[i]) < 0) {
            Py_DECREF(types[i]);
            return -1;
        }
    }
    return 0;
}
