/*
 * nvtx_recorder.c - a minimal NVTX tool, for tests/trace_test.c: loaded by NVTX3's own
 * loader through NVTX_INJECTION64_PATH (as Nsight Systems is), it takes over the domain
 * calls and records every range push and pop, one line each:
 *
 *   push TID DOMAIN "MESSAGE" payload=N|none color=ARGB|none
 *   pop TID DOMAIN
 *
 * The test reads the record back with gr_nvtx_recorder_text (found with dlsym on the
 * library NVTX loaded).
 */
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char record[1 << 20];
static size_t used;
static char domains[8][32];
static int n_domains;

static void add(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void add(const char *fmt, ...)
{
    va_list ap;
    int n;

    pthread_mutex_lock(&mu);
    va_start(ap, fmt);
    n = vsnprintf(record + used, sizeof(record) - used, fmt, ap);
    va_end(ap);
    if (n > 0 && used + (size_t)n < sizeof(record))
        used += (size_t)n;
    pthread_mutex_unlock(&mu);
}

static const char *domain_name(nvtxDomainHandle_t d)
{
    intptr_t i = (intptr_t)d - 1;

    return i >= 0 && i < n_domains ? domains[i] : "(default)";
}

static nvtxDomainHandle_t domain_create(const char *name)
{
    intptr_t id;

    pthread_mutex_lock(&mu);
    if (n_domains == 8) {
        pthread_mutex_unlock(&mu);
        return NULL;
    }
    snprintf(domains[n_domains], sizeof(domains[0]), "%s", name);
    id = ++n_domains;
    pthread_mutex_unlock(&mu);
    return (nvtxDomainHandle_t)id;
}

static int range_push(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    char payload[32] = "none", color[16] = "none";

    if (a->payloadType == NVTX_PAYLOAD_TYPE_UNSIGNED_INT64)
        snprintf(payload, sizeof(payload), "%llu", (unsigned long long)a->payload.ullValue);
    if (a->colorType == NVTX_COLOR_ARGB)
        snprintf(color, sizeof(color), "%08x", a->color);
    add("push %ld %s \"%s\" payload=%s color=%s\n", (long)syscall(SYS_gettid), domain_name(d),
        a->messageType == NVTX_MESSAGE_TYPE_ASCII ? a->message.ascii : "?", payload, color);
    return 0;
}

static int range_pop(nvtxDomainHandle_t d)
{
    add("pop %ld %s\n", (long)syscall(SYS_gettid), domain_name(d));
    return 0;
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

/* A copy of the record so far. */
__attribute__((visibility("default"))) size_t gr_nvtx_recorder_text(char *buf, size_t size)
{
    size_t n;

    pthread_mutex_lock(&mu);
    n = used < size - 1 ? used : size - 1;
    memcpy(buf, record, n);
    buf[n] = '\0';
    pthread_mutex_unlock(&mu);
    return n;
}
