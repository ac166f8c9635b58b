/* pario.native._rmt.StoreLock: the store lock of a store's coordination member
 * (store/coord.h; docs/store.md, "Coordination") as a Python type, for pario.store.locks --
 * the same lock the store engine takes (pxs_store_open), never a second implementation.
 *
 * StoreLock(root, member="host"): the member's coordination of the store at root, nothing
 * held; try_exclusive() / try_shared() never wait (True: held), downgrade() exclusive ->
 * shared, close() releases everything.  mode: None, "ex" or "sh".  Errors: pario.ParioError
 * with the member's one-line message. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "python/bindings.h"
#include "store/coord.h"
#include "store/meta.h"

typedef struct {
    PyObject_HEAD
    pxs_coord *co;          /* NULL: closed */
    const char *mode;       /* NULL, "ex", "sh" */
} StoreLock;

static PyObject *raise(const char *msg)
{
    PyObject *cls = pyx_error_class();
    PyErr_SetString(cls ? cls : PyExc_RuntimeError, msg);
    return NULL;
}

static int StoreLock_init(StoreLock *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"root", "member", "timeout", NULL};
    const char *root, *member = "host";
    double timeout = 60.0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s|zd", kwlist, &root, &member, &timeout))
        return -1;
    pxs_coord_close(self->co);
    self->co = NULL;
    self->mode = NULL;
    char err[PXS_ERRLEN];
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pxs_coord_open(member, root, timeout, &self->co, err, sizeof err);
    Py_END_ALLOW_THREADS
    if (rc) {
        if (rc == PXS_ENOMEM)
            PyErr_NoMemory();
        else
            raise(err);
        return -1;
    }
    return 0;
}

static void StoreLock_dealloc(StoreLock *self)
{
    pxs_coord_close(self->co);
    self->co = NULL;
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* PXS_OK: True, PXS_EBUSY: False, else an error */
static PyObject *held(StoreLock *self, int rc, const char *mode)
{
    if (rc == PXS_OK) {
        self->mode = mode;
        Py_RETURN_TRUE;
    }
    if (rc == PXS_EBUSY)
        Py_RETURN_FALSE;
    if (rc == PXS_EREMOTE) {
        char msg[768], root[512];
        const char *w = self->co->lock_where ? self->co->lock_where : "?";
        const char *slash = strrchr(w, '/');
        snprintf(root, sizeof root, "%.*s", slash ? (int)(slash - w) : (int)strlen(w), w);
        pxs_coord_remote_message(self->co, root, msg, sizeof msg);
        return PyErr_Format(pyx_error_class() ? pyx_error_class() : PyExc_RuntimeError, "%s", msg);
    }
    return PyErr_Format(pyx_error_class() ? pyx_error_class() : PyExc_RuntimeError, "%s: %s",
                        self->co->lock_where ? self->co->lock_where : "the store lock", strerror(errno));
}

static int check_open(StoreLock *self)
{
    if (self->co)
        return 0;
    raise("the store lock is closed");
    return -1;
}

static PyObject *StoreLock_try_exclusive(StoreLock *self, PyObject *unused)
{
    (void)unused;
    return check_open(self) ? NULL : held(self, pxs_coord_try_lock(self->co, 1), "ex");
}

static PyObject *StoreLock_try_shared(StoreLock *self, PyObject *unused)
{
    (void)unused;
    return check_open(self) ? NULL : held(self, pxs_coord_try_lock(self->co, 0), "sh");
}

static PyObject *StoreLock_downgrade(StoreLock *self, PyObject *unused)
{
    (void)unused;
    return check_open(self) ? NULL : held(self, pxs_coord_downgrade(self->co), "sh");
}

static PyObject *StoreLock_close(StoreLock *self, PyObject *unused)
{
    (void)unused;
    pxs_coord_close(self->co);
    self->co = NULL;
    self->mode = NULL;
    Py_RETURN_NONE;
}

/* read_shared(name): the bytes of the store's shared record name kept by the member (None: it
 * keeps its records as files of the store directory, or there is none) */
static PyObject *StoreLock_read_shared(StoreLock *self, PyObject *args)
{
    const char *name;
    if (!PyArg_ParseTuple(args, "s", &name) || check_open(self))
        return NULL;
    if (!self->co->ops->read_shared)
        Py_RETURN_NONE;
    char *buf = NULL, err[PXS_ERRLEN] = "";
    size_t n = 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = self->co->ops->read_shared(self->co, name, &buf, &n, err, sizeof err);
    Py_END_ALLOW_THREADS
    if (rc == PXS_ENOENT)
        Py_RETURN_NONE;
    if (rc == PXS_ENOMEM)
        return PyErr_NoMemory();
    if (rc)
        return raise(err);
    PyObject *out = PyBytes_FromStringAndSize(buf, (Py_ssize_t)n);
    free(buf);
    return out;
}

static PyObject *StoreLock_get_mode(StoreLock *self, void *closure)
{
    (void)closure;
    if (!self->mode)
        Py_RETURN_NONE;
    return PyUnicode_FromString(self->mode);
}

static PyObject *StoreLock_get_member(StoreLock *self, void *closure)
{
    (void)closure;
    if (!self->co)
        Py_RETURN_NONE;
    return PyUnicode_FromString(self->co->ops->name);
}

/* meta_transfer(local, to_shared): the metadata database the member keeps copied to the SQLite
 * file local, or replaced by it (fsck --repair); False: the member keeps none (a file of the
 * store directory) or, copying out, there is none */
static PyObject *StoreLock_meta_transfer(StoreLock *self, PyObject *args)
{
    const char *local;
    int to_shared;
    if (!PyArg_ParseTuple(args, "sp", &local, &to_shared) || check_open(self))
        return NULL;
    if (!self->co->ops->meta_transfer)
        Py_RETURN_FALSE;
    char err[PXS_ERRLEN] = "";
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = self->co->ops->meta_transfer(self->co, local, to_shared, err, sizeof err);
    Py_END_ALLOW_THREADS
    if (rc == PXS_ENOENT && !to_shared)
        Py_RETURN_FALSE;
    if (rc) {
        raise(err);
        return NULL;
    }
    Py_RETURN_TRUE;
}

static PyMethodDef StoreLock_methods[] = {
    {"try_exclusive", (PyCFunction)StoreLock_try_exclusive, METH_NOARGS,
     "try_exclusive(): the store lock exclusive, without waiting (True: held)"},
    {"try_shared", (PyCFunction)StoreLock_try_shared, METH_NOARGS,
     "try_shared(): the store lock shared, without waiting (True: held)"},
    {"downgrade", (PyCFunction)StoreLock_downgrade, METH_NOARGS,
     "downgrade(): exclusive -> shared (nobody else gets in between)"},
    {"close", (PyCFunction)StoreLock_close, METH_NOARGS, "close(): release the lock"},
    {"read_shared", (PyCFunction)StoreLock_read_shared, METH_VARARGS,
     "read_shared(name): bytes of a record the member keeps outside the store directory, or None"},
    {"meta_transfer", (PyCFunction)StoreLock_meta_transfer, METH_VARARGS,
     "meta_transfer(local, to_shared): the member's metadata database copied to local, or replaced by it"},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef StoreLock_getset[] = {
    {"mode", (getter)StoreLock_get_mode, NULL, "None, \"ex\" or \"sh\"", NULL},
    {"member", (getter)StoreLock_get_member, NULL, "the coordination member (None: closed)", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject StoreLockType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pario.native._rmt.StoreLock",
    .tp_basicsize = sizeof(StoreLock),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "StoreLock(root, member='host', timeout=60.0): the store lock of a store's coordination member",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)StoreLock_init,
    .tp_dealloc = (destructor)StoreLock_dealloc,
    .tp_methods = StoreLock_methods,
    .tp_getset = StoreLock_getset,
};

int pyx_coord_register(PyObject *module)
{
    if (PyType_Ready(&StoreLockType) < 0)
        return -1;
    Py_INCREF(&StoreLockType);
    if (PyModule_AddObject(module, "StoreLock", (PyObject *)&StoreLockType) < 0) {
        Py_DECREF(&StoreLockType);
        return -1;
    }
    /* the registry's names (store/coord.c): what store.json "coord" may name */
    PyObject *names = PyList_New(0);
    for (size_t i = 0; names && pxs_coord_nth(i); i++) {
        PyObject *n = PyUnicode_FromString(pxs_coord_nth(i)->name);
        if (!n || PyList_Append(names, n) < 0) {
            Py_XDECREF(n);
            Py_CLEAR(names);
            break;
        }
        Py_DECREF(n);
    }
    PyObject *t = names ? PyList_AsTuple(names) : NULL;
    Py_XDECREF(names);
    if (!t || PyModule_AddObject(module, "COORD_MEMBERS", t) < 0) {
        Py_XDECREF(t);
        return -1;
    }
    return 0;
}
