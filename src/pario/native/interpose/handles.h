/* pario tracer: a map from MPI handles (files, requests) to the tracer's state (handles.c).
 * Open addressing with linear probing; not thread-safe (callers lock). */
#ifndef PARIO_TRACER_HANDLES_H
#define PARIO_TRACER_HANDLES_H

#include <stddef.h>
#include <stdint.h>

typedef struct px_map {
    uint64_t *keys;
    void **vals;     /* NULL = empty slot */
    size_t cap;      /* a power of two, or 0 */
    size_t n;
} px_map;

void *px_map_get(const px_map *m, uint64_t key);
/* Insert or replace; 0, or -1 when memory runs out. */
int px_map_put(px_map *m, uint64_t key, void *val);
/* Remove and return the value (NULL when absent). */
void *px_map_take(px_map *m, uint64_t key);
void px_map_free(px_map *m);

#endif
