/*
 * expr_eval_tool.c - one expression kernel over raw files, for tests/expr_numpy.py: the
 * expression goes through everything a spec's does (the spec parser, the registry, the host
 * backend, cut into chunks by a budget smaller than the tensor), and the output is written
 * raw for NumPy to check.
 *
 *   expr_eval_tool TEXT OUT_TYPE OUT_FILE NAME TYPE FILE [NAME TYPE FILE ...]
 *
 * Every input file holds the same number of elements of its TYPE (float32, float16,
 * bfloat16, float64, int32, uint8), little-endian, as NumPy's tofile writes them. Exit
 * status 0 on success, 2 when the expression is refused (the message on stderr), 1 on any
 * other failure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <graphrun.h>

/* The tensor's memory, held here until exit (so no exit path leaks it). */
static void *inputs[GR_MAX_PORTS], *output;

static void *read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n;

    if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 ||
        fseek(f, 0, SEEK_SET) != 0 || (buf = malloc((size_t)n + 1)) == NULL ||
        fread(buf, 1, (size_t)n, f) != (size_t)n) {
        perror(path);
        exit(1);
    }
    fclose(f);
    *size = (size_t)n;
    return buf;
}

int main(int argc, char **argv)
{
    gr_config cfg = GR_CONFIG_INIT;
    gr_tensor t;
    gr_error_info err;
    gr_runtime *rt;
    gr_graph *g;
    gr_job *job;
    gr_dtype out_type, type;
    gr_status result = GR_ERR_INTERNAL;
    char spec[8192];
    size_t used = 0, size, elems = 0;
    uint32_t n_in;
    FILE *f;

    if (argc < 7 || (argc - 4) % 3 != 0 || (n_in = (uint32_t)(argc - 4) / 3) > GR_MAX_PORTS ||
        gr_dtype_parse(argv[2], &out_type) != GR_OK) {
        fprintf(stderr, "usage: expr_eval_tool TEXT OUT_TYPE OUT_FILE NAME TYPE FILE ...\n");
        return 1;
    }
    memset(&t, 0, sizeof(t));
    for (uint32_t k = 0; k < n_in; k++) {
        const char *name = argv[4 + 3 * k];

        if (gr_dtype_parse(argv[5 + 3 * k], &type) != GR_OK) {
            fprintf(stderr, "expr_eval_tool: unknown type %s\n", argv[5 + 3 * k]);
            return 1;
        }
        t.in[k] = inputs[k] = read_file(argv[6 + 3 * k], &size);
        if (k > 0 && size / gr_dtype_size(type) != elems) {
            fprintf(stderr, "expr_eval_tool: inputs of different lengths\n");
            return 1;
        }
        elems = size / gr_dtype_size(type);
        used += (size_t)snprintf(spec + used, sizeof(spec) - used,
                                 "buffer %s %s\nh2d l%u: in%u -> %s\n", name, argv[5 + 3 * k],
                                 k, k, name);
    }
    used += (size_t)snprintf(spec + used, sizeof(spec) - used, "buffer out_ %s\nkernel k: expr(",
                             argv[2]);
    for (uint32_t k = 0; k < n_in; k++)
        used += (size_t)snprintf(spec + used, sizeof(spec) - used, "%s, ", argv[4 + 3 * k]);
    used += (size_t)snprintf(spec + used, sizeof(spec) - used,
                             "\"%s\") -> out_\nd2h s: out_ -> out0\n", argv[1]);
    if (used >= sizeof(spec) || elems == 0) {
        fprintf(stderr, "expr_eval_tool: expression too long, or empty inputs\n");
        return 1;
    }
    if (gr_graph_parse(spec, used, "expr", &g, &err) != GR_OK) {
        fprintf(stderr, "%s\n", err.message);
        return 2;
    }
    t.elems = elems;
    t.out[0] = output = malloc(elems * gr_dtype_size(out_type));
    cfg.backend = GR_BACKEND_HOST;
    cfg.budget_bytes = 1 << 20; /* less than the tensor: chunks */
    if (t.out[0] == NULL || gr_runtime_create(&cfg, &rt, &err) != GR_OK ||
        gr_job_submit(rt, g, &t, 1, NULL, &job, &err) != GR_OK) {
        fprintf(stderr, "expr_eval_tool: %s\n", err.message);
        return 1;
    }
    gr_job_wait(job, GR_WAIT_FOREVER, &result);
    gr_job_destroy(job);
    gr_runtime_destroy(rt);
    gr_graph_destroy(g);
    if (result != GR_OK) {
        fprintf(stderr, "expr_eval_tool: the job failed: %s\n", gr_status_str(result));
        return 1;
    }
    f = fopen(argv[3], "wb");
    if (f == NULL || fwrite(t.out[0], gr_dtype_size(out_type), elems, f) != elems ||
        fclose(f) != 0) {
        perror(argv[3]);
        return 1;
    }
    for (uint32_t k = 0; k < n_in; k++)
        free(inputs[k]);
    free(output);
    return 0;
}
