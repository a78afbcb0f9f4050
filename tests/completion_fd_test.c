/*
 * completion_fd_test.c - gr_job_completion_fd, the descriptor an event loop polls:
 *   - readable at once for a job already complete, the same descriptor on every call;
 *   - never readable before the job is complete: not while it is parked, not while its
 *     callback runs, and once readable gr_job_wait answers at once;
 *   - readable for a job that ends canceled, or past its deadline;
 *   - closed by gr_job_destroy, at once even for a running job, whose later completion
 *     must not write to the number the process has since given to another descriptor;
 *   - refused for NULL, a destroyed handle, and from a detached job's callback;
 *   - many jobs submitted from several threads into one epoll set, reaped by one thread,
 *     each seen exactly once, complete, its callback returned and its outputs written;
 *   - the runtime's completion queue (gr_job_options.notify, gr_runtime_completion_fd,
 *     gr_runtime_reap): its descriptor readable exactly while jobs wait, oldest first, a
 *     job destroyed before it is reaped taken off, refusals, and the same many-threads
 *     case through one descriptor.
 * Run under tsan by tools/test.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "runtime/runtime.h"
#include "tests/fixtures.h"
#include "tests/testing.h"

/* The runtime behind a handle, for parking its workers on the budget. */
#define RT(handle) gr__runtime_get((handle), &(gr_status){GR_OK})

static gr_runtime *make_rt(uint32_t workers)
{
    return gr_test_runtime((gr_test_shape){
        .devices = 1, .workers = workers, .budget = 1 << 20, .whole_tensors = true});
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* Whether fd is readable within timeout_ms (poll's: -1 forever). */
static bool readable(int fd, int timeout_ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int n;

    while ((n = poll(&p, 1, timeout_ms)) < 0 && errno == EINTR)
        ;
    ASSERT_TRUE(n >= 0);
    return n == 1 && (p.revents & POLLIN);
}

/* Hold the device's whole budget, so that a job's iterations wait for it. */
static gr_budget *park(gr_runtime *rt)
{
    gr_budget *b = RT(rt)->devices[0].budget;

    ASSERT_STATUS(gr__budget_acquire(b, gr__budget_capacity(b), GR_NO_DEADLINE, NULL), GR_OK);
    return b;
}

static void unpark(gr_budget *b)
{
    gr__budget_release(b, gr__budget_capacity(b));
}

/* ------------------------------------------------------------------------------------- */

static void complete_job_is_readable_at_once(void)
{
    gr_runtime *rt = make_rt(2);
    gr_test_tensors s = gr_test_tensors_make(1, 4, 256);
    gr_graph *g;
    gr_job *job;
    uint64_t v = 0;
    int fd = -1, again = -1;

    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    ASSERT_STATUS(gr_job_submit(rt, g, s.t, s.count, NULL, &job, NULL), GR_OK);
    ASSERT_STATUS(gr_test_wait(job, GR_WAIT_FOREVER), GR_OK);
    ASSERT_STATUS(gr_job_completion_fd(job, &fd), GR_OK);
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(readable(fd, 0));
    ASSERT_STATUS(gr_job_completion_fd(job, &again), GR_OK);
    ASSERT_EQ(again, fd);
    ASSERT_EQ(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
    ASSERT_EQ(fcntl(fd, F_GETFL) & O_NONBLOCK, O_NONBLOCK);
    ASSERT_EQ(read(fd, &v, sizeof(v)), (ssize_t)sizeof(v));
    ASSERT_EQ_U64(v, 1);
    ASSERT_TRUE(!readable(fd, 0)); /* a read resets it: documented */
    gr_test_expect_all_processed(&s);
    gr_job_destroy(job);
    gr_runtime_destroy(rt);
    gr_graph_destroy(g);
    gr_test_tensors_free(&s);
}

static int cb_fd = -1;
static atomic_int cb_saw_readable = -1;
static atomic_int cb_returned;

static void slow_callback(gr_job *job, gr_status st, void *user)
{
    (void)job;
    (void)st;
    (void)user;
    atomic_store(&cb_saw_readable, readable(cb_fd, 0));
    sleep_ms(200); /* long enough for a descriptor signaled too early to be seen */
    atomic_store(&cb_returned, 1);
}

/* Parked, then released: not readable until the callback has returned; then gr_job_wait
 * answers at once and the outputs are final. */
static void never_readable_before_the_callback_returns(void)
{
    gr_runtime *rt = make_rt(1);
    gr_test_tensors s = gr_test_tensors_make(2, 3, 256);
    gr_job_options o = GR_JOB_OPTIONS_INIT;
    gr_status result = GR_ERR_INTERNAL;
    gr_budget *b = park(rt);
    gr_graph *g;
    gr_job *job;

    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    o.on_complete = slow_callback;
    ASSERT_STATUS(gr_job_submit(rt, g, s.t, s.count, &o, &job, NULL), GR_OK);
    ASSERT_STATUS(gr_job_completion_fd(job, &cb_fd), GR_OK);
    ASSERT_TRUE(!readable(cb_fd, 50));
    ASSERT_STATUS(gr_job_wait(job, 0, NULL), GR_ERR_TIMEOUT);
    unpark(b);
    ASSERT_TRUE(readable(cb_fd, 10000));
    ASSERT_EQ(atomic_load(&cb_returned), 1);
    ASSERT_EQ(atomic_load(&cb_saw_readable), 0);
    ASSERT_STATUS(gr_job_wait(job, 0, &result), GR_OK);
    ASSERT_STATUS(result, GR_OK);
    gr_test_expect_all_processed(&s);
    gr_job_destroy(job);
    gr_runtime_destroy(rt);
    gr_graph_destroy(g);
    gr_test_tensors_free(&s);
}

static void canceled_job_becomes_readable(void)
{
    gr_runtime *rt = make_rt(1);
    gr_test_tensors s = gr_test_tensors_make(3, 4, 256);
    gr_status result = GR_ERR_INTERNAL;
    gr_budget *b = park(rt);
    gr_graph *g;
    gr_job *job;
    int fd = -1;

    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    ASSERT_STATUS(gr_job_submit(rt, g, s.t, s.count, NULL, &job, NULL), GR_OK);
    ASSERT_STATUS(gr_job_completion_fd(job, &fd), GR_OK);
    ASSERT_TRUE(!readable(fd, 20));
    ASSERT_STATUS(gr_job_cancel(job), GR_OK);
    /* The parked worker holds the first index until the budget comes back. */
    unpark(b);
    ASSERT_TRUE(readable(fd, 10000));
    ASSERT_STATUS(gr_job_wait(job, 0, &result), GR_OK);
    ASSERT_STATUS(result, GR_ERR_CANCELED);
    gr_job_destroy(job);
    gr_runtime_destroy(rt);
    gr_graph_destroy(g);
    gr_test_tensors_free(&s);
}

/* The deadline passes while every index waits for the budget: the deadline thread ends
 * the job, and that makes the descriptor readable with the budget still held. */
static void timed_out_job_becomes_readable(void)
{
    gr_runtime *rt = make_rt(1);
    gr_test_tensors s = gr_test_tensors_make(4, 4, 256);
    gr_job_options o = GR_JOB_OPTIONS_INIT;
    gr_status result = GR_ERR_INTERNAL;
    gr_budget *b = park(rt);
    gr_graph *g;
    gr_job *job;
    int fd = -1;

    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    o.deadline_ns = gr_now_ns() + 100 * 1000000ll;
    ASSERT_STATUS(gr_job_submit(rt, g, s.t, s.count, &o, &job, NULL), GR_OK);
    ASSERT_STATUS(gr_job_completion_fd(job, &fd), GR_OK);
    ASSERT_TRUE(readable(fd, 10000));
    ASSERT_GE(gr_now_ns(), o.deadline_ns);
    ASSERT_STATUS(gr_job_wait(job, 0, &result), GR_OK);
    ASSERT_STATUS(result, GR_ERR_TIMEOUT);
    unpark(b);
    gr_job_destroy(job);
    gr_runtime_destroy(rt);
    gr_graph_destroy(g);
    gr_test_tensors_free(&s);
}

/* Destroy closes the descriptor, at once for a running job too. That job's completion
 * comes later: it must not write to the number, which the next eventfd reuses. */
static void destroy_closes_the_descriptor(void)
{
    gr_runtime *rt = make_rt(1);
    gr_test_tensors s = gr_test_tensors_make(5, 2, 256);
    gr_budget *b;
    gr_graph *g;
    gr_job *done, *running;
    int fd = -1, fd2 = -1, other;

    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    ASSERT_STATUS(gr_job_submit(rt, g, s.t, 1, NULL, &done, NULL), GR_OK);
    ASSERT_STATUS(gr_test_wait(done, GR_WAIT_FOREVER), GR_OK);
    ASSERT_STATUS(gr_job_completion_fd(done, &fd), GR_OK);
    gr_job_destroy(done);
    ASSERT_EQ(fcntl(fd, F_GETFD), -1);
    ASSERT_EQ(errno, EBADF);

    b = park(rt);
    ASSERT_STATUS(gr_job_submit(rt, g, s.t + 1, 1, NULL, &running, NULL), GR_OK);
    ASSERT_STATUS(gr_job_completion_fd(running, &fd2), GR_OK);
    gr_job_destroy(running);
    ASSERT_EQ(fcntl(fd2, F_GETFD), -1);
    ASSERT_EQ(errno, EBADF);
    other = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK); /* most likely fd2's number again */
    ASSERT_GE(other, 0);
    unpark(b);
    gr_runtime_destroy(rt); /* the running job completes before this returns */
    ASSERT_TRUE(!readable(other, 0));
    close(other);
    gr_graph_destroy(g);
    gr_test_tensors_free(&s);
}

static atomic_int detached_status = -1;

static void detached_callback(gr_job *job, gr_status st, void *user)
{
    int fd = 0;

    (void)st;
    (void)user;
    atomic_store(&detached_status, (int)gr_job_completion_fd(job, &fd));
    if (fd != -1)
        atomic_store(&detached_status, 1000);
}

static void misuse_is_refused(void)
{
    gr_runtime *rt = make_rt(1);
    gr_test_tensors s = gr_test_tensors_make(6, 2, 256);
    gr_job_options o = GR_JOB_OPTIONS_INIT;
    gr_graph *g;
    gr_job *job;
    int fd = 0;

    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    ASSERT_STATUS(gr_job_completion_fd(NULL, &fd), GR_ERR_INVALID_ARGUMENT);
    ASSERT_EQ(fd, -1);
    ASSERT_STATUS(gr_job_submit(rt, g, s.t, 1, NULL, &job, NULL), GR_OK);
    ASSERT_STATUS(gr_job_completion_fd(job, NULL), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_test_wait(job, GR_WAIT_FOREVER), GR_OK);
    gr_job_destroy(job);
    fd = 0;
    ASSERT_STATUS(gr_job_completion_fd(job, &fd), GR_ERR_INVALID_USAGE); /* stale handle */
    ASSERT_EQ(fd, -1);
    o.on_complete = detached_callback;
    ASSERT_STATUS(gr_job_submit(rt, g, s.t + 1, 1, &o, NULL, NULL), GR_OK);
    gr_runtime_destroy(rt); /* waits for the callback */
    ASSERT_STATUS((gr_status)atomic_load(&detached_status), GR_ERR_INVALID_USAGE);
    gr_graph_destroy(g);
    gr_test_tensors_free(&s);
}

/* ------------------------------------------------------------------------------------- */
/* Many jobs, several submitting threads, one epoll set, one reaper. */

enum { SUBMITTERS = 4, JOBS_PER_THREAD = 150, ELEMS = 256 };
#define ENTRY_MAGIC 0x6a6f6266u

typedef struct entry {
    uint32_t magic;
    uint32_t k;           /* its index in the shared tensors */
    gr_job *job;
    int fd;
    atomic_int callback_returned;
    atomic_int reaped;
} entry;

typedef struct shared {
    gr_runtime *rt;
    gr_graph *g;
    gr_test_tensors s;
    entry *entries;
    int ep;
    pthread_barrier_t start;
} shared;

typedef struct submitter {
    shared *sh;
    uint32_t first;
} submitter;

static void flag_callback(gr_job *job, gr_status st, void *user)
{
    entry *e = user;

    (void)job;
    (void)st;
    /* A little time in the callback widens the window a too-early signal would show in. */
    if (e->k % 7 == 0)
        sleep_ms(1);
    atomic_store_explicit(&e->callback_returned, 1, memory_order_release);
}

static void *submit_main(void *p)
{
    submitter *sub = p;
    shared *sh = sub->sh;
    gr_job_options o = GR_JOB_OPTIONS_INIT;

    o.on_complete = flag_callback;
    pthread_barrier_wait(&sh->start);
    for (uint32_t j = 0; j < JOBS_PER_THREAD; j++) {
        entry *e = &sh->entries[sub->first + j];
        struct epoll_event ev = {.events = EPOLLIN};

        o.user = e;
        ASSERT_STATUS(gr_job_submit(sh->rt, sh->g, &sh->s.t[e->k], 1, &o, &e->job, NULL),
                      GR_OK);
        /* Some jobs are complete already, some not: both ways to readiness are taken. */
        ASSERT_STATUS(gr_job_completion_fd(e->job, &e->fd), GR_OK);
        ev.data.ptr = e;
        ASSERT_EQ(epoll_ctl(sh->ep, EPOLL_CTL_ADD, e->fd, &ev), 0);
    }
    return NULL;
}

static void many_jobs_one_epoll_set(void)
{
    enum { TOTAL = SUBMITTERS * JOBS_PER_THREAD };
    shared sh = {.rt = make_rt(3)};
    submitter subs[SUBMITTERS];
    pthread_t th[SUBMITTERS];
    uint32_t reaped = 0;

    sh.s = gr_test_tensors_make(7, TOTAL, ELEMS);
    sh.entries = calloc(TOTAL, sizeof(*sh.entries));
    ASSERT_TRUE(sh.entries != NULL);
    for (uint32_t k = 0; k < TOTAL; k++) {
        sh.entries[k].magic = ENTRY_MAGIC;
        sh.entries[k].k = k;
        sh.entries[k].fd = -1;
    }
    ASSERT_STATUS(gr_graph_create_seed(&sh.g), GR_OK);
    sh.ep = epoll_create1(EPOLL_CLOEXEC);
    ASSERT_GE(sh.ep, 0);
    pthread_barrier_init(&sh.start, NULL, SUBMITTERS + 1);
    for (uint32_t t = 0; t < SUBMITTERS; t++) {
        subs[t] = (submitter){&sh, t * JOBS_PER_THREAD};
        pthread_create(&th[t], NULL, submit_main, &subs[t]);
    }
    pthread_barrier_wait(&sh.start);
    while (reaped < TOTAL) {
        struct epoll_event evs[64];
        int n = epoll_wait(sh.ep, evs, 64, 30000);

        if (n < 0 && errno == EINTR)
            continue;
        ASSERT_GT(n, 0); /* else 30 s without a completion: lost */
        for (int i = 0; i < n; i++) {
            entry *e = evs[i].data.ptr;
            gr_status result = GR_ERR_INTERNAL;

            ASSERT_EQ(e->magic, ENTRY_MAGIC);
            ASSERT_EQ(atomic_fetch_add(&e->reaped, 1), 0); /* seen once: it is removed now */
            ASSERT_EQ(atomic_load_explicit(&e->callback_returned, memory_order_acquire), 1);
            ASSERT_STATUS(gr_job_wait(e->job, 0, &result), GR_OK);
            ASSERT_STATUS(result, GR_OK);
            gr_test_expect_processed(&sh.s, e->k);
            ASSERT_EQ(epoll_ctl(sh.ep, EPOLL_CTL_DEL, e->fd, NULL), 0);
            gr_job_destroy(e->job);
            reaped++;
        }
    }
    for (uint32_t t = 0; t < SUBMITTERS; t++)
        pthread_join(th[t], NULL);
    for (uint32_t k = 0; k < TOTAL; k++)
        ASSERT_EQ(atomic_load(&sh.entries[k].reaped), 1);
    close(sh.ep);
    pthread_barrier_destroy(&sh.start);
    gr_runtime_destroy(sh.rt);
    gr_graph_destroy(sh.g);
    gr_test_tensors_free(&sh.s);
    free(sh.entries);
}

/* ------------------------------------------------------------------------------------- */
/* The runtime's completion queue (gr_job_options.notify, gr_runtime_reap). */

static gr_job_options notify_options(void)
{
    gr_job_options o = GR_JOB_OPTIONS_INIT;

    o.notify = 1;
    return o;
}

/* Readable exactly while jobs wait to be reaped; oldest first; a descriptor asked for
 * after they completed is readable at once. */
static void queue_fd_readable_while_jobs_wait(void)
{
    gr_runtime *rt = make_rt(1);
    gr_test_tensors s = gr_test_tensors_make(8, 3, 256);
    gr_job_options o = notify_options();
    gr_job *job[3], *got[4];
    gr_graph *g;
    size_t n = 99;
    int fd = -1, again = -1;

    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    for (int i = 0; i < 3; i++) { /* one at a time: completion order is submission order */
        ASSERT_STATUS(gr_job_submit(rt, g, &s.t[i], 1, &o, &job[i], NULL), GR_OK);
        ASSERT_STATUS(gr_test_wait(job[i], GR_WAIT_FOREVER), GR_OK);
    }
    ASSERT_STATUS(gr_runtime_completion_fd(rt, &fd), GR_OK);
    ASSERT_STATUS(gr_runtime_completion_fd(rt, &again), GR_OK);
    ASSERT_EQ(again, fd);
    ASSERT_TRUE(readable(fd, 0));
    ASSERT_STATUS(gr_runtime_reap(rt, got, 2, &n), GR_OK);
    ASSERT_EQ_U64(n, 2);
    ASSERT_PTR_EQ(got[0], job[0]);
    ASSERT_PTR_EQ(got[1], job[1]);
    ASSERT_TRUE(readable(fd, 0));
    ASSERT_STATUS(gr_runtime_reap(rt, got, 4, &n), GR_OK);
    ASSERT_EQ_U64(n, 1);
    ASSERT_PTR_EQ(got[0], job[2]);
    ASSERT_TRUE(!readable(fd, 0));
    ASSERT_STATUS(gr_runtime_reap(rt, got, 4, &n), GR_OK);
    ASSERT_EQ_U64(n, 0);
    ASSERT_STATUS(gr_runtime_reap(rt, NULL, 0, &n), GR_OK);
    gr_test_expect_all_processed(&s);
    for (int i = 0; i < 3; i++)
        gr_job_destroy(job[i]);
    gr_runtime_destroy(rt);
    ASSERT_EQ(fcntl(fd, F_GETFD), -1); /* closed by destroy */
    gr_graph_destroy(g);
    gr_test_tensors_free(&s);
}

static void *destroy_main(void *p)
{
    gr_job_destroy(p);
    return NULL;
}

/* A job destroyed before it is reaped leaves the queue (and the descriptor goes back to
 * not readable); one destroyed while running is never queued; a job without notify never
 * is. Destroying the runtime with jobs still queued leaves them to their handles. */
static void destroyed_jobs_leave_the_queue(void)
{
    gr_runtime *rt = make_rt(1);
    gr_test_tensors s = gr_test_tensors_make(9, 4, 256);
    gr_job_options o = notify_options();
    gr_job *done, *running, *plain, *left, *got[2];
    gr_budget *b;
    gr_graph *g;
    pthread_t th;
    size_t n = 99;
    int fd = -1;

    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    ASSERT_STATUS(gr_runtime_completion_fd(rt, &fd), GR_OK);
    ASSERT_STATUS(gr_job_submit(rt, g, &s.t[0], 1, &o, &done, NULL), GR_OK);
    ASSERT_STATUS(gr_test_wait(done, GR_WAIT_FOREVER), GR_OK);
    ASSERT_TRUE(readable(fd, 0));
    pthread_create(&th, NULL, destroy_main, done); /* another thread than the reaper's */
    pthread_join(th, NULL);
    ASSERT_TRUE(!readable(fd, 0));
    ASSERT_STATUS(gr_runtime_reap(rt, got, 2, &n), GR_OK);
    ASSERT_EQ_U64(n, 0);

    b = park(rt);
    ASSERT_STATUS(gr_job_submit(rt, g, &s.t[1], 1, &o, &running, NULL), GR_OK);
    ASSERT_TRUE(!readable(fd, 20));
    gr_job_destroy(running);
    ASSERT_STATUS(gr_job_submit(rt, g, &s.t[2], 1, NULL, &plain, NULL), GR_OK);
    unpark(b);
    ASSERT_STATUS(gr_test_wait(plain, GR_WAIT_FOREVER), GR_OK);
    ASSERT_STATUS(gr_job_submit(rt, g, &s.t[3], 1, &o, &left, NULL), GR_OK);
    ASSERT_STATUS(gr_test_wait(left, GR_WAIT_FOREVER), GR_OK);
    ASSERT_TRUE(readable(fd, 0));
    ASSERT_STATUS(gr_runtime_reap(rt, got, 2, &n), GR_OK);
    ASSERT_EQ_U64(n, 1); /* `left` only: `running` was destroyed first, `plain` has no notify */
    ASSERT_PTR_EQ(got[0], left);
    gr_job_destroy(plain);

    /* Queued again (a fresh job) and left there across the runtime's destroy. */
    ASSERT_STATUS(gr_job_submit(rt, g, &s.t[0], 1, &o, &done, NULL), GR_OK);
    ASSERT_STATUS(gr_test_wait(done, GR_WAIT_FOREVER), GR_OK);
    gr_runtime_destroy(rt);
    ASSERT_STATUS(gr_runtime_reap(rt, got, 2, &n), GR_ERR_INVALID_USAGE);
    ASSERT_STATUS(gr_runtime_completion_fd(rt, &fd), GR_ERR_INVALID_USAGE);
    gr_job_destroy(done); /* takes it off the queue of a destroyed runtime */
    gr_job_destroy(left);
    gr_graph_destroy(g);
    gr_test_tensors_free(&s);
}

static void queue_misuse_is_refused(void)
{
    gr_runtime *rt = make_rt(1);
    gr_test_tensors s = gr_test_tensors_make(10, 1, 256);
    gr_job_options o = notify_options();
    gr_error_info err;
    gr_job *got[1];
    gr_graph *g;
    size_t n = 99;
    int fd = 0;

    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    ASSERT_STATUS(gr_job_submit(rt, g, s.t, 1, &o, NULL, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "notify");
    ASSERT_STATUS(gr_runtime_completion_fd(rt, NULL), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_runtime_completion_fd(NULL, &fd), GR_ERR_INVALID_ARGUMENT);
    ASSERT_EQ(fd, -1);
    ASSERT_STATUS(gr_runtime_reap(rt, NULL, 1, &n), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_runtime_reap(rt, got, 1, NULL), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_runtime_reap(NULL, got, 1, &n), GR_ERR_INVALID_ARGUMENT);
    gr_runtime_destroy(rt);
    gr_graph_destroy(g);
    gr_test_tensors_free(&s);
}

/* Many notify jobs from several threads, one descriptor in an epoll set, one reaper: each
 * job reaped once, complete, its callback returned, its outputs written. */
static _Atomic(entry *) by_id[SUBMITTERS * JOBS_PER_THREAD + 1];

static void id_callback(gr_job *job, gr_status st, void *user)
{
    entry *e = user;
    uint64_t id = gr_job_id(job);

    (void)st;
    ASSERT_TRUE(id >= 1 && id <= SUBMITTERS * JOBS_PER_THREAD);
    if (e->k % 7 == 0)
        sleep_ms(1);
    atomic_store_explicit(&e->callback_returned, 1, memory_order_relaxed);
    /* release: the reaper that finds the entry by the job's id sees the stores above. */
    atomic_store_explicit(&by_id[id], e, memory_order_release);
}

static void *notify_submit_main(void *p)
{
    submitter *sub = p;
    shared *sh = sub->sh;
    gr_job_options o = notify_options();
    gr_job *job;

    o.on_complete = id_callback;
    pthread_barrier_wait(&sh->start);
    for (uint32_t j = 0; j < JOBS_PER_THREAD; j++) {
        o.user = &sh->entries[sub->first + j];
        ASSERT_STATUS(gr_job_submit(sh->rt, sh->g, &sh->s.t[sub->first + j], 1, &o, &job,
                                    NULL),
                      GR_OK);
    }
    return NULL;
}

static void many_jobs_one_queue(void)
{
    enum { TOTAL = SUBMITTERS * JOBS_PER_THREAD };
    shared sh = {.rt = make_rt(3)};
    submitter subs[SUBMITTERS];
    pthread_t th[SUBMITTERS];
    struct epoll_event ev = {.events = EPOLLIN};
    uint32_t reaped = 0;
    int fd = -1;

    sh.s = gr_test_tensors_make(11, TOTAL, ELEMS);
    sh.entries = calloc(TOTAL, sizeof(*sh.entries));
    ASSERT_TRUE(sh.entries != NULL);
    for (uint32_t k = 0; k < TOTAL; k++) {
        sh.entries[k].magic = ENTRY_MAGIC;
        sh.entries[k].k = k;
    }
    ASSERT_STATUS(gr_graph_create_seed(&sh.g), GR_OK);
    sh.ep = epoll_create1(EPOLL_CLOEXEC);
    ASSERT_GE(sh.ep, 0);
    ASSERT_STATUS(gr_runtime_completion_fd(sh.rt, &fd), GR_OK);
    ASSERT_EQ(epoll_ctl(sh.ep, EPOLL_CTL_ADD, fd, &ev), 0);
    pthread_barrier_init(&sh.start, NULL, SUBMITTERS + 1);
    for (uint32_t t = 0; t < SUBMITTERS; t++) {
        subs[t] = (submitter){&sh, t * JOBS_PER_THREAD};
        pthread_create(&th[t], NULL, notify_submit_main, &subs[t]);
    }
    pthread_barrier_wait(&sh.start);
    while (reaped < TOTAL) {
        struct epoll_event out;
        gr_job *got[16];
        size_t n = 0;
        int r = epoll_wait(sh.ep, &out, 1, 30000);

        if (r < 0 && errno == EINTR)
            continue;
        ASSERT_EQ(r, 1); /* else 30 s without a completion: lost */
        ASSERT_STATUS(gr_runtime_reap(sh.rt, got, 16, &n), GR_OK);
        ASSERT_GT_U64(n, 0); /* readable means something to reap: only this thread reaps */
        for (size_t i = 0; i < n; i++) {
            gr_status result = GR_ERR_INTERNAL;
            uint64_t id = gr_job_id(got[i]);
            entry *e;

            ASSERT_TRUE(id >= 1 && id <= TOTAL);
            e = atomic_load_explicit(&by_id[id], memory_order_acquire);
            ASSERT_TRUE(e != NULL); /* reaped before its callback returned */
            ASSERT_EQ(e->magic, ENTRY_MAGIC);
            ASSERT_EQ(atomic_fetch_add(&e->reaped, 1), 0);
            ASSERT_EQ(atomic_load(&e->callback_returned), 1);
            ASSERT_STATUS(gr_job_wait(got[i], 0, &result), GR_OK);
            ASSERT_STATUS(result, GR_OK);
            gr_test_expect_processed(&sh.s, e->k);
            gr_job_destroy(got[i]);
            reaped++;
        }
    }
    for (uint32_t t = 0; t < SUBMITTERS; t++)
        pthread_join(th[t], NULL);
    ASSERT_TRUE(!readable(fd, 0));
    for (uint32_t k = 0; k < TOTAL; k++)
        ASSERT_EQ(atomic_load(&sh.entries[k].reaped), 1);
    close(sh.ep);
    pthread_barrier_destroy(&sh.start);
    gr_runtime_destroy(sh.rt);
    gr_graph_destroy(sh.g);
    gr_test_tensors_free(&sh.s);
    free(sh.entries);
}

GR_TEST_MAIN(GR_TEST(complete_job_is_readable_at_once),
             GR_TEST(never_readable_before_the_callback_returns),
             GR_TEST(canceled_job_becomes_readable),
             GR_TEST(timed_out_job_becomes_readable),
             GR_TEST(destroy_closes_the_descriptor),
             GR_TEST(misuse_is_refused),
             GR_TEST(many_jobs_one_epoll_set),
             GR_TEST(queue_fd_readable_while_jobs_wait),
             GR_TEST(destroyed_jobs_leave_the_queue),
             GR_TEST(queue_misuse_is_refused),
             GR_TEST(many_jobs_one_queue))
