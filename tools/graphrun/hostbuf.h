/*
 * hostbuf.h - host memory for the driver's tensors, of the kind the user asked for (pinned,
 * registered or pageable), falling back to pageable memory when the system will not pin
 * more (a small RLIMIT_MEMLOCK, pinned memory exhausted): the results are the same, only
 * slower, and the driver says so once on stderr rather than failing the run.
 */
#ifndef GR_HOSTBUF_H
#define GR_HOSTBUF_H

#include <stdbool.h>
#include <stdint.h>

typedef enum gr_mem_kind {
    GR_MEM_PAGEABLE,   /* malloc */
    GR_MEM_PINNED,     /* gr_host_alloc */
    GR_MEM_REGISTERED, /* malloc, then gr_host_register */
    /* One cudaHostAlloc per tensor, the tensor at its start, as a program's own pinned
     * allocations are (back to back where the driver places them so): tensor sets
     * (tensor_set.h) only; a buffer from gr_hostbuf_alloc of this kind is pinned. */
    GR_MEM_HOSTALLOC,
} gr_mem_kind;

const char *gr_mem_kind_name(gr_mem_kind k);

/* `bytes` (> 0) of memory of kind `want`, 64-byte aligned, or pageable memory when that
 * kind cannot be had (warned about once per process); NULL only when there is no memory at
 * all. Free with gr_hostbuf_free. Any thread. */
void *gr_hostbuf_alloc(gr_mem_kind want, uint64_t bytes);

/* As gr_hostbuf_alloc, for a large buffer kept for long (a streaming run's window). Pinned
 * memory then comes as anonymous memory on transparent huge pages, registered with
 * gr_host_register, where the kernel gives huge pages on request
 * (/sys/kernel/mm/transparent_hugepage/enabled "always" or "madvise"): page-locking maps
 * a 2 MiB page in one entry where 4 KiB pages take 512, and 800 MB pinned in 0.13 s that
 * way against 0.29 s by cudaHostAlloc (H100, tools/bench/probes/pin_cost.cu). The data
 * starts on a 2 MiB boundary; the kernel makes huge pages of it when it has them free,
 * small ones otherwise. Otherwise, with GR_TEST_HUGE_PAGES=0, or when the mapping or its
 * registration is refused (GR_TEST_HUGE_PAGES=refuse, for tests), as gr_hostbuf_alloc. */
void *gr_hostbuf_alloc_large(gr_mem_kind want, uint64_t bytes);

/* The kind a buffer from gr_hostbuf_alloc really is. */
gr_mem_kind gr_hostbuf_kind(const void *p);

/* Whether a buffer was mapped for huge pages (gr_hostbuf_alloc_large). */
bool gr_hostbuf_huge(const void *p);

/* Buffers that fell back to pageable memory, in this process so far. */
uint64_t gr_hostbuf_fallbacks(void);

/* Free a buffer from gr_hostbuf_alloc or gr_hostbuf_alloc_large. NULL is a no-op. Any
 * thread. */
void gr_hostbuf_free(void *p);

#endif /* GR_HOSTBUF_H */
