/* serve_kill: an MPI program for the crash stress of served files (issue 16, "a rank killed
 * mid-run -> the store recovers, acknowledged writes kept, fsck clean"; stress/serve_kill.py,
 * tests/native/test_serve_kill.py).
 *
 *   serve_kill FILE LOGDIR CONFIG INIT
 *
 * An ordinary MPI-IO program: it knows nothing of pario.  Run with libpario_trace.so
 * preloaded and PARIO_STORE set, FILE is served from the store (on a file with CEDA replicas,
 * writes into replicated ranges are redirected and marked DIRTY in the RMT).
 *
 * CONFIG (text): "seed nops init_size end maxw" then "nblocks" then nblocks lines "a b owner":
 * rank `owner` alone writes the bytes [a, b) (blocks are disjoint), so each rank knows what
 * its own bytes must hold.  INIT holds the file's first init_size bytes before the run.
 *
 * Operations: op i's kind comes from a generator seeded by `seed` alone (the same on every
 * rank, so collective calls match); offsets and lengths from a generator seeded by seed and
 * the rank.  Kinds: write_at, iwrite_at + MPI_Wait, write_at_all, iwrite_at_all + MPI_Wait,
 * write_at_all through a vector file view, read_at / iread_at / read_at_all of the rank's own
 * bytes, read_at of any range (bytes logged for the harness), MPI_File_sync, close + reopen.
 *
 * The byte written at offset x by write `gen` of rank r is val(seed, r, gen, x) (gen >= 1; the
 * harness computes the same function with numpy).
 *
 * Log LOGDIR/rank-R.log (one write(2) per record, O_APPEND):
 *   P rank pid                       at start
 *   O t                              file opened (again after a reopen)
 *   o i t                            operation i begins
 *   B gen t kind n off1 len1 ... offn lenn  before a write (kind: the call, below; its
 *                                    pieces in the file)
 *   D gen t moved                    after the write returned MPI_SUCCESS; then fdatasync:
 *                                    the write is *acknowledged*
 *   r off len moved nbad             a read of own bytes, checked here
 *   S off len first expected got nbad   a stale read of own bytes (bytes other than those the
 *                                    rank wrote last, or short before the end it knows)
 *   C t / c t                        before / after MPI_File_close (flush of DIRTY replicas)
 *   F t / E t                        before MPI_Finalize (the store's last close) / after it
 *   X what rc                        an MPI call failed
 * LOGDIR/reads-R.bin: reads of any range: int64 t0, t1, off, len, moved, then `moved` bytes.
 *
 * Environment (kill points and controls):
 *   SK_KILL_AT="K KIND DELAY_US" (on rank SK_KILL_RANK, default every rank): the rank
 *     SIGKILLs itself DELAY_US after its K-th marker of KIND (B: a write begun, C: a close
 *     begun, F: the finalize begun) -- a timer with SIGEV_SIGNAL = SIGKILL, so the kill lands
 *     inside the served call;
 *   SK_FORGET=G (on rank SK_FORGET_RANK, default every rank): negative control: the rank does
 *     not record write G as its own (its next own read covers that range and must report
 *     stale bytes).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define MAXPIECES 16

static int rank, nprocs;
static uint64_t seed;
static int64_t nops, init_size, end_off, maxw;
static int64_t nblocks, *blk_a, *blk_b;
static int *blk_owner;
static int64_t *mine, nmine;          /* indices of this rank's blocks */
static unsigned char *expect;         /* what this rank knows its bytes hold (others: unused) */
static int64_t known_end;             /* bytes [0, known_end) exist: initial size, own acked ends */
static int logfd = -1, readfd = -1;
static int64_t read_budget = 1 << 20;
static long forget_gen = -1;
static int64_t forget_off = -1, forget_len = 0;
static long kill_k = -1, kill_delay_us = 0;
static char kill_kind = 0;
static long markers;
static timer_t kill_timer;

/* ------------------------------------------------------------------ helpers */

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int64_t below(uint64_t *s, int64_t n) { return n <= 1 ? 0 : (int64_t)(splitmix(s) % (uint64_t)n); }

/* the byte at offset x of write gen of rank r (uint32 arithmetic, mirrored in the harness) */
static unsigned char val(int r, int64_t gen, int64_t x)
{
    uint32_t h = (uint32_t)x * 0x9E3779B1u + (uint32_t)gen * 0x85EBCA77u + (uint32_t)r * 0xC2B2AE3Du + (uint32_t)seed;
    h ^= h >> 15;
    h *= 0x2C1B3C6Du;
    h ^= h >> 13;
    return (unsigned char)(h >> 24);
}

static void logline(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logline(const char *fmt, ...)
{
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0 || n >= (int)sizeof line)
        n = (int)sizeof line - 1;
    if (write(logfd, line, (size_t)n) != n) {
        perror("serve_kill: log");
        exit(4);
    }
}

static void fail(const char *what, int rc)
{
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    logline("X %s %d %s\n", what, rc, msg);
    fprintf(stderr, "serve_kill: rank %d: %s failed: %s\n", rank, what, msg);
    MPI_Abort(MPI_COMM_WORLD, 3);
}

#define CHK(call, what)                      \
    do {                                     \
        int rc_ = (call);                    \
        if (rc_ != MPI_SUCCESS)              \
            fail(what, rc_);                 \
    } while (0)

/* a marker the kill point counts (B, C, F) */
static void marker(char kind)
{
    if (kind != kill_kind || kill_k < 0)
        return;
    if (++markers == kill_k) {
        struct itimerspec it;
        memset(&it, 0, sizeof it);
        it.it_value.tv_sec = kill_delay_us / 1000000;
        it.it_value.tv_nsec = (kill_delay_us % 1000000) * 1000 + 1;   /* 0 would disarm */
        timer_settime(kill_timer, 0, &it, NULL);
    }
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "serve_kill: out of memory\n");
        exit(5);
    }
    return p;
}

/* ------------------------------------------------------------------ setup */

static void read_config(const char *path, const char *initpath)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        perror(path);
        exit(2);
    }
    unsigned long long sd;
    long long a, b, c, d;
    if (fscanf(f, "%llu %lld %lld %lld %lld", &sd, &a, &b, &c, &d) != 5 || fscanf(f, "%lld", (long long *)&nblocks) != 1
        || nblocks < 0 || a < 0 || b < 0 || c < b || d < 1) {
        fprintf(stderr, "serve_kill: bad config %s\n", path);
        exit(2);
    }
    seed = sd;
    nops = a;
    init_size = b;
    end_off = c;
    maxw = d;
    blk_a = xmalloc((size_t)nblocks * sizeof *blk_a);
    blk_b = xmalloc((size_t)nblocks * sizeof *blk_b);
    blk_owner = xmalloc((size_t)nblocks * sizeof *blk_owner);
    mine = xmalloc((size_t)nblocks * sizeof *mine);
    for (int64_t i = 0; i < nblocks; i++) {
        int o;
        if (fscanf(f, "%lld %lld %d", &a, &b, &o) != 3 || a < 0 || b <= a || b > end_off) {
            fprintf(stderr, "serve_kill: bad block %lld in %s\n", (long long)i, path);
            exit(2);
        }
        blk_a[i] = a;
        blk_b[i] = b;
        blk_owner[i] = o;
        if (o == rank)
            mine[nmine++] = i;
    }
    fclose(f);
    expect = calloc((size_t)end_off + 1, 1);
    if (!expect)
        exit(5);
    int fd = open(initpath, O_RDONLY);
    if (fd < 0) {
        perror(initpath);
        exit(2);
    }
    for (int64_t got = 0; got < init_size;) {
        ssize_t n = pread(fd, expect + got, (size_t)(init_size - got), got);
        if (n <= 0) {
            fprintf(stderr, "serve_kill: %s is shorter than %lld bytes\n", initpath, (long long)init_size);
            exit(2);
        }
        got += n;
    }
    close(fd);
    known_end = init_size;
}

static void setup_kill(void)
{
    const char *k = getenv("SK_KILL_AT"), *kr = getenv("SK_KILL_RANK");
    if (k && *k && (!kr || atoi(kr) == rank)) {
        char kind = 0;
        if (sscanf(k, "%ld %c %ld", &kill_k, &kind, &kill_delay_us) != 3 || kill_k < 1 || kill_delay_us < 0) {
            fprintf(stderr, "serve_kill: bad SK_KILL_AT %s\n", k);
            exit(2);
        }
        kill_kind = kind;
        struct sigevent ev;
        memset(&ev, 0, sizeof ev);
        ev.sigev_notify = SIGEV_SIGNAL;
        ev.sigev_signo = SIGKILL;
        if (timer_create(CLOCK_MONOTONIC, &ev, &kill_timer) != 0) {
            perror("serve_kill: timer_create");
            exit(2);
        }
    }
    const char *g = getenv("SK_FORGET"), *gr = getenv("SK_FORGET_RANK");
    if (g && *g && (!gr || atoi(gr) == rank))
        forget_gen = atol(g);
}

/* ------------------------------------------------------------------ writes */

typedef struct {
    int n;
    int64_t off[MAXPIECES], len[MAXPIECES];
    int64_t total;
} pieces;

static void fill(unsigned char *buf, const pieces *p, int64_t gen)
{
    int64_t at = 0;
    for (int i = 0; i < p->n; i++)
        for (int64_t k = 0; k < p->len[i]; k++)
            buf[at++] = val(rank, gen, p->off[i] + k);
}

static void log_begin(int64_t gen, char kind, const pieces *p)
{
    char line[2048];
    int n = snprintf(line, sizeof line, "B %lld %lld %c %d", (long long)gen, (long long)now_ns(), kind, p->n);
    for (int i = 0; i < p->n; i++)
        n += snprintf(line + n, sizeof line - (size_t)n, " %lld %lld", (long long)p->off[i], (long long)p->len[i]);
    snprintf(line + n, sizeof line - (size_t)n, "\n");
    logline("%s", line);
    marker('B');
}

static void log_done(int64_t gen, const pieces *p, int64_t moved)
{
    logline("D %lld %lld %lld\n", (long long)gen, (long long)now_ns(), (long long)moved);
    if (fdatasync(logfd) != 0) {
        perror("serve_kill: fdatasync");
        exit(4);
    }
    if (moved != p->total)
        fail("write count", MPI_ERR_COUNT);
    if (gen == forget_gen) {      /* negative control: this write is not recorded */
        forget_off = p->off[0];
        forget_len = p->len[0];
        return;
    }
    for (int i = 0; i < p->n; i++) {
        for (int64_t k = 0; k < p->len[i]; k++)
            expect[p->off[i] + k] = val(rank, gen, p->off[i] + k);
        if (p->off[i] + p->len[i] > known_end)
            known_end = p->off[i] + p->len[i];
    }
}

/* a random contiguous range inside one of this rank's blocks (len 0 when it has none) */
static void own_range(uint64_t *rs, int64_t maxlen, int64_t *off, int64_t *len)
{
    if (nmine == 0) {
        *off = 0;
        *len = 0;
        return;
    }
    int64_t i = mine[below(rs, nmine)];
    int64_t a = blk_a[i], b = blk_b[i];
    *off = a + below(rs, b - a);
    int64_t room = b - *off;
    *len = 1 + below(rs, room < maxlen ? room : maxlen);
}

static int64_t count_of(MPI_Status *st)
{
    int c = 0;
    MPI_Get_count(st, MPI_BYTE, &c);
    return c == MPI_UNDEFINED ? -1 : (int64_t)c;
}

/* kind: 'a' write_at, 'n' iwrite_at, 'c' write_at_all, 'w' iwrite_at_all, 'v' view + write_at_all */
static void do_write(MPI_File fh, char kind, int64_t gen, uint64_t *rs)
{
    pieces p;
    memset(&p, 0, sizeof p);
    MPI_Datatype ftype = MPI_DATATYPE_NULL;
    int64_t disp = 0;
    if (kind == 'v') {
        /* a vector file view inside one own block: count pieces of bl bytes every stride */
        int64_t off, len;
        own_range(rs, maxw, &off, &len);
        int64_t room = nmine ? len : 0;
        if (room >= 8) {
            int64_t bl = 1 + below(rs, room / 4 < 4096 ? room / 4 : 4096);
            int64_t stride = bl + 1 + below(rs, 3 * bl);
            int64_t cnt = 1 + (room - bl) / stride;
            if (cnt > MAXPIECES)
                cnt = MAXPIECES;
            if (cnt >= 2) {
                cnt = 2 + below(rs, cnt - 1);
                p.n = (int)cnt;
                for (int i = 0; i < p.n; i++) {
                    p.off[i] = off + i * stride;
                    p.len[i] = bl;
                }
                p.total = cnt * bl;
                disp = off;
                CHK(MPI_Type_vector((int)cnt, (int)bl, (int)stride, MPI_BYTE, &ftype), "MPI_Type_vector");
                CHK(MPI_Type_commit(&ftype), "MPI_Type_commit");
            }
        }
        CHK(MPI_File_set_view(fh, disp, MPI_BYTE, ftype == MPI_DATATYPE_NULL ? MPI_BYTE : ftype, "native", MPI_INFO_NULL),
            "MPI_File_set_view");
    } else {
        int64_t off, len;
        own_range(rs, maxw, &off, &len);
        if (len > 0) {
            p.n = 1;
            p.off[0] = off;
            p.len[0] = len;
            p.total = len;
        }
    }
    unsigned char *buf = xmalloc((size_t)p.total);
    fill(buf, &p, gen);
    int collective = kind == 'c' || kind == 'w' || kind == 'v';
    if (p.total > 0 || collective)
        log_begin(gen, kind, &p);
    MPI_Status st;
    MPI_Request rq;
    MPI_Offset at = kind == 'v' ? 0 : (p.n ? p.off[0] : 0);
    int cnt = (int)p.total;
    switch (kind) {
    case 'a':
        if (cnt > 0)
            CHK(MPI_File_write_at(fh, at, buf, cnt, MPI_BYTE, &st), "MPI_File_write_at");
        break;
    case 'n':
        if (cnt > 0) {
            CHK(MPI_File_iwrite_at(fh, at, buf, cnt, MPI_BYTE, &rq), "MPI_File_iwrite_at");
            CHK(MPI_Wait(&rq, &st), "MPI_Wait");
        }
        break;
    case 'c':
    case 'v':
        CHK(MPI_File_write_at_all(fh, at, buf, cnt, MPI_BYTE, &st), "MPI_File_write_at_all");
        break;
    case 'w':
        CHK(MPI_File_iwrite_at_all(fh, at, buf, cnt, MPI_BYTE, &rq), "MPI_File_iwrite_at_all");
        CHK(MPI_Wait(&rq, &st), "MPI_Wait");
        break;
    }
    if (p.total > 0 || collective)
        log_done(gen, &p, cnt > 0 ? count_of(&st) : 0);
    if (kind == 'v') {
        CHK(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL), "MPI_File_set_view");
        if (ftype != MPI_DATATYPE_NULL)
            MPI_Type_free(&ftype);
    }
    free(buf);
}

/* ------------------------------------------------------------------ reads */

static int64_t nreads, nstale;

/* check a read of own bytes [off, off+len) that returned `moved` bytes */
static void check_own(int64_t off, int64_t len, int64_t moved, const unsigned char *buf)
{
    int64_t nbad = 0, first = -1;
    int64_t must = (off + len < known_end ? off + len : known_end) - off;   /* bytes that exist */
    if (moved < must) {
        nbad += must - moved;
        first = off + moved;
    }
    for (int64_t k = 0; k < moved && k < len; k++)
        if (buf[k] != expect[off + k]) {
            if (first < 0 || off + k < first)
                first = off + k;
            nbad++;
        }
    nreads++;
    logline("r %lld %lld %lld %lld\n", (long long)off, (long long)len, (long long)moved, (long long)nbad);
    if (nbad) {
        nstale++;
        int e = first < end_off ? expect[first] : -1;
        int g = first - off < moved ? buf[first - off] : -1;
        logline("S %lld %lld %lld %d %d %lld\n", (long long)off, (long long)len, (long long)first, e, g, (long long)nbad);
    }
}

/* kind: 'r' read_at, 'i' iread_at, 'R' read_at_all (own bytes), 'f' read_at of any range */
static void do_read(MPI_File fh, char kind, uint64_t *rs)
{
    int64_t off = 0, len = 0;
    if (kind == 'f') {
        off = below(rs, end_off);
        len = 1 + below(rs, end_off - off < 65536 ? end_off - off : 65536);
    } else if (forget_off >= 0) {      /* control: read the forgotten write's range */
        off = forget_off;
        len = forget_len;
        forget_off = -1;
    } else {
        own_range(rs, maxw, &off, &len);
    }
    unsigned char *buf = xmalloc((size_t)len);
    memset(buf, 0xEE, (size_t)len);
    MPI_Status st;
    MPI_Request rq;
    int64_t moved = 0, t0 = now_ns();
    switch (kind) {
    case 'r':
    case 'f':
        if (len > 0)
            CHK(MPI_File_read_at(fh, off, buf, (int)len, MPI_BYTE, &st), "MPI_File_read_at");
        break;
    case 'i':
        if (len > 0) {
            CHK(MPI_File_iread_at(fh, off, buf, (int)len, MPI_BYTE, &rq), "MPI_File_iread_at");
            int done = 0;
            while (!done)
                CHK(MPI_Test(&rq, &done, &st), "MPI_Test");
        }
        break;
    case 'R':
        CHK(MPI_File_read_at_all(fh, off, buf, (int)len, MPI_BYTE, &st), "MPI_File_read_at_all");
        break;
    }
    int64_t t1 = now_ns();
    if (len > 0)
        moved = count_of(&st);
    if (kind == 'f') {
        if (read_budget >= moved) {
            read_budget -= moved;
            int64_t hdr[5] = {t0, t1, off, len, moved};
            struct iovec iov[2] = {{hdr, sizeof hdr}, {buf, (size_t)moved}};
            if (writev(readfd, iov, 2) != (ssize_t)(sizeof hdr + (size_t)moved)) {
                perror("serve_kill: read log");
                exit(4);
            }
        }
    } else if (len > 0) {
        check_own(off, len, moved, buf);
    }
    free(buf);
}

/* ------------------------------------------------------------------ main */

static MPI_File open_file(const char *name)
{
    MPI_File fh;
    CHK(MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_RDWR | MPI_MODE_CREATE, MPI_INFO_NULL, &fh), "MPI_File_open");
    MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN);
    logline("O %lld\n", (long long)now_ns());
    return fh;
}

static void close_file(MPI_File *fh)
{
    logline("C %lld\n", (long long)now_ns());
    marker('C');
    CHK(MPI_File_close(fh), "MPI_File_close");
    logline("c %lld\n", (long long)now_ns());
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (argc != 5) {
        if (rank == 0)
            fprintf(stderr, "usage: serve_kill FILE LOGDIR CONFIG INIT\n");
        MPI_Finalize();
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/rank-%d.log", argv[2], rank);
    logfd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    snprintf(path, sizeof path, "%s/reads-%d.bin", argv[2], rank);
    readfd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (logfd < 0 || readfd < 0) {
        perror("serve_kill: log files");
        return 4;
    }
    read_config(argv[3], argv[4]);
    setup_kill();
    logline("P %d %d\n", rank, (int)getpid());

    MPI_File fh = open_file(argv[1]);
    uint64_t shared = seed * 0x9E3779B97F4A7C15ull + 1, own = seed ^ (0xA5A5A5A5ull * (uint64_t)(rank + 1));
    int64_t gen = 0;
    for (int64_t i = 0; i < nops; i++) {
        logline("o %lld %lld\n", (long long)i, (long long)now_ns());
        int64_t u = below(&shared, 100);
        if (u < 28)
            do_write(fh, 'a', ++gen, &own);
        else if (u < 36)
            do_write(fh, 'n', ++gen, &own);
        else if (u < 46)
            do_write(fh, 'c', ++gen, &own);
        else if (u < 50)
            do_write(fh, 'w', ++gen, &own);
        else if (u < 54)
            do_write(fh, 'v', ++gen, &own);
        else if (u < 68)
            do_read(fh, 'r', &own);
        else if (u < 72)
            do_read(fh, 'i', &own);
        else if (u < 80)
            do_read(fh, 'R', &own);
        else if (u < 94)
            do_read(fh, 'f', &own);
        else if (u < 97)
            CHK(MPI_File_sync(fh), "MPI_File_sync");
        else {
            close_file(&fh);
            fh = open_file(argv[1]);
        }
    }
    close_file(&fh);
    logline("F %lld %lld %lld\n", (long long)now_ns(), (long long)nreads, (long long)nstale);
    marker('F');
    MPI_Finalize();
    logline("E %lld\n", (long long)now_ns());
    close(logfd);
    close(readfd);
    return 0;
}
