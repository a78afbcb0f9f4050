/*
 * server.h - graphserve's HTTP side: libmicrohttpd in front of a graphrun runtime.
 *
 *   POST /v1/run?pipeline=NAME      run one tensor (the body) through a loaded pipeline
 *   POST /v1/run?spec=TEXT          ... or through a graph spec given in the request
 *                                   (URL-encoded, docs/GRAPH_SPEC.md), parsed per request
 *        &shape=3,4                 optional, for a raw body (1-D without it)
 *   GET  /v1/pipelines              the loaded pipelines, one per line: name, port counts
 *                                   and the ports' element types
 *   GET  /metrics                   graphrun's statistics and the server's, Prometheus text
 *   GET  /healthz                   200 "ok", or 503 when a device is lost or shutting down
 *
 * The body holds the pipeline's input port type (a .npy of another type is refused, saying
 * how to convert it), and the result comes back in the request's format (codec.h) in the
 * output port's type. Errors are text/plain, one line starting "error: ", with a status
 * saying whose fault it is: 400 a malformed request (bad .npy, a body of another type than
 * the input port's, bad shape, bad spec with its line and column, a graph that is not one
 * input and one output), 404 an unknown pipeline or path, 405 a wrong method, 413 a body
 * over the limit or a tensor that can never fit the device budget, 503 too many requests in
 * flight (with Retry-After), a lost device or shutdown, 504 the request's deadline, 500
 * anything else.
 */
#ifndef GS_SERVER_H
#define GS_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include <graphrun.h>
#include "tools/graphserve/pipelines.h"

typedef struct gs_server gs_server;

typedef struct gs_server_config {
    gr_runtime *rt;                /* used, not owned */
    const gs_pipelines *pipelines; /* used, not owned; outlives the server */
    const char *bind;              /* IPv4 address to listen on, e.g. "127.0.0.1" */
    uint16_t port;                 /* 0: any free port (see gs_server_port) */
    uint64_t max_body;             /* bytes; larger bodies get 413 */
    unsigned max_inflight;         /* run requests at once; more get 503 */
    unsigned threads;              /* HTTP threads */
    unsigned max_connections;
    int64_t timeout_ns;            /* per run request, from the end of its upload */
} gs_server_config;

/* Start listening. On failure returns nonzero with the reason in `why`. */
int gs_server_start(const gs_server_config *cfg, gs_server **out, char *why, size_t why_len);

/* The port it listens on. */
uint16_t gs_server_port(const gs_server *s);

/*
 * Stop cleanly, in this order: refuse new run requests (503) and stop accepting
 * connections; let requests in flight finish for up to `drain_ns`; then shut the runtime
 * down (gr_runtime_shutdown: queued work is canceled and answered 503, running iterations
 * finish) and wait for those answers to be sent; give uploads still arriving 2 s to finish
 * (answered 503); then close the remaining connections (idle, or stalled mid-upload) and
 * free the server. The runtime is left for the caller to destroy. Returns the number of run
 * requests the shutdown canceled (queued, or refused because their upload ended after it).
 */
uint64_t gs_server_stop(gs_server *s, int64_t drain_ns);

#endif /* GS_SERVER_H */
