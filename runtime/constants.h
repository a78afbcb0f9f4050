/*
 * constants.h - a job's constants on the devices (gr_graph_add_const): copied to each device
 * once, held in the device's arena while the job's iterations read them, counted in the
 * budget once.
 *
 * A device holds the constants of one job at a time. A unit of a job with constants first
 * makes them resident on its worker's device (gr__const_load: the first worker to need them
 * takes budget and a block at the arena's end for them and copies them in; the others wait
 * for it), then takes its own memory, then uses them (gr__const_use: counted as one of their
 * users, or told they were evicted meanwhile, and then it gives its memory back and starts
 * over); at its end it stops (gr__const_unuse).
 *
 * Why no wait is forever. Whatever waits holds nothing of the device but a loader's budget
 * for its job's constants, which it takes only when no other job's are resident. What is
 * held: units in flight, which end without waiting, and the one job's constants, beside
 * which every unit of that job fits (submission sized them so) in one gap (they lie at the
 * arena's end). Resident constants that no unit uses are evicted as soon as a worker waits
 * on behalf of another job: at once if they are unused then, else when their last user ends
 * (it sees the waiter: gr__const_wait_begin records it under the same lock, so neither
 * misses the other). So the first waiter for memory waits at most for the units in flight,
 * and another job's loader at most for the resident job's units in flight. The price: a job
 * whose constants were evicted copies them in again (gr_stats.constants_copied), and two jobs
 * with constants take turns on a device, one while the other has no unit running there.
 *
 * Lock order: a device's const lock, then the arena's or the budget's (freeing under it);
 * never held across a wait or a backend call.
 */
#ifndef GR_CONSTANTS_H
#define GR_CONSTANTS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "runtime/core/arena.h"
#include "runtime/backend.h"
#include <graphrun.h>

struct gr_job;
struct gr_runtime;

/* One job's constants on one device. */
typedef enum gr_const_state {
    GR_CONST_ABSENT = 0, /* not on the device */
    GR_CONST_LOADING,    /* a worker is taking memory for them and copying them in */
    GR_CONST_READY,      /* resident: units may read them */
} gr_const_state;

typedef struct gr_const_block {
    struct gr_job *job;
    gr_const_state state;
    uint32_t users;       /* units in flight reading them */
    gr_arena_block block; /* their place in the device's arena (READY) */
} gr_const_block;

/* Each device's resident constants, and who waits on the device. */
typedef struct gr_const_dev {
    pthread_mutex_t mu;
    pthread_cond_t cond;      /* a loader waits here for the device to be free */
    gr_const_block *holder;   /* the job's constants LOADING or READY here, or NULL */
    /* By worker id: the job a worker of this device waits for memory on behalf of (NULL:
     * none), for the rule that unused constants go when another job waits. */
    const struct gr_job **waiting;
    uint32_t n_workers;       /* the entries of `waiting` */
} gr_const_dev;

gr_status gr__const_dev_init(gr_const_dev *cd, uint32_t n_workers);
void gr__const_dev_destroy(gr_const_dev *cd);

/*
 * Make `job`'s constants resident on worker w's device: copy them in (budget and an arena
 * block at the region's end taken for them, gr_backend_ops.upload), once no other job's are
 * there, or wait for the worker that copies them. With `may_wait` false (the worker holds a
 * launched unit: it must not sleep) sets *would_wait instead of waiting and does nothing.
 * Counts a copy in (gr_counters.constants_copied). Returns GR_OK, or why they cannot be had
 * (the job's stop, its deadline, shutdown, a lost device, a failed copy, which fails the
 * unit; `reach` says how far a backend failure goes). Worker thread.
 */
gr_status gr__const_load(gr_worker *w, struct gr_job *job, bool may_wait, bool *would_wait,
                         gr_fault_reach *reach, gr_error_info *err);

/* Count a unit of `job` as a user of its resident constants, and say where they are:
 * false when they are not resident (evicted while the unit took its memory). */
bool gr__const_use(gr_worker *w, struct gr_job *job, unsigned char **base);

/* The unit is done with them: unused, they go if a worker waits for another job. */
void gr__const_unuse(gr_worker *w, struct gr_job *job);

/* Worker w is about to wait for budget or arena space on behalf of `job`: resident
 * constants of another job go now if unused, else when their last user ends. End the wait
 * with gr__const_wait_end. Worker thread. */
void gr__const_wait_begin(gr_worker *w, const struct gr_job *job);
void gr__const_wait_end(gr_worker *w);

/* The job has ended: its constants leave every device (none is in use by then). */
void gr__const_release_job(struct gr_job *job);

/* Wake the workers waiting to load constants, to see a stop or a shutdown. Any thread. */
void gr__const_wake(struct gr_runtime *rt);

#endif /* GR_CONSTANTS_H */
