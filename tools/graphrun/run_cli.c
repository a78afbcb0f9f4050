/*
 * run_cli.c - the command line of `graphrun run` (see run.h): its help, its flags (those it
 * shares with check through runopts.h, and its own), and its mistakes, said in run's terms
 * on stderr and kept for --json's object.
 */
#define _GNU_SOURCE /* open_memstream */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <graphrun.h>
#include "tools/graphrun/cli.h"
#include "tools/graphrun/opts.h"
#include "tools/graphrun/run.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: graphrun run --graph FILE --input PATH... --output PATH... [options]\n"
            "\n"
            "Stream tensors from files through a graph and write the results.\n"
            "\n"
            "  --graph FILE     the graph spec (docs/GRAPH_SPEC.md), e.g.\n"
            "                   graph/examples/seed.graph\n"
            "  --kernels FILE   register the kernels a CUDA C file declares ('// graphrun:\n"
            "                   kernel NAME ...' lines), compiled by NVRTC, before the graph\n"
            "                   is read (repeatable; a spec can name such files itself)\n"
            "  --input PATH     input port 0, 1, ... in order: a .npy file (C order, of the\n"
            "                   port's element type: see below), a raw file (the port's type,\n"
            "                   this machine's byte order), - for stdin (one .npy; raw with\n"
            "                   --dtype), a directory (one tensor per .npy file; with --raw,\n"
            "                   --dtype or --shape, per file; anything else is skipped and\n"
            "                   named; every input directory holds the same names), or @LIST:\n"
            "                   a file of paths, one a line (blank lines and lines starting\n"
            "                   with # skipped; relative paths from the list's directory)\n"
            "  --output PATH    output port 0, 1, ... in order: a file (.npy when the name\n"
            "                   ends in .npy, else raw), of the port's type, - for stdout (a\n"
            "                   .npy; the report then goes to stderr), a directory when the\n"
            "                   inputs are directories or lists (files named as in the\n"
            "                   first), or @LIST with a path per input tensor\n"
            "  --const NAME=FILE\n"
            "                   the contents of constant NAME that the spec declares ('const\n"
            "                   NAME [TYPE] [D0, ...]'), given to every tensor: a .npy or a\n"
            "                   raw file (this machine's byte order) of the declared type and\n"
            "                   element count (its shape may differ); one for each constant\n"
            "                   the spec declares (repeatable), read once for the whole run\n"
            "  --dtype T        element type of raw input files: float32, float16, bfloat16,\n"
            "                   float64, int32 or uint8 (default: each port's); a raw input\n"
            "                   whose port is of another type is refused, and so is a .npy\n"
            "  --shape D0,D1..  shape of raw input files (default: 1-D, from the size); a .npy\n"
            "                   input is refused with it (its header gives the shape)\n"
            "  --raw            input directories hold raw files: every file is a tensor\n"
            "  --force          overwrite existing outputs\n"
            "  --sync WHEN      each (the default): every output fsynced before it is renamed\n"
            "                   into place, and recorded done once its directory is synced\n"
            "                   too; end: the outputs synced once, at the end (a power loss\n"
            "                   may empty those not yet synced: the manifest does not call\n"
            "                   them done); none: never synced\n"
            "  --io ENGINE      file reads and writes: auto (io_uring where the kernel allows\n"
            "                   it, else pread; the default), io_uring or pread\n"
            "  --no-direct      read and write through the page cache (default: O_DIRECT for\n"
            "                   files of 1 MiB and more, where the file system allows it)\n"
            "  --no-read-ahead  do not read the first inputs (up to --host-memory) into the\n"
            "                   page cache while the runtime starts\n"
            "  --ceilings       CUDA: measure the copy ceilings first and report the ratio\n"
            "                   (refused on the host backend; a warning when auto chose it)\n"
            "  --json           print a JSON summary on stdout (not with --output -)\n"
            "  --progress WHEN  auto (on a terminal), always or never (default auto)\n"
            "  --manifest FILE  the run's JSON manifest: every tensor done (with its outputs),\n"
            "                   failed (status, node, message) or not run, replaced whole as\n"
            "                   the run goes (default with directories, lists or --mpi:\n"
            "                   OUTPUT.manifest.json beside the first --output)\n"
            "  --resume         skip the tensors the manifest records as done whose inputs\n"
            "                   have the size and mtime it records and whose outputs are still\n"
            "                   there with their recorded size; run the others (replacing\n"
            "                   outputs the manifest lists, without --force; not with - for\n"
            "                   stdin or stdout); refused when the graph, --dtype, --shape,\n"
            "                   --raw, a kernel file or a --const file differs from the\n"
            "                   manifest's run\n"
            "  --keep-going     go on past failed tensors (default: the first failure stops\n"
            "                   the run: no new tensor starts, those done stay written)\n"
            "  --all-or-nothing write the outputs only when every tensor is done (a failed or\n"
            "                   interrupted run writes nothing; not with --resume or\n"
            "                   --keep-going)\n"
            "  --mpi            run as one rank of an MPI job (mpirun -np N graphrun run --mpi\n"
            "                   ...): tensor i goes to rank i %% N, each rank uses one device\n"
            "                   (its local rank's, among --devices), writes its own outputs\n"
            "                   by the rules below for its shard; rank 0 prints the summary\n"
            "  --mpi-timeout S  --mpi: the longest a rank waits for the others at a step before\n"
            "                   it aborts the job (default %d; 0: no limit)\n"
            "  --help           this text\n" GR_RUN_HOST_MEMORY_HELP GR_RUNTIME_OPTIONS_HELP
            "\n"
            "Budget: --budget (per device), else room for three iterations of the largest\n"
            "tensor and the constants (at least 2 MiB on CUDA); a tensor larger than its\n"
            "share is cut into chunks when the graph allows it.\n"
            "\n"
            "Streaming: inputs are read ahead into host memory (pinned on CUDA), each tensor\n"
            "submitted once its inputs are in and written as soon as it is done, its memory\n"
            "then taking the next reads: host memory stays within --host-memory whatever the\n"
            "size of the dataset, and the disk, the link and the device work at once.\n"
            "\n"
            "A flag that takes one value is given once; one that does not apply is refused\n"
            "(--contexts private on the host backend, --host-devices on CUDA; a warning when\n"
            "auto chose the backend). 'graphrun check' checks a run's command line without\n"
            "running it; it takes every flag above but those that say how a run goes:\n"
            "--resume, --keep-going, --all-or-nothing, --manifest, --progress, --mpi and\n"
            "--mpi-timeout, --sync, --io, --no-direct, --no-read-ahead and --ceilings (drop\n"
            "them to check).\n"
            "\n"
            "Element types: each port has its buffer's type (the spec's `buffer x uint8`;\n"
            "float32 without one), and each input must hold exactly that type, else it is\n"
            "refused before the run, saying how to convert it (a.astype(np.uint8)). .npy\n"
            "files are read as np.save writes them: float32 '<f4', float16 '<f2', float64\n"
            "'<f8', int32 '<i4', uint8 '|u1', in either byte order ('>f4' too); bfloat16 as\n"
            "an ml_dtypes.bfloat16 array saves ('<V2' or '>V2', or '|V2' after np.load,\n"
            "taken as little-endian), read only for a bfloat16 port. Outputs are written\n"
            "in their port's type, little-endian; a bfloat16 output as '<V2', read back\n"
            "with np.load(path).view(ml_dtypes.bfloat16). Other dtypes (uint16, int64,\n"
            "bool, ...), Fortran order and structured arrays are refused with the\n"
            "conversion to make.\n"
            "\n"
            "Outputs: each one appears, complete (a temporary .NAME.graphrun-tmp.XXXXXX file\n"
            "beside it, renamed), as soon as its tensor is done; a failed or interrupted run\n"
            "keeps what is done and says how to go on (--resume). An input that cannot be\n"
            "read as its port needs (missing, truncated, of another type) refuses the run,\n"
            "every such input named; with --keep-going it is a failed tensor (in the\n"
            "manifest, with the reason) and the others run. With --output - the\n"
            "tensor's file is in $TMPDIR, copied to stdout only once the run has succeeded\n"
            "(nothing on stdout otherwise). A refused run creates nothing. Exit status: 0\n"
            "every tensor done, 1 some tensors failed (the done ones written, unless\n"
            "--all-or-nothing), 2 bad command line, graph, input or constant, 3 the\n"
            "runtime could not start (short of host memory: the message says what the run\n"
            "held and needs, the limit it met and what to lower), 130 interrupted (Ctrl-C\n"
            "or SIGTERM; in-flight tensors finish and are written). With --mpi every rank\n"
            "exits with the highest status of any rank. --json prints one JSON object for\n"
            "every outcome, refusals included (not with --output -: stdout then holds the\n"
            "tensor or nothing).\n",
            GR_RUN_DEFAULT_MPI_TIMEOUT_S);
}



/* How many of the options `arg` ("--NAME[=VALUE]") is a prefix of. */
static int prefix_of(const struct option *longopts, const char *arg)
{
    size_t n = strcspn(arg + 2, "=");
    int hits = 0;

    for (; longopts->name; longopts++)
        hits += strncmp(longopts->name, arg + 2, n) == 0;
    return hits;
}

/* Long options without a letter of their own (the letters are taken). */
enum { OPT_NO_READ_AHEAD = 1000 };

static int parse_args(int argc, char **argv, run_args *a)
{
    static const struct option longopts[] = {
        GR_RUN_LONGOPTS,
        {"ceilings", no_argument, NULL, 'C'},
        {"progress", required_argument, NULL, 'P'},
        {"manifest", required_argument, NULL, 'M'},
        {"mpi", no_argument, NULL, 'I'},
        {"mpi-timeout", required_argument, NULL, 'T'},
        {"resume", no_argument, NULL, 'r'},
        {"keep-going", no_argument, NULL, 'G'},
        {"all-or-nothing", no_argument, NULL, 'A'},
        {"sync", required_argument, NULL, 'Y'},
        {"io", required_argument, NULL, 'U'},
        {"no-direct", no_argument, NULL, 'D'},
        {"no-read-ahead", no_argument, NULL, OPT_NO_READ_AHEAD},
        {"raw", no_argument, NULL, 'R'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    uint32_t seen = 0;
    int opt, r;
    char *end;

    optind = 1;
    opterr = 0; /* its mistakes said below, in run's terms */
    a->mpi_timeout = GR_RUN_DEFAULT_MPI_TIMEOUT_S;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        if (!gr_cli_once(&seen, opt, GR_RUN_ONCE "PMTYU", "graphrun run", longopts))
            return GR_EXIT_USAGE;
        switch (opt) {
        case 'C':
            a->ceilings = true;
            break;
        case 'P':
            if (strcmp(optarg, "auto") == 0)
                a->progress = 0;
            else if (strcmp(optarg, "always") == 0)
                a->progress = 1;
            else if (strcmp(optarg, "never") == 0)
                a->progress = -1;
            else {
                fprintf(stderr, "graphrun run: invalid value '%s' for --progress\n", optarg);
                return GR_EXIT_USAGE;
            }
            break;
        case 'M':
            a->manifest = optarg;
            break;
        case 'I':
            a->mpi = true;
            break;
        case 'r':
            a->resume = true;
            break;
        case 'G':
            a->keep_going = true;
            break;
        case 'A':
            a->all_or_nothing = true;
            break;
        case 'Y':
            if (strcmp(optarg, "each") == 0)
                a->sync = GR_SYNC_EACH;
            else if (strcmp(optarg, "end") == 0)
                a->sync = GR_SYNC_END;
            else if (strcmp(optarg, "none") == 0)
                a->sync = GR_SYNC_NONE;
            else {
                fprintf(stderr, "graphrun run: invalid value '%s' for --sync (each, end or "
                                "none)\n", optarg);
                return GR_EXIT_USAGE;
            }
            break;
        case 'U':
            if (strcmp(optarg, "auto") == 0)
                a->engine = GR_FIO_AUTO;
            else if (strcmp(optarg, "io_uring") == 0)
                a->engine = GR_FIO_URING;
            else if (strcmp(optarg, "pread") == 0)
                a->engine = GR_FIO_PREAD;
            else {
                fprintf(stderr, "graphrun run: invalid value '%s' for --io (auto, io_uring or "
                                "pread)\n", optarg);
                return GR_EXIT_USAGE;
            }
            break;
        case 'D':
            a->no_direct = true;
            break;
        case OPT_NO_READ_AHEAD:
            a->no_read_ahead = true;
            break;
        case 'T':
            a->mpi_timeout = strtod(optarg, &end);
            if (*optarg == '\0' || *end != '\0' || !(a->mpi_timeout >= 0)) {
                fprintf(stderr, "graphrun run: invalid value '%s' for --mpi-timeout (seconds)\n",
                        optarg);
                return GR_EXIT_USAGE;
            }
            a->have_timeout = true;
            break;
        case 'h':
            usage(stdout);
            return GR_EXIT_OK;
        case '?':
            if (optopt != 0 && strncmp(argv[optind - 1], "--", 2) == 0)
                fprintf(stderr, "graphrun run: option '%s' requires a value\n",
                        argv[optind - 1]);
            else if (optopt != 0)
                fprintf(stderr, "graphrun run: unrecognized option '-%c'\n", optopt);
            else
                fprintf(stderr, "graphrun run: %s option '%s'\n",
                        prefix_of(longopts, argv[optind - 1]) > 1 ? "ambiguous"
                                                                  : "unrecognized",
                        argv[optind - 1]);
            gr_cli_try_help("run");
            return GR_EXIT_USAGE;
        default:
            r = gr_run_opt("run", opt, optarg, &a->o);
            if (r == 1)
                break;
            if (r == 0)
                gr_cli_try_help("run");
            return GR_EXIT_USAGE;
        }
    }
    if ((r = gr_run_opts_finish("run", argc, argv, &a->o, true)) >= 0)
        return r;
    if (a->all_or_nothing && (a->resume || a->keep_going)) {
        fprintf(stderr, "graphrun run: --all-or-nothing writes nothing unless every tensor "
                        "is done: not with %s\n",
                a->resume ? "--resume" : "--keep-going");
        return GR_EXIT_USAGE;
    }
    for (uint32_t p = 0; p < a->o.n_outputs; p++)
        a->to_stdout |= strcmp(a->o.outputs[p], "-") == 0;
    if (a->have_timeout && !a->mpi) {
        fprintf(stderr, "graphrun run: --mpi-timeout applies to --mpi runs only: drop it or add "
                        "--mpi\n");
        return GR_EXIT_USAGE;
    }
    if (a->to_stdout && a->o.json) {
        fprintf(stderr, "graphrun run: --json prints on stdout, which --output - takes for the "
                        "tensor: drop --json, or write the tensor to a file (the report goes "
                        "to stderr with --output -)\n");
        return GR_EXIT_USAGE;
    }
    for (uint32_t p = 0; a->resume && p < a->o.n_inputs; p++)
        if (strcmp(a->o.inputs[p], "-") == 0 || a->to_stdout) {
            fprintf(stderr, "graphrun run: --resume does not apply to --input - or --output - "
                            "(stdin and stdout are read and written anew by every run): drop "
                            "it\n");
            return GR_EXIT_USAGE;
        }
    if (a->mpi) {
        for (uint32_t p = 0; p < a->o.n_inputs || p < a->o.n_outputs; p++)
            if ((p < a->o.n_inputs && strcmp(a->o.inputs[p], "-") == 0) ||
                (p < a->o.n_outputs && strcmp(a->o.outputs[p], "-") == 0)) {
                fprintf(stderr, "graphrun run: --input - and --output - (stdin, stdout) hold "
                                "one tensor of one process, not of --mpi ranks\n");
                return GR_EXIT_USAGE;
            }
    }
    return -1; /* go on */
}

/* Whether `arg` is long option `name` as getopt_long takes it: the name or a prefix of it
 * (getopt's abbreviations; none of run's other options starts as --json or --output do),
 * its "=VALUE" in *value (NULL: none). */
static bool is_long_opt(const char *arg, const char *name, const char **value)
{
    size_t n;

    if (strncmp(arg, "--", 2) != 0)
        return false;
    arg += 2;
    n = strcspn(arg, "=");
    if (n == 0 || n > strlen(name) || strncmp(arg, name, n) != 0)
        return false;
    *value = arg[n] == '=' ? arg + n + 1 : NULL;
    return true;
}

/* --json asked for anywhere on the command line (before a "--"), abbreviated or not: then
 * even a mistake in the command line is answered in JSON; but not with --output -, where
 * stdout holds the tensor alone or nothing (--json is refused then, on stderr only). */
bool gr_run_wants_json(int argc, char **argv)
{
    bool json = false;
    const char *v;

    for (int k = 1; k < argc && strcmp(argv[k], "--") != 0; k++) {
        if (is_long_opt(argv[k], "output", &v) &&
            (v ? strcmp(v, "-") == 0 : k + 1 < argc && strcmp(argv[k + 1], "-") == 0))
            return false;
        json |= is_long_opt(argv[k], "json", &v) && v == NULL;
    }
    return json;
}

/* The command line's own mistakes, printed on stderr as ever and kept for --json (stderr
 * is a variable one may assign in the GNU C library, as its manual says). */
int gr_run_parse(int argc, char **argv, run_args *a, bool json, char *why, size_t why_len)
{
    FILE *real = stderr, *mem;
    char *text = NULL;
    size_t len = 0;
    int rc;

    if (!json || (mem = open_memstream(&text, &len)) == NULL)
        return parse_args(argc, argv, a);
    stderr = mem;
    rc = parse_args(argc, argv, a);
    stderr = real;
    fclose(mem);
    if (text) {
        char *line = text, *nl;

        fputs(text, stderr);
        /* The first line: the mistake (the rest, if any, is usage or a hint). */
        if ((nl = strchr(line, '\n')) != NULL)
            *nl = '\0';
        if (strncmp(line, "graphrun run: ", 14) == 0)
            line += 14;
        snprintf(why, why_len, "%s", line);
    }
    free(text);
    return rc;
}
