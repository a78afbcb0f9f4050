/*
 * kernels_bench.c - speed of kernels of a user's own on the CUDA backend, each at
 * its link floor's ratio beside the built-in seed's, measured in one run:
 *
 *   seed        the built-in fused seed kernel, in place
 *   seed_expr   the same computation as one expression kernel (graph/examples/seed_expr.graph:
 *               generated CUDA C compiled by NVRTC), in place; within 3% of seed is the aim
 *   user_entry  a user's __global__ registered from C (tests/user_kernels.cu), in place
 *   nvrtc_spec  graph/examples/user_kernel.graph: CUDA C compiled by NVRTC from the spec's
 *               own `cuda` file, two kernels, in place
 *   softmax     the row-wise softmax (graph/examples/softmax.graph), rows of --cols, out of
 *               place (bytes in and bytes out)
 *
 * The floor of a tensor is its bytes in plus out over the bidirectional pinned copy ceiling
 * measured first in the same run; ratio = floor / time per tensor. Each workload runs one
 * warm-up tensor (graph instantiation, module loading), then --count tensors of --elems
 * floats in one job, pinned, budget three tensors' footprint, --workers workers; then every
 * output element is checked against the CPU reference on all CPUs (bit for bit, softmax
 * within a relative 1e-6; seed_expr against gr__seed_ref, the built-in seed's reference). Run from the repository root (the spec names its .cu by a
 * relative path). Prints a table; --json FILE writes one object per workload. Exit status 1
 * when any workload failed or any output is wrong.
 *
 *   kernels_bench [--count 16] [--elems 100000000] [--cols 1000] [--workers 3] [--json FILE]
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <graphrun.h>
#include <graphrun_workloads.h>
#include "kernels/kernels.h"
#include "tests/user_kernels.h"
#include "tools/graphrun/cli.h"
#include "tools/graphrun/cuda_measure.h"
#include "tools/graphrun/workload.h"

#define SEED 77

typedef struct workload {
    const char *name, *what;
    gr_graph *g;
    bool in_place;
} workload;

typedef struct check_job {
    const workload *w;
    float **out;
    uint64_t elems, cols, first, count;
    uint64_t wrong;
    double max_rel; /* softmax */
} check_job;

static float seed_ref(float x)
{
    for (int r = 0; r < 10; r++) {
        volatile float m = x * 1.01f;
        x = sqrtf(m + 1.01f);
    }
    return x;
}

static float nvrtc_ref(float x)
{
    volatile float sq = x * x;
    volatile float h = sq * 0.5f;
    return fmaxf(h, 0.0f);
}

/* Check tensors [first, first + count) of a workload. */
static void *check_main(void *arg)
{
    check_job *c = arg;
    const char *n = c->w->name;

    for (uint64_t t = c->first; t < c->first + c->count; t++) {
        const float *o = c->out[t];

        if (strcmp(n, "softmax") == 0) {
            uint64_t rows = c->elems / c->cols;

            for (uint64_t r = 0; r < rows; r++) {
                double max = -INFINITY, sum = 0;

                for (uint64_t j = 0; j < c->cols; j++)
                    max = fmax(max, gr_workload_value(SEED, t, r * c->cols + j));
                for (uint64_t j = 0; j < c->cols; j++)
                    sum += exp(gr_workload_value(SEED, t, r * c->cols + j) - max);
                for (uint64_t j = 0; j < c->cols; j++) {
                    double want = exp(gr_workload_value(SEED, t, r * c->cols + j) - max) / sum;
                    double rel = fabs(o[r * c->cols + j] - want) / want;

                    if (!(rel <= 1e-6))
                        c->wrong++;
                    if (rel > c->max_rel)
                        c->max_rel = rel;
                }
            }
            continue;
        }
        for (uint64_t j = 0; j < c->elems; j++) {
            float x = gr_workload_value(SEED, t, j), want;

            if (strcmp(n, "seed") == 0)
                want = seed_ref(x);
            else if (strcmp(n, "seed_expr") == 0)
                want = gr__seed_ref(x);
            else if (strcmp(n, "user_entry") == 0)
                want = gr_test_user_ref(x, 1.5f);
            else
                want = nvrtc_ref(x);
            if (memcmp(&o[j], &want, 4) != 0)
                c->wrong++;
        }
    }
    return NULL;
}

static uint64_t check_all(const workload *w, float **out, uint64_t count, uint64_t elems,
                          uint64_t cols, double *max_rel)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    uint64_t threads = cpus > 0 ? (uint64_t)cpus : 1, wrong = 0;
    pthread_t th[256];
    check_job jobs[256];

    if (threads > count)
        threads = count;
    if (threads > 256)
        threads = 256;
    *max_rel = 0;
    for (uint64_t i = 0; i < threads; i++) {
        jobs[i] = (check_job){w, out, elems, cols, count * i / threads,
                              count * (i + 1) / threads - count * i / threads, 0, 0};
        pthread_create(&th[i], NULL, check_main, &jobs[i]);
    }
    for (uint64_t i = 0; i < threads; i++) {
        pthread_join(th[i], NULL);
        wrong += jobs[i].wrong;
        if (jobs[i].max_rel > *max_rel)
            *max_rel = jobs[i].max_rel;
    }
    return wrong;
}

static gr_graph *parse_or_die(const char *text, const char *name)
{
    gr_error_info err;
    gr_graph *g;

    if (gr_graph_parse(text, strlen(text), name, &g, &err) != GR_OK) {
        fprintf(stderr, "kernels_bench: %s\n", err.message);
        exit(1);
    }
    return g;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"count", required_argument, NULL, 'c'}, {"elems", required_argument, NULL, 'e'},
        {"cols", required_argument, NULL, 'k'},  {"workers", required_argument, NULL, 'w'},
        {"json", required_argument, NULL, 'j'},  {NULL, 0, NULL, 0},
    };
    uint64_t count = 16, elems = 100000000, cols = 1000, workers = 3;
    const char *json = NULL;
    gr_error_info err;
    gr_ceilings ceil;
    FILE *jf = NULL;
    workload w[5];
    int opt, failed = 0;

    while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        uint64_t *dst = opt == 'c' ? &count : opt == 'e' ? &elems : opt == 'k' ? &cols : &workers;

        if (opt == 'j') {
            json = optarg;
        } else if (opt == '?' || !gr_cli_parse_u64(optarg, dst) || *dst == 0) {
            fprintf(stderr, "usage: kernels_bench [--count N] [--elems N] [--cols N] "
                            "[--workers N] [--json FILE]\n");
            return 2;
        }
    }
    elems -= elems % cols; /* whole rows */
    if (gr_test_register_user_kernels(&err) != GR_OK) {
        fprintf(stderr, "kernels_bench: %s\n", err.message);
        return 1;
    }
    if (gr_measure_ceilings(0, elems * 4, 4, &ceil, &err) != GR_OK) {
        fprintf(stderr, "kernels_bench: copy ceilings: %s\n", err.message);
        return 1;
    }
    w[0] = (workload){"seed", "built-in fused seed kernel", NULL, true};
    w[1] = (workload){"seed_expr", "seed as an expression (NVRTC)", NULL, true};
    w[2] = (workload){"user_entry", "user __global__ from C", NULL, true};
    w[3] = (workload){"nvrtc_spec", "NVRTC kernels of the spec's .cu", NULL, true};
    w[4] = (workload){"softmax", "row-wise softmax, out of place", NULL, false};
    gr_graph_create_seed(&w[0].g);
    w[2].g = parse_or_die("buffer x\nh2d l: in0 -> x\nkernel k: u_entry(x, 1.5) -> x\n"
                          "d2h s: x -> out0\nl -> k -> s\n",
                          "user_entry");
    if (gr_graph_load("graph/examples/seed_expr.graph", &w[1].g, &err) != GR_OK ||
        gr_graph_load("graph/examples/user_kernel.graph", &w[3].g, &err) != GR_OK ||
        gr_graph_load("graph/examples/softmax.graph", &w[4].g, &err) != GR_OK) {
        fprintf(stderr, "kernels_bench: %s\n", err.message);
        return 1;
    }
    if (json && (jf = fopen(json, "w")) == NULL) {
        perror(json);
        return 1;
    }
    printf("kernels_bench: %llu tensors of %llu floats (%.0f MB), pinned, %llu workers; copy "
           "ceiling both ways %.1f GB/s\n",
           (unsigned long long)count, (unsigned long long)elems, elems * 4 / 1e6,
           (unsigned long long)workers, ceil.bidir_gbs);
    printf("%-11s %-34s %10s %10s %7s %8s\n", "workload", "kernel", "ms/tensor", "floor ms",
           "ratio", "verified");
    for (int k = 0; k < 5; k++) {
        gr_config cfg = GR_CONFIG_INIT;
        float **in = calloc(count + 1, sizeof(float *)), **out = calloc(count + 1, sizeof(float *));
        gr_tensor *t = calloc(count + 1, sizeof(gr_tensor));
        uint64_t footprint = 0, wrong = 0, bytes = elems * 4 * 2;
        double ms, floor_ms, max_rel = 0;
        gr_status res = GR_ERR_INTERNAL;
        gr_runtime *rt = NULL;
        gr_job *job;
        int64_t t0;

        gr_graph_footprint(w[k].g, elems, &footprint);
        cfg.backend = GR_BACKEND_CUDA;
        cfg.workers_per_device = (uint32_t)workers;
        cfg.budget_bytes = 3 * footprint;
        for (uint64_t i = 0; i <= count; i++) {
            if (gr_host_alloc(elems * 4, (void **)&in[i]) != GR_OK ||
                (!w[k].in_place && gr_host_alloc(elems * 4, (void **)&out[i]) != GR_OK)) {
                fprintf(stderr, "kernels_bench: cannot pin %llu tensors\n",
                        (unsigned long long)count + 1);
                return 1;
            }
            if (w[k].in_place)
                out[i] = in[i];
            gr_workload_fill(in[i], 0, elems, SEED, i < count ? i : 0);
            t[i] = (gr_tensor){{in[i]}, {out[i]}, elems, 2, {elems / cols, cols}};
        }
        if (gr_runtime_create(&cfg, &rt, &err) != GR_OK) {
            fprintf(stderr, "kernels_bench: %s: %s\n", w[k].name, err.message);
            return 1;
        }
        /* Warm-up: the graph lowered and instantiated, modules loaded. */
        if (gr_job_submit(rt, w[k].g, &t[count], 1, NULL, &job, &err) == GR_OK) {
            gr_job_wait(job, GR_WAIT_FOREVER, &res);
            gr_job_destroy(job);
        }
        if (res == GR_OK) {
            t0 = gr_now_ns();
            res = gr_job_submit(rt, w[k].g, t, count, NULL, &job, &err);
            if (res == GR_OK) {
                gr_job_wait(job, GR_WAIT_FOREVER, &res);
                if (res != GR_OK)
                    gr_job_error_get(job, &err);
                gr_job_destroy(job);
            }
            ms = (gr_now_ns() - t0) / 1e6 / (double)count;
        } else {
            ms = 0;
        }
        gr_runtime_destroy(rt);
        floor_ms = bytes / (ceil.bidir_gbs * 1e9) * 1e3;
        if (res == GR_OK)
            wrong = check_all(&w[k], out, count, elems, cols, &max_rel);
        if (res != GR_OK || wrong != 0)
            failed = 1;
        printf("%-11s %-34s %10.3f %10.3f %7.3f %8s", w[k].name, w[k].what, ms, floor_ms,
               res == GR_OK ? floor_ms / ms : 0.0,
               res != GR_OK ? "FAILED" : wrong ? "WRONG" : "all");
        if (res != GR_OK)
            printf("  (%s: %s)", gr_status_str(res), err.message);
        else if (wrong)
            printf("  (%llu wrong elements)", (unsigned long long)wrong);
        else if (!w[k].in_place)
            printf("  (max relative error %.2g)", max_rel);
        printf("\n");
        if (jf)
            fprintf(jf,
                    "{\"name\": \"%s\", \"count\": %llu, \"elems\": %llu, \"ms_per_tensor\": %.4f, "
                    "\"floor_ms\": %.4f, \"ratio\": %.4f, \"bidir_gbs\": %.2f, \"status\": \"%s\", "
                    "\"wrong_elements\": %llu}\n",
                    w[k].name, (unsigned long long)count, (unsigned long long)elems, ms, floor_ms,
                    res == GR_OK ? floor_ms / ms : 0.0, ceil.bidir_gbs, gr_status_str(res),
                    (unsigned long long)wrong);
        for (uint64_t i = 0; i <= count; i++) {
            if (out[i] != in[i])
                gr_host_free(out[i]);
            gr_host_free(in[i]);
        }
        free(in);
        free(out);
        free(t);
        gr_graph_destroy(w[k].g);
    }
    if (jf)
        fclose(jf);
    return failed;
}
