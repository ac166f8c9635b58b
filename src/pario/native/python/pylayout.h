/* pario.native._rmt: the layout mapping of store/layout.h (pylayout.c). */
#ifndef PARIO_PYTHON_PYLAYOUT_H
#define PARIO_PYTHON_PYLAYOUT_H

#include <Python.h>

/* Add the Layout type to the module m: 0, or -1 with an exception set. */
int pyx_layout_register(PyObject *m);

#endif
