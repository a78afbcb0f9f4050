/*
 * trace.h - NVTX ranges on the CUDA path, so that Nsight Systems shows the pipeline by job
 * and index: one range per unit of work ("job 12 index 345", its index as the payload, a
 * colour per job) with nested ranges for its phases ("budget wait", "gather", "graph update",
 * "launch", "wait", "scatter", and "end": the unit's memory given back and its parts ended).
 *
 * Only the host side can be marked: an iteration's copies and kernels run on the device
 * inside one cudaGraphLaunch, so what a range can cover is the worker's part: waiting for
 * the budget, staging, updating and launching the graph, and waiting for its event. The
 * device-side rows of the same iteration (each memcpy and kernel node) are what Nsight
 * Systems' CUDA trace shows (nsys profile --trace=cuda,nvtx --cuda-graph-trace=node), and
 * it links them to the launch inside the range.
 *
 * Cost: none unless a tool is attached. NVTX tools attach by setting NVTX_INJECTION64_PATH
 * (nsys does); the runtime reads it once at create and, without it, never formats a range
 * name or calls NVTX at all (callers test rt->trace first). Built without the NVTX3
 * headers (they come with the CUDA toolkit), these functions do nothing.
 */
#ifndef GR_TRACE_H
#define GR_TRACE_H

#include <stdbool.h>
#include <stdint.h>

/* Whether an NVTX tool is attached to this process (and NVTX is built in). */
bool gr__trace_wanted(void);

/* Tests only: mark ranges on every backend, not just CUDA, so that the worker's ranges can
 * be checked where there is no GPU (tests/trace_test.c). Set before gr_runtime_create. */
extern bool gr__trace_all_backends;

/* Open the range of one unit of work: `tensors` indices from `index` (a batch when more
 * than one), or the part from element `offset` of one index (a chunk when offset or elems
 * says so). Ranges nest per thread and must be closed on the thread that opened them. */
void gr__trace_push_unit(uint64_t job, uint64_t index, uint32_t tensors, uint64_t offset,
                         uint64_t elems, uint64_t tensor_elems);

/* Open a range for a phase inside the unit; `what` is a string literal. */
void gr__trace_push(const char *what);

void gr__trace_pop(void);

#endif /* GR_TRACE_H */
