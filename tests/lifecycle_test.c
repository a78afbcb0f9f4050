/*
 * lifecycle_test.c - the runtime's and jobs' lifetimes racing each other, each case a race
 * that can free memory in use, lose work or hang:
 *   - gr_runtime_destroy while a submit is still validating a large job;
 *   - a lost device whose workers would swallow the healthy devices' work;
 *   - gr_runtime_destroy returning while another thread still runs a job's callback;
 *   - a completion callback submitting follow-up work into a full ring;
 *   - a detached job whose callback calls gr_job_destroy;
 *   - the deadline's contract for an iteration already executing;
 *   - every thread the runtime starts named as its own and joined by destroy (the stress
 *     test's leak check counts threads by these names).
 * Run under asan and tsan by tools/test: several of these only show as memory errors there.
 */
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "graph/graph.h"
#include "runtime/base/fault.h"
#include "runtime/job.h"
#include "runtime/runtime.h"
#include "runtime/base/sanitizers.h"
#include "tests/fixtures.h"
#include "tests/testing.h"
#include "tools/graphrun/workload.h"

/* The runtime behind a handle, for the checks that look inside. */
#define RT(handle) gr__runtime_get((handle), &(gr_status){GR_OK})

static gr_runtime *make_rt(uint32_t devices, uint32_t workers, uint64_t budget, uint32_t ring)
{
    return gr_test_runtime((gr_test_shape){.devices = devices,
                                           .workers = workers,
                                           .budget = budget,
                                           .ring = ring,
                                           .whole_tensors = true});
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* In-place one-element-or-more tensors over one array. */
static gr_tensor *tensors_over(float *data, uint64_t count, uint64_t elems)
{
    gr_tensor *t = calloc(count, sizeof(*t));

    for (uint64_t i = 0; i < count; i++) {
        t[i].in[0] = t[i].out[0] = data + i * elems;
        t[i].elems = elems;
    }
    return t;
}

/* ------------------------------------------------------------------------------------- */

typedef struct big_submit {
    gr_runtime *rt;
    gr_graph *g;
    gr_tensor *t;
    uint64_t n;
    gr_status st;
    gr_job *job;
    atomic_int entered;
} big_submit;

static void *big_submit_main(void *p)
{
    big_submit *a = p;

    atomic_store(&a->entered, 1);
    a->st = gr_job_submit(a->rt, a->g, a->t, a->n, NULL, &a->job, NULL);
    return NULL;
}

/* Validation of 2M tensors (a sort of their output ranges) takes a while; destroy during it
 * must wait for the submitter instead of freeing the runtime under it. */
static void destroy_waits_for_validating_submit(void)
{
    big_submit a = {0};
    float *data;
    pthread_t th;

    a.n = 2000000;
    data = calloc(a.n, sizeof(float));
    a.t = tensors_over(data, a.n, 1);
    a.rt = make_rt(1, 1, 1 << 20, 0);
    ASSERT_STATUS(gr_graph_create_seed(&a.g), GR_OK);
    pthread_create(&th, NULL, big_submit_main, &a);
    while (!atomic_load(&a.entered))
        ;
    sleep_ms(20);
    gr_runtime_destroy(a.rt);
    pthread_join(th, NULL);
    /* Either refused at shutdown, or accepted and complete (destroy ended every index). */
    if (a.st == GR_OK) {
        gr_job_progress p = GR_JOB_PROGRESS_INIT;
        ASSERT_STATUS(gr_job_wait(a.job, 0, NULL), GR_OK);
        ASSERT_STATUS(gr_job_progress_get(a.job, &p), GR_OK);
        ASSERT_EQ_U64(p.done + p.failed + p.canceled, a.n);
        gr_job_destroy(a.job);
    } else {
        ASSERT_STATUS(a.st, GR_ERR_SHUTDOWN);
    }
    gr_graph_destroy(a.g);
    free(a.t);
    free(data);
}

/* Device 1 lost: its workers take no more work, device 0 does all of it. */
static void lost_device_leaves_work_to_the_others(void)
{
    enum { N = 400, E = 64 };
    gr_runtime *rt = make_rt(2, 2, 1 << 20, 0);
    float *data = malloc(N * E * sizeof(float));
    gr_tensor *t = tensors_over(data, N, E);
    gr_device_stats st0, st1;
    gr_job_progress p = GR_JOB_PROGRESS_INIT;
    gr_graph *g;
    gr_job *job;

    for (uint64_t i = 0; i < N; i++)
        gr_workload_fill(data + i * E, 0, E, 3, i);
    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    gr__runtime_device_lost(RT(rt), &RT(rt)->devices[1]);
    ASSERT_STATUS(gr_job_submit(rt, g, t, N, NULL, &job, NULL), GR_OK);
    ASSERT_STATUS(gr_test_wait(job, GR_WAIT_FOREVER), GR_OK);
    ASSERT_STATUS(gr_job_progress_get(job, &p), GR_OK);
    ASSERT_EQ_U64(p.done, N);
    for (uint64_t i = 0; i < N; i++)
        ASSERT_EQ_U64(gr_workload_check_seed(data + i * E, 0, E, 3, i, NULL), 0);
    ASSERT_STATUS(gr_runtime_device_stats(rt, 0, &st0), GR_OK);
    ASSERT_STATUS(gr_runtime_device_stats(rt, 1, &st1), GR_OK);
    ASSERT_EQ_U64(st0.iterations_done, N);
    ASSERT_EQ_U64(st1.iterations_done + st1.iterations_failed, 0);
    gr_job_destroy(job);

    /* Every device lost: the remaining work fails at once with a clear status, no hang. */
    gr__runtime_device_lost(RT(rt), &RT(rt)->devices[0]);
    ASSERT_STATUS(gr_job_submit(rt, g, t, N, NULL, &job, NULL), GR_OK);
    ASSERT_STATUS(gr_test_wait(job, GR_WAIT_FOREVER), GR_ERR_DEVICE_LOST);
    ASSERT_STATUS(gr_job_progress_get(job, &p), GR_OK);
    ASSERT_EQ_U64(p.failed, N);
    gr_job_destroy(job);
    gr_graph_destroy(g);
    gr_runtime_destroy(rt);
    free(t);
    free(data);
}

/* Private contexts: a worker whose context a fault ruined retires and its device's other
 * worker does the work; when every worker of the device has retired, the device is lost
 * and what remains fails fast. (The GPU test faults a real context: cuda_fault_test.c.) */
static void retired_workers_leave_work_to_the_others(void)
{
    enum { N = 100, E = 64 };
    gr_runtime *rt = make_rt(1, 2, 1 << 20, 0);
    float *data = malloc(N * E * sizeof(float));
    gr_tensor *t = tensors_over(data, N, E);
    gr_device_stats st;
    gr_job_progress p = GR_JOB_PROGRESS_INIT;
    gr_graph *g;
    gr_job *job;

    for (uint64_t i = 0; i < N; i++)
        gr_workload_fill(data + i * E, 0, E, 4, i);
    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    gr__runtime_worker_retired(RT(rt), &RT(rt)->workers[0]);
    ASSERT_TRUE(!atomic_load(&RT(rt)->devices[0].lost));
    ASSERT_STATUS(gr_job_submit(rt, g, t, N, NULL, &job, NULL), GR_OK);
    ASSERT_STATUS(gr_test_wait(job, GR_WAIT_FOREVER), GR_OK);
    for (uint64_t i = 0; i < N; i++)
        ASSERT_EQ_U64(gr_workload_check_seed(data + i * E, 0, E, 4, i, NULL), 0);
    ASSERT_STATUS(gr_runtime_device_stats(rt, 0, &st), GR_OK);
    ASSERT_EQ_U64(st.iterations_done, N);
    gr_job_destroy(job);

    gr__runtime_worker_retired(RT(rt), &RT(rt)->workers[1]);
    ASSERT_TRUE(atomic_load(&RT(rt)->devices[0].lost));
    ASSERT_STATUS(gr_job_submit(rt, g, t, N, NULL, &job, NULL), GR_OK);
    ASSERT_STATUS(gr_test_wait(job, 10ll * 1000000000), GR_ERR_DEVICE_LOST);
    ASSERT_STATUS(gr_job_progress_get(job, &p), GR_OK);
    ASSERT_EQ_U64(p.failed, N);
    gr_job_destroy(job);
    gr_graph_destroy(g);
    gr_runtime_destroy(rt);
    free(t);
    free(data);
}

static atomic_int slow_callback_returned;

static void slow_callback(gr_job *job, gr_status st, void *user)
{
    (void)job;
    (void)st;
    (void)user;
    sleep_ms(300);
    atomic_store(&slow_callback_returned, 1);
}

static void *cancel_main(void *p)
{
    gr_job_cancel(p);
    return NULL;
}

/* Another thread cancels a job and so runs its (slow) callback: destroy must not return
 * before that callback has. */
static void destroy_waits_for_running_callbacks(void)
{
    gr_runtime *rt = make_rt(1, 1, 1 << 20, 0);
    gr_budget *b = RT(rt)->devices[0].budget;
    float data[4 * 64];
    gr_tensor *t = tensors_over(data, 4, 64);
    gr_job_options o = GR_JOB_OPTIONS_INIT;
    gr_job *parked, *slow;
    gr_graph *g;
    pthread_t th;

    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    /* Hold the whole budget so the worker sleeps with the first job's only index. */
    ASSERT_STATUS(gr__budget_acquire(b, gr__budget_capacity(b), GR_NO_DEADLINE, NULL), GR_OK);
    ASSERT_STATUS(gr_job_submit(rt, g, t, 1, NULL, &parked, NULL), GR_OK);
    for (int i = 0; i < 5000 && gr__budget_waiters(b) != 1; i++)
        sleep_ms(1);
    ASSERT_EQ(gr__budget_waiters(b), 1);
    atomic_store(&slow_callback_returned, 0);
    o.on_complete = slow_callback;
    ASSERT_STATUS(gr_job_submit(rt, g, t + 1, 3, &o, &slow, NULL), GR_OK);
    pthread_create(&th, NULL, cancel_main, slow);
    sleep_ms(50);
    gr_runtime_destroy(rt);
    ASSERT_EQ(atomic_load(&slow_callback_returned), 1);
    ASSERT_STATUS(gr_job_wait(slow, 0, NULL), GR_OK);
    pthread_join(th, NULL);
    gr__budget_release(b, gr__budget_capacity(b)); /* the budget outlives destroy: jobs hold it */
    gr_job_destroy(parked);
    gr_job_destroy(slow);
    gr_graph_destroy(g);
    free(t);
}

static gr_runtime *cb_rt;
static gr_graph *cb_graph;
static gr_tensor *cb_t;
static _Atomic int cb_submit_status = -1;

static void submitting_callback(gr_job *job, gr_status st, void *user)
{
    (void)job;
    (void)st;
    (void)user;
    atomic_store(&cb_submit_status,
                 gr_job_submit(cb_rt, cb_graph, cb_t, 8, NULL, NULL, NULL));
}

/* A callback submitting into a full ring could sleep forever on the runtime's own workers:
 * such a submit is refused at once. */
static void submit_from_callback_is_refused(void)
{
    float one[16], data[8 * 16];
    gr_tensor t = {{one}, {one}, 16, 0, {0}};
    gr_job_options o = GR_JOB_OPTIONS_INIT;
    gr_job *job;

    cb_rt = make_rt(1, 1, 1 << 20, 4); /* the ring holds 3 */
    cb_t = tensors_over(data, 8, 16);
    ASSERT_STATUS(gr_graph_create_seed(&cb_graph), GR_OK);
    o.on_complete = submitting_callback;
    ASSERT_STATUS(gr_job_submit(cb_rt, cb_graph, &t, 1, &o, &job, NULL), GR_OK);
    ASSERT_STATUS(gr_job_wait(job, 10ll * 1000000000, NULL), GR_OK);
    ASSERT_STATUS((gr_status)atomic_load(&cb_submit_status), GR_ERR_INVALID_USAGE);
    gr_job_destroy(job);
    gr_runtime_destroy(cb_rt);
    gr_graph_destroy(cb_graph);
    free(cb_t);
}

static atomic_int destroying_callback_calls;

static void destroying_callback(gr_job *job, gr_status st, void *user)
{
    (void)st;
    (void)user;
    gr_job_destroy(job); /* a detached job has no handle: nothing to give back */
    atomic_fetch_add(&destroying_callback_calls, 1);
}

static void detached_job_destroyed_by_its_callback(void)
{
    enum { JOBS = 50 };
    gr_runtime *rt = make_rt(1, 2, 1 << 20, 0);
    float *data = malloc(JOBS * 4 * 64 * sizeof(float));
    gr_tensor *t = tensors_over(data, JOBS * 4, 64); /* each job its own memory */
    gr_job_options o = GR_JOB_OPTIONS_INIT;
    gr_graph *g;

    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    o.on_complete = destroying_callback;
    for (int job = 0; job < JOBS; job++)
        ASSERT_STATUS(gr_job_submit(rt, g, t + 4 * job, 4, &o, NULL, NULL), GR_OK);
    gr_runtime_destroy(rt); /* waits for every callback */
    ASSERT_EQ(atomic_load(&destroying_callback_calls), JOBS);
    gr_graph_destroy(g);
    free(t);
    free(data);
}

/* A second gr_job_destroy of a live job gives nothing back twice. */
static void double_destroy_of_live_job_is_harmless(void)
{
    gr_runtime *rt = make_rt(1, 1, 1 << 20, 0);
    gr_budget *b = RT(rt)->devices[0].budget;
    float data[64];
    gr_tensor *t = tensors_over(data, 1, 64);
    gr_graph *g;
    gr_job *job;

    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    ASSERT_STATUS(gr__budget_acquire(b, gr__budget_capacity(b), GR_NO_DEADLINE, NULL), GR_OK);
    ASSERT_STATUS(gr_job_submit(rt, g, t, 1, NULL, &job, NULL), GR_OK);
    gr_job_destroy(job);
    gr_job_destroy(job); /* still alive (running): must not drop the runtime's references */
    gr__budget_release(b, gr__budget_capacity(b));
    gr_runtime_destroy(rt);
    gr_graph_destroy(g);
    free(t);
}

/* The deadline ends what has not started executing; an iteration already executing
 * finishes and its index is done. With one unit in flight per worker: with two
 * (GR_UNITS_IN_FLIGHT, worker.c), the second tensor is launched as soon as the first is,
 * before any deadline of this test passes, and runs too (docs/API.md says so). */
/* One worker, two tensors, a deadline that passes while the first one executes: it
 * finishes, and the second, still queued, times out untouched. Whether the deadline really
 * falls inside the first iteration depends on how fast this machine starts and runs it, so
 * an attempt where it did not (both timed out: the worker started too late; both done: the
 * iteration was quicker than the deadline) is retried with another deadline; any other
 * outcome fails at once, and so does running out of attempts. */
static void deadline_lets_an_executing_iteration_finish(void)
{
    static const int64_t deadlines_ms[] = {5, 20, 80, 320};
    uint64_t n = 32u << 20;
    float *d = malloc(n * sizeof(float));
    gr_tensor t[2] = {{{d}, {d}, n / 2, 0, {0}}, {{d + n / 2}, {d + n / 2}, n / 2, 0, {0}}};
    bool shown = false;
    gr_graph *g;

    ASSERT_TRUE(d != NULL);
    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    for (size_t k = 0; k < sizeof(deadlines_ms) / sizeof(deadlines_ms[0]) && !shown; k++) {
        gr_runtime *rt = gr_test_runtime((gr_test_shape){
            .workers = 1, .budget = 256ull << 20, .whole_tensors = true, .in_flight = "1"});
        gr_job_options o = GR_JOB_OPTIONS_INIT;
        gr_index_state s0, s1;
        gr_status st0, st1;
        gr_job *job;

        gr_workload_fill(d, 0, n / 2, 9, 0);
        gr_workload_fill(d + n / 2, 0, n / 2, 9, 1);
        o.deadline_ns = gr_now_ns() + deadlines_ms[k] * 1000000;
        ASSERT_STATUS(gr_job_submit(rt, g, t, 2, &o, &job, NULL), GR_OK);
        gr_test_wait(job, GR_WAIT_FOREVER);
        ASSERT_STATUS(gr_job_index_get(job, 0, &s0, &st0), GR_OK);
        ASSERT_STATUS(gr_job_index_get(job, 1, &s1, &st1), GR_OK);
        if (s0 == GR_INDEX_DONE && s1 == GR_INDEX_FAILED) {
            ASSERT_STATUS(st1, GR_ERR_TIMEOUT);
            ASSERT_EQ_U64(gr_workload_check_seed(d, 0, n / 2, 9, 0, NULL), 0);
            ASSERT_EQ_U64(gr_workload_check_input(d + n / 2, 0, n / 2, 9, 1, NULL), 0);
            shown = true;
        } else if (s0 == GR_INDEX_FAILED && s1 == GR_INDEX_FAILED) {
            /* The deadline passed before the worker started: both untouched. */
            ASSERT_STATUS(st0, GR_ERR_TIMEOUT);
            ASSERT_EQ_U64(gr_workload_check_input(d, 0, n / 2, 9, 0, NULL), 0);
            ASSERT_EQ_U64(gr_workload_check_input(d + n / 2, 0, n / 2, 9, 1, NULL), 0);
        } else if (!(s0 == GR_INDEX_DONE && s1 == GR_INDEX_DONE)) {
            GR_TEST_FAIL("deadline %lld ms: index 0 %d (%s), index 1 %d (%s)",
                         (long long)deadlines_ms[k], (int)s0, gr_status_str(st0), (int)s1,
                         gr_status_str(st1));
        }
        gr_job_destroy(job);
        gr_runtime_destroy(rt);
    }
    if (!shown)
        GR_TEST_FAIL("no deadline fell inside the first iteration in %zu attempts",
                     sizeof(deadlines_ms) / sizeof(deadlines_ms[0]));
    gr_graph_destroy(g);
    free(d);
}

/* ------------------------------------------------------------------------------------- */

/* Threads of this process whose name is `name` (NULL: all of them). */
static long threads_named(const char *name)
{
    char path[64], comm[32];
    struct dirent *e;
    DIR *d = opendir("/proc/self/task");
    long n = 0;

    ASSERT_TRUE(d != NULL);
    while ((e = readdir(d)) != NULL) {
        FILE *f;

        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "/proc/self/task/%.20s/comm", e->d_name);
        if ((f = fopen(path, "r")) == NULL)
            continue;
        if (fgets(comm, sizeof(comm), f) != NULL) {
            comm[strcspn(comm, "\n")] = '\0';
            n += name == NULL || strcmp(comm, name) == 0;
        }
        fclose(f);
    }
    closedir(d);
    return n;
}

/* All of this process's threads. ThreadSanitizer starts threads of its own while the
 * process runs, so under it only graphrun's own are compared (GR_COUNT_ALL 0). */
static long threads_all(void)
{
    return threads_named(NULL);
}
#ifdef GR_TSAN
#define GR_COUNT_ALL 0
#else
#define GR_COUNT_ALL 1
#endif

static void threads_are_named_and_joined(void)
{
    gr_config cfg = GR_CONFIG_INIT;
    gr_runtime *rt = NULL;
    gr_error_info err;
    long before = threads_all();
    unsigned live = gr__threads_live();

    cfg.backend = GR_BACKEND_HOST;
    cfg.host_devices = 2;
    cfg.workers_per_device = 3;
    cfg.copy_threads = 4;
    cfg.budget_bytes = 1u << 20;
    ASSERT_STATUS(gr_runtime_create(&cfg, &rt, &err), GR_OK);
    /* Each thread names itself once it runs, which on a loaded machine under a sanitizer
     * can take a while: up to 10 s for all of them. */
    for (int i = 0; i < 2000 && (threads_named("gr-worker") < 6 ||
                                 threads_named("gr-deadline") < 1 ||
                                 threads_named("gr-copy") < 4); i++)
        sleep_ms(5);
    ASSERT_EQ_U64(threads_named("gr-worker"), 6);
    ASSERT_EQ_U64(threads_named("gr-deadline"), 1);
    ASSERT_EQ_U64(threads_named("gr-copy"), 4);
    /* Every thread the runtime started is one of these, and counted. */
    if (GR_COUNT_ALL)
        ASSERT_EQ_U64(threads_all() - before, 11);
    ASSERT_EQ_U64(gr__threads_live() - live, 11);
    gr_runtime_destroy(rt);
    ASSERT_EQ_U64(gr__threads_live(), live); /* joined: each counted itself out */
    /* A joined thread can stay listed in /proc a moment after pthread_join returns. */
    for (int i = 0; i < 2000 && threads_named("gr-worker") + threads_named("gr-copy") +
                                        threads_named("gr-deadline") > 0; i++)
        sleep_ms(5);
    ASSERT_EQ_U64(threads_named("gr-worker") + threads_named("gr-copy") +
                      threads_named("gr-deadline"), 0);
    if (GR_COUNT_ALL)
        ASSERT_EQ_U64(threads_all(), before);
}

GR_TEST_MAIN(GR_TEST(destroy_waits_for_validating_submit),
             GR_TEST(lost_device_leaves_work_to_the_others),
             GR_TEST(retired_workers_leave_work_to_the_others),
             GR_TEST(destroy_waits_for_running_callbacks), GR_TEST(submit_from_callback_is_refused),
             GR_TEST(detached_job_destroyed_by_its_callback),
             GR_TEST(double_destroy_of_live_job_is_harmless),
             GR_TEST(deadline_lets_an_executing_iteration_finish),
             GR_TEST(threads_are_named_and_joined))
