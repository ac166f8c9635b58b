/* Fault injection for tests/native/test_serve_twophase.py: a preloaded shim between pario's C
 * two-phase I/O and MPICH that makes one exchange fail the way a dead sender makes it fail
 * under MPI_ERRORS_RETURN: the receives posted since the last PMPI_Waitall are left with
 * bytes nobody sent (0xEE) and PMPI_Waitall returns MPI_ERR_OTHER.
 *
 *   PX_FAULT_RANK=R PX_FAULT_WAIT=N   on MPI_COMM_WORLD rank R, the N-th PMPI_Waitall (1-based)
 *                                     that completes at least one receive fails so
 * Unset: every call passes through unchanged.  The shim says "exchange_fault: injected" on
 * stderr when it fires.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXRECV 4096

typedef int (*irecv_fn)(void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);
typedef int (*waitall_fn)(int, MPI_Request[], MPI_Status[]);

static void *g_buf[MAXRECV];
static size_t g_len[MAXRECV];
static int g_nrecv, g_waits;

static int armed(void)
{
    const char *r = getenv("PX_FAULT_RANK"), *w = getenv("PX_FAULT_WAIT");
    int rank = -1;
    if (!r || !w)
        return 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank == atoi(r) ? atoi(w) : 0;
}

int PMPI_Irecv(void *buf, int count, MPI_Datatype dt, int src, int tag, MPI_Comm comm, MPI_Request *req)
{
    static irecv_fn real;
    if (!real)
        real = (irecv_fn)dlsym(RTLD_NEXT, "PMPI_Irecv");
    int size = 0;
    PMPI_Type_size(dt, &size);
    if (g_nrecv < MAXRECV && count > 0 && size > 0) {
        g_buf[g_nrecv] = buf;
        g_len[g_nrecv++] = (size_t)count * (size_t)size;
    }
    return real(buf, count, dt, src, tag, comm, req);
}

int PMPI_Waitall(int n, MPI_Request reqs[], MPI_Status st[])
{
    static waitall_fn real;
    if (!real)
        real = (waitall_fn)dlsym(RTLD_NEXT, "PMPI_Waitall");
    int rc = real(n, reqs, st);
    int nrecv = g_nrecv, when = armed();
    g_nrecv = 0;
    if (nrecv > 0 && when > 0 && ++g_waits == when) {
        for (int i = 0; i < nrecv; i++)
            memset(g_buf[i], 0xEE, g_len[i]);
        fprintf(stderr, "exchange_fault: injected\n");
        return MPI_ERR_OTHER;
    }
    return rc;
}
