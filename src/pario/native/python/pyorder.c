/* pario.native._rmt: the request orders of two-phase collective I/O for Python.
 *
 * pario.plan.collective takes its list of orders (ORDERS) and every order it computes
 * (request_order: the simulator, the planner, pario.mpi's two-phase I/O) from the one table
 * of collective/order.h, pario_orders[], through these functions:
 *
 *   order_names() -> ("romcio", "cacio", "hacio", ...)   the table's names, in row order
 *   order_find(name) -> row, or -1                        pario_order_find
 *   order_strerror(code) -> str                           pario_order_strerror
 *   request_order(row, offset, server, kind, proc, aggregator, servers, kinds, order, twin)
 *       -> (code, norder)                                 pario_request_order
 *
 * request_order takes C-contiguous buffers (numpy arrays): offset int64[n]; server, kind,
 * proc int32[n] or None; servers, kinds int32[m] or None (the layout's server list and the
 * kind of each); order and twin writable int64[n], filled as order.h says.  The GIL is
 * released while the order runs.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "python/pyorder.h"

#include <string.h>

#include "collective/order.h"

static PyObject *order_names(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    PyObject *names = PyList_New(0);
    for (int i = 0; names != NULL && i < pario_order_count(); i++) {
        PyObject *s = PyUnicode_FromString(pario_orders[i].name);
        if (s == NULL || PyList_Append(names, s) < 0)
            Py_CLEAR(names);
        Py_XDECREF(s);
    }
    PyObject *t = names ? PyList_AsTuple(names) : NULL;
    Py_XDECREF(names);
    return t;
}

static PyObject *order_find(PyObject *mod, PyObject *name)
{
    (void)mod;
    const char *s = PyUnicode_AsUTF8(name);
    return s == NULL ? NULL : PyLong_FromLong(pario_order_find(s));
}

static PyObject *order_strerror(PyObject *mod, PyObject *code)
{
    (void)mod;
    long c = PyLong_AsLong(code);
    if (c == -1 && PyErr_Occurred())
        return NULL;
    return PyUnicode_FromString(pario_order_strerror((int)c));
}

/* args[i] as a C-contiguous buffer of integers of `itemsize` bytes, n of them when n >= 0;
 * None gives view->buf NULL.  0, or -1 with an exception set. */
static int get_ints(PyObject *o, Py_ssize_t itemsize, int writable, Py_ssize_t n, Py_buffer *view, const char *what)
{
    memset(view, 0, sizeof *view);
    if (o == Py_None)
        return 0;
    if (PyObject_GetBuffer(o, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    const char *f = view->format ? view->format : "B";
    char code = f[strlen(f) - 1];
    if (view->itemsize != itemsize || strchr("bhilqBHILQ", code) == NULL || (n >= 0 && view->len / itemsize != n)) {
        PyErr_Format(PyExc_ValueError, "request_order: %s must be %zd integers of %zd bytes", what, n, itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static PyObject *request_order(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    (void)mod;
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError,
                        "request_order(row, offset, server, kind, proc, aggregator, servers, kinds, order, twin)");
        return NULL;
    }
    int method = PyLong_AsLong(args[0]);
    long long agg = PyLong_AsLongLong(args[5]);
    if (PyErr_Occurred())
        return NULL;
    Py_buffer b[8];
    static const char *what[8] = { "offset", "server", "kind", "proc", "servers", "kinds", "order", "twin" };
    static const int arg[8] = { 1, 2, 3, 4, 6, 7, 8, 9 };
    int nb = 0, bad = 0;
    Py_ssize_t n = -1, m = -1;
    for (; nb < 8 && !bad; nb++) {
        int i = arg[nb];
        Py_ssize_t want = i == 6 ? -1 : (i == 7 ? m : n);
        bad = get_ints(args[i], i == 1 || i >= 8 ? 8 : 4, i >= 8, want, &b[nb], what[nb]) != 0;
        if (!bad && i == 1)
            n = b[nb].buf ? b[nb].len / 8 : -1;
        if (!bad && i == 6)
            m = b[nb].buf ? b[nb].len / 4 : 0;
    }
    if (!bad && (n < 0 || b[6].buf == NULL)) {
        PyErr_SetString(PyExc_ValueError, "request_order: offset and order must be given");
        bad = 1;
    }
    int rc = PARIO_ORDER_OK;
    int64_t norder = 0;
    if (!bad) {
        pario_order_servers sv = { (int32_t)m, b[4].buf, b[5].buf };
        pario_order_in in = { n, b[0].buf, b[1].buf, b[2].buf, b[3].buf, agg, &sv };
        Py_BEGIN_ALLOW_THREADS
        rc = pario_request_order(method, &in, b[6].buf, &norder, b[7].buf);
        Py_END_ALLOW_THREADS
    }
    for (int i = 0; i < nb; i++)
        PyBuffer_Release(&b[i]);
    return bad ? NULL : Py_BuildValue("(iL)", rc, (long long)norder);
}

static PyMethodDef order_methods[] = {
    {"order_names", order_names, METH_NOARGS, "the collective orders' names, in table order"},
    {"order_find", order_find, METH_O, "the table row of an order's name (case-insensitive), else -1"},
    {"order_strerror", order_strerror, METH_O, "the message of an order's error code"},
    {"request_order", (PyCFunction)(void (*)(void))request_order, METH_FASTCALL,
     "request_order(row, offset, server, kind, proc, aggregator, servers, kinds, order, twin) -> (code, norder)"},
    {NULL, NULL, 0, NULL}};

int pyx_orders_register(PyObject *m)
{
    return PyModule_AddFunctions(m, order_methods);
}
