/*
 * dtypes_bench.c - speed on a GPU: graph/examples/preprocess.graph (uint8 images
 * in, cast and normalised per channel on the device, float32 out) at its link floor's
 * ratio. The floor of a tensor is the longest of its bytes in over the H2D ceiling, its
 * bytes out over the D2H ceiling, and both over the both-ways ceiling, measured first in
 * the same run (the traffic is lopsided: four bytes out per byte in). One warm-up tensor,
 * then --count images of --elems pixel values (H x W x 3) in one job, pinned, a budget of
 * three tensors' footprint; every output element is then checked bit for bit against
 * (float)pixel - mean[c]) / std[c] computed here. Run from the repository root. Exit status
 * 1 when the job failed or any output is wrong.
 *
 *   dtypes_bench [--count 64] [--elems 6220800] [--workers 3] [--json FILE]
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <graphrun.h>
#include "tools/graphrun/cli.h"
#include "tools/graphrun/cuda_measure.h"

static const float mean[3] = {123.675f, 116.28f, 103.53f}, stdev[3] = {58.395f, 57.12f, 57.375f};

static uint8_t pixel(uint64_t t, uint64_t i)
{
    uint64_t x = (t + 1) * 0x9e3779b97f4a7c15ull ^ (i * 0xbf58476d1ce4e5b9ull);

    x ^= x >> 31;
    return (uint8_t)(x * 0x94d049bb133111ebull >> 56);
}

static double max3(double a, double b, double c)
{
    double m = a > b ? a : b;
    return m > c ? m : c;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"count", required_argument, NULL, 'c'},   {"elems", required_argument, NULL, 'e'},
        {"workers", required_argument, NULL, 'w'}, {"json", required_argument, NULL, 'j'},
        {NULL, 0, NULL, 0},
    };
    uint64_t count = 64, elems = 1920ull * 1080 * 3, workers = 3, footprint = 0, wrong = 0;
    const char *json = NULL;
    float *consts = NULL;
    gr_config cfg = GR_CONFIG_INIT;
    gr_status res = GR_ERR_INTERNAL;
    gr_runtime *rt = NULL;
    gr_error_info err;
    gr_ceilings ceil;
    gr_graph *g = NULL;
    uint8_t **in;
    float **out;
    gr_tensor *t;
    gr_job *job;
    double ms = 0, floor_ms;
    int64_t t0;
    int opt;

    while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        uint64_t *dst = opt == 'c' ? &count : opt == 'e' ? &elems : &workers;

        if (opt == 'j') {
            json = optarg;
        } else if (opt == '?' || !gr_cli_parse_u64(optarg, dst) || *dst == 0) {
            fprintf(stderr, "usage: dtypes_bench [--count N] [--elems N] [--workers N] "
                            "[--json FILE]\n");
            return 2;
        }
    }
    elems -= elems % 3; /* whole pixels */
    if (gr_graph_load("graph/examples/preprocess.graph", &g, &err) != GR_OK) {
        fprintf(stderr, "dtypes_bench: %s\n", err.message);
        return 1;
    }
    if (gr_measure_ceilings(0, elems * 4, 4, &ceil, &err) != GR_OK) {
        fprintf(stderr, "dtypes_bench: copy ceilings: %s\n", err.message);
        return 1;
    }
    in = calloc(count + 1, sizeof(*in));
    out = calloc(count + 1, sizeof(*out));
    t = calloc(count + 1, sizeof(*t));
    if (in == NULL || out == NULL || t == NULL ||
        gr_host_alloc(6 * sizeof(float), (void **)&consts) != GR_OK) {
        fprintf(stderr, "dtypes_bench: out of memory\n");
        return 1;
    }
    memcpy(consts, mean, sizeof(mean));
    memcpy(consts + 3, stdev, sizeof(stdev));
    for (uint64_t i = 0; i <= count; i++) {
        if (gr_host_alloc(elems, (void **)&in[i]) != GR_OK ||
            gr_host_alloc(elems * 4, (void **)&out[i]) != GR_OK) {
            fprintf(stderr, "dtypes_bench: cannot pin %llu images\n",
                    (unsigned long long)count + 1);
            return 1;
        }
        for (uint64_t e = 0; e < elems; e++)
            in[i][e] = pixel(i, e);
        memset(out[i], 0xff, elems * 4);
        t[i] = (gr_tensor){{in[i], consts, consts + 3}, {out[i]}, elems, 0, {0}};
    }
    gr_graph_footprint(g, elems, &footprint);
    cfg.backend = GR_BACKEND_CUDA;
    cfg.workers_per_device = (uint32_t)workers;
    cfg.budget_bytes = 3 * footprint;
    if (gr_runtime_create(&cfg, &rt, &err) != GR_OK) {
        fprintf(stderr, "dtypes_bench: %s\n", err.message);
        return 1;
    }
    if (gr_job_submit(rt, g, &t[count], 1, NULL, &job, &err) == GR_OK) { /* warm-up */
        gr_job_wait(job, GR_WAIT_FOREVER, &res);
        gr_job_destroy(job);
    }
    if (res == GR_OK) {
        t0 = gr_now_ns();
        res = gr_job_submit(rt, g, t, count, NULL, &job, &err);
        if (res == GR_OK) {
            gr_job_wait(job, GR_WAIT_FOREVER, &res);
            if (res != GR_OK)
                gr_job_error_get(job, &err);
            gr_job_destroy(job);
        }
        ms = (gr_now_ns() - t0) / 1e6 / (double)count;
    }
    gr_runtime_destroy(rt);
    for (uint64_t i = 0; res == GR_OK && i < count; i++)
        for (uint64_t e = 0; e < elems; e++) {
            float want = ((float)in[i][e] - mean[e % 3]) / stdev[e % 3];

            if (memcmp(&want, &out[i][e], 4) != 0 && wrong++ == 0)
                fprintf(stderr, "dtypes_bench: image %llu element %llu: %.9g, want %.9g\n",
                        (unsigned long long)i, (unsigned long long)e, out[i][e], want);
        }
    floor_ms = max3(elems / (ceil.h2d_gbs * 1e9), elems * 4 / (ceil.d2h_gbs * 1e9),
                    elems * 5 / (ceil.bidir_gbs * 1e9)) * 1e3;
    printf("dtypes_bench: %llu images of %llu uint8 -> float32 (%.1f MB in, %.1f MB out), "
           "pinned, %llu workers; ceilings H2D %.1f, D2H %.1f, both %.1f GB/s\n",
           (unsigned long long)count, (unsigned long long)elems, elems / 1e6, elems * 4 / 1e6,
           (unsigned long long)workers, ceil.h2d_gbs, ceil.d2h_gbs, ceil.bidir_gbs);
    printf("preprocess  %.3f ms/image, floor %.3f ms, ratio %.3f, verified %s", ms, floor_ms,
           res == GR_OK ? floor_ms / ms : 0.0,
           res != GR_OK ? "FAILED" : wrong ? "WRONG" : "all");
    if (res != GR_OK)
        printf(" (%s: %s)", gr_status_str(res), err.message);
    else if (wrong)
        printf(" (%llu wrong elements)", (unsigned long long)wrong);
    printf("\n");
    if (json) {
        FILE *jf = fopen(json, "w");

        if (jf == NULL) {
            perror(json);
            return 1;
        }
        fprintf(jf,
                "{\"name\": \"preprocess_uint8\", \"count\": %llu, \"elems\": %llu, "
                "\"ms_per_tensor\": %.4f, \"floor_ms\": %.4f, \"ratio\": %.4f, \"h2d_gbs\": "
                "%.2f, \"d2h_gbs\": %.2f, \"bidir_gbs\": %.2f, \"status\": \"%s\", "
                "\"wrong_elements\": %llu}\n",
                (unsigned long long)count, (unsigned long long)elems, ms, floor_ms,
                res == GR_OK ? floor_ms / ms : 0.0, ceil.h2d_gbs, ceil.d2h_gbs, ceil.bidir_gbs,
                gr_status_str(res), (unsigned long long)wrong);
        fclose(jf);
    }
    for (uint64_t i = 0; i <= count; i++) {
        gr_host_free(in[i]);
        gr_host_free(out[i]);
    }
    gr_host_free(consts);
    free(in);
    free(out);
    free(t);
    gr_graph_destroy(g);
    return res != GR_OK || wrong != 0;
}
