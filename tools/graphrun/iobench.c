/*
 * iobench.c - `graphrun bench --io DIR`: `graphrun run` against the disk it reads and
 * writes, both measured in the same run, every output checked.
 *
 * 1. Write a dataset of seed-workload tensors (.npy, float32, workload.h's inputs) into a
 *    directory of its own under DIR, synced and dropped from the page cache.
 * 2. Measure the file system with the run's own I/O (fileio.h: io_uring or pread, O_DIRECT
 *    where the file system allows it; PIECE-sized operations, DEPTH in flight): reading the
 *    dataset; writing as many bytes as the outputs, into files fsynced one by one as
 *    --sync each does; and both at once, as the run does them. The last is the disk's own
 *    time for the run's bytes, the floor the run is measured against.
 * 3. Run `graphrun run` on the dataset (this same binary, a child process), timed from its
 *    start to its exit; its peak resident set is the one its --json reports (VmHWM, its own
 *    memory: wait4's ru_maxrss would start at this process's peak, which Linux hands to a
 *    child at fork and keeps across exec).
 * 4. Check every output against the C reference (gr_workload_check_seed), bit for bit.
 * 5. Report the rates, the run's time, the ratio (the disk's time over the run's: 1.0 is
 *    the disk's speed), the peak resident set against --host-memory, and the check.
 * Steps 1 and 4 compute on every CPU (a tensor in pieces): on one core they took longer
 * than the disk for tens of GB; --json gives their times beside the disk's and the run's.
 * Exit status 0 only when the run succeeded and every output is right; 128 + the signal when
 * one stopped it, after removing what it wrote.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <graphrun.h>
#include "tools/graphrun/cli.h"
#include "tools/graphrun/commands.h"
#include "tools/graphrun/fileio.h"
#include "tools/graphrun/npy.h"
#include "tools/graphrun/workload.h"

#define PIECE (8u << 20)
#define DEPTH 32
#define SEED 1
#define DEFAULT_COUNT 16
#define DEFAULT_ELEMS (16ull << 20) /* 64 MiB tensors */

extern char **environ;

static const char seed_spec[] = "buffer x\nh2d load: in0 -> x\nkernel seed: seed(x) -> x\n"
                                "d2h store: x -> out0\nload -> seed -> store\n";

static void usage(FILE *f)
{
    fprintf(f,
            "usage: graphrun bench --io DIR [options]\n"
            "\n"
            "Measure `graphrun run` against the disk it reads and writes, in the same run:\n"
            "write a dataset of seed-workload tensors (.npy) into a directory of its own\n"
            "under DIR; measure the file system's read, write (fsynced) and read-and-write-\n"
            "at-once rates with the run's own I/O (io_uring or pread, O_DIRECT where the\n"
            "file system allows it); run `graphrun run` on the dataset (the seed pipeline);\n"
            "check every output against the C reference; report the run's time as a ratio\n"
            "of the disk's own time for the same bytes (1.0 = the disk's speed) and the\n"
            "run's peak resident set.\n"
            "\n"
            "  --io DIR         the file system to measure (DIR is made if missing): a\n"
            "                   directory of its own is made in DIR and removed at the end,\n"
            "                   or when the bench is stopped (SIGINT, SIGTERM, SIGHUP)\n"
            "  --count N        tensors (default %d)\n"
            "  --elems N        float32 elements per tensor (default %llu: 64 MiB)\n"
            "  --host-memory SIZE, --budget SIZE, --workers N, --backend B, --memory M\n"
            "                   passed to graphrun run\n"
            "  --no-read-ahead  passed to graphrun run: the disk waits for the runtime\n"
            "  --keep           keep the dataset and the outputs\n"
            "  --json           print one JSON object\n"
            "  --help           this text\n"
            "\n"
            "The floor is the disk reading the inputs while it writes the outputs: on one\n"
            "device they contend, as in the run. Exit status: 0 every output right, 1 the\n"
            "run failed or an output is wrong, 2 bad command line, 3 the directory cannot\n"
            "be used.\n",
            DEFAULT_COUNT, (unsigned long long)DEFAULT_ELEMS);
}

typedef struct bench {
    const char *dir;
    char *root;            /* DIR/graphrun-bench-io.XXXXXX */
    uint64_t count, elems;
    const char *pass[12];  /* run's flags passed on: name, value, ... */
    int n_pass;
    bool keep, json;
    gr_fio *fio;
    char engine_why[160];
    bool direct;           /* the file system took O_DIRECT */
    char *bufs[DEPTH];     /* PIECE each, block aligned */
    double dataset_s, check_s; /* the bench's own steps 1 and 4, to plan long runs by */
} bench;

/* One file of a phase: read whole, or written with `bytes` and fsynced. */
typedef struct job {
    int fd;
    bool write;
    uint64_t bytes, next, done;
    unsigned in_flight;
} job;

static char *path_of(const bench *b, const char *sub, uint64_t i)
{
    char *p = NULL;

    if (asprintf(&p, "%s/%s/t%05llu.npy", b->root, sub, (unsigned long long)i) < 0)
        return NULL;
    return p;
}

static size_t header_of(const bench *b, char *h, size_t size)
{
    uint64_t shape[1] = {b->elems};

    return gr_npy_format_header(GR_DTYPE_FLOAT32, shape, 1, h, size);
}

/* Drop a file's pages from the cache (best effort: what is not dirty). */
static void uncache(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    if (fd >= 0) {
        fdatasync(fd);
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        close(fd);
    }
}

static int remove_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb;
    (void)ftw;
    if (type == FTW_DP)
        rmdir(path);
    else
        unlink(path);
    return 0;
}

/* The bench's own directory and all in it: the dataset, the outputs, whatever a run stopped
 * half way left (its temporaries, its manifest). */
static void remove_tree(const char *root)
{
    nftw(root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Stopped by a signal (Ctrl-C, `timeout`, kill), the bench removes what it wrote: a bench
 * of tens of GB stopped half way otherwise filled the disk for the next. SIGINT, SIGTERM and
 * SIGHUP are blocked in every thread but one that waits for them; it stops the run (the
 * child gets them unblocked), waits for it to end, removes the directory and exits 128 +
 * the signal. `mu` orders it with the start of the run and the end of the bench. */
static struct {
    pthread_mutex_t mu;
    sigset_t signals;
    sigset_t before;      /* the mask before they were blocked: the child's */
    const char *root;     /* NULL until it exists and again once it is removed */
    bool keep;            /* --keep: left on a signal too */
    pid_t child;          /* the run while it runs, else 0 */
    bool stopped;         /* no run is started after this */
} stopping = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void *stop_on_signal(void *arg)
{
    siginfo_t info;
    int sig;

    (void)arg;
    while ((sig = sigwaitinfo(&stopping.signals, &info)) < 0 && errno == EINTR)
        ;
    if (sig < 0)
        return NULL;
    pthread_mutex_lock(&stopping.mu);
    stopping.stopped = true;
    if (stopping.child > 0) {
        /* Not reaped here (WNOWAIT): the bench's own wait4 may be waiting for it too. */
        kill(stopping.child, SIGTERM);
        while (waitid(P_PID, (id_t)stopping.child, &info, WEXITED | WNOWAIT) < 0 &&
               errno == EINTR)
            ;
    }
    if (stopping.root != NULL && !stopping.keep) {
        remove_tree(stopping.root);
        fprintf(stderr, "graphrun bench: stopped by %s; %s removed\n", strsignal(sig),
                stopping.root);
    } else {
        fprintf(stderr, "graphrun bench: stopped by %s\n", strsignal(sig));
    }
    _exit(128 + sig);
}

static void stop_on_signals(void)
{
    pthread_t t;

    sigemptyset(&stopping.signals);
    sigaddset(&stopping.signals, SIGINT);
    sigaddset(&stopping.signals, SIGTERM);
    sigaddset(&stopping.signals, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &stopping.signals, &stopping.before);
    if (pthread_create(&t, NULL, stop_on_signal, NULL) == 0)
        pthread_detach(t);
    else /* no thread to take them: they stop the bench as they did, leaving its files */
        pthread_sigmask(SIG_SETMASK, &stopping.before, NULL);
}

/* Every file and directory the bench makes or opens goes through here: none once a signal
 * has stopped it, so that nothing is made after its directory is removed. -1 with EINTR
 * then. */
static int create(const char *path, int flags, bool dir)
{
    int fd;

    pthread_mutex_lock(&stopping.mu);
    if (stopping.stopped) {
        pthread_mutex_unlock(&stopping.mu);
        errno = EINTR;
        return -1;
    }
    fd = dir ? mkdir(path, 0777) : open(path, flags, 0644);
    pthread_mutex_unlock(&stopping.mu);
    return fd;
}

/* One tensor's data, filled or checked in pieces on every CPU: a dataset of tens of GB
 * is otherwise minutes of one core's work beside seconds of disk. */
#define SLICE (1ull << 20) /* elements a piece */

typedef struct slices {
    float *data;
    uint64_t elems, index;
    _Atomic uint64_t wrong;
} slices;

static uint64_t slice_len(const slices *s, uint64_t k)
{
    return s->elems - k * SLICE < SLICE ? s->elems - k * SLICE : SLICE;
}

static void fill_slice(uint64_t k, void *arg)
{
    slices *s = arg;

    gr_workload_fill(s->data + k * SLICE, k * SLICE, slice_len(s, k), SEED, s->index);
}

static void check_slice(uint64_t k, void *arg)
{
    slices *s = arg;
    uint64_t bad = gr_workload_check_seed(s->data + k * SLICE, k * SLICE, slice_len(s, k), SEED,
                                          s->index, NULL);

    if (bad)
        atomic_fetch_add(&s->wrong, bad);
}

static void over_slices(slices *s, void (*fn)(uint64_t, void *))
{
    gr_cli_parallel_for((s->elems + SLICE - 1) / SLICE, 0, fn, s);
}

/* Step 1: the dataset, each tensor's .npy as np.save writes it. */
static int write_dataset(bench *b)
{
    char header[4096], *p;
    uint64_t bytes = b->elems * sizeof(float);
    size_t hlen = header_of(b, header, sizeof(header));
    float *data = malloc(bytes);
    int rc = GR_EXIT_OK;

    if (data == NULL || hlen == 0) {
        free(data);
        fprintf(stderr, "graphrun bench: no memory for a tensor of %llu elements\n",
                (unsigned long long)b->elems);
        return GR_EXIT_RUNTIME;
    }
    for (uint64_t i = 0; i < b->count && rc == GR_EXIT_OK; i++) {
        int fd;

        slices sl = {data, b->elems, i, 0};

        over_slices(&sl, fill_slice);
        if ((p = path_of(b, "in", i)) == NULL ||
            (fd = create(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, false)) < 0 ||
            write(fd, header, hlen) != (ssize_t)hlen || write(fd, data, bytes) != (ssize_t)bytes ||
            fsync(fd) != 0 || close(fd) != 0) {
            fprintf(stderr, "graphrun bench: cannot write %s: %s\n", p ? p : "the dataset",
                    strerror(errno));
            rc = GR_EXIT_RUNTIME;
        }
        if (p)
            uncache(p);
        free(p);
    }
    free(data);
    return rc;
}

/* Open a phase's file: O_DIRECT where the file system takes it. */
static int open_file(bench *b, const char *path, bool write)
{
    int flags = (write ? O_WRONLY | O_CREAT | O_TRUNC : O_RDONLY) | O_CLOEXEC;
    int fd = b->direct ? create(path, flags | O_DIRECT, false) : -1;

    return fd >= 0 ? fd : create(path, flags, false);
}

/* Move every job's bytes through the engine, DEPTH pieces at a time from the buffers;
 * writes are fsynced once whole. Seconds, or -1 on an I/O error (said). */
static double pump(bench *b, job *jobs, uint64_t n)
{
    unsigned free_buf[DEPTH], n_free = DEPTH;
    uint64_t left = n, next = 0;
    int64_t t0 = gr_now_ns();
    gr_fio_op done[DEPTH];

    for (unsigned k = 0; k < DEPTH; k++)
        free_buf[k] = k;
    while (left > 0) {
        /* Files in order, each one's pieces as buffers free up. */
        for (uint64_t j = next; j < n && n_free > 0 && gr_fio_in_flight(b->fio) < DEPTH; j++) {
            job *x = &jobs[j];

            if (x->next < x->bytes) {
                uint64_t len = x->bytes - x->next < PIECE ? x->bytes - x->next : PIECE;
                unsigned k = free_buf[--n_free];
                gr_fio_op op = {x->write ? GR_FIO_WRITE : GR_FIO_READ, x->fd, b->bufs[k],
                                (uint32_t)((len + 4095) / 4096 * 4096), x->next,
                                (j << 8) | k, 0};

                if (gr_fio_submit(b->fio, &op) != GR_OK) {
                    free_buf[n_free++] = k;
                    break;
                }
                x->next += len;
                x->in_flight++;
            } else if (j == next && x->in_flight == 0 && x->done >= x->bytes) {
                next++;
            }
        }
        unsigned got = gr_fio_reap(b->fio, done, DEPTH);

        if (got == 0)
            gr_fio_wait(b->fio, 100);
        for (unsigned q = 0; q < got; q++) {
            gr_fio_op *op = &done[q];
            job *x = &jobs[op->tag >> 8];
            uint64_t want = x->bytes - op->off < op->len ? x->bytes - op->off : op->len;

            x->in_flight--;
            if (op->result < 0 || (op->kind != GR_FIO_FSYNC && op->result == 0 && want > 0)) {
                fprintf(stderr, "graphrun bench: I/O under %s: %s\n", b->root,
                        op->result < 0 ? strerror((int)-op->result) : "a file ended early");
                return -1;
            }
            if (op->kind == GR_FIO_FSYNC) {
                left--;
                continue;
            }
            if ((uint64_t)op->result < want) { /* short: the rest, from the same buffer */
                op->buf = (char *)op->buf + op->result;
                op->off += (uint64_t)op->result;
                op->len -= (uint32_t)op->result;
                x->done += (uint64_t)op->result;
                if (gr_fio_submit(b->fio, op) != GR_OK)
                    return -1;
                x->in_flight++;
                continue;
            }
            free_buf[n_free++] = (unsigned)(op->tag & 0xff);
            x->done += want;
            if (x->done < x->bytes || x->in_flight > 0)
                continue;
            if (!x->write) {
                left--;
                continue;
            }
            op->kind = GR_FIO_FSYNC;
            op->tag = op->tag >> 8 << 8;
            if (gr_fio_submit(b->fio, op) != GR_OK)
                return -1;
            x->in_flight++;
        }
    }
    return (double)(gr_now_ns() - t0) / 1e9;
}

/* One phase: read the inputs, write as many bytes as the outputs, or both. */
static double phase(bench *b, bool reads, bool writes)
{
    char header[4096];
    uint64_t file = header_of(b, header, sizeof(header)) + b->elems * sizeof(float);
    uint64_t n = (reads ? b->count : 0) + (writes ? b->count : 0), k = 0;
    job *jobs = calloc(n + 1, sizeof(*jobs));
    double s = -1;

    if (jobs == NULL)
        return -1;
    /* Interleaved, so that reads and writes are in flight together. */
    for (uint64_t i = 0; i < b->count; i++)
        for (int w = 0; w < 2; w++) {
            char *p;

            if ((w == 0 && !reads) || (w == 1 && !writes))
                continue;
            if ((p = path_of(b, w ? "scratch" : "in", i)) == NULL)
                goto out;
            if (!w)
                uncache(p);
            jobs[k] = (job){.fd = open_file(b, p, w), .write = w, .bytes = file};
            free(p);
            if (jobs[k++].fd < 0) {
                fprintf(stderr, "graphrun bench: cannot open a file under %s: %s\n", b->root,
                        strerror(errno));
                goto out;
            }
        }
    s = pump(b, jobs, n);
out:
    for (uint64_t j = 0; j < k; j++)
        if (jobs[j].fd >= 0)
            close(jobs[j].fd);
    free(jobs);
    return s;
}

/* Step 3: graphrun run, this binary as a child. Its JSON summary into *summary; its wall
 * seconds into *seconds, peak resident set into *rss. */
static int run_child(bench *b, json_t **summary, double *seconds, int64_t *rss)
{
    char graph[4096], in[4096], out[4096], self[4096];
    const char *argv[32];
    int argc = 0, pipefd[2], status, fd;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    struct rusage ru;
    json_error_t jerr;
    const json_t *own;
    int64_t t0;
    ssize_t n;
    pid_t pid;
    FILE *f;

    n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0)
        return GR_EXIT_RUNTIME;
    self[n] = '\0';
    snprintf(graph, sizeof(graph), "%s/seed.graph", b->root);
    snprintf(in, sizeof(in), "%s/in", b->root);
    snprintf(out, sizeof(out), "%s/out", b->root);
    if ((fd = create(graph, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, false)) < 0 ||
        (f = fdopen(fd, "w")) == NULL) {
        if (fd >= 0)
            close(fd);
        return GR_EXIT_RUNTIME;
    }
    if (fputs(seed_spec, f) == EOF || fclose(f) != 0)
        return GR_EXIT_RUNTIME;
    argv[argc++] = self;
    argv[argc++] = "run";
    argv[argc++] = "--graph";
    argv[argc++] = graph;
    argv[argc++] = "--input";
    argv[argc++] = in;
    argv[argc++] = "--output";
    argv[argc++] = out;
    argv[argc++] = "--json";
    argv[argc++] = "--progress";
    argv[argc++] = "never";
    for (int k = 0; k < b->n_pass; k++)
        argv[argc++] = b->pass[k];
    argv[argc] = NULL;
    for (uint64_t i = 0; i < b->count; i++) {
        char *p = path_of(b, "in", i);

        if (p)
            uncache(p);
        free(p);
    }
    if (pipe2(pipefd, O_CLOEXEC) != 0)
        return GR_EXIT_RUNTIME;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, pipefd[1], STDOUT_FILENO);
    posix_spawnattr_init(&attr);
    posix_spawnattr_setsigmask(&attr, &stopping.before);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
    t0 = gr_now_ns();
    pthread_mutex_lock(&stopping.mu);
    if (stopping.stopped ||
        posix_spawn(&pid, self, &fa, &attr, (char *const *)argv, environ) != 0) {
        pthread_mutex_unlock(&stopping.mu);
        posix_spawnattr_destroy(&attr);
        posix_spawn_file_actions_destroy(&fa);
        close(pipefd[0]);
        close(pipefd[1]);
        return GR_EXIT_RUNTIME;
    }
    stopping.child = pid;
    pthread_mutex_unlock(&stopping.mu);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&fa);
    close(pipefd[1]);
    f = fdopen(pipefd[0], "r");
    *summary = f ? json_loadf(f, JSON_DISABLE_EOF_CHECK, &jerr) : NULL;
    if (f)
        fclose(f);
    else
        close(pipefd[0]);
    while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR)
        ;
    pthread_mutex_lock(&stopping.mu);
    stopping.child = 0;
    pthread_mutex_unlock(&stopping.mu);
    *seconds = (double)(gr_now_ns() - t0) / 1e9;
    own = json_object_get(*summary, "peak_rss_bytes");
    *rss = json_is_integer(own) ? (int64_t)json_integer_value(own) : (int64_t)ru.ru_maxrss * 1024;
    return WIFEXITED(status) ? WEXITSTATUS(status) : GR_EXIT_FAILED;
}

/* GR_TEST_BENCH_WRONG=I:J, for tests only: element J of output I is taken as read with one
 * bit flipped (the file is left alone), so a test can show that the check finds a wrong
 * element wherever it lies in its tensor. */
static bool test_wrong_element(uint64_t *index, uint64_t *element)
{
    const char *v = getenv("GR_TEST_BENCH_WRONG");

    return v != NULL && sscanf(v, "%" SCNu64 ":%" SCNu64, index, element) == 2;
}

/* Step 4: every output read back and checked; the number right. */
static uint64_t check_outputs(const bench *b)
{
    uint64_t bytes = b->elems * sizeof(float), right = 0, bad_i = 0, bad_j = 0;
    bool flip = test_wrong_element(&bad_i, &bad_j);
    char *buf = malloc(bytes + 65536);

    for (uint64_t i = 0; buf && i < b->count; i++) {
        char *p = path_of(b, "out", i);
        gr_npy_header h;
        struct stat sb;
        int fd = p ? open(p, O_RDONLY | O_CLOEXEC) : -1;
        ssize_t got = fd >= 0 && fstat(fd, &sb) == 0 && (uint64_t)sb.st_size <= bytes + 65536
                          ? pread(fd, buf, (size_t)sb.st_size, 0)
                          : -1;
        slices sl = {NULL, b->elems, i, 0};

        if (fd >= 0)
            close(fd);
        if (got > 0 && gr_npy_parse_header(buf, (size_t)got, &h, NULL, 0) == GR_OK &&
            h.dtype == GR_DTYPE_FLOAT32 && !h.swap && h.elems == b->elems &&
            h.data_offset + bytes == (uint64_t)got) {
            sl.data = (float *)(buf + h.data_offset);
            if (flip && i == bad_i && bad_j < b->elems)
                ((uint32_t *)sl.data)[bad_j] ^= 1u;
            over_slices(&sl, check_slice);
        }
        if (sl.data != NULL && atomic_load(&sl.wrong) == 0)
            right++;
        else if (!b->json)
            fprintf(stderr, "graphrun bench: %s: missing or wrong\n", p ? p : "an output");
        free(p);
    }
    free(buf);
    return right;
}

static int parse(int argc, char **argv, bench *b)
{
    static const struct option longopts[] = {
        {"io", required_argument, NULL, 'i'},       {"count", required_argument, NULL, 'c'},
        {"elems", required_argument, NULL, 'e'},    {"host-memory", required_argument, NULL, 'Z'},
        {"budget", required_argument, NULL, 'b'},   {"workers", required_argument, NULL, 'w'},
        {"backend", required_argument, NULL, 'k'},  {"memory", required_argument, NULL, 'm'},
        {"keep", no_argument, NULL, 'K'},           {"json", no_argument, NULL, 'j'},
        {"no-read-ahead", no_argument, NULL, 'R'},
        {"help", no_argument, NULL, 'h'},           {NULL, 0, NULL, 0},
    };
    uint32_t seen = 0;
    int opt;

    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        if (!gr_cli_once(&seen, opt, "iceZbwkmR", "graphrun bench", longopts))
            return GR_EXIT_USAGE;
        switch (opt) {
        case 'i':
            b->dir = optarg;
            break;
        case 'c':
        case 'e':
            if (!gr_cli_parse_u64(optarg, opt == 'c' ? &b->count : &b->elems) ||
                (opt == 'c' ? b->count : b->elems) == 0) {
                fprintf(stderr, "graphrun bench: invalid value '%s' for --%s\n", optarg,
                        opt == 'c' ? "count" : "elems");
                return GR_EXIT_USAGE;
            }
            break;
        case 'Z':
        case 'b':
        case 'w':
        case 'k':
        case 'm':
            /* Checked by the run, which says what is wrong in its own terms. */
            b->pass[b->n_pass++] = opt == 'Z' ? "--host-memory" : opt == 'b' ? "--budget"
                                   : opt == 'w' ? "--workers" : opt == 'k' ? "--backend"
                                                                           : "--memory";
            b->pass[b->n_pass++] = optarg;
            break;
        case 'R':
            b->pass[b->n_pass++] = "--no-read-ahead";
            break;
        case 'K':
            b->keep = true;
            break;
        case 'j':
            b->json = true;
            break;
        case 'h':
            usage(stdout);
            return GR_EXIT_OK;
        default:
            gr_cli_try_help("bench");
            return GR_EXIT_USAGE;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "graphrun bench: unexpected argument '%s'\n", argv[optind]);
        return GR_EXIT_USAGE;
    }
    return -1;
}

static void report(const bench *b, json_t *summary, double read_s, double write_s,
                   double both_s, double run_s, int64_t rss, uint64_t right, int run_rc)
{
    char header[4096];
    uint64_t file = header_of(b, header, sizeof(header)) + b->elems * sizeof(float);
    double in = (double)file * (double)b->count, host = 0;
    const json_t *hm = json_object_get(summary, "host_memory_bytes");
    char b1[32], b2[32];

    if (json_is_integer(hm))
        host = (double)json_integer_value(hm);
    if (b->json) {
        json_t *doc = json_object();

        json_object_set_new(doc, "dir", json_string(b->dir));
        json_object_set_new(doc, "engine", json_string(gr_fio_engine_name(b->fio)));
        json_object_set_new(doc, "engine_fallback",
                            b->engine_why[0] ? json_string(b->engine_why) : json_null());
        json_object_set_new(doc, "direct", json_boolean(b->direct));
        json_object_set_new(doc, "tensors", json_integer((json_int_t)b->count));
        json_object_set_new(doc, "bytes_in", json_integer((json_int_t)in));
        json_object_set_new(doc, "bytes_out", json_integer((json_int_t)in));
        json_object_set_new(doc, "disk_read_gbs", json_real(in / read_s / 1e9));
        json_object_set_new(doc, "disk_write_gbs", json_real(in / write_s / 1e9));
        json_object_set_new(doc, "disk_both_gbs", json_real(2 * in / both_s / 1e9));
        json_object_set_new(doc, "disk_seconds", json_real(both_s));
        json_object_set_new(doc, "run_seconds", json_real(run_s));
        json_object_set_new(doc, "ratio", json_real(both_s / run_s));
        json_object_set_new(doc, "peak_rss_bytes", json_integer(rss));
        json_object_set_new(doc, "run_exit", json_integer(run_rc));
        json_object_set_new(doc, "verified", json_integer((json_int_t)right));
        json_object_set_new(doc, "wrong", json_integer((json_int_t)(b->count - right)));
        json_object_set_new(doc, "dataset_seconds", json_real(b->dataset_s));
        json_object_set_new(doc, "check_seconds", json_real(b->check_s));
        json_object_set_new(doc, "run", summary ? json_incref(summary) : json_null());
        json_dumpf(doc, stdout, JSON_COMPACT | JSON_REAL_PRECISION(9));
        fputc('\n', stdout);
        json_decref(doc);
        return;
    }
    printf("disk (%s, %s%s): read %.2f GB/s, write %.2f GB/s (fsynced), both at once %.2f "
           "GB/s (in+out)\n",
           b->dir, gr_fio_engine_name(b->fio), b->direct ? ", O_DIRECT" : ", page cache",
           in / read_s / 1e9, in / write_s / 1e9, 2 * in / both_s / 1e9);
    printf("graphrun run: %llu tensors, %s in and out, %.3f s; the disk alone %.3f s for the "
           "same bytes: ratio %.3f (1.0 = the disk's speed)\n",
           (unsigned long long)b->count, gr_cli_bytes((uint64_t)in, b1, sizeof(b1)), run_s,
           both_s, both_s / run_s);
    printf("peak resident set %s (host memory %s); outputs right: %llu of %llu\n",
           gr_cli_bytes((uint64_t)rss, b1, sizeof(b1)), gr_cli_bytes((uint64_t)host, b2,
                                                                      sizeof(b2)),
           (unsigned long long)right, (unsigned long long)b->count);
}

int gr_cmd_bench_io(int argc, char **argv)
{
    bench b = {.count = DEFAULT_COUNT, .elems = DEFAULT_ELEMS};
    double read_s, write_s, both_s, run_s = 0;
    json_t *summary = NULL;
    int64_t rss = 0;
    uint64_t right = 0;
    char path[4096];
    int64_t t0;
    int rc, run_rc;

    if ((rc = parse(argc, argv, &b)) >= 0)
        return rc;
    stop_on_signals();
    /* DIR is made if it is not there (it stays: only the bench's own directory goes). */
    if (mkdir(b.dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "graphrun bench: --io %s: cannot make it: %s\n", b.dir,
                strerror(errno));
        return GR_EXIT_RUNTIME;
    }
    pthread_mutex_lock(&stopping.mu);
    if (asprintf(&b.root, "%s/graphrun-bench-io.XXXXXX", b.dir) < 0 || mkdtemp(b.root) == NULL) {
        pthread_mutex_unlock(&stopping.mu);
        fprintf(stderr, "graphrun bench: --io %s: cannot make a directory in it: %s\n", b.dir,
                strerror(errno));
        free(b.root);
        return GR_EXIT_RUNTIME;
    }
    stopping.root = b.root;
    stopping.keep = b.keep;
    pthread_mutex_unlock(&stopping.mu);
    for (int s = 0; s < 2; s++) {
        snprintf(path, sizeof(path), "%s/%s", b.root, s ? "scratch" : "in");
        create(path, 0, true);
    }
    /* O_DIRECT where the file system takes it: the run does the same. */
    snprintf(path, sizeof(path), "%s/probe", b.root);
    rc = create(path, O_WRONLY | O_CREAT | O_DIRECT | O_CLOEXEC, false);
    b.direct = rc >= 0;
    if (rc >= 0)
        close(rc);
    unlink(path);
    rc = GR_EXIT_RUNTIME;
    if (gr_fio_create(GR_FIO_AUTO, DEPTH, false, &b.fio, b.engine_why, sizeof(b.engine_why)) !=
        GR_OK)
        goto out;
    for (int k = 0; k < DEPTH; k++)
        if (posix_memalign((void **)&b.bufs[k], 4096, PIECE) != 0)
            goto out;
    t0 = gr_now_ns();
    if ((rc = write_dataset(&b)) != GR_EXIT_OK)
        goto out;
    b.dataset_s = (double)(gr_now_ns() - t0) / 1e9;
    rc = GR_EXIT_RUNTIME;
    if ((read_s = phase(&b, true, false)) < 0 || (write_s = phase(&b, false, true)) < 0 ||
        (both_s = phase(&b, true, true)) < 0)
        goto out;
    for (uint64_t i = 0; i < b.count; i++) { /* the run writes its own */
        char *p = path_of(&b, "scratch", i);

        if (p)
            unlink(p);
        free(p);
    }
    run_rc = run_child(&b, &summary, &run_s, &rss);
    t0 = gr_now_ns();
    right = check_outputs(&b);
    b.check_s = (double)(gr_now_ns() - t0) / 1e9;
    report(&b, summary, read_s, write_s, both_s, run_s, rss, right, run_rc);
    rc = run_rc == GR_EXIT_OK && right == b.count ? GR_EXIT_OK : GR_EXIT_FAILED;
out:
    pthread_mutex_lock(&stopping.mu);
    if (!b.keep)
        remove_tree(b.root);
    stopping.root = NULL;
    pthread_mutex_unlock(&stopping.mu);
    json_decref(summary);
    for (int k = 0; k < DEPTH; k++)
        free(b.bufs[k]);
    gr_fio_destroy(b.fio);
    free(b.root);
    return rc;
}
