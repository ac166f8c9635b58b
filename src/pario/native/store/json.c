/* pario serve: the strict JSON reader (json.h).  Recursive descent with an explicit depth
 * bound; every read is bounds-checked against the input length. */
#include "store/json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *p, *end, *start;
    char *err;
    size_t errlen;
    int oom;
} parser;

static int fail(parser *ps, const char *what)
{
    if (ps->err && ps->errlen)
        snprintf(ps->err, ps->errlen, "%s at byte %zu", what, (size_t)(ps->p - ps->start));
    return -1;
}

static void skip_ws(parser *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

static pxs_json *node(parser *ps, int type)
{
    pxs_json *j = calloc(1, sizeof *j);
    if (!j)
        ps->oom = 1;
    else
        j->type = type;
    return j;
}

static int put_utf8(char *o, unsigned cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

static int hex4(parser *ps, unsigned *v)
{
    if (ps->end - ps->p < 4)
        return fail(ps, "truncated \\u escape");
    unsigned x = 0;
    for (int i = 0; i < 4; i++) {
        char c = ps->p[i];
        x <<= 4;
        if (c >= '0' && c <= '9')
            x |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            x |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            x |= (unsigned)(c - 'A' + 10);
        else
            return fail(ps, "bad \\u escape");
    }
    ps->p += 4;
    *v = x;
    return 0;
}

/* a string starting at the opening quote; the decoded bytes in *out (malloc'ed) */
static int parse_string(parser *ps, char **out, size_t *len)
{
    ps->p++;   /* the quote */
    /* decoded text is never longer than the source */
    const char *q = ps->p;
    while (q < ps->end && *q != '"')
        q += (*q == '\\' && ps->end - q > 1) ? 2 : 1;
    if (q >= ps->end)
        return fail(ps, "unterminated string");
    char *buf = malloc((size_t)(q - ps->p) + 1);
    if (!buf) {
        ps->oom = 1;
        return -1;
    }
    size_t n = 0;
    while (ps->p < ps->end && *ps->p != '"') {
        unsigned char c = (unsigned char)*ps->p;
        if (c < 0x20) {
            free(buf);
            return fail(ps, "control character in a string");
        }
        if (c != '\\') {
            buf[n++] = (char)c;
            ps->p++;
            continue;
        }
        ps->p++;
        if (ps->p >= ps->end) {
            free(buf);
            return fail(ps, "unterminated string");
        }
        char e = *ps->p++;
        switch (e) {
        case '"': buf[n++] = '"'; break;
        case '\\': buf[n++] = '\\'; break;
        case '/': buf[n++] = '/'; break;
        case 'b': buf[n++] = '\b'; break;
        case 'f': buf[n++] = '\f'; break;
        case 'n': buf[n++] = '\n'; break;
        case 'r': buf[n++] = '\r'; break;
        case 't': buf[n++] = '\t'; break;
        case 'u': {
            unsigned cp;
            if (hex4(ps, &cp)) {
                free(buf);
                return -1;
            }
            if (cp >= 0xD800 && cp < 0xDC00) {   /* a high surrogate: its low half must follow */
                unsigned lo;
                if (ps->end - ps->p < 2 || ps->p[0] != '\\' || ps->p[1] != 'u') {
                    free(buf);
                    return fail(ps, "lone UTF-16 surrogate");
                }
                ps->p += 2;
                if (hex4(ps, &lo)) {
                    free(buf);
                    return -1;
                }
                if (lo < 0xDC00 || lo >= 0xE000) {
                    free(buf);
                    return fail(ps, "bad UTF-16 surrogate pair");
                }
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp < 0xE000) {
                free(buf);
                return fail(ps, "lone UTF-16 surrogate");
            }
            n += (size_t)put_utf8(buf + n, cp);   /* \uXXXX is 6 source bytes, at most 4 out */
            break;
        }
        default:
            free(buf);
            ps->p--;
            return fail(ps, "bad escape in a string");
        }
    }
    ps->p++;   /* closing quote */
    buf[n] = 0;
    *out = buf;
    *len = n;
    return 0;
}

static int parse_number(parser *ps, pxs_json *j)
{
    const char *s = ps->p;
    const char *q = s;
    if (q < ps->end && *q == '-')
        q++;
    if (q >= ps->end || *q < '0' || *q > '9')
        return fail(ps, "bad number");
    if (*q == '0')
        q++;
    else
        while (q < ps->end && *q >= '0' && *q <= '9')
            q++;
    int integral = 1;
    if (q < ps->end && *q == '.') {
        integral = 0;
        q++;
        if (q >= ps->end || *q < '0' || *q > '9')
            return fail(ps, "bad number");
        while (q < ps->end && *q >= '0' && *q <= '9')
            q++;
    }
    if (q < ps->end && (*q == 'e' || *q == 'E')) {
        integral = 0;
        q++;
        if (q < ps->end && (*q == '+' || *q == '-'))
            q++;
        if (q >= ps->end || *q < '0' || *q > '9')
            return fail(ps, "bad number");
        while (q < ps->end && *q >= '0' && *q <= '9')
            q++;
    }
    size_t len = (size_t)(q - s);
    char tmp[64];
    char *b = len < sizeof tmp ? tmp : malloc(len + 1);
    if (!b) {
        ps->oom = 1;
        return -1;
    }
    memcpy(b, s, len);
    b[len] = 0;
    errno = 0;
    j->d = strtod(b, NULL);
    if (integral) {
        errno = 0;
        long long v = strtoll(b, NULL, 10);
        if (errno == 0) {
            j->is_int = 1;
            j->i = (int64_t)v;
        }
    }
    if (b != tmp)
        free(b);
    ps->p = q;
    return 0;
}

static pxs_json *parse_value(parser *ps, int depth);

static int grow(parser *ps, pxs_json *j, size_t *cap, int obj)
{
    if (j->n < *cap)
        return 0;
    size_t nc = *cap ? *cap * 2 : 4;
    pxs_json **v = realloc(j->v, nc * sizeof *v);
    if (!v) {
        ps->oom = 1;
        return -1;
    }
    j->v = v;
    if (obj) {
        char **k = realloc(j->k, nc * sizeof *k);
        if (!k) {
            ps->oom = 1;
            return -1;
        }
        j->k = k;
    }
    *cap = nc;
    return 0;
}

static pxs_json *parse_container(parser *ps, int depth, int obj)
{
    pxs_json *j = node(ps, obj ? PXS_JOBJ : PXS_JARR);
    if (!j)
        return NULL;
    size_t cap = 0;
    ps->p++;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == (obj ? '}' : ']')) {
        ps->p++;
        return j;
    }
    for (;;) {
        skip_ws(ps);
        char *key = NULL;
        if (obj) {
            size_t kl;
            if (ps->p >= ps->end || *ps->p != '"') {
                fail(ps, "expected a string key");
                goto bad;
            }
            if (parse_string(ps, &key, &kl))
                goto bad;
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != ':') {
                free(key);
                fail(ps, "expected ':'");
                goto bad;
            }
            ps->p++;
        }
        pxs_json *v = parse_value(ps, depth + 1);
        if (!v || grow(ps, j, &cap, obj)) {
            free(key);
            pxs_json_free(v);
            goto bad;
        }
        if (obj)
            j->k[j->n] = key;
        j->v[j->n++] = v;
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (ps->p < ps->end && *ps->p == (obj ? '}' : ']')) {
            ps->p++;
            return j;
        }
        fail(ps, obj ? "expected ',' or '}'" : "expected ',' or ']'");
        goto bad;
    }
bad:
    pxs_json_free(j);
    return NULL;
}

static int literal(parser *ps, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0)
        return fail(ps, "unexpected character");
    ps->p += n;
    return 0;
}

static pxs_json *parse_value(parser *ps, int depth)
{
    if (depth > PXS_JSON_MAX_DEPTH) {
        fail(ps, "nesting too deep");
        return NULL;
    }
    skip_ws(ps);
    if (ps->p >= ps->end) {
        fail(ps, "unexpected end of input");
        return NULL;
    }
    char c = *ps->p;
    pxs_json *j = NULL;
    switch (c) {
    case '{':
        return parse_container(ps, depth, 1);
    case '[':
        return parse_container(ps, depth, 0);
    case '"':
        j = node(ps, PXS_JSTR);
        if (j && parse_string(ps, &j->s, &j->slen)) {
            pxs_json_free(j);
            return NULL;
        }
        return j;
    case 't':
        if (literal(ps, "true"))
            return NULL;
        return node(ps, PXS_JTRUE);
    case 'f':
        if (literal(ps, "false"))
            return NULL;
        return node(ps, PXS_JFALSE);
    case 'n':
        if (literal(ps, "null"))
            return NULL;
        return node(ps, PXS_JNULL);
    default:
        if (c == '-' || (c >= '0' && c <= '9')) {
            j = node(ps, PXS_JNUM);
            if (j && parse_number(ps, j)) {
                pxs_json_free(j);
                return NULL;
            }
            return j;
        }
        fail(ps, "unexpected character");
        return NULL;
    }
}

int pxs_json_parse(const char *text, size_t n, pxs_json **out, char *err, size_t errlen)
{
    parser ps = {text, text + n, text, err, errlen, 0};
    *out = NULL;
    if (err && errlen)
        err[0] = 0;
    if (!text) {
        if (err && errlen)
            snprintf(err, errlen, "no input");
        return -1;
    }
    pxs_json *j = parse_value(&ps, 0);
    if (!j) {
        if (ps.oom) {
            if (err && errlen)
                snprintf(err, errlen, "out of memory");
            return -2;
        }
        return -1;
    }
    skip_ws(&ps);
    if (ps.p != ps.end) {
        pxs_json_free(j);
        return fail(&ps, "extra data after the JSON value");
    }
    *out = j;
    return 0;
}

void pxs_json_free(pxs_json *j)
{
    if (!j)
        return;
    for (size_t i = 0; i < j->n; i++) {
        pxs_json_free(j->v[i]);
        if (j->k)
            free(j->k[i]);
    }
    free(j->v);
    free(j->k);
    free(j->s);
    free(j);
}

const pxs_json *pxs_json_get(const pxs_json *obj, const char *key)
{
    if (!obj || obj->type != PXS_JOBJ)
        return NULL;
    for (size_t i = obj->n; i-- > 0;)
        if (strcmp(obj->k[i], key) == 0)
            return obj->v[i];
    return NULL;
}

int pxs_json_streq(const pxs_json *j, const char *s)
{
    return j && j->type == PXS_JSTR && strlen(s) == j->slen && memcmp(j->s, s, j->slen) == 0;
}
