/* node_info: where each rank of an MPI job runs.  Rank 0 prints one line per rank, in rank
 * order (gathered through MPI, so the ranks' nodes must reach each other):
 *     rank R host HOSTNAME boot BOOT_ID local L
 * L = the size of the rank's MPI_COMM_TYPE_SHARED communicator (ranks that share memory). */
#define _DEFAULT_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LINE 256

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, local_size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
    MPI_Comm_size(local, &local_size);
    char host[128] = "", boot[64] = "", line[LINE];
    gethostname(host, sizeof host - 1);
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (!fgets(boot, sizeof boot, f))
            boot[0] = 0;
        fclose(f);
    }
    boot[strcspn(boot, "\n")] = 0;
    snprintf(line, sizeof line, "rank %d host %s boot %s local %d", rank, host, boot, local_size);
    char *all = rank == 0 ? malloc((size_t)size * LINE) : NULL;
    MPI_Gather(line, LINE, MPI_CHAR, all, LINE, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        for (int r = 0; r < size; r++)
            printf("%s\n", all + (size_t)r * LINE);
        free(all);
    }
    MPI_Comm_free(&local);
    MPI_Finalize();
    return 0;
}
