/* pario.native._rmt: the collective orders of collective/order.h (pyorder.c). */
#ifndef PARIO_PYTHON_PYORDER_H
#define PARIO_PYTHON_PYORDER_H

#include <Python.h>

/* Add order_names, order_find, order_strerror and request_order to the module m: 0, or -1
 * with an exception set. */
int pyx_orders_register(PyObject *m);

#endif
