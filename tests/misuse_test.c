/*
 * misuse_test.c - misuse of the API gets a status, never a crash, a hang or a corrupted
 * runtime: handles used after destroy (generational handles), destroy from a completion
 * callback, calls from a forked child, NULL arguments everywhere. docs/RELIABILITY.md has
 * the whole table, with the tests (here and elsewhere) that cover each row. Run under asan
 * by tools/test, so a use of freed memory fails here even where a status looked right.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runtime/handle.h"
#include "runtime/base/sanitizers.h"
#include "tests/fixtures.h"
#include "tests/testing.h"
#include "tools/graphrun/workload.h"

#define SEED 5
#define N 8
#define ELEMS 1000

static float data[N][ELEMS];
static gr_tensor tensors[N];

static void fill(void)
{
    for (uint64_t i = 0; i < N; i++) {
        gr_workload_fill(data[i], 0, ELEMS, SEED, i);
        tensors[i] = (gr_tensor){{data[i]}, {data[i]}, ELEMS, 0, {0}};
    }
}

static void check_done(void)
{
    for (uint64_t i = 0; i < N; i++)
        ASSERT_EQ_U64(gr_workload_check_seed(data[i], 0, ELEMS, SEED, i, NULL), 0);
}

static gr_runtime *make_rt(void)
{
    return gr_test_runtime((gr_test_shape){.budget = 1 << 20});
}

static gr_job *submit(gr_runtime *rt, gr_graph *g, const gr_job_options *opts)
{
    gr_error_info err;
    gr_job *job = NULL;

    fill();
    if (gr_job_submit(rt, g, tensors, N, opts, &job, &err) != GR_OK)
        GR_TEST_FAIL("submit: %s", err.message);
    return job;
}

/* A runtime handle after gr_runtime_destroy: every call is refused, a second destroy does
 * nothing, and a new runtime is not mistaken for the old one. */
static void destroyed_runtime_handle_is_refused(void)
{
    gr_runtime *rt = make_rt(), *other;
    gr_runtime_info info = GR_RUNTIME_INFO_INIT;
    gr_device_stats stats;
    gr_error_info err;
    gr_graph *g;
    gr_job *job;

    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    gr_runtime_destroy(rt);
    other = make_rt(); /* may reuse the slot: the generation tells them apart */
    ASSERT_TRUE(other != rt);
    gr_runtime_destroy(rt); /* a second destroy: nothing */
    ASSERT_STATUS(gr_runtime_info_get(rt, &info), GR_ERR_INVALID_USAGE);
    ASSERT_STATUS(gr_runtime_device_stats(rt, 0, &stats), GR_ERR_INVALID_USAGE);
    fill();
    ASSERT_STATUS(gr_job_submit(rt, g, tensors, N, NULL, &job, &err), GR_ERR_INVALID_USAGE);
    ASSERT_STR_CONTAINS(err.message, "not a live runtime");
    ASSERT_PTR_EQ(job, NULL);
    gr_runtime_shutdown(rt); /* nothing either: `other` keeps working */
    job = submit(other, g, NULL);
    ASSERT_STATUS(gr_test_wait(job, GR_WAIT_FOREVER), GR_OK);
    check_done();
    ASSERT_STATUS(gr_runtime_info_get(other, &info), GR_OK);
    gr_job_destroy(job);
    gr_runtime_destroy(other);
    gr_graph_destroy(g);
}

/* A job handle after its job is freed (destroyed and complete): every call is refused. */
static void freed_job_handle_is_refused(void)
{
    gr_runtime *rt = make_rt();
    gr_job_progress progress = GR_JOB_PROGRESS_INIT;
    gr_index_state state;
    gr_error_info info;
    gr_status result;
    gr_graph *g;
    gr_job *job;

    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    job = submit(rt, g, NULL);
    ASSERT_STATUS(gr_test_wait(job, GR_WAIT_FOREVER), GR_OK);
    gr_job_destroy(job); /* complete, and the handle given back: freed */
    ASSERT_STATUS(gr_job_wait(job, GR_WAIT_FOREVER, &result), GR_ERR_INVALID_USAGE);
    ASSERT_STATUS(gr_job_cancel(job), GR_ERR_INVALID_USAGE);
    ASSERT_STATUS(gr_job_progress_get(job, &progress), GR_ERR_INVALID_USAGE);
    ASSERT_STATUS(gr_job_index_get(job, 0, &state, NULL), GR_ERR_INVALID_USAGE);
    ASSERT_STATUS(gr_job_error_get(job, &info), GR_ERR_INVALID_USAGE);
    ASSERT_STR_CONTAINS(info.message, "not a live job handle");
    ASSERT_EQ(gr_job_is_complete(job), 0);
    gr_job_destroy(job); /* a second destroy: nothing */
    gr_runtime_destroy(rt);
    gr_graph_destroy(g);
}

/* A job handle still held after gr_runtime_destroy stays usable until gr_job_destroy. */
static void job_outlives_its_runtime(void)
{
    gr_runtime *rt = make_rt();
    gr_job_progress progress = GR_JOB_PROGRESS_INIT;
    gr_status result;
    gr_graph *g;
    gr_job *job;

    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    job = submit(rt, g, NULL);
    gr_runtime_destroy(rt); /* completes every job */
    ASSERT_STATUS(gr_job_wait(job, 0, &result), GR_OK);
    ASSERT_STATUS(gr_job_progress_get(job, &progress), GR_OK);
    ASSERT_EQ_U64(progress.done + progress.failed + progress.canceled, N);
    gr_job_destroy(job);
    gr_graph_destroy(g);
}

typedef struct destroy_in_callback {
    gr_runtime *rt;
    atomic_int calls;
} destroy_in_callback;

static void destroying_callback(gr_job *job, gr_status st, void *user)
{
    destroy_in_callback *d = user;
    gr_status result;

    (void)st;
    /* Waiting for its own job answers at once, and destroying the runtime from here, which
     * would wait for this very callback, shuts it down instead. */
    ASSERT_STATUS(gr_job_wait(job, GR_WAIT_FOREVER, &result), GR_OK);
    gr_runtime_destroy(d->rt);
    atomic_fetch_add(&d->calls, 1);
}

static void destroy_from_a_callback_shuts_down(void)
{
    gr_job_options opts = GR_JOB_OPTIONS_INIT;
    destroy_in_callback d = {make_rt(), 0};
    gr_error_info err;
    gr_status result;
    gr_graph *g;
    gr_job *job;

    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    opts.on_complete = destroying_callback;
    opts.user = &d;
    job = submit(d.rt, g, &opts);
    ASSERT_STATUS(gr_job_wait(job, 10ll * 1000000000, &result), GR_OK);
    ASSERT_EQ(atomic_load(&d.calls), 1);
    /* Shut down, not destroyed: submissions are refused, the handle still works. */
    fill();
    ASSERT_STATUS(gr_job_submit(d.rt, g, tensors, N, NULL, NULL, &err), GR_ERR_SHUTDOWN);
    gr_job_destroy(job);
    gr_runtime_destroy(d.rt); /* the real destroy, from outside any callback */
    gr_graph_destroy(g);
}

/* A child forked while the runtime runs: its calls are refused at once, without taking the
 * runtime's locks (which a parent thread may have held at the fork); the parent is
 * unaffected. The child reports by its exit status. */
static void forked_child_is_refused(void)
{
    gr_runtime *rt = make_rt();
    gr_error_info err;
    gr_status result;
    gr_graph *g;
    gr_job *job;
    int status;
    pid_t pid;

    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    job = submit(rt, g, NULL); /* running while the fork happens */
    pid = fork();
    ASSERT_TRUE(pid >= 0);
    if (pid == 0) {
        int bad = 0;

        alarm(10); /* a hang in the child fails the test rather than the run */
        bad |= gr_job_submit(rt, g, tensors, N, NULL, NULL, &err) != GR_ERR_INVALID_USAGE;
        bad |= strstr(err.message, "forked") == NULL;
        bad |= gr_job_wait(job, GR_WAIT_FOREVER, &result) != GR_ERR_INVALID_USAGE;
        bad |= gr_job_cancel(job) != GR_ERR_INVALID_USAGE;
        bad |= gr_job_error_get(job, &err) != GR_ERR_INVALID_USAGE;
        gr_job_destroy(job);    /* nothing */
        gr_runtime_shutdown(rt); /* nothing */
        gr_runtime_destroy(rt);  /* nothing: must not join threads the child lacks */
        _exit(bad ? 1 : 0);
    }
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        GR_TEST_FAIL("child: %s %d", WIFEXITED(status) ? "exit" : "signal",
                     WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    ASSERT_STATUS(gr_test_wait(job, GR_WAIT_FOREVER), GR_OK);
    check_done();
    gr_job_destroy(job);
    job = submit(rt, g, NULL); /* the parent's runtime still takes work */
    ASSERT_STATUS(gr_test_wait(job, GR_WAIT_FOREVER), GR_OK);
    check_done();
    gr_job_destroy(job);
    gr_runtime_destroy(rt);
    gr_graph_destroy(g);
}

/* A thread that takes handles from the process-wide handle table and gives them back, as
 * every gr_job_submit and every completed job's gr_job_destroy do, without the rest of
 * their work: the table's lock is held most of the time, as in a very busy server. */
typedef struct churn {
    atomic_bool stop;
    atomic_ulong handles;
} churn;

static void *churn_main(void *arg)
{
    churn *c = arg;

    while (!atomic_load(&c->stop)) {
        uintptr_t h;

        if (gr__handle_new(c, GR_HANDLE_JOB, &h) != GR_OK)
            break;
        gr__handle_release(h);
        atomic_fetch_add(&c->handles, 1);
    }
    return NULL;
}

/* A child may create and use a runtime of its own (on the host backend), however busy the
 * parent's threads were at the fork: nothing they held at that moment (the handle table's
 * lock, say) may stay locked in the child, where they do not exist to unlock it. Each child
 * runs a job on a runtime of its own under an alarm, forked while two parent threads churn
 * through handles. */
static void forked_child_can_create_a_runtime(void)
{
    enum { FORKS = 50, CHURNERS = 2 };
    static churn c[CHURNERS];
    pthread_t threads[CHURNERS];
    gr_graph *g;

#ifdef GR_TSAN
    SKIP("tsan does not support starting threads in a child of a threaded process");
#endif
    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    for (int i = 0; i < CHURNERS; i++) {
        atomic_store(&c[i].stop, false);
        ASSERT_EQ(pthread_create(&threads[i], NULL, churn_main, &c[i]), 0);
    }
    for (int k = 0; k < FORKS; k++) {
        int status;
        pid_t pid = fork();

        ASSERT_TRUE(pid >= 0);
        if (pid == 0) {
            gr_runtime *own;
            gr_job *job;

            /* A child stuck on a lock dies of SIGALRM, which fails the test. Not sooner:
             * under asan on a loaded 2-core machine (two churners spinning, another test
             * beside it) a child's runtime and job once took more than 5 s. */
            alarm(30);
            own = make_rt();
            job = submit(own, g, NULL);
            if (gr_test_wait(job, GR_WAIT_FOREVER) != GR_OK)
                _exit(1);
            check_done();
            gr_job_destroy(job);
            gr_runtime_destroy(own);
            _exit(0);
        }
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            GR_TEST_FAIL("child of fork %d: %s %d%s", k, WIFEXITED(status) ? "exit" : "signal",
                         WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
                         WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM
                             ? " (hung: a lock held by a parent thread at the fork)"
                             : "");
    }
    for (int i = 0; i < CHURNERS; i++) {
        atomic_store(&c[i].stop, true);
        ASSERT_EQ(pthread_join(threads[i], NULL), 0);
        ASSERT_GT(atomic_load(&c[i].handles), 0);
    }
    gr_graph_destroy(g);
}

/* NULL where a handle or an out-pointer belongs: GR_ERR_INVALID_ARGUMENT, or a no-op for
 * the destroys. */
static void null_arguments(void)
{
    gr_config cfg = GR_CONFIG_INIT;
    gr_runtime *rt = make_rt();
    gr_job_progress progress = GR_JOB_PROGRESS_INIT;
    gr_runtime_info info = GR_RUNTIME_INFO_INIT;
    gr_device_stats stats;
    gr_error_info err;
    gr_graph *g, *unused;
    gr_status result;
    void *p;

    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    ASSERT_STATUS(gr_runtime_create(NULL, &rt, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_PTR_EQ(rt, NULL);
    rt = make_rt();
    cfg.budget_bytes = 1 << 20;
    ASSERT_STATUS(gr_runtime_create(&cfg, NULL, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_runtime_info_get(NULL, &info), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_runtime_info_get(rt, NULL), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_runtime_device_stats(NULL, 0, &stats), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_runtime_device_stats(rt, 0, NULL), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_runtime_device_stats(rt, 7, &stats), GR_ERR_INVALID_ARGUMENT);
    fill();
    ASSERT_STATUS(gr_job_submit(NULL, g, tensors, N, NULL, NULL, &err),
                  GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_job_submit(rt, NULL, tensors, N, NULL, NULL, &err),
                  GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_job_submit(rt, g, NULL, N, NULL, NULL, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_job_wait(NULL, 0, &result), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_job_cancel(NULL), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_job_progress_get(NULL, &progress), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_job_index_get(NULL, 0, NULL, NULL), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_job_error_get(NULL, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_EQ(gr_job_is_complete(NULL), 0);
    ASSERT_STATUS(gr_host_alloc(0, &p), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_host_alloc(64, NULL), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_host_register(NULL, 64), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_host_unregister(NULL), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_graph_create(NULL), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_graph_create_seed(NULL), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_graph_parse(NULL, 0, "x", &unused, &err), GR_ERR_INVALID_ARGUMENT);
    gr_job_destroy(NULL);
    gr_graph_destroy(NULL);
    gr_host_free(NULL);
    gr_runtime_shutdown(NULL);
    gr_runtime_destroy(NULL);
    gr_runtime_destroy(rt);
    gr_graph_destroy(g);
}

/* A job's index out of range, and a job's handle given to the wrong function family. */
static void out_of_range_and_foreign_handles(void)
{
    gr_runtime *rt = make_rt();
    gr_index_state state;
    gr_runtime_info info = GR_RUNTIME_INFO_INIT;
    gr_status result;
    gr_graph *g;
    gr_job *job;

    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    job = submit(rt, g, NULL);
    ASSERT_STATUS(gr_test_wait(job, GR_WAIT_FOREVER), GR_OK);
    ASSERT_STATUS(gr_job_index_get(job, N, &state, NULL), GR_ERR_INVALID_ARGUMENT);
    /* A job handle passed as a runtime, and the reverse: both are live handles of the other
     * kind. Refused, because each table entry knows what it holds. */
    ASSERT_STATUS(gr_runtime_info_get((gr_runtime *)job, &info), GR_ERR_INVALID_USAGE);
    ASSERT_STATUS(gr_job_wait((gr_job *)rt, 0, &result), GR_ERR_INVALID_USAGE);
    gr_job_destroy(job);
    gr_runtime_destroy(rt);
    gr_graph_destroy(g);
}

/* Releasing a handle twice: the second does nothing and says so, and the table's free list
 * holds the slot once (two new handles get two different slots, each its own object). */
static void handle_released_once(void)
{
    int x, y, z;
    uintptr_t h, a, b;

    ASSERT_STATUS(gr__handle_new(&x, GR_HANDLE_JOB, &h), GR_OK);
    ASSERT_TRUE(gr__handle_release(h));
    ASSERT_TRUE(!gr__handle_release(h));
    ASSERT_STATUS(gr__handle_new(&y, GR_HANDLE_JOB, &a), GR_OK);
    ASSERT_STATUS(gr__handle_new(&z, GR_HANDLE_JOB, &b), GR_OK);
    ASSERT_TRUE((uint32_t)a != (uint32_t)b);
    ASSERT_TRUE(gr__handle_get(a, GR_HANDLE_JOB) == &y);
    ASSERT_TRUE(gr__handle_get(b, GR_HANDLE_JOB) == &z);
    ASSERT_TRUE(!gr__handle_release(h)); /* a stale handle of a reused slot: still refused */
    ASSERT_TRUE(gr__handle_get(a, GR_HANDLE_JOB) == &y);
    ASSERT_TRUE(gr__handle_release(a));
    ASSERT_TRUE(gr__handle_release(b));
}

/* Many threads destroy one runtime at once: one does it, the others return (under asan:
 * nothing freed twice, nothing used after the free). */
#define RACERS 6

typedef struct racer {
    gr_runtime *rt;
    gr_graph *g;
    pthread_barrier_t *start;
    int accepted, refused;
    float (*mine)[ELEMS]; /* this thread's tensors */
} racer;

static void *destroy_main(void *arg)
{
    racer *r = arg;

    pthread_barrier_wait(r->start);
    gr_runtime_destroy(r->rt);
    return NULL;
}

static void concurrent_destroys(void)
{
    for (int round = 0; round < 40; round++) {
        pthread_barrier_t start;
        pthread_t th[RACERS];
        racer r[RACERS];
        gr_runtime *rt = make_rt();

        pthread_barrier_init(&start, NULL, RACERS);
        for (int i = 0; i < RACERS; i++) {
            r[i] = (racer){.rt = rt, .start = &start};
            pthread_create(&th[i], NULL, destroy_main, &r[i]);
        }
        for (int i = 0; i < RACERS; i++)
            pthread_join(th[i], NULL);
        pthread_barrier_destroy(&start);
        ASSERT_STATUS(gr_runtime_info_get(rt, &(gr_runtime_info)GR_RUNTIME_INFO_INIT),
                      GR_ERR_INVALID_USAGE);
    }
}

/* Threads submit without pause while another thread destroys the runtime: every submit is
 * accepted (and its job completes: done, or canceled by the shutdown) or refused with
 * GR_ERR_SHUTDOWN, until the handle is gone (GR_ERR_INVALID_USAGE), which ends each thread;
 * under asan, no use of the freed runtime. */
static void *submit_racing_main(void *arg)
{
    racer *r = arg;
    gr_tensor t[2];

    for (int i = 0; i < 2; i++)
        t[i] = (gr_tensor){{r->mine[i]}, {r->mine[i]}, ELEMS, 0, {0}};
    pthread_barrier_wait(r->start);
    for (;;) {
        gr_job *job = NULL;
        gr_status st = gr_job_submit(r->rt, r->g, t, 2, NULL, &job, NULL), result;

        if (st == GR_OK) {
            r->accepted++;
            ASSERT_STATUS(gr_job_wait(job, GR_WAIT_FOREVER, &result), GR_OK);
            ASSERT_TRUE(result == GR_OK || result == GR_ERR_SHUTDOWN);
            gr_job_destroy(job);
        } else {
            ASSERT_TRUE(st == GR_ERR_SHUTDOWN || st == GR_ERR_INVALID_USAGE);
            r->refused++;
            if (st == GR_ERR_INVALID_USAGE)
                break; /* the handle is gone: nothing more to race with */
        }
    }
    return NULL;
}

static void submit_racing_destroy(void)
{
    static float buf[RACERS][2][ELEMS];
    int accepted = 0, refused = 0;
    gr_graph *g;

    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    for (int round = 0; round < 20; round++) {
        pthread_barrier_t start;
        pthread_t th[RACERS];
        racer r[RACERS];
        gr_runtime *rt = make_rt();

        pthread_barrier_init(&start, NULL, RACERS + 1);
        for (int i = 0; i < RACERS; i++) {
            r[i] = (racer){.rt = rt, .g = g, .start = &start, .mine = buf[i]};
            pthread_create(&th[i], NULL, submit_racing_main, &r[i]);
        }
        pthread_barrier_wait(&start);
        usleep((useconds_t)(round % 5) * 200);
        gr_runtime_destroy(rt);
        for (int i = 0; i < RACERS; i++) {
            pthread_join(th[i], NULL);
            accepted += r[i].accepted;
            refused += r[i].refused;
        }
        pthread_barrier_destroy(&start);
    }
    gr_graph_destroy(g);
    printf("    %d submits accepted, %d refused around 20 destroys\n", accepted, refused);
    ASSERT_GE(refused, 20 * RACERS); /* each thread ends on the released handle */
}

/* gr_runtime_shutdown on one thread while another destroys the runtime: graphrun.h promises
 * that a runtime's last log call happens before gr_runtime_destroy returns, so a server may
 * free its log_user then. The shutdown's own line ("runtime shutting down") is held in the
 * callback until the destroy has had time to return: the destroy must wait for it. */
typedef struct held_log {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    bool entered, release;
    atomic_int running; /* callbacks for the shutdown line in progress */
} held_log;

static void holding_log(gr_log_level level, const char *message, void *user)
{
    held_log *h = user;
    struct timespec until;

    (void)level;
    if (strncmp(message, "runtime shutting down", 21) != 0)
        return;
    atomic_fetch_add(&h->running, 1);
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10; /* never hang the test */
    pthread_mutex_lock(&h->mu);
    h->entered = true;
    pthread_cond_broadcast(&h->cond);
    while (!h->release && pthread_cond_timedwait(&h->cond, &h->mu, &until) == 0)
        ;
    pthread_mutex_unlock(&h->mu);
    atomic_fetch_sub(&h->running, 1);
}

typedef struct racing_destroy {
    gr_runtime *rt;
    atomic_bool returned;
    int running_at_return; /* log callbacks still in progress when destroy returned */
    held_log *log;
} racing_destroy;

static void *shutdown_main(void *arg)
{
    gr_runtime_shutdown(arg);
    return NULL;
}

static void *racing_destroy_main(void *arg)
{
    racing_destroy *d = arg;

    gr_runtime_destroy(d->rt);
    d->running_at_return = atomic_load(&d->log->running);
    atomic_store(&d->returned, true);
    return NULL;
}

static void no_log_call_after_a_racing_destroy_returns(void)
{
    static held_log h = {.mu = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
    gr_config cfg = GR_CONFIG_INIT;
    racing_destroy d = {.log = &h};
    pthread_t sth, dth;
    gr_error_info err;

    unsetenv("GR_LOG"); /* the callback, at info */
    cfg.backend = GR_BACKEND_HOST;
    cfg.budget_bytes = 1 << 20;
    cfg.log_level = GR_LOG_INFO;
    cfg.log_callback = holding_log;
    cfg.log_user = &h;
    ASSERT_STATUS(gr_runtime_create(&cfg, &d.rt, &err), GR_OK);
    ASSERT_EQ(pthread_create(&sth, NULL, shutdown_main, d.rt), 0);
    pthread_mutex_lock(&h.mu);
    while (!h.entered)
        pthread_cond_wait(&h.cond, &h.mu);
    pthread_mutex_unlock(&h.mu);
    /* The shutdown is inside its log call: destroy now, and give it time to return. */
    ASSERT_EQ(pthread_create(&dth, NULL, racing_destroy_main, &d), 0);
    for (int ms = 0; ms < 300 && !atomic_load(&d.returned); ms++)
        usleep(1000);
    pthread_mutex_lock(&h.mu);
    h.release = true;
    pthread_cond_broadcast(&h.cond);
    pthread_mutex_unlock(&h.mu);
    ASSERT_EQ(pthread_join(dth, NULL), 0);
    ASSERT_EQ(pthread_join(sth, NULL), 0);
    if (d.running_at_return != 0)
        GR_TEST_FAIL("gr_runtime_destroy returned while gr_runtime_shutdown's log call (on "
                     "another thread) was still running: %d call(s)", d.running_at_return);
}

GR_TEST_MAIN(GR_TEST(destroyed_runtime_handle_is_refused), GR_TEST(freed_job_handle_is_refused),
             GR_TEST(job_outlives_its_runtime), GR_TEST(destroy_from_a_callback_shuts_down),
             GR_TEST(forked_child_is_refused), GR_TEST(forked_child_can_create_a_runtime),
             GR_TEST(null_arguments),
             GR_TEST(out_of_range_and_foreign_handles), GR_TEST(handle_released_once),
             GR_TEST(concurrent_destroys), GR_TEST(submit_racing_destroy),
             GR_TEST(no_log_call_after_a_racing_destroy_returns))
