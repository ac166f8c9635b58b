/* pario tracer: handle map (see handles.h). */
#include "interpose/handles.h"

#include <stdlib.h>

static size_t slot(uint64_t key, size_t cap)
{
    key ^= key >> 33;  /* a 64-bit mix (the finaliser of MurmurHash3) */
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    return (size_t)key & (cap - 1);
}

void *px_map_get(const px_map *m, uint64_t key)
{
    if (!m->cap)
        return NULL;
    for (size_t i = slot(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (!m->vals[i])
            return NULL;
        if (m->keys[i] == key)
            return m->vals[i];
    }
}

static int grow(px_map *m)
{
    size_t cap = m->cap ? m->cap * 2 : 16;
    px_map g = {calloc(cap, sizeof(uint64_t)), calloc(cap, sizeof(void *)), cap, 0};
    if (!g.keys || !g.vals) {
        free(g.keys);
        free(g.vals);
        return -1;
    }
    for (size_t i = 0; i < m->cap; i++)
        if (m->vals[i])
            px_map_put(&g, m->keys[i], m->vals[i]);
    px_map_free(m);
    *m = g;
    return 0;
}

int px_map_put(px_map *m, uint64_t key, void *val)
{
    if ((m->n + 1) * 4 > m->cap * 3 && grow(m) != 0)
        return -1;
    size_t i = slot(key, m->cap);
    while (m->vals[i] && m->keys[i] != key)
        i = (i + 1) & (m->cap - 1);
    if (!m->vals[i])
        m->n++;
    m->keys[i] = key;
    m->vals[i] = val;
    return 0;
}

void *px_map_take(px_map *m, uint64_t key)
{
    if (!m->cap)
        return NULL;
    size_t mask = m->cap - 1, i = slot(key, m->cap);
    while (m->vals[i] && m->keys[i] != key)
        i = (i + 1) & mask;
    void *val = m->vals[i];
    if (!val)
        return NULL;
    /* backward-shift deletion: move later entries of the probe run into the hole */
    size_t hole = i;
    for (size_t j = (i + 1) & mask; m->vals[j]; j = (j + 1) & mask) {
        size_t home = slot(m->keys[j], m->cap);
        if (((j - home) & mask) >= ((j - hole) & mask)) {
            m->keys[hole] = m->keys[j];
            m->vals[hole] = m->vals[j];
            hole = j;
        }
    }
    m->vals[hole] = NULL;
    m->n--;
    return val;
}

void px_map_free(px_map *m)
{
    free(m->keys);
    free(m->vals);
    m->keys = NULL;
    m->vals = NULL;
    m->cap = m->n = 0;
}
