/* One MPI-IO program per access style, for tests/trace/test_tracer.py (run with 4 ranks).
 *
 *   tracer_styles STYLE DIR B N
 *
 * STYLE is one style below or "all" (every style but "kill", each on its own file
 * DIR/<style>.dat).  B is a block size in bytes (a multiple of 16), N a block count
 * (even).  Rank r of P writes the byte value r.  The test derives every expected file
 * extent from (STYLE, B, N, P) by itself; the comments give the layouts.
 */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, nprocs;
static MPI_Offset B;
static int N;
static char *buf;  /* 8 * B * N bytes of the value `rank` */

static void check(int rc, const char *what)
{
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len;
        MPI_Error_string(rc, msg, &len);
        fprintf(stderr, "rank %d: %s failed: %s\n", rank, what, msg);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
}

static MPI_File open_file(const char *dir, const char *style, MPI_Info info)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.dat", dir, style);
    MPI_File fh;
    check(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, info, &fh), "open");
    return fh;
}

/* at: block i of rank r at (i*P + r)*B, written then read with write_at/read_at */
static void style_at(MPI_File fh)
{
    for (int i = 0; i < N; i++)
        check(MPI_File_write_at(fh, (i * nprocs + rank) * B, buf, (int)B, MPI_BYTE, MPI_STATUS_IGNORE), "write_at");
    for (int i = 0; i < N; i++)
        check(MPI_File_read_at(fh, (i * nprocs + rank) * B, buf, (int)B, MPI_BYTE, MPI_STATUS_IGNORE), "read_at");
}

/* individual: seek to r*N*B, N writes of B; seek back, N reads of B */
static void style_individual(MPI_File fh)
{
    check(MPI_File_seek(fh, rank * N * B, MPI_SEEK_SET), "seek");
    for (int i = 0; i < N; i++)
        check(MPI_File_write(fh, buf, (int)B, MPI_BYTE, MPI_STATUS_IGNORE), "write");
    check(MPI_File_seek(fh, rank * N * B, MPI_SEEK_SET), "seek");
    for (int i = 0; i < N; i++)
        check(MPI_File_read(fh, buf, (int)B, MPI_BYTE, MPI_STATUS_IGNORE), "read");
}

/* all: N write_at_all at (i*P + r)*B, then N read_at_all of the same blocks */
static void style_all(MPI_File fh)
{
    for (int i = 0; i < N; i++)
        check(MPI_File_write_at_all(fh, (i * nprocs + rank) * B, buf, (int)B, MPI_BYTE, MPI_STATUS_IGNORE), "wr");
    for (int i = 0; i < N; i++)
        check(MPI_File_read_at_all(fh, (i * nprocs + rank) * B, buf, (int)B, MPI_BYTE, MPI_STATUS_IGNORE), "rd");
}

/* vector (HPIO c-nc): filetype vector(N, B, P*B) of bytes, disp r*B; two write_all of
 * N/2*B contiguous bytes: extents r*B + i*P*B, B (i < N/2, then i >= N/2) */
static void style_vector(MPI_File fh)
{
    MPI_Datatype ft;
    MPI_Type_vector(N, (int)B, (int)(nprocs * B), MPI_BYTE, &ft);
    MPI_Type_commit(&ft);
    check(MPI_File_set_view(fh, rank * B, MPI_BYTE, ft, "native", MPI_INFO_NULL), "set_view");
    for (int k = 0; k < 2; k++)
        check(MPI_File_write_all(fh, buf, (int)(N / 2 * B), MPI_BYTE, MPI_STATUS_IGNORE), "write_all");
    MPI_Type_free(&ft);
}

/* subarray (MPI-Tile-IO): ints, global 2N x 16, tiles N x 8 on a 2 x 2 grid, rank r at
 * (r/2, r%2); one write_all of the tile: rows j < N at ((py*N + j)*16 + px*8)*4, 32 bytes */
static void style_subarray(MPI_File fh)
{
    int sizes[2] = {2 * N, 16}, sub[2] = {N, 8}, starts[2] = {(rank / 2) * N, (rank % 2) * 8};
    MPI_Datatype ft;
    MPI_Type_create_subarray(2, sizes, sub, starts, MPI_ORDER_C, MPI_INT, &ft);
    MPI_Type_commit(&ft);
    check(MPI_File_set_view(fh, 0, MPI_INT, ft, "native", MPI_INFO_NULL), "set_view");
    check(MPI_File_write_all(fh, buf, N * 8, MPI_INT, MPI_STATUS_IGNORE), "write_all");
    MPI_Type_free(&ft);
}

/* darray: ints, global 8 x 12, BLOCK x CYCLIC(2) over a 2 x 2 grid (C order); one
 * write_all of the rank's elements */
static void style_darray(MPI_File fh)
{
    int gsizes[2] = {8, 12}, distribs[2] = {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC};
    int dargs[2] = {MPI_DISTRIBUTE_DFLT_DARG, 2}, psizes[2] = {2, 2};
    MPI_Datatype ft;
    MPI_Type_create_darray(nprocs, rank, 2, gsizes, distribs, dargs, psizes, MPI_ORDER_C, MPI_INT, &ft);
    MPI_Type_commit(&ft);
    int size;
    MPI_Type_size(ft, &size);
    check(MPI_File_set_view(fh, 0, MPI_INT, ft, "native", MPI_INFO_NULL), "set_view");
    check(MPI_File_write_all(fh, buf, size / 4, MPI_INT, MPI_STATUS_IGNORE), "write_all");
    MPI_Type_free(&ft);
}

/* indexed: ints, blocks of 2, 1, 3 at 2r, 8 + r, 12 + 3r, resized to 24 ints; one
 * write_all of 12 ints (two instances) */
static void style_indexed(MPI_File fh)
{
    int lens[3] = {2, 1, 3}, displs[3] = {2 * rank, 8 + rank, 12 + 3 * rank};
    MPI_Datatype ix, ft;
    MPI_Type_indexed(3, lens, displs, MPI_INT, &ix);
    MPI_Type_create_resized(ix, 0, 24 * 4, &ft);
    MPI_Type_commit(&ft);
    check(MPI_File_set_view(fh, 0, MPI_INT, ft, "native", MPI_INFO_NULL), "set_view");
    check(MPI_File_write_all(fh, buf, 12, MPI_INT, MPI_STATUS_IGNORE), "write_all");
    MPI_Type_free(&ix);
    MPI_Type_free(&ft);
}

/* struct: {2 ints at 0, 1 double at 16} resized to extent 32*P, disp 32r, etype byte;
 * one write_all of N instances (16 bytes each): extents 32r + k*32P + {0: 8, 16: 8} */
static void style_struct(MPI_File fh)
{
    int lens[2] = {2, 1};
    MPI_Aint displs[2] = {0, 16};
    MPI_Datatype types[2] = {MPI_INT, MPI_DOUBLE}, st, ft;
    MPI_Type_create_struct(2, lens, displs, types, &st);
    MPI_Type_create_resized(st, 0, 32 * nprocs, &ft);
    MPI_Type_commit(&ft);
    check(MPI_File_set_view(fh, 32 * rank, MPI_BYTE, ft, "native", MPI_INFO_NULL), "set_view");
    check(MPI_File_write_all(fh, buf, 16 * N, MPI_BYTE, MPI_STATUS_IGNORE), "write_all");
    MPI_Type_free(&st);
    MPI_Type_free(&ft);
}

/* resized: B contiguous bytes resized to extent 2*P*B, disp r*B; one independent write
 * (individual pointer) of N*B bytes: extents r*B + k*2*P*B, B */
static void style_resized(MPI_File fh)
{
    MPI_Datatype c, ft;
    MPI_Type_contiguous((int)B, MPI_BYTE, &c);
    MPI_Type_create_resized(c, 0, 2 * nprocs * B, &ft);
    MPI_Type_commit(&ft);
    check(MPI_File_set_view(fh, rank * B, MPI_BYTE, ft, "native", MPI_INFO_NULL), "set_view");
    check(MPI_File_write(fh, buf, (int)(N * B), MPI_BYTE, MPI_STATUS_IGNORE), "write");
    MPI_Type_free(&c);
    MPI_Type_free(&ft);
}

/* nbwait: write_at N*B at r*N*B, then iread_at of the same bytes completed by MPI_Wait */
static void style_nbwait(MPI_File fh)
{
    MPI_Request req;
    MPI_Status st;
    check(MPI_File_write_at(fh, rank * N * B, buf, (int)(N * B), MPI_BYTE, MPI_STATUS_IGNORE), "write_at");
    check(MPI_File_iread_at(fh, rank * N * B, buf, (int)(N * B), MPI_BYTE, &req), "iread_at");
    check(MPI_Wait(&req, &st), "wait");
}

/* nbtestall: write_at N*B at r*N*B; seek there; two iread of N/2*B each, completed by
 * MPI_Testall (polled).  MPICH 5.0.2's MPI_Testall over ROMIO's requests often returns
 * MPI_ERR_IN_STATUS with flag set and a garbage status for the second request (count 0
 * or -32766; the data are read well): seen in most runs without the tracer too; over
 * generalized requests (pario serving the file) it can return MPI_ERR_IN_STATUS with flag
 * unset, and the next call completes them.  So the
 * program does not judge the counts; it writes what its statuses say to
 * nbtestall-R.txt in the working directory, one line per request: the count and the poll
 * (0, 1, ...) whose MPI_Testall completed it (the test compares the trace with that: MPI-4.1
 * §3.7.5 lets MPI_ERR_IN_STATUS complete some requests and not others). */
static void style_nbtestall(MPI_File fh)
{
    MPI_Request req[2];
    MPI_Status st[2];
    int flag = 0;
    check(MPI_File_write_at(fh, rank * N * B, buf, (int)(N * B), MPI_BYTE, MPI_STATUS_IGNORE), "write_at");
    check(MPI_File_seek(fh, rank * N * B, MPI_SEEK_SET), "seek");
    for (int k = 0; k < 2; k++)
        check(MPI_File_iread(fh, buf + k * (N / 2) * B, (int)(N / 2 * B), MPI_BYTE, &req[k]), "iread");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Status got_st[2];
    int done[2] = {0, 0}, poll[2] = {0, 0};
    for (int i = 0; !flag; i++) {
        int rc = MPI_Testall(2, req, &flag, st);
        if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS)   /* ERR_IN_STATUS: see above; poll on */
            check(rc, "testall");
        /* a request's status is the one of the call that completed it (MPI-4.1 §3.7.5: with
         * MPI_ERR_IN_STATUS, MPI_ERR_PENDING marks the ones still active) */
        for (int k = 0; k < 2; k++)
            if (!done[k] && (flag || (rc == MPI_ERR_IN_STATUS && st[k].MPI_ERROR != MPI_ERR_PENDING))) {
                got_st[k] = st[k];
                done[k] = 1;
                poll[k] = i;
            }
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    char name[64];
    snprintf(name, sizeof name, "nbtestall-%d.txt", rank);
    FILE *out = fopen(name, "w");
    if (!out) {
        perror(name);
        MPI_Abort(MPI_COMM_WORLD, 5);
    }
    for (int k = 0; k < 2; k++) {
        int got;
        MPI_Get_count(&got_st[k], MPI_BYTE, &got);
        fprintf(out, "%d %d\n", got, poll[k]);
    }
    fclose(out);
    for (MPI_Offset i = 0; i < N * B; i++)
        if (buf[i] != (char)rank) {
            fprintf(stderr, "rank %d: iread read byte %d at %lld\n", rank, buf[i], (long long)i);
            MPI_Abort(MPI_COMM_WORLD, 5);
        }
}

/* split: write_at_all_begin/end of B at r*B; seek to r*B; read_all_begin/end of B */
static void style_split(MPI_File fh)
{
    check(MPI_File_write_at_all_begin(fh, rank * B, buf, (int)B, MPI_BYTE), "write_at_all_begin");
    check(MPI_File_write_at_all_end(fh, buf, MPI_STATUS_IGNORE), "write_at_all_end");
    check(MPI_File_seek(fh, rank * B, MPI_SEEK_SET), "seek");
    check(MPI_File_read_all_begin(fh, buf, (int)B, MPI_BYTE), "read_all_begin");
    check(MPI_File_read_all_end(fh, buf, MPI_STATUS_IGNORE), "read_all_end");
}

/* shared: N write_shared of 16*(r+1) bytes each, all ranks at once */
static void style_shared(MPI_File fh)
{
    for (int i = 0; i < N; i++)
        check(MPI_File_write_shared(fh, buf, 16 * (rank + 1), MPI_BYTE, MPI_STATUS_IGNORE), "write_shared");
}

/* ordered: two write_ordered of 16*(r+1) bytes */
static void style_ordered(MPI_File fh)
{
    for (int k = 0; k < 2; k++)
        check(MPI_File_write_ordered(fh, buf, 16 * (rank + 1), MPI_BYTE, MPI_STATUS_IGNORE), "write_ordered");
}

/* large: a large-count (_c) call: t = contiguous_c(B bytes), filetype vector_c(N, 1, P, t),
 * disp r*B; write_at_all_c of N instances of t at offset 0: extents r*B + i*P*B, B */
static void style_large(MPI_File fh)
{
    MPI_Datatype t, ft;
    MPI_Type_contiguous_c((MPI_Count)B, MPI_BYTE, &t);
    MPI_Type_vector_c((MPI_Count)N, 1, (MPI_Count)nprocs, t, &ft);
    MPI_Type_commit(&t);
    MPI_Type_commit(&ft);
    check(MPI_File_set_view(fh, rank * B, t, ft, "native", MPI_INFO_NULL), "set_view");
    check(MPI_File_write_at_all_c(fh, 0, buf, (MPI_Count)N, t, MPI_STATUS_IGNORE), "write_at_all_c");
    MPI_Type_free(&t);
    MPI_Type_free(&ft);
}

/* short: write_at_all B at r*B (file size P*B); then read_at of 100 bytes at P*B - 10 - r:
 * moves 10 + r bytes */
static void style_short(MPI_File fh)
{
    MPI_Status st;
    check(MPI_File_write_at_all(fh, rank * B, buf, (int)B, MPI_BYTE, MPI_STATUS_IGNORE), "write_at_all");
    check(MPI_File_sync(fh), "sync");  /* sync-barrier-sync: MPI-4.1 §14.6.1 */
    MPI_Barrier(MPI_COMM_WORLD);
    check(MPI_File_sync(fh), "sync");
    check(MPI_File_read_at(fh, nprocs * B - 10 - rank, buf, 100, MPI_BYTE, &st), "read_at");
    int got;
    MPI_Get_count(&st, MPI_BYTE, &got);
    if (got != 10 + rank) {
        fprintf(stderr, "rank %d: short read moved %d bytes\n", rank, got);
        MPI_Abort(MPI_COMM_WORLD, 4);
    }
}

/* aggregators: opened with cb_nodes 2, romio_cb_write enable, cb_config_list *:*; N
 * write_at_all at (i*P + r)*B (the file is covered); rank 0 prints ROMIO's aggregator list */
static void style_aggregators(MPI_File fh)
{
    for (int i = 0; i < N; i++)
        check(MPI_File_write_at_all(fh, (i * nprocs + rank) * B, buf, (int)B, MPI_BYTE, MPI_STATUS_IGNORE), "wr");
    MPI_Info used;
    char val[256];
    int len = sizeof val, flag = 0;
    MPI_File_get_info(fh, &used);
    MPI_Info_get_string(used, "romio_aggregator_list", &len, val, &flag);
    if (rank == 0)
        printf("romio_aggregator_list=%s\n", flag ? val : "");
    MPI_Info_free(&used);
}

/* more: the other routines, B bytes per rank each, in this order (rank r's extent r*B
 * unless said): iwrite_at_all + MPI_Waitany; seek r*B, iread_all + MPI_Waitsome;
 * write_ordered_begin/end (shared pointer 0); seek_shared 0, read_ordered; read_at_all
 * begin/end; iread_at + MPI_Request_free; iread_at_c + MPI_Testany; iwrite_at_c +
 * MPI_Testsome; set_size, preallocate, sync, set_info; seek_shared 0, read_shared (the
 * ranks' extents tile [0, P*B)); seek_shared 0, iwrite_shared + MPI_Wait (the same) */
static void style_more(MPI_File fh)
{
    MPI_Request req;
    MPI_Status st;
    int idx, flag = 0, outcount = 0;
    MPI_Offset me = rank * B;
    check(MPI_File_iwrite_at_all(fh, me, buf, (int)B, MPI_BYTE, &req), "iwrite_at_all");
    check(MPI_Waitany(1, &req, &idx, &st), "waitany");
    check(MPI_File_seek(fh, me, MPI_SEEK_SET), "seek");
    check(MPI_File_iread_all(fh, buf, (int)B, MPI_BYTE, &req), "iread_all");
    check(MPI_Waitsome(1, &req, &outcount, &idx, &st), "waitsome");
    memset(buf, rank, (size_t)B);
    check(MPI_File_write_ordered_begin(fh, buf, (int)B, MPI_BYTE), "write_ordered_begin");
    check(MPI_File_write_ordered_end(fh, buf, &st), "write_ordered_end");
    MPI_Barrier(MPI_COMM_WORLD);   /* ROMIO's seek_shared resets after a bcast, not a barrier */
    check(MPI_File_seek_shared(fh, 0, MPI_SEEK_SET), "seek_shared");
    check(MPI_File_read_ordered(fh, buf, (int)B, MPI_BYTE, &st), "read_ordered");
    check(MPI_File_read_at_all_begin(fh, me, buf, (int)B, MPI_BYTE), "read_at_all_begin");
    check(MPI_File_read_at_all_end(fh, buf, &st), "read_at_all_end");
    check(MPI_File_iread_at(fh, me, buf, (int)B, MPI_BYTE, &req), "iread_at");
    check(MPI_Request_free(&req), "request_free");
    check(MPI_File_iread_at_c(fh, me, buf, (MPI_Count)B, MPI_BYTE, &req), "iread_at_c");
    for (flag = 0; !flag;)
        check(MPI_Testany(1, &req, &idx, &flag, &st), "testany");
    memset(buf, rank, (size_t)B);
    check(MPI_File_iwrite_at_c(fh, me, buf, (MPI_Count)B, MPI_BYTE, &req), "iwrite_at_c");
    for (outcount = 0; outcount == 0;)
        check(MPI_Testsome(1, &req, &outcount, &idx, &st), "testsome");
    check(MPI_File_set_size(fh, nprocs * B), "set_size");
    check(MPI_File_preallocate(fh, nprocs * B), "preallocate");
    check(MPI_File_sync(fh), "sync");
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "romio_cb_read", "disable");
    check(MPI_File_set_info(fh, info), "set_info");
    MPI_Info_free(&info);
    MPI_Barrier(MPI_COMM_WORLD);
    check(MPI_File_seek_shared(fh, 0, MPI_SEEK_SET), "seek_shared");
    check(MPI_File_read_shared(fh, buf, (int)B, MPI_BYTE, &st), "read_shared");
    MPI_Barrier(MPI_COMM_WORLD);
    check(MPI_File_seek_shared(fh, 0, MPI_SEEK_SET), "seek_shared");
    memset(buf, rank, (size_t)B);   /* the reads above left other ranks' bytes in buf */
    check(MPI_File_iwrite_shared(fh, buf, (int)B, MPI_BYTE, &req), "iwrite_shared");
    check(MPI_Wait(&req, &st), "wait");
}

/* kill: N write_at of 16 bytes at (i*P + r)*16; rank 1 kills itself after 3N/4 */
static void style_kill(MPI_File fh)
{
    for (int i = 0; i < N; i++) {
        if (rank == 1 && i == 3 * N / 4)
            raise(SIGKILL);
        check(MPI_File_write_at(fh, (i * nprocs + rank) * 16, buf, 16, MPI_BYTE, MPI_STATUS_IGNORE), "write_at");
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

static const struct {
    const char *name;
    void (*run)(MPI_File);
} styles[] = {
    {"at", style_at}, {"individual", style_individual}, {"all", style_all}, {"vector", style_vector},
    {"subarray", style_subarray}, {"darray", style_darray}, {"indexed", style_indexed},
    {"struct", style_struct}, {"resized", style_resized}, {"nbwait", style_nbwait},
    {"nbtestall", style_nbtestall}, {"split", style_split}, {"shared", style_shared},
    {"ordered", style_ordered}, {"large", style_large}, {"short", style_short},
    {"aggregators", style_aggregators}, {"more", style_more}, {"kill", style_kill},
};

static void run(const char *dir, int i)
{
    MPI_Info info = MPI_INFO_NULL;
    if (!strcmp(styles[i].name, "aggregators")) {
        MPI_Info_create(&info);
        MPI_Info_set(info, "cb_nodes", "2");
        MPI_Info_set(info, "romio_cb_write", "enable");
        MPI_Info_set(info, "cb_config_list", "*:*");
    }
    MPI_File fh = open_file(dir, styles[i].name, info);
    memset(buf, rank, (size_t)(8 * B * N));   /* each style writes its own rank's bytes */
    styles[i].run(fh);
    check(MPI_File_close(&fh), "close");
    if (info != MPI_INFO_NULL)
        MPI_Info_free(&info);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (argc != 5) {
        if (rank == 0)
            fprintf(stderr, "usage: %s STYLE DIR B N\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    B = atoll(argv[3]);
    N = atoi(argv[4]);
    buf = malloc((size_t)(8 * B * N));
    memset(buf, rank, (size_t)(8 * B * N));
    int found = 0, nstyles = (int)(sizeof styles / sizeof styles[0]);
    for (int i = 0; i < nstyles; i++)
        if (!strcmp(argv[1], styles[i].name) || (!strcmp(argv[1], "all") && strcmp(styles[i].name, "kill"))) {
            run(argv[2], i);
            found = 1;
        }
    if (!found && rank == 0)
        fprintf(stderr, "unknown style %s\n", argv[1]);
    free(buf);
    MPI_Finalize();
    return found ? 0 : 2;
}
