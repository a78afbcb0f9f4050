/*
 * run.c - `graphrun run`: stream tensors from files through a graph spec and write the
 * results, with live progress on a terminal, clean cancellation on Ctrl-C and an optional
 * JSON summary; with --mpi, as one rank of an MPI job that shares the tensors.
 *
 * Outputs per tensor (the default): each tensor's outputs are renamed into place (io.h) as
 * soon as it is done, and the manifest (ledger.h), replaced whole as the run goes, says
 * which tensors are done, failed or not run, so that an interrupted or failed run keeps
 * what is done and --resume goes on from there. A tensor failure stops the run (no new
 * tensor starts; those in flight finish and are written) unless --keep-going. With
 * --all-or-nothing, the old way: outputs written only when every tensor is done, first to
 * temporary files, then renamed into place; a failed or interrupted run writes nothing.
 *
 * The steps, the same for one process and for every rank of an MPI job (ranks.h):
 *   1. check the graph and the backend, and pick this rank's device;
 *   2. plan this rank's shard of the tensors (tensor i goes to rank i % ranks), stage the
 *      outputs, remove what a killed run left, read the manifest to resume, load the
 *      inputs of the tensors to run;
 *   3. start the runtime;
 *   4. run the job, writing each tensor's outputs as it is done and this rank's manifest
 *      as it goes (--all-or-nothing: the outputs into their temporary files at the end);
 *   5. agree on the outcome; rank 0 writes the run's manifest (with --mpi, merged from the
 *      ranks' own), and (--all-or-nothing) only when every rank got through 4 are the
 *      outputs renamed into place.
 * Before the job, when any rank failed a step, every rank stops with the same status,
 * nothing written, and rank 0 says which rank failed and why; during the job each rank
 * follows the rules above for its own shard. Static shards, not dynamic sharing: each rank
 * reads only its own inputs, and on equal devices equal shards finish together; within a
 * rank, the runtime already shares the work dynamically among its devices.
 */
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <graphrun.h>
#include "tools/graphrun/cli.h"
#include "tools/graphrun/commands.h"
#include "tools/graphrun/cuda_measure.h"
#include "tools/graphrun/inputs.h"
#include "tools/graphrun/io.h"
#include "tools/graphrun/ledger.h"
#include "tools/graphrun/opts.h"
#include "tools/graphrun/progress.h"
#include "tools/graphrun/ranks.h"
#include "tools/graphrun/run_report.h"
#include "tools/graphrun/runopts.h"

#define DEFAULT_MPI_TIMEOUT_S 600
#define POLL_NS (50 * 1000000ll) /* how soon a done tensor's outputs are written */
/* The manifest is replaced at most every MANIFEST_MIN_NS, and never more often than every
 * MANIFEST_COST times what writing it last took (a run of many tensors spends at most a
 * twentieth of its time on the manifest), and always at the end. */
#define MANIFEST_MIN_NS (250 * 1000000ll)
#define MANIFEST_COST 20
#define MAX_FAILURES_LISTED 10

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    (void)sig;
    interrupted = 1;
}

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
            "  --dtype T        element type of raw input files: float32, float16, bfloat16,\n"
            "                   float64, int32 or uint8 (default: each port's); a raw input\n"
            "                   whose port is of another type is refused, and so is a .npy\n"
            "  --shape D0,D1..  shape of raw input files (default: 1-D, from the size); a .npy\n"
            "                   input is refused with it (its header gives the shape)\n"
            "  --raw            input directories hold raw files: every file is a tensor\n"
            "  --force          overwrite existing outputs\n"
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
            "                   --raw or a kernel file differs from the manifest's run\n"
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
            "  --help           this text\n" GR_RUNTIME_OPTIONS_HELP
            "\n"
            "A flag that takes one value is given once; one that does not apply is refused\n"
            "(--contexts private on the host backend, --host-devices on CUDA; a warning when\n"
            "auto chose the backend). 'graphrun check' checks a run's command line without\n"
            "running it; it takes every flag above but those that say how a run goes:\n"
            "--resume, --keep-going, --all-or-nothing, --manifest, --progress, --mpi and\n"
            "--mpi-timeout (drop them to check).\n"
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
            "keeps what is done and says how to go on (--resume). With --output - the\n"
            "tensor's file is in $TMPDIR, copied to stdout only once the run has succeeded\n"
            "(nothing on stdout otherwise). A refused run creates nothing. Exit status: 0\n"
            "every tensor done, 1 some tensors failed (the done ones written, unless\n"
            "--all-or-nothing), 2 bad command line, graph or input, 3 the runtime could not\n"
            "start, 130 interrupted (Ctrl-C or SIGTERM; in-flight tensors finish and are\n"
            "written). With --mpi every rank exits with the highest status of any rank.\n"
            "--json prints one JSON object for every outcome, refusals included (not with\n"
            "--output -: stdout then holds the tensor or nothing).\n",
            DEFAULT_MPI_TIMEOUT_S);
}

typedef struct run_args {
    gr_run_opts o; /* what check shares (runopts.h) */
    bool ceilings, mpi, have_timeout;
    bool resume, keep_going, all_or_nothing;
    bool to_stdout; /* an --output is `-` */
    int progress;
    double mpi_timeout;
    const char *manifest;
} run_args;

/* How many of the options `arg` ("--NAME[=VALUE]") is a prefix of. */
static int prefix_of(const struct option *longopts, const char *arg)
{
    size_t n = strcspn(arg + 2, "=");
    int hits = 0;

    for (; longopts->name; longopts++)
        hits += strncmp(longopts->name, arg + 2, n) == 0;
    return hits;
}

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
        {"raw", no_argument, NULL, 'R'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    uint32_t seen = 0;
    int opt, r;
    char *end;

    optind = 1;
    opterr = 0; /* its mistakes said below, in run's terms */
    a->mpi_timeout = DEFAULT_MPI_TIMEOUT_S;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        if (!gr_cli_once(&seen, opt, GR_RUN_ONCE "PMT", "graphrun run", longopts))
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

/* Everything one run holds, so that any step can clean up after the others. */
typedef struct run_state {
    run_args a;
    gr_ranks ranks;
    gr_graph *g;
    gr_backend chosen;
    gr_io_plan plan;
    gr_manifest manifest; /* the run's (rank 0's) */
    char *manifest_path;  /* when one is written */
    gr_manifest own;      /* --mpi, per tensor: this rank's, MANIFEST.rankK, as it goes */
    char *own_path;
    gr_ledger ledger;
    bool *skip;           /* plan.count: done by the run --resume resumed */
    uint64_t *job_index;  /* the job's index j -> the plan's; n_job of them */
    uint64_t n_job;
    json_t *earlier[2];   /* --resume: the manifests read (the run's, this rank's) */
    json_t *settings;     /* settings_json, as the run started */
    char **claimed;       /* --resume: the outputs they list, sorted */
    uint64_t n_claimed;
    int64_t manifest_at, manifest_cost; /* when it was last written, and what it took */
    bool manifest_failed;                /* a write failed (said once) */
    bool manifest_dirty;                 /* a tensor ended since it was last written */
    bool reported;        /* the summary (or --json's object) is out */
    bool refused;         /* the job was refused (on some rank): nothing was written */
    bool resume_from_nothing; /* --resume found no manifest (said once the run goes ahead) */
    gr_runtime *rt;
    gr_devmem_sampler *sampler;
    gr_run_report report; /* this rank's */
    char why[512];
} run_state;

/* The manifest this rank replaces as the run goes (per tensor), or NULL. */
static gr_manifest *live_manifest(run_state *s)
{
    if (s->a.all_or_nothing || s->manifest_path == NULL)
        return NULL;
    return gr_ranks_multi(&s->ranks) ? &s->own : &s->manifest;
}

/* On leaving early (ranks.h): nothing of this rank may stay behind but whole outputs. */
static void remove_temporaries(void *arg)
{
    run_state *s = arg;

    gr_io_abort(&s->plan);
    gr_manifest_abort(&s->manifest);
    gr_manifest_abort(&s->own);
}

/* FNV-1a over the strings, each with its terminating NUL. */
static uint64_t hash_strings(uint64_t h, const char *const *v, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        for (const char *p = v[i] ? v[i] : "";; p++) {
            h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
            if (*p == '\0')
                break;
        }
    return h;
}

/* Whether every rank sees the same value: false on any rank when one differs. */
static bool same_everywhere(gr_ranks *r, const char *step, int64_t v)
{
    int64_t hi = v, lo = v;

    gr_ranks_reduce(r, step, &hi, 1, GR_MPI_MAX);
    gr_ranks_reduce(r, step, &lo, 1, GR_MPI_MIN);
    return hi == lo;
}

/* Step 1: the graph, the backend, and with --mpi this rank's device: the local rank's,
 * among --devices (default all). */
static int check_setup(run_state *s)
{
    run_args *a = &s->a;
    uint32_t count = 0;
    int rc;

    if ((rc = gr_run_opts_graph(&a->o, &s->g, s->why, sizeof(s->why))) != GR_EXIT_OK ||
        (rc = gr_run_opts_backend(&a->o, &s->chosen, &count, s->why, sizeof(s->why))) !=
            GR_EXIT_OK)
        return rc;
    if (gr_ranks_multi(&s->ranks)) {
        int pool = a->o.rt.cfg.device_count
                       ? (int)a->o.rt.cfg.device_count
                       : (int)(s->chosen == GR_BACKEND_HOST ? a->o.rt.cfg.host_devices : count);
        int mine = a->o.rt.cfg.device_count
                       ? a->o.rt.devices[s->ranks.world.local_rank % pool]
                       : s->ranks.world.local_rank % pool;

        a->o.rt.devices[0] = mine;
        a->o.rt.cfg.devices = a->o.rt.devices;
        a->o.rt.cfg.device_count = 1;
    }
    s->report.backend = s->chosen;
    s->report.ordinal = a->o.rt.cfg.device_count ? a->o.rt.devices[0] : 0;
    if (a->ceilings && s->chosen != GR_BACKEND_CUDA) {
        if (a->o.rt.cfg.backend != GR_BACKEND_AUTO) {
            snprintf(s->why, sizeof(s->why), "--ceilings does not apply to the %s backend: it "
                     "measures CUDA's copies; drop it", gr_backend_name(s->chosen));
            return GR_EXIT_USAGE;
        }
        if (s->ranks.world.rank == 0)
            fprintf(stderr, "graphrun run: warning: --ceilings does not apply: it measures "
                            "CUDA's copies (auto chose the %s backend)\n",
                    gr_backend_name(s->chosen));
    }
    return GR_EXIT_OK;
}

/* The manifest's path: --manifest, or with directories, lists or --mpi
 * OUTPUT.manifest.json beside the first output (a file, or a directory: never inside it,
 * where it would pass for a tensor; for an output list @FILE, FILE.manifest.json). */
static char *manifest_path(const run_args *a, bool multi)
{
    const char *out = a->o.outputs[0][0] == '@' ? a->o.outputs[0] + 1 : a->o.outputs[0];
    size_t n = strlen(out);
    struct stat sb;
    char *p;

    if (a->manifest)
        return strdup(a->manifest);
    if (!multi && a->o.inputs[0][0] != '@' &&
        !(stat(a->o.inputs[0], &sb) == 0 && S_ISDIR(sb.st_mode)))
        return NULL;
    while (n > 1 && out[n - 1] == '/')
        n--;
    if ((p = malloc(n + sizeof(".manifest.json"))) != NULL)
        snprintf(p, n + sizeof(".manifest.json"), "%.*s.manifest.json", (int)n, out);
    return p;
}

static int str_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* --resume: the earlier run's manifests (the run's, and with --mpi this rank's own, which
 * a run killed before the end leaves newer), and the outputs they list. */
static int read_earlier(run_state *s)
{
    const char *paths[2] = {s->manifest_path, s->own_path};

    if (s->manifest_path == NULL) {
        snprintf(s->why, sizeof(s->why),
                 "--resume needs the manifest of the run to resume: give its --manifest "
                 "FILE (only runs over directories or lists, or with --mpi, write one by "
                 "default)");
        return GR_EXIT_USAGE;
    }
    for (int k = 0; k < 2; k++) {
        if (paths[k] == NULL)
            continue;
        if (gr_ledger_load(paths[k], &s->earlier[k], s->why, sizeof(s->why)) != GR_OK)
            return GR_EXIT_USAGE;
        if (s->earlier[k] &&
            gr_ledger_claimed(s->earlier[k], &s->claimed, &s->n_claimed) != GR_OK) {
            snprintf(s->why, sizeof(s->why), "out of memory reading %s", paths[k]);
            return GR_EXIT_RUNTIME;
        }
    }
    if (s->claimed)
        qsort(s->claimed, s->n_claimed, sizeof(*s->claimed), str_cmp);
    s->resume_from_nothing = s->earlier[0] == NULL && s->earlier[1] == NULL;
    return GR_EXIT_OK;
}

/* The manifests' paths, and their files staged: the run's (rank 0's), and with --mpi per
 * tensor this rank's own, MANIFEST.rankK (ours by its name: replaced without --force). */
static int stage_manifests(run_state *s)
{
    run_args *a = &s->a;
    bool multi = gr_ranks_multi(&s->ranks);
    size_t n;
    int rc;

    s->manifest_path = manifest_path(a, multi);
    if (s->manifest_path == NULL)
        return a->resume ? read_earlier(s) : GR_EXIT_OK; /* which refuses */
    if (multi && !a->all_or_nothing) {
        n = strlen(s->manifest_path) + 32;
        if ((s->own_path = malloc(n)) == NULL) {
            snprintf(s->why, sizeof(s->why), "out of memory");
            return GR_EXIT_RUNTIME;
        }
        snprintf(s->own_path, n, "%s.rank%d", s->manifest_path, s->ranks.world.rank);
    }
    if (a->resume && (rc = read_earlier(s)) != GR_EXIT_OK)
        return rc;
    if (s->ranks.world.rank == 0 &&
        gr_manifest_stage(&s->manifest, s->manifest_path, a->o.force || a->resume, s->why,
                          sizeof(s->why)) != GR_OK)
        return GR_EXIT_USAGE;
    if (s->own_path &&
        gr_manifest_stage(&s->own, s->own_path, true, s->why, sizeof(s->why)) != GR_OK)
        return GR_EXIT_USAGE;
    return GR_EXIT_OK;
}

static void add_file_facts(json_t *files, const char *path)
{
    struct stat sb;
    bool there = stat(path, &sb) == 0;

    json_array_append_new(
        files, json_pack("{s:s,s:I,s:I}", "path", path, "size",
                         (json_int_t)(there ? sb.st_size : -1), "mtime_ns",
                         (json_int_t)(there ? (int64_t)sb.st_mtim.tv_sec * 1000000000ll +
                                                  sb.st_mtim.tv_nsec
                                            : -1)));
}

/* What decides the outputs besides the graph file and the inputs, as the manifest records
 * it for --resume: --dtype, --shape and --raw as given, and the kernel files (--kernels,
 * and those the spec's `cuda "FILE"` lines name, from the spec's directory as its parser
 * takes them) with their size and mtime_ns. */
static json_t *settings_json(const run_args *ra)
{
    const gr_run_opts *a = &ra->o;
    json_t *files = json_array(), *shape = json_null();
    const char *slash = strrchr(a->graph, '/');
    char line[4096], path[8192];
    FILE *spec;

    if (a->have_shape) {
        char buf[GR_NPY_MAX_DIMS * 21 + 1];
        size_t at = 0;

        for (uint32_t d = 0; d < a->shape.ndim && at < sizeof(buf); d++)
            at += (size_t)snprintf(buf + at, sizeof(buf) - at, d ? ",%llu" : "%llu",
                                   (unsigned long long)a->shape.dims[d]);
        shape = json_string(buf);
    }
    for (uint32_t k = 0; k < a->n_kernels; k++)
        add_file_facts(files, a->kernels[k]);
    if ((spec = fopen(a->graph, "r")) != NULL) {
        while (fgets(line, sizeof(line), spec)) {
            char *p = line + strspn(line, " \t"), *end;

            if (strncmp(p, "cuda", 4) != 0 || (p[4] != ' ' && p[4] != '\t'))
                continue;
            p += 4 + strspn(p + 4, " \t");
            if (*p != '"' || (end = strchr(p + 1, '"')) == NULL)
                continue;
            snprintf(path, sizeof(path), "%.*s%.*s",
                     p[1] == '/' || slash == NULL ? 0 : (int)(slash - a->graph + 1), a->graph,
                     (int)(end - p - 1), p + 1);
            add_file_facts(files, path);
        }
        fclose(spec);
    }
    return json_pack("{s:o,s:o,s:b,s:o}", "dtype", a->dtype ? json_string(a->dtype) : json_null(),
                     "shape", shape, "raw", a->raw, "kernel_files", files);
}

/* --resume: refused when what decides the outputs (settings_json) is not what the run that
 * wrote `doc` had, naming what differs. */
static int same_settings(run_state *s, const json_t *doc, const char *path)
{
    static const char *const key[] = {"dtype", "shape", "raw", "kernel_files"};
    static const char *const what[] = {"--dtype", "--shape", "--raw",
                                       "the kernel files (--kernels, the spec's cuda lines)"};
    const json_t *then = json_object_get(doc, "settings");
    const json_t *now = s->settings;
    int rc = GR_EXIT_OK;

    if (then == NULL) {
        snprintf(s->why, sizeof(s->why),
                 "--resume: %s does not record --dtype, --shape, --raw and the kernel files "
                 "(written by an older graphrun): run again without --resume (with --force)",
                 path);
        rc = GR_EXIT_USAGE;
    }
    for (int k = 0; rc == GR_EXIT_OK && k < 4; k++)
        if (!json_equal(json_object_get(then, key[k]), json_object_get(now, key[k]))) {
            snprintf(s->why, sizeof(s->why),
                     "--resume: %s %s the run that wrote %s: every output may be stale; run "
                     "again without --resume (with --force)",
                     what[k], k < 3 ? "differs from" : "changed since", path);
            rc = GR_EXIT_USAGE;
        }
    return rc;
}

/* Step 2: plan this rank's shard, stage its outputs (and the manifests), remove what a
 * killed run left, mark what --resume skips, load the inputs of the rest. */
static int load_inputs(run_state *s)
{
    run_args *a = &s->a;
    gr_io_options io = {0};
    gr_status st;
    int rc;

    gr_run_opts_io(&a->o, s->g, &io);
    io.stage_stdout = true;
    io.shard = (uint32_t)s->ranks.world.rank;
    io.shards = (uint32_t)s->ranks.world.size;
    if ((s->settings = settings_json(a)) == NULL) {
        snprintf(s->why, sizeof(s->why), "out of memory");
        return GR_EXIT_RUNTIME;
    }
    /* The manifests first: --resume's tells which existing outputs are the run's own. */
    if ((rc = stage_manifests(s)) != GR_EXIT_OK)
        return rc;
    io.manifest = s->manifest_path;
    io.replaceable = (const char *const *)s->claimed;
    io.n_replaceable = s->n_claimed;
    if (gr_io_plan_create(&io, &s->plan, s->why, sizeof(s->why)) != GR_OK ||
        gr_io_stage(&s->plan, s->why, sizeof(s->why)) != GR_OK)
        return GR_EXIT_USAGE;
    if (s->ranks.world.rank == 0)
        gr_inputs_warn_skipped(&s->plan.src, "run");
    gr_io_clean_leftovers(&s->plan);
    if (s->ranks.world.rank == 0 && s->manifest_path)
        gr_io_remove_leftovers_of(s->manifest_path);
    if (s->own_path)
        gr_io_remove_leftovers_of(s->own_path);
    if ((st = gr_ledger_init(&s->ledger, &s->plan, a->o.graph, s->ranks.world.size, s->why,
                             sizeof(s->why))) != GR_OK)
        return st == GR_ERR_OUT_OF_MEMORY ? GR_EXIT_RUNTIME : GR_EXIT_USAGE;
    if ((s->skip = calloc(s->plan.count + 1, sizeof(*s->skip))) == NULL) {
        snprintf(s->why, sizeof(s->why), "out of memory");
        return GR_EXIT_RUNTIME;
    }
    for (int k = 0; k < 2; k++)
        if (s->earlier[k] &&
            (rc = same_settings(s, s->earlier[k], k == 0 ? s->manifest_path : s->own_path)) !=
                GR_EXIT_OK)
            return rc;
    for (int k = 0; k < 2; k++)
        if (s->earlier[k] &&
            gr_ledger_resume(&s->ledger, s->earlier[k],
                             k == 0 ? s->manifest_path : s->own_path, s->skip, s->why,
                             sizeof(s->why)) != GR_OK)
            return GR_EXIT_USAGE;
    s->plan.skip = s->skip;
    st = gr_io_load(&s->plan, &interrupted, s->why, sizeof(s->why));
    if (st == GR_ERR_CANCELED) {
        snprintf(s->why, sizeof(s->why), "interrupted while loading inputs: no output written");
        return GR_EXIT_CANCELED;
    }
    if (st != GR_OK)
        return st == GR_ERR_OUT_OF_MEMORY ? GR_EXIT_RUNTIME : GR_EXIT_USAGE;
    s->report.tensors = (int64_t)s->plan.count;
    s->report.done = s->report.resumed = (int64_t)s->ledger.earlier;
    return GR_EXIT_OK;
}

/* Step 3 (nothing to start for an empty shard: more ranks than tensors). */
static int start_runtime(run_state *s)
{
    run_args *a = &s->a;
    uint64_t largest = 0, footprint = 0, copy = 0;
    gr_runtime_info info;
    gr_device_stats ds;
    gr_error_info err;
    gr_status st;
    gr_ceilings ceil;

    if (s->plan.count == s->ledger.earlier) /* nothing to run */
        return GR_EXIT_OK;
    for (uint64_t i = 0; i < s->plan.count; i++) {
        uint32_t lead = gr_io_lead_port(&s->plan.opt);
        uint64_t bytes = s->plan.in[i * a->o.n_inputs + lead].elems *
                         gr_dtype_size(s->plan.opt.in_dtype[lead]);

        if (s->plan.tensors[i].elems > largest)
            largest = s->plan.tensors[i].elems;
        if (bytes > copy)
            copy = bytes; /* the ceilings are measured at the largest input's size */
    }
    gr_graph_footprint(s->g, largest, &footprint);
    a->o.rt.cfg.budget_bytes = gr_runtime_opts_budget(&a->o.rt, s->chosen, footprint);
    if (s->chosen == GR_BACKEND_CUDA && a->ceilings) {
        s->report.have_ceilings =
            gr_measure_ceilings((int)s->report.ordinal, copy, 8, &ceil, &err) == GR_OK;
        if (s->report.have_ceilings)
            s->report.bidir_gbs = ceil.bidir_gbs;
        else
            fprintf(stderr, "graphrun run: cannot measure ceilings: %s\n", err.message);
    }
    if (s->chosen == GR_BACKEND_CUDA)
        s->report.have_devmem =
            gr_devmem_start((int)s->report.ordinal, 1000, &s->sampler, &err) == GR_OK;
    if ((st = gr_runtime_create(&a->o.rt.cfg, &s->rt, &err)) != GR_OK) {
        snprintf(s->why, sizeof(s->why), "cannot start the runtime: %s: %s", gr_status_str(st),
                 err.message);
        return GR_EXIT_RUNTIME;
    }
    gr_runtime_info_get(s->rt, &info);
    s->report.backend = info.backend;
    s->report.devices = info.device_count;
    s->report.workers_per_device = info.workers_per_device;
    s->report.budget_bytes = (int64_t)info.budget_bytes;
    if (gr_runtime_device_stats(s->rt, 0, &ds) == GR_OK) {
        int ordinal = 0;

        gr_runtime_device_ordinal(s->rt, 0, &ordinal);
        s->report.ordinal = ordinal;
    }
    return GR_EXIT_OK;
}

static const char *status_name(int rc)
{
    return rc == GR_EXIT_OK ? "ok" : rc == GR_EXIT_CANCELED ? "interrupted" : "failed";
}

/* What the manifest says of the run as a whole, on `doc`. */
static void set_run_fields(const run_state *s, json_t *doc)
{
    const run_args *a = &s->a;
    char version[32];
    json_t *v;

    snprintf(version, sizeof(version), "%d.%d.%d", GR_VERSION_MAJOR, GR_VERSION_MINOR,
             GR_VERSION_PATCH);
    json_object_set_new(doc, "graphrun", json_string(version));
    if (s->ranks.mpi)
        json_object_set_new(doc, "mpi", json_string(s->ranks.mpi->library));
    json_object_set_new(doc, "graph", json_string(a->o.graph));
    v = json_array();
    for (uint32_t p = 0; p < a->o.n_inputs; p++)
        json_array_append_new(v, json_string(a->o.inputs[p]));
    json_object_set_new(doc, "inputs", v);
    v = json_array();
    for (uint32_t p = 0; p < a->o.n_outputs; p++)
        json_array_append_new(v, json_string(a->o.outputs[p]));
    json_object_set_new(doc, "outputs", v);
    json_object_set_new(doc, "mode", json_string(a->all_or_nothing ? "all-or-nothing"
                                                                   : "per-tensor"));
    json_object_set_new(doc, "settings", json_incref(s->settings));
}

/* Replace the manifest this rank keeps as the run goes; `now` forces it, else it is written
 * only when it is due (MANIFEST_MIN_NS, MANIFEST_COST). A failure is said once and the run
 * goes on (its outputs are whole; only resuming it needs the manifest). */
static gr_status write_live_manifest(run_state *s, const char *status, bool now)
{
    gr_manifest *m = live_manifest(s);
    int64_t t0 = gr_now_ns(), gap = s->manifest_cost * MANIFEST_COST;
    char why[512];
    json_t *doc;
    gr_status st;

    if (m == NULL)
        return GR_OK;
    if (!now && t0 - s->manifest_at < (gap > MANIFEST_MIN_NS ? gap : MANIFEST_MIN_NS))
        return GR_OK;
    doc = json_object();
    json_object_set_new(doc, "status", json_string(status));
    set_run_fields(s, doc);
    if (gr_ranks_multi(&s->ranks)) {
        json_object_set_new(doc, "rank", json_integer(s->ranks.world.rank));
        json_object_set_new(doc, "ranks", json_integer(s->ranks.world.size));
    }
    gr_ledger_set_json(&s->ledger, doc);
    st = gr_manifest_write(m, doc, why, sizeof(why));
    if (st == GR_OK)
        st = gr_manifest_publish(m, why, sizeof(why));
    json_decref(doc);
    s->manifest_at = gr_now_ns();
    s->manifest_cost = s->manifest_at - t0;
    s->manifest_dirty = false;
    if (st != GR_OK && !s->manifest_failed)
        fprintf(stderr, "graphrun run: %s (the outputs are whole, but --resume cannot use "
                        "this manifest)\n", why);
    s->manifest_failed |= st != GR_OK;
    return st;
}

/* Planned tensor i's first input, as messages name it ("stdin" for `-`, as io.c does). */
static const char *input_name(const gr_io_plan *plan, uint64_t i)
{
    const char *path = plan->in[i * plan->opt.n_inputs].path;

    return gr_inputs_is_stdin(&plan->src, path) ? "stdin" : path;
}

static void say_failure(run_state *s, uint64_t i, const char *status, const char *node,
                        const char *message)
{
    const gr_io_plan *plan = &s->plan;
    char rank[32] = "";

    if (s->ledger.failed > MAX_FAILURES_LISTED)
        return;
    if (s->ledger.failed == MAX_FAILURES_LISTED) {
        fprintf(stderr, "graphrun run: (more failures: %s)\n",
                s->manifest_path ? "the manifest lists them all" : "not listed");
        return;
    }
    if (gr_ranks_multi(&s->ranks))
        snprintf(rank, sizeof(rank), "rank %d: ", s->ranks.world.rank);
    fprintf(stderr, "graphrun run: %stensor %llu (%s) failed%s%s: %s%s%s\n", rank,
            (unsigned long long)plan->index[i],
            input_name(plan, i), node && node[0] ? ", node " : "",
            node ? node : "", status, message ? ": " : "", message ? message : "");
}

static uint64_t tensor_bytes(const gr_io_plan *plan, uint64_t i, bool out)
{
    uint64_t b = 0;

    if (!out)
        for (uint32_t p = 0; p < plan->opt.n_inputs; p++)
            b += plan->in[i * plan->opt.n_inputs + p].elems *
                 gr_dtype_size(plan->opt.in_dtype[p]);
    else
        for (uint32_t p = 0; p < plan->opt.n_outputs; p++)
            b += gr_io_out_elems(plan, i, p) * gr_dtype_size(plan->opt.out_dtype[p]);
    return b;
}

/* The first failure stops the run (unless --keep-going): no new tensor starts; those in
 * flight finish and are written. */
static void stop_on_failure(run_state *s, gr_job *job)
{
    if (!s->a.keep_going)
        gr_job_cancel(job);
}

/* Plan tensor i, job index j, is done: per tensor, its outputs into place now. */
static void tensor_done(run_state *s, gr_job *job, uint64_t i)
{
    char why[512];

    if (!s->a.all_or_nothing) {
        if (gr_io_write_tensor(&s->plan, i, why, sizeof(why)) != GR_OK) {
            say_failure(s, i, "output not written", NULL, why);
            gr_ledger_failed(&s->ledger, i, "output not written", NULL, why);
            stop_on_failure(s, job);
            return;
        }
        gr_ledger_done(&s->ledger, i);
        s->report.outputs += s->plan.opt.n_outputs;
    } else {
        s->ledger.done++; /* its outputs are written at the end, when every tensor is done */
    }
    s->report.bytes_in += (int64_t)tensor_bytes(&s->plan, i, false);
    s->report.bytes_out += (int64_t)tensor_bytes(&s->plan, i, true);
}

/* Look at the job's indices still pending (pend, *n of them): record those failed (and stop
 * the run at once, before writing anything), then write the outputs of those done (ready:
 * room for *n); keep the rest. Returns whether any ended. */
static bool collect(run_state *s, gr_job *job, uint64_t *pend, uint64_t *n, uint64_t *ready)
{
    uint64_t kept = 0, n_ready = 0;
    bool ended = false;

    for (uint64_t q = 0; q < *n; q++) {
        uint64_t j = pend[q], i = s->job_index[j];
        gr_index_state state = GR_INDEX_QUEUED;
        gr_status st = GR_OK;
        gr_error_info first;

        gr_job_index_get(job, j, &state, &st);
        if (state == GR_INDEX_QUEUED || state == GR_INDEX_RUNNING) {
            pend[kept++] = j;
            continue;
        }
        ended = true;
        if (state == GR_INDEX_DONE)
            ready[n_ready++] = i;
        if (state != GR_INDEX_FAILED)
            continue;
        /* The runtime keeps the node and message of a job's first failure only. */
        gr_job_error_get(job, &first);
        if (first.index == j) {
            say_failure(s, i, gr_status_str(st), first.node, first.message);
            gr_ledger_failed(&s->ledger, i, gr_status_str(st), first.node, first.message);
        } else {
            say_failure(s, i, gr_status_str(st), NULL, NULL);
            gr_ledger_failed(&s->ledger, i, gr_status_str(st), NULL, NULL);
        }
        stop_on_failure(s, job);
    }
    *n = kept;
    for (uint64_t q = 0; q < n_ready; q++)
        tensor_done(s, job, ready[q]);
    return ended;
}

/* Step 4: the job; per tensor, each one's outputs as it is done, and the manifest as the
 * run goes; --all-or-nothing, every output into its temporary file at the end. */
static int run_job(run_state *s)
{
    run_args *a = &s->a;
    gr_run_report *r = &s->report;
    gr_job *job = NULL;
    gr_progress progress;
    gr_error_info err;
    gr_runtime_info info;
    gr_status st, result = GR_OK, w;
    uint64_t base = 0, peak = 0, total = 0, n = 0, n_pend, *pend, *ready;
    gr_tensor *sub;
    int64_t t0;
    int rc = GR_EXIT_OK;

    for (uint64_t i = 0; i < s->plan.count; i++)
        n += !s->skip[i];
    if (n == 0) { /* every tensor resumed, or a rank with no share */
        if ((rc = gr_ranks_agree(&s->ranks, "submitting the job", 0, "")) != GR_EXIT_OK) {
            s->refused = true;
            return rc;
        }
        return interrupted ? GR_EXIT_CANCELED : GR_EXIT_OK;
    }
    s->job_index = calloc(n, sizeof(*s->job_index));
    pend = calloc(n, sizeof(*pend));
    ready = calloc(n, sizeof(*ready));
    sub = calloc(n, sizeof(*sub));
    if (!s->job_index || !pend || !ready || !sub) {
        free(pend);
        free(ready);
        free(sub);
        snprintf(s->why, sizeof(s->why), "out of memory");
        return GR_EXIT_RUNTIME;
    }
    for (uint64_t i = 0; i < s->plan.count; i++)
        if (!s->skip[i]) {
            pend[s->n_job] = s->n_job;
            sub[s->n_job] = s->plan.tensors[i];
            s->job_index[s->n_job++] = i;
        }
    n_pend = n;
    t0 = gr_now_ns();
    st = gr_job_submit(s->rt, s->g, sub, n, NULL, &job, &err);
    free(sub);
    if (st != GR_OK) {
        if (err.index < n)
            snprintf(s->why, sizeof(s->why), "refused: %s: tensor %llu (%s): %s",
                     gr_status_str(st),
                     (unsigned long long)s->plan.index[s->job_index[err.index]],
                     input_name(&s->plan, s->job_index[err.index]), err.message);
        else
            snprintf(s->why, sizeof(s->why), "refused: %s: %s", gr_status_str(st),
                     err.message);
    }
    /* A refusal on any rank is a refused run: nothing written anywhere. (Each job has
     * started meanwhile, but writes nothing before this.) */
    rc = gr_ranks_agree(&s->ranks, "submitting the job", st == GR_OK ? 0 : GR_EXIT_USAGE,
                        s->why);
    if (rc != GR_EXIT_OK) {
        s->refused = true;
        free(pend);
        free(ready);
        if (job) {
            gr_job_cancel(job);
            gr_job_wait(job, GR_WAIT_FOREVER, NULL);
            gr_job_destroy(job);
        }
        return rc;
    }
    write_live_manifest(s, "running", true); /* claims the outputs before any is written */
    gr_progress_start(&progress, s->ranks.world.rank == 0 ? a->progress : -1,
                      (s->plan.bytes_in + s->plan.bytes_out) / s->plan.count);
    do {
        gr_job_progress jp;

        w = gr_job_wait(job, POLL_NS, &result);
        if (interrupted)
            gr_job_cancel(job); /* idempotent; in-flight iterations finish */
        gr_job_progress_get(job, &jp);
        /* The pending indices are looked at only while the job's counters say more have
         * ended than were seen to (an index's counter and its state are not stored at
         * once: looking again next time until they agree; the last look, once the job
         * is complete, sees all). */
        if (w == GR_OK || jp.done + jp.failed + jp.canceled > n - n_pend)
            s->manifest_dirty |= collect(s, job, pend, &n_pend, ready);
        /* Written when due, also when nothing ended since: a tensor done just after the
         * last write must not wait for the next one to end to be recorded. */
        if (s->manifest_dirty)
            write_live_manifest(s, "running", false);
        gr_progress_draw(&progress, &jp, s->rt);
    } while (w == GR_ERR_TIMEOUT);
    gr_progress_end(&progress);
    free(pend);
    free(ready);
    r->job_ns = gr_now_ns() - t0;
    r->done = (int64_t)s->ledger.done;
    r->failed = (int64_t)s->ledger.failed;
    r->canceled = r->tensors - r->done - r->failed;
    /* The first error is the first failed tensor's, never a cancel: the job's own first
     * error is the cancel of the run's stop when what failed was writing an output. */
    r->first_status = GR_OK;
    for (uint64_t j = 0; j < n; j++) {
        const gr_ledger_entry *e = &s->ledger.e[s->job_index[j]];
        gr_index_state state = GR_INDEX_QUEUED;
        gr_status ist = GR_OK;

        if (e->outcome != GR_OUTCOME_FAILED)
            continue;
        gr_job_index_get(job, j, &state, &ist);
        r->first_status = state == GR_INDEX_FAILED ? ist : GR_ERR_INVALID_ARGUMENT;
        r->first_index = (int64_t)s->plan.index[s->job_index[j]];
        snprintf(r->first_node, sizeof(r->first_node), "%s", e->node);
        snprintf(r->first_message, sizeof(r->first_message), "%s",
                 e->message ? e->message : "");
        break;
    }
    for (uint64_t j = 0; j < n; j++) {
        gr_status ist = GR_OK;

        gr_job_index_get(job, j, NULL, &ist);
        r->errors[ist]++;
    }
    gr_runtime_info_get(s->rt, &info);
    for (uint32_t d = 0; d < info.device_count; d++) {
        gr_device_stats ds;

        if (gr_runtime_device_stats(s->rt, d, &ds) == GR_OK &&
            (int64_t)ds.budget_peak > r->budget_peak)
            r->budget_peak = (int64_t)ds.budget_peak;
    }
    gr_job_destroy(job);
    gr_runtime_destroy(s->rt);
    s->rt = NULL;
    if (s->sampler) {
        gr_devmem_stop(s->sampler, &base, &peak, &total);
        s->sampler = NULL;
        r->devmem_above = (int64_t)(peak - base);
    }

    if (interrupted) {
        rc = GR_EXIT_CANCELED;
    } else if (r->failed > 0) {
        rc = GR_EXIT_FAILED;
        snprintf(s->why, sizeof(s->why), "%llu of %llu tensors failed; first: tensor %llu: %s: %s",
                 (unsigned long long)r->failed, (unsigned long long)r->tensors,
                 (unsigned long long)r->first_index,
                 gr_status_str((gr_status)r->first_status), r->first_message);
    } else if (r->canceled > 0) {
        rc = GR_EXIT_FAILED; /* not reached: only a signal or a failure stops a job */
        snprintf(s->why, sizeof(s->why), "%llu tensors not run", (unsigned long long)r->canceled);
    } else if (a->all_or_nothing) {
        if ((st = gr_io_write(&s->plan, &interrupted, s->why, sizeof(s->why))) != GR_OK) {
            rc = st == GR_ERR_CANCELED ? GR_EXIT_CANCELED : GR_EXIT_FAILED;
            if (st == GR_ERR_CANCELED)
                s->why[0] = '\0';
        } else {
            s->report.outputs = (int64_t)(s->plan.count * a->o.n_outputs);
        }
    }
    return rc;
}

/* The "files" of every rank's tensors: each tensor's entry from its rank's own manifest
 * (MANIFEST.rankK, per tensor), or (--all-or-nothing, or a rank whose manifest cannot be
 * read) its index, name, rank and outputs, with the status the run's outcome implies. */
static json_t *merged_files(const run_state *s, int ranks, bool all_done)
{
    const run_args *a = &s->a;
    uint64_t total = s->plan.total;
    json_t **entry = calloc(total + 1, sizeof(*entry)), *files = json_array();

    for (int k = 0; entry && !a->all_or_nothing && k < ranks; k++) {
        char path[4096];
        json_t *doc, *f;
        size_t q;

        snprintf(path, sizeof(path), "%s.rank%d", s->manifest_path, k);
        if ((doc = json_load_file(path, 0, NULL)) == NULL)
            continue;
        json_array_foreach(json_object_get(doc, "files"), q, f)
        {
            json_int_t g = json_integer_value(json_object_get(f, "index"));

            if (g >= 0 && (uint64_t)g < total && entry[g] == NULL)
                entry[g] = json_incref(f);
        }
        json_decref(doc);
    }
    for (uint64_t i = 0; i < total; i++) {
        const char *name = s->plan.names ? s->plan.names[i] : NULL;
        json_t *t = entry ? entry[i] : NULL, *outs;

        if (t == NULL) {
            t = json_object();
            outs = json_array();
            json_object_set_new(t, "index", json_integer((json_int_t)i));
            json_object_set_new(t, "rank", json_integer((json_int_t)(i % (uint64_t)ranks)));
            if (name)
                json_object_set_new(t, "name", json_string(name));
            json_object_set_new(t, "status", json_string(all_done ? "done" : "not run"));
            for (uint32_t p = 0; p < a->o.n_outputs; p++)
                json_array_append_new(outs, json_string(s->plan.src.out[i * a->o.n_outputs + p]));
            json_object_set_new(t, "outputs", outs);
        }
        json_array_append_new(files, t);
    }
    free(entry);
    return files;
}

/* The run's manifest: the summary, the run, and every tensor (tensor i: rank i % ranks). */
static json_t *manifest_json(const run_state *s, const gr_run_report *all,
                             const gr_run_facts *f)
{
    json_t *doc = gr_run_report_json(all, f);

    set_run_fields(s, doc);
    if (!gr_ranks_multi(&s->ranks) && !(s->a.all_or_nothing && strcmp(f->status, "ok"))) {
        gr_ledger_set_json(&s->ledger, doc);
    } else {
        json_object_set_new(doc, "graph_file", json_pack("{s:I,s:I}", "size",
                                                         (json_int_t)s->ledger.graph_size,
                                                         "mtime_ns",
                                                         (json_int_t)s->ledger.graph_mtime_ns));
        json_object_set_new(doc, "files",
                            merged_files(s, f->ranks, strcmp(f->status, "ok") == 0));
    }
    return doc;
}

/* What the input directories held that is not a tensor (inputs.h), when there is any. */
static void add_skipped(json_t *doc, const gr_inputs *in)
{
    json_t *v;

    if (in->n_skipped == 0)
        return;
    v = json_array();
    for (uint64_t i = 0; i < in->n_skipped; i++)
        json_array_append_new(v, json_string(in->skipped[i]));
    json_object_set_new(doc, "skipped", v);
}

/* --json, one process: every failed tensor (the manifest has them all). */
static void add_failures(const run_state *s, json_t *doc)
{
    json_t *v = json_array();
    uint64_t listed = 0;

    for (uint64_t i = 0; i < s->plan.count && listed < 100; i++) {
        const gr_ledger_entry *e = &s->ledger.e[i];
        json_t *t;

        if (e->outcome != GR_OUTCOME_FAILED)
            continue;
        t = json_pack("{s:I,s:s,s:s}", "index", (json_int_t)s->plan.index[i], "input",
                      input_name(&s->plan, i), "status", e->status);
        if (e->node[0])
            json_object_set_new(t, "node", json_string(e->node));
        if (e->message)
            json_object_set_new(t, "message", json_string(e->message));
        json_array_append_new(v, t);
        listed++;
    }
    json_object_set_new(doc, "failures", v);
}

static void print_summary(run_state *s, const gr_run_report *all, const gr_run_facts *f)
{
    if (s->a.o.json) {
        json_t *doc = gr_run_report_json(all, f);

        if (!f->mpi)
            add_failures(s, doc);
        add_skipped(doc, &s->plan.src);
        json_dumpf(doc, stdout, JSON_COMPACT | JSON_REAL_PRECISION(9));
        fputc('\n', stdout);
        json_decref(doc);
    } else {
        gr_run_report_print(all, f);
    }
    fflush(stdout);
    s->reported = true;
}

/* Rank 0, per tensor, a run that did not finish: what is kept, and how to go on. */
static void say_kept(const run_state *s, const gr_run_report *all, int ranks, int rc)
{
    int64_t tensors = 0, done = 0, failed = 0, not_run = 0;
    char more[96] = "";

    for (int k = 0; k < ranks; k++) {
        tensors += all[k].tensors;
        done += all[k].done;
        failed += all[k].failed;
        not_run += all[k].canceled;
    }
    if (failed)
        snprintf(more, sizeof(more), "; %lld failed", (long long)failed);
    fprintf(stderr, "graphrun run: %s: %lld of %lld done, written%s; %lld not run%s\n",
            status_name(rc), (long long)done, (long long)tensors, more, (long long)not_run,
            s->manifest_path ? "; rerun with --resume" : "");
    if (s->plan.src.stdout_file)
        fprintf(stderr, "graphrun run: --output -: nothing written to stdout (only a run that "
                        "succeeds writes its tensor there)\n");
}

/* Step 4's end and step 5, per tensor: this rank's manifest, the agreement, the run's
 * manifest (rank 0: with --mpi merged from the ranks' own, which it then removes), the
 * report. */
static int finish_per_tensor(run_state *s, int rc)
{
    gr_ranks *r = &s->ranks;
    bool lead = r->world.rank == 0, multi = gr_ranks_multi(r);
    gr_run_report *all = NULL;
    gr_run_facts f = {.ranks = r->world.size, .mpi = multi};
    int64_t outputs;
    char why[512];

    if (multi && write_live_manifest(s, status_name(rc), true) != GR_OK && rc == GR_EXIT_OK)
        rc = GR_EXIT_FAILED;
    snprintf(s->report.host, sizeof(s->report.host), "%s", r->world.host);
    if (lead && (all = calloc((size_t)r->world.size, sizeof(*all))) == NULL) {
        fprintf(stderr, "graphrun run: no memory for the ranks' reports\n");
        if (r->mpi)
            r->mpi->abort(GR_EXIT_RUNTIME);
        return GR_EXIT_RUNTIME;
    }
    gr_ranks_gather(r, "reporting", &s->report, sizeof(s->report), all);
    rc = gr_ranks_agree(r, "writing outputs", rc, s->why);
    outputs = s->report.outputs;
    gr_ranks_reduce(r, "reporting", &outputs, 1, GR_MPI_SUM);
    f.status = status_name(rc);
    f.outputs_written = outputs;
    f.manifest = s->manifest_path;
    if (lead && f.manifest) {
        json_t *doc = manifest_json(s, all, &f);

        if (gr_manifest_write(&s->manifest, doc, why, sizeof(why)) != GR_OK ||
            gr_manifest_publish(&s->manifest, why, sizeof(why)) != GR_OK) {
            fprintf(stderr, "graphrun run: %s (the outputs written are whole)\n", why);
            gr_manifest_abort(&s->manifest);
            f.manifest = NULL;
            if (rc == GR_EXIT_OK)
                rc = GR_EXIT_FAILED;
            f.status = status_name(rc);
        } else if (multi) {
            for (int k = 0; k < r->world.size; k++) {
                snprintf(why, sizeof(why), "%s.rank%d", s->manifest_path, k);
                unlink(why);
            }
        }
        json_decref(doc);
    }
    if (lead) {
        if (rc != GR_EXIT_OK)
            say_kept(s, all, r->world.size, rc);
        print_summary(s, all, &f);
    }
    free(all);
    return rc;
}

/* Step 4's end and step 5, --all-or-nothing: gather the reports, agree, publish or remove,
 * report. */
static int finish_all_or_nothing(run_state *s, int rc)
{
    gr_ranks *r = &s->ranks;
    bool lead = r->world.rank == 0;
    gr_run_report *all = NULL;
    gr_run_facts f = {.ranks = r->world.size, .mpi = gr_ranks_multi(r)};
    int64_t outputs = (int64_t)(s->plan.count * s->a.o.n_outputs), wrote_rc = rc;
    char why[512];

    snprintf(s->report.host, sizeof(s->report.host), "%s", r->world.host);
    if (lead && (all = calloc((size_t)r->world.size, sizeof(*all))) == NULL) {
        fprintf(stderr, "graphrun run: no memory for the ranks' reports\n");
        if (r->mpi)
            r->mpi->abort(GR_EXIT_RUNTIME);
        return GR_EXIT_RUNTIME;
    }
    gr_ranks_gather(r, "reporting", &s->report, sizeof(s->report), all);
    /* Every rank's outcome so far, and every rank's output count, known to all. */
    gr_ranks_reduce(r, "reporting", &wrote_rc, 1, GR_MPI_MAX);
    gr_ranks_reduce(r, "reporting", &outputs, 1, GR_MPI_SUM);
    f.manifest = s->manifest.path;
    f.status = "ok";
    f.outputs_written = outputs;
    if (lead && wrote_rc == GR_EXIT_OK && f.manifest != NULL) {
        json_t *doc;

        for (uint64_t i = 0; i < s->plan.count; i++) { /* as they will be once renamed */
            gr_ledger_entry *e = &s->ledger.e[i];

            e->outcome = GR_OUTCOME_DONE;
            for (uint32_t p = 0; p < s->a.o.n_outputs; p++) {
                struct stat sb;
                const char *tmp = s->plan.tmp[i * s->a.o.n_outputs + p];

                e->out_size[p] = tmp && stat(tmp, &sb) == 0 ? (int64_t)sb.st_size : -1;
            }
        }
        doc = manifest_json(s, all, &f);
        if (gr_manifest_write(&s->manifest, doc, s->why, sizeof(s->why)) != GR_OK)
            rc = GR_EXIT_FAILED;
        json_decref(doc);
    }
    rc = gr_ranks_agree(r, "writing outputs", rc, s->why);
    if (rc == GR_EXIT_OK) {
        int prc = gr_io_publish(&s->plan, why, sizeof(why)) == GR_OK ? 0 : GR_EXIT_FAILED;

        rc = gr_ranks_agree(r, "publishing outputs", prc, why);
        if (rc != GR_EXIT_OK && lead && r->mpi)
            fprintf(stderr, "graphrun run: renaming outputs into place failed: the outputs of "
                            "the ranks that did not fail are in place; no manifest\n");
        if (rc == GR_EXIT_OK && lead && f.manifest &&
            gr_manifest_publish(&s->manifest, why, sizeof(why)) != GR_OK) {
            fprintf(stderr, "graphrun run: %s (the outputs are in place)\n", why);
            rc = GR_EXIT_FAILED;
        }
    }
    if (rc != GR_EXIT_OK) {
        remove_temporaries(s);
        f.outputs_written = 0;
        f.manifest = NULL;
        if (lead)
            fprintf(stderr, "graphrun run: %s: no output written\n", status_name(rc));
    }
    f.status = status_name(rc);
    if (lead)
        print_summary(s, all, &f);
    free(all);
    return rc;
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
static bool wants_json(int argc, char **argv)
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

/* --json's object for a run that ended before its job ran (the reason: the last line
 * printed for it), with what the input directories held that is not a tensor once they
 * were listed (src: NULL before). */
static void print_refusal(int rc, const char *why, const gr_inputs *src)
{
    const char *status = rc == GR_EXIT_USAGE      ? "refused"
                         : rc == GR_EXIT_CANCELED ? "interrupted"
                                                  : "error";
    json_t *doc = gr_run_refusal_json(status, rc, why);

    if (src)
        add_skipped(doc, src);

    json_dumpf(doc, stdout, JSON_COMPACT);
    fputc('\n', stdout);
    fflush(stdout);
    json_decref(doc);
}

/* The command line's own mistakes, printed on stderr as ever and kept for --json (stderr
 * is a variable one may assign in the GNU C library, as its manual says). */
static int parse_args_kept(int argc, char **argv, run_args *a, bool json, char *why,
                           size_t why_len)
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

int gr_cmd_run(int argc, char **argv)
{
    const char *var = NULL;
    run_state *s = calloc(1, sizeof(*s));
    struct sigaction sa;
    int launched, rc, tensor_fd = -1;

    if (s == NULL) {
        fprintf(stderr, "graphrun run: out of memory\n");
        return GR_EXIT_RUNTIME;
    }
    if (!gr_run_opts_init(&s->a.o, "run")) {
        rc = GR_EXIT_USAGE;
        goto out_free;
    }
    if ((rc = parse_args_kept(argc, argv, &s->a, wants_json(argc, argv), s->why,
                              sizeof(s->why))) >= 0) {
        if (rc != GR_EXIT_OK && wants_json(argc, argv))
            print_refusal(rc, s->why, NULL);
        goto out_free;
    }
    if (s->a.to_stdout) {
        /* stdout is the tensor's: every report, this command's and the runtime's, goes to
         * stderr, and the tensor to the real stdout once the run has succeeded. */
        fflush(stdout);
        if ((tensor_fd = dup(STDOUT_FILENO)) < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
            fprintf(stderr, "graphrun run: --output -: cannot set stdout aside: %s\n",
                    strerror(errno));
            rc = GR_EXIT_RUNTIME;
            goto out_free;
        }
    }
    launched = gr_ranks_launched(&var);
    if (!s->a.mpi && launched > 1) {
        fprintf(stderr,
                "graphrun run: started as one of %d MPI ranks (%s is set) but without --mpi: "
                "each rank would run every tensor and write the same outputs; add --mpi to "
                "share the tensors among the ranks\n",
                launched, var);
        rc = GR_EXIT_USAGE;
        goto out_free;
    }
    if (s->a.mpi) {
        if (gr_ranks_start_mpi(&s->ranks, s->a.mpi_timeout, &interrupted, s->why,
                               sizeof(s->why)) != 0) {
            fprintf(stderr, "graphrun run: %s\n", s->why);
            rc = GR_EXIT_RUNTIME;
            goto out_free;
        }
    } else {
        gr_ranks_single(&s->ranks);
    }
    s->ranks.cleanup = remove_temporaries;
    s->ranks.cleanup_arg = s;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal; /* no SA_RESTART: waits return to look at the flag */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    rc = check_setup(s);
    if ((rc = gr_ranks_agree(&s->ranks, "checking the graph and the backend", rc, s->why)) != 0)
        goto out;
    if (gr_ranks_multi(&s->ranks)) {
        /* What decides the shards and the outputs must be the same on every rank. */
        const char *what[] = {s->a.o.graph,
                              s->a.o.dtype,
                              s->a.o.force ? "force" : "",
                              s->a.o.have_shape ? "shape" : "",
                              s->a.resume ? "resume" : "",
                              s->a.keep_going ? "keep-going" : "",
                              s->a.all_or_nothing ? "all-or-nothing" : "",
                              s->a.manifest};
        uint64_t h = hash_strings(0xcbf29ce484222325ull, what, 8);

        h = hash_strings(h, s->a.o.inputs, s->a.o.n_inputs);
        h = hash_strings(h, s->a.o.outputs, s->a.o.n_outputs);
        for (uint32_t d = 0; s->a.o.have_shape && d < s->a.o.shape.ndim; d++)
            h = (h ^ s->a.o.shape.dims[d]) * 0x100000001b3ull;
        rc = same_everywhere(&s->ranks, "checking the command line", (int64_t)h)
                 ? GR_EXIT_OK
                 : GR_EXIT_USAGE;
        if (rc != GR_EXIT_OK) {
            if (s->ranks.world.rank == 0)
                fprintf(stderr, "graphrun run: the ranks were not all given the same --graph, "
                                "--input, --output, --dtype, --shape, --force, --manifest, "
                                "--resume, --keep-going and --all-or-nothing\n");
            goto out;
        }
    }

    rc = load_inputs(s);
    if ((rc = gr_ranks_agree(&s->ranks, "loading inputs", rc, s->why)) != 0)
        goto out;
    if (gr_ranks_multi(&s->ranks)) {
        /* Every rank must see the same tensors (a file system shared by every node): the
         * same paths, from a directory's listing or a list's lines. */
        uint64_t h = hash_strings(s->plan.total, (const char *const *)s->plan.src.in,
                                  s->plan.total * s->a.o.n_inputs);

        if (!same_everywhere(&s->ranks, "listing inputs", (int64_t)h)) {
            if (s->ranks.world.rank == 0)
                fprintf(stderr, "graphrun run: the ranks do not see the same input files (is "
                                "%s on a file system every node shares?)\n",
                        s->a.o.inputs[0]);
            rc = GR_EXIT_USAGE;
            goto out;
        }
    }
    rc = start_runtime(s);
    if ((rc = gr_ranks_agree(&s->ranks, "starting the runtime", rc, s->why)) != 0)
        goto out;
    if (s->resume_from_nothing && s->ranks.world.rank == 0)
        fprintf(stderr, "graphrun run: --resume: no manifest at %s: running every tensor\n",
                s->manifest_path);
    rc = run_job(s);
    if (!s->refused)
        rc = s->a.all_or_nothing ? finish_all_or_nothing(s, rc) : finish_per_tensor(s, rc);
    if (rc == GR_EXIT_OK && tensor_fd >= 0 &&
        gr_inputs_emit_stdout(&s->plan.src, tensor_fd, s->why, sizeof(s->why)) != GR_OK) {
        fprintf(stderr, "graphrun run: %s\n", s->why);
        rc = GR_EXIT_FAILED;
    }
out:
    if (!s->reported && s->a.o.json && s->ranks.world.rank == 0 && rc != GR_EXIT_OK)
        print_refusal(rc, s->why[0] ? s->why : "a rank failed: see the messages on stderr",
                      &s->plan.src);
    remove_temporaries(s);
    gr_io_unstage(&s->plan); /* a run that wrote nothing leaves no directory either */
    gr_runtime_destroy(s->rt);
    if (s->sampler) {
        uint64_t base, peak, total;
        gr_devmem_stop(s->sampler, &base, &peak, &total);
    }
    gr_ranks_finish(&s->ranks);
    gr_ledger_free(&s->ledger);
    gr_io_plan_free(&s->plan);
    gr_manifest_free(&s->manifest);
    gr_manifest_free(&s->own);
    free(s->manifest_path);
    free(s->own_path);
    free(s->skip);
    free(s->job_index);
    json_decref(s->earlier[0]);
    json_decref(s->earlier[1]);
    json_decref(s->settings);
    for (uint64_t k = 0; k < s->n_claimed; k++)
        free(s->claimed[k]);
    free(s->claimed);
    gr_graph_destroy(s->g);
out_free:
    if (tensor_fd >= 0)
        close(tensor_fd);
    free(s);
    return rc;
}
