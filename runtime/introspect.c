/*
 * introspect.c - what a caller can ask a running runtime: how it was set up, its devices,
 * and snapshots of its statistics (stats.h has the counters and why a snapshot taken while
 * work goes on is right without locks).
 */
#include <stddef.h>
#include <string.h>

#include "runtime/runtime.h"
#include "runtime/base/sync.h"

/* The end of the first version of gr_runtime_info (0.3's, the first with a struct_size):
 * callers must know at least that much. */
#define RUNTIME_INFO_V1_SIZE                                                                \
    (offsetof(gr_runtime_info, backend_note) + sizeof(((gr_runtime_info *)0)->backend_note))

gr_status gr_runtime_info_get(const gr_runtime *handle, gr_runtime_info *out)
{
    gr_runtime_info info;
    gr_status st;
    gr_runtime *rt;

    if (!gr__sized_out_ok(out, GR_RUNTIME_INFO_MAGIC, RUNTIME_INFO_V1_SIZE))
        return GR_ERR_INVALID_ARGUMENT;
    if ((rt = gr__runtime_get(handle, &st)) == NULL)
        return st;
    memset(&info, 0, sizeof(info));
    info.backend = rt->backend->kind;
    info.device_count = rt->n_devices;
    info.workers_per_device = rt->cfg.workers_per_device;
    info.budget_bytes = gr__arena_size(rt->devices[0].arena);
    gr__strlcpy(info.backend_note, rt->backend_note, sizeof(info.backend_note));
    gr__sized_out_fill(out, &info, sizeof(info));
    return GR_OK;
}

gr_status gr_runtime_device_ordinal(const gr_runtime *handle, uint32_t device, int *ordinal)
{
    const gr_device *dev;
    gr_status st;

    if (ordinal == NULL)
        return GR_ERR_INVALID_ARGUMENT;
    if ((dev = gr__runtime_device(handle, device, &st)) == NULL)
        return st;
    *ordinal = dev->ordinal;
    return GR_OK;
}

gr_status gr_runtime_device_stats(const gr_runtime *handle, uint32_t device,
                                  gr_device_stats *out)
{
    const gr_device *dev;
    gr_status st;

    if (out == NULL)
        return GR_ERR_INVALID_ARGUMENT;
    if ((dev = gr__runtime_device(handle, device, &st)) == NULL)
        return st;
    out->budget_bytes = gr__budget_capacity(dev->budget);
    out->budget_in_use = gr__budget_in_use(dev->budget);
    out->budget_peak = gr__budget_peak(dev->budget);
    out->iterations_done = atomic_load_explicit(&dev->iterations_done, memory_order_relaxed);
    out->iterations_failed = atomic_load_explicit(&dev->iterations_failed, memory_order_relaxed);
    out->graph_instantiations =
        atomic_load_explicit(&dev->graph_instantiations, memory_order_relaxed);
    out->graph_updates = atomic_load_explicit(&dev->graph_updates, memory_order_relaxed);
    return GR_OK;
}

/* ------------------------------------------------------------------------------------- */
/* Statistics snapshots.                                                                  */

static uint64_t load(const _Atomic uint64_t *c)
{
    return atomic_load_explicit(c, memory_order_relaxed);
}

/* The count is the sum of the buckets as read, so the two always agree (Prometheus wants
 * the +Inf bucket equal to the count); sum_ns is read apart and may be a moment off. */
static void add_hist(gr_histogram *h, const gr_hist_cells *c)
{
    h->sum_ns += load(&c->sum_ns);
    for (uint32_t b = 0; b < GR_HISTOGRAM_BUCKETS; b++) {
        uint64_t n = load(&c->buckets[b]);

        h->buckets[b] += n;
        h->count += n;
    }
}

/* The end of the first version of gr_stats: callers must know at least that much. */
#define STATS_V1_SIZE (offsetof(gr_stats, iteration) + sizeof(gr_histogram))

gr_status gr_runtime_stats_get(const gr_runtime *handle, uint32_t device, gr_stats *out)
{
    const gr_stats_state *st;
    const gr_device *dev;
    gr_status status;
    gr_runtime *rt;
    gr_stats s;

    if (!gr__sized_out_ok(out, GR_STATS_MAGIC, STATS_V1_SIZE))
        return GR_ERR_INVALID_ARGUMENT;
    if ((rt = gr__runtime_get(handle, &status)) == NULL)
        return status;
    if (device >= rt->n_devices)
        return GR_ERR_INVALID_ARGUMENT;
    st = rt->stats;
    dev = &rt->devices[device];
    memset(&s, 0, sizeof(s));

    s.device_count = rt->n_devices;
    s.devices_lost = atomic_load_explicit(&rt->devices_lost, memory_order_relaxed);
    s.jobs_submitted = load(&st->jobs_submitted);
    s.jobs_completed = load(&st->jobs_completed);
    s.jobs_failed = load(&st->jobs_failed);
    s.nodevice_failed = load(&st->shared.tensors_failed);
    s.nodevice_canceled = load(&st->shared.tensors_canceled);
    s.staging_pageable = load(&rt->pinned_fallbacks);
    {
        gr_host_cache_stats hc;

        gr__host_cache_stats_get(rt->host_cache, &hc);
        s.host_cache_bytes = hc.registered_bytes;
        s.host_cache_registrations = hc.registrations;
        s.host_cache_evictions = hc.evictions;
        s.host_cache_failures = hc.failures;
        s.host_cache_hits = hc.hits;
        s.host_cache_register_ns = hc.register_ns;
    }

    s.device = device;
    s.lost = atomic_load_explicit(&dev->lost, memory_order_relaxed) ? 1 : 0;
    s.workers = rt->cfg.workers_per_device;
    s.workers_retired = atomic_load_explicit(&dev->workers_retired, memory_order_relaxed);
    for (uint32_t i = 0; i < rt->n_workers; i++) {
        const gr_counters *c = &st->workers[i];

        if (rt->workers[i].dev != dev)
            continue;
        s.tensors_done += load(&c->tensors_done);
        s.tensors_failed += load(&c->tensors_failed);
        s.tensors_canceled += load(&c->tensors_canceled);
        s.bytes_h2d += load(&c->bytes_h2d);
        s.bytes_d2h += load(&c->bytes_d2h);
        s.units_direct += load(&c->units_direct);
        s.units_staged += load(&c->units_staged);
        s.units_scattered += load(&c->units_scattered);
        s.units_streamed += load(&c->units_streamed);
        s.units_overlapped += load(&c->units_overlapped);
        s.copies_refused += load(&c->copies_refused);
        s.constants_copied += load(&c->constants_copied);
        s.constant_bytes += load(&c->constant_bytes);
        add_hist(&s.budget_wait, &c->budget_wait);
        add_hist(&s.iteration, &c->iteration);
    }
    s.iterations_done = load(&dev->iterations_done);
    s.iterations_failed = load(&dev->iterations_failed);
    s.graph_instantiations = load(&dev->graph_instantiations);
    s.graph_updates = load(&dev->graph_updates);
    s.budget_bytes = gr__budget_capacity(dev->budget);
    s.budget_in_use = gr__budget_in_use(dev->budget);
    s.budget_peak = gr__budget_peak(dev->budget);

    gr__sized_out_fill(out, &s, sizeof(s));
    return GR_OK;
}
