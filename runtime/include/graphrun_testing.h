/*
 * graphrun_testing.h - what only tests use: fault injection. Installed beside <graphrun.h>,
 * which it includes; the library defines and exports what it declares. Nothing here is for
 * production: a program that never includes this header cannot turn faults on but through
 * the GR_FAULT environment variable (docs/RELIABILITY.md), and pays one relaxed atomic load
 * per fault site for the facility.
 */
#ifndef GRAPHRUN_TESTING_H
#define GRAPHRUN_TESTING_H

#include <graphrun.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Make the runtime that gr_runtime_create makes from `cfg` (a GR_CONFIG_INIT config) inject
 * faults by `plan`, or by none with plan NULL (the default: the GR_FAULT environment
 * variable's plan, if it is set; "" is a plan that fails nothing, and so overrides GR_FAULT).
 *
 * A plan: rules separated by commas. "SITE:N" makes the Nth call of a site fail, "SITE:N+"
 * that call and every later one, "SITE:~N" a random one in every N calls for as long as the
 * runtime lives, seeded by a "seed=S" rule (else the GR_FAULT_SEED environment variable,
 * else 0): the same seed fails the same call numbers, though which job makes a given call
 * varies with the threads' timing. Sites: alloc, pin, thread, arena, device_alloc,
 * register, stream, event, graph_instantiate, graph_update, graph_launch, copy
 * (docs/RELIABILITY.md says what each covers).
 *
 * Only the pointer is stored in cfg (its private slot, gr_config.testing_): the text must
 * stay valid until gr_runtime_create has returned, which parses it and refuses a malformed
 * one (GR_ERR_INVALID_ARGUMENT, "fault plan '...': ..."). gr_runtime_create arms the plan
 * and gr_runtime_destroy of that runtime disarms it; while armed it is process-wide (some
 * sites, such as pinned allocation, have no runtime at hand): one faulty runtime at a time.
 * GR_ERR_INVALID_ARGUMENT for a NULL or uninitialized cfg. Any thread (cfg is the caller's).
 */
gr_status gr_testing_set_fault_plan(gr_config *cfg, const char *plan);

#ifdef __cplusplus
}
#endif

#endif /* GRAPHRUN_TESTING_H */
