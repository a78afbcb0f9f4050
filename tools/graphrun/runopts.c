/*
 * runopts.c - the command line of `graphrun run` and `graphrun check` (see runopts.h).
 *
 * Every refusal here is the same for both commands but for the command's name, so what
 * check says of a command line is what run would say of it.
 */
#include "tools/graphrun/runopts.h"

#include <stdio.h>
#include <string.h>

#include "tools/graphrun/cli.h"

bool gr_run_opts_init(gr_run_opts *o, const char *cmd)
{
    memset(o, 0, sizeof(*o));
    return gr_runtime_opts_init(&o->rt, cmd);
}

int gr_run_opt(const char *cmd, int opt, const char *arg, gr_run_opts *o)
{
    switch (opt) {
    case 'g':
        o->graph = arg;
        return 1;
    case 'K':
        if (o->n_kernels == GR_RUN_MAX_KERNELS) {
            fprintf(stderr, "graphrun %s: at most %d --kernels files\n", cmd,
                    GR_RUN_MAX_KERNELS);
            return -1;
        }
        o->kernels[o->n_kernels++] = arg;
        return 1;
    case 'i':
    case 'o':
        if ((opt == 'i' ? o->n_inputs : o->n_outputs) == GR_MAX_PORTS) {
            fprintf(stderr, "graphrun %s: at most %d inputs and %d outputs\n", cmd,
                    GR_MAX_PORTS, GR_MAX_PORTS);
            return -1;
        }
        if (opt == 'i')
            o->inputs[o->n_inputs++] = arg;
        else
            o->outputs[o->n_outputs++] = arg;
        return 1;
    case 'N':
        if (!gr_consts_check_arg(cmd, arg, o->consts, o->n_consts))
            return -1;
        o->consts[o->n_consts++] = arg;
        return 1;
    case 'd':
        o->dtype = arg;
        return 1;
    case 'S':
        if (!gr_io_parse_shape(arg, &o->shape)) {
            fprintf(stderr, "graphrun %s: invalid value '%s' for --shape (want e.g. 3,4)\n",
                    cmd, arg);
            return -1;
        }
        o->have_shape = true;
        return 1;
    case 'R':
        o->raw = true;
        return 1;
    case 'f':
        o->force = true;
        return 1;
    case 'j':
        o->json = true;
        return 1;
    case 'Z':
        if (!gr_cli_parse_size(arg, &o->host_memory) || o->host_memory < (1u << 20)) {
            fprintf(stderr, "graphrun %s: invalid value '%s' for --host-memory (1MiB or more)%s\n",
                    cmd, arg, GR_CLI_SIZE_FORMS);
            return -1;
        }
        return 1;
    default:
        return gr_runtime_opt(cmd, opt, arg, &o->rt);
    }
}

int gr_run_opts_finish(const char *cmd, int argc, char **argv, const gr_run_opts *o,
                       bool need_outputs)
{
    if (optind != argc) {
        fprintf(stderr, "graphrun %s: unexpected argument '%s'\n", cmd, argv[optind]);
        return GR_EXIT_USAGE;
    }
    if (o->graph == NULL || o->n_inputs == 0 || (need_outputs && o->n_outputs == 0)) {
        fprintf(stderr, "graphrun %s: %s are required\n", cmd,
                need_outputs ? "--graph, --input and --output" : "--graph and --input");
        gr_cli_try_help(cmd);
        return GR_EXIT_USAGE;
    }
    return -1;
}

int gr_run_opts_graph(const gr_run_opts *o, gr_graph **g, gr_consts *consts, char *why,
                      size_t len)
{
    gr_error_info err;

    for (uint32_t k = 0; k < o->n_kernels; k++)
        if (gr_kernel_load_file(o->kernels[k], &err) != GR_OK) {
            snprintf(why, len, "--kernels: %s", err.message);
            return GR_EXIT_USAGE;
        }
    if (gr_graph_load(o->graph, g, &err) != GR_OK) {
        snprintf(why, len, "%s", err.message);
        return GR_EXIT_USAGE;
    }
    if (o->n_inputs != gr_graph_input_count(*g) ||
        (o->n_outputs && o->n_outputs != gr_graph_output_count(*g))) {
        snprintf(why, len,
                 "%s takes %u input(s) and %u output(s); got %u --input and %u --output",
                 o->graph, gr_graph_input_count(*g), gr_graph_output_count(*g), o->n_inputs,
                 o->n_outputs);
        return GR_EXIT_USAGE;
    }
    if (gr_consts_plan(consts, o->consts, o->n_consts, *g, o->graph, why, len) != GR_OK)
        return GR_EXIT_USAGE;
    return GR_EXIT_OK;
}

uint64_t gr_run_opts_budget(const gr_run_opts *o, gr_backend chosen, const gr_graph *g,
                            const gr_consts *consts, uint64_t largest)
{
    uint64_t footprint = 0;

    if (o->rt.budget)
        return o->rt.budget;
    gr_graph_footprint(g, largest, &footprint);
    /* The constants take their room once, before the iterations (docs/GRAPH_SPEC.md). */
    return gr_runtime_opts_budget(&o->rt, chosen, footprint) + consts->device_bytes;
}

int gr_run_opts_backend(gr_run_opts *o, gr_backend *chosen, uint32_t *count, char *why,
                        size_t len)
{
    gr_error_info err;

    if (gr_runtime_opts_resolve(&o->rt, chosen, &err) != GR_OK ||
        gr_backend_probe(*chosen, count, NULL, &err) != GR_OK) {
        if (err.status == GR_ERR_INVALID_ARGUMENT) { /* the command line's */
            snprintf(why, len, "%s", err.message);
            return GR_EXIT_USAGE;
        }
        snprintf(why, len, "backend %s: %s", gr_backend_name(o->rt.cfg.backend), err.message);
        return GR_EXIT_RUNTIME;
    }
    return GR_EXIT_OK;
}

uint64_t gr_run_opts_staging(const gr_run_opts *o, gr_backend chosen)
{
    uint64_t d = o->rt.cfg.staging_bytes;

    return chosen == GR_BACKEND_CUDA && o->rt.memory != GR_MEM_PAGEABLE &&
                   d > GR_RUN_STAGING_BYTES
               ? GR_RUN_STAGING_BYTES
               : d;
}

void gr_run_opts_io(const gr_run_opts *o, const gr_graph *g, gr_io_options *io)
{
    io->inputs = o->inputs;
    io->n_inputs = o->n_inputs;
    io->outputs = o->outputs;
    io->n_outputs = o->n_outputs;
    io->raw_dtype = o->dtype;
    io->raw_shape = o->have_shape ? &o->shape : NULL;
    io->raw_flag = o->raw ? "--raw" : o->dtype ? "--dtype" : o->have_shape ? "--shape" : NULL;
    io->force = o->force;
    io->memory = (gr_mem_kind)o->rt.memory;
    io->graph_outputs = gr_graph_output_count(g);
    for (uint32_t p = 0; p < o->n_inputs || p < io->graph_outputs; p++) {
        gr_port_info port;

        if (p < o->n_inputs && gr_graph_port_get(g, 0, p, &port) == GR_OK) {
            io->in_fixed[p] = port.fixed_elems;
            io->in_dtype[p] = port.dtype;
        }
        if (p < io->graph_outputs && gr_graph_port_get(g, 1, p, &port) == GR_OK) {
            io->out_fixed[p] = port.fixed_elems;
            io->out_dtype[p] = port.dtype;
        }
    }
}
