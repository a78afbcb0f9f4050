/*
 * copier_bench.c - how fast the copy pool gathers many tensors in separate allocations into
 * one staging buffer (what a worker does for a batch of small pageable or scattered tensors,
 * runtime/worker.c), against one plain memcpy of the same bytes measured in the same run.
 *
 *   copier_bench [--ops N] [--bytes B] [--threads T] [--rounds R]
 *
 * Prints the time per op and the gather's speed over the single memcpy's (ratio > 1: the
 * pool's threads beat one core). Every round's staging buffer is checked byte for byte
 * against the sources; exit status 1 on any difference.
 */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/core/copier.h"
#include <graphrun.h>
#include "tools/graphrun/cli.h"

static uint64_t parse(const char *s)
{
    uint64_t v;

    if (!gr_cli_parse_u64(s, &v) || v == 0) {
        fprintf(stderr, "copier_bench: invalid number '%s'\n", s);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"ops", required_argument, NULL, 'n'},    {"bytes", required_argument, NULL, 'b'},
        {"threads", required_argument, NULL, 't'}, {"rounds", required_argument, NULL, 'r'},
        {NULL, 0, NULL, 0},
    };
    uint64_t n = 2048, bytes = 16384, threads = 3, rounds = 20;
    double best_pool = 1e30, best_memcpy = 1e30;
    unsigned char **src, *staging, *flat;
    gr_copier *c;
    gr_copy *ops;
    uint64_t *ends;
    int opt;

    while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        if (opt == 'n')
            n = parse(optarg);
        else if (opt == 'b')
            bytes = parse(optarg);
        else if (opt == 't')
            threads = parse(optarg);
        else if (opt == 'r')
            rounds = parse(optarg);
        else
            return 2;
    }
    src = calloc(n, sizeof(*src));
    ops = calloc(n, sizeof(*ops));
    ends = calloc(n, sizeof(*ends));
    staging = malloc(n * bytes);
    flat = malloc(n * bytes);
    if (src == NULL || ops == NULL || ends == NULL || staging == NULL || flat == NULL ||
        gr__copier_create((unsigned)threads, &c) != GR_OK) {
        fprintf(stderr, "copier_bench: out of memory\n");
        return 3;
    }
    for (uint64_t i = 0; i < n; i++) {
        if ((src[i] = malloc(bytes)) == NULL) {
            fprintf(stderr, "copier_bench: out of memory\n");
            return 3;
        }
        for (uint64_t j = 0; j < bytes; j++)
            src[i][j] = (unsigned char)(i * 31 + j * 7 + 1);
        memcpy(flat + i * bytes, src[i], bytes);
    }
    for (uint64_t r = 0; r < rounds; r++) {
        int64_t t0;
        double s;

        memset(staging, 0, n * bytes);
        for (uint64_t i = 0; i < n; i++)
            ops[i] = (gr_copy){.dst = staging + i * bytes, .src = src[i], .bytes = bytes};
        t0 = gr_now_ns();
        gr__copier_copy(c, ops, n, ends);
        s = (double)(gr_now_ns() - t0) / 1e9;
        if (s < best_pool)
            best_pool = s;
        if (memcmp(staging, flat, n * bytes) != 0) {
            printf("FAIL copier_bench: round %llu: the staging buffer differs from the "
                   "sources\n", (unsigned long long)r);
            return 1;
        }
        memset(staging, 0, n * bytes);
        t0 = gr_now_ns();
        memcpy(staging, flat, n * bytes);
        s = (double)(gr_now_ns() - t0) / 1e9;
        if (s < best_memcpy)
            best_memcpy = s;
    }
    printf("copier_bench: %llu ops of %llu bytes, %llu helper threads, best of %llu rounds: "
           "gather %.3f ms (%.3f us per op, %.2f GB/s); one memcpy of the same bytes %.3f ms "
           "(%.2f GB/s); ratio %.2f; all rounds verified\n",
           (unsigned long long)n, (unsigned long long)bytes, (unsigned long long)threads,
           (unsigned long long)rounds, best_pool * 1e3, best_pool * 1e6 / (double)n,
           (double)(n * bytes) / best_pool / 1e9, best_memcpy * 1e3,
           (double)(n * bytes) / best_memcpy / 1e9, best_memcpy / best_pool);
    gr__copier_destroy(c);
    for (uint64_t i = 0; i < n; i++)
        free(src[i]);
    free(src);
    free(ops);
    free(ends);
    free(staging);
    free(flat);
    return 0;
}
