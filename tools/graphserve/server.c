/*
 * server.c - graphserve's HTTP side (server.h): libmicrohttpd with a pool of polling
 * threads, requests suspended while their job runs and resumed by its completion callback.
 *
 * A run request, step by step (all on the HTTP thread that owns its connection, except the
 * callback):
 *   1. headers: route; refuse at once what must not be read (a body announced over the
 *      limit: 413; too many requests in flight: 503; shutting down: 503), then admit it:
 *      it counts in `inflight` until libmicrohttpd reports it completed (answer sent, or
 *      the connection gone). Other refusals (unknown pipeline, ...) are decided here but
 *      answered after the body, so that a client that sends its body before reading gets
 *      the answer instead of a reset connection.
 *   2. body: copied into one buffer, sized from Content-Length, never past --max-body
 *      (a chunked body that grows past it is dropped and answered 413 at its end).
 *   3. end of body: pick the graph, decode the tensor as its input port's type (codec.h),
 *      allocate the output in its output port's type with room for the response's header,
 *      submit a one-tensor job whose callback resumes the connection, and suspend it,
 *      unless the job has already ended.
 *   4. resumed: the job is complete; answer with the output buffer itself (no copy; the
 *      library frees it with the response) or with the job's error.
 *
 * The callback/suspend race: the job may end before the handler suspends (or even inside
 * gr_job_submit). Both sides take the request's mutex: the handler suspends only if the job
 * has not ended; the callback resumes only if the handler has suspended. Lock order:
 * request mutex, then libmicrohttpd's own (inside suspend and resume), then the server's
 * `mu` (the drain waits); libmicrohttpd calls no handler of ours with its lock held.
 * The handler waits for the job (gr_job_wait) before freeing anything the callback touches,
 * and gr_job_wait returns only after the callback has returned.
 *
 * Memory: at most max_inflight requests hold a body (<= max_body) and an output plus a
 * header. The output has the body's elements (or a fixed port's) in the output port's type,
 * at most 8 times the body's bytes (uint8 in, float64 out), so the server's tensor memory is
 * bounded by about 9 * max_inflight * max_body.
 */
#define _GNU_SOURCE
#include "tools/graphserve/server.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tools/graphserve/codec.h"

#define RUN_PATH "/v1/run"
#define CONNECTION_POOL (64 * 1024) /* per connection: headers and the query (a spec) */
#define IDLE_TIMEOUT_S 30
#define METRICS_EXTRA 4096 /* room for the server's own metrics after the library's */
#define UPLOAD_GRACE_NS (2 * 1000000000ll) /* at stop, for uploads still arriving */

static const unsigned codes[] = {200, 400, 404, 405, 413, 500, 503, 504};
#define N_CODES (sizeof(codes) / sizeof(codes[0]))

struct gs_server {
    gs_server_config cfg;
    struct MHD_Daemon *daemon;
    uint16_t port;
    atomic_bool stopping;
    atomic_uint inflight; /* run requests admitted and not completed */
    atomic_uint running;  /* ... of which a job was submitted for */
    _Atomic uint64_t answered[N_CODES + 1]; /* by code; the last: any other */
    _Atomic uint64_t canceled;              /* run requests the shutdown canceled */
    pthread_mutex_t mu;                     /* with cond: wakes gs_server_stop's waits */
    pthread_cond_t cond;
};

typedef enum phase {
    PHASE_UPLOAD,  /* receiving the body */
    PHASE_RUNNING, /* job submitted */
    PHASE_ANSWERED,
} phase;

typedef struct request {
    gs_server *srv;
    struct MHD_Connection *conn;
    phase phase;
    bool counted_running;
    int error_code; /* decided early, answered at the end of the body */
    char error[512];
    unsigned char *body;
    size_t len, cap;
    const gr_graph *graph; /* a pipeline's; NULL: the spec argument's */
    char pipeline[GS_PIPELINE_NAME_MAX + 1]; /* its name */
    gs_tensor_desc desc;
    unsigned char *out; /* header + data, until handed to the response */
    size_t out_len;
    gr_job *job;
    pthread_mutex_t mu; /* guards done and suspended */
    bool done, suspended;
} request;

/* ------------------------------------------------------------------------------------- */
/* Answers.                                                                               */

static void count_answer(gs_server *s, unsigned code)
{
    size_t i = 0;

    while (i < N_CODES && codes[i] != code)
        i++;
    atomic_fetch_add_explicit(&s->answered[i], 1, memory_order_relaxed);
}

/* Queue `resp` (consumed) with `code`. */
static enum MHD_Result answer(gs_server *s, struct MHD_Connection *conn, unsigned code,
                              struct MHD_Response *resp)
{
    enum MHD_Result ret;

    if (resp == NULL)
        return MHD_NO; /* no memory for a response: drop the connection */
    if (atomic_load(&s->stopping))
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    ret = MHD_queue_response(conn, code, resp);
    MHD_destroy_response(resp);
    if (ret == MHD_YES)
        count_answer(s, code);
    return ret;
}

static enum MHD_Result answer_text(gs_server *s, struct MHD_Connection *conn, unsigned code,
                                   const char *content_type, const char *text)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_MUST_COPY);

    if (resp != NULL)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    return answer(s, conn, code, resp);
}

static enum MHD_Result answer_error(gs_server *s, struct MHD_Connection *conn, unsigned code,
                                    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static enum MHD_Result answer_error(gs_server *s, struct MHD_Connection *conn, unsigned code,
                                    const char *fmt, ...)
{
    char text[1024];
    struct MHD_Response *resp;
    va_list ap;
    int n;

    n = snprintf(text, sizeof(text), "error: ");
    va_start(ap, fmt);
    vsnprintf(text + n, sizeof(text) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    strcat(text, "\n");
    resp = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_COPY);
    if (resp != NULL) {
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
        if (code == 503)
            MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    }
    return answer(s, conn, code, resp);
}

/* The HTTP status for a runtime status: whose fault it is. */
static unsigned http_code(gr_status st)
{
    switch (st) {
    case GR_OK:
        return 200;
    case GR_ERR_INVALID_ARGUMENT:
    case GR_ERR_INVALID_USAGE:
        return 400;
    case GR_ERR_OVER_BUDGET:
        return 413;
    case GR_ERR_TIMEOUT:
        return 504;
    case GR_ERR_CANCELED:
    case GR_ERR_SHUTDOWN:
    case GR_ERR_DEVICE_LOST:
    case GR_ERR_UNAVAILABLE:
    case GR_ERR_OUT_OF_MEMORY:
        return 503;
    default:
        return 500;
    }
}

/* ------------------------------------------------------------------------------------- */
/* GET endpoints.                                                                         */

static enum MHD_Result get_metrics(gs_server *s, struct MHD_Connection *conn)
{
    size_t cap = 32768, n, at;
    struct MHD_Response *resp;
    char *buf = NULL;

    for (;;) {
        char *grown = realloc(buf, cap + METRICS_EXTRA);

        if (grown == NULL) {
            free(buf);
            return answer_error(s, conn, 503, "no memory for the metrics");
        }
        buf = grown;
        n = gr_runtime_stats_prometheus(s->cfg.rt, buf, cap);
        if (n == 0) {
            free(buf);
            return answer_error(s, conn, 500, "cannot read the runtime's statistics");
        }
        if (n < cap)
            break;
        cap = n + n / 4 + 1024; /* counters grow between calls: leave room */
    }
    at = n;
    at += (size_t)snprintf(buf + at, cap + METRICS_EXTRA - at,
                           "# HELP graphserve_requests_total HTTP answers sent, by status code.\n"
                           "# TYPE graphserve_requests_total counter\n");
    for (size_t i = 0; i <= N_CODES; i++) {
        char code[16];

        if (i < N_CODES)
            snprintf(code, sizeof(code), "%u", codes[i]);
        else
            snprintf(code, sizeof(code), "other");
        at += (size_t)snprintf(buf + at, cap + METRICS_EXTRA - at,
                               "graphserve_requests_total{code=\"%s\"} %llu\n", code,
                               (unsigned long long)atomic_load(&s->answered[i]));
    }
    at += (size_t)snprintf(buf + at, cap + METRICS_EXTRA - at,
                           "# HELP graphserve_requests_in_flight Run requests admitted and not "
                           "yet completed.\n"
                           "# TYPE graphserve_requests_in_flight gauge\n"
                           "graphserve_requests_in_flight %u\n"
                           "# HELP graphserve_requests_max_in_flight The limit (--max-inflight).\n"
                           "# TYPE graphserve_requests_max_in_flight gauge\n"
                           "graphserve_requests_max_in_flight %u\n",
                           atomic_load(&s->inflight), s->cfg.max_inflight);
    resp = MHD_create_response_from_buffer(at, buf, MHD_RESPMEM_MUST_FREE);
    if (resp == NULL) {
        free(buf);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                            "text/plain; version=0.0.4; charset=utf-8");
    return answer(s, conn, 200, resp);
}

static enum MHD_Result get_healthz(gs_server *s, struct MHD_Connection *conn)
{
    gr_runtime_info info = GR_RUNTIME_INFO_INIT;
    gr_stats st = GR_STATS_INIT;
    char text[256];

    if (atomic_load(&s->stopping))
        return answer_error(s, conn, 503, "shutting down");
    if (gr_runtime_info_get(s->cfg.rt, &info) != GR_OK)
        return answer_error(s, conn, 500, "cannot read the runtime's state");
    for (uint32_t d = 0; d < info.device_count; d++) {
        if (gr_runtime_stats_get(s->cfg.rt, d, &st) != GR_OK)
            return answer_error(s, conn, 500, "cannot read the runtime's statistics");
        if (st.lost)
            return answer_error(s, conn, 503, "device %u lost (%u of %u device(s) lost)", d,
                                st.devices_lost, st.device_count);
    }
    snprintf(text, sizeof(text), "ok: %s backend, %u device(s), %u run request(s) in flight\n",
             gr_backend_name(info.backend), info.device_count, atomic_load(&s->inflight));
    return answer_text(s, conn, 200, "text/plain; charset=utf-8", text);
}

/* The element types of a graph's ports, "float32,uint8". */
static void port_types(const gr_graph *g, int output, char *buf, size_t size)
{
    uint32_t n = output ? gr_graph_output_count(g) : gr_graph_input_count(g);
    size_t at = 0;

    buf[0] = '\0';
    for (uint32_t p = 0; p < n && at < size; p++) {
        gr_port_info info;
        int w;

        if (gr_graph_port_get(g, output, p, &info) != GR_OK)
            break;
        w = snprintf(buf + at, size - at, "%s%s", p ? "," : "", gr_dtype_name(info.dtype));
        if (w < 0)
            break;
        at += (size_t)w;
    }
}

static enum MHD_Result get_pipelines(gs_server *s, struct MHD_Connection *conn)
{
    const gs_pipelines *p = s->cfg.pipelines;
    size_t size = 64 + p->count * (GS_PIPELINE_NAME_MAX + 32 + 2 * GR_MAX_PORTS * 10), at = 0;
    struct MHD_Response *resp;
    char *buf = malloc(size);

    if (buf == NULL)
        return answer_error(s, conn, 503, "no memory");
    at += (size_t)snprintf(buf + at, size - at, "# name inputs outputs input_types "
                                                "output_types\n");
    for (size_t i = 0; i < p->count; i++) {
        char in[GR_MAX_PORTS * 10], out[GR_MAX_PORTS * 10];

        port_types(p->items[i].graph, 0, in, sizeof(in));
        port_types(p->items[i].graph, 1, out, sizeof(out));
        at += (size_t)snprintf(buf + at, size - at, "%s %u %u %s %s\n", p->items[i].name,
                               gr_graph_input_count(p->items[i].graph),
                               gr_graph_output_count(p->items[i].graph), in, out);
    }
    resp = MHD_create_response_from_buffer(at, buf, MHD_RESPMEM_MUST_FREE);
    if (resp == NULL) {
        free(buf);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
    return answer(s, conn, 200, resp);
}

/* ------------------------------------------------------------------------------------- */
/* Run requests.                                                                          */

static void request_error(request *r, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void request_error(request *r, int code, const char *fmt, ...)
{
    va_list ap;

    if (r->error_code != 0)
        return; /* the first reason stands */
    r->error_code = code;
    va_start(ap, fmt);
    vsnprintf(r->error, sizeof(r->error), fmt, ap);
    va_end(ap);
    free(r->body);
    r->body = NULL;
    r->len = r->cap = 0;
}

/* Step 1: headers of POST /v1/run. Refuses at once, or admits the request. */
static enum MHD_Result admit(gs_server *s, struct MHD_Connection *conn, void **con_cls)
{
    const char *length = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                     MHD_HTTP_HEADER_CONTENT_LENGTH);
    const char *pipeline = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "pipeline");
    const char *spec = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "spec");
    unsigned long long announced = 0;
    unsigned before;
    request *r;

    if (atomic_load(&s->stopping))
        return answer_error(s, conn, 503, "shutting down: not taking new work");
    if (length != NULL) {
        char *end;

        announced = strtoull(length, &end, 10);
        if (*length == '\0' || *end != '\0')
            return answer_error(s, conn, 400, "bad Content-Length \"%.32s\"", length);
        if (announced > s->cfg.max_body)
            return answer_error(s, conn, 413,
                                "body of %llu bytes is over this server's limit of %llu bytes "
                                "(--max-body)",
                                announced, (unsigned long long)s->cfg.max_body);
    }
    before = atomic_fetch_add(&s->inflight, 1);
    if (before >= s->cfg.max_inflight) {
        atomic_fetch_sub(&s->inflight, 1);
        return answer_error(s, conn, 503,
                            "busy: %u run requests in flight, the limit (--max-inflight) is "
                            "%u; retry later",
                            before, s->cfg.max_inflight);
    }
    r = calloc(1, sizeof(*r));
    if (r == NULL || pthread_mutex_init(&r->mu, NULL) != 0) {
        free(r);
        atomic_fetch_sub(&s->inflight, 1);
        return answer_error(s, conn, 503, "no memory for a request");
    }
    r->srv = s;
    r->conn = conn;
    r->phase = PHASE_UPLOAD;
    *con_cls = r;

    if (pipeline != NULL && spec != NULL) {
        request_error(r, 400, "give either ?pipeline=NAME or ?spec=TEXT, not both");
    } else if (pipeline == NULL && spec == NULL) {
        request_error(r, 400, "say which graph: ?pipeline=NAME (GET /v1/pipelines lists them) "
                              "or ?spec=TEXT (a URL-encoded graph spec)");
    } else if (pipeline != NULL) {
        const gs_pipeline *p = gs_pipelines_find(s->cfg.pipelines, pipeline);

        if (p == NULL) {
            char names[256];

            gs_pipelines_names(s->cfg.pipelines, names, sizeof(names));
            request_error(r, 404, "unknown pipeline \"%.64s\"; loaded: %s", pipeline, names);
        } else {
            r->graph = p->graph;
            snprintf(r->pipeline, sizeof(r->pipeline), "%s", p->name);
        }
    }
    if (r->error_code == 0 && announced > 0) {
        r->body = malloc(announced);
        if (r->body == NULL)
            request_error(r, 503, "no memory for a body of %llu bytes", announced);
        r->cap = announced;
    }
    return MHD_YES;
}

/* Step 2: a piece of the body. */
static void take(request *r, const char *data, size_t n)
{
    uint64_t limit = r->srv->cfg.max_body;

    if (r->error_code != 0)
        return; /* being refused: drop the rest */
    if (n > limit - r->len) {
        request_error(r, 413, "body is over this server's limit of %llu bytes (--max-body)",
                      (unsigned long long)limit);
        return;
    }
    if (r->len + n > r->cap) {
        size_t cap = r->cap ? r->cap : 65536;
        unsigned char *grown;

        while (cap < r->len + n)
            cap *= 2;
        if (cap > limit)
            cap = limit;
        grown = realloc(r->body, cap);
        if (grown == NULL) {
            request_error(r, 503, "no memory for a body of %zu bytes", cap);
            return;
        }
        r->body = grown;
        r->cap = cap;
    }
    memcpy(r->body + r->len, data, n);
    r->len += n;
}

/* The job's completion callback, on whichever thread ended it: resume the connection if
 * the handler has suspended it. Touches nothing of the request after unlocking. */
static void job_done(gr_job *job, gr_status status, void *user)
{
    request *r = user;

    (void)job;
    (void)status;
    pthread_mutex_lock(&r->mu);
    r->done = true;
    if (r->suspended) {
        r->suspended = false;
        MHD_resume_connection(r->conn);
    }
    pthread_mutex_unlock(&r->mu);
}

/* Step 4: the job is complete (or was refused): answer. */
static enum MHD_Result finish(gs_server *s, request *r)
{
    struct MHD_Connection *conn = r->conn;
    gr_status result = GR_ERR_INTERNAL;
    struct MHD_Response *resp;
    gr_error_info err;

    /* Returns at once: the job ended, and only after its callback has returned. */
    gr_job_wait(r->job, GR_WAIT_FOREVER, &result);
    gr_job_error_get(r->job, &err);
    gr_job_destroy(r->job);
    r->job = NULL;
    free(r->body);
    r->body = NULL;
    r->phase = PHASE_ANSWERED;
    if (result != GR_OK) {
        if (result == GR_ERR_SHUTDOWN || result == GR_ERR_CANCELED)
            atomic_fetch_add(&s->canceled, 1);
        if (result == GR_ERR_TIMEOUT)
            return answer_error(s, conn, 504, "the request's deadline (%.3f s) passed: %s",
                                (double)s->cfg.timeout_ns / 1e9, err.message);
        return answer_error(s, conn, http_code(result), "%s: %s", gr_status_str(result),
                            err.message);
    }
    resp = MHD_create_response_from_buffer(r->out_len, r->out, MHD_RESPMEM_MUST_FREE);
    if (resp == NULL)
        return MHD_NO; /* r->out is freed with the request */
    r->out = NULL;    /* the response owns it now */
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, gs_content_type(&r->desc));
    return answer(s, conn, 200, resp);
}

/* The tensor's shape from the body's, as `graphrun run` gives it: its leading dimensions
 * folded into one past GR_MAX_DIMS, so the last ones (the rows kernels work along) stay. */
static void set_shape(gr_tensor *t, const gs_tensor_desc *d)
{
    uint32_t fold = d->ndim > GR_MAX_DIMS ? d->ndim - GR_MAX_DIMS + 1 : 1;

    t->rank = 0;
    if (d->ndim == 0)
        return;
    t->shape[0] = 1;
    for (uint32_t i = 0; i < fold; i++)
        t->shape[0] *= d->shape[i];
    for (uint32_t i = fold; i < d->ndim; i++)
        t->shape[i - fold + 1] = d->shape[i];
    t->rank = d->ndim - fold + 1;
}

/* Step 3: the whole body is in. */
static enum MHD_Result run(gs_server *s, request *r)
{
    struct MHD_Connection *conn = r->conn;
    const char *content_type = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                           MHD_HTTP_HEADER_CONTENT_TYPE);
    const char *shape = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "shape");
    gr_job_options opts = GR_JOB_OPTIONS_INIT;
    gr_graph *parsed = NULL;
    const gr_graph *g = r->graph;
    char why[1024], header[1024], port[GS_PIPELINE_NAME_MAX + 32];
    gr_port_info in, out;
    gs_tensor_desc result;
    gr_error_info err;
    size_t header_len;
    uint32_t size;
    gr_tensor t;
    gr_status st;
    int code;

    r->phase = PHASE_ANSWERED; /* every path below answers, or suspends (then RUNNING) */
    if (r->error_code != 0)
        return answer_error(s, conn, (unsigned)r->error_code, "%s", r->error);
    if (g == NULL) {
        const char *spec = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "spec");

        if (gr_graph_parse(spec, strlen(spec), "spec", &parsed, &err) != GR_OK)
            return answer_error(s, conn, 400, "bad graph spec: %s", err.message);
        g = parsed;
        snprintf(port, sizeof(port), "the spec's in0");
    } else {
        snprintf(port, sizeof(port), "pipeline %s's in0", r->pipeline);
    }
    if (gr_graph_input_count(g) != 1 || gr_graph_output_count(g) != 1) {
        unsigned n_in = gr_graph_input_count(g), n_out = gr_graph_output_count(g);

        gr_graph_destroy(parsed);
        return answer_error(s, conn, 400,
                            "the graph has %u input(s) and %u output(s); graphserve runs "
                            "graphs with one input and one output",
                            n_in, n_out);
    }
    if (gr_graph_port_get(g, 0, 0, &in) != GR_OK || gr_graph_port_get(g, 1, 0, &out) != GR_OK) {
        gr_graph_destroy(parsed);
        return answer_error(s, conn, 500, "cannot read the graph's ports");
    }
    /* The body in the input port's type, the result in the output port's. */
    code = gs_decode(r->body, r->len, content_type, shape, in.dtype, port, &r->desc, why,
                     sizeof(why));
    if (code == 0 && in.fixed_elems != 0 && r->desc.elems != in.fixed_elems) {
        snprintf(why, sizeof(why), "%s takes exactly %llu elements (a fixed buffer); the body "
                 "holds %llu", port, (unsigned long long)in.fixed_elems,
                 (unsigned long long)r->desc.elems);
        code = 400;
    }
    if (code != 0) {
        gr_graph_destroy(parsed);
        return answer_error(s, conn, (unsigned)code, "%s", why);
    }
    size = gr_dtype_size(in.dtype);
    /* NumPy aligns the data to 64 bytes; a header that does not leaves it unaligned for the
     * type, so move it to the start of the buffer. */
    if (r->desc.offset % size != 0) {
        memmove(r->body, r->body + r->desc.offset, r->desc.elems * size);
        r->desc.offset = 0;
    }
    if (r->desc.swap)
        gr_npy_swap(r->body + r->desc.offset, r->desc.elems, size);
    result = r->desc;
    result.dtype = out.dtype;
    if (out.fixed_elems != 0) { /* a reduction's result, say: 1-D of the port's size */
        result.ndim = 1;
        result.shape[0] = result.elems = out.fixed_elems;
    }
    header_len = gs_encode_header(&result, header, sizeof(header));
    if (header_len == SIZE_MAX) {
        gr_graph_destroy(parsed);
        return answer_error(s, conn, 500, "cannot format the result's .npy header");
    }
    r->out_len = header_len + result.elems * gr_dtype_size(out.dtype);
    r->out = malloc(r->out_len);
    if (r->out == NULL) {
        gr_graph_destroy(parsed);
        return answer_error(s, conn, 503, "no memory for a result of %zu bytes", r->out_len);
    }
    memcpy(r->out, header, header_len);

    memset(&t, 0, sizeof(t));
    t.in[0] = r->body + r->desc.offset;
    t.out[0] = r->out + header_len;
    t.elems = r->desc.elems;
    set_shape(&t, &r->desc);
    opts.deadline_ns = gr_now_ns() + s->cfg.timeout_ns;
    opts.on_complete = job_done;
    opts.user = r;
    r->counted_running = true;
    atomic_fetch_add(&s->running, 1);
    st = gr_job_submit(s->cfg.rt, (gr_graph *)g, &t, 1, &opts, &r->job, &err);
    gr_graph_destroy(parsed); /* the job holds its own reference */
    if (st != GR_OK) {
        if (st == GR_ERR_SHUTDOWN)
            atomic_fetch_add(&s->canceled, 1);
        return answer_error(s, conn, http_code(st), "%s: %s", gr_status_str(st), err.message);
    }

    pthread_mutex_lock(&r->mu);
    if (!r->done) {
        r->suspended = true;
        r->phase = PHASE_RUNNING;
        MHD_suspend_connection(conn);
        pthread_mutex_unlock(&r->mu);
        return MHD_YES;
    }
    pthread_mutex_unlock(&r->mu);
    return finish(s, r);
}

/* ------------------------------------------------------------------------------------- */
/* libmicrohttpd callbacks.                                                               */

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **con_cls)
{
    gs_server *s = cls;
    request *r = *con_cls;
    bool get = strcmp(method, MHD_HTTP_METHOD_GET) == 0 ||
               strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;

    (void)version;
    if (r == NULL) {
        if (strcmp(url, RUN_PATH) == 0) {
            if (strcmp(method, MHD_HTTP_METHOD_POST) != 0) {
                struct MHD_Response *resp;
                const char *text = "error: POST a tensor to " RUN_PATH "\n";

                resp = MHD_create_response_from_buffer(strlen(text), (void *)text,
                                                       MHD_RESPMEM_PERSISTENT);
                if (resp != NULL) {
                    MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, "POST");
                    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                                            "text/plain; charset=utf-8");
                }
                return answer(s, conn, 405, resp);
            }
            return admit(s, conn, con_cls);
        }
        if (strcmp(url, "/metrics") == 0 || strcmp(url, "/healthz") == 0 ||
            strcmp(url, "/v1/pipelines") == 0) {
            if (!get)
                return answer_error(s, conn, 405, "%s takes GET", url);
            if (url[1] == 'm')
                return get_metrics(s, conn);
            if (url[1] == 'h')
                return get_healthz(s, conn);
            return get_pipelines(s, conn);
        }
        return answer_error(s, conn, 404,
                            "no such path \"%.128s\"; try POST " RUN_PATH
                            "?pipeline=NAME, GET /v1/pipelines, GET /metrics, GET /healthz",
                            url);
    }
    switch (r->phase) {
    case PHASE_UPLOAD:
        if (*upload_data_size != 0) {
            take(r, upload_data, *upload_data_size);
            *upload_data_size = 0;
            return MHD_YES;
        }
        return run(s, r);
    case PHASE_RUNNING:
        return finish(s, r);
    case PHASE_ANSWERED:
        break;
    }
    *upload_data_size = 0; /* answered already: ignore anything more */
    return MHD_YES;
}

/* The request is over: its answer was sent, or its connection is gone. */
static void completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                      enum MHD_RequestTerminationCode why)
{
    gs_server *s = cls;
    request *r = *con_cls;

    (void)conn;
    (void)why;
    if (r == NULL)
        return;
    *con_cls = NULL;
    if (r->job != NULL) { /* not answered (the connection broke): stop and wait for it */
        gr_job_cancel(r->job);
        gr_job_wait(r->job, GR_WAIT_FOREVER, NULL);
        gr_job_destroy(r->job);
    }
    free(r->body);
    free(r->out);
    pthread_mutex_destroy(&r->mu);
    pthread_mutex_lock(&s->mu);
    if (r->counted_running)
        atomic_fetch_sub(&s->running, 1);
    atomic_fetch_sub(&s->inflight, 1);
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);
    free(r);
}

/* ------------------------------------------------------------------------------------- */

int gs_server_start(const gs_server_config *cfg, gs_server **out, char *why, size_t why_len)
{
    gs_server *s = calloc(1, sizeof(*s));
    struct sockaddr_in addr;
    const union MHD_DaemonInfo *info;
    /* poll(), not epoll: with epoll and a thread pool, MHD_quiesce_daemon (gs_server_stop)
     * and a worker's own loop both take the listening socket out of the worker's epoll set,
     * unsynchronized, and the one that loses (ENOENT) aborts the process ("Failed to remove
     * listen FD from epoll set", libmicrohttpd 0.9.75). With poll() each worker leaves the
     * socket out of its next poll set once quiesced: nothing to remove, nothing to lose. */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_ALLOW_SUSPEND_RESUME |
                     MHD_USE_ERROR_LOG;

    *out = NULL;
    if (s == NULL) {
        snprintf(why, why_len, "no memory");
        return -1;
    }
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_port = htons(cfg->port);
    if (inet_pton(AF_INET, cfg->bind, &addr.sin_addr) != 1) {
        snprintf(why, why_len, "bad IPv4 address to bind: %s", cfg->bind);
        free(s);
        return -1;
    }
    s->cfg = *cfg;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cond, NULL);
    s->daemon = MHD_start_daemon(
        flags, cfg->port, NULL, NULL, handle, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned)cfg->threads, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)cfg->max_connections, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)IDLE_TIMEOUT_S,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONNECTION_POOL,
        MHD_OPTION_NOTIFY_COMPLETED, completed, s, MHD_OPTION_END);
    if (s->daemon == NULL) {
        snprintf(why, why_len, "cannot listen on %s:%u (in use, or not allowed?)", cfg->bind,
                 cfg->port);
        pthread_cond_destroy(&s->cond);
        pthread_mutex_destroy(&s->mu);
        free(s);
        return -1;
    }
    info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : cfg->port;
    *out = s;
    return 0;
}

uint16_t gs_server_port(const gs_server *s)
{
    return s->port;
}

/* Wait until `*count` is 0 or `deadline` (gr_now_ns clock) passes; true when it is 0. */
static bool wait_zero(gs_server *s, atomic_uint *count, int64_t deadline)
{
    bool zero;

    pthread_mutex_lock(&s->mu);
    while (atomic_load(count) != 0 && gr_now_ns() < deadline) {
        struct timespec ts;
        int64_t left = deadline - gr_now_ns(), step = left < 50000000 ? left : 50000000;

        /* The condition variable runs on CLOCK_REALTIME; sleep in short steps measured on
         * the monotonic clock, so a clock change cannot stretch the drain. */
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += step > 0 ? step : 0;
        ts.tv_sec += ts.tv_nsec / 1000000000;
        ts.tv_nsec %= 1000000000;
        pthread_cond_timedwait(&s->cond, &s->mu, &ts);
    }
    zero = atomic_load(count) == 0;
    pthread_mutex_unlock(&s->mu);
    return zero;
}

uint64_t gs_server_stop(gs_server *s, int64_t drain_ns)
{
    MHD_socket listener;
    uint64_t canceled;

    atomic_store(&s->stopping, true);
    listener = MHD_quiesce_daemon(s->daemon);
    if (listener != MHD_INVALID_SOCKET)
        close(listener);
    wait_zero(s, &s->inflight, gr_now_ns() + drain_ns);
    /* What is still running now is canceled (queued) or finishes (executing); every job
     * then completes, its callback resumes its connection, and its answer goes out. A run
     * request whose upload ends from now on is refused by gr_job_submit: none suspends. */
    gr_runtime_shutdown(s->cfg.rt);
    if (!wait_zero(s, &s->running, gr_now_ns() + 60 * 1000000000ll)) {
        /* Cannot happen while the runtime keeps its promise that every job completes
         * after shutdown; stopping the daemon with a suspended connection would be worse
         * than leaving it to the exit. */
        fprintf(stderr, "graphserve: %u request(s) still running after shutdown; not "
                        "closing their connections\n",
                atomic_load(&s->running));
        return atomic_load(&s->canceled);
    }
    /* Uploads still arriving get a moment to finish and be answered (503: the runtime is
     * shut down); connections that are idle, or stalled mid-upload, are then closed. */
    wait_zero(s, &s->inflight, gr_now_ns() + UPLOAD_GRACE_NS);
    MHD_stop_daemon(s->daemon);
    canceled = atomic_load(&s->canceled);
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->mu);
    free(s);
    return canceled;
}
