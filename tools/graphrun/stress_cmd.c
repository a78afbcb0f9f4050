/*
 * stress_cmd.c - `graphrun stress`: the runtime under many submitting threads for a
 * duration, on the host or CUDA backend, every promise checked (stress.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <graphrun.h>
#include "tools/graphrun/cli.h"
#include "tools/graphrun/commands.h"
#include "tools/graphrun/cuda_measure.h"
#include "tools/graphrun/opts.h"
#include "tools/graphrun/stress.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: graphrun stress [options]\n"
            "\n"
            "Run the runtime under many submitting threads with random tensor sizes, random\n"
            "cancellations and deadlines, detached jobs and a budget of a few tensors, check\n"
            "every output and every promise, and print what was checked and every breach.\n"
            "\n"
            "  --threads N          submitting threads (default 32)\n"
            "  --duration SECONDS   how long to submit (default 10)\n"
            "  --seed X             seed of the random choices (default 1)\n"
            "  --max-elems N        largest tensor (default 16384 on the host, 1M on CUDA)\n"
            "  --budget-tensors N   budget in largest iterations (default 3)\n"
            "  --fault-rate N       fail a random one in every N calls of each transient\n"
            "                       site (arena, graph_instantiate, graph_update,\n"
            "                       graph_launch) for the whole run, seeded by --seed\n"
            "  --faults PLAN        arm this fault plan instead (docs/RELIABILITY.md)\n"
            "  --mixed-memory       submitters take pinned, pageable, registered tensors in\n"
            "                       turn (else --memory's kind for all)\n"
            "  --help               this text\n" GR_RUNTIME_OPTIONS_HELP
            "(--workers defaults to 8 here, --host-devices to 2; --budget is ignored: see\n"
            "--budget-tensors)\n"
            "\n"
            "Exit status: 0 no breach, 1 breaches (or a hang: a job that never completes),\n"
            "2 bad command line, 3 the runtime could not start.\n");
}

int gr_cmd_stress(int argc, char **argv)
{
    static const struct option longopts[] = {
        GR_RUNTIME_LONGOPTS,
        {"threads", required_argument, NULL, 't'},
        {"duration", required_argument, NULL, 'D'},
        {"seed", required_argument, NULL, 's'},
        {"max-elems", required_argument, NULL, 'E'},
        {"budget-tensors", required_argument, NULL, 'T'},
        {"fault-rate", required_argument, NULL, 'F'},
        {"faults", required_argument, NULL, 'P'},
        {"mixed-memory", no_argument, NULL, 'M'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    gr_stress_config c;
    gr_stress_report r;
    gr_runtime_opts rt;
    gr_error_info err;
    gr_backend chosen;
    uint64_t threads = 32, budget_tensors = 3, fault_rate = 0;
    const char *faults = NULL;
    char plan[256];
    gr_devmem_sampler *sampler = NULL;
    uint64_t base = 0, peak = 0, total = 0;
    double duration = 10;
    int opt, res;
    uint32_t seen = 0;
    char *end;

    memset(&c, 0, sizeof(c));
    c.seed = 1;
    if (!gr_runtime_opts_init(&rt, "stress"))
        return GR_EXIT_USAGE;
    rt.cfg.workers_per_device = 8;
    if (getenv("GR_HOST_DEVICES") == NULL)
        rt.cfg.host_devices = 2;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        if (!gr_cli_once(&seen, opt, "tDsET", "graphrun stress", longopts))
            return GR_EXIT_USAGE;
        switch (opt) {
        case 't':
            if (!gr_cli_parse_u64(optarg, &threads) || threads == 0 || threads > 4096)
                goto bad;
            break;
        case 'D':
            duration = strtod(optarg, &end);
            if (*end != '\0' || !(duration > 0))
                goto bad;
            break;
        case 's':
            if (!gr_cli_parse_u64(optarg, &c.seed))
                goto bad;
            break;
        case 'E':
            if (!gr_cli_parse_u64(optarg, &c.max_elems) || c.max_elems == 0)
                goto bad;
            break;
        case 'T':
            if (!gr_cli_parse_u64(optarg, &budget_tensors) || budget_tensors == 0 ||
                budget_tensors > 1000)
                goto bad;
            break;
        case 'F':
            if (!gr_cli_parse_u64(optarg, &fault_rate) || fault_rate == 0)
                goto bad;
            break;
        case 'P':
            faults = optarg;
            break;
        case 'M':
            c.mixed_memory = true;
            break;
        case 'h':
            usage(stdout);
            return GR_EXIT_OK;
        default:
            res = gr_runtime_opt("stress", opt, optarg, &rt);
            if (res == 1)
                break;
            if (res == 0)
                gr_cli_try_help("stress");
            return GR_EXIT_USAGE;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "graphrun stress: unexpected argument '%s'\n", argv[optind]);
        return GR_EXIT_USAGE;
    }
    if (gr_runtime_opts_resolve(&rt, &chosen, &err) != GR_OK) {
        if (err.status == GR_ERR_INVALID_ARGUMENT) {
            fprintf(stderr, "graphrun stress: %s\n", err.message);
            return GR_EXIT_USAGE;
        }
        fprintf(stderr, "graphrun stress: backend %s: %s\n", gr_backend_name(rt.cfg.backend),
                err.message);
        return GR_EXIT_RUNTIME;
    }
    c.cfg = rt.cfg;
    c.cfg.backend = chosen;
    c.cfg.ring_capacity = 64; /* small: submitters often sleep on backpressure */
    c.threads = (unsigned)threads;
    c.duration_s = duration;
    c.budget_tensors = (unsigned)budget_tensors;
    c.memory = (gr_mem_kind)rt.memory;
    if (fault_rate != 0 && faults != NULL) {
        fprintf(stderr, "graphrun stress: --fault-rate and --faults: give one\n");
        return GR_EXIT_USAGE;
    }
    if (fault_rate != 0) {
        gr_stress_fault_plan(fault_rate, c.seed, plan, sizeof(plan));
        faults = plan;
    }
    c.faults = faults;
    /* Device memory as the device reports it, on the first device: the baseline (with the
     * primary context up) before create, the peak while the stress runs. */
    if (chosen == GR_BACKEND_CUDA &&
        gr_devmem_start(c.cfg.device_count ? c.cfg.devices[0] : 0, 1000, &sampler, &err) !=
            GR_OK) {
        fprintf(stderr, "graphrun stress: cannot sample device memory: %s\n", err.message);
        sampler = NULL;
    }
    if (gr_stress_run(&c, &r, &err) != GR_OK) {
        if (sampler != NULL)
            gr_devmem_stop(sampler, &base, &peak, &total);
        fprintf(stderr, "graphrun stress: cannot start: %s\n", err.message);
        /* A plan the runtime refuses is a command-line mistake. */
        return faults != NULL && err.status == GR_ERR_INVALID_ARGUMENT &&
                       strstr(err.message, "fault plan") != NULL
                   ? GR_EXIT_USAGE
                   : GR_EXIT_RUNTIME;
    }
    gr_stress_print(&c, &r);
    if (sampler != NULL) {
        uint64_t above, over, bound = GR_CUDA_OVERHEAD_BOUND(c.cfg.workers_per_device);

        gr_devmem_stop(sampler, &base, &peak, &total);
        above = peak - base;
        over = above > r.budget_bytes ? above - r.budget_bytes : 0;
        /* docs/API.md: the CUDA backend's device memory beyond the budget, per worker. */
        printf("device memory: baseline %.1f MiB, peak %.1f MiB above it, budget %.1f MiB, "
               "%.1f MiB above the budget (stated bound for %u workers %.1f MiB: %s), device "
               "total %.0f MiB\n",
               (double)base / 1048576, (double)above / 1048576,
               (double)r.budget_bytes / 1048576, (double)over / 1048576,
               c.cfg.workers_per_device, (double)bound / 1048576,
               over <= bound ? "within" : "OVER", (double)total / 1048576);
    }
    return gr_stress_breaches(&r) == 0 ? GR_EXIT_OK : GR_EXIT_FAILED;

bad:
    fprintf(stderr, "graphrun stress: invalid value '%s' for %s\n", optarg, argv[optind - 1]);
    return GR_EXIT_USAGE;
}
