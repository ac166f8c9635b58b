/* Test driver of pario's C store data path (src/pario/native/store, core: json, meta, layout,
 * storefile, redirect) for tests/native/test_serve_store.py.  No MPI.
 *
 * Reads one command per line on stdin and prints one JSON line per command:
 * {"ok": true, ...} or {"ok": false, "code": C, "error": "one line"}.  Data to write comes
 * from a file (PATH at byte POS), data read goes to a file (pwrite at POS), so that Python
 * compares the bytes with numpy.
 *
 *   open ROOT [shared] [direct]        close_store          flush_store
 *   fopen NAME  -> h                   fclose H             size H      trunc H SIZE
 *   write H OFF LEN DATA POS           read H OFF LEN OUT POS   -> got
 *   writev H DATA POS N OFF LEN ...    readv H OUT POS N OFF LEN ...
 *   flush H    fsync H    sync_step H CHUNK -> more    stats H    cost H OFF LEN
 *   reserve H END                      (pxs_sfile_reserve: the data file of byte END - 1 holds it)
 *   names N1,N2,...                    (server names for the layout commands)
 *   map LAYOUT.json N X L ...  -> subs [[req, server, local, len, datafile]]
 *   pieces LAYOUT.json N X L ... -> pieces [[server, datafile, local, len, off]]
 *   counts LAYOUT.json X -> [C_j(X)]   json FILE -> ok or the parse error
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/json.h"
#include "store/layout.h"
#include "store/meta.h"
#include "store/redirect.h"

static pxs_store *st;
static pxs_file *files[256];
static char *names[4096];
static int nnames;

static void err_line(int code, const char *msg)
{
    printf("{\"ok\": false, \"code\": %d, \"error\": \"", code);
    for (const char *p = msg; *p; p++) {
        if (*p == '"' || *p == '\\')
            printf("\\%c", *p);
        else if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
            printf("\\u%04x", (unsigned char)*p);   /* control and non-ASCII bytes: JSON-safe */
        else
            putchar(*p);
    }
    printf("\"}\n");
}

static int64_t num(const char *s)
{
    return s ? strtoll(s, NULL, 10) : -1;
}

static char *slurp(const char *path)
{
    return pxs_read_text(path, NULL, 256u << 20);
}

static pxs_file *handle(const char *s)
{
    long h = s ? strtol(s, NULL, 10) : -1;
    return h >= 0 && h < 256 ? files[h] : NULL;
}

static char *load(const char *path, int64_t pos, int64_t len)
{
    char *buf = malloc((size_t)(len > 0 ? len : 1));
    int fd = open(path, O_RDONLY);
    if (!buf || fd < 0) {
        free(buf);
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    int64_t got = 0;
    while (got < len) {
        ssize_t r = pread(fd, buf + got, (size_t)(len - got), pos + got);
        if (r <= 0)
            break;
        got += r;
    }
    close(fd);
    if (got < len) {
        free(buf);
        return NULL;
    }
    return buf;
}

static int store_out(const char *path, int64_t pos, const char *buf, int64_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT, 0644);
    if (fd < 0)
        return -1;
    int64_t done = 0;
    while (done < len) {
        ssize_t r = pwrite(fd, buf + done, (size_t)(len - done), pos + done);
        if (r <= 0)
            break;
        done += r;
    }
    close(fd);
    return done == len ? 0 : -1;
}

static int layout_of(const char *path, pxs_layout **l, char *err, size_t errlen)
{
    char *text = slurp(path);
    if (!text) {
        snprintf(err, errlen, "%s: unreadable", path);
        return PXS_EIO;
    }
    int rc = pxs_layout_parse_text(text, (const char *const *)names, nnames, l, err, errlen);
    free(text);
    return rc;
}

int main(void)
{
    char line[1 << 16];
    setvbuf(stdout, NULL, _IOLBF, 0);
    while (fgets(line, sizeof line, stdin)) {
        char *tok[4096];
        int nt = 0;
        for (char *p = strtok(line, " \t\r\n"); p && nt < 4096; p = strtok(NULL, " \t\r\n"))
            tok[nt++] = p;
        if (nt == 0)
            continue;
        const char *cmd = tok[0];
        char err[PXS_ERRLEN] = "";
        int rc = 0;
        if (!strcmp(cmd, "open")) {
            int flags = 0;
            for (int i = 2; i < nt; i++)
                flags |= !strcmp(tok[i], "shared") ? PXS_SHARED : !strcmp(tok[i], "direct") ? PXS_DIRECT : 0;
            rc = nt < 2 ? PXS_EINVAL : pxs_store_open(tok[1], flags, &st, err, sizeof err);
            if (rc)
                err_line(rc, err[0] ? err : "usage: open ROOT");
            else
                printf("{\"ok\": true}\n");
            continue;
        }
        if (!strcmp(cmd, "names")) {
            nnames = 0;
            for (char *p = nt > 1 ? strtok(tok[1], ",") : NULL; p && nnames < 4096; p = strtok(NULL, ","))
                names[nnames++] = strdup(p);
            printf("{\"ok\": true, \"n\": %d}\n", nnames);
            continue;
        }
        if (!strcmp(cmd, "json")) {
            size_t len = 0;
            char *text = nt > 1 ? pxs_read_text(tok[1], &len, 256u << 20) : NULL;
            pxs_json *j = NULL;
            rc = text ? pxs_json_parse(text, len, &j, err, sizeof err) : PXS_EIO;
            if (rc)
                err_line(rc, err[0] ? err : "unreadable");
            else
                printf("{\"ok\": true, \"type\": %d}\n", j->type);
            pxs_json_free(j);
            free(text);
            continue;
        }
        if (!strcmp(cmd, "map") || !strcmp(cmd, "pieces") || !strcmp(cmd, "counts")) {
            pxs_layout *l = NULL;
            rc = nt < 3 ? PXS_EINVAL : layout_of(tok[1], &l, err, sizeof err);
            if (rc) {
                err_line(rc, err[0] ? err : "usage");
                continue;
            }
            if (!strcmp(cmd, "counts")) {
                int64_t c[4096];
                rc = l->nsrv <= 4096 ? pxs_layout_counts(l, num(tok[2]), c) : PXS_EINVAL;
                if (rc)
                    err_line(rc, "no byte-count function");
                else {
                    printf("{\"ok\": true, \"servers\": [");
                    for (int i = 0; i < l->nsrv; i++)
                        printf("%s%d", i ? ", " : "", l->srv[i]);
                    printf("], \"counts\": [");
                    for (int i = 0; i < l->nsrv; i++)
                        printf("%s%lld", i ? ", " : "", (long long)c[i]);
                    printf("]}\n");
                }
                pxs_layout_free(l);
                continue;
            }
            int64_t n = num(tok[2]);
            pxs_subs subs = {0};
            pxs_pieces pcs = {0};
            for (int64_t k = 0; k < n && !rc && 4 + 2 * k < nt; k++) {
                if (!strcmp(cmd, "map"))
                    rc = pxs_layout_map(l, k, num(tok[3 + 2 * k]), num(tok[4 + 2 * k]), &subs, err, sizeof err);
                else
                    rc = pxs_layout_pieces(l, num(tok[3 + 2 * k]), num(tok[4 + 2 * k]), &pcs, err, sizeof err);
            }
            if (rc)
                err_line(rc, err);
            else if (!strcmp(cmd, "map")) {
                printf("{\"ok\": true, \"subs\": [");
                for (size_t i = 0; i < subs.n; i++)
                    printf("%s[%lld, %d, %lld, %lld, %d]", i ? ", " : "", (long long)subs.s[i].req, subs.s[i].server,
                           (long long)subs.s[i].local, (long long)subs.s[i].len, subs.s[i].datafile);
                printf("]}\n");
            } else {
                printf("{\"ok\": true, \"pieces\": [");
                for (size_t i = 0; i < pcs.n; i++)
                    printf("%s[%d, %d, %lld, %lld, %lld]", i ? ", " : "", pcs.p[i].server, pcs.p[i].datafile,
                           (long long)pcs.p[i].local, (long long)pcs.p[i].len, (long long)pcs.p[i].off);
                printf("]}\n");
            }
            free(subs.s);
            free(pcs.p);
            pxs_layout_free(l);
            continue;
        }
        if (!st) {
            err_line(PXS_EINVAL, "no store open");
            continue;
        }
        if (!strcmp(cmd, "close_store")) {
            rc = pxs_store_close(st, err, sizeof err);
            st = NULL;
            memset(files, 0, sizeof files);
            if (rc)
                err_line(rc, err);
            else
                printf("{\"ok\": true}\n");
            continue;
        }
        if (!strcmp(cmd, "flush_store")) {
            rc = pxs_store_flush(st);
            if (rc)
                err_line(rc, pxs_store_error(st));
            else
                printf("{\"ok\": true}\n");
            continue;
        }
        if (!strcmp(cmd, "fopen")) {
            int h = 0;
            while (h < 256 && files[h])
                h++;
            rc = nt < 2 || h == 256 ? PXS_EINVAL : pxs_open(st, tok[1], &files[h]);
            if (rc)
                err_line(rc, nt < 2 ? "usage: fopen NAME" : pxs_store_error(st));
            else
                printf("{\"ok\": true, \"h\": %d}\n", h);
            continue;
        }
        pxs_file *f = handle(nt > 1 ? tok[1] : NULL);
        if (!f) {
            err_line(PXS_EINVAL, "no such handle");
            continue;
        }
        if (!strcmp(cmd, "fclose")) {
            rc = pxs_close(f);
            files[strtol(tok[1], NULL, 10)] = NULL;
        } else if (!strcmp(cmd, "write") && nt == 6) {
            int64_t len = num(tok[3]);
            char *buf = load(tok[4], num(tok[5]), len);
            rc = buf ? pxs_write(f, num(tok[2]), buf, len) : PXS_EIO;
            if (!buf)
                snprintf(st->err, sizeof st->err, "cannot read %s", tok[4]);
            free(buf);
        } else if (!strcmp(cmd, "read") && nt == 6) {
            int64_t len = num(tok[3]), got = 0;
            char *buf = malloc((size_t)(len > 0 ? len : 1));
            rc = buf ? pxs_read(f, num(tok[2]), buf, len, &got) : PXS_ENOMEM;
            if (!rc && store_out(tok[4], num(tok[5]), buf, len))
                rc = PXS_EIO;
            free(buf);
            if (!rc) {
                printf("{\"ok\": true, \"got\": %lld}\n", (long long)got);
                continue;
            }
        } else if ((!strcmp(cmd, "writev") || !strcmp(cmd, "readv")) && nt >= 5) {
            int64_t n = num(tok[4]);
            if (n < 0 || 5 + 2 * n != nt) {
                err_line(PXS_EINVAL, "usage: writev|readv H PATH POS N OFF LEN ...");
                continue;
            }
            int64_t *off = malloc((size_t)(n + 1) * 8), *len = malloc((size_t)(n + 1) * 8),
                    *bo = malloc((size_t)(n + 1) * 8), tot = 0;
            for (int64_t k = 0; k < n; k++) {
                off[k] = num(tok[5 + 2 * k]);
                len[k] = num(tok[6 + 2 * k]);
                bo[k] = tot;
                tot += len[k];
            }
            char *buf = !strcmp(cmd, "writev") ? load(tok[2], num(tok[3]), tot) : malloc((size_t)(tot + 1));
            if (!buf)
                rc = PXS_EIO;
            else if (!strcmp(cmd, "writev"))
                rc = pxs_writev(f, n, off, len, buf, bo);
            else {
                rc = pxs_readv(f, n, off, len, buf, bo);
                if (!rc && store_out(tok[2], num(tok[3]), buf, tot))
                    rc = PXS_EIO;
            }
            free(buf);
            free(off);
            free(len);
            free(bo);
        } else if (!strcmp(cmd, "size")) {
            int64_t s = 0;
            rc = pxs_size(f, &s);
            if (!rc) {
                printf("{\"ok\": true, \"size\": %lld}\n", (long long)s);
                continue;
            }
        } else if (!strcmp(cmd, "trunc") && nt == 3) {
            rc = pxs_truncate(f, num(tok[2]));
        } else if (!strcmp(cmd, "reserve") && nt == 3) {
            rc = pxs_sfile_reserve(f->h, num(tok[2]));
        } else if (!strcmp(cmd, "flush")) {
            rc = pxs_flush(f);
        } else if (!strcmp(cmd, "fsync")) {
            rc = pxs_fsync(f);
        } else if (!strcmp(cmd, "sync_step") && nt == 3) {
            int more = 0;
            rc = pxs_sync_step(f, num(tok[2]), &more);
            if (!rc) {
                printf("{\"ok\": true, \"more\": %d}\n", more);
                continue;
            }
        } else if (!strcmp(cmd, "cost") && nt == 4) {
            double c = 0;
            rc = pxs_cost(st, f->h, num(tok[2]), num(tok[3]), &c);
            if (!rc) {
                printf("{\"ok\": true, \"cost\": %.17g}\n", c);
                continue;
            }
        } else if (!strcmp(cmd, "stats")) {
            const pxs_stats *s = &f->stats;
            printf("{\"ok\": true, \"reads\": %llu, \"writes\": %llu, \"redirected_reads\": %llu, "
                   "\"redirected_writes\": %llu, \"read_original\": %lld, \"read_replica\": %lld, "
                   "\"written_original\": %lld, \"written_replica\": %lld, \"choices\": %llu, \"synced\": %lld, "
                   "\"replicas\": %d, \"cheapest\": %d, \"full\": %d, \"size\": %lld}\n",
                   (unsigned long long)s->reads, (unsigned long long)s->writes, (unsigned long long)s->redirected_reads,
                   (unsigned long long)s->redirected_writes, (long long)s->read_original, (long long)s->read_replica,
                   (long long)s->written_original, (long long)s->written_replica, (unsigned long long)s->choices,
                   (long long)s->synced, f->nrep, f->cheapest, f->nfull, (long long)f->h->size);
            continue;
        } else {
            err_line(PXS_EINVAL, "unknown command or wrong arguments");
            continue;
        }
        if (rc)
            err_line(rc, pxs_store_error(st));
        else
            printf("{\"ok\": true}\n");
    }
    if (st) {
        char err[PXS_ERRLEN];
        if (pxs_store_close(st, err, sizeof err))
            fprintf(stderr, "pario: error: %s\n", err);
    }
    return 0;
}
