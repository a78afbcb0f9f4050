/*
 * testing.c - the test harness runner (see testing.h).
 */
#include "tests/testing.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *gr_test_current = "(none)";
const char *gr_test_skip_reason = NULL;

int gr_test_run_all(const gr_test_case *cases, size_t n, int argc, char **argv)
{
    const char *only = NULL;

    /* `--only NAME` runs one case (for debugging). */
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--only") == 0)
            only = argv[i + 1];
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (size_t i = 0; i < n; i++) {
        if (only && strcmp(only, cases[i].name) != 0)
            continue;
        gr_test_current = cases[i].name;
        gr_test_skip_reason = NULL;
        cases[i].fn();
        if (gr_test_skip_reason)
            printf("SKIP %s: %s\n", cases[i].name, gr_test_skip_reason);
        else
            printf("PASS %s\n", cases[i].name);
        fflush(stdout);
    }
    return 0;
}

static int parse_flag(int argc, char **argv, int *i, const char *name, const char **value)
{
    size_t n = strlen(name);

    if (strncmp(argv[*i], name, n) != 0)
        return 0;
    if (argv[*i][n] == '=') {
        *value = argv[*i] + n + 1;
        return 1;
    }
    if (argv[*i][n] == '\0' && *i + 1 < argc) {
        *value = argv[++*i];
        return 1;
    }
    return 0;
}

void gr_stress_parse(int argc, char **argv, gr_stress_opts *o)
{
    for (int i = 1; i < argc; i++) {
        const char *flag = argv[i], *v;
        char *end;

        if (parse_flag(argc, argv, &i, "--threads", &v)) {
            o->threads = (unsigned)strtoul(v, &end, 10);
        } else if (parse_flag(argc, argv, &i, "--duration", &v)) {
            o->duration_s = strtod(v, &end);
        } else if (parse_flag(argc, argv, &i, "--seed", &v)) {
            o->seed = strtoull(v, &end, 0);
        } else {
            fprintf(stderr, "usage: %s [--threads N] [--duration SECONDS] [--seed X]\n",
                    argv[0]);
            exit(2);
        }
        if (*v == '\0' || *end != '\0') {
            fprintf(stderr, "%s: bad value '%s' for %s\n", argv[0], v, flag);
            exit(2);
        }
    }
    if (o->threads == 0 || o->duration_s <= 0) {
        fprintf(stderr, "%s: --threads and --duration must be positive\n", argv[0]);
        exit(2);
    }
}
