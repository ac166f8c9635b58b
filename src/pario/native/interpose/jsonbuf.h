/* pario tracer: a growing text buffer with JSON string quoting (jsonbuf.c), for the job
 * file and the file summaries. */
#ifndef PARIO_TRACER_JSONBUF_H
#define PARIO_TRACER_JSONBUF_H

#include <stddef.h>

typedef struct px_buf {
    char *p;      /* NUL-terminated while non-NULL */
    size_t n;
    size_t cap;
    int oom;      /* an allocation failed: the text is incomplete */
} px_buf;

void px_buf_add(px_buf *b, const char *s, size_t n);
void px_buf_puts(px_buf *b, const char *s);
void px_buf_printf(px_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* `s` (n bytes) as a JSON string: quoted, with ", \ and control characters escaped;
 * other bytes (UTF-8 names) pass unchanged. */
void px_buf_json(px_buf *b, const char *s, size_t n);
void px_buf_free(px_buf *b);

#endif
