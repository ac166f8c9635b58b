/* pario.native._collective: two-phase collective I/O (collective/twophase.h) for pario.mpi.
 *
 * pario.mpi.File's collective calls run the C driver pario_tp_collective -- ROMIO's extended
 * two-phase method with pario's request orders (ROMCIO / CACIO / HACIO, seed 004 Algorithm
 * 1; docs/serve-twophase.md) -- the same code the preloaded library serves MPI programs
 * with.  This extension is built with mpicc (build.py: COLLECTIVE_MODULE) and takes the
 * communicator as its C handle (mpi4py: MPI._handleof(comm)); pario.mpi.twophase is its
 * Python side.
 *
 *   collective(comm, write, off, len, buf, order, cb_buffer_size, cb_nodes, aggregators,
 *              cb_mode, layout, fd, io, report)
 *       -> (code, moved, independent, schedule, exception)
 *   choose_aggregators(comm, cb_nodes) -> (code, [rank, ...])
 *   layout(text, nservers) -> a layout (capsule) for collective()
 *   strerror(code) -> str
 *
 * off, len: int64 buffers (this rank's file extents in data order); buf: their bytes back
 * to back (writable for a read); aggregators: int32 buffer or None; layout: None or the
 * tuple of pario.mpi.twophase.compile_layout (layout(text, nservers): the store engine's
 * parse of the file's layout; the layout's servers and their kinds; every system server's
 * kind): the layout callback runs in C, no Python per piece.  The
 * io callback: fd >= 0 -- pwritev/preadv on that file descriptor in C (POSIX back end);
 * else io(write, cycle, off, len, pos, buf) is called once per aggregator cycle (memoryviews
 * of int64 and of the buffer) and returns the bytes moved (a store back end).  report: True
 * gives the aggregator's ordered pieces (schedule: (aggregator, lo, hi, off, len, server,
 * kind, proc) as bytes, or None on a rank that is no aggregator).  independent: None, or the
 * bytes this rank moved on the independent path (cb_mode disable / automatic without
 * interleaving; a read counts up to its first short piece, as File's independent reads).
 * The GIL is released while the driver runs (taken again for an io callback).  The first
 * exception io raised is returned (every rank of a collective path returns PARIO_TP_EIO),
 * not raised: the caller agrees on the message.
 */
#define PY_SSIZE_T_CLEAN
#define _GNU_SOURCE
#include <Python.h>

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include <mpi.h>

#include "collective/twophase.h"
#include "store/layout.h"
#include "store/meta.h"

/* ------------------------------------------------------------------ the layout callback */

/* A file's layout: the store engine's (store/layout.h, parsed once per file open by
 * layout(text, nservers), a capsule) -- the pieces of the mapping that the store and every
 * model use.  The driver asks for the first single-server piece of [off, off + len), then of
 * what is left of it: the pieces of the range are computed once and handed out in order. */
#define LAYOUT_CAPSULE "pario.native._collective.layout"

typedef struct lay_ctx {
    const pxs_layout *lay;
    const int32_t *sysk;    /* the kind of every system server */
    Py_ssize_t nsys;
    pxs_piece_cursor cur;   /* the pieces handed out in order (store/layout.h) */
} lay_ctx;

static int lay_map(void *ctx, int64_t off, int64_t len, int64_t *piece_len, int32_t *server, int32_t *kind)
{
    lay_ctx *L = ctx;
    const pxs_piece *q;
    if (pxs_layout_next_piece(L->lay, &L->cur, off, len, 0, &q) != PXS_OK)
        return -1;   /* no server holds the bytes (an extent map without a default) */
    if (q->server < 0 || q->server >= L->nsys || q->len <= 0 || q->len > len)
        return -1;
    *piece_len = q->len;
    *server = q->server;
    *kind = L->sysk[q->server];
    return 0;
}

static void layout_free(PyObject *cap)
{
    pxs_layout_free(PyCapsule_GetPointer(cap, LAYOUT_CAPSULE));
}

/* layout(text, nservers) -> capsule: a layout's JSON with servers named by index */
static PyObject *layout(PyObject *mod, PyObject *args)
{
    (void)mod;
    const char *text;
    int n;
    if (!PyArg_ParseTuple(args, "si", &text, &n))
        return NULL;
    char err[PXS_ERRLEN] = "";
    pxs_layout *lay = NULL;
    if (pxs_layout_parse_indexed(text, n, &lay, err, sizeof err) != PXS_OK) {
        PyErr_Format(PyExc_ValueError, "pario: error: layout: %s", err[0] ? err : "unreadable");
        return NULL;
    }
    PyObject *cap = PyCapsule_New(lay, LAYOUT_CAPSULE, layout_free);
    if (cap == NULL)
        pxs_layout_free(lay);
    return cap;
}

/* ------------------------------------------------------------------ the io callbacks */

typedef struct io_ctx {
    int fd;                 /* >= 0: POSIX in C */
    PyObject *io;           /* else: the Python callback */
    PyObject *exc_type, *exc_value, *exc_tb;   /* its first exception */
    int independent;        /* the independent path was taken (io called with cycle -1) */
    int64_t indep_moved;    /* its bytes */
    /* the report */
    int reported, agg;
    int64_t lo, hi, m;
    void *rep;              /* m int64 off, len; m int32 server, kind, proc */
} io_ctx;

/* pieces i..j-1 (file-contiguous) as one pwritev/preadv, resumed after short transfers;
 * a read past the end of the file zero-fills.  The bytes moved, or -1. */
static int64_t posix_run(int fd, int write, int n, const int64_t *off, const int64_t *len, const int64_t *pos,
                         char *buf)
{
    struct iovec iov[64];
    int64_t done = 0, total = 0;
    for (int i = 0; i < n; i++)
        total += len[i];
    int i = 0;
    int64_t skip = 0;   /* bytes of piece i already moved */
    while (i < n) {
        int k = 0;
        for (int x = i; x < n && k < 64; x++, k++) {
            int64_t s = x == i ? skip : 0;
            iov[k].iov_base = buf + pos[x] + s;
            iov[k].iov_len = (size_t)(len[x] - s);
        }
        ssize_t r = write ? pwritev(fd, iov, k, off[0] + done) : preadv(fd, iov, k, off[0] + done);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0) {
            if (write)
                return -1;
            break;   /* end of file */
        }
        done += r;
        skip += r;
        while (i < n && skip >= len[i]) {
            skip -= len[i];
            i++;
        }
    }
    if (!write && done < total) {   /* past the end of the file: zeros */
        int64_t seen = 0;
        for (int x = 0; x < n; x++) {
            int64_t a = done > seen ? done - seen : 0;
            if (a < len[x])
                memset(buf + pos[x] + a, 0, (size_t)(len[x] - a));
            seen += len[x];
        }
    }
    return done;
}

/* The pieces in the order given, runs of file-contiguous pieces vectored.  The independent
 * path (cycle -1) counts, as pario.mpi.File's independent reads do, the bytes up to the
 * first short read. */
static int posix_io(io_ctx *c, int write, int cycle, int n, const int64_t *off, const int64_t *len,
                    const int64_t *pos, char *buf)
{
    int64_t moved = 0;
    int short_read = 0;
    for (int i = 0; i < n;) {
        int j = i + 1;
        while (j < n && off[j] == off[j - 1] + len[j - 1])
            j++;
        int64_t want = 0;
        for (int x = i; x < j; x++)
            want += len[x];
        int64_t got = posix_run(c->fd, write, j - i, off + i, len + i, pos + i, buf);
        if (got < 0)
            return -1;
        if (!short_read)
            moved += got;
        short_read |= got < want;
        i = j;
    }
    if (cycle < 0)
        c->indep_moved = moved;
    return 0;
}

static PyObject *view(const void *p, Py_ssize_t n, int flags)
{
    return PyMemoryView_FromMemory((char *)(p ? p : ""), n, flags);
}

static int python_io(io_ctx *c, int write, int cycle, int n, const int64_t *off, const int64_t *len,
                     const int64_t *pos, char *buf)
{
    int64_t size = 0;
    for (int i = 0; i < n; i++)
        if (pos[i] + len[i] > size)
            size = pos[i] + len[i];
    PyGILState_STATE g = PyGILState_Ensure();
    int rc = -1;
    if (c->exc_type == NULL) {
        PyObject *r = PyObject_CallFunction(c->io, "iiNNNN", write, cycle, view(off, n * 8, PyBUF_READ),
                                            view(len, n * 8, PyBUF_READ), view(pos, n * 8, PyBUF_READ),
                                            view(buf, size, PyBUF_WRITE));
        if (r != NULL) {
            long long moved = PyLong_AsLongLong(r);
            Py_DECREF(r);
            if (!PyErr_Occurred()) {
                if (cycle < 0)
                    c->indep_moved = moved;
                rc = 0;
            }
        }
        if (rc != 0)
            PyErr_Fetch(&c->exc_type, &c->exc_value, &c->exc_tb);
    }
    PyGILState_Release(g);
    return rc;
}

static int io_cb(void *ctx, int write, int cycle, int n, const int64_t *off, const int64_t *len, const int64_t *pos,
                 char *buf)
{
    io_ctx *c = ctx;
    if (cycle < 0)
        c->independent = 1;
    return c->fd >= 0 ? posix_io(c, write, cycle, n, off, len, pos, buf)
                      : python_io(c, write, cycle, n, off, len, pos, buf);
}

/* The aggregator's ordered pieces, copied (the driver frees its arrays). */
static void report_cb(void *ctx, int aggregator, int64_t lo, int64_t hi, int64_t n, const int64_t *off,
                      const int64_t *len, const int32_t *server, const int32_t *kind, const int32_t *proc, int64_t m,
                      const int64_t *order)
{
    (void)n;
    io_ctx *c = ctx;
    free(c->rep);
    c->rep = malloc((size_t)(m ? m : 1) * (2 * sizeof(int64_t) + 3 * sizeof(int32_t)));
    if (c->rep == NULL)
        return;
    int64_t *o = c->rep, *l = o + m;
    int32_t *s = (int32_t *)(l + m), *k = s + m, *p = k + m;
    for (int64_t q = 0; q < m; q++) {
        int64_t x = order[q];
        o[q] = off[x];
        l[q] = len[x];
        s[q] = server[x];
        k[q] = kind[x];
        p[q] = proc[x];
    }
    c->reported = 1;
    c->agg = aggregator;
    c->lo = lo;
    c->hi = hi;
    c->m = m;
}

/* ------------------------------------------------------------------ the functions */

static int get_comm(PyObject *o, MPI_Comm *comm)
{
    unsigned long long h = PyLong_AsUnsignedLongLongMask(o);   /* MPICH: an int (shown unsigned) */
    if (h == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    *comm = (MPI_Comm)(uintptr_t)h;   /* other MPIs: a pointer */
    return 0;
}

/* o as a C-contiguous buffer of n items of `itemsize` bytes (n < 0: any count); None gives
 * an empty view when allowed. */
static int get_buf(PyObject *o, Py_buffer *v, Py_ssize_t itemsize, Py_ssize_t n, int writable, const char *what)
{
    memset(v, 0, sizeof *v);
    if (o == Py_None)
        return 0;
    if (PyObject_GetBuffer(o, v, writable ? PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE : PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    if (v->len % itemsize != 0 || (n >= 0 && v->len / itemsize != n)) {
        PyErr_Format(PyExc_ValueError, "pario: error: %s: wrong size", what);
        PyBuffer_Release(v);
        v->obj = NULL;
        return -1;
    }
    return 0;
}

#define LAY_BUFS 3

static void release(Py_buffer *b, int n)
{
    for (int i = 0; i < n; i++)
        if (b[i].obj != NULL)
            PyBuffer_Release(&b[i]);
}

/* The layout tuple (capsule, servers, kinds, sysk) into L and tl; b holds its buffers.  0 or -1. */
static int get_layout(PyObject *t, Py_buffer *b, lay_ctx *L, pario_tp_layout *tl)
{
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 1 + LAY_BUFS
        || !PyCapsule_IsValid(PyTuple_GET_ITEM(t, 0), LAYOUT_CAPSULE)) {
        PyErr_SetString(PyExc_TypeError, "pario: error: layout: (layout(...), servers, kinds, system kinds)");
        return -1;
    }
    for (int i = 0; i < LAY_BUFS; i++)
        if (get_buf(PyTuple_GET_ITEM(t, i + 1), &b[i], 4, -1, 0, "layout") < 0)
            return -1;
    if (b[0].len != b[1].len || b[0].len / 4 > INT_MAX) {
        PyErr_SetString(PyExc_ValueError, "pario: error: layout: servers and kinds differ in length");
        return -1;
    }
    memset(L, 0, sizeof *L);
    L->lay = PyCapsule_GetPointer(PyTuple_GET_ITEM(t, 0), LAYOUT_CAPSULE);
    L->sysk = b[2].buf;
    L->nsys = b[2].len / 4;
    *tl = (pario_tp_layout){ lay_map, L, (int32_t)(b[0].len / 4), b[0].buf, b[1].buf };
    return 0;
}

static PyObject *schedule_of(const io_ctx *c)
{
    if (!c->reported || c->rep == NULL)
        Py_RETURN_NONE;
    const char *p = c->rep;
    Py_ssize_t m = (Py_ssize_t)c->m;
    return Py_BuildValue("(iLLy#y#y#y#y#)", c->agg, (long long)c->lo, (long long)c->hi, p, m * 8, p + 8 * m,
                         m * 8, p + 16 * m, m * 4, p + 20 * m, m * 4, p + 24 * m, m * 4);
}

static PyObject *collective(PyObject *mod, PyObject *args)
{
    (void)mod;
    PyObject *ocomm, *ooff, *olen, *obuf, *oaggs, *olay, *oio;
    int write, order, cb_nodes, cb_mode, fd, report;
    long long cb;
    if (!PyArg_ParseTuple(args, "OiOOOiLiOiOiOp", &ocomm, &write, &ooff, &olen, &obuf, &order, &cb, &cb_nodes,
                          &oaggs, &cb_mode, &olay, &fd, &oio, &report))
        return NULL;
    MPI_Comm comm;
    if (get_comm(ocomm, &comm) < 0)
        return NULL;
    Py_buffer b[4 + LAY_BUFS];
    memset(b, 0, sizeof b);
    lay_ctx L = { 0 };
    pario_tp_layout tl;
    PyObject *ret = NULL;
    if (get_buf(ooff, &b[0], 8, -1, 0, "offsets") < 0 || get_buf(olen, &b[1], 8, b[0].len / 8, 0, "lengths") < 0 ||
        get_buf(obuf, &b[2], 1, -1, !write, "buffer") < 0 || get_buf(oaggs, &b[3], 4, -1, 0, "aggregators") < 0 ||
        (olay != Py_None && get_layout(olay, b + 4, &L, &tl) < 0))
        goto out;
    if (fd < 0 && !PyCallable_Check(oio)) {
        PyErr_SetString(PyExc_TypeError, "pario: error: io: neither a file descriptor nor a callable");
        goto out;
    }
    io_ctx c = { .fd = fd, .io = oio };
    pario_tp_params p = { 0 };
    p.order = order;
    p.cb_buffer_size = cb;
    p.cb_nodes = cb_nodes;
    p.naggregators = (int)(b[3].len / 4);
    p.aggregators = b[3].buf;
    p.cb_mode = cb_mode;
    p.layout = olay != Py_None ? &tl : NULL;
    p.io = io_cb;
    p.io_ctx = &c;
    if (report) {
        p.report = report_cb;
        p.report_ctx = &c;
    }
    int64_t moved = 0;
    int code;
    Py_BEGIN_ALLOW_THREADS
    code = pario_tp_collective(comm, write, b[0].len / 8, b[0].buf, b[1].buf, b[2].buf, &p, &moved);
    Py_END_ALLOW_THREADS
    PyObject *exc = Py_None, *indep = Py_None;
    Py_INCREF(Py_None);
    if (c.exc_type != NULL) {
        PyErr_NormalizeException(&c.exc_type, &c.exc_value, &c.exc_tb);
        if (c.exc_tb != NULL && c.exc_value != NULL)
            PyException_SetTraceback(c.exc_value, c.exc_tb);
        Py_DECREF(exc);
        exc = c.exc_value ? c.exc_value : Py_None;
        if (c.exc_value == NULL)
            Py_INCREF(Py_None);
        Py_XDECREF(c.exc_type);
        Py_XDECREF(c.exc_tb);
    }
    if (c.independent)
        indep = PyLong_FromLongLong(c.indep_moved);
    else
        Py_INCREF(Py_None);
    PyObject *s = schedule_of(&c);
    if (s != NULL && indep != NULL)
        ret = Py_BuildValue("(iLNNN)", code, (long long)moved, indep, s, exc);
    else {
        Py_XDECREF(s);
        Py_XDECREF(indep);
        Py_DECREF(exc);
    }
    free(c.rep);
out:
    release(b, 4 + LAY_BUFS);
    free(L.cur.pcs.p);
    return ret;
}

static PyObject *choose_aggregators(PyObject *mod, PyObject *args)
{
    (void)mod;
    PyObject *ocomm;
    int cb_nodes, size = 0, n = 0, code;
    if (!PyArg_ParseTuple(args, "Oi", &ocomm, &cb_nodes))
        return NULL;
    MPI_Comm comm;
    if (get_comm(ocomm, &comm) < 0)
        return NULL;
    if (PMPI_Comm_size(comm, &size) != MPI_SUCCESS)
        return Py_BuildValue("(i[])", PARIO_TP_EMPI);
    int *ranks = malloc((size_t)(size > 0 ? size : 1) * sizeof *ranks);
    if (ranks == NULL)
        return PyErr_NoMemory();
    Py_BEGIN_ALLOW_THREADS
    code = pario_tp_choose_aggregators(comm, cb_nodes, ranks, &n);
    Py_END_ALLOW_THREADS
    PyObject *list = PyList_New(0);
    for (int i = 0; list != NULL && code == PARIO_TP_OK && i < n; i++) {
        PyObject *v = PyLong_FromLong(ranks[i]);
        if (v == NULL || PyList_Append(list, v) < 0)
            Py_CLEAR(list);
        Py_XDECREF(v);
    }
    free(ranks);
    return list == NULL ? NULL : Py_BuildValue("(iN)", code, list);
}

static PyObject *strerror_(PyObject *mod, PyObject *code)
{
    (void)mod;
    long c = PyLong_AsLong(code);
    if (c == -1 && PyErr_Occurred())
        return NULL;
    return PyUnicode_FromString(pario_tp_strerror((int)c));
}

static PyMethodDef methods[] = {
    { "collective", collective, METH_VARARGS, "One two-phase collective access (pario_tp_collective)." },
    { "layout", layout, METH_VARARGS, "layout(text, nservers): a layout for collective() (store/layout.h)." },
    { "choose_aggregators", choose_aggregators, METH_VARARGS,
      "ROMIO-like aggregators (pario_tp_choose_aggregators): (code, ranks)." },
    { "strerror", strerror_, METH_O, "The one-line description of a PARIO_TP_* code." },
    { NULL, NULL, 0, NULL }
};

static struct PyModuleDef moddef = { PyModuleDef_HEAD_INIT, "_collective",
                                     "pario's two-phase collective I/O (C, collective/twophase.h)", -1, methods,
                                     NULL, NULL, NULL, NULL };

PyMODINIT_FUNC PyInit__collective(void)
{
    PyObject *m = PyModule_Create(&moddef);
    if (m == NULL)
        return NULL;
    static const struct { const char *name; int v; } k[] = {
        { "OK", PARIO_TP_OK }, { "EINVAL", PARIO_TP_EINVAL }, { "EMISMATCH", PARIO_TP_EMISMATCH },
        { "ENOMEM", PARIO_TP_ENOMEM }, { "ETOOBIG", PARIO_TP_ETOOBIG }, { "ELAYOUT", PARIO_TP_ELAYOUT },
        { "EIO", PARIO_TP_EIO }, { "EMPI", PARIO_TP_EMPI }, { "CB_ENABLE", PARIO_TP_CB_ENABLE },
        { "CB_AUTOMATIC", PARIO_TP_CB_AUTOMATIC }, { "CB_DISABLE", PARIO_TP_CB_DISABLE },
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (PyModule_AddIntConstant(m, k[i].name, k[i].v) < 0) {
            Py_DECREF(m);
            return NULL;
        }
    return m;
}
