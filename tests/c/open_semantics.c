/* open_semantics: MPI_File_open's semantics that a served run must share with MPICH, errors
 * included (issue 24; tests/native/test_serve_open.py runs it with and without pario's library and
 * compares the output line for line).
 *
 *   open_semantics DIR CASE [TRIES]
 *
 * Cases (every rank takes part; rank 0 prints, one line per result):
 *   selfcreate  TRIES times: every rank opens the same new file DIR/self.K at once with
 *               MPI_COMM_SELF and MPI_MODE_CREATE | MPI_MODE_WRONLY, writes 4 bytes at
 *               4 x rank, closes; then the size of the file and the error classes seen;
 *   excl        a new file created with MPI_MODE_EXCL on MPI_COMM_WORLD, then again (it
 *               exists); then TRIES times every rank creates DIR/excl.K with MPI_COMM_SELF and
 *               MPI_MODE_EXCL at once: how many succeeded and which error classes the others got;
 *   nodir       MPI_MODE_CREATE of DIR/missing/f (no such directory), and a read-only open of
 *               DIR/absent (no such file);
 *   amode       bad access modes: MPI_MODE_RDONLY | MPI_MODE_CREATE, no access mode,
 *               MPI_MODE_RDWR | MPI_MODE_SEQUENTIAL;
 *   shared      every rank opens DIR/shared with MPI_COMM_SELF, writes 4 bytes with
 *               MPI_File_write_shared, closes: the file's size; then a collective open writes
 *               with write_shared, closes, opens again: the shared pointer (0 after an open),
 *               and each rank's pointer after its write_ordered;
 *   delete      MPI_File_delete: a file written and deleted, then opened without
 *               MPI_MODE_CREATE, deleted again, created with MPI_MODE_EXCL (its size), written
 *               and closed; a name never created deleted; MPI_MODE_DELETE_ON_CLOSE, then the
 *               file opened read-only and deleted; every rank deleting one file at once (one
 *               succeeds).
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int me, np;

static const char *cls(int rc)
{
    if (rc == MPI_SUCCESS)
        return "SUCCESS";
    int c = 0;
    MPI_Error_class(rc, &c);
    switch (c) {
    case MPI_ERR_FILE_EXISTS: return "ERR_FILE_EXISTS";
    case MPI_ERR_NO_SUCH_FILE: return "ERR_NO_SUCH_FILE";
    case MPI_ERR_AMODE: return "ERR_AMODE";
    case MPI_ERR_ACCESS: return "ERR_ACCESS";
    case MPI_ERR_IO: return "ERR_IO";
    case MPI_ERR_FILE: return "ERR_FILE";
    case MPI_ERR_BAD_FILE: return "ERR_BAD_FILE";
    case MPI_ERR_NOT_SAME: return "ERR_NOT_SAME";
    case MPI_ERR_UNSUPPORTED_OPERATION: return "ERR_UNSUPPORTED_OPERATION";
    default: return "ERR_OTHER";
    }
}

static MPI_Offset size_of(const char *path)
{
    MPI_File fh;
    MPI_Offset n = -1;
    if (MPI_File_open(MPI_COMM_SELF, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh) == MPI_SUCCESS) {
        MPI_File_get_size(fh, &n);
        MPI_File_close(&fh);
    }
    return n;
}

/* rank 0's error class and whether the other ranks failed too ("others failed"): MPICH
 * 5's ROMIO gives the other ranks of a failed collective open MPI_ERR_OTHER where rank 0
 * has the class (for MPI_MODE_EXCL of an existing file), pario the class on every rank */
static void report(const char *what, int rc)
{
    int failed = rc != MPI_SUCCESS, nfailed = 0;
    MPI_Reduce(&failed, &nfailed, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (me == 0)
        printf("%s: rank 0 %s, %d of %d ranks failed\n", what, cls(rc), nfailed, np);
}

/* a per-rank result (MPI_COMM_SELF opens): how many ranks got each class */
static void report_each(const char *what, int rc)
{
    const char *names[] = {"SUCCESS", "ERR_FILE_EXISTS", "ERR_NO_SUCH_FILE", "ERR_AMODE", "ERR_ACCESS", "ERR_IO",
                           "ERR_FILE", "ERR_BAD_FILE", "ERR_NOT_SAME", "ERR_UNSUPPORTED_OPERATION", "ERR_OTHER"};
    int n = (int)(sizeof names / sizeof *names), code = 0;
    for (int i = 0; i < n; i++)
        if (!strcmp(names[i], cls(rc)))
            code = i;
    int counts[16] = {0}, all[16] = {0};
    counts[code] = 1;
    MPI_Reduce(counts, all, 16, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (me == 0) {
        printf("%s:", what);
        for (int i = 0; i < n; i++)
            if (all[i])
                printf(" %s x%d", names[i], all[i]);
        printf("\n");
    }
}

static void selfcreate(const char *dir, int tries)
{
    int bad = 0;
    for (int k = 0; k < tries; k++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/self.%d", dir, k);
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_File fh;
        int rc = MPI_File_open(MPI_COMM_SELF, path, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh);
        if (rc == MPI_SUCCESS) {
            char b[4] = {(char)('a' + me), (char)('a' + me), (char)('a' + me), (char)('a' + me)};
            rc = MPI_File_write_at(fh, (MPI_Offset)4 * me, b, 4, MPI_BYTE, MPI_STATUS_IGNORE);
            int r2 = MPI_File_close(&fh);
            rc = rc ? rc : r2;
        }
        if (k == 0 || rc != MPI_SUCCESS)
            report_each("selfcreate open+write+close", rc);
        bad += rc != MPI_SUCCESS;
        MPI_Barrier(MPI_COMM_WORLD);
        if (me == 0 && size_of(path) != 4 * np)
            bad++;
    }
    int all = 0;
    MPI_Reduce(&bad, &all, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (me == 0)
        printf("selfcreate: %d tries, %d failed\n", tries, all);
}

static void excl(const char *dir, int tries)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/excl", dir);
    MPI_File fh;
    int rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_EXCL | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
    report("excl new", rc);
    if (rc == MPI_SUCCESS)
        MPI_File_close(&fh);
    rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_EXCL | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
    report("excl existing", rc);
    if (rc == MPI_SUCCESS)
        MPI_File_close(&fh);
    int won = 0, lost_other = 0;
    for (int k = 0; k < tries; k++) {
        snprintf(path, sizeof path, "%s/excl.%d", dir, k);
        MPI_Barrier(MPI_COMM_WORLD);
        rc = MPI_File_open(MPI_COMM_SELF, path, MPI_MODE_CREATE | MPI_MODE_EXCL | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh);
        int w = rc == MPI_SUCCESS, sum = 0;
        if (w)
            MPI_File_close(&fh);
        else if (strcmp(cls(rc), "ERR_FILE_EXISTS"))
            lost_other++;
        MPI_Allreduce(&w, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        won += sum == 1;
    }
    int all = 0;
    MPI_Reduce(&lost_other, &all, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (me == 0)
        printf("excl race: %d tries, exactly one winner in %d, %d other errors\n", tries, won, all);
}

static void nodir(const char *dir)
{
    char path[4096];
    MPI_File fh;
    snprintf(path, sizeof path, "%s/missing/f", dir);
    int rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
    report("create in a missing directory", rc);
    if (rc == MPI_SUCCESS)
        MPI_File_close(&fh);
    snprintf(path, sizeof path, "%s/absent", dir);
    rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
    report("read-only open of an absent file", rc);
    if (rc == MPI_SUCCESS)
        MPI_File_close(&fh);
}

static void amode(const char *dir)
{
    const struct {
        const char *what;
        int mode;
    } bad[] = {{"amode RDONLY|CREATE", MPI_MODE_RDONLY | MPI_MODE_CREATE},
               {"amode none", MPI_MODE_CREATE},
               {"amode RDWR|SEQUENTIAL", MPI_MODE_RDWR | MPI_MODE_SEQUENTIAL | MPI_MODE_CREATE}};
    char path[4096];
    snprintf(path, sizeof path, "%s/amode", dir);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        MPI_File fh;
        int rc = MPI_File_open(MPI_COMM_WORLD, path, bad[i].mode, MPI_INFO_NULL, &fh);
        report(bad[i].what, rc);
        if (rc == MPI_SUCCESS)
            MPI_File_close(&fh);
    }
}

static void shared(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/shared", dir);
    MPI_File fh;
    char b[4] = {'s', 'h', 'f', (char)('0' + me)};
    int rc = MPI_File_open(MPI_COMM_SELF, path, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh);
    if (rc == MPI_SUCCESS) {     /* the same 4 bytes from every rank: whoever writes last, the file is the same */
        rc = MPI_File_write_shared(fh, "self", 4, MPI_BYTE, MPI_STATUS_IGNORE);
        MPI_File_close(&fh);
    }
    report_each("self write_shared", rc);
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 0)
        printf("self write_shared: size %lld\n", (long long)size_of(path));
    MPI_Barrier(MPI_COMM_WORLD);
    snprintf(path, sizeof path, "%s/shared2", dir);
    rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
    report("world open", rc);
    if (rc != MPI_SUCCESS)
        return;
    MPI_File_write_ordered(fh, b, 4, MPI_BYTE, MPI_STATUS_IGNORE);
    MPI_Offset pos = -1;
    MPI_File_get_position_shared(fh, &pos);
    MPI_File_close(&fh);
    if (me == 0)
        printf("world write_ordered: shared pointer %lld\n", (long long)pos);
    MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
    MPI_File_get_position_shared(fh, &pos);
    MPI_File_close(&fh);
    if (me == 0)
        printf("reopened: shared pointer %lld, size %lld\n", (long long)pos, (long long)size_of(path));
}

static void del(const char *dir)
{
    char path[4096];
    MPI_File fh;
    MPI_Offset n = -1;
    snprintf(path, sizeof path, "%s/del", dir);
    int rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
    report("create", rc);
    if (rc != MPI_SUCCESS)
        return;
    if (me == 0)
        MPI_File_write_at(fh, 0, "deleteme", 8, MPI_BYTE, MPI_STATUS_IGNORE);
    MPI_File_close(&fh);
    if (me == 0)
        printf("delete: %s\n", cls(MPI_File_delete(path, MPI_INFO_NULL)));
    MPI_Barrier(MPI_COMM_WORLD);
    rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
    report("read-only open after the delete", rc);
    if (rc == MPI_SUCCESS)
        MPI_File_close(&fh);
    if (me == 0)
        printf("delete again: %s\n", cls(MPI_File_delete(path, MPI_INFO_NULL)));
    MPI_Barrier(MPI_COMM_WORLD);
    rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_EXCL | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
    report("exclusive create after the delete", rc);
    if (rc == MPI_SUCCESS) {
        MPI_File_get_size(fh, &n);
        if (me == 0) {
            printf("created again: size %lld\n", (long long)n);
            MPI_File_write_at(fh, 0, "ok", 2, MPI_BYTE, MPI_STATUS_IGNORE);
        }
        MPI_File_close(&fh);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 0) {
        printf("written again: size %lld\n", (long long)size_of(path));
        snprintf(path, sizeof path, "%s/never", dir);
        printf("delete of a name never created: %s\n", cls(MPI_File_delete(path, MPI_INFO_NULL)));
    }
    snprintf(path, sizeof path, "%s/doc", dir);
    rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE,
                       MPI_INFO_NULL, &fh);
    report("create with DELETE_ON_CLOSE", rc);
    if (rc == MPI_SUCCESS) {
        if (me == 0)
            MPI_File_write_at(fh, 0, "tmp", 3, MPI_BYTE, MPI_STATUS_IGNORE);
        rc = MPI_File_close(&fh);
        report("its close", rc);
    }
    rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
    report("read-only open after DELETE_ON_CLOSE", rc);
    if (rc == MPI_SUCCESS)
        MPI_File_close(&fh);
    if (me == 0)
        printf("delete after DELETE_ON_CLOSE: %s\n", cls(MPI_File_delete(path, MPI_INFO_NULL)));
    snprintf(path, sizeof path, "%s/race", dir);
    rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh);
    if (rc == MPI_SUCCESS)
        MPI_File_close(&fh);
    MPI_Barrier(MPI_COMM_WORLD);
    report_each("every rank deleting one file", MPI_File_delete(path, MPI_INFO_NULL));
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    if (argc < 3) {
        if (me == 0)
            fprintf(stderr, "usage: open_semantics DIR CASE [TRIES]\n");
        MPI_Finalize();
        return 2;
    }
    const char *dir = argv[1], *c = argv[2];
    int tries = argc > 3 ? atoi(argv[3]) : 50;
    if (!strcmp(c, "selfcreate"))
        selfcreate(dir, tries);
    else if (!strcmp(c, "excl"))
        excl(dir, tries);
    else if (!strcmp(c, "nodir"))
        nodir(dir);
    else if (!strcmp(c, "amode"))
        amode(dir);
    else if (!strcmp(c, "shared"))
        shared(dir);
    else if (!strcmp(c, "delete"))
        del(dir);
    else if (me == 0)
        fprintf(stderr, "open_semantics: unknown case %s\n", c);
    MPI_Finalize();
    return 0;
}
