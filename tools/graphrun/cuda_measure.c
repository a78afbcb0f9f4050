/*
 * cuda_measure.c - copy ceilings and device-memory sampling (see cuda_measure.h).
 *
 * Ceilings: each direction is timed with CUDA events around `reps` back-to-back copies of
 * pinned memory on one stream; "both at once" issues the two directions on two streams that
 * start together and counts the bytes of both. The best of GR_CEILING_TRIALS trials is the
 * ceiling.
 */
#include "tools/graphrun/cuda_measure.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/base/sync.h"

#define CHECK(call)                                                                         \
    do {                                                                                    \
        cudaError_t e_ = (call);                                                            \
        if (e_ != cudaSuccess) {                                                            \
            st = gr__error_set(err, GR_ERR_CUDA, GR_NO_INDEX, NULL, "%s: %s", #call,         \
                               cudaGetErrorName(e_));                                        \
            goto out;                                                                       \
        }                                                                                   \
    } while (0)

/* `reps` copies one way on `s`, timed with events: milliseconds in *ms. */
static cudaError_t time_one_way(void *dst, const void *src, uint64_t bytes,
                                enum cudaMemcpyKind kind, int reps, cudaStream_t s,
                                cudaEvent_t start, cudaEvent_t stop, float *ms)
{
    cudaError_t e = cudaEventRecord(start, s);

    for (int r = 0; r < reps && e == cudaSuccess; r++)
        e = cudaMemcpyAsync(dst, src, bytes, kind, s);
    if (e == cudaSuccess)
        e = cudaEventRecord(stop, s);
    if (e == cudaSuccess)
        e = cudaEventSynchronize(stop);
    if (e == cudaSuccess)
        e = cudaEventElapsedTime(ms, start, stop);
    return e;
}

gr_status gr_measure_ceilings(int ordinal, uint64_t bytes, int reps, gr_ceilings *out,
                              gr_error_info *err)
{
    void *h1 = NULL, *h2 = NULL, *d1 = NULL, *d2 = NULL;
    cudaStream_t s1 = NULL, s2 = NULL;
    cudaEvent_t start = NULL, stop = NULL, stop2 = NULL;
    gr_status st = GR_OK;
    float ms;

    memset(out, 0, sizeof(*out));
    out->bytes = bytes;
    out->reps = reps;
    CHECK(cudaSetDevice(ordinal));
    CHECK(cudaHostAlloc(&h1, bytes, cudaHostAllocPortable));
    CHECK(cudaHostAlloc(&h2, bytes, cudaHostAllocPortable));
    memset(h1, 1, bytes);
    memset(h2, 2, bytes);
    CHECK(cudaMalloc(&d1, bytes));
    CHECK(cudaMalloc(&d2, bytes));
    CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&stop));
    CHECK(cudaEventCreate(&stop2));
    /* Warm up both directions. */
    CHECK(cudaMemcpyAsync(d1, h1, bytes, cudaMemcpyHostToDevice, s1));
    CHECK(cudaMemcpyAsync(h2, d2, bytes, cudaMemcpyDeviceToHost, s1));
    CHECK(cudaStreamSynchronize(s1));

    for (int trial = 0; trial < GR_CEILING_TRIALS; trial++) {
        double gbs;

        CHECK(time_one_way(d1, h1, bytes, cudaMemcpyHostToDevice, reps, s1, start, stop, &ms));
        gbs = (double)bytes * reps / (ms * 1e6);
        if (gbs > out->h2d_gbs)
            out->h2d_gbs = gbs;
        CHECK(time_one_way(h2, d2, bytes, cudaMemcpyDeviceToHost, reps, s1, start, stop, &ms));
        gbs = (double)bytes * reps / (ms * 1e6);
        if (gbs > out->d2h_gbs)
            out->d2h_gbs = gbs;

        CHECK(cudaEventRecord(start, s1));
        CHECK(cudaStreamWaitEvent(s2, start, 0));
        for (int r = 0; r < reps; r++) {
            CHECK(cudaMemcpyAsync(d1, h1, bytes, cudaMemcpyHostToDevice, s1));
            CHECK(cudaMemcpyAsync(h2, d2, bytes, cudaMemcpyDeviceToHost, s2));
        }
        CHECK(cudaEventRecord(stop2, s2));
        CHECK(cudaStreamWaitEvent(s1, stop2, 0));
        CHECK(cudaEventRecord(stop, s1));
        CHECK(cudaEventSynchronize(stop));
        CHECK(cudaEventElapsedTime(&ms, start, stop));
        gbs = 2.0 * (double)bytes * reps / (ms * 1e6);
        if (gbs > out->bidir_gbs)
            out->bidir_gbs = gbs;
    }
out:
    if (stop2)
        cudaEventDestroy(stop2);
    if (stop)
        cudaEventDestroy(stop);
    if (start)
        cudaEventDestroy(start);
    if (s2)
        cudaStreamDestroy(s2);
    if (s1)
        cudaStreamDestroy(s1);
    cudaFree(d2);
    cudaFree(d1);
    cudaFreeHost(h2);
    cudaFreeHost(h1);
    return st;
}

void gr_ceilings_max(gr_ceilings *into, const gr_ceilings *other)
{
    if (other->h2d_gbs > into->h2d_gbs)
        into->h2d_gbs = other->h2d_gbs;
    if (other->d2h_gbs > into->d2h_gbs)
        into->d2h_gbs = other->d2h_gbs;
    if (other->bidir_gbs > into->bidir_gbs)
        into->bidir_gbs = other->bidir_gbs;
}

struct gr_devmem_sampler {
    int ordinal;
    unsigned period_us;
    pthread_t thread;
    atomic_bool stop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool started;
    gr_status start_status;
    uint64_t baseline, peak, total; /* written by the sampler thread; read after join */
};

static void *sampler_main(void *arg)
{
    gr_devmem_sampler *s = arg;
    struct timespec ts = {0, (long)s->period_us * 1000};
    size_t free_b, total_b;
    gr_status st = GR_OK;

    if (cudaSetDevice(s->ordinal) != cudaSuccess ||
        cudaMemGetInfo(&free_b, &total_b) != cudaSuccess)
        st = GR_ERR_CUDA;
    else
        s->baseline = s->peak = total_b - free_b, s->total = total_b;
    pthread_mutex_lock(&s->mu);
    s->started = true;
    s->start_status = st;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    while (st == GR_OK && !atomic_load(&s->stop)) {
        nanosleep(&ts, NULL);
        if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess && total_b - free_b > s->peak)
            s->peak = total_b - free_b;
    }
    return NULL;
}

gr_status gr_devmem_start(int ordinal, unsigned period_us, gr_devmem_sampler **out,
                          gr_error_info *err)
{
    gr_devmem_sampler *s = calloc(1, sizeof(*s));

    *out = NULL;
    if (s == NULL)
        return gr__error_set(err, GR_ERR_OUT_OF_MEMORY, GR_NO_INDEX, NULL, "no memory");
    s->ordinal = ordinal;
    s->period_us = period_us;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (pthread_create(&s->thread, NULL, sampler_main, s) != 0) {
        free(s);
        return gr__error_set(err, GR_ERR_OUT_OF_MEMORY, GR_NO_INDEX, NULL, "no thread");
    }
    pthread_mutex_lock(&s->mu);
    while (!s->started)
        pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
    if (s->start_status != GR_OK) {
        pthread_join(s->thread, NULL);
        free(s);
        return gr__error_set(err, GR_ERR_CUDA, GR_NO_INDEX, NULL,
                             "cannot read device %d's memory", ordinal);
    }
    *out = s;
    return GR_OK;
}

void gr_devmem_stop(gr_devmem_sampler *s, uint64_t *baseline, uint64_t *peak, uint64_t *total)
{
    atomic_store(&s->stop, true);
    pthread_join(s->thread, NULL);
    *baseline = s->baseline;
    *peak = s->peak;
    *total = s->total;
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

void gr_device_describe(int ordinal, char *name, int name_size, int *sm_count)
{
    struct cudaDeviceProp p;

    if (cudaGetDeviceProperties(&p, ordinal) == cudaSuccess) {
        snprintf(name, (size_t)name_size, "%s", p.name);
        *sm_count = p.multiProcessorCount;
    } else {
        cudaGetLastError();
        snprintf(name, (size_t)name_size, "unknown");
        *sm_count = 0;
    }
}

gr_status gr_cuda_describe(int ordinal, gr_cuda_device_desc *out, gr_error_info *err)
{
    struct cudaDeviceProp p;
    size_t free_b = 0, total_b = 0;
    cudaError_t e;

    memset(out, 0, sizeof(*out));
    e = cudaGetDeviceProperties(&p, ordinal);
    if (e == cudaSuccess)
        e = cudaSetDevice(ordinal);
    if (e == cudaSuccess)
        e = cudaMemGetInfo(&free_b, &total_b);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return gr__error_set(err, GR_ERR_CUDA, GR_NO_INDEX, NULL, "device %d: %s", ordinal,
                             cudaGetErrorName(e));
    }
    snprintf(out->name, sizeof(out->name), "%.127s", p.name);
    cudaDeviceGetPCIBusId(out->pci_bus_id, sizeof(out->pci_bus_id), ordinal);
    out->cc_major = p.major;
    out->cc_minor = p.minor;
    out->sm_count = p.multiProcessorCount;
    out->memory_total = total_b;
    out->memory_free = free_b;
    return GR_OK;
}

void gr_cuda_versions(int *driver, int *runtime)
{
    *driver = *runtime = 0;
    if (cudaDriverGetVersion(driver) != cudaSuccess)
        cudaGetLastError();
    if (cudaRuntimeGetVersion(runtime) != cudaSuccess)
        cudaGetLastError();
}

gr_status gr_cuda_host_alloc(uint64_t bytes, void **out)
{
    if (cudaHostAlloc(out, bytes, cudaHostAllocPortable) != cudaSuccess) {
        cudaGetLastError();
        *out = NULL;
        return GR_ERR_OUT_OF_MEMORY;
    }
    return GR_OK;
}

void gr_cuda_host_free(void *p)
{
    if (p != NULL && cudaFreeHost(p) != cudaSuccess)
        cudaGetLastError();
}
