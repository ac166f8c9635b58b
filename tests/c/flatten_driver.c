/* Test driver for the tracer's flattening (src/pario/native/interpose/flatten.c, view.c).
 *
 * Reads commands from stdin, one a line, and prints one JSON object a line for each
 * command that answers (tests/trace/test_tracer_flatten.py writes the commands and checks the
 * answers against its numpy oracle, MPICH's MPIX_Type_iov and ROMIO's own file writes).
 *
 *   T id KIND args...     build and commit datatype `id` (a type argument is an id or a
 *                         predefined name such as MPI_INT); KIND is one of
 *                         named NAME | contig N t | vector N BL STRIDE t | hvector N BL STRIDE t
 *                         | indexed N BL.. D.. t | hindexed N BL.. D.. t | indexed_block N BL D.. t
 *                         | hindexed_block N BL D.. t | struct N BL.. D.. t.. | resized LB EXT t
 *                         | subarray NDIMS C|F SIZES.. SUBSIZES.. STARTS.. t
 *                         | darray SIZE RANK NDIMS C|F GSIZES.. DISTRIBS(B|C|N).. DARGS(D|n).. PSIZES.. t
 *                         | dup t | f90real P R | f90integer R | f90complex P R
 *                         and every constructor with counts also as KIND_c (MPI-4 large counts)
 *   F id [PATH]           px_flatten it and MPIX_Type_iov it: runs inline, or (with PATH)
 *                         written as int64 pairs to PATH.runs and PATH.iov
 *   G id                  px_flatten only (rc and nruns)
 *   L CAP                 px_flat_set_max_runs(CAP)
 *   D                     the default view
 *   V etype filetype DISP px_view_set
 *   M POS NBYTES [STOP]   px_view_map on the current view (emit says stop at extent STOP)
 *   W etype filetype DISP OFFSET NBYTES PATH   write NBYTES bytes (byte i = i % 251 + 1)
 *                         with MPI_File_write_at at OFFSET (etypes) through that view
 *
 * At the end every type built is freed: had px_flatten freed a datatype that get_contents
 * did not hand it a reference to, MPICH would abort there (exit code != 0).
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interpose/flatten.h"

#define NSLOTS 4096
static MPI_Datatype slot[NSLOTS];
static px_view view;

static char *tok(void) { return strtok(NULL, " \t\r\n"); }

static long long num(void)
{
    char *t = tok();
    if (!t) {
        fprintf(stderr, "driver: missing number\n");
        exit(3);
    }
    return strtoll(t, NULL, 10);
}

static MPI_Datatype named(const char *s)
{
    static const struct { const char *n; MPI_Datatype t; } tab[] = {
        {"MPI_BYTE", MPI_BYTE}, {"MPI_CHAR", MPI_CHAR}, {"MPI_SHORT", MPI_SHORT}, {"MPI_INT", MPI_INT},
        {"MPI_LONG", MPI_LONG}, {"MPI_FLOAT", MPI_FLOAT}, {"MPI_DOUBLE", MPI_DOUBLE},
        {"MPI_LONG_DOUBLE", MPI_LONG_DOUBLE}, {"MPI_SHORT_INT", MPI_SHORT_INT}, {"MPI_2INT", MPI_2INT},
        {"MPI_DOUBLE_INT", MPI_DOUBLE_INT}, {"MPI_LONG_INT", MPI_LONG_INT},
        {"MPI_LONG_DOUBLE_INT", MPI_LONG_DOUBLE_INT}, {"MPI_FLOAT_INT", MPI_FLOAT_INT},
        {"MPI_INT64_T", MPI_INT64_T}, {"MPI_C_DOUBLE_COMPLEX", MPI_C_DOUBLE_COMPLEX},
    };
    for (size_t k = 0; k < sizeof tab / sizeof tab[0]; k++)
        if (!strcmp(tab[k].n, s))
            return tab[k].t;
    fprintf(stderr, "driver: unknown type %s\n", s);
    exit(3);
}

static MPI_Datatype type_arg(void)
{
    char *t = tok();
    if (!t) {
        fprintf(stderr, "driver: missing type\n");
        exit(3);
    }
    if (!strncmp(t, "MPI_", 4))
        return named(t);
    long id = strtol(t, NULL, 10);
    if (id < 0 || id >= NSLOTS || slot[id] == MPI_DATATYPE_NULL) {
        fprintf(stderr, "driver: no type %s\n", t);
        exit(3);
    }
    return slot[id];
}

static MPI_Count *counts(long long n)
{
    MPI_Count *a = malloc((size_t)(n > 0 ? n : 1) * sizeof *a);
    for (long long k = 0; k < n; k++)
        a[k] = num();
    return a;
}

static int *ints(long long n)
{
    int *a = malloc((size_t)(n > 0 ? n : 1) * sizeof *a);
    for (long long k = 0; k < n; k++)
        a[k] = (int)num();
    return a;
}

/* The MPI-3 constructors take int counts and MPI_Aint byte displacements. */
static int *as_ints(const MPI_Count *a, long long n)
{
    int *r = malloc((size_t)(n > 0 ? n : 1) * sizeof *r);
    for (long long k = 0; k < n; k++)
        r[k] = (int)a[k];
    return r;
}

static MPI_Aint *as_aints(const MPI_Count *a, long long n)
{
    MPI_Aint *r = malloc((size_t)(n > 0 ? n : 1) * sizeof *r);
    for (long long k = 0; k < n; k++)
        r[k] = (MPI_Aint)a[k];
    return r;
}

static int order_arg(void)
{
    char *t = tok();
    return t && t[0] == 'F' ? MPI_ORDER_FORTRAN : MPI_ORDER_C;
}

static void build(void)
{
    long id = (long)num();
    char *kind = tok();
    if (id < 0 || id >= NSLOTS || !kind) {
        fprintf(stderr, "driver: bad T\n");
        exit(3);
    }
    int large = strlen(kind) > 2 && !strcmp(kind + strlen(kind) - 2, "_c");
    char k[32];
    snprintf(k, sizeof k, "%.*s", (int)(strlen(kind) - (large ? 2 : 0)), kind);
    MPI_Datatype t = MPI_DATATYPE_NULL;
    int rc = MPI_SUCCESS, predefined = 0;
    if (!strcmp(k, "named")) {
        t = named(tok());
        predefined = 1;
    } else if (!strcmp(k, "contig")) {
        long long n = num();
        MPI_Datatype o = type_arg();
        rc = large ? MPI_Type_contiguous_c(n, o, &t) : MPI_Type_contiguous((int)n, o, &t);
    } else if (!strcmp(k, "vector") || !strcmp(k, "hvector")) {
        long long n = num(), bl = num(), st = num();
        MPI_Datatype o = type_arg();
        if (k[0] == 'h')
            rc = large ? MPI_Type_create_hvector_c(n, bl, st, o, &t) : MPI_Type_create_hvector((int)n, (int)bl, st, o, &t);
        else
            rc = large ? MPI_Type_vector_c(n, bl, st, o, &t) : MPI_Type_vector((int)n, (int)bl, (int)st, o, &t);
    } else if (!strcmp(k, "indexed") || !strcmp(k, "hindexed")) {
        long long n = num();
        MPI_Count *bl = counts(n), *d = counts(n);
        MPI_Datatype o = type_arg();
        if (large) {
            rc = k[0] == 'h' ? MPI_Type_create_hindexed_c(n, bl, d, o, &t) : MPI_Type_indexed_c(n, bl, d, o, &t);
        } else {
            int *bi = as_ints(bl, n), *di = as_ints(d, n);
            MPI_Aint *da = as_aints(d, n);
            rc = k[0] == 'h' ? MPI_Type_create_hindexed((int)n, bi, da, o, &t) : MPI_Type_indexed((int)n, bi, di, o, &t);
            free(bi);
            free(di);
            free(da);
        }
        free(bl);
        free(d);
    } else if (!strcmp(k, "indexed_block") || !strcmp(k, "hindexed_block")) {
        long long n = num(), bl = num();
        MPI_Count *d = counts(n);
        MPI_Datatype o = type_arg();
        if (large) {
            rc = k[0] == 'h' ? MPI_Type_create_hindexed_block_c(n, bl, d, o, &t)
                             : MPI_Type_create_indexed_block_c(n, bl, d, o, &t);
        } else {
            int *di = as_ints(d, n);
            MPI_Aint *da = as_aints(d, n);
            rc = k[0] == 'h' ? MPI_Type_create_hindexed_block((int)n, (int)bl, da, o, &t)
                             : MPI_Type_create_indexed_block((int)n, (int)bl, di, o, &t);
            free(di);
            free(da);
        }
        free(d);
    } else if (!strcmp(k, "struct")) {
        long long n = num();
        MPI_Count *bl = counts(n), *d = counts(n);
        MPI_Datatype *ty = malloc((size_t)(n ? n : 1) * sizeof *ty);
        for (long long j = 0; j < n; j++)
            ty[j] = type_arg();
        if (large) {
            rc = MPI_Type_create_struct_c(n, bl, d, ty, &t);
        } else {
            int *bi = as_ints(bl, n);
            MPI_Aint *da = as_aints(d, n);
            rc = MPI_Type_create_struct((int)n, bi, da, ty, &t);
            free(bi);
            free(da);
        }
        free(bl);
        free(d);
        free(ty);
    } else if (!strcmp(k, "resized")) {
        long long lb = num(), ext = num();
        MPI_Datatype o = type_arg();
        rc = large ? MPI_Type_create_resized_c(o, lb, ext, &t) : MPI_Type_create_resized(o, lb, ext, &t);
    } else if (!strcmp(k, "subarray")) {
        int nd = (int)num(), order = order_arg();
        MPI_Count *a = counts(3LL * nd);
        MPI_Datatype o = type_arg();
        if (large) {
            rc = MPI_Type_create_subarray_c(nd, a, a + nd, a + 2 * nd, order, o, &t);
        } else {
            int *ai = as_ints(a, 3LL * nd);
            rc = MPI_Type_create_subarray(nd, ai, ai + nd, ai + 2 * nd, order, o, &t);
            free(ai);
        }
        free(a);
    } else if (!strcmp(k, "darray")) {
        int size = (int)num(), rank = (int)num(), nd = (int)num(), order = order_arg();
        MPI_Count *g = counts(nd);
        int *dist = malloc((size_t)nd * sizeof *dist), *darg = malloc((size_t)nd * sizeof *darg);
        for (int j = 0; j < nd; j++) {
            char *s = tok();
            dist[j] = s[0] == 'B' ? MPI_DISTRIBUTE_BLOCK : s[0] == 'C' ? MPI_DISTRIBUTE_CYCLIC : MPI_DISTRIBUTE_NONE;
        }
        for (int j = 0; j < nd; j++) {
            char *s = tok();
            darg[j] = s[0] == 'D' ? MPI_DISTRIBUTE_DFLT_DARG : atoi(s);
        }
        int *ps = ints(nd);
        MPI_Datatype o = type_arg();
        if (large) {
            rc = MPI_Type_create_darray_c(size, rank, nd, g, dist, darg, ps, order, o, &t);
        } else {
            int *gi = as_ints(g, nd);
            rc = MPI_Type_create_darray(size, rank, nd, gi, dist, darg, ps, order, o, &t);
            free(gi);
        }
        free(g);
        free(dist);
        free(darg);
        free(ps);
    } else if (!strcmp(k, "dup")) {
        rc = MPI_Type_dup(type_arg(), &t);
    } else if (!strcmp(k, "f90real") || !strcmp(k, "f90complex")) {
        int p = (int)num(), r = (int)num();
        rc = k[3] == 'r' ? MPI_Type_create_f90_real(p, r, &t) : MPI_Type_create_f90_complex(p, r, &t);
        predefined = 1;
    } else if (!strcmp(k, "f90integer")) {
        rc = MPI_Type_create_f90_integer((int)num(), &t);
        predefined = 1;
    } else {
        fprintf(stderr, "driver: unknown kind %s\n", kind);
        exit(3);
    }
    if (rc == MPI_SUCCESS && !predefined)
        rc = MPI_Type_commit(&t);
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "driver: building type %ld failed\n", id);
        exit(3);
    }
    slot[id] = t;
}

static void dump_pairs(FILE *f, const int64_t *p, size_t n)
{
    fputc('[', f);
    for (size_t k = 0; k < n; k++)
        fprintf(f, "%s[%" PRId64 ",%" PRId64 "]", k ? "," : "", p[2 * k], p[2 * k + 1]);
    fputc(']', f);
}

static void write_pairs(const char *path, const char *suffix, const int64_t *p, size_t n)
{
    char name[4096];
    snprintf(name, sizeof name, "%s.%s", path, suffix);
    FILE *f = fopen(name, "wb");
    if (!f || fwrite(p, 2 * sizeof *p, n, f) != n) {
        fprintf(stderr, "driver: cannot write %s\n", name);
        exit(3);
    }
    fclose(f);
}

/* MPICH's own flattening of one instance: (displacement, length) pairs. */
static int64_t *mpich_iov(MPI_Datatype t, size_t *n)
{
    MPI_Count size, len, bytes, got;
    MPI_Type_size_c(t, &size);
    *n = 0;
    if (MPIX_Type_iov_len(t, size, &len, &bytes) != MPI_SUCCESS)
        return NULL;
    MPIX_Iov *iov = malloc((size_t)(len ? len : 1) * sizeof *iov);
    int64_t *p = malloc((size_t)(len ? len : 1) * 2 * sizeof *p);
    if (MPIX_Type_iov(t, 0, iov, len, &got) != MPI_SUCCESS)
        got = 0;
    for (MPI_Count k = 0; k < got; k++) {
        p[2 * k] = (int64_t)(intptr_t)iov[k].iov_base;
        p[2 * k + 1] = (int64_t)iov[k].iov_len;
    }
    free(iov);
    *n = (size_t)got;
    return p;
}

static void flatten_cmd(int with_iov)
{
    long id = (long)num();
    char *path = tok();
    MPI_Datatype t = slot[id];
    px_flat f;
    int rc = px_flatten(t, &f);
    MPI_Count size, lb, ext;
    MPI_Type_size_c(t, &size);
    MPI_Type_get_extent_c(t, &lb, &ext);
    printf("{\"cmd\":\"F\",\"id\":%ld,\"rc\":%d,\"nruns\":%zu,\"size\":%" PRId64 ",\"lb\":%" PRId64
           ",\"extent\":%" PRId64 ",\"mpi_size\":%lld,\"mpi_lb\":%lld,\"mpi_extent\":%lld",
           id, rc, f.nruns, f.size, f.lb, f.extent, (long long)size, (long long)lb, (long long)ext);
    if (with_iov) {
        size_t niov;
        int64_t *iov = mpich_iov(t, &niov);
        printf(",\"niov\":%zu", niov);
        if (path) {
            write_pairs(path, "runs", (const int64_t *)f.runs, f.nruns);
            write_pairs(path, "iov", iov, niov);
        } else {
            printf(",\"runs\":");
            dump_pairs(stdout, (const int64_t *)f.runs, f.nruns);
            printf(",\"iov\":");
            dump_pairs(stdout, iov, niov);
        }
        free(iov);
    }
    printf("}\n");
    px_flat_free(&f);
}

typedef struct {
    int64_t *p;
    size_t n, cap, stop;
} pairs;

static int collect(void *ctx, int64_t off, int64_t len)
{
    pairs *ps = ctx;
    if (ps->n == ps->cap) {
        ps->cap = ps->cap ? 2 * ps->cap : 64;
        ps->p = realloc(ps->p, ps->cap * 2 * sizeof *ps->p);
    }
    ps->p[2 * ps->n] = off;
    ps->p[2 * ps->n + 1] = len;
    ps->n++;
    return ps->stop && ps->n >= ps->stop;
}

static void map_cmd(void)
{
    long long pos = num(), n = num();
    char *stop = tok();
    pairs ps = {0};
    ps.stop = stop ? (size_t)strtoull(stop, NULL, 10) : 0;
    int64_t rc = px_view_map(&view, pos, n, collect, &ps);
    printf("{\"cmd\":\"M\",\"pos\":%lld,\"nbytes\":%lld,\"rc\":%" PRId64 ",\"ext\":", pos, n, rc);
    dump_pairs(stdout, ps.p, ps.n);
    printf("}\n");
    free(ps.p);
}

static void write_cmd(void)
{
    MPI_Datatype et = type_arg(), ft = type_arg();
    long long disp = num(), off = num(), n = num();
    char *path = tok();
    unsigned char *buf = malloc((size_t)(n ? n : 1));
    for (long long k = 0; k < n; k++)
        buf[k] = (unsigned char)(k % 251 + 1);
    MPI_File fh;
    MPI_Status st;
    int rc = MPI_File_open(MPI_COMM_SELF, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
    if (rc == MPI_SUCCESS)
        rc = MPI_File_set_view(fh, disp, et, ft, "native", MPI_INFO_NULL);
    if (rc == MPI_SUCCESS)
        rc = MPI_File_write_at_c(fh, off, buf, n, MPI_BYTE, &st);
    if (rc == MPI_SUCCESS)
        rc = MPI_File_close(&fh);
    printf("{\"cmd\":\"W\",\"rc\":%d}\n", rc);
    free(buf);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_File_set_errhandler(MPI_FILE_NULL, MPI_ERRORS_RETURN);
    for (int k = 0; k < NSLOTS; k++)
        slot[k] = MPI_DATATYPE_NULL;
    px_view_default(&view);
    char *big = NULL;
    size_t bigcap = 0;
    for (;;) {
        ssize_t got = getline(&big, &bigcap, stdin);
        if (got < 0)
            break;
        char *c = strtok(big, " \t\r\n");
        if (!c)
            continue;
        if (!strcmp(c, "T")) {
            build();
        } else if (!strcmp(c, "F")) {
            flatten_cmd(1);
        } else if (!strcmp(c, "G")) {
            flatten_cmd(0);
        } else if (!strcmp(c, "L")) {
            size_t old = px_flat_set_max_runs((size_t)num());
            printf("{\"cmd\":\"L\",\"old\":%zu}\n", old);
        } else if (!strcmp(c, "D")) {
            px_view_free(&view);
            printf("{\"cmd\":\"D\"}\n");
        } else if (!strcmp(c, "V")) {
            MPI_Datatype et = type_arg(), ft = type_arg();
            long long disp = num();
            px_view nv;
            int rc = px_view_set(&nv, disp, et, ft);
            if (rc == 0) {
                px_view_free(&view);
                view = nv;
            }
            printf("{\"cmd\":\"V\",\"rc\":%d,\"contiguous\":%d}\n", rc, view.contiguous);
        } else if (!strcmp(c, "M")) {
            map_cmd();
        } else if (!strcmp(c, "W")) {
            write_cmd();
        } else {
            fprintf(stderr, "driver: unknown command %s\n", c);
            return 3;
        }
        fflush(stdout);
    }
    free(big);
    px_view_free(&view);
    for (int k = 0; k < NSLOTS; k++)
        if (slot[k] != MPI_DATATYPE_NULL) {
            MPI_Count ni, na, nc, nd;
            int comb;
            MPI_Type_get_envelope_c(slot[k], &ni, &na, &nc, &nd, &comb);
            if (comb != MPI_COMBINER_NAMED && comb != MPI_COMBINER_F90_REAL && comb != MPI_COMBINER_F90_INTEGER &&
                comb != MPI_COMBINER_F90_COMPLEX)
                MPI_Type_free(&slot[k]);
        }
    MPI_Finalize();
    return 0;
}
