/*
 * main.c - graphserve: an example HTTP server embedding graphrun (server.h has the API it
 * serves). It shows the embedding a C server needs: one runtime for the whole process,
 * pipelines parsed once and shared, a job per request with a completion callback instead of
 * a blocked thread, the library's log callback, /metrics from the library's renderer, and a
 * shutdown that finishes or cancels what is in flight.
 *
 * Signals: SIGTERM and SIGINT are blocked before any thread starts (the runtime's workers
 * and the HTTP threads inherit the mask), and the main thread takes them with sigwait, so a
 * signal never lands in the middle of library code. The first one drains and stops
 * (gs_server_stop, then gr_runtime_destroy); exit status 0 when that went cleanly.
 */
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <graphrun.h>
#include "tools/graphrun/cli.h"
#include "tools/graphserve/pipelines.h"
#include "tools/graphserve/server.h"

#define EXIT_USAGE 2
#define EXIT_START 3

static const char usage[] =
    "usage: graphserve [options]\n"
    "\n"
    "Serve graphrun pipelines over HTTP (tools/graphserve/server.h, README.md):\n"
    "  POST /v1/run?pipeline=NAME   a tensor (.npy or raw, of the pipeline's input type)\n"
    "                               in, the result (of its output type) out\n"
    "  POST /v1/run?spec=TEXT       the same through a graph spec given in the request\n"
    "  GET  /v1/pipelines, /metrics (Prometheus), /healthz\n"
    "\n"
    "  --port N            TCP port (default 8080; 0: any free one, printed at start)\n"
    "  --bind ADDR         IPv4 address to listen on (default 127.0.0.1)\n"
    "  --graphs DIR        pipelines: every DIR/NAME.graph (default graph/examples)\n"
    "  --backend B         host, cuda or auto (default auto)\n"
    "  --budget SIZE       device memory budget per device (default 256MiB)\n"
    "  --workers N         worker threads per device (default 3)\n"
    "  --max-body SIZE     largest request body (default 16MiB; more: 413)\n"
    "  --max-inflight N    run requests at once (default 64; more: 503)\n"
    "  --max-connections N open connections (default 1024)\n"
    "  --http-threads N    HTTP threads (default 2)\n"
    "  --timeout SECONDS   deadline of each run request (default 30; then 504)\n"
    "  --drain SECONDS     on SIGTERM, time in-flight requests get to finish before\n"
    "                      what is left is canceled (default 10)\n"
    "  --log-level L       debug, info, warn, error or off (default info; GR_LOG wins)\n"
    "  --help              this text\n"
    "\n"
    "Exit status: 0 stopped cleanly by SIGTERM or SIGINT, 2 bad command line,\n"
    "3 could not start (bad pipeline, port in use, no device).\n";

static void log_line(gr_log_level level, const char *message, void *user)
{
    struct timespec ts;
    struct tm tm;
    char when[32];

    (void)user;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
    fprintf(stderr, "graphserve: %s.%03ldZ %s: %s\n", when, ts.tv_nsec / 1000000,
            gr_log_level_name(level), message);
}

static bool parse_level(const char *s, gr_log_level *out)
{
    for (int l = GR_LOG_DEBUG; l <= GR_LOG_OFF; l++) {
        if (strcmp(s, gr_log_level_name((gr_log_level)l)) == 0) {
            *out = (gr_log_level)l;
            return true;
        }
    }
    return false;
}

static bool parse_seconds(const char *s, double *out)
{
    char *end;

    *out = strtod(s, &end);
    return *s != '\0' && *end == '\0' && *out > 0 && *out < 1e6;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"port", required_argument, NULL, 'p'},
        {"bind", required_argument, NULL, 'a'},
        {"graphs", required_argument, NULL, 'g'},
        {"backend", required_argument, NULL, 'k'},
        {"budget", required_argument, NULL, 'b'},
        {"workers", required_argument, NULL, 'w'},
        {"max-body", required_argument, NULL, 'm'},
        {"max-inflight", required_argument, NULL, 'i'},
        {"max-connections", required_argument, NULL, 'c'},
        {"http-threads", required_argument, NULL, 't'},
        {"timeout", required_argument, NULL, 'T'},
        {"drain", required_argument, NULL, 'd'},
        {"log-level", required_argument, NULL, 'l'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    gs_server_config scfg = {
        .bind = "127.0.0.1", .port = 8080, .max_body = 16u << 20, .max_inflight = 64,
        .threads = 2, .max_connections = 1024, .timeout_ns = 30 * 1000000000ll,
    };
    gr_config cfg = GR_CONFIG_INIT;
    const char *graphs = "graph/examples";
    double timeout_s = 30, drain_s = 10;
    gs_pipelines pipelines;
    gr_runtime_info info = GR_RUNTIME_INFO_INIT;
    gr_error_info err;
    gs_server *server;
    gr_runtime *rt;
    sigset_t stop;
    char why[512], budget[32];
    uint64_t v, canceled;
    uint32_t seen = 0;
    int opt, sig, idx = 0;

    cfg.budget_bytes = 256ull << 20;
    cfg.log_callback = log_line;
    while ((opt = getopt_long(argc, argv, "h", longopts, &idx)) != -1) {
        bool ok = true;

        if (!gr_cli_once(&seen, opt, "pagkbwmictTdl", "graphserve", longopts))
            return EXIT_USAGE;
        switch (opt) {
        case 'p':
            ok = gr_cli_parse_u64(optarg, &v) && v <= 65535;
            scfg.port = (uint16_t)v;
            break;
        case 'a':
            scfg.bind = optarg;
            break;
        case 'g':
            graphs = optarg;
            break;
        case 'k':
            if (strcmp(optarg, "host") == 0)
                cfg.backend = GR_BACKEND_HOST;
            else if (strcmp(optarg, "cuda") == 0)
                cfg.backend = GR_BACKEND_CUDA;
            else if (strcmp(optarg, "auto") == 0)
                cfg.backend = GR_BACKEND_AUTO;
            else
                ok = false;
            break;
        case 'b':
            /* The runtime's floor, said here in the flag's terms. */
            if (!gr_cli_parse_size(optarg, &cfg.budget_bytes) ||
                cfg.budget_bytes < GR_BUFFER_ALIGN) {
                fprintf(stderr, "graphserve: invalid value \"%s\" for --budget%s; at least "
                                "256 bytes, 2 MiB on CUDA\n",
                        optarg, GR_CLI_SIZE_FORMS);
                return EXIT_USAGE;
            }
            break;
        case 'w':
            ok = gr_cli_parse_u64(optarg, &v) && v >= 1 && v <= 1024;
            cfg.workers_per_device = (uint32_t)v;
            break;
        case 'm':
            ok = gr_cli_parse_size(optarg, &scfg.max_body) && scfg.max_body > 0 &&
                 scfg.max_body <= (1ull << 40);
            break;
        case 'i':
            ok = gr_cli_parse_u64(optarg, &v) && v >= 1 && v <= 1000000;
            scfg.max_inflight = (unsigned)v;
            break;
        case 'c':
            ok = gr_cli_parse_u64(optarg, &v) && v >= 1 && v <= 1000000;
            scfg.max_connections = (unsigned)v;
            break;
        case 't':
            ok = gr_cli_parse_u64(optarg, &v) && v >= 1 && v <= 256;
            scfg.threads = (unsigned)v;
            break;
        case 'T':
            ok = parse_seconds(optarg, &timeout_s);
            scfg.timeout_ns = (int64_t)(timeout_s * 1e9);
            break;
        case 'd':
            ok = parse_seconds(optarg, &drain_s);
            break;
        case 'l':
            ok = parse_level(optarg, &cfg.log_level);
            break;
        case 'h':
            fputs(usage, stdout);
            return 0;
        default: /* getopt has named the option */
            fprintf(stderr, "graphserve: see 'graphserve --help' for the options\n");
            return EXIT_USAGE;
        }
        if (!ok) {
            fprintf(stderr, "graphserve: invalid value \"%s\" for --%s (see --help)\n", optarg,
                    longopts[idx].name);
            return EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "graphserve: unexpected argument \"%s\" (see --help)\n", argv[optind]);
        return EXIT_USAGE;
    }

    /* Before any thread exists, so that every thread inherits the mask. */
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);

    if (gs_pipelines_load(graphs, &pipelines, why, sizeof(why)) != GR_OK) {
        fprintf(stderr, "graphserve: %s\n", why);
        return EXIT_START;
    }
    if (gr_runtime_create(&cfg, &rt, &err) != GR_OK) {
        fprintf(stderr, "graphserve: the runtime could not start: %s\n", err.message);
        gs_pipelines_free(&pipelines);
        return EXIT_START;
    }
    scfg.rt = rt;
    scfg.pipelines = &pipelines;
    if (gs_server_start(&scfg, &server, why, sizeof(why)) != 0) {
        fprintf(stderr, "graphserve: %s\n", why);
        gr_runtime_destroy(rt);
        gs_pipelines_free(&pipelines);
        return EXIT_START;
    }
    gr_runtime_info_get(rt, &info);
    gs_pipelines_names(&pipelines, why, sizeof(why));
    printf("graphserve: listening on http://%s:%u (%s backend, %u device(s), budget %s per "
           "device; pipelines: %s)\n",
           scfg.bind, gs_server_port(server), gr_backend_name(info.backend), info.device_count,
           gr_cli_bytes(info.budget_bytes, budget, sizeof(budget)), why);
    fflush(stdout);

    if (sigwait(&stop, &sig) != 0)
        sig = SIGTERM;
    fprintf(stderr, "graphserve: %s: draining (up to %.1f s), then stopping\n",
            sig == SIGINT ? "SIGINT" : "SIGTERM", drain_s);
    canceled = gs_server_stop(server, (int64_t)(drain_s * 1e9));
    gr_runtime_destroy(rt);
    gs_pipelines_free(&pipelines);
    fprintf(stderr, "graphserve: stopped; %llu request(s) canceled by the shutdown\n",
            (unsigned long long)canceled);
    return 0;
}
