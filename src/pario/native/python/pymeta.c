/* pario.native._rmt.Meta: the store's metadata (store/meta.h) as a Python type, for
 * pario.store.meta -- one implementation of metadata access for the Python store and the C
 * runtime of MPI programs (issue 25: one store engine).
 *
 * Every call takes the object's mutex (the SQLite connection is opened without SQLite's own
 * mutex) and releases the GIL while SQLite works (it may wait up to the busy timeout for
 * another process).  Errors are pario.ParioError with the engine's one-line message. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "python/bindings.h"
#include "store/coord.h"
#include "store/meta.h"

typedef struct {
    PyObject_HEAD
    pxs_meta *m;             /* own_m, or a store engine's (borrowed: pyx_meta_borrow) */
    pthread_mutex_t *mu;     /* own_mu, or the engine's mutex */
    PyObject *owner;         /* borrowed: the engine object, kept alive */
    pxs_meta own_m;
    pthread_mutex_t own_mu;
    int open;
    pxs_coord *co;           /* the member kept open with its database ("rados": the catalog's sink) */
    char err[PXS_ERRLEN];
} Meta;

static void take(Meta *self)
{
    if (pthread_mutex_trylock(self->mu) == 0)
        return;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(self->mu);
    Py_END_ALLOW_THREADS
}

static void give(Meta *self)
{
    pthread_mutex_unlock(self->mu);
}

static PyObject *raise(const char *msg)
{
    PyObject *cls = pyx_error_class();
    PyErr_SetString(cls ? cls : PyExc_RuntimeError, msg);
    return NULL;
}

static int check(Meta *self)
{
    if (!self->open) {
        raise("the metadata database is closed");
        return -1;
    }
    return 0;
}

/* run CALL (an expression using self->m and self->err) under the mutex, GIL released */
#define RUN(rc, CALL)                                                                                        \
    do {                                                                                                     \
        take(self);                                                                                          \
        Py_BEGIN_ALLOW_THREADS                                                                               \
        rc = (CALL);                                                                                         \
        Py_END_ALLOW_THREADS                                                                                 \
        give(self);                                                                                          \
    } while (0)

/* the coordination member of the store whose metadata database is at path: the posix members
 * over that file alone; "rados" keeps the database in RADOS and opens the store (its directory
 * is path's parent: store.json) -- NULL with the Python error set */
static int open_member(const char *member, const char *path, double timeout, pxs_coord **co, char *err, size_t errlen)
{
    *co = NULL;
    int crc;
    const pxs_coord_ops *ops = pxs_coord_member(member);
    if (ops && ops == &pxs_coord_rados) {
        char *root = strdup(path);
        if (!root) {
            PyErr_NoMemory();
            return -1;
        }
        char *slash = strrchr(root, '/');
        if (slash)
            *slash = 0;
        Py_BEGIN_ALLOW_THREADS
        crc = pxs_coord_open(member, slash ? root : ".", timeout, co, err, errlen);
        Py_END_ALLOW_THREADS
        free(root);
        if (crc) {
            if (crc == PXS_ENOMEM)
                PyErr_NoMemory();
            else
                raise(err);
            return -1;
        }
        return 0;
    }
    crc = pxs_coord_files(member, NULL, NULL, path, timeout, co);
    if (crc != PXS_OK) {
        if (crc == PXS_ENOSYS)
            raise("unknown coordination member");
        else
            PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static int Meta_init(Meta *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"path", "timeout", "coord", NULL};
    const char *path, *member = NULL;
    double timeout = 60.0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s|dz", kwlist, &path, &timeout, &member))
        return -1;
    if (self->owner) {
        raise("a borrowed metadata database cannot be reopened");
        return -1;
    }
    if (self->open)
        pxs_meta_close(self->m);
    self->open = 0;
    pxs_coord_close(self->co);
    self->co = NULL;
    pxs_coord *co = NULL;       /* the store's coordination member over this database (store/coord.h) */
    if (open_member(member, path, timeout, &co, self->err, sizeof self->err))
        return -1;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pxs_coord_meta_open(co, self->m, self->err, sizeof self->err);
    Py_END_ALLOW_THREADS
    if (!rc && co->ops == &pxs_coord_rados) {
        self->co = co;          /* the catalog's lines go through it while the database is open */
        co = NULL;
    }
    pxs_coord_close(co);
    if (rc) {
        raise(self->err);
        return -1;
    }
    self->open = 1;
    return 0;
}

static PyObject *Meta_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    (void)args;
    (void)kw;
    Meta *self = (Meta *)type->tp_alloc(type, 0);
    if (self) {
        self->m = &self->own_m;
        self->mu = &self->own_mu;
        pthread_mutex_init(self->mu, NULL);
    }
    return (PyObject *)self;
}

static void Meta_dealloc(Meta *self)
{
    if (self->open && !self->owner)
        pxs_meta_close(self->m);
    pxs_coord_close(self->co);
    if (self->mu == &self->own_mu)
        pthread_mutex_destroy(self->mu);
    Py_CLEAR(self->owner);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Meta_close(Meta *self, PyObject *unused)
{
    (void)unused;
    take(self);
    if (self->open && !self->owner)     /* a borrowed database is closed with its engine */
        pxs_meta_close(self->m);
    self->open = 0;
    pxs_coord_close(self->co);
    self->co = NULL;
    give(self);
    Py_RETURN_NONE;
}

/* create(name, layout_json) -> id */
static PyObject *Meta_create(Meta *self, PyObject *args)
{
    const char *name, *layout;
    if (!PyArg_ParseTuple(args, "ss", &name, &layout) || check(self))
        return NULL;
    int64_t id = 0;
    int rc;
    RUN(rc, pxs_meta_create(self->m, name, layout, &id, self->err, sizeof self->err));
    return rc ? raise(self->err) : PyLong_FromLongLong(id);
}

static PyObject *record(int got, pxs_meta_rec *rec, const char *err)
{
    if (got < 0)
        return raise(err);
    if (got == 0)
        Py_RETURN_NONE;
    PyObject *out = Py_BuildValue("(LssLi)", (long long)rec->id, rec->name, rec->layout, (long long)rec->size,
                                  rec->dirty);
    pxs_meta_rec_free(rec);
    return out;
}

/* get(name) -> (id, name, layout_json, size, dirty) or None */
static PyObject *Meta_get(Meta *self, PyObject *args)
{
    const char *name;
    if (!PyArg_ParseTuple(args, "s", &name) || check(self))
        return NULL;
    pxs_meta_rec rec;
    int got;
    RUN(got, pxs_meta_get(self->m, name, &rec, self->err, sizeof self->err));
    return record(got, &rec, self->err);
}

/* get_id(id) -> (id, name, layout_json, size, dirty) or None */
static PyObject *Meta_get_id(Meta *self, PyObject *args)
{
    long long id;
    if (!PyArg_ParseTuple(args, "L", &id) || check(self))
        return NULL;
    pxs_meta_rec rec;
    int got;
    RUN(got, pxs_meta_get_id(self->m, (int64_t)id, &rec, self->err, sizeof self->err));
    return record(got, &rec, self->err);
}

/* set_size(name, size, dirty); grow_size(name, size) (MAX); set_dirty(name, dirty) */
static PyObject *Meta_set_size(Meta *self, PyObject *args)
{
    const char *name;
    long long size;
    int dirty = 0;
    if (!PyArg_ParseTuple(args, "sL|i", &name, &size, &dirty) || check(self))
        return NULL;
    int rc;
    RUN(rc, pxs_meta_set_size(self->m, name, (int64_t)size, dirty, self->err, sizeof self->err));
    if (rc)
        return raise(self->err);
    Py_RETURN_NONE;
}

static PyObject *Meta_grow_size(Meta *self, PyObject *args)
{
    const char *name;
    long long size;
    if (!PyArg_ParseTuple(args, "sL", &name, &size) || check(self))
        return NULL;
    int rc;
    RUN(rc, pxs_meta_grow_size(self->m, name, (int64_t)size, self->err, sizeof self->err));
    if (rc)
        return raise(self->err);
    Py_RETURN_NONE;
}

static PyObject *Meta_set_dirty(Meta *self, PyObject *args)
{
    const char *name;
    int dirty = 1;
    if (!PyArg_ParseTuple(args, "s|i", &name, &dirty) || check(self))
        return NULL;
    int rc;
    RUN(rc, pxs_meta_set_dirty(self->m, name, dirty, self->err, sizeof self->err));
    if (rc)
        return raise(self->err);
    Py_RETURN_NONE;
}

static PyObject *str_list(char **v, size_t n)
{
    PyObject *out = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; out && i < n; i++) {
        PyObject *s = PyUnicode_DecodeUTF8(v[i], (Py_ssize_t)strlen(v[i]), "surrogateescape");
        if (!s) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, (Py_ssize_t)i, s);
    }
    return out;
}

/* dirty_names() -> [name] */
static PyObject *Meta_dirty_names(Meta *self, PyObject *unused)
{
    (void)unused;
    if (check(self))
        return NULL;
    char **v = NULL;
    size_t n = 0;
    int rc;
    RUN(rc, pxs_meta_dirty_names(self->m, &v, &n, self->err, sizeof self->err));
    PyObject *out = rc ? raise(self->err) : str_list(v, n);
    pxs_strv_free(v, n);
    return out;
}

/* list() -> [(id, name)] by name */
static PyObject *Meta_list(Meta *self, PyObject *unused)
{
    (void)unused;
    if (check(self))
        return NULL;
    int64_t *ids = NULL;
    char **names = NULL;
    size_t n = 0;
    int rc;
    RUN(rc, pxs_meta_list(self->m, &ids, &names, &n, self->err, sizeof self->err));
    PyObject *out = rc ? raise(self->err) : PyList_New((Py_ssize_t)n);
    for (size_t i = 0; !rc && out && i < n; i++) {
        PyObject *t = Py_BuildValue("(Ls)", (long long)ids[i], names[i]);
        if (!t) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, (Py_ssize_t)i, t);
    }
    free(ids);
    pxs_strv_free(names, n);
    return out;
}

/* delete(name) -> True if there was such a file */
static PyObject *Meta_delete(Meta *self, PyObject *args)
{
    const char *name;
    if (!PyArg_ParseTuple(args, "s", &name) || check(self))
        return NULL;
    int rc;
    RUN(rc, pxs_meta_delete(self->m, name, self->err, sizeof self->err));
    return rc < 0 ? raise(self->err) : PyBool_FromLong(rc);
}

static PyObject *Meta_rename(Meta *self, PyObject *args)
{
    const char *old, *new_name;
    if (!PyArg_ParseTuple(args, "ss", &old, &new_name) || check(self))
        return NULL;
    int rc;
    RUN(rc, pxs_meta_rename(self->m, old, new_name, self->err, sizeof self->err));
    if (rc)
        return raise(self->err);
    Py_RETURN_NONE;
}

static PyObject *Meta_top_id(Meta *self, PyObject *unused)
{
    (void)unused;
    if (check(self))
        return NULL;
    int64_t v;
    RUN(v, pxs_meta_top_id(self->m, self->err, sizeof self->err));
    return v < 0 ? raise(self->err) : PyLong_FromLongLong(v);
}

/* switch(name, old_id, new_id, size, [(id, new_name)]) */
static PyObject *Meta_switch(Meta *self, PyObject *args)
{
    const char *name;
    long long old_id, new_id, size;
    PyObject *retire;
    if (!PyArg_ParseTuple(args, "sLLLO", &name, &old_id, &new_id, &size, &retire) || check(self))
        return NULL;
    PyObject *seq = PySequence_Fast(retire, "retire must be a sequence of (id, name)");
    if (!seq)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    int64_t *ids = calloc((size_t)n + 1, sizeof *ids);
    const char **names = calloc((size_t)n + 1, sizeof *names);
    int ok = ids && names;
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        long long id;
        const char *nm;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "Ls", &id, &nm))
            ok = 0;
        else {
            ids[i] = id;
            names[i] = nm;      /* borrowed: seq keeps the tuples alive */
        }
    }
    PyObject *out = NULL;
    if (ok) {
        int rc;
        RUN(rc, pxs_meta_switch(self->m, name, old_id, new_id, size, ids, names, (size_t)n, self->err,
                                sizeof self->err));
        out = rc ? raise(self->err) : Py_NewRef(Py_None);
    } else if (!PyErr_Occurred()) {
        PyErr_NoMemory();
    }
    free(ids);
    free(names);
    Py_DECREF(seq);
    return out;
}

/* init(path, coord=None): a new, empty database (a new store) for its coordination member */
static PyObject *meta_init(PyObject *mod, PyObject *args)
{
    (void)mod;
    const char *path, *member = NULL;
    if (!PyArg_ParseTuple(args, "s|z", &path, &member))
        return NULL;
    char err[PXS_ERRLEN];
    pxs_coord *co = NULL;       /* the member makes it (its journal mode, its storage: store/coord.h) */
    if (open_member(member, path, 60.0, &co, err, sizeof err))
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pxs_coord_meta_init(co, err, sizeof err);
    Py_END_ALLOW_THREADS
    pxs_coord_close(co);
    if (rc)
        return raise(err);
    Py_RETURN_NONE;
}

static PyMethodDef Meta_methods[] = {
    {"create", (PyCFunction)Meta_create, METH_VARARGS, "create(name, layout_json) -> id"},
    {"get", (PyCFunction)Meta_get, METH_VARARGS, "get(name) -> (id, name, layout_json, size, dirty) | None"},
    {"get_id", (PyCFunction)Meta_get_id, METH_VARARGS, "get_id(id) -> (id, name, layout_json, size, dirty) | None"},
    {"set_size", (PyCFunction)Meta_set_size, METH_VARARGS, "set_size(name, size, dirty=0)"},
    {"grow_size", (PyCFunction)Meta_grow_size, METH_VARARGS, "grow_size(name, size): size = MAX(size, ?)"},
    {"set_dirty", (PyCFunction)Meta_set_dirty, METH_VARARGS, "set_dirty(name, dirty=1)"},
    {"dirty_names", (PyCFunction)Meta_dirty_names, METH_NOARGS, "names of the files with dirty != 0"},
    {"list", (PyCFunction)Meta_list, METH_NOARGS, "list() -> [(id, name)] by name"},
    {"delete", (PyCFunction)Meta_delete, METH_VARARGS, "delete(name) -> whether it existed"},
    {"rename", (PyCFunction)Meta_rename, METH_VARARGS, "rename(old, new)"},
    {"top_id", (PyCFunction)Meta_top_id, METH_NOARGS, "the highest id ever handed out"},
    {"switch", (PyCFunction)Meta_switch, METH_VARARGS, "switch(name, old_id, new_id, size, [(id, new_name)])"},
    {"close", (PyCFunction)Meta_close, METH_NOARGS, "close the database"},
    {NULL, NULL, 0, NULL}};

static PyTypeObject MetaType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pario.native._rmt.Meta",
    .tp_basicsize = sizeof(Meta),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Meta(path, timeout=60): the store's metadata database (store/meta.h)",
    .tp_new = Meta_new,
    .tp_init = (initproc)Meta_init,
    .tp_dealloc = (destructor)Meta_dealloc,
    .tp_methods = Meta_methods,
};

static PyMethodDef functions[] = {
    {"meta_init", meta_init, METH_VARARGS, "meta_init(path): a new, empty metadata database"},
    {NULL, NULL, 0, NULL}};

PyObject *pyx_meta_borrow(pxs_meta *m, pthread_mutex_t *mu, PyObject *owner)
{
    Meta *self = (Meta *)MetaType.tp_alloc(&MetaType, 0);
    if (!self)
        return NULL;
    self->m = m;
    self->mu = mu;
    Py_INCREF(owner);
    self->owner = owner;
    self->open = 1;
    return (PyObject *)self;
}

void pyx_meta_disown(PyObject *meta)
{
    ((Meta *)meta)->open = 0;
}

int pyx_meta_register(PyObject *module)
{
    if (PyType_Ready(&MetaType) < 0)
        return -1;
    Py_INCREF(&MetaType);
    if (PyModule_AddObject(module, "Meta", (PyObject *)&MetaType) < 0) {
        Py_DECREF(&MetaType);
        return -1;
    }
    return PyModule_AddFunctions(module, functions);
}
