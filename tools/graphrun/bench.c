/*
 * bench.c - `graphrun bench`: the seed workload on the GPU against the copy ceilings
 * measured in the same run.
 *
 * 1. Measure the pinned H2D, D2H and simultaneous bidirectional copy ceilings of the device
 *    with copies of one tensor's size (at most 400 MB).
 * 2. Run the seed workload (in place), timed from submission to completion; with --sweep,
 *    once per budget (1, 2, 3, 4, 8 tensors' worth) and worker count (1, 2, 3, 4, 8),
 *    refilling the inputs before each run.
 * 3. Measure the ceilings again and keep the higher reading of each: the link's speed
 *    drifts by a few percent between measurements, and the floor must not flatter us.
 * 4. Report per run: the time per tensor, tensors per second, the floor (bytes in and out
 *    over the bidirectional ceiling) and floor / achieved (1.0 = the speed of the link), the
 *    peak device memory in use as the device reports it (sampled every 200 us) against the
 *    budget, the host memory the runtime added (resident set sampled during the run, less
 *    the tensors), and the graph statistics; every output checked bit for bit.
 * With --devices listing several GPUs (scaling): the ceilings of each device alone and of
 * all of them copying at once (one thread per device, started together: what the host's
 * links and memory give when every device copies), then the workload on the first listed
 * device alone and on all of them, in the same run; the report adds the throughput on N
 * devices over 1, the tensors each device did, and each run's floor from the ceiling of the
 * devices it used (for all of them, the at-once ceiling).
 * Exit status 0 only when every output of every run is right. With --io DIR, the disk and
 * `graphrun run` instead (iobench.c).
 */
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <graphrun.h>
#include <graphrun_workloads.h>
#include "tools/graphrun/cli.h"
#include "tools/graphrun/commands.h"
#include "tools/graphrun/cuda_measure.h"
#include "tools/graphrun/opts.h"
#include "tools/graphrun/tensor_set.h"

#define DEFAULT_COUNT 64
#define DEFAULT_BUDGET (2ull << 30)
#define DEFAULT_REPS 12
#define MAX_CEILING_COPY 400000000ull
#define MAX_PASSES 16

static void usage(FILE *f)
{
    fprintf(f,
            "usage: graphrun bench [options]\n"
            "\n"
            "Measure the GPU's pinned copy ceilings, then run the seed workload and report\n"
            "the time per tensor against the floor those ceilings give, the peak device\n"
            "memory against the budget, and the host memory the runtime adds. Every output\n"
            "is verified.\n"
            "\n" GR_SEED_OPTIONS_HELP
            "  --layout L       separate (each tensor its own gr_host_alloc, default: up\n"
            "                   to 2 MiB carved from pooled slabs, one driver allocation\n"
            "                   each with GR_HOST_POOL=0 in the environment),\n"
            "                   contiguous (all tensors back to back in one allocation) or\n"
            "                   pooled (one allocation, a page between tensors: apart, as\n"
            "                   a pooled allocator's tensors are)\n"
            "  --sweep          run every budget of 1, 2, 3, 4, 8 tensors with 1, 2, 3, 4, 8\n"
            "                   workers (the table of docs/PERFORMANCE.md)\n"
            "  --reps N         copies per direction per trial when measuring ceilings\n"
            "                   (default %d)\n"
            "  --passes N       run the job N times (at most %d) over the same tensors, one\n"
            "                   runtime, inputs refilled between passes (untimed); one report\n"
            "                   per pass (default 1)\n"
            "  --pipeline SIZE  gr_config.pipeline_bytes: tensors of more host bytes than this\n"
            "                   are cut into chunks of about this size (default 128MiB;\n"
            "                   0: only what does not fit)\n"
            "  --staging SIZE   gr_config.staging_bytes: each worker's pinned staging buffer,\n"
            "                   which also bounds a batch of small tensors (a unit holds at\n"
            "                   most half of it each way; default 64MiB, at least 4KiB)\n"
            "  --host-cache SIZE  the registration cache (gr_config.host_cache_bytes) for\n"
            "                   pageable tensors used again, e.g. 8GiB (default 0: off)\n"
            "  --json           print JSON (one object per run) instead of text\n"
            "  --help           this text\n"
            "\n"
            "With --io DIR: `graphrun run` against the disk under DIR instead, both measured\n"
            "in the same run, every output checked (graphrun bench --io DIR --help).\n"
            "\n"
            "Devices: device 0 unless --devices (or GR_DEVICES) lists others; with two or more\n"
            "(e.g. --devices 0,1), the workload runs on the first alone, then on all of them,\n"
            "and the report gives the speedup (not with --sweep).\n"
            "Defaults: %d tensors of 100000000 elements, pinned, budget 2 GiB.\n"
            "Exit status: 0 all outputs verified, 1 wrong outputs or failed tensors,\n"
            "2 bad command line, 3 no usable GPU or the runtime could not start.\n",
            DEFAULT_REPS, MAX_PASSES, DEFAULT_COUNT);
}

typedef struct run_result {
    uint64_t budget_asked, budget;
    uint64_t pipeline_bytes; /* gr_config.pipeline_bytes the run used */
    uint64_t staging_bytes;  /* gr_config.staging_bytes the run used */
    uint32_t workers;
    uint32_t n_devices;                      /* devices the run used */
    int ordinals[GR_OPTS_MAX_DEVICES];
    uint64_t iterations[GR_OPTS_MAX_DEVICES]; /* done on each */
    uint64_t mem_above[GR_OPTS_MAX_DEVICES];  /* peak device memory above its baseline */
    double bidir_gbs;                         /* the ceiling of the devices it used */
    double seconds, start_ms;
    uint64_t mem_baseline, mem_peak, mem_total;
    uint64_t rss_before, rss_peak; /* bytes */
    gr_device_stats stats;
    /* Per pass (--passes): its time, its wrong outputs, the statistics after it. */
    uint32_t passes;
    double pass_s[MAX_PASSES];
    uint64_t pass_wrong[MAX_PASSES];
    gr_stats pass_stats[MAX_PASSES];
    gr_job_progress prog;
    gr_status result;
    gr_error_info error;
    uint64_t wrong;
} run_result;

/* The resident set now, kept in r->rss_peak when above it. */
static void sample_rss(run_result *r)
{
    uint64_t rss = gr_cli_rss_bytes();

    if (rss > r->rss_peak)
        r->rss_peak = rss;
}

/* One run on cfg.devices: runtime up, the job, runtime down, outputs checked. GR_OK when
 * it ran (the job's own result is in r); else why it could not start. */
static gr_status run_once(const gr_seed_opts *o, gr_config cfg, gr_graph *g, gr_tensor_set *set,
                          run_result *r)
{
    gr_devmem_sampler *samplers[GR_OPTS_MAX_DEVICES] = {NULL};
    gr_runtime *rt = NULL;
    gr_job *job = NULL;
    gr_runtime_info info = GR_RUNTIME_INFO_INIT;
    gr_status st;
    int64_t t0;

    r->budget_asked = cfg.budget_bytes;
    r->pipeline_bytes = cfg.pipeline_bytes;
    r->staging_bytes = cfg.staging_bytes;
    r->workers = cfg.workers_per_device;
    r->n_devices = cfg.device_count;
    memcpy(r->ordinals, cfg.devices, cfg.device_count * sizeof(int));
    gr_tensor_set_fill(set);
    r->rss_before = r->rss_peak = gr_cli_rss_bytes();
    /* The baseline is taken with this process's primary context already up (the ceilings
     * made it): what rises above it is the runtime's. */
    for (uint32_t d = 0; d < r->n_devices; d++)
        if ((st = gr_devmem_start(r->ordinals[d], 200, &samplers[d], &r->error)) != GR_OK)
            goto out;
    t0 = gr_now_ns();
    st = gr_runtime_create(&cfg, &rt, &r->error);
    r->start_ms = (double)(gr_now_ns() - t0) / 1e6;
    if (st != GR_OK)
        goto out;
    gr_runtime_info_get(rt, &info);
    r->budget = info.budget_bytes;
    for (uint32_t k = 0; k < r->passes; k++) {
        if (k > 0) { /* untimed: the next pass starts from fresh inputs, checked after */
            gr_job_destroy(job);
            job = NULL;
            gr_tensor_set_fill(set);
        }
        t0 = gr_now_ns();
        if ((st = gr_job_submit(rt, g, set->tensors, set->count, NULL, &job, &r->error)) !=
            GR_OK)
            goto out;
        while (gr_job_wait(job, 5000000, &r->result) == GR_ERR_TIMEOUT)
            sample_rss(r);
        r->pass_s[k] = (double)(gr_now_ns() - t0) / 1e9;
        r->pass_stats[k] = (gr_stats)GR_STATS_INIT;
        gr_runtime_stats_get(rt, 0, &r->pass_stats[k]);
        if (r->result != GR_OK)
            break;
        if (o->verify)
            r->pass_wrong[k] = gr_tensor_set_check(set, NULL);
    }
    r->seconds = r->pass_s[0];
    sample_rss(r);
    r->prog = (gr_job_progress)GR_JOB_PROGRESS_INIT;
    gr_job_progress_get(job, &r->prog);
    gr_job_error_get(job, &r->error);
    /* Graph statistics summed over the devices; iterations per device. */
    for (uint32_t d = 0; d < r->n_devices; d++) {
        gr_device_stats ds;

        if (gr_runtime_device_stats(rt, d, &ds) != GR_OK)
            continue;
        r->iterations[d] = ds.iterations_done;
        r->stats.iterations_done += ds.iterations_done;
        r->stats.iterations_failed += ds.iterations_failed;
        r->stats.graph_instantiations += ds.graph_instantiations;
        r->stats.graph_updates += ds.graph_updates;
    }
out:
    gr_job_destroy(job);
    gr_runtime_destroy(rt);
    for (uint32_t d = 0; d < r->n_devices; d++) {
        uint64_t base = 0, peak = 0, total = 0;

        if (samplers[d] == NULL)
            continue;
        gr_devmem_stop(samplers[d], &base, &peak, &total);
        r->mem_above[d] = peak - base;
        if (d == 0) {
            r->mem_baseline = base;
            r->mem_peak = peak;
            r->mem_total = total;
        }
    }
    for (uint32_t k = 0; st == GR_OK && r->result == GR_OK && k < r->passes; k++)
        r->wrong += r->pass_wrong[k];
    return st;
}

/* The copy ceilings of the listed devices all copying at once: one thread per device, held
 * until every thread exists, then released together. */
typedef struct at_once {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool go;
} at_once;

typedef struct ceiling_job {
    at_once *start;
    int ordinal;
    uint64_t bytes;
    int reps;
    gr_ceilings ceil;
    gr_error_info err;
    gr_status st;
} ceiling_job;

static void *ceiling_main(void *arg)
{
    ceiling_job *j = arg;

    pthread_mutex_lock(&j->start->mu);
    while (!j->start->go)
        pthread_cond_wait(&j->start->cv, &j->start->mu);
    pthread_mutex_unlock(&j->start->mu);
    j->st = gr_measure_ceilings(j->ordinal, j->bytes, j->reps, &j->ceil, &j->err);
    return NULL;
}

/* Into all[d] the ceilings of device d measured alongside the others; *sum their sum. */
static gr_status measure_at_once(const int *ordinals, uint32_t n, uint64_t bytes, int reps,
                                 gr_ceilings *all, gr_ceilings *sum, gr_error_info *err)
{
    at_once start = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false};
    ceiling_job jobs[GR_OPTS_MAX_DEVICES];
    pthread_t threads[GR_OPTS_MAX_DEVICES];
    gr_status st = GR_OK;
    uint32_t started = 0;

    memset(sum, 0, sizeof(*sum));
    for (uint32_t d = 0; d < n; d++) {
        jobs[d] = (ceiling_job){.start = &start, .ordinal = ordinals[d], .bytes = bytes,
                                .reps = reps};
        if (pthread_create(&threads[d], NULL, ceiling_main, &jobs[d]) != 0)
            break;
        started++;
    }
    pthread_mutex_lock(&start.mu);
    start.go = true;
    pthread_cond_broadcast(&start.cv);
    pthread_mutex_unlock(&start.mu);
    for (uint32_t d = 0; d < started; d++)
        pthread_join(threads[d], NULL);
    if (started < n) {
        if (err) {
            memset(err, 0, sizeof(*err));
            err->status = GR_ERR_OUT_OF_MEMORY;
            err->index = GR_NO_INDEX;
            snprintf(err->message, sizeof(err->message), "cannot start a thread per device");
        }
        return GR_ERR_OUT_OF_MEMORY;
    }
    for (uint32_t d = 0; d < n; d++) {
        if (jobs[d].st != GR_OK && st == GR_OK) {
            st = jobs[d].st;
            if (err)
                *err = jobs[d].err;
        }
        all[d] = jobs[d].ceil;
        sum->h2d_gbs += jobs[d].ceil.h2d_gbs;
        sum->d2h_gbs += jobs[d].ceil.d2h_gbs;
        sum->bidir_gbs += jobs[d].ceil.bidir_gbs;
    }
    sum->bytes = bytes;
    sum->reps = reps;
    return st;
}

typedef struct report {
    char device[128];
    int sm_count;
    const char *layout;
    gr_ceilings ceil; /* the first listed device's */
    /* Scaling (two or more devices): each device alone, each alongside the others, and the
     * sum of those. */
    uint32_t n_devices;
    int ordinals[GR_OPTS_MAX_DEVICES];
    gr_cuda_device_desc desc[GR_OPTS_MAX_DEVICES];
    gr_ceilings alone[GR_OPTS_MAX_DEVICES], together[GR_OPTS_MAX_DEVICES], at_once;
} report;

/* The floor per tensor at a both-ways ceiling of bidir_gbs. */
static double floor_ms_at(double bidir_gbs, const gr_seed_opts *o)
{
    return 2.0 * (double)(o->elems * sizeof(float)) / (bidir_gbs * 1e9) * 1e3;
}

static double floor_ms(const report *rep, const gr_seed_opts *o)
{
    return floor_ms_at(rep->ceil.bidir_gbs, o);
}

/* Every ceiling the report needs (see report), keeping the higher of this measurement and
 * any earlier one. */
static gr_status measure_all(report *rep, uint64_t bytes, int reps, gr_error_info *err)
{
    gr_ceilings c, together[GR_OPTS_MAX_DEVICES], at_once;
    gr_status st;

    for (uint32_t d = 0; d < rep->n_devices; d++) {
        if ((st = gr_measure_ceilings(rep->ordinals[d], bytes, reps, &c, err)) != GR_OK)
            return st;
        if (rep->alone[d].bytes == 0)
            rep->alone[d] = c;
        else
            gr_ceilings_max(&rep->alone[d], &c);
    }
    rep->ceil = rep->alone[0];
    if (rep->n_devices < 2)
        return GR_OK;
    st = measure_at_once(rep->ordinals, rep->n_devices, bytes, reps, together, &at_once, err);
    if (st != GR_OK)
        return st;
    /* Higher at-once reading: the more demanding floor for the run on every device. */
    if (at_once.bidir_gbs > rep->at_once.bidir_gbs) {
        rep->at_once = at_once;
        memcpy(rep->together, together, rep->n_devices * sizeof(together[0]));
    }
    return GR_OK;
}

/* Scaling: the run on every device against the run on the first alone. */
static void print_scaling(const report *rep, const gr_seed_opts *o, const run_result *one,
                          const run_result *all, bool json)
{
    double tps1 = (double)o->count / one->seconds, tpsn = (double)o->count / all->seconds;
    double link = rep->at_once.bidir_gbs / rep->alone[0].bidir_gbs;
    bool ok = one->result == GR_OK && all->result == GR_OK && one->wrong == 0 &&
              all->wrong == 0;

    if (json) {
        json_t *root = json_object(), *devices = json_array();

        for (uint32_t d = 0; d < rep->n_devices; d++)
            json_array_append_new(devices, json_integer(rep->ordinals[d]));
        json_object_set_new(root, "scaling", json_true());
        json_object_set_new(root, "devices", devices);
        json_object_set_new(root, "count", json_integer((json_int_t)o->count));
        json_object_set_new(root, "tensors_per_s_one", json_real(tps1));
        json_object_set_new(root, "tensors_per_s_all", json_real(tpsn));
        json_object_set_new(root, "speedup", json_real(tpsn / tps1));
        json_object_set_new(root, "bidir_gbs_one", json_real(rep->alone[0].bidir_gbs));
        json_object_set_new(root, "bidir_gbs_all_at_once", json_real(rep->at_once.bidir_gbs));
        json_object_set_new(root, "ceiling_speedup", json_real(link));
        json_object_set_new(root, "all_verified", json_boolean(ok && o->verify));
        json_dumpf(root, stdout, JSON_COMPACT | JSON_REAL_PRECISION(9));
        fputc('\n', stdout);
        json_decref(root);
        return;
    }
    printf("scaling: %u devices %.1f tensors/s, device %d alone %.1f tensors/s: %.2fx (the "
           "copy ceiling of all at once is %.2fx one device's); %s\n",
           rep->n_devices, tpsn, rep->ordinals[0], tps1, tpsn / tps1, link,
           !ok ? "SOME OUTPUTS FAILED OR WRONG" : o->verify ? "all outputs verified"
                                                         : "not verified");
}

static void print_text_header(const report *rep, const gr_seed_opts *o)
{
    char b1[32];

    printf("graphrun bench: device %d (%s, %d SMs), %llu tensors x %llu float32 (%s each), %s, "
           "%s, in place, %s contexts\n",
           rep->ordinals[0], rep->device, rep->sm_count, (unsigned long long)o->count,
           (unsigned long long)o->elems, gr_cli_bytes(o->elems * sizeof(float), b1, sizeof(b1)),
           gr_mem_kind_name((gr_mem_kind)o->rt.memory), rep->layout,
           o->rt.cfg.context_mode == GR_CONTEXT_PRIVATE ? "private" : "primary");
    printf("ceilings (pinned, %s copies, best before and after): H2D %.1f GB/s, D2H %.1f "
           "GB/s, both at once %.1f GB/s; floor %.3f ms per tensor\n",
           gr_cli_bytes(rep->ceil.bytes, b1, sizeof(b1)), rep->ceil.h2d_gbs, rep->ceil.d2h_gbs,
           rep->ceil.bidir_gbs, floor_ms(rep, o));
    if (rep->n_devices < 2)
        return;
    for (uint32_t d = 0; d < rep->n_devices; d++)
        printf("device %d (%s, PCI %s): alone H2D %.1f, D2H %.1f, both %.1f GB/s; while all "
               "copy at once: both %.1f GB/s\n",
               rep->ordinals[d], rep->desc[d].name, rep->desc[d].pci_bus_id,
               rep->alone[d].h2d_gbs, rep->alone[d].d2h_gbs, rep->alone[d].bidir_gbs,
               rep->together[d].bidir_gbs);
    printf("all %u devices at once: H2D %.1f, D2H %.1f, both %.1f GB/s (%.2fx device %d "
           "alone); floor %.3f ms per tensor on all of them\n",
           rep->n_devices, rep->at_once.h2d_gbs, rep->at_once.d2h_gbs, rep->at_once.bidir_gbs,
           rep->at_once.bidir_gbs / rep->alone[0].bidir_gbs, rep->ordinals[0],
           floor_ms_at(rep->at_once.bidir_gbs, o));
}

/* The both-ways ceiling of the devices a run used: one device's alone, or all at once. */
static double run_bidir(const report *rep, const run_result *r)
{
    return r->n_devices > 1 ? rep->at_once.bidir_gbs : rep->ceil.bidir_gbs;
}

/* The iterations of pass k (its statistics less the previous pass's) by copy path. */
static void pass_units(const run_result *r, uint32_t k, uint64_t *direct, uint64_t *staged,
                       uint64_t *scattered, uint64_t *overlapped)
{
    const gr_stats *a = &r->pass_stats[k], *b = k ? &r->pass_stats[k - 1] : NULL;

    *direct = a->units_direct - (b ? b->units_direct : 0);
    *staged = a->units_staged - (b ? b->units_staged : 0);
    *scattered = a->units_scattered - (b ? b->units_scattered : 0);
    *overlapped = a->units_overlapped - (b ? b->units_overlapped : 0);
}

static void print_text_run(const report *rep, const gr_seed_opts *o, const run_result *r,
                           uint32_t k)
{
    char b1[32], b2[32], b3[32], b4[32];
    double per_ms = r->pass_s[k] * 1e3 / (double)o->count;
    uint64_t direct, staged, scattered, overlapped;
    double floor = floor_ms_at(run_bidir(rep, r), o);
    uint64_t above = r->mem_peak - r->mem_baseline;
    uint64_t rss_added = r->rss_peak > r->rss_before ? r->rss_peak - r->rss_before : 0;

    if (rep->n_devices > 1) {
        printf("on %u device(s) (", r->n_devices);
        for (uint32_t d = 0; d < r->n_devices; d++)
            printf("%s%d", d ? "," : "", r->ordinals[d]);
        printf("), ");
    }
    if (r->passes > 1)
        printf("pass %u of %u: ", k + 1, r->passes);
    printf("budget %s, %u workers, pipeline %s: %.3f s, %.3f ms per tensor, %.0f tensors/s, "
           "ratio %.3f; "
           "device memory peak %s above baseline; runtime host memory %s; graphs %llu "
           "instantiated, %llu updated; start %.1f ms; %s\n",
           gr_cli_bytes(r->budget, b1, sizeof(b1)), r->workers,
           r->pipeline_bytes ? gr_cli_bytes(r->pipeline_bytes, b4, sizeof(b4)) : "off",
           r->pass_s[k], per_ms,
           (double)o->count / r->pass_s[k], floor / per_ms,
           gr_cli_bytes(above, b2, sizeof(b2)), gr_cli_bytes(rss_added, b3, sizeof(b3)),
           (unsigned long long)r->stats.graph_instantiations,
           (unsigned long long)r->stats.graph_updates, r->start_ms,
           r->result != GR_OK ? "FAILED"
           : !o->verify      ? "not verified"
           : r->wrong        ? "WRONG OUTPUTS"
                             : "all outputs verified");
    pass_units(r, k, &direct, &staged, &scattered, &overlapped);
    printf("  units: %llu direct, %llu staged, %llu scattered (%llu launched under the "
           "worker's previous one)",
           (unsigned long long)direct, (unsigned long long)staged,
           (unsigned long long)scattered, (unsigned long long)overlapped);
    if (r->pass_stats[k].host_cache_registrations || r->pass_stats[k].host_cache_failures)
        printf("; registration cache: %s registered (%llu ranges, %.1f GB/s), %llu hits, "
               "%llu evicted, %llu refused",
               gr_cli_bytes(r->pass_stats[k].host_cache_bytes, b1, sizeof(b1)),
               (unsigned long long)r->pass_stats[k].host_cache_registrations,
               r->pass_stats[k].host_cache_register_ns
                   ? (double)r->pass_stats[k].host_cache_bytes /
                         (double)r->pass_stats[k].host_cache_register_ns
                   : 0.0,
               (unsigned long long)r->pass_stats[k].host_cache_hits,
               (unsigned long long)r->pass_stats[k].host_cache_evictions,
               (unsigned long long)r->pass_stats[k].host_cache_failures);
    printf("\n");
    if (r->n_devices > 1)
        for (uint32_t d = 0; d < r->n_devices; d++)
            printf("  device %d: %llu iterations, device memory peak %s above baseline\n",
                   r->ordinals[d], (unsigned long long)r->iterations[d],
                   gr_cli_bytes(r->mem_above[d], b1, sizeof(b1)));
    if (r->result != GR_OK)
        printf("  %llu done, %llu failed, %llu canceled; index %llu: %s: %s\n",
               (unsigned long long)r->prog.done, (unsigned long long)r->prog.failed,
               (unsigned long long)r->prog.canceled, (unsigned long long)r->error.index,
               gr_status_str(r->error.status), r->error.message);
}

static void print_json_run(const report *rep, const gr_seed_opts *o, const run_result *r,
                           uint32_t k)
{
    double per_ms = r->pass_s[k] * 1e3 / (double)o->count;
    const gr_stats *ps = &r->pass_stats[k];
    uint64_t direct, staged, scattered, overlapped;
    const gr_ceilings *ceil = r->n_devices > 1 ? &rep->at_once : &rep->ceil;
    json_t *root = json_object(), *devices = json_array(), *iters = json_array(),
           *above = json_array();

    json_object_set_new(root, "device", json_string(rep->device));
    json_object_set_new(root, "sm_count", json_integer(rep->sm_count));
    json_object_set_new(root, "count", json_integer((json_int_t)o->count));
    json_object_set_new(root, "elems", json_integer((json_int_t)o->elems));
    json_object_set_new(root, "bytes_per_tensor",
                        json_integer((json_int_t)(o->elems * sizeof(float))));
    json_object_set_new(root, "memory", json_string(gr_mem_kind_name((gr_mem_kind)o->rt.memory)));
    json_object_set_new(root, "layout", json_string(rep->layout));
    /* Whether gr_host_alloc's pool was on (GR_HOST_POOL, docs/API.md): it takes the tensors of up
     * to 2 MiB (with the 64-byte header of hostbuf.c), pinned ones only. */
    json_object_set_new(root, "host_pool",
                        json_boolean(getenv("GR_HOST_POOL") == NULL ||
                                     strcmp(getenv("GR_HOST_POOL"), "0") != 0));
    json_object_set_new(root, "workers", json_integer(r->workers));
    json_object_set_new(root, "pipeline_bytes", json_integer((json_int_t)r->pipeline_bytes));
    json_object_set_new(root, "staging_bytes", json_integer((json_int_t)r->staging_bytes));
    json_object_set_new(root, "contexts", json_string(o->rt.cfg.context_mode == GR_CONTEXT_PRIVATE
                                                          ? "private"
                                                          : "primary"));
    json_object_set_new(root, "ceilings",
                        json_pack("{s:I,s:f,s:f,s:f}", "copy_bytes", (json_int_t)ceil->bytes,
                                  "h2d_gbs", ceil->h2d_gbs, "d2h_gbs", ceil->d2h_gbs,
                                  "bidir_gbs", ceil->bidir_gbs));
    for (uint32_t d = 0; d < r->n_devices; d++) {
        json_array_append_new(devices, json_integer(r->ordinals[d]));
        json_array_append_new(iters, json_integer((json_int_t)r->iterations[d]));
        json_array_append_new(above, json_integer((json_int_t)r->mem_above[d]));
    }
    json_object_set_new(root, "devices", devices);
    json_object_set_new(root, "iterations_per_device", iters);
    json_object_set_new(root, "device_memory_above_baseline_per_device", above);
    json_object_set_new(root, "pass", json_integer(k + 1));
    json_object_set_new(root, "passes", json_integer(r->passes));
    pass_units(r, k, &direct, &staged, &scattered, &overlapped);
    json_object_set_new(root, "units",
                        json_pack("{s:I,s:I,s:I,s:I}", "direct", (json_int_t)direct, "staged",
                                  (json_int_t)staged, "scattered", (json_int_t)scattered,
                                  "overlapped", (json_int_t)overlapped));
    json_object_set_new(root, "host_cache",
                        json_pack("{s:I,s:I,s:I,s:I,s:I,s:I}", "bytes",
                                  (json_int_t)ps->host_cache_bytes, "registrations",
                                  (json_int_t)ps->host_cache_registrations, "hits",
                                  (json_int_t)ps->host_cache_hits, "evictions",
                                  (json_int_t)ps->host_cache_evictions, "failures",
                                  (json_int_t)ps->host_cache_failures, "register_ns",
                                  (json_int_t)ps->host_cache_register_ns));
    json_object_set_new(root, "seconds", json_real(r->pass_s[k]));
    json_object_set_new(root, "ms_per_tensor", json_real(per_ms));
    json_object_set_new(root, "tensors_per_s", json_real((double)o->count / r->pass_s[k]));
    json_object_set_new(root, "floor_ms", json_real(floor_ms_at(ceil->bidir_gbs, o)));
    json_object_set_new(root, "ratio", json_real(floor_ms_at(ceil->bidir_gbs, o) / per_ms));
    json_object_set_new(root, "device_memory",
                        json_pack("{s:I,s:I,s:I,s:I,s:I}", "baseline", (json_int_t)r->mem_baseline,
                                  "peak", (json_int_t)r->mem_peak, "above_baseline",
                                  (json_int_t)(r->mem_peak - r->mem_baseline), "budget",
                                  (json_int_t)r->budget, "total", (json_int_t)r->mem_total));
    json_object_set_new(root, "runtime_host_memory",
                        json_integer((json_int_t)(r->rss_peak > r->rss_before
                                                      ? r->rss_peak - r->rss_before
                                                      : 0)));
    json_object_set_new(root, "start_ms", json_real(r->start_ms));
    json_object_set_new(root, "graph_instantiations",
                        json_integer((json_int_t)r->stats.graph_instantiations));
    json_object_set_new(root, "graph_updates", json_integer((json_int_t)r->stats.graph_updates));
    json_object_set_new(root, "iterations", json_integer((json_int_t)r->stats.iterations_done));
    json_object_set_new(root, "done", json_integer((json_int_t)r->prog.done));
    json_object_set_new(root, "failed", json_integer((json_int_t)r->prog.failed));
    json_object_set_new(root, "canceled", json_integer((json_int_t)r->prog.canceled));
    json_object_set_new(root, "status", json_string(gr_status_str(r->result)));
    json_object_set_new(root, "verified", json_boolean(o->verify));
    json_object_set_new(root, "wrong_tensors", json_integer((json_int_t)r->pass_wrong[k]));
    json_dumpf(root, stdout, JSON_COMPACT | JSON_REAL_PRECISION(9));
    fputc('\n', stdout);
    json_decref(root);
}

int gr_cmd_bench(int argc, char **argv)
{
    static const struct option longopts[] = {
        GR_SEED_LONGOPTS,
        {"layout", required_argument, NULL, 'L'},
        {"sweep", no_argument, NULL, 'W'},
        {"reps", required_argument, NULL, 'r'},
        {"passes", required_argument, NULL, 'P'},
        {"host-cache", required_argument, NULL, 'A'},
        {"pipeline", required_argument, NULL, 'p'},
        {"staging", required_argument, NULL, 'S'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static const uint32_t sweep_budgets[] = {1, 2, 3, 4, 8}, sweep_workers[] = {1, 2, 3, 4, 8};
    gr_seed_opts o;
    report rep = {.layout = "separate"};
    bool json = false, sweep = false, all_ok = true, pipeline_set = false;
    bool staging_set = false;
    uint64_t reps = DEFAULT_REPS, passes = 1, host_cache = 0, pipeline = 0, footprint;
    uint64_t staging = 0;
    uint64_t copy_bytes;
    gr_tensor_set set = {0};
    gr_graph *graph = NULL;
    gr_error_info err;
    gr_backend chosen;
    gr_status st;
    run_result *runs = NULL;
    size_t n_runs = 0, n_planned;
    int rc = GR_EXIT_FAILED, opt, v;
    uint32_t seen = 0;

    for (int k = 1; k < argc && strcmp(argv[k], "--") != 0; k++)
        if (strcmp(argv[k], "--io") == 0 || strncmp(argv[k], "--io=", 5) == 0)
            return gr_cmd_bench_io(argc, argv);
    if (!gr_seed_opts_init(&o, "bench", DEFAULT_COUNT))
        return GR_EXIT_USAGE;
    o.rt.cfg.backend = GR_BACKEND_CUDA;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        if (!gr_cli_once(&seen, opt, "LrPApS", "graphrun bench", longopts))
            return GR_EXIT_USAGE;
        if (opt == 'h') {
            usage(stdout);
            return GR_EXIT_OK;
        } else if (opt == 'j') {
            json = true;
        } else if (opt == 'W') {
            sweep = true;
        } else if (opt == 'L') {
            if (strcmp(optarg, "contiguous") == 0 || strcmp(optarg, "separate") == 0 ||
                strcmp(optarg, "pooled") == 0) {
                rep.layout = strcmp(optarg, "contiguous") == 0 ? "contiguous"
                             : strcmp(optarg, "pooled") == 0   ? "pooled"
                                                               : "separate";
            } else {
                fprintf(stderr, "graphrun bench: invalid value '%s' for --layout\n", optarg);
                return GR_EXIT_USAGE;
            }
        } else if (opt == 'r') {
            if (!gr_cli_parse_u64(optarg, &reps) || reps == 0 || reps > 1000) {
                fprintf(stderr, "graphrun bench: invalid value '%s' for --reps\n", optarg);
                return GR_EXIT_USAGE;
            }
        } else if (opt == 'P') {
            if (!gr_cli_parse_u64(optarg, &passes) || passes == 0 || passes > MAX_PASSES) {
                fprintf(stderr, "graphrun bench: invalid value '%s' for --passes (1..%d)\n",
                        optarg, MAX_PASSES);
                return GR_EXIT_USAGE;
            }
        } else if (opt == 'A') {
            if (!gr_cli_parse_size(optarg, &host_cache)) {
                fprintf(stderr, "graphrun bench: invalid value '%s' for --host-cache%s\n",
                        optarg, GR_CLI_SIZE_FORMS);
                return GR_EXIT_USAGE;
            }
        } else if (opt == 'p') {
            if (!gr_cli_parse_size(optarg, &pipeline) || (pipeline != 0 && pipeline < (1u << 20))) {
                fprintf(stderr,
                        "graphrun bench: invalid value '%s' for --pipeline (0, or 1MiB or more)"
                        "%s\n",
                        optarg, GR_CLI_SIZE_FORMS);
                return GR_EXIT_USAGE;
            }
            pipeline_set = true;
        } else if (opt == 'S') {
            if (!gr_cli_parse_size(optarg, &staging) || staging < 4096) {
                fprintf(stderr,
                        "graphrun bench: invalid value '%s' for --staging (4KiB or more)%s\n",
                        optarg, GR_CLI_SIZE_FORMS);
                return GR_EXIT_USAGE;
            }
            staging_set = true;
        } else if ((v = gr_seed_opt("bench", opt, optarg, &o)) <= 0) {
            if (v == 0)
                gr_cli_try_help("bench");
            return GR_EXIT_USAGE;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "graphrun bench: unexpected argument '%s'\n", argv[optind]);
        return GR_EXIT_USAGE;
    }
    if ((st = gr_seed_opts_resolve(&o, &chosen, &err)) == GR_ERR_INVALID_ARGUMENT) {
        fprintf(stderr, "graphrun bench: %s\n", err.message);
        return GR_EXIT_USAGE;
    }
    if (st != GR_OK || chosen != GR_BACKEND_CUDA) {
        fprintf(stderr, "graphrun bench: measures the CUDA path, which is not available: %s\n",
                st != GR_OK ? err.message : "auto chose the host backend");
        return GR_EXIT_RUNTIME;
    }
    o.rt.cfg.backend = GR_BACKEND_CUDA;
    if (o.rt.cfg.device_count == 0) { /* one GPU unless asked for more */
        o.rt.devices[0] = 0;
        o.rt.cfg.devices = o.rt.devices;
        o.rt.cfg.device_count = 1;
    }
    rep.n_devices = o.rt.cfg.device_count;
    memcpy(rep.ordinals, o.rt.devices, rep.n_devices * sizeof(int));
    if (rep.n_devices > 1 && sweep) {
        fprintf(stderr, "graphrun bench: --sweep measures one device: list one in --devices\n");
        return GR_EXIT_USAGE;
    }
    for (uint32_t d = 0; d < rep.n_devices; d++) {
        if ((st = gr_cuda_describe(rep.ordinals[d], &rep.desc[d], &err)) != GR_OK) {
            fprintf(stderr, "graphrun bench: device %d: %s\n", rep.ordinals[d], err.message);
            return st == GR_ERR_CUDA ? GR_EXIT_RUNTIME : GR_EXIT_USAGE;
        }
    }
    snprintf(rep.device, sizeof(rep.device), "%s", rep.desc[0].name);
    rep.sm_count = rep.desc[0].sm_count;
    copy_bytes = o.elems * sizeof(float);
    if (copy_bytes > MAX_CEILING_COPY)
        copy_bytes = MAX_CEILING_COPY;
    if (copy_bytes < (64u << 20) && o.count * o.elems * sizeof(float) >= (64u << 20))
        copy_bytes = 64u << 20; /* small tensors: the link's ceiling for large copies */
    if ((st = measure_all(&rep, copy_bytes, (int)reps, &err)) != GR_OK) {
        fprintf(stderr, "graphrun bench: measuring copy ceilings: %s\n", err.message);
        return GR_EXIT_RUNTIME;
    }
    if (strcmp(rep.layout, "contiguous") == 0)
        st = gr_tensor_set_alloc_contiguous(&set, o.count, o.elems, (gr_mem_kind)o.rt.memory,
                                            o.seed);
    else if (strcmp(rep.layout, "pooled") == 0)
        st = gr_tensor_set_alloc_pooled(&set, o.count, o.elems, (gr_mem_kind)o.rt.memory,
                                        o.seed);
    else
        st = gr_tensor_set_alloc(&set, o.count, o.elems, (gr_mem_kind)o.rt.memory, o.seed);
    if (st != GR_OK) {
        fprintf(stderr, "graphrun bench: not enough %s host memory for the tensors\n",
                gr_mem_kind_name((gr_mem_kind)o.rt.memory));
        return GR_EXIT_RUNTIME;
    }
    gr_graph_create_seed(&graph);
    gr_graph_footprint(graph, o.elems, &footprint);
    /* Scaling: the first device alone, then all of them. */
    n_planned = sweep ? 25 : rep.n_devices > 1 ? 2 : 1;
    runs = calloc(n_planned, sizeof(*runs));
    for (size_t k = 0; k < n_planned; k++) {
        gr_config cfg = o.rt.cfg;
        run_result *r = &runs[n_runs];

        if (sweep) {
            /* A budget of k tensors, rounded up to the 2 MiB granule so k fit. */
            cfg.budget_bytes = (footprint * sweep_budgets[k / 5] + (2u << 20) - 1) /
                               (2u << 20) * (2u << 20);
            cfg.workers_per_device = sweep_workers[k % 5];
        } else {
            cfg.budget_bytes = o.rt.budget ? o.rt.budget : DEFAULT_BUDGET;
        }
        if (rep.n_devices > 1 && k == 0)
            cfg.device_count = 1;
        cfg.host_cache_bytes = host_cache;
        if (pipeline_set)
            cfg.pipeline_bytes = pipeline;
        if (staging_set)
            cfg.staging_bytes = staging;
        r->passes = (uint32_t)passes;
        if ((st = run_once(&o, cfg, graph, &set, r)) != GR_OK) {
            fprintf(stderr, "graphrun bench: cannot run: %s: %s\n", gr_status_str(st),
                    r->error.message);
            rc = GR_EXIT_RUNTIME;
            goto out;
        }
        all_ok &= r->result == GR_OK && r->wrong == 0;
        n_runs++;
    }
    if ((st = measure_all(&rep, copy_bytes, (int)reps, &err)) != GR_OK) {
        fprintf(stderr, "graphrun bench: measuring copy ceilings: %s\n", err.message);
        rc = GR_EXIT_RUNTIME;
        goto out;
    }
    if (!json)
        print_text_header(&rep, &o);
    for (size_t i = 0; i < n_runs; i++)
        for (uint32_t k = 0; k < runs[i].passes && (k == 0 || runs[i].pass_s[k] > 0); k++) {
            if (json)
                print_json_run(&rep, &o, &runs[i], k);
            else
                print_text_run(&rep, &o, &runs[i], k);
        }
    if (rep.n_devices > 1)
        print_scaling(&rep, &o, &runs[0], &runs[1], json);
    rc = all_ok ? GR_EXIT_OK : GR_EXIT_FAILED;
out:
    free(runs);
    gr_graph_destroy(graph);
    gr_tensor_set_free(&set);
    return rc;
}
