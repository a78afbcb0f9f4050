/*
 * host/host.h - what the host backend offers its tests beyond the backend table: marks of
 * separate allocations (host_backend.c says why).
 */
#ifndef GR_HOST_H
#define GR_HOST_H

#include <stdint.h>

#include <graphrun.h>

/*
 * Testing: mark [p, p + bytes) as one allocation of its own, as the CUDA driver sees one
 * cudaHostAlloc. From then on, in every host runtime of the process, the planner copies no
 * range over a mark's edge (gr_backend_ops.host_span), and an iteration handed such a copy
 * is refused as the driver would refuse it (GR_REACH_REFUSED_COPY). GR_ERR_INVALID_ARGUMENT
 * for NULL, 0 bytes or a range overlapping a mark; GR_ERR_OUT_OF_MEMORY. Any thread;
 * process-wide, like the allocations it stands for.
 */
gr_status gr__host_mark_allocation(const void *p, uint64_t bytes);

/* Forget every mark. Any thread, with no job of a host runtime live. */
void gr__host_clear_allocations(void);

#endif /* GR_HOST_H */
