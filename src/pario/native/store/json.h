/* pario serve: a small strict JSON reader (RFC 8259) for store.json, layout JSON and
 * plan.json, in C for the store data path inside MPI ranks (docs/serve.md).
 *
 * pxs_json_parse builds a tree; bad input (syntax, control characters in strings, bad
 * escapes or UTF-16 surrogates, nesting deeper than PXS_JSON_MAX_DEPTH, trailing bytes) is
 * an error code and a one-line message naming the byte offset, never a crash.  Numbers keep
 * their exact integer value when they are integers within int64 (is_int), and a double. */
#ifndef PARIO_SERVE_JSON_H
#define PARIO_SERVE_JSON_H

#include <stddef.h>
#include <stdint.h>

enum { PXS_JNULL, PXS_JFALSE, PXS_JTRUE, PXS_JNUM, PXS_JSTR, PXS_JARR, PXS_JOBJ };

#define PXS_JSON_MAX_DEPTH 200

typedef struct pxs_json {
    int type;
    int is_int;            /* JNUM: an integer (no fraction, no exponent) that fits int64 */
    int64_t i;             /* JNUM with is_int */
    double d;              /* JNUM */
    char *s;               /* JSTR: UTF-8, NUL-terminated (may contain \0: slen) */
    size_t slen;
    size_t n;              /* JARR / JOBJ: members */
    struct pxs_json **v;   /* JARR / JOBJ: values */
    char **k;              /* JOBJ: keys (NUL-terminated) */
} pxs_json;

/* 0 and *out on success; -1 (syntax: err says where) or -2 (out of memory) */
int pxs_json_parse(const char *text, size_t n, pxs_json **out, char *err, size_t errlen);
void pxs_json_free(pxs_json *j);
/* the value of key in an object (the last one if repeated, as Python's json), else NULL */
const pxs_json *pxs_json_get(const pxs_json *obj, const char *key);
/* 1 if j is a string equal to s */
int pxs_json_streq(const pxs_json *j, const char *s);

#endif
