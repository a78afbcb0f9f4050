/*
 * run.c - `graphrun run`: stream tensors from files through a graph spec and write the
 * results, with live progress on a terminal, clean cancellation on Ctrl-C and an optional
 * JSON summary; with --mpi, as one rank of an MPI job that shares the tensors.
 *
 * Outputs are all-or-nothing (io.h): written only when every tensor is done, first to
 * temporary files, then renamed into place; a failed or interrupted run writes nothing.
 *
 * The steps, the same for one process and for every rank of an MPI job (ranks.h):
 *   1. check the graph and the backend, and pick this rank's device;
 *   2. plan this rank's shard of the tensors (tensor i goes to rank i % ranks), create the
 *      temporary outputs, load the inputs;
 *   3. start the runtime;
 *   4. run the job and write the outputs into their temporary files; rank 0 gathers every
 *      rank's report and writes the manifest's temporary file;
 *   5. only when every rank got through 4: rename every output (and then the manifest) into
 *      place.
 * After each step the ranks agree (ranks.h): when any rank failed, every rank removes its
 * temporary files and exits with the same status, and rank 0 says which rank failed and why.
 * Static shards, not dynamic sharing: each rank reads only its own inputs, and on equal
 * devices equal shards finish together; within a rank, the runtime already shares the work
 * dynamically among its devices.
 */
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <graphrun.h>
#include "tools/graphrun/cli.h"
#include "tools/graphrun/commands.h"
#include "tools/graphrun/cuda_measure.h"
#include "tools/graphrun/inputs.h"
#include "tools/graphrun/io.h"
#include "tools/graphrun/opts.h"
#include "tools/graphrun/progress.h"
#include "tools/graphrun/ranks.h"
#include "tools/graphrun/run_report.h"

#define DEFAULT_MPI_TIMEOUT_S 600
#define POLL_NS (200 * 1000000ll)

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
            "  --manifest FILE  write a JSON manifest of the run (with --mpi: which rank wrote\n"
            "                   which tensor), all or nothing like the outputs (default with\n"
            "                   --mpi: OUTPUT.manifest.json beside the first --output)\n"
            "  --mpi            run as one rank of an MPI job (mpirun -np N graphrun run --mpi\n"
            "                   ...): tensor i goes to rank i %% N, each rank uses one device\n"
            "                   (its local rank's, among --devices), writes its own outputs,\n"
            "                   all or nothing over every rank; rank 0 prints the summary\n"
            "  --mpi-timeout S  --mpi: the longest a rank waits for the others at a step before\n"
            "                   it aborts the job (default %d; 0: no limit)\n"
            "  --help           this text\n" GR_RUNTIME_OPTIONS_HELP
            "\n"
            "A flag that takes one value is given once; one that does not apply is refused\n"
            "(--contexts private on the host backend, --host-devices on CUDA; a warning when\n"
            "auto chose the backend). 'graphrun check' tries the same command line without\n"
            "running it.\n"
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
            "Outputs are all or nothing: written, complete, only when every tensor is done.\n"
            "Exit status: 0 done, 1 some tensors failed (nothing written), 2 bad command\n"
            "line, graph or input, 3 the runtime could not start, 130 interrupted (Ctrl-C or\n"
            "SIGTERM; in-flight iterations finish, nothing written). With --mpi every rank\n"
            "exits with the highest status of any rank.\n",
            DEFAULT_MPI_TIMEOUT_S);
}

#define MAX_KERNEL_FILES 16

typedef struct run_args {
    const char *graph;
    const char *kernels[MAX_KERNEL_FILES];
    uint32_t n_kernels;
    const char **inputs, **outputs;
    uint32_t n_inputs, n_outputs;
    const char *dtype;
    gr_io_shape shape;
    bool have_shape, force, json, ceilings, mpi, raw, have_timeout;
    bool to_stdout; /* an --output is `-` */
    int progress;
    double mpi_timeout;
    const char *manifest;
    gr_runtime_opts rt;
} run_args;

static int parse_args(int argc, char **argv, run_args *a)
{
    static const struct option longopts[] = {
        GR_RUNTIME_LONGOPTS,
        {"graph", required_argument, NULL, 'g'},
        {"kernels", required_argument, NULL, 'K'},
        {"input", required_argument, NULL, 'i'},
        {"output", required_argument, NULL, 'o'},
        {"dtype", required_argument, NULL, 'd'},
        {"shape", required_argument, NULL, 'S'},
        {"force", no_argument, NULL, 'f'},
        {"ceilings", no_argument, NULL, 'C'},
        {"json", no_argument, NULL, 'j'},
        {"progress", required_argument, NULL, 'P'},
        {"manifest", required_argument, NULL, 'M'},
        {"mpi", no_argument, NULL, 'I'},
        {"mpi-timeout", required_argument, NULL, 'T'},
        {"raw", no_argument, NULL, 'R'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    uint32_t seen = 0;
    int opt, r;
    char *end;

    optind = 1;
    a->mpi_timeout = DEFAULT_MPI_TIMEOUT_S;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        if (!gr_cli_once(&seen, opt, "gdSPMT", "graphrun run", longopts))
            return GR_EXIT_USAGE;
        switch (opt) {
        case 'g':
            a->graph = optarg;
            break;
        case 'K':
            if (a->n_kernels == MAX_KERNEL_FILES) {
                fprintf(stderr, "graphrun run: at most %d --kernels files\n", MAX_KERNEL_FILES);
                return GR_EXIT_USAGE;
            }
            a->kernels[a->n_kernels++] = optarg;
            break;
        case 'i':
            if (a->n_inputs == GR_MAX_PORTS)
                goto too_many;
            a->inputs[a->n_inputs++] = optarg;
            break;
        case 'o':
            if (a->n_outputs == GR_MAX_PORTS)
                goto too_many;
            a->outputs[a->n_outputs++] = optarg;
            break;
        case 'd':
            a->dtype = optarg;
            break;
        case 'S':
            if (!gr_io_parse_shape(optarg, &a->shape)) {
                fprintf(stderr, "graphrun run: invalid value '%s' for --shape (want e.g. 3,4)\n",
                        optarg);
                return GR_EXIT_USAGE;
            }
            a->have_shape = true;
            break;
        case 'f':
            a->force = true;
            break;
        case 'C':
            a->ceilings = true;
            break;
        case 'j':
            a->json = true;
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
        case 'T':
            a->mpi_timeout = strtod(optarg, &end);
            if (*optarg == '\0' || *end != '\0' || !(a->mpi_timeout >= 0)) {
                fprintf(stderr, "graphrun run: invalid value '%s' for --mpi-timeout (seconds)\n",
                        optarg);
                return GR_EXIT_USAGE;
            }
            a->have_timeout = true;
            break;
        case 'R':
            a->raw = true;
            break;
        case 'h':
            usage(stdout);
            return GR_EXIT_OK;
        default:
            r = gr_runtime_opt("run", opt, optarg, &a->rt);
            if (r == 1)
                break;
            if (r == 0)
                gr_cli_try_help("run");
            return GR_EXIT_USAGE;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "graphrun run: unexpected argument '%s'\n", argv[optind]);
        return GR_EXIT_USAGE;
    }
    if (a->graph == NULL || a->n_inputs == 0 || a->n_outputs == 0) {
        fprintf(stderr, "graphrun run: --graph, --input and --output are required\n");
        gr_cli_try_help("run");
        return GR_EXIT_USAGE;
    }
    for (uint32_t p = 0; p < a->n_outputs; p++)
        a->to_stdout |= strcmp(a->outputs[p], "-") == 0;
    if (a->have_timeout && !a->mpi) {
        fprintf(stderr, "graphrun run: --mpi-timeout applies to --mpi runs only: drop it or add "
                        "--mpi\n");
        return GR_EXIT_USAGE;
    }
    if (a->to_stdout && a->json) {
        fprintf(stderr, "graphrun run: --json prints on stdout, which --output - takes for the "
                        "tensor: drop --json, or write the tensor to a file (the report goes "
                        "to stderr with --output -)\n");
        return GR_EXIT_USAGE;
    }
    if (a->mpi) {
        for (uint32_t p = 0; p < a->n_inputs || p < a->n_outputs; p++)
            if ((p < a->n_inputs && strcmp(a->inputs[p], "-") == 0) ||
                (p < a->n_outputs && strcmp(a->outputs[p], "-") == 0)) {
                fprintf(stderr, "graphrun run: --input - and --output - (stdin, stdout) hold "
                                "one tensor of one process, not of --mpi ranks\n");
                return GR_EXIT_USAGE;
            }
    }
    return -1; /* go on */
too_many:
    fprintf(stderr, "graphrun run: at most %d inputs and %d outputs\n", GR_MAX_PORTS,
            GR_MAX_PORTS);
    return GR_EXIT_USAGE;
}

/* Everything one run holds, so that any step can clean up after the others. */
typedef struct run_state {
    run_args a;
    gr_ranks ranks;
    gr_graph *g;
    gr_backend chosen;
    gr_io_plan plan;
    gr_manifest manifest;
    char *manifest_path; /* when one is written */
    gr_runtime *rt;
    gr_devmem_sampler *sampler;
    gr_run_report report; /* this rank's */
    char why[512];
} run_state;

/* On leaving early (ranks.h): nothing of this rank may stay behind. */
static void remove_temporaries(void *arg)
{
    run_state *s = arg;

    gr_io_abort(&s->plan);
    gr_manifest_abort(&s->manifest);
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
    gr_error_info err;
    uint32_t count = 0;

    for (uint32_t k = 0; k < a->n_kernels; k++)
        if (gr_kernel_load_file(a->kernels[k], &err) != GR_OK) {
            snprintf(s->why, sizeof(s->why), "--kernels: %s", err.message);
            return GR_EXIT_USAGE;
        }
    if (gr_graph_load(a->graph, &s->g, &err) != GR_OK) {
        snprintf(s->why, sizeof(s->why), "%s", err.message);
        return GR_EXIT_USAGE;
    }
    if (a->n_inputs != gr_graph_input_count(s->g) ||
        a->n_outputs != gr_graph_output_count(s->g)) {
        snprintf(s->why, sizeof(s->why),
                 "%s takes %u input(s) and %u output(s); got %u --input and %u --output",
                 a->graph, gr_graph_input_count(s->g), gr_graph_output_count(s->g), a->n_inputs,
                 a->n_outputs);
        return GR_EXIT_USAGE;
    }
    if (gr_runtime_opts_resolve(&a->rt, &s->chosen, &err) != GR_OK ||
        gr_backend_probe(s->chosen, &count, NULL, &err) != GR_OK) {
        if (err.status == GR_ERR_INVALID_ARGUMENT) { /* the command line's */
            snprintf(s->why, sizeof(s->why), "%s", err.message);
            return GR_EXIT_USAGE;
        }
        snprintf(s->why, sizeof(s->why), "backend %s: %s", gr_backend_name(a->rt.cfg.backend),
                 err.message);
        return GR_EXIT_RUNTIME;
    }
    if (gr_ranks_multi(&s->ranks)) {
        int pool = a->rt.cfg.device_count
                       ? (int)a->rt.cfg.device_count
                       : (int)(s->chosen == GR_BACKEND_HOST ? a->rt.cfg.host_devices : count);
        int mine = a->rt.cfg.device_count ? a->rt.devices[s->ranks.world.local_rank % pool]
                                          : s->ranks.world.local_rank % pool;

        a->rt.devices[0] = mine;
        a->rt.cfg.devices = a->rt.devices;
        a->rt.cfg.device_count = 1;
    }
    s->report.backend = s->chosen;
    s->report.ordinal = a->rt.cfg.device_count ? a->rt.devices[0] : 0;
    if (a->ceilings && s->chosen != GR_BACKEND_CUDA) {
        if (a->rt.cfg.backend != GR_BACKEND_AUTO) {
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

/* The manifest's path: --manifest, or with --mpi OUTPUT.manifest.json beside the first
 * output (a file, or a directory: never inside it, where it would pass for a tensor). */
static char *manifest_path(const run_args *a, bool multi)
{
    const char *out = a->outputs[0];
    size_t n = strlen(out);
    char *p;

    if (a->manifest)
        return strdup(a->manifest);
    if (!multi)
        return NULL;
    while (n > 1 && out[n - 1] == '/')
        n--;
    if ((p = malloc(n + sizeof(".manifest.json"))) != NULL)
        snprintf(p, n + sizeof(".manifest.json"), "%.*s.manifest.json", (int)n, out);
    return p;
}

/* Step 2: plan this rank's shard, create its temporary outputs (and rank 0 the manifest's),
 * load its inputs. */
static int load_inputs(run_state *s)
{
    run_args *a = &s->a;
    gr_io_options io = {0};
    gr_status st;

    io.inputs = a->inputs;
    io.n_inputs = a->n_inputs;
    io.outputs = a->outputs;
    io.n_outputs = a->n_outputs;
    io.raw_dtype = a->dtype;
    io.raw_shape = a->have_shape ? &a->shape : NULL;
    io.raw_flag = a->raw ? "--raw" : a->dtype ? "--dtype" : a->have_shape ? "--shape" : NULL;
    io.stage_stdout = true;
    io.force = a->force;
    io.memory = (gr_mem_kind)a->rt.memory;
    io.shard = (uint32_t)s->ranks.world.rank;
    io.shards = (uint32_t)s->ranks.world.size;
    for (uint32_t p = 0; p < a->n_inputs || p < a->n_outputs; p++) {
        gr_port_info port;

        if (p < a->n_inputs && gr_graph_port_get(s->g, 0, p, &port) == GR_OK) {
            io.in_fixed[p] = port.fixed_elems;
            io.in_dtype[p] = port.dtype;
        }
        if (p < a->n_outputs && gr_graph_port_get(s->g, 1, p, &port) == GR_OK) {
            io.out_fixed[p] = port.fixed_elems;
            io.out_dtype[p] = port.dtype;
        }
    }
    if (gr_io_plan_create(&io, &s->plan, s->why, sizeof(s->why)) != GR_OK ||
        gr_io_stage(&s->plan, s->why, sizeof(s->why)) != GR_OK)
        return GR_EXIT_USAGE;
    if (s->ranks.world.rank == 0)
        gr_inputs_warn_skipped(&s->plan.src, "run");
    s->manifest_path = manifest_path(a, gr_ranks_multi(&s->ranks));
    if (s->manifest_path != NULL && s->ranks.world.rank == 0 &&
        gr_manifest_stage(&s->manifest, s->manifest_path, a->force, s->why, sizeof(s->why)) !=
            GR_OK)
        return GR_EXIT_USAGE;
    st = gr_io_load(&s->plan, &interrupted, s->why, sizeof(s->why));
    if (st == GR_ERR_CANCELED) {
        snprintf(s->why, sizeof(s->why), "interrupted while loading inputs: no output written");
        return GR_EXIT_CANCELED;
    }
    if (st != GR_OK)
        return st == GR_ERR_OUT_OF_MEMORY ? GR_EXIT_RUNTIME : GR_EXIT_USAGE;
    s->report.tensors = (int64_t)s->plan.count;
    s->report.outputs = (int64_t)(s->plan.count * a->n_outputs);
    s->report.bytes_in = (int64_t)s->plan.bytes_in;
    s->report.bytes_out = (int64_t)s->plan.bytes_out;
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

    if (s->plan.count == 0)
        return GR_EXIT_OK;
    for (uint64_t i = 0; i < s->plan.count; i++) {
        uint32_t lead = gr_io_lead_port(&s->plan.opt);
        uint64_t bytes = s->plan.in[i * a->n_inputs + lead].elems *
                         gr_dtype_size(s->plan.opt.in_dtype[lead]);

        if (s->plan.tensors[i].elems > largest)
            largest = s->plan.tensors[i].elems;
        if (bytes > copy)
            copy = bytes; /* the ceilings are measured at the largest input's size */
    }
    gr_graph_footprint(s->g, largest, &footprint);
    a->rt.cfg.budget_bytes = gr_runtime_opts_budget(&a->rt, s->chosen, footprint);
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
    if ((st = gr_runtime_create(&a->rt.cfg, &s->rt, &err)) != GR_OK) {
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

/* Step 4: the job, then the outputs into their temporary files. */
static int run_job(run_state *s)
{
    run_args *a = &s->a;
    gr_run_report *r = &s->report;
    gr_job *job = NULL;
    gr_progress progress;
    gr_error_info err, first;
    gr_runtime_info info;
    gr_status st, result = GR_OK;
    uint64_t base = 0, peak = 0, total = 0;
    int64_t t0;
    int rc = GR_EXIT_OK;

    if (s->plan.count == 0)
        return interrupted ? GR_EXIT_CANCELED : GR_EXIT_OK;
    t0 = gr_now_ns();
    if ((st = gr_job_submit(s->rt, s->g, s->plan.tensors, s->plan.count, NULL, &job, &err)) !=
        GR_OK) {
        snprintf(s->why, sizeof(s->why), "refused: %s: %s", gr_status_str(st), err.message);
        return GR_EXIT_USAGE;
    }
    gr_progress_start(&progress, s->ranks.world.rank == 0 ? a->progress : -1,
                      (s->plan.bytes_in + s->plan.bytes_out) / s->plan.count);
    while (gr_job_wait(job, POLL_NS, &result) == GR_ERR_TIMEOUT) {
        gr_job_progress jp;

        if (interrupted)
            gr_job_cancel(job); /* idempotent; in-flight iterations finish */
        gr_job_progress_get(job, &jp);
        gr_progress_draw(&progress, &jp, s->rt);
    }
    gr_progress_end(&progress);
    r->job_ns = gr_now_ns() - t0;
    {
        gr_job_progress p;

        gr_job_progress_get(job, &p);
        r->done = (int64_t)p.done;
        r->failed = (int64_t)p.failed;
        r->canceled = (int64_t)p.canceled;
    }
    gr_job_error_get(job, &first);
    r->first_status = first.status;
    if (first.status != GR_OK) {
        r->first_index = first.index < s->plan.count ? (int64_t)s->plan.index[first.index]
                                                     : (int64_t)first.index;
        snprintf(r->first_node, sizeof(r->first_node), "%s", first.node);
        snprintf(r->first_message, sizeof(r->first_message), "%s", first.message);
    }
    for (uint64_t i = 0; i < s->plan.count; i++) {
        gr_status ist = GR_OK;

        gr_job_index_get(job, i, NULL, &ist);
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
    } else if (result != GR_OK) {
        rc = GR_EXIT_FAILED;
        snprintf(s->why, sizeof(s->why), "%llu of %llu tensors failed; first: index %llu: %s: %s",
                 (unsigned long long)(r->failed + r->canceled), (unsigned long long)r->tensors,
                 (unsigned long long)r->first_index, gr_status_str(first.status),
                 first.message);
    } else if ((st = gr_io_write(&s->plan, &interrupted, s->why, sizeof(s->why))) != GR_OK) {
        rc = st == GR_ERR_CANCELED ? GR_EXIT_CANCELED : GR_EXIT_FAILED;
        if (st == GR_ERR_CANCELED)
            s->why[0] = '\0';
    }
    return rc;
}

static const char *status_name(int rc)
{
    return rc == GR_EXIT_OK ? "ok" : rc == GR_EXIT_CANCELED ? "interrupted" : "failed";
}

/* The manifest: the summary, and which rank wrote which tensor (tensor i: rank i % ranks). */
static json_t *manifest_json(const run_state *s, const gr_run_report *all,
                             const gr_run_facts *f)
{
    const run_args *a = &s->a;
    json_t *doc = gr_run_report_json(all, f), *files = json_array(), *v;
    char version[32];

    snprintf(version, sizeof(version), "%d.%d.%d", GR_VERSION_MAJOR, GR_VERSION_MINOR,
             GR_VERSION_PATCH);
    json_object_set_new(doc, "graphrun", json_string(version));
    if (s->ranks.mpi)
        json_object_set_new(doc, "mpi", json_string(s->ranks.mpi->library));
    json_object_set_new(doc, "graph", json_string(a->graph));
    v = json_array();
    for (uint32_t p = 0; p < a->n_inputs; p++)
        json_array_append_new(v, json_string(a->inputs[p]));
    json_object_set_new(doc, "inputs", v);
    v = json_array();
    for (uint32_t p = 0; p < a->n_outputs; p++)
        json_array_append_new(v, json_string(a->outputs[p]));
    json_object_set_new(doc, "outputs", v);
    for (uint64_t i = 0; i < s->plan.total; i++) {
        json_t *t = json_object(), *outs = json_array();
        const char *name = s->plan.names ? s->plan.names[i] : NULL;

        json_object_set_new(t, "index", json_integer((json_int_t)i));
        json_object_set_new(t, "rank", json_integer((json_int_t)(i % (uint64_t)f->ranks)));
        if (name)
            json_object_set_new(t, "name", json_string(name));
        for (uint32_t p = 0; p < a->n_outputs; p++)
            json_array_append_new(outs, json_string(s->plan.src.stdout_file
                                                        ? a->outputs[p]
                                                        : s->plan.src.out[i * a->n_outputs + p]));
        json_object_set_new(t, "outputs", outs);
        json_array_append_new(files, t);
    }
    json_object_set_new(doc, "files", files);
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

/* Step 4's end and step 5: gather the reports, agree, publish or remove, report. */
static int finish(run_state *s, int rc)
{
    gr_ranks *r = &s->ranks;
    bool lead = r->world.rank == 0;
    gr_run_report *all = NULL;
    gr_run_facts f = {.ranks = r->world.size, .mpi = gr_ranks_multi(r)};
    int64_t outputs = s->report.outputs, wrote_rc = rc;
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
        json_t *doc = manifest_json(s, all, &f);

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
    if (lead) {
        if (s->a.json) {
            json_t *doc = gr_run_report_json(all, &f);

            add_skipped(doc, &s->plan.src);
            json_dumpf(doc, stdout, JSON_COMPACT | JSON_REAL_PRECISION(9));
            fputc('\n', stdout);
            json_decref(doc);
        } else {
            gr_run_report_print(all, &f);
        }
        fflush(stdout);
    }
    free(all);
    return rc;
}

int gr_cmd_run(int argc, char **argv)
{
    const char *inputs[GR_MAX_PORTS], *outputs[GR_MAX_PORTS], *var = NULL;
    run_state *s = calloc(1, sizeof(*s));
    struct sigaction sa;
    int launched, rc, tensor_fd = -1;

    if (s == NULL) {
        fprintf(stderr, "graphrun run: out of memory\n");
        return GR_EXIT_RUNTIME;
    }
    s->a.inputs = inputs;
    s->a.outputs = outputs;
    if (!gr_runtime_opts_init(&s->a.rt, "run")) {
        rc = GR_EXIT_USAGE;
        goto out_free;
    }
    if ((rc = parse_args(argc, argv, &s->a)) >= 0)
        goto out_free;
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
        const char *what[] = {s->a.graph, s->a.dtype, s->a.force ? "force" : "",
                              s->a.have_shape ? "shape" : ""};
        uint64_t h = hash_strings(0xcbf29ce484222325ull, what, 4);

        h = hash_strings(h, inputs, s->a.n_inputs);
        h = hash_strings(h, outputs, s->a.n_outputs);
        for (uint32_t d = 0; s->a.have_shape && d < s->a.shape.ndim; d++)
            h = (h ^ s->a.shape.dims[d]) * 0x100000001b3ull;
        rc = same_everywhere(&s->ranks, "checking the command line", (int64_t)h)
                 ? GR_EXIT_OK
                 : GR_EXIT_USAGE;
        if (rc != GR_EXIT_OK) {
            if (s->ranks.world.rank == 0)
                fprintf(stderr, "graphrun run: the ranks were not all given the same --graph, "
                                "--input, --output, --dtype, --shape and --force\n");
            goto out;
        }
    }

    rc = load_inputs(s);
    if ((rc = gr_ranks_agree(&s->ranks, "loading inputs", rc, s->why)) != 0)
        goto out;
    if (gr_ranks_multi(&s->ranks)) {
        /* Every rank must see the same tensors (a file system shared by every node). */
        uint64_t h = hash_strings(s->plan.total, (const char *const *)s->plan.names,
                                  s->plan.names ? s->plan.total : 0);

        if (!same_everywhere(&s->ranks, "listing inputs", (int64_t)h)) {
            if (s->ranks.world.rank == 0)
                fprintf(stderr, "graphrun run: the ranks do not see the same input files (is "
                                "%s on a file system every node shares?)\n",
                        inputs[0]);
            rc = GR_EXIT_USAGE;
            goto out;
        }
    }
    rc = start_runtime(s);
    if ((rc = gr_ranks_agree(&s->ranks, "starting the runtime", rc, s->why)) != 0)
        goto out;
    rc = run_job(s);
    rc = finish(s, rc);
    if (rc == GR_EXIT_OK && tensor_fd >= 0 &&
        gr_inputs_emit_stdout(&s->plan.src, tensor_fd, s->why, sizeof(s->why)) != GR_OK) {
        fprintf(stderr, "graphrun run: %s\n", s->why);
        rc = GR_EXIT_FAILED;
    }
out:
    remove_temporaries(s);
    gr_runtime_destroy(s->rt);
    if (s->sampler) {
        uint64_t base, peak, total;
        gr_devmem_stop(s->sampler, &base, &peak, &total);
    }
    gr_ranks_finish(&s->ranks);
    gr_io_plan_free(&s->plan);
    gr_manifest_free(&s->manifest);
    free(s->manifest_path);
    gr_graph_destroy(s->g);
out_free:
    if (tensor_fd >= 0)
        close(tensor_fd);
    free(s);
    return rc;
}
