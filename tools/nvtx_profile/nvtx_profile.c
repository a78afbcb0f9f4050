/*
 * nvtx_profile.c - where the runtime's threads spend their time, on a machine without
 * Nsight Systems: an NVTX tool (loaded by NVTX3 through NVTX_INJECTION64_PATH, as nsys is)
 * that times every range graphrun pushes (runtime/base/trace.h) and, at exit, prints per range
 * name its count, total and mean time, and its self time (less the ranges nested in it).
 * Unit ranges ("job 12 index 345-600") count under one name, "unit".
 *
 *   NVTX_INJECTION64_PATH=$PWD/libnvtx_profile.so GR_NVTX_PROFILE=prof.txt graphrun bench ...
 *
 * The table goes to the file GR_NVTX_PROFILE names, else to stderr. Each worker thread's
 * span (its first push to its last pop) is summed as "thread span": against it, the rows
 * say what share of a worker's life each phase took. A measuring aid, not a test.
 */
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_NAMES 64
#define MAX_DEPTH 16

typedef struct row {
    char name[48];
    uint64_t count, total_ns, self_ns;
} row;

typedef struct frame {
    int name;
    uint64_t t0, children_ns;
} frame;

typedef struct thread_state {
    frame stack[MAX_DEPTH];
    int depth;
    uint64_t first_ns, last_ns;
    struct thread_state *next;
} thread_state;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static row rows[MAX_NAMES];
static int n_rows;
static thread_state *threads;
static __thread thread_state *self;

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The row of a range name (under mu). */
static int row_of(const char *name)
{
    if (strncmp(name, "job ", 4) == 0)
        name = "unit";
    for (int i = 0; i < n_rows; i++)
        if (strcmp(rows[i].name, name) == 0)
            return i;
    if (n_rows == MAX_NAMES)
        return MAX_NAMES - 1;
    snprintf(rows[n_rows].name, sizeof(rows[0].name), "%s", name);
    return n_rows++;
}

static nvtxDomainHandle_t domain_create(const char *name)
{
    (void)name;
    return (nvtxDomainHandle_t)1;
}

static int range_push(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    const char *name = a->messageType == NVTX_MESSAGE_TYPE_ASCII ? a->message.ascii : "?";
    uint64_t t = now_ns();
    int r;

    (void)d;
    pthread_mutex_lock(&mu);
    if (self == NULL && (self = calloc(1, sizeof(*self))) != NULL) {
        self->first_ns = t;
        self->next = threads;
        threads = self;
    }
    r = row_of(name);
    pthread_mutex_unlock(&mu);
    if (self == NULL || self->depth == MAX_DEPTH)
        return 0;
    self->stack[self->depth++] = (frame){r, t, 0};
    return 0;
}

static int range_pop(nvtxDomainHandle_t d)
{
    uint64_t t = now_ns(), dt;
    frame f;

    (void)d;
    if (self == NULL || self->depth == 0)
        return 0;
    f = self->stack[--self->depth];
    dt = t - f.t0;
    if (self->depth > 0)
        self->stack[self->depth - 1].children_ns += dt;
    self->last_ns = t;
    pthread_mutex_lock(&mu);
    rows[f.name].count++;
    rows[f.name].total_ns += dt;
    rows[f.name].self_ns += dt - f.children_ns;
    pthread_mutex_unlock(&mu);
    return 0;
}

__attribute__((destructor)) static void report(void)
{
    const char *path = getenv("GR_NVTX_PROFILE");
    FILE *f = path && *path ? fopen(path, "w") : NULL;
    uint64_t span = 0;
    int n_threads = 0;

    if (f == NULL)
        f = stderr;
    pthread_mutex_lock(&mu);
    for (thread_state *t = threads; t != NULL; t = t->next, n_threads++)
        span += t->last_ns > t->first_ns ? t->last_ns - t->first_ns : 0;
    fprintf(f, "nvtx_profile: %d threads pushed ranges; thread span %.3f ms in all\n",
            n_threads, (double)span / 1e6);
    fprintf(f, "%-24s %10s %12s %12s %10s %8s\n", "range", "count", "total ms", "self ms",
            "mean us", "self/span");
    for (int i = 0; i < n_rows; i++)
        fprintf(f, "%-24s %10llu %12.3f %12.3f %10.2f %8.3f\n", rows[i].name,
                (unsigned long long)rows[i].count, (double)rows[i].total_ns / 1e6,
                (double)rows[i].self_ns / 1e6,
                rows[i].count ? (double)rows[i].total_ns / 1e3 / (double)rows[i].count : 0.0,
                span ? (double)rows[i].self_ns / (double)span : 0.0);
    pthread_mutex_unlock(&mu);
    if (f != stderr)
        fclose(f);
}

__attribute__((visibility("default"))) int InitializeInjectionNvtx2(
    NvtxGetExportTableFunc_t get_export_table)
{
    const NvtxExportTableCallbacks *cb = get_export_table(NVTX_ETID_CALLBACKS);
    NvtxFunctionTable table = NULL;
    unsigned size = 0;

    if (cb == NULL || !cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size) ||
        size <= NVTX_CBID_CORE2_DomainCreateA)
        return 0;
    *table[NVTX_CBID_CORE2_DomainCreateA] = (NvtxFunctionPointer)domain_create;
    *table[NVTX_CBID_CORE2_DomainRangePushEx] = (NvtxFunctionPointer)range_push;
    *table[NVTX_CBID_CORE2_DomainRangePop] = (NvtxFunctionPointer)range_pop;
    return 1;
}
