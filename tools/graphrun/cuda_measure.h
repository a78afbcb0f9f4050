/*
 * cuda_measure.h - measurements the driver takes from the GPU itself: the copy ceilings of
 * the host link, and device memory in use as the device reports it (not graphrun's own
 * counters).
 */
#ifndef GR_CUDA_MEASURE_H
#define GR_CUDA_MEASURE_H

#include <stdint.h>

#include <graphrun.h>

typedef struct gr_ceilings {
    double h2d_gbs;   /* pinned host -> device, GB/s (1e9 bytes per second) */
    double d2h_gbs;   /* pinned device -> host */
    double bidir_gbs; /* both directions at once, bytes moved in total */
    uint64_t bytes;   /* size of each copy */
    int reps;         /* copies per direction per trial; the best of TRIALS is kept */
} gr_ceilings;

#define GR_CEILING_TRIALS 5

/* Measure the pinned copy ceilings of device `ordinal` with copies of `bytes`. Allocates
 * 2 x bytes of pinned host and device memory for the measurement and frees it after. */
gr_status gr_measure_ceilings(int ordinal, uint64_t bytes, int reps, gr_ceilings *out,
                              gr_error_info *err);

/* Samples cudaMemGetInfo on a device from a thread of its own. */
typedef struct gr_devmem_sampler gr_devmem_sampler;

/* Start sampling device `ordinal` every `period_us`; the first sample is the baseline. */
gr_status gr_devmem_start(int ordinal, unsigned period_us, gr_devmem_sampler **out,
                          gr_error_info *err);

/* Stop; report the baseline, the highest reading while sampling, and the device total (all
 * in bytes in use on the device, every process counted). */
void gr_devmem_stop(gr_devmem_sampler *s, uint64_t *baseline, uint64_t *peak, uint64_t *total);

/* The device's name ("NVIDIA H200") and multiprocessor count, for reports. */
void gr_device_describe(int ordinal, char *name, int name_size, int *sm_count);

typedef struct gr_cuda_device_desc {
    char name[128];
    char pci_bus_id[32];
    int cc_major, cc_minor, sm_count;
    uint64_t memory_total, memory_free;
} gr_cuda_device_desc;

/* Everything `graphrun info` shows about device `ordinal` (creates its primary context). */
gr_status gr_cuda_describe(int ordinal, gr_cuda_device_desc *out, gr_error_info *err);

/* Driver and runtime versions as CUDA encodes them (13000 = 13.0); 0 when unknown. */
void gr_cuda_versions(int *driver, int *runtime);

/* `bytes` of pinned memory from cudaHostAlloc (portable), as a program's own allocation:
 * not graphrun's pool. GR_ERR_OUT_OF_MEMORY when the driver cannot give it. Free with
 * gr_cuda_host_free. Any thread. */
gr_status gr_cuda_host_alloc(uint64_t bytes, void **out);
void gr_cuda_host_free(void *p);

/* The higher of two measurements, direction by direction: the more demanding ceiling. */
void gr_ceilings_max(gr_ceilings *into, const gr_ceilings *other);

#endif /* GR_CUDA_MEASURE_H */
