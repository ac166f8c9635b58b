/* pario tracer: growing text buffer, JSON strings (RFC 8259 §7). */
#include "interpose/jsonbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int reserve(px_buf *b, size_t more)
{
    if (b->oom)
        return -1;
    if (b->n + more + 1 <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + more + 1)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = 1;
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

void px_buf_add(px_buf *b, const char *s, size_t n)
{
    if (reserve(b, n) != 0)
        return;
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

void px_buf_puts(px_buf *b, const char *s) { px_buf_add(b, s, strlen(s)); }

void px_buf_printf(px_buf *b, const char *fmt, ...)
{
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof tmp) {
        px_buf_add(b, tmp, (size_t)n);
        return;
    }
    if (reserve(b, (size_t)n) != 0)
        return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)n;
}

void px_buf_json(px_buf *b, const char *s, size_t n)
{
    px_buf_add(b, "\"", 1);
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        px_buf_add(b, s + run, i - run);
        run = i + 1;
        if (c == '"' || c == '\\') {
            char esc[2] = {'\\', (char)c};
            px_buf_add(b, esc, 2);
        } else {
            px_buf_printf(b, "\\u%04x", c);
        }
    }
    px_buf_add(b, s + run, n - run);
    px_buf_add(b, "\"", 1);
}

void px_buf_free(px_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
    b->oom = 0;
}
