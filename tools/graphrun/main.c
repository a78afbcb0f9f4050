/*
 * main.c - the graphrun driver: dispatches to subcommands.
 */
#include <stdio.h>
#include <string.h>

#include <graphrun.h>
#include "tools/graphrun/cli.h"
#include "tools/graphrun/commands.h"

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *what;
} commands[] = {
    {"info", gr_cmd_info, "show backends, devices, versions, kernels (and copy ceilings)"},
    {"run", gr_cmd_run, "stream tensors from .npy or raw files through a graph spec"},
    {"check", gr_cmd_check, "check a run without running it: inputs, footprints, cuts"},
    {"demo", gr_cmd_demo, "run the seed workload on synthetic tensors and verify it"},
    {"bench", gr_cmd_bench, "measure the seed workload on the GPU against the copy ceilings"},
    {"stress", gr_cmd_stress, "run the runtime under many threads and check every promise"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: graphrun <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].what);
    fprintf(f, "\n'graphrun <command> --help' describes a command's options.\n"
               "'graphrun --version' prints the version.\n"
               "\nExit status: 0 success, 1 the work failed or produced wrong results,\n"
               "2 bad command line or input, 3 the runtime could not start, 130 interrupted.\n"
               "Environment: GR_BUDGET, GR_WORKERS, GR_BACKEND, GR_CONTEXTS, GR_MEMORY,\n"
               "GR_DEVICES, GR_HOST_DEVICES give defaults for the flags of the same names.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return GR_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(stdout);
        return GR_EXIT_OK;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("graphrun %s\n", gr_version());
        return GR_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "graphrun: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return GR_EXIT_USAGE;
}
