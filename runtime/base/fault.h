/*
 * fault.h - fault injection: make the Nth call of a named site fail, once or from then on,
 * so that tests can prove every failure path ends in a clear status with nothing leaked,
 * nothing held and nobody left waiting (tests/fault_test.c sweeps every site).
 *
 * A plan is a comma-separated list of SITE:N (the Nth call of SITE fails, once), SITE:N+
 * (the Nth call and every later one) and SITE:~N (a random one in every N calls, each
 * call decided on its own, for as long as the plan is armed: faults under load), with at
 * most one seed=S (a whole number) for the random rules; without it the seed is
 * GR_FAULT_SEED's, else 0. Random rules are deterministic per call number: with the same
 * seed the same call numbers of a site fail in every run (gr__fault_random_fails says
 * which), but which thread, and so which job, makes a given call depends on the threads'
 * interleaving. The empty plan fails nothing but counts the calls of every site, which is
 * how a sweep learns how many there are. The plan comes from the config
 * (gr_testing_set_fault_plan, <graphrun_testing.h>, which stores it in gr_config.testing_)
 * or, when that is NULL, the GR_FAULT environment variable, and gr_runtime_create arms it. Plan and counters are process-wide, because some sites (graph
 * lowering, pinned allocation) have no runtime at hand: arming replaces any earlier plan and
 * restarts the counts, and the runtime that armed a plan disarms it when it is destroyed. It
 * is a testing facility: one faulty runtime at a time.
 *
 * Unarmed, a site costs one relaxed atomic load; armed, one atomic fetch-add, and for a
 * random rule a hash of (seed, site, call number).
 */
#ifndef GR_FAULT_H
#define GR_FAULT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <graphrun.h>

typedef enum gr_fault_site {
    GR_FAULT_ALLOC = 0,         /* "alloc": the runtime's own host allocations */
    GR_FAULT_PIN,               /* "pin": gr_host_alloc (pinned host memory; staging) */
    GR_FAULT_THREAD,            /* "thread": pthread_create (workers, deadline, copy pool) */
    GR_FAULT_ARENA,             /* "arena": placing an iteration in a device's arena */
    GR_FAULT_DEVICE_ALLOC,      /* "device_alloc": reserving a device's arena */
    GR_FAULT_REGISTER,          /* "register": cudaHostRegister (gr_host_register) */
    GR_FAULT_STREAM,            /* "stream": cudaStreamCreate */
    GR_FAULT_EVENT,             /* "event": cudaEventCreate, Record, Synchronize */
    GR_FAULT_GRAPH_INSTANTIATE, /* "graph_instantiate": building and instantiating a graph */
    GR_FAULT_GRAPH_UPDATE,      /* "graph_update": updating an instantiated graph in place */
    GR_FAULT_GRAPH_LAUNCH,      /* "graph_launch": cudaGraphLaunch */
    GR_FAULT_COPY,              /* "copy": the driver refusing a copy of a tensor's own memory
                                   as laid out (a copy node going into a graph, a batched
                                   copy; the host backend's copy nodes): the unit runs again
                                   staged, whose copies this site never refuses */
    GR_FAULT_SITE_COUNT
} gr_fault_site;

/* The site's name in plans ("alloc", ...), or NULL for an out-of-range value. */
const char *gr__fault_site_name(gr_fault_site site);

/* Parse and arm `plan` (see above), replacing any armed plan and zeroing the counters.
 * GR_ERR_INVALID_ARGUMENT with "fault plan '...': ..." in err for a malformed plan (nothing
 * is armed then). Returns a token for gr__fault_disarm. Any thread. */
gr_status gr__fault_arm(const char *plan, uint64_t *token, gr_error_info *err);

/* Disarm, if the plan armed under `token` is still the one armed. Any thread. */
void gr__fault_disarm(uint64_t token);

/* Calls of `site` counted since the current plan was armed, and of those the ones the
 * plan failed. Any thread. */
uint64_t gr__fault_calls(gr_fault_site site);
uint64_t gr__fault_injected(gr_fault_site site);

/* Whether a random rule SITE:~one_in with seed `seed` fails call `k` (1 for the first) of
 * `site`: what the armed plan decides, for tests and for replaying a run. Pure. */
bool gr__fault_random_fails(uint64_t seed, gr_fault_site site, uint64_t k, uint64_t one_in);

bool gr__fault_hit_slow(gr_fault_site site);

extern atomic_bool gr__fault_armed;

/* Count one call of `site`; true when the plan says this call fails. Any thread. */
static inline bool gr__fault_hit(gr_fault_site site)
{
    /* Relaxed: arming happens before the runtime that armed it starts its threads, which
     * orders it for them; other threads may see it late, which only shifts the count. */
    if (!atomic_load_explicit(&gr__fault_armed, memory_order_relaxed))
        return false;
    return gr__fault_hit_slow(site);
}

/* The runtime's allocations, each a call of the "alloc" site. */
void *gr__malloc(size_t bytes);
void *gr__calloc(size_t n, size_t size);
void *gr__realloc(void *p, size_t bytes);

/* pthread_create with default attributes, a call of the "thread" site (EAGAIN when the
 * plan fails it, as when the system is out of threads), through gr__thread_start. */
int gr__thread_create(pthread_t *thread, const char *name, void *(*start)(void *), void *arg);

/* pthread_create of `start(arg)` through a wrapper that every thread graphrun starts runs
 * in: it names the thread `name` from inside it (Linux; "gr-" and what it does, at most 15
 * characters: "gr-worker", "gr-copy", "gr-deadline", "gr-hostcache"), so that top -H and
 * gdb tell graphrun's threads from the CUDA driver's and the application's, and counts it
 * in gr__threads_live from before it is created to its last instruction. A thread the CUDA
 * driver or a library starts from one of graphrun's inherits the name, but is not counted.
 * An error number as pthread_create's (EAGAIN when the wrapper's few bytes cannot be had). */
int gr__thread_start(pthread_t *thread, const char *name, void *(*start)(void *), void *arg);

/* graphrun's threads running now, in the whole process: a runtime's destroy joins all it
 * started, so the count after it is the count before its create (the stress test's leak
 * check, tools/graphrun/stress.c; tests/lifecycle_test.c). */
unsigned gr__threads_live(void);

#endif /* GR_FAULT_H */
