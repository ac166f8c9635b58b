/* Test driver for pario's C two-phase collective I/O (src/pario/native/collective/twophase.c,
 * order.c), run by tests/native/test_serve_twophase.py under .venv/bin/mpiexec.
 *
 *   twophase_driver SPEC     run the cases of SPEC (below), one JSON line per case on rank 0
 *   twophase_driver --bad FILE    bad arguments: one JSON line per scenario with every rank's code
 *   twophase_driver --order FILE  pario_request_order on the queries of FILE (run_orders)
 *
 * SPEC: whitespace-separated tokens, cases of
 *   case ID  op write|read  impl pario|romio|posix  file PATH  order NAME  cb_buffer N
 *   cb_nodes N  mode enable|automatic|disable  aggs K r1..rK  layout K (server stripe kind)xK
 *   data PREFIX  log PREFIX|-  ext RANK K (off len)xK ...  end
 * impl pario: pario_tp_collective with a POSIX pwrite/pread io callback on PATH (the layout
 * given is a round-robin striping with one stripe size per server: the map callback);
 * impl romio: MPI_File_write_at_all / read_at_all through an hindexed file view (when every
 * rank's extents are sorted and disjoint, else MPI_File_write_at / read_at per extent);
 * impl posix: pwrite / pread per extent.  Writes take rank R's data from PREFIX.R, reads
 * store it there.  log PREFIX: every io call of the pario impl appends one line
 * "cycle n off len off len ..." to PREFIX.R (rank R), in the order the pieces were issued.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collective/order.h"
#include "collective/twophase.h"

static int g_rank, g_size;

static void die(const char *msg)
{
    fprintf(stderr, "pario: error: twophase_driver (rank %d): %s\n", g_rank, msg);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

/* ------------------------------------------------------------------ io callback */

typedef struct io_ctx {
    int fd;
    FILE *log;
    int fail;       /* --bad: return -1 from the io callback */
} io_ctx;

static int posix_write(int fd, const char *b, int64_t n, int64_t off)
{
    while (n > 0) {
        ssize_t w = pwrite(fd, b, (size_t)n, (off_t)off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        b += w;
        n -= w;
        off += w;
    }
    return 0;
}

static int posix_read(int fd, char *b, int64_t n, int64_t off)
{
    while (n > 0) {
        ssize_t r = pread(fd, b, (size_t)n, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0) {   /* past the end of the file: zeros */
            memset(b, 0, (size_t)n);
            return 0;
        }
        b += r;
        n -= r;
        off += r;
    }
    return 0;
}

/* Issue the pieces in the order given; consecutive pieces contiguous both in the file and
 * in the buffer go out as one call. */
static int posix_io(void *vctx, int write, int cycle, int n, const int64_t *off, const int64_t *len,
                    const int64_t *pos, char *buf)
{
    io_ctx *c = vctx;
    if (c->log) {
        fprintf(c->log, "%d %d", cycle, n);
        for (int i = 0; i < n; i++)
            fprintf(c->log, " %lld %lld", (long long)off[i], (long long)len[i]);
        fputc('\n', c->log);
    }
    if (c->fail)
        return -1;
    for (int i = 0; i < n;) {
        int j = i + 1;
        int64_t l = len[i];
        while (j < n && off[j] == off[i] + l && pos[j] == pos[i] + l)
            l += len[j++];
        if ((write ? posix_write(c->fd, buf + pos[i], l, off[i]) : posix_read(c->fd, buf + pos[i], l, off[i])) != 0)
            return -1;
        i = j;
    }
    return 0;
}

/* ------------------------------------------------------------------ layout callback */

typedef struct stripes {
    int n;              /* servers with a stripe > 0, in layout order */
    int32_t server[64], kind[64];
    int64_t width[64], W;
    int bad;            /* --bad: 1 = piece length 0, 2 = a server not in the list */
} stripes;

/* Round-robin striping, one stripe size per server (pario.layout.Striped; SPEC §1: round
 * r = x div W, position q = x mod W, the server whose prefix interval holds q). */
static int stripe_map(void *vctx, int64_t off, int64_t len, int64_t *plen, int32_t *server, int32_t *kind)
{
    const stripes *s = vctx;
    int64_t q = off % s->W, pre = 0;
    for (int i = 0; i < s->n; i++) {
        if (q < pre + s->width[i]) {
            int64_t room = pre + s->width[i] - q;
            *plen = len < room ? len : room;
            *server = s->server[i];
            *kind = s->kind[i];
            if (s->bad == 1)
                *plen = 0;
            if (s->bad == 2)
                *server = 99;
            return 0;
        }
        pre += s->width[i];
    }
    return -1;
}

/* ------------------------------------------------------------------ spec parsing */

typedef struct spec {
    char id[128], op[16], impl[16], file[4096], order[16], mode[16], data[4096], log[4096];
    int64_t cb_buffer;
    int cb_nodes, naggs, aggs[1024];
    stripes lay;
    int has_layout;
    int64_t n, cap, *off, *len;   /* this rank's extents */
} spec;

static char *tok(FILE *f, char *b, size_t n)
{
    return fscanf(f, "%4095s", b) == 1 ? (strlen(b) < n ? b : NULL) : NULL;
}

static long long num(FILE *f)
{
    long long v;
    if (fscanf(f, "%lld", &v) != 1)
        die("spec: number expected");
    return v;
}

static int read_case(FILE *f, spec *s)
{
    char t[4096];
    memset(s, 0, sizeof *s);   /* the previous case's extents were freed */
    strcpy(s->order, "romcio");
    strcpy(s->mode, "enable");
    strcpy(s->log, "-");
    s->cb_buffer = 1 << 24;
    if (!tok(f, t, sizeof t))
        return 0;
    if (strcmp(t, "case") != 0 || !tok(f, s->id, sizeof s->id))
        die("spec: 'case ID' expected");
    for (;;) {
        if (!tok(f, t, sizeof t))
            die("spec: unexpected end");
#define STR(key, field) if (strcmp(t, key) == 0) { if (!tok(f, s->field, sizeof s->field)) die("spec: " key); continue; }
        if (strcmp(t, "end") == 0)
            break;
        STR("op", op)
        STR("impl", impl)
        STR("file", file)
        STR("order", order)
        STR("mode", mode)
        STR("data", data)
        STR("log", log)
        if (strcmp(t, "cb_buffer") == 0) { s->cb_buffer = num(f); continue; }
        if (strcmp(t, "cb_nodes") == 0) { s->cb_nodes = (int)num(f); continue; }
        if (strcmp(t, "aggs") == 0) {
            s->naggs = (int)num(f);
            if (s->naggs < 0 || s->naggs > 1024)
                die("spec: aggs");
            for (int i = 0; i < s->naggs; i++)
                s->aggs[i] = (int)num(f);
            continue;
        }
        if (strcmp(t, "layout") == 0) {
            int k = (int)num(f);
            if (k < 0 || k > 64)
                die("spec: layout");
            s->has_layout = k > 0;
            s->lay.n = 0;
            s->lay.W = 0;
            for (int i = 0; i < k; i++) {
                int32_t sv = (int32_t)num(f);
                int64_t w = num(f);
                int32_t kd = (int32_t)num(f);
                if (w > 0) {   /* a stripe of 0 leaves the server out (servers_used) */
                    s->lay.server[s->lay.n] = sv;
                    s->lay.width[s->lay.n] = w;
                    s->lay.kind[s->lay.n] = kd;
                    s->lay.n++;
                    s->lay.W += w;
                }
            }
            continue;
        }
        if (strcmp(t, "ext") == 0) {
            int r = (int)num(f);
            int64_t k = num(f);
            for (int64_t i = 0; i < k; i++) {
                int64_t o = num(f), l = num(f);
                if (r != g_rank)
                    continue;
                if (s->n == s->cap) {
                    s->cap = s->cap ? 2 * s->cap : 64;
                    s->off = realloc(s->off, (size_t)s->cap * sizeof *s->off);
                    s->len = realloc(s->len, (size_t)s->cap * sizeof *s->len);
                    if (!s->off || !s->len)
                        die("out of memory");
                }
                s->off[s->n] = o;
                s->len[s->n] = l;
                s->n++;
            }
            continue;
        }
        fprintf(stderr, "token %s\n", t);
        die("spec: unknown key");
    }
    return 1;
}

/* ------------------------------------------------------------------ impls */

static char *load(const char *prefix, int64_t n)
{
    char path[4200];
    snprintf(path, sizeof path, "%s.%d", prefix, g_rank);
    char *b = malloc((size_t)(n ? n : 1));
    if (b == NULL)
        die("out of memory");
    if (n == 0)
        return b;
    int fd = open(path, O_RDONLY);
    if (fd < 0 || posix_read(fd, b, n, 0) != 0)
        die("cannot read the rank's data file");
    close(fd);
    return b;
}

static void store(const char *prefix, const char *b, int64_t n)
{
    char path[4200];
    snprintf(path, sizeof path, "%s.%d", prefix, g_rank);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || posix_write(fd, b, n, 0) != 0)
        die("cannot write the rank's output file");
    close(fd);
}

static int cb_mode(const char *m)
{
    if (strcmp(m, "enable") == 0) return PARIO_TP_CB_ENABLE;
    if (strcmp(m, "automatic") == 0) return PARIO_TP_CB_AUTOMATIC;
    if (strcmp(m, "disable") == 0) return PARIO_TP_CB_DISABLE;
    die("spec: mode");
    return -1;
}

static int run_pario(spec *s, int write, char *buf, int64_t *moved, int *aggs_out, int *naggs_out)
{
    io_ctx c = { -1, NULL, 0 };
    c.fd = open(s->file, write ? (O_RDWR | O_CREAT) : O_RDONLY, 0644);
    if (c.fd < 0)
        die("cannot open the file");
    if (strcmp(s->log, "-") != 0) {
        char path[4200];
        snprintf(path, sizeof path, "%s.%d", s->log, g_rank);
        c.log = fopen(path, "w");
        if (c.log == NULL)
            die("cannot open the log");
    }
    pario_tp_layout L = { stripe_map, &s->lay, s->lay.n, s->lay.server, s->lay.kind };
    pario_tp_params p = { 0 };
    p.order = pario_order_find(s->order);
    p.cb_buffer_size = s->cb_buffer;
    p.cb_nodes = s->cb_nodes;
    p.naggregators = s->naggs;
    p.aggregators = s->naggs ? s->aggs : NULL;
    p.cb_mode = cb_mode(s->mode);
    p.layout = s->has_layout ? &L : NULL;
    p.io = posix_io;
    p.io_ctx = &c;
    MPI_Comm comm;   /* private, as a library keeps its own */
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    int rc = pario_tp_collective(comm, write, s->n, s->off, s->len, buf, &p, moved);
    if (s->naggs == 0)
        pario_tp_choose_aggregators(comm, s->cb_nodes, aggs_out, naggs_out);
    else {
        memcpy(aggs_out, s->aggs, (size_t)s->naggs * sizeof *aggs_out);
        *naggs_out = s->naggs;
    }
    MPI_Comm_free(&comm);
    if (c.log)
        fclose(c.log);
    close(c.fd);
    return rc;
}

static int run_romio(spec *s, int write, char *buf)
{
    int sorted = 1;
    for (int64_t i = 1; i < s->n; i++)
        if (s->off[i] < s->off[i - 1] + s->len[i - 1])
            sorted = 0;
    int all_sorted;
    MPI_Allreduce(&sorted, &all_sorted, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Info info;
    MPI_Info_create(&info);
    char v[64];
    snprintf(v, sizeof v, "%lld", (long long)s->cb_buffer);
    MPI_Info_set(info, "cb_buffer_size", v);
    if (s->cb_nodes > 0) {
        snprintf(v, sizeof v, "%d", s->cb_nodes);
        MPI_Info_set(info, "cb_nodes", v);
    }
    MPI_Info_set(info, write ? "romio_cb_write" : "romio_cb_read", "enable");
    MPI_File fh;
    if (MPI_File_open(MPI_COMM_WORLD, s->file, write ? MPI_MODE_RDWR : MPI_MODE_RDONLY, info, &fh) != MPI_SUCCESS)
        die("MPI_File_open");
    MPI_Info_free(&info);
    int64_t total = 0;
    for (int64_t i = 0; i < s->n; i++)
        total += s->len[i];
    int rc = MPI_SUCCESS;
    if (all_sorted) {
        int m = 0;
        int *bl = malloc((size_t)(s->n + 1) * sizeof *bl);
        MPI_Aint *dp = malloc((size_t)(s->n + 1) * sizeof *dp);
        for (int64_t i = 0; i < s->n; i++)
            if (s->len[i] > 0) {
                bl[m] = (int)s->len[i];
                dp[m++] = (MPI_Aint)s->off[i];
            }
        MPI_Datatype ft = MPI_BYTE;
        if (m > 0) {
            MPI_Type_create_hindexed(m, bl, dp, MPI_BYTE, &ft);
            MPI_Type_commit(&ft);
        }
        MPI_File_set_view(fh, 0, MPI_BYTE, ft, "native", MPI_INFO_NULL);
        MPI_Status st;
        rc = write ? MPI_File_write_at_all(fh, 0, buf, (int)total, MPI_BYTE, &st)
                   : MPI_File_read_at_all(fh, 0, buf, (int)total, MPI_BYTE, &st);
        if (m > 0)
            MPI_Type_free(&ft);
        free(bl);
        free(dp);
    } else {
        int64_t sp = 0;
        for (int64_t i = 0; i < s->n && rc == MPI_SUCCESS; i++) {
            MPI_Status st;
            rc = write ? MPI_File_write_at(fh, s->off[i], buf + sp, (int)s->len[i], MPI_BYTE, &st)
                       : MPI_File_read_at(fh, s->off[i], buf + sp, (int)s->len[i], MPI_BYTE, &st);
            sp += s->len[i];
        }
    }
    MPI_File_close(&fh);
    return rc == MPI_SUCCESS ? 0 : -1;
}

static int run_posix(spec *s, int write, char *buf)
{
    int fd = open(s->file, write ? O_RDWR : O_RDONLY);
    if (fd < 0)
        die("cannot open the file");
    int64_t sp = 0;
    int rc = 0;
    for (int64_t i = 0; i < s->n && rc == 0; i++) {
        rc = write ? posix_write(fd, buf + sp, s->len[i], s->off[i]) : posix_read(fd, buf + sp, s->len[i], s->off[i]);
        sp += s->len[i];
    }
    close(fd);
    MPI_Barrier(MPI_COMM_WORLD);
    return rc;
}

static void print_ints(const char *key, const long long *v, int n, int last)
{
    printf("\"%s\": [", key);
    for (int i = 0; i < n; i++)
        printf("%s%lld", i ? ", " : "", v[i]);
    printf("]%s", last ? "" : ", ");
}

static void run_cases(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        die("cannot open the spec");
    spec *s = calloc(1, sizeof *s);
    int *aggs = malloc((size_t)g_size * sizeof *aggs);
    long long *all = malloc((size_t)g_size * 2 * sizeof *all);
    while (read_case(f, s)) {
        int write = strcmp(s->op, "write") == 0;
        int64_t total = 0;
        for (int64_t i = 0; i < s->n; i++)
            total += s->len[i];
        char *buf = write ? load(s->data, total) : calloc(1, (size_t)(total ? total : 1));
        int64_t moved = 0;
        int naggs = 0, rc = -1;
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        if (strcmp(s->impl, "pario") == 0)
            rc = run_pario(s, write, buf, &moved, aggs, &naggs);
        else if (strcmp(s->impl, "romio") == 0)
            rc = run_romio(s, write, buf);
        else if (strcmp(s->impl, "posix") == 0)
            rc = run_posix(s, write, buf);
        else
            die("spec: impl");
        double dt = MPI_Wtime() - t0, tmax = 0;   /* informational only (no test asserts a time) */
        MPI_Reduce(&dt, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (!write && rc == 0)
            store(s->data, buf, total);
        long long mine[2] = { rc, (long long)moved };
        MPI_Gather(mine, 2, MPI_LONG_LONG, all, 2, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
        if (g_rank == 0) {
            long long rcs[1024], mv[1024], ag[1024];
            for (int r = 0; r < g_size; r++) {
                rcs[r] = all[2 * r];
                mv[r] = all[2 * r + 1];
            }
            for (int i = 0; i < naggs; i++)
                ag[i] = aggs[i];
            printf("{\"case\": \"%s\", ", s->id);
            print_ints("rc", rcs, g_size, 0);
            print_ints("moved", mv, g_size, 0);
            print_ints("aggs", ag, naggs, 0);
            printf("\"seconds\": %.6f}\n", tmax);
            fflush(stdout);
        }
        free(buf);
        free(s->off);
        free(s->len);
        memset(s, 0, sizeof *s);
    }
    free(s);
    free(aggs);
    free(all);
    fclose(f);
}

/* ------------------------------------------------------------------ bad arguments */

static void report(const char *name, int rc)
{
    int *all = malloc((size_t)g_size * sizeof *all);
    MPI_Gather(&rc, 1, MPI_INT, all, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (g_rank == 0) {
        printf("{\"bad\": \"%s\", \"rc\": [", name);
        for (int r = 0; r < g_size; r++)
            printf("%s%d", r ? ", " : "", all[r]);
        printf("]}\n");
        fflush(stdout);
    }
    free(all);
}

/* pario_request_order with the arguments as a list */
static int order_call(int method, int64_t n, const int64_t *off, const int32_t *sv, const int32_t *kd,
                      const int32_t *pr, int64_t a, const pario_order_servers *S, int64_t *ord, int64_t *m,
                      int64_t *tw)
{
    pario_order_in in = { n, off, sv, kd, pr, a, S };
    return pario_request_order(method, &in, ord, m, tw);
}

static void run_bad(const char *path)
{
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        die("cannot open the scratch file");
    io_ctx c = { fd, NULL, 0 };
    stripes lay = { 2, { 0, 1 }, { 0, 1 }, { 64, 64 }, 128, 0 };
    pario_tp_layout L = { stripe_map, &lay, 2, lay.server, lay.kind };
    pario_tp_params base = { 0 };
    base.order = pario_order_find("hacio");
    base.cb_buffer_size = 100;
    base.cb_mode = PARIO_TP_CB_ENABLE;
    base.layout = &L;
    base.io = posix_io;
    base.io_ctx = &c;
    /* rank r: 3 blocks of 50 bytes, interleaved: r*50 + k*50*size */
    int64_t off[3], len[3] = { 50, 50, 50 };
    for (int k = 0; k < 3; k++)
        off[k] = (int64_t)g_rank * 50 + (int64_t)k * 50 * g_size;
    char buf[150], back[150];
    for (int i = 0; i < 150; i++)
        buf[i] = (char)(g_rank * 37 + i * 11 + 1);
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    int last = g_size - 1;
    pario_tp_params p;
    int64_t o2[3], l2[3];

#define RUN(name, ...) do { p = base; memcpy(o2, off, sizeof off); memcpy(l2, len, sizeof len); \
        __VA_ARGS__; report(name, pario_tp_collective(comm, 1, 3, o2, l2, buf, &p, NULL)); } while (0)
    RUN("negative_offset_on_last_rank", if (g_rank == last) o2[1] = -5);
    RUN("negative_length_on_rank0", if (g_rank == 0) l2[2] = -1);
    RUN("offset_beyond_2^62", if (g_rank == last) o2[0] = ((int64_t)1 << 62));
    report("null_buffer", pario_tp_collective(comm, 1, 3, off, len, g_rank == 0 ? NULL : buf, &base, NULL));
    report("null_extents", pario_tp_collective(comm, 1, 3, g_rank == last ? NULL : off, len, buf, &base, NULL));
    report("negative_count", pario_tp_collective(comm, 1, g_rank == 0 ? -1 : 3, off, len, buf, &base, NULL));
    RUN("cb_buffer_zero", p.cb_buffer_size = 0);
    RUN("cb_buffer_mismatch", if (g_rank == 0) p.cb_buffer_size = 64);
    RUN("order_unknown", p.order = pario_order_count());
    RUN("order_mismatch", if (g_rank == last) p.order = pario_order_find("romcio"));
    RUN("cb_mode_unknown", p.cb_mode = 9);
    int agg_oob[2] = { 0, g_size };
    RUN("aggregator_out_of_range", p.naggregators = 2; p.aggregators = agg_oob);
    int agg_dup[2] = { 0, 0 };
    RUN("aggregator_twice", p.naggregators = 2; p.aggregators = agg_dup);
    RUN("aggregators_null", p.naggregators = 1; p.aggregators = NULL);
    RUN("io_null", p.io = NULL);
    RUN("layout_map_null", pario_tp_layout L2 = L; L2.map = NULL; p.layout = &L2);
    RUN("layout_zero_piece", lay.bad = 1);
    lay.bad = 0;
    RUN("layout_server_not_listed", lay.bad = 2);
    lay.bad = 0;
    RUN("write_io_fails_on_rank0", if (g_rank == 0) c.fail = 1);
    c.fail = 0;
    report("params_null", pario_tp_collective(comm, 1, 3, off, len, buf, NULL, NULL));
    report("comm_null", pario_tp_collective(MPI_COMM_NULL, 1, 3, off, len, buf, &base, NULL));
    report("write_flag_bad", pario_tp_collective(comm, 5, 3, off, len, buf, &base, NULL));
    /* read: the io callback fails on the last rank, the only aggregator */
    if (g_rank == last)
        c.fail = 1;
    p = base;
    p.naggregators = 1;
    p.aggregators = &last;
    report("read_io_fails_on_last_rank", pario_tp_collective(comm, 0, 3, off, len, back, &p, NULL));
    c.fail = 0;
    /* the order functions themselves (rank 0's answers only matter: pure functions) */
    {
        int64_t o[3] = { 0, 64, 128 }, ord[3], m, tw[3];
        int32_t sv[3] = { 0, 1, 0 }, kd[3] = { 0, 1, 0 }, bad_kind[3] = { 0, 2, 0 }, pr[3] = { 0, 0, 1 };
        int32_t list[2] = { 0, 1 }, lkind[2] = { 0, 1 }, sv_bad[3] = { 0, 5, 0 };
        pario_order_servers S = { 2, list, lkind };
        int romcio = pario_order_find("romcio"), cacio = pario_order_find("cacio"), hacio = pario_order_find("hacio");
        report("order_n_negative", order_call(romcio, -1, o, sv, kd, pr, 0, &S, ord, &m, tw));
        report("order_null_offsets", order_call(romcio, 3, NULL, sv, kd, pr, 0, &S, ord, &m, tw));
        report("order_method_unknown", order_call(pario_order_count(), 3, o, sv, kd, pr, 0, &S, ord, &m, tw));
        report("order_hacio_kind_2", order_call(hacio, 3, o, sv, bad_kind, pr, 0, &S, ord, &m, tw));
        report("order_cacio_server_not_listed", order_call(cacio, 3, o, sv_bad, kd, pr, 0, &S, ord, &m, tw));
        report("order_hacio_server_not_listed", order_call(hacio, 3, o, sv_bad, kd, pr, 0, &S, ord, &m, tw));
        report("order_hacio_null_kind", order_call(hacio, 3, o, sv, NULL, pr, 0, &S, ord, &m, tw));
        report("order_negative_aggregator", order_call(cacio, 3, o, sv, kd, pr, -1, &S, ord, &m, tw));
        report("order_null_norder", order_call(romcio, 3, o, sv, kd, pr, 0, &S, ord, NULL, tw));
        report("order_ok", order_call(hacio, 3, o, sv, kd, pr, 0, &S, ord, &m, tw));
    }
    /* after all that: a correct write and read back, every byte checked */
    p = base;
    int rc = pario_tp_collective(comm, 1, 3, off, len, buf, &p, NULL);
    memset(back, 0, sizeof back);
    if (rc == 0)
        rc = pario_tp_collective(comm, 0, 3, off, len, back, &p, NULL);
    if (rc == 0 && memcmp(back, buf, sizeof buf) != 0)
        rc = 100;
    report("after_round_trip", rc);
    MPI_Comm_free(&comm);
    close(fd);
}

/* ------------------------------------------------------------------ the orders alone */

/* One query per line of FILE: METHOD AGGREGATOR NLIST (server kind)xNLIST N (offset server
 * kind proc)xN; one JSON line each: {"rc": .., "order": [..], "twin": [..]}. */
static void run_orders(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        die("cannot open the order queries");
    char m[64];
    while (fscanf(f, "%63s", m) == 1) {
        int method = pario_order_find(m);
        int64_t a = num(f), nl = num(f);
        int32_t *ls = malloc((size_t)(nl + 1) * sizeof *ls), *lk = malloc((size_t)(nl + 1) * sizeof *lk);
        for (int64_t i = 0; i < nl; i++) {
            ls[i] = (int32_t)num(f);
            lk[i] = (int32_t)num(f);
        }
        int64_t n = num(f);
        int64_t *off = malloc((size_t)(n + 1) * sizeof *off), *ord = malloc((size_t)(n + 1) * sizeof *ord);
        int64_t *twin = malloc((size_t)(n + 1) * sizeof *twin), norder = 0;
        int32_t *sv = malloc((size_t)(n + 1) * sizeof *sv), *kd = malloc((size_t)(n + 1) * sizeof *kd);
        int32_t *pr = malloc((size_t)(n + 1) * sizeof *pr);
        if (!ls || !lk || !off || !ord || !twin || !sv || !kd || !pr)
            die("out of memory");
        for (int64_t i = 0; i < n; i++) {
            off[i] = num(f);
            sv[i] = (int32_t)num(f);
            kd[i] = (int32_t)num(f);
            pr[i] = (int32_t)num(f);
        }
        pario_order_servers S = { (int32_t)nl, ls, lk };
        int rc = order_call(method, n, off, sv, kd, pr, a, &S, ord, &norder, twin);
        printf("{\"rc\": %d, \"order\": [", rc);
        for (int64_t i = 0; rc == 0 && i < norder; i++)
            printf("%s%lld", i ? ", " : "", (long long)ord[i]);
        printf("], \"twin\": [");
        for (int64_t i = 0; rc == 0 && i < n; i++)
            printf("%s%lld", i ? ", " : "", (long long)twin[i]);
        printf("]}\n");
        free(ls);
        free(lk);
        free(off);
        free(ord);
        free(twin);
        free(sv);
        free(kd);
        free(pr);
    }
    fclose(f);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    if (argc == 3 && strcmp(argv[1], "--bad") == 0)
        run_bad(argv[2]);
    else if (argc == 3 && strcmp(argv[1], "--order") == 0)
        run_orders(argv[2]);
    else if (argc == 2)
        run_cases(argv[1]);
    else
        die("usage: twophase_driver SPEC | --bad SCRATCH_FILE | --order QUERIES");
    MPI_Finalize();
    return 0;
}
