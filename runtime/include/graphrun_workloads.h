/*
 * graphrun_workloads.h - example workloads: finished graphs that the demo, the benchmarks,
 * the docs' examples and the Python package's seed() run, so that a first program or a
 * measurement needs no graph of its own. Installed beside <graphrun.h>, which it includes;
 * the library defines and exports what it declares. A real application builds its graphs
 * with the gr_graph_* calls or a graph spec (gr_graph_parse) instead.
 */
#ifndef GRAPHRUN_WORKLOADS_H
#define GRAPHRUN_WORKLOADS_H

#include <graphrun.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The seed pipeline, finalized and the caller's (a reference for gr_graph_destroy): buffer
 * `x` of the tensor's size, nodes `load` (H2D, port 0 into x), `seed` (the kernel, in place)
 * and `store` (D2H, x to port 0). `seed` is ten fused rounds of x = pow(x * 1.01 + 1.01,
 * 0.5). GR_ERR_INVALID_ARGUMENT for out NULL; GR_ERR_OUT_OF_MEMORY (*out NULL). Any thread.
 */
gr_status gr_graph_create_seed(gr_graph **out);

#ifdef __cplusplus
}
#endif

#endif /* GRAPHRUN_WORKLOADS_H */
