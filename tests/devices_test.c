/*
 * devices_test.c - several devices in one runtime, on the host backend's emulated devices:
 *   - the device list (gr_config.devices): honoured in order, copied, and every bad list
 *     refused with a message that says what is wrong;
 *   - one job's work shared by every device (each does some of it, outputs right);
 *   - a device lost in the middle of a job: its running iteration fails with
 *     GR_ERR_DEVICE_LOST, the tasks its workers held but had not started on it go to the
 *     other devices, every other index is done with the right output, nothing hangs. Run
 *     with whole tensors and with tensors cut into chunks (the two ways a task is handed
 *     back).
 * The loss is injected by marking the device lost from the test (gr__runtime_device_lost,
 * what the CUDA backend calls on a sticky error); the host backend then stops the
 * iterations running on it at their next node, as a ruined CUDA context would.
 */
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "runtime/runtime.h"
#include "tests/fixtures.h"
#include "tests/testing.h"
#include "tools/graphrun/workload.h"

#define SEC 1000000000ll
/* The runtime behind a caller's handle (runtime.h), to mark one of its devices lost. */
#define RT(handle) gr__runtime_get((handle), &(gr_status){GR_OK})

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

static gr_config host_config(uint32_t host_devices, uint32_t workers, uint64_t budget)
{
    gr_config cfg = GR_CONFIG_INIT;

    cfg.backend = GR_BACKEND_HOST;
    cfg.host_devices = host_devices;
    cfg.workers_per_device = workers;
    cfg.budget_bytes = budget;
    return cfg;
}

/* In-place tensors over one array, filled with the seed workload's inputs. */
static gr_tensor *seed_tensors(float *data, uint64_t count, uint64_t elems, uint64_t seed)
{
    gr_tensor *t = calloc(count, sizeof(*t));

    for (uint64_t i = 0; i < count; i++) {
        t[i].in[0] = t[i].out[0] = data + i * elems;
        t[i].elems = elems;
        gr_workload_fill(data + i * elems, 0, elems, seed, i);
    }
    return t;
}

/* The seed computation as 30 kernels (mul, add, pow per round): the same result, and many
 * nodes, so a loss is seen within a short time of any instant of an iteration. */
static gr_graph *unfused_seed(void)
{
    const char *x = "x";
    const float mul = 1.01f, add = 1.01f, half = 0.5f;
    char name[32], prev[32] = "load";
    gr_graph *g;

    ASSERT_STATUS(gr_graph_create(&g), GR_OK);
    ASSERT_STATUS(gr_graph_add_buffer(g, "x", 1, 1), GR_OK);
    ASSERT_STATUS(gr_graph_add_h2d(g, "load", 0, "x"), GR_OK);
    for (int r = 0; r < 10; r++) {
        static const char *const kernel[3] = {"mul", "add", "pow"};
        const float *s[3] = {&mul, &add, &half};

        for (int k = 0; k < 3; k++) {
            snprintf(name, sizeof(name), "%s%d", kernel[k], r);
            ASSERT_STATUS(gr_graph_add_kernel(g, name, kernel[k], &x, 1, "x", s[k], 1), GR_OK);
            ASSERT_STATUS(gr_graph_add_dep(g, prev, name), GR_OK);
            memcpy(prev, name, sizeof(prev));
        }
    }
    ASSERT_STATUS(gr_graph_add_d2h(g, "store", "x", 0), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, prev, "store"), GR_OK);
    ASSERT_STATUS(gr_graph_finalize(g), GR_OK);
    return g;
}

static void expect_refused(const gr_config *cfg, const char *why)
{
    gr_error_info err;
    gr_runtime *rt = (gr_runtime *)1;

    ASSERT_STATUS(gr_runtime_create(cfg, &rt, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_PTR_EQ(rt, NULL);
    ASSERT_STATUS(err.status, GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, why);
}

/* ------------------------------------------------------------------------------------- */

static void bad_device_lists_are_refused(void)
{
    gr_config cfg = host_config(4, 1, 1 << 20);
    int twice[] = {0, 2, 0}, absent[] = {1, 4}, negative[] = {-1}, fine[] = {1};

    cfg.devices = twice;
    cfg.device_count = 3;
    expect_refused(&cfg, "device 0 is listed twice (entries 0 and 2)");
    cfg.devices = absent;
    cfg.device_count = 2;
    expect_refused(&cfg, "device 4 is not present: the host backend has 4 device(s), "
                         "numbered 0..3");
    cfg.devices = negative;
    cfg.device_count = 1;
    expect_refused(&cfg, "devices[0] is -1");
    cfg.devices = NULL;
    cfg.device_count = 2;
    expect_refused(&cfg, "devices is NULL but device_count is 2");
    cfg.devices = fine;
    cfg.device_count = 0;
    expect_refused(&cfg, "devices is set but device_count is 0");
}

/* host_devices 4, devices {3, 1}: two runtime devices, numbered as listed, both working. */
static void device_list_is_honoured(void)
{
    enum { N = 64, E = 4096 };
    int list[] = {3, 1};
    gr_config cfg = host_config(4, 2, 1 << 20);
    float *data = malloc(N * E * sizeof(float));
    gr_tensor *t = seed_tensors(data, N, E, 7);
    gr_runtime_info info = GR_RUNTIME_INFO_INIT;
    gr_device_stats st;
    gr_error_info err;
    gr_runtime *rt;
    gr_graph *g;
    gr_job *job;
    int ordinal;

    cfg.devices = list;
    cfg.device_count = 2;
    ASSERT_STATUS(gr_runtime_create(&cfg, &rt, &err), GR_OK);
    list[0] = list[1] = 0; /* the runtime copied the list */
    ASSERT_STATUS(gr_runtime_info_get(rt, &info), GR_OK);
    ASSERT_EQ(info.device_count, 2);
    ASSERT_STATUS(gr_runtime_device_ordinal(rt, 0, &ordinal), GR_OK);
    ASSERT_EQ(ordinal, 3);
    ASSERT_STATUS(gr_runtime_device_ordinal(rt, 1, &ordinal), GR_OK);
    ASSERT_EQ(ordinal, 1);
    ASSERT_STATUS(gr_runtime_device_ordinal(rt, 2, &ordinal), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STATUS(gr_runtime_device_stats(rt, 2, &st), GR_ERR_INVALID_ARGUMENT);

    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    ASSERT_STATUS(gr_job_submit(rt, g, t, N, NULL, &job, NULL), GR_OK);
    ASSERT_STATUS(gr_test_wait(job, 60 * SEC), GR_OK);
    for (uint64_t i = 0; i < N; i++)
        ASSERT_EQ_U64(gr_workload_check_seed(data + i * E, 0, E, 7, i, NULL), 0);
    gr_job_destroy(job);
    gr_graph_destroy(g);
    gr_runtime_destroy(rt);

    /* Without a list: every device, in order. */
    cfg.devices = NULL;
    cfg.device_count = 0;
    ASSERT_STATUS(gr_runtime_create(&cfg, &rt, &err), GR_OK);
    ASSERT_STATUS(gr_runtime_info_get(rt, &info), GR_OK);
    ASSERT_EQ(info.device_count, 4);
    for (uint32_t d = 0; d < 4; d++) {
        ASSERT_STATUS(gr_runtime_device_ordinal(rt, d, &ordinal), GR_OK);
        ASSERT_EQ(ordinal, (int)d);
    }
    gr_runtime_destroy(rt);
    free(t);
    free(data);
}

/* One job over three devices: every device takes part, every output is right. */
static void work_is_shared_by_every_device(void)
{
    enum { N = 240, E = 16384 };
    gr_config cfg = host_config(3, 2, 4 << 20);
    float *data = malloc((size_t)N * E * sizeof(float));
    gr_tensor *t = seed_tensors(data, N, E, 8);
    gr_device_stats st;
    gr_error_info err;
    gr_runtime *rt;
    gr_graph *g;
    gr_job *job;
    uint64_t total = 0;

    cfg.split_tensors = 0; /* one iteration per tensor, so iterations count tensors */
    ASSERT_STATUS(gr_runtime_create(&cfg, &rt, &err), GR_OK);
    g = unfused_seed();
    ASSERT_STATUS(gr_job_submit(rt, g, t, N, NULL, &job, NULL), GR_OK);
    ASSERT_STATUS(gr_test_wait(job, 120 * SEC), GR_OK);
    for (uint64_t i = 0; i < N; i++)
        ASSERT_EQ_U64(gr_workload_check_seed(data + i * E, 0, E, 8, i, NULL), 0);
    for (uint32_t d = 0; d < 3; d++) {
        ASSERT_STATUS(gr_runtime_device_stats(rt, d, &st), GR_OK);
        printf("    device %u: %llu iterations\n", d, (unsigned long long)st.iterations_done);
        ASSERT_GT(st.iterations_done, 0);
        ASSERT_EQ_U64(st.iterations_failed, 0);
        total += st.iterations_done;
    }
    ASSERT_EQ_U64(total, N);
    gr_job_destroy(job);
    gr_graph_destroy(g);
    gr_runtime_destroy(rt);
    free(t);
    free(data);
}

/*
 * Three devices, four workers each. Device 1 is lost once it has done a few iterations: what
 * it was running fails (GR_ERR_DEVICE_LOST, outputs untouched), the others do the rest.
 * Whole tensors, with a budget of one iteration per device: on each device one worker runs
 * while the other three hold their next tasks and wait for the budget; those tasks have not
 * reached the device, so they go back to the ring and other devices do them. At most one
 * index fails: without the hand back, the waiting workers' indices would fail too.
 */
static void lost_device_mid_job(bool chunks)
{
    enum { N = 90, E = 65536, WORKERS = 4 };
    gr_config cfg = host_config(3, WORKERS, 0);
    float *data = malloc((size_t)N * E * sizeof(float));
    gr_tensor *t = seed_tensors(data, N, E, 9);
    gr_device_stats st, lost_at;
    gr_job_progress p = GR_JOB_PROGRESS_INIT, at_loss = GR_JOB_PROGRESS_INIT;
    uint64_t others_at_loss = 0, others_after = 0;
    gr_error_info err, first;
    gr_runtime *rt;
    gr_graph *g;
    gr_job *job;
    gr_status result;
    uint64_t footprint, failed = 0;

    g = unfused_seed();
    ASSERT_STATUS(gr_graph_footprint(g, E, &footprint), GR_OK);
    /* Whole tensors: one iteration fits, not two. Chunks: a tensor's iteration is four
     * times a worker's share of the budget, so each is cut in four. */
    cfg.budget_bytes = chunks ? footprint : footprint + footprint / 2;
    cfg.split_tensors = chunks;
    cfg.batch_below_bytes = 0;
    ASSERT_STATUS(gr_runtime_create(&cfg, &rt, &err), GR_OK);
    ASSERT_STATUS(gr_job_submit(rt, g, t, N, NULL, &job, NULL), GR_OK);
    do {
        sleep_ms(2);
        ASSERT_STATUS(gr_runtime_device_stats(rt, 1, &lost_at), GR_OK);
        ASSERT_TRUE(!gr_job_is_complete(job));
    } while (lost_at.iterations_done < 3);
    gr__runtime_device_lost(RT(rt), &RT(rt)->devices[1]);
    ASSERT_STATUS(gr_runtime_device_stats(rt, 1, &lost_at), GR_OK);
    ASSERT_STATUS(gr_job_progress_get(job, &at_loss), GR_OK);
    for (uint32_t d = 0; d < 3; d += 2) {
        ASSERT_STATUS(gr_runtime_device_stats(rt, d, &st), GR_OK);
        others_at_loss += st.iterations_done;
    }

    result = gr_test_wait(job, 120 * SEC);
    ASSERT_STATUS(gr_job_progress_get(job, &p), GR_OK);
    ASSERT_EQ_U64(p.done + p.failed, N);
    ASSERT_EQ_U64(p.canceled, 0);
    for (uint64_t i = 0; i < N; i++) {
        gr_index_state s;
        gr_status ist;
        float *x = data + i * E;

        ASSERT_STATUS(gr_job_index_get(job, i, &s, &ist), GR_OK);
        if (s == GR_INDEX_DONE) {
            ASSERT_EQ_U64(gr_workload_check_seed(x, 0, E, 9, i, NULL), 0);
            continue;
        }
        ASSERT_EQ(s, GR_INDEX_FAILED);
        ASSERT_STATUS(ist, GR_ERR_DEVICE_LOST);
        /* Never written; with chunks, the chunk done elsewhere may be, correctly. */
        if (chunks)
            ASSERT_EQ_U64(gr_workload_check_partial(x, 0, E, 9, i, NULL), 0);
        else
            ASSERT_EQ_U64(gr_workload_check_input(x, 0, E, 9, i, NULL), 0);
        failed++;
    }
    ASSERT_STATUS(gr_job_error_get(job, &first), GR_OK);
    printf("    device 1 lost after %llu iterations; %llu index(es) failed%s%s\n",
           (unsigned long long)lost_at.iterations_done, (unsigned long long)failed,
           failed ? ": " : "", failed ? first.message : "");
    /* Whole tensors: one iteration was running on device 1. Chunks: a chunk is a worker's
     * share of the budget, so each of its workers may have been running one. */
    ASSERT_LE_U64(failed, chunks ? WORKERS : 1);
    ASSERT_STATUS(result, failed ? GR_ERR_DEVICE_LOST : GR_OK);
    /* Device 1 did nothing after the loss but end what it was running. */
    ASSERT_STATUS(gr_runtime_device_stats(rt, 1, &st), GR_OK);
    ASSERT_LE_U64(st.iterations_done + st.iterations_failed,
                  lost_at.iterations_done + lost_at.iterations_failed + WORKERS);
    /* The other two did what was still queued when device 1 was lost: every index that had
     * not started needed at least one iteration, and device 1 ran none of them. (How much
     * each device did before the loss is a matter of scheduling, not a promise.) */
    for (uint32_t d = 0; d < 3; d += 2) {
        ASSERT_STATUS(gr_runtime_device_stats(rt, d, &st), GR_OK);
        ASSERT_GT(st.iterations_done, 0);
        others_after += st.iterations_done;
    }
    ASSERT_GE_U64(others_after - others_at_loss, at_loss.queued);
    ASSERT_EQ_U64(gr__job_anomalies(job), 0);
    gr_job_destroy(job);

    /* The runtime goes on with the devices left. */
    for (uint64_t i = 0; i < N; i++)
        gr_workload_fill(data + i * E, 0, E, 9, i);
    ASSERT_STATUS(gr_job_submit(rt, g, t, N, NULL, &job, NULL), GR_OK);
    ASSERT_STATUS(gr_test_wait(job, 120 * SEC), GR_OK);
    for (uint64_t i = 0; i < N; i++)
        ASSERT_EQ_U64(gr_workload_check_seed(data + i * E, 0, E, 9, i, NULL), 0);
    gr_job_destroy(job);
    gr_graph_destroy(g);
    gr_runtime_destroy(rt);
    free(t);
    free(data);
}

static void lost_device_mid_job_whole_tensors(void)
{
    lost_device_mid_job(false);
}

static void lost_device_mid_job_in_chunks(void)
{
    lost_device_mid_job(true);
}

static void on_alarm(int sig)
{
    (void)sig;
    gr_test_fail_from_signal("destroy hung (alarm)");
}

static void wait_until(bool (*cond)(gr_runtime *), gr_runtime *rt, const char *what)
{
    for (int ms = 0; !cond(rt); ms++) {
        if (ms == 30000)
            GR_TEST_FAIL("waited 30 s for %s", what);
        sleep_ms(1);
    }
}

static bool both_wait_for_budget(gr_runtime *rt)
{
    return gr__budget_waiters(RT(rt)->devices[0].budget) == 1 &&
           gr__budget_waiters(RT(rt)->devices[1].budget) == 1;
}

static bool three_in_the_ring(gr_runtime *rt)
{
    return gr__ring_count(RT(rt)->ring) == 3;
}

static bool device0_did_one(gr_runtime *rt)
{
    return atomic_load(&RT(rt)->devices[0].iterations_done) == 1;
}

/*
 * Tasks left in the ring after every worker has left (a hand back or a submit whose push
 * passed the ring's shutdown check just before the shutdown, and landed after the last
 * worker saw the ring empty): gr_runtime_destroy empties the ring itself. A task is a unit,
 * not an index; here one tensor is cut into four chunks, one of which ran, so the index is
 * RUNNING and ends only when each of its other three units has finished. Destroy must end
 * it (canceled, GR_ERR_SHUTDOWN), and return.
 *
 * A worker cannot be stopped at that instant, so the test builds the state the race
 * leaves: device 1's worker hands its chunk back (device 1 lost) and parks; device 0's
 * worker does one chunk and is then parked too (marked retired, which keeps it from taking
 * tasks just as a worker that has left). Three units stay in the ring, index 0 RUNNING.
 */
static void shutdown_ends_chunks_left_in_the_ring(void)
{
    enum { E = 65536 };
    gr_config cfg = host_config(2, 1, E); /* a quarter of a tensor's iteration */
    float *data = malloc(E * sizeof(float));
    gr_tensor *t = seed_tensors(data, 1, E, 10);
    gr_budget *b0, *b1;
    gr_index_state s;
    gr_error_info err;
    gr_status ist, result;
    gr_runtime *rt;
    gr_graph *g;
    gr_job *job;

    cfg.batch_below_bytes = 0;
    ASSERT_STATUS(gr_runtime_create(&cfg, &rt, &err), GR_OK);
    b0 = RT(rt)->devices[0].budget;
    b1 = RT(rt)->devices[1].budget;
    ASSERT_EQ_U64(gr__budget_capacity(b0), E);
    /* Both workers take a chunk and wait for budget the test holds. */
    ASSERT_STATUS(gr__budget_acquire(b0, E, GR_NO_DEADLINE, NULL), GR_OK);
    ASSERT_STATUS(gr__budget_acquire(b1, E, GR_NO_DEADLINE, NULL), GR_OK);
    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    ASSERT_STATUS(gr_job_submit(rt, g, t, 1, NULL, &job, &err), GR_OK);
    ASSERT_EQ_U64(gr__job_from_handle(job)->n_units, 4);
    wait_until(both_wait_for_budget, rt, "both workers to wait for budget");
    /* Device 1 is lost: its worker's chunk, not started on it, goes back to the ring. */
    gr__runtime_device_lost(RT(rt), &RT(rt)->devices[1]);
    gr__budget_release(b1, E);
    wait_until(three_in_the_ring, rt, "device 1's worker to hand its chunk back");
    /* Device 0's worker does its chunk, then takes nothing more. */
    atomic_store(&RT(rt)->workers[0].retired, true);
    gr__budget_release(b0, E);
    wait_until(device0_did_one, rt, "device 0's worker to do its chunk");
    ASSERT_STATUS(gr_job_index_get(job, 0, &s, NULL), GR_OK);
    ASSERT_EQ(s, GR_INDEX_RUNNING);

    signal(SIGALRM, on_alarm);
    alarm(30);
    gr_runtime_destroy(rt);
    alarm(0);
    ASSERT_STATUS(gr_job_wait(job, 0, &result), GR_OK);
    ASSERT_STATUS(result, GR_ERR_SHUTDOWN);
    ASSERT_STATUS(gr_job_index_get(job, 0, &s, &ist), GR_OK);
    ASSERT_EQ(s, GR_INDEX_CANCELED);
    ASSERT_STATUS(ist, GR_ERR_SHUTDOWN);
    ASSERT_EQ_U64(gr__job_anomalies(job), 0);
    gr_job_destroy(job);
    gr_graph_destroy(g);
    free(t);
    free(data);
}

GR_TEST_MAIN(GR_TEST(bad_device_lists_are_refused), GR_TEST(device_list_is_honoured),
             GR_TEST(work_is_shared_by_every_device),
             GR_TEST(lost_device_mid_job_whole_tensors), GR_TEST(lost_device_mid_job_in_chunks),
             GR_TEST(shutdown_ends_chunks_left_in_the_ring))
