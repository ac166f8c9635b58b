/* pario.native._rmt: what its parts (pyrmt.c, pymeta.c) share. */
#ifndef PARIO_PYTHON_BINDINGS_H
#define PARIO_PYTHON_BINDINGS_H

#include <Python.h>

/* pario.ParioError (set_error_class), NULL before it is set */
PyObject *pario_error_class(void);
/* adds the Meta type and meta_init to the module */
int pymeta_register(PyObject *module);

#endif
