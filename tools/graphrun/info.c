/*
 * info.c - `graphrun info`: what graphrun can use on this machine: the backends, the CUDA
 * driver and runtime, each device, the copy ceilings (on request), the built-in kernels.
 */
#include <getopt.h>
#include <stdbool.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include <graphrun.h>
#include "tools/graphrun/cli.h"
#include "tools/graphrun/commands.h"
#include "tools/graphrun/cuda_measure.h"

#define CEILING_BYTES (256ull << 20)
#define CEILING_REPS 8

static void usage(FILE *f)
{
    fprintf(f, "usage: graphrun info [--ceilings] [--json]\n"
               "\n"
               "Show the backends graphrun can use here, the CUDA driver and runtime versions,\n"
               "every CUDA device, and the built-in kernels.\n"
               "\n"
               "  --ceilings   also measure each device's pinned copy ceilings (H2D, D2H, both\n"
               "               at once; 256 MiB copies; takes a few seconds); without a CUDA\n"
               "               device, a warning (the host backend has no link to measure)\n"
               "  --json       print one JSON object instead of text\n"
               "  --help       this text\n"
               "\n"
               "Exit status: 0, or 2 for a bad command line.\n");
}

static json_t *version_json(int v)
{
    char buf[32];

    snprintf(buf, sizeof(buf), "%d.%d", v / 1000, (v % 1000) / 10);
    return v ? json_string(buf) : json_null();
}

/* A kernel's line of the text listing, once per name: its overloads for other element types
 * are named by the output types they add. */
static void print_kernel_once(uint32_t i, const gr_kernel_info *k)
{
    char types[128] = "";
    size_t at = 0;
    bool seen[GR_DTYPE_COUNT_] = {false};

    for (uint32_t j = 0; j < gr_kernel_count(); j++) {
        gr_kernel_info o = GR_KERNEL_INFO_INIT;

        gr_kernel_info_get(j, &o);
        if (strcmp(o.name, k->name) != 0)
            continue;
        if (j < i)
            return; /* listed with its first definition */
        if ((unsigned)o.out_dtype < GR_DTYPE_COUNT_ && !seen[o.out_dtype] && at < sizeof(types)) {
            seen[o.out_dtype] = true;
            at += (size_t)snprintf(types + at, sizeof(types) - at, "%s%s", at ? ", " : "",
                                   gr_dtype_name(o.out_dtype));
        }
    }
    printf("  %-9s %u input(s), %u scalar(s), %s: %s\n", k->name, k->n_inputs, k->n_scalars,
           types, k->doc);
}

int gr_cmd_info(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"ceilings", no_argument, NULL, 'C'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    bool ceilings = false, json = false;
    json_t *root, *devices, *kernels;
    gr_error_info cuda_err, auto_err;
    uint32_t n_cuda = 0;
    gr_backend auto_choice = GR_BACKEND_HOST;
    gr_status cuda_st;
    int opt, driver, runtime;
    char b1[32], b2[32];

    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        if (opt == 'C') {
            ceilings = true;
        } else if (opt == 'j') {
            json = true;
        } else if (opt == 'h') {
            usage(stdout);
            return GR_EXIT_OK;
        } else {
            gr_cli_try_help("info");
            return GR_EXIT_USAGE;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "graphrun info: unexpected argument '%s'\n", argv[optind]);
        return GR_EXIT_USAGE;
    }
    /* Made after the options, so that no early return leaves them behind. */
    root = json_object();
    devices = json_array();
    kernels = json_array();
    cuda_st = gr_backend_probe(GR_BACKEND_CUDA, &n_cuda, NULL, &cuda_err);
    gr_backend_probe(GR_BACKEND_AUTO, NULL, &auto_choice, &auto_err);
    gr_cuda_versions(&driver, &runtime);

    json_object_set_new(root, "version", json_string(gr_version()));
    json_object_set_new(root, "auto_backend", json_string(gr_backend_name(auto_choice)));
    json_object_set_new(root, "cuda_available", json_boolean(cuda_st == GR_OK));
    if (cuda_st != GR_OK)
        json_object_set_new(root, "cuda_unavailable_because", json_string(cuda_err.message));
    json_object_set_new(root, "cuda_driver", version_json(driver));
    json_object_set_new(root, "cuda_runtime", version_json(runtime));
    if (!json) {
        printf("graphrun %s\n", gr_version());
        printf("backends: host (always); cuda: %s\n",
               cuda_st == GR_OK ? "available" : cuda_err.message);
        printf("auto chooses: %s\n", gr_backend_name(auto_choice));
        if (driver)
            printf("CUDA driver %d.%d", driver / 1000, (driver % 1000) / 10);
        else
            printf("CUDA driver: none");
        printf(", runtime %d.%d (linked statically)\n", runtime / 1000, (runtime % 1000) / 10);
    }
    for (uint32_t d = 0; cuda_st == GR_OK && d < n_cuda; d++) {
        gr_cuda_device_desc desc;
        gr_error_info err;
        json_t *dev = json_object();

        if (gr_cuda_describe((int)d, &desc, &err) != GR_OK) {
            json_object_set_new(dev, "error", json_string(err.message));
            json_array_append_new(devices, dev);
            if (!json)
                printf("device %u: %s\n", d, err.message);
            continue;
        }
        json_object_set_new(dev, "name", json_string(desc.name));
        json_object_set_new(dev, "pci_bus_id", json_string(desc.pci_bus_id));
        json_object_set_new(dev, "compute_capability",
                            json_sprintf("%d.%d", desc.cc_major, desc.cc_minor));
        json_object_set_new(dev, "sm_count", json_integer(desc.sm_count));
        json_object_set_new(dev, "memory_total", json_integer((json_int_t)desc.memory_total));
        json_object_set_new(dev, "memory_free", json_integer((json_int_t)desc.memory_free));
        if (!json)
            printf("device %u: %s, compute capability %d.%d, %d SMs, %s memory (%s free), "
                   "PCI %s\n",
                   d, desc.name, desc.cc_major, desc.cc_minor, desc.sm_count,
                   gr_cli_bytes(desc.memory_total, b1, sizeof(b1)),
                   gr_cli_bytes(desc.memory_free, b2, sizeof(b2)), desc.pci_bus_id);
        if (ceilings) {
            gr_ceilings c;

            if (gr_measure_ceilings((int)d, CEILING_BYTES, CEILING_REPS, &c, &err) == GR_OK) {
                json_object_set_new(dev, "h2d_gbs", json_real(c.h2d_gbs));
                json_object_set_new(dev, "d2h_gbs", json_real(c.d2h_gbs));
                json_object_set_new(dev, "bidir_gbs", json_real(c.bidir_gbs));
                if (!json)
                    printf("  copy ceilings (pinned, 256 MiB copies): H2D %.1f GB/s, D2H %.1f "
                           "GB/s, both at once %.1f GB/s\n",
                           c.h2d_gbs, c.d2h_gbs, c.bidir_gbs);
            } else if (!json) {
                printf("  copy ceilings: %s\n", err.message);
            }
        }
        json_array_append_new(devices, dev);
    }
    json_object_set_new(root, "cuda_devices", devices);
    if (ceilings && (cuda_st != GR_OK || n_cuda == 0)) {
        /* Auto chooses the host backend here, and --ceilings does not apply to it: warned
         * about, as every flag is when auto chose the backend it does not apply to. */
        const char *why = cuda_st != GR_OK ? cuda_err.message : "no CUDA device";

        fprintf(stderr, "graphrun info: warning: --ceilings does not apply: it measures CUDA's "
                        "copies, and CUDA is not available here (%s)\n", why);
        json_object_set_new(root, "ceilings_not_measured", json_string(why));
    }
    if (!json)
        printf("kernels:\n");
    for (uint32_t i = 0; i < gr_kernel_count(); i++) {
        gr_kernel_info k = GR_KERNEL_INFO_INIT;
        json_t *in_types = json_array();

        gr_kernel_info_get(i, &k);
        for (uint32_t j = 0; j < k.n_inputs; j++)
            json_array_append_new(in_types, json_string(gr_dtype_name(k.in_dtype[j])));
        json_array_append_new(kernels, json_pack("{s:s,s:i,s:i,s:b,s:s,s:o,s:s}", "name",
                                                 k.name, "inputs", (int)k.n_inputs, "scalars",
                                                 (int)k.n_scalars, "elementwise", k.elementwise,
                                                 "doc", k.doc, "input_types", in_types,
                                                 "output_type", gr_dtype_name(k.out_dtype)));
        if (!json)
            print_kernel_once(i, &k);
    }
    json_object_set_new(root, "kernels", kernels);
    if (json) {
        json_dumpf(root, stdout, JSON_COMPACT | JSON_REAL_PRECISION(9));
        fputc('\n', stdout);
    }
    json_decref(root);
    return GR_EXIT_OK;
}
