/*
 * config.c - checking a runtime's configuration (graphrun.h: gr_config) before anything is
 * started, and the defaults that depend on the machine.
 *
 * Every check here needs the config alone. What needs the backend (whether each listed
 * device is present, whether the budget holds one allocation granule) is checked when the
 * backend is chosen (runtime.c).
 */
#include "runtime/config.h"

#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include "runtime/base/sync.h"

#define MAX_WORKERS_PER_DEVICE 1024
#define MAX_LISTED_DEVICES 1024

/* The device list's shape; whether each device is present is known only once the backend
 * is chosen (select_devices). */
static gr_status check_device_list(const gr_config *cfg, gr_error_info *err)
{
    if ((cfg->devices == NULL) != (cfg->device_count == 0))
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "devices and device_count go together: devices is %s but "
                             "device_count is %u",
                             cfg->devices ? "set" : "NULL", cfg->device_count);
    if (cfg->device_count > MAX_LISTED_DEVICES)
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "devices: at most %d entries (got %u)", MAX_LISTED_DEVICES,
                             cfg->device_count);
    for (uint32_t i = 0; i < cfg->device_count; i++) {
        if (cfg->devices[i] < 0)
            return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                                 "devices[%u] is %d: device numbers start at 0", i,
                                 cfg->devices[i]);
        for (uint32_t j = 0; j < i; j++)
            if (cfg->devices[j] == cfg->devices[i])
                return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                                     "devices: device %d is listed twice (entries %u and %u)",
                                     cfg->devices[i], j, i);
    }
    return GR_OK;
}

gr_status gr__config_check(const gr_config *caller, gr_config *full, gr_error_info *err)
{
    static const gr_config defaults = GR_CONFIG_INIT;
    const gr_config *cfg = full;

    /* A version's size is sizeof of that version (0.1's ends at device_count, padded;
     * 0.2's at pipeline_bytes). */
    if (caller->magic != GR_CONFIG_MAGIC ||
        (caller->struct_size != offsetof(gr_config, pipeline_bytes) &&
         caller->struct_size != offsetof(gr_config, host_cache_bytes) &&
         caller->struct_size < sizeof(gr_config)))
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "config not initialized with GR_CONFIG_INIT");
    *full = defaults;
    memcpy(full, caller,
           caller->struct_size < sizeof(*full) ? caller->struct_size : sizeof(*full));
    full->struct_size = sizeof(*full);
    if (cfg->backend != GR_BACKEND_AUTO && cfg->backend != GR_BACKEND_HOST &&
        cfg->backend != GR_BACKEND_CUDA)
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "unknown backend %d", (int)cfg->backend);
    if (cfg->budget_bytes < GR_BUFFER_ALIGN)
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "budget_bytes must be set, at least %u bytes (got %llu)",
                             GR_BUFFER_ALIGN, (unsigned long long)cfg->budget_bytes);
    if (cfg->workers_per_device == 0 || cfg->workers_per_device > MAX_WORKERS_PER_DEVICE)
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "workers_per_device must be 1..%d (got %u)", MAX_WORKERS_PER_DEVICE,
                             cfg->workers_per_device);
    if (cfg->copy_threads > 256)
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "copy_threads must be 0..256 (got %u)", cfg->copy_threads);
    /* A tiny chunk size would cut a large tensor into millions of units. */
    if (cfg->pipeline_bytes != 0 && cfg->pipeline_bytes < (1u << 20))
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "pipeline_bytes must be 0 (off) or at least 1 MiB (got %llu)",
                             (unsigned long long)cfg->pipeline_bytes);
    if (cfg->staging_bytes < 4096)
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "staging_bytes must be at least 4096 (got %llu)",
                             (unsigned long long)cfg->staging_bytes);
    if (cfg->context_mode != GR_CONTEXT_PRIMARY && cfg->context_mode != GR_CONTEXT_PRIVATE)
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "unknown context_mode %d", (int)cfg->context_mode);
    if (cfg->ring_capacity < 2 || (cfg->ring_capacity & (cfg->ring_capacity - 1)) != 0 ||
        cfg->ring_capacity > (1u << 30))
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "ring_capacity must be a power of two in 2..2^30 (got %u)",
                             cfg->ring_capacity);
    if ((unsigned)cfg->log_level > GR_LOG_OFF)
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "unknown log_level %d", (int)cfg->log_level);
    return check_device_list(cfg, err);
}

/* Helper threads of the copy pool: as configured, else one per CPU but the caller's, at
 * most 16 (copies are bound by memory bandwidth long before that). */
unsigned gr__config_copy_threads(const gr_config *cfg)
{
    long cpus;

    if (cfg->copy_threads != 0)
        return cfg->copy_threads;
    cpus = sysconf(_SC_NPROCESSORS_ONLN);
    return cpus > 17 ? 16 : cpus > 1 ? (unsigned)cpus - 1 : 0;
}
