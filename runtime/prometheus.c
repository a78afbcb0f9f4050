/*
 * prometheus.c - gr_runtime_stats_prometheus: the statistics in the Prometheus text
 * exposition format, version 0.0.4.
 *
 * It uses nothing but the public snapshot calls (gr_runtime_info_get, gr_runtime_stats_get),
 * so the text says exactly what the struct says. The snapshot of every device is taken
 * first, then each metric family is written as one group (HELP, TYPE, then its samples for
 * every device), as the format requires.
 *
 * Output is snprintf-style: each piece is formatted with vsnprintf into what is left of
 * the buffer, and the length counts on past the end, so one pass both fills a large enough
 * buffer and tells a short one how much it needs. Numbers are printed as integers (seconds
 * as integer.fraction from nanoseconds and microseconds), never through floating point,
 * so bucket bounds and sums print exactly.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <graphrun.h>

typedef struct text {
    char *buf;
    size_t size, len;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(text *t, const char *fmt, ...)
{
    size_t room = t->len < t->size ? t->size - t->len : 0;
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(room ? t->buf + t->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0)
        t->len += (size_t)n;
}

static void family(text *t, const char *name, const char *type, const char *help)
{
    put(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One sample per device of a uint64 field of gr_stats, with an optional extra label. */
static void per_device(text *t, const gr_stats *s, uint32_t n, const char *name,
                       const char *label, size_t offset)
{
    for (uint32_t d = 0; d < n; d++) {
        uint64_t v;

        memcpy(&v, (const char *)&s[d] + offset, sizeof(v));
        put(t, "%s{device=\"%u\"%s%s} %llu\n", name, d, label ? "," : "", label ? label : "",
            (unsigned long long)v);
    }
}

#define FIELD(f) offsetof(gr_stats, f)

static void histogram(text *t, const gr_stats *s, uint32_t n, const char *name,
                      const char *help, size_t offset)
{
    family(t, name, "histogram", help);
    for (uint32_t d = 0; d < n; d++) {
        const gr_histogram *h = (const gr_histogram *)((const char *)&s[d] + offset);
        uint64_t cumulative = 0;

        for (uint32_t b = 0; b + 1 < GR_HISTOGRAM_BUCKETS; b++) {
            uint64_t bound_us = 1ull << b; /* bucket b holds durations under 2^b us */

            cumulative += h->buckets[b];
            put(t, "%s_bucket{device=\"%u\",le=\"%llu.%06llu\"} %llu\n", name, d,
                (unsigned long long)(bound_us / 1000000), (unsigned long long)(bound_us % 1000000),
                (unsigned long long)cumulative);
        }
        cumulative += h->buckets[GR_HISTOGRAM_BUCKETS - 1];
        put(t, "%s_bucket{device=\"%u\",le=\"+Inf\"} %llu\n", name, d,
            (unsigned long long)cumulative);
        put(t, "%s_sum{device=\"%u\"} %llu.%09llu\n", name, d,
            (unsigned long long)(h->sum_ns / 1000000000),
            (unsigned long long)(h->sum_ns % 1000000000));
        put(t, "%s_count{device=\"%u\"} %llu\n", name, d, (unsigned long long)h->count);
    }
}

size_t gr_runtime_stats_prometheus(const gr_runtime *rt, char *buf, size_t size)
{
    static const gr_stats init = GR_STATS_INIT;
    text t = {buf, size, 0};
    gr_runtime_info info = GR_RUNTIME_INFO_INIT;
    gr_stats *s;
    uint32_t n;

    if (rt == NULL || gr_runtime_info_get(rt, &info) != GR_OK)
        return 0;
    n = info.device_count;
    s = malloc(n * sizeof(*s));
    if (s == NULL)
        return 0;
    for (uint32_t d = 0; d < n; d++) {
        s[d] = init;
        if (gr_runtime_stats_get(rt, d, &s[d]) != GR_OK) {
            free(s);
            return 0;
        }
    }
    if (size > 0)
        buf[0] = '\0';

    family(&t, "graphrun_info", "gauge", "The runtime's backend and graphrun's version.");
    put(&t, "graphrun_info{backend=\"%s\",version=\"%s\"} 1\n", gr_backend_name(info.backend),
        gr_version());
    family(&t, "graphrun_devices", "gauge", "Devices in use.");
    put(&t, "graphrun_devices %u\n", n);
    family(&t, "graphrun_devices_lost", "gauge", "Devices lost to a sticky device error.");
    put(&t, "graphrun_devices_lost %u\n", s[0].devices_lost);

    family(&t, "graphrun_staging_pageable_total", "counter",
           "Staging buffers that had to be ordinary memory: pinned memory could not be had.");
    put(&t, "graphrun_staging_pageable_total %llu\n", (unsigned long long)s[0].staging_pageable);

    family(&t, "graphrun_jobs_submitted_total", "counter", "Jobs accepted by gr_job_submit.");
    put(&t, "graphrun_jobs_submitted_total %llu\n", (unsigned long long)s[0].jobs_submitted);
    family(&t, "graphrun_jobs_completed_total", "counter",
           "Jobs complete: every index ended and the callback returned.");
    put(&t, "graphrun_jobs_completed_total %llu\n", (unsigned long long)s[0].jobs_completed);
    family(&t, "graphrun_jobs_failed_total", "counter",
           "Completed jobs whose result was not ok (canceled included).");
    put(&t, "graphrun_jobs_failed_total %llu\n", (unsigned long long)s[0].jobs_failed);

    family(&t, "graphrun_tensors_total", "counter",
           "Tensor indices ended, by outcome; device=\"none\": stopped off the devices.");
    per_device(&t, s, n, "graphrun_tensors_total", "outcome=\"done\"", FIELD(tensors_done));
    per_device(&t, s, n, "graphrun_tensors_total", "outcome=\"failed\"", FIELD(tensors_failed));
    per_device(&t, s, n, "graphrun_tensors_total", "outcome=\"canceled\"",
               FIELD(tensors_canceled));
    put(&t, "graphrun_tensors_total{device=\"none\",outcome=\"failed\"} %llu\n",
        (unsigned long long)s[0].nodevice_failed);
    put(&t, "graphrun_tensors_total{device=\"none\",outcome=\"canceled\"} %llu\n",
        (unsigned long long)s[0].nodevice_canceled);

    family(&t, "graphrun_iterations_total", "counter",
           "Iterations (units: a tensor, a chunk of one, or a batch) run, by outcome.");
    per_device(&t, s, n, "graphrun_iterations_total", "outcome=\"done\"",
               FIELD(iterations_done));
    per_device(&t, s, n, "graphrun_iterations_total", "outcome=\"failed\"",
               FIELD(iterations_failed));
    family(&t, "graphrun_graph_instantiations_total", "counter",
           "CUDA graphs lowered and instantiated.");
    per_device(&t, s, n, "graphrun_graph_instantiations_total", NULL,
               FIELD(graph_instantiations));
    family(&t, "graphrun_graph_updates_total", "counter",
           "Iterations replayed by updating an instantiated CUDA graph.");
    per_device(&t, s, n, "graphrun_graph_updates_total", NULL, FIELD(graph_updates));
    family(&t, "graphrun_transfer_bytes_total", "counter",
           "Bytes copied between host and device by iterations that succeeded.");
    per_device(&t, s, n, "graphrun_transfer_bytes_total", "direction=\"h2d\"", FIELD(bytes_h2d));
    per_device(&t, s, n, "graphrun_transfer_bytes_total", "direction=\"d2h\"", FIELD(bytes_d2h));
    family(&t, "graphrun_units_total", "counter",
           "Iterations that succeeded, by how their host memory was copied: straight from one "
           "range (direct), through a staging buffer (staged), tensor by tensor in batched "
           "copies (scattered), or a whole tensor in pieces through a staging buffer "
           "(streamed).");
    per_device(&t, s, n, "graphrun_units_total", "path=\"direct\"", FIELD(units_direct));
    per_device(&t, s, n, "graphrun_units_total", "path=\"staged\"", FIELD(units_staged));
    per_device(&t, s, n, "graphrun_units_total", "path=\"scattered\"", FIELD(units_scattered));
    per_device(&t, s, n, "graphrun_units_total", "path=\"streamed\"", FIELD(units_streamed));
    family(&t, "graphrun_units_overlapped_total", "counter",
           "Iterations launched while the same worker's previous one still ran on the device.");
    per_device(&t, s, n, "graphrun_units_overlapped_total", NULL, FIELD(units_overlapped));
    family(&t, "graphrun_copies_refused_total", "counter",
           "Units whose copies the driver refused as laid out, run again through a staging "
           "buffer.");
    per_device(&t, s, n, "graphrun_copies_refused_total", NULL, FIELD(copies_refused));
    family(&t, "graphrun_constants_copied_total", "counter",
           "Jobs' constants copied to the device (once a job, again after an eviction).");
    per_device(&t, s, n, "graphrun_constants_copied_total", NULL, FIELD(constants_copied));
    family(&t, "graphrun_constant_bytes_total", "counter",
           "Bytes of jobs' constants copied to the device.");
    per_device(&t, s, n, "graphrun_constant_bytes_total", NULL, FIELD(constant_bytes));

    family(&t, "graphrun_host_cache_bytes", "gauge",
           "Pageable host memory the registration cache holds page-locked now.");
    put(&t, "graphrun_host_cache_bytes %llu\n", (unsigned long long)s[0].host_cache_bytes);
    family(&t, "graphrun_host_cache_events_total", "counter",
           "Registration cache: ranges registered, evicted, refused by the system, and job "
           "ranges found registered.");
    put(&t, "graphrun_host_cache_events_total{event=\"registered\"} %llu\n",
        (unsigned long long)s[0].host_cache_registrations);
    put(&t, "graphrun_host_cache_events_total{event=\"evicted\"} %llu\n",
        (unsigned long long)s[0].host_cache_evictions);
    put(&t, "graphrun_host_cache_events_total{event=\"failed\"} %llu\n",
        (unsigned long long)s[0].host_cache_failures);
    put(&t, "graphrun_host_cache_events_total{event=\"hit\"} %llu\n",
        (unsigned long long)s[0].host_cache_hits);
    family(&t, "graphrun_host_cache_register_seconds_total", "counter",
           "Time the registration cache spent registering host memory.");
    put(&t, "graphrun_host_cache_register_seconds_total %.9f\n",
        (double)s[0].host_cache_register_ns / 1e9);

    family(&t, "graphrun_budget_bytes", "gauge", "Device memory budget.");
    per_device(&t, s, n, "graphrun_budget_bytes", NULL, FIELD(budget_bytes));
    family(&t, "graphrun_budget_in_use_bytes", "gauge", "Device memory budget granted now.");
    per_device(&t, s, n, "graphrun_budget_in_use_bytes", NULL, FIELD(budget_in_use));
    family(&t, "graphrun_budget_peak_bytes", "gauge",
           "High-water mark of the budget in use since the runtime started.");
    per_device(&t, s, n, "graphrun_budget_peak_bytes", NULL, FIELD(budget_peak));

    family(&t, "graphrun_device_lost", "gauge", "1 once the device is lost.");
    for (uint32_t d = 0; d < n; d++)
        put(&t, "graphrun_device_lost{device=\"%u\"} %u\n", d, s[d].lost);
    family(&t, "graphrun_workers", "gauge", "Worker threads per device.");
    for (uint32_t d = 0; d < n; d++)
        put(&t, "graphrun_workers{device=\"%u\"} %u\n", d, s[d].workers);
    family(&t, "graphrun_workers_retired", "gauge",
           "Workers retired by a fault in their private context.");
    for (uint32_t d = 0; d < n; d++)
        put(&t, "graphrun_workers_retired{device=\"%u\"} %u\n", d, s[d].workers_retired);

    histogram(&t, s, n, "graphrun_budget_wait_seconds",
              "Time each budget request waited until granted or refused.", FIELD(budget_wait));
    histogram(&t, s, n, "graphrun_iteration_seconds",
              "Time from budget granted to outputs written, per iteration run.",
              FIELD(iteration));
    free(s);
    return t.len;
}
