/* pario.native._rmt: what its parts (pyrmt.c, pymeta.c) share. */
#ifndef PARIO_PYTHON_BINDINGS_H
#define PARIO_PYTHON_BINDINGS_H

#include <Python.h>

/* pario.ParioError (set_error_class), NULL before it is set */
PyObject *pyx_error_class(void);
/* a Core object over the RMT of a store engine (its mutex serialises both); the engine
 * disowns it when it closes (later calls: "the RMT is closed") */
#include <pthread.h>
#include "store/coord.h"
PyObject *pyx_rmt_borrow(rmt_core *c, pxs_coord *co, pthread_mutex_t *mu, PyObject *owner);
void pyx_rmt_disown(PyObject *core);
/* a Meta object over a store engine's metadata connection (its mutex) */
#include "store/meta.h"
PyObject *pyx_meta_borrow(pxs_meta *m, pthread_mutex_t *mu, PyObject *owner);
void pyx_meta_disown(PyObject *meta);
/* adds the Engine, EngineFile and SFile types to the module */
int pyx_store_register(PyObject *module);
/* adds the Meta type and meta_init to the module */
int pyx_meta_register(PyObject *module);
/* adds the StoreLock type (the coordination's store lock, pycoord.c) to the module */
int pyx_coord_register(PyObject *module);

#endif
