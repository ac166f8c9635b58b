/* pario.native._rmt: the layout mapping of store/layout.h for Python.
 *
 * pario.layout.map_requests -- the mapping of requests to sub-requests that every model's
 * reference path, the simulator and the routing use (SPEC §1: on server j the request
 * [x, x+L) has C_j(x+L) - C_j(x) bytes at server-local offset C_j(x); CEDA's extent maps,
 * seed 000 §4.3) -- is the store engine's (store/layout.c, which places every byte the
 * store and the served runtime move); this file binds it:
 *
 *   Layout(text, nservers)        a layout parsed from its JSON (pario.layout.spec's form)
 *                                 whose servers are named "0" .. "nservers-1"
 *   extent_map(offset, length, server, local, datafile, default, nservers) -> Layout
 *                                 an extent map from its rows (int64 buffers; checked as the
 *                                 JSON's rows are) and its default layout's JSON (or None):
 *                                 no JSON of the rows (a 10^5-extent map is one copy)
 *   Layout.map(offset, length) -> (req, server, local, length, datafile)
 *       offset, length: C-contiguous int64 buffers of n requests; the sub-requests in
 *       map_requests' order (request-major; a request's pieces in the layout's server order,
 *       an extent map's covered pieces in extent order and then its gaps) as bytearrays of
 *       int64, int32, int64, int64, int32 items.  The GIL is released while it maps.
 *
 * A bad layout or request is pario.ParioError with the engine's one-line message.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "python/pylayout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "python/bindings.h"
#include "store/layout.h"
#include "store/meta.h"

typedef struct {
    PyObject_HEAD
    pxs_layout *lay;
} LayoutObject;

static void set_error(const char *msg)
{
    PyObject *cls = pyx_error_class();
    PyErr_SetString(cls ? cls : PyExc_ValueError, msg);
}

/* raise the error of a failed layout call (rc) */
static void raise_rc(int rc, const char *err)
{
    if (rc == PXS_ENOMEM)
        PyErr_NoMemory();
    else
        set_error(err[0] ? err : "unreadable layout");
}

static int check_nservers(int n)
{
    if (n >= 1 && n <= 1 << 20)
        return 0;
    PyErr_Format(PyExc_ValueError, "Layout: %d servers", n);
    return -1;
}

static int layout_init(LayoutObject *self, PyObject *args, PyObject *kw)
{
    const char *text;
    int n;
    if (kw != NULL && PyDict_Size(kw) > 0) {
        PyErr_SetString(PyExc_TypeError, "Layout(text, nservers) takes no keyword arguments");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "si", &text, &n) || check_nservers(n) < 0)
        return -1;
    char err[PXS_ERRLEN] = "";
    pxs_layout *lay = NULL;
    int rc = pxs_layout_parse_indexed(text, n, &lay, err, sizeof err);
    if (rc != PXS_OK) {
        raise_rc(rc, err);
        return -1;
    }
    if (self->lay)
        pxs_layout_free(self->lay);
    self->lay = lay;
    return 0;
}

static void layout_dealloc(LayoutObject *self)
{
    if (self->lay)
        pxs_layout_free(self->lay);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int get_i64(PyObject *o, Py_buffer *v, const char *what)
{
    if (PyObject_GetBuffer(o, v, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return -1;
    const char *f = v->format ? v->format : "B";
    char code = f[strlen(f) - 1];
    if (v->itemsize != 8 || strchr("lq", code) == NULL) {
        PyErr_Format(PyExc_ValueError, "Layout.map: %s must be int64", what);
        PyBuffer_Release(v);
        return -1;
    }
    return 0;
}

/* the sub-requests' columns as bytearrays (int64, int32, int64, int64, int32) */
static PyObject *columns(const pxs_subs *s)
{
    Py_ssize_t n = (Py_ssize_t)s->n;
    PyObject *c[5];
    static const int size[5] = { 8, 4, 8, 8, 4 };
    for (int k = 0; k < 5; k++) {
        c[k] = PyByteArray_FromStringAndSize(NULL, n * size[k]);
        if (c[k] == NULL) {
            for (int j = 0; j < k; j++)
                Py_DECREF(c[j]);
            return NULL;
        }
    }
    int64_t *req = (int64_t *)PyByteArray_AS_STRING(c[0]), *loc = (int64_t *)PyByteArray_AS_STRING(c[2]);
    int64_t *len = (int64_t *)PyByteArray_AS_STRING(c[3]);
    int32_t *srv = (int32_t *)PyByteArray_AS_STRING(c[1]), *df = (int32_t *)PyByteArray_AS_STRING(c[4]);
    for (Py_ssize_t i = 0; i < n; i++) {
        const pxs_sub *u = &s->s[i];
        req[i] = u->req;
        srv[i] = u->server;
        loc[i] = u->local;
        len[i] = u->len;
        df[i] = u->datafile;
    }
    return Py_BuildValue("(NNNNN)", c[0], c[1], c[2], c[3], c[4]);
}

static PyObject *layout_map(LayoutObject *self, PyObject *args)
{
    PyObject *oo, *lo;
    if (!PyArg_ParseTuple(args, "OO", &oo, &lo))
        return NULL;
    if (self->lay == NULL) {
        PyErr_SetString(PyExc_ValueError, "Layout.map: the layout was not initialised");
        return NULL;
    }
    Py_buffer ob, lb;
    if (get_i64(oo, &ob, "offset") < 0)
        return NULL;
    if (get_i64(lo, &lb, "length") < 0) {
        PyBuffer_Release(&ob);
        return NULL;
    }
    PyObject *out = NULL;
    if (ob.len != lb.len) {
        PyErr_SetString(PyExc_ValueError, "offset and length must have the same shape");
    } else {
        const int64_t *x = ob.buf, *L = lb.buf;
        int64_t n = ob.len / 8;
        pxs_subs s = { NULL, 0, 0 };
        char err[PXS_ERRLEN] = "";
        int rc = PXS_OK;
        Py_BEGIN_ALLOW_THREADS
        for (int64_t i = 0; i < n && rc == PXS_OK; i++)
            rc = pxs_layout_map(self->lay, i, x[i], L[i], &s, err, sizeof err);
        Py_END_ALLOW_THREADS
        if (rc != PXS_OK)
            raise_rc(rc, err);
        else
            out = columns(&s);
        free(s.s);
    }
    PyBuffer_Release(&ob);
    PyBuffer_Release(&lb);
    return out;
}

static PyTypeObject LayoutType;

/* extent_map(offset, length, server, local, datafile, default, nservers) -> Layout */
static PyObject *extent_map(PyObject *mod, PyObject *args)
{
    (void)mod;
    PyObject *col[5], *dflt;
    int n;
    if (!PyArg_ParseTuple(args, "OOOOOOi", &col[0], &col[1], &col[2], &col[3], &col[4], &dflt, &n)
        || check_nservers(n) < 0)
        return NULL;
    static const char *what[5] = { "offset", "length", "server", "local", "datafile" };
    Py_buffer b[5];
    int nb = 0;
    for (; nb < 5; nb++) {
        if (get_i64(col[nb], &b[nb], what[nb]) < 0)
            break;
        if (b[nb].len != b[0].len) {
            PyErr_SetString(PyExc_ValueError, "extent_map: the five columns must have the same length");
            PyBuffer_Release(&b[nb]);
            break;
        }
    }
    const char *text = nb == 5 && dflt != Py_None ? PyUnicode_AsUTF8(dflt) : NULL;
    PyObject *out = NULL;
    if (nb == 5 && (dflt == Py_None || text != NULL)) {
        char err[PXS_ERRLEN] = "";
        pxs_layout *def = NULL, *lay = NULL;
        int rc = text ? pxs_layout_parse_indexed(text, n, &def, err, sizeof err) : PXS_OK;
        if (rc == PXS_OK)
            rc = pxs_layout_extents((size_t)(b[0].len / 8), b[0].buf, b[1].buf, b[2].buf, b[3].buf, b[4].buf, n, def,
                                    &lay, err, sizeof err);
        if (rc != PXS_OK) {
            raise_rc(rc, err);
        } else if ((out = LayoutType.tp_alloc(&LayoutType, 0)) == NULL) {
            pxs_layout_free(lay);
        } else {
            ((LayoutObject *)out)->lay = lay;
        }
    }
    for (int i = 0; i < nb; i++)
        PyBuffer_Release(&b[i]);
    return out;
}

static PyMethodDef module_methods[] = {
    {"extent_map", extent_map, METH_VARARGS,
     "extent_map(offset, length, server, local, datafile, default, nservers) -> Layout: an extent map from its rows"},
    {NULL, NULL, 0, NULL}};

static PyMethodDef layout_methods[] = {
    {"map", (PyCFunction)layout_map, METH_VARARGS,
     "map(offset, length) -> (req, server, local, length, datafile): the sub-requests as bytearrays"},
    {NULL, NULL, 0, NULL}};

static PyTypeObject LayoutType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pario.native._rmt.Layout",
    .tp_basicsize = sizeof(LayoutObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Layout(text, nservers): a layout of the store engine (store/layout.h)",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)layout_init,
    .tp_dealloc = (destructor)layout_dealloc,
    .tp_methods = layout_methods,
};

int pyx_layout_register(PyObject *m)
{
    if (PyType_Ready(&LayoutType) < 0)
        return -1;
    Py_INCREF(&LayoutType);
    if (PyModule_AddObject(m, "Layout", (PyObject *)&LayoutType) < 0) {
        Py_DECREF(&LayoutType);
        return -1;
    }
    return PyModule_AddFunctions(m, module_methods);
}
