/*
 * trace.c - NVTX ranges (trace.h), with NVTX3's header-only API from the CUDA toolkit.
 *
 * Every range goes to one NVTX domain, "graphrun", created on first use (pthread_once), so
 * a tool can show or hide graphrun's rows apart from the application's own. Range names
 * are formatted into a stack buffer; NVTX copies what it keeps.
 */
#include "runtime/base/trace.h"

#include <stdlib.h>

bool gr__trace_all_backends;

#if defined(__has_include)
#if __has_include(<nvtx3/nvToolsExt.h>)
#define GR_HAVE_NVTX 1
#endif
#endif

#ifdef GR_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <stdio.h>

static nvtxDomainHandle_t domain;
static pthread_once_t domain_once = PTHREAD_ONCE_INIT;

static void domain_create(void)
{
    domain = nvtxDomainCreateA("graphrun");
}

static void push(const char *message, uint32_t argb, uint64_t payload, bool has_payload)
{
    nvtxEventAttributes_t a = {0};

    pthread_once(&domain_once, domain_create);
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = message;
    if (argb != 0) {
        a.colorType = NVTX_COLOR_ARGB;
        a.color = argb;
    }
    if (has_payload) {
        a.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
        a.payload.ullValue = payload;
    }
    nvtxDomainRangePushEx(domain, &a);
}

bool gr__trace_wanted(void)
{
    const char *tool = getenv("NVTX_INJECTION64_PATH");

    return tool != NULL && *tool != '\0';
}

void gr__trace_push_unit(uint64_t job, uint64_t index, uint32_t tensors, uint64_t offset,
                         uint64_t elems, uint64_t tensor_elems)
{
    /* Neighbouring jobs get different colours, so a timeline reads job by job. */
    static const uint32_t palette[8] = {0xff4e79a7, 0xfff28e2b, 0xffe15759, 0xff76b7b2,
                                        0xff59a14f, 0xffedc948, 0xffb07aa1, 0xffff9da7};
    char name[96];

    if (tensors > 1)
        snprintf(name, sizeof(name), "job %llu index %llu-%llu", (unsigned long long)job,
                 (unsigned long long)index, (unsigned long long)(index + tensors - 1));
    else if (offset != 0 || elems != tensor_elems)
        snprintf(name, sizeof(name), "job %llu index %llu elems %llu+%llu",
                 (unsigned long long)job, (unsigned long long)index,
                 (unsigned long long)offset, (unsigned long long)elems);
    else
        snprintf(name, sizeof(name), "job %llu index %llu", (unsigned long long)job,
                 (unsigned long long)index);
    push(name, palette[job % 8], index, true);
}

void gr__trace_push(const char *what)
{
    push(what, 0, 0, false);
}

void gr__trace_pop(void)
{
    nvtxDomainRangePop(domain);
}

#else /* no NVTX headers: no ranges */

bool gr__trace_wanted(void)
{
    return false;
}

void gr__trace_push_unit(uint64_t job, uint64_t index, uint32_t tensors, uint64_t offset,
                         uint64_t elems, uint64_t tensor_elems)
{
    (void)job, (void)index, (void)tensors, (void)offset, (void)elems, (void)tensor_elems;
}

void gr__trace_push(const char *what)
{
    (void)what;
}

void gr__trace_pop(void)
{
}

#endif
