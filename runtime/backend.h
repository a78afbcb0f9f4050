/*
 * backend.h - what a backend provides to the runtime, and the device and worker records it
 * works with.
 *
 * The runtime owns scheduling (ring, budget, arena, jobs); a backend owns execution: it
 * reserves each device's arena region once, sets up each worker on the worker's own thread
 * (the CUDA backend binds a context and creates a stream there), and runs one iteration at a
 * time, synchronously, from that worker. Backends never take runtime locks.
 */
#ifndef GR_BACKEND_H
#define GR_BACKEND_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "graph/graph.h"
#include "runtime/arena.h"
#include "runtime/budget.h"
#include "runtime/graphrun.h"

struct gr_runtime;

typedef struct gr_device {
    uint32_t id;          /* index within the runtime */
    int ordinal;          /* the backend's device number (CUDA device ordinal) */
    gr_budget *budget;    /* bytes, capacity = the arena's size */
    gr_arena *arena;      /* offsets into `region` */
    void *region;         /* base of the arena's memory, reserved by the backend */
    uint64_t region_size; /* = gr_arena_size(arena) */
    void *backend_state;
    atomic_bool lost;     /* set on a sticky device error: its work fails fast */
    atomic_uint workers_retired; /* workers whose private context a fault ruined */
    _Atomic uint64_t iterations_done;
    _Atomic uint64_t iterations_failed;
    _Atomic uint64_t graph_instantiations; /* counted by the CUDA backend */
    _Atomic uint64_t graph_updates;
} gr_device;

typedef struct gr_worker {
    struct gr_runtime *rt;
    gr_device *dev;
    uint32_t id; /* index within the runtime */
    pthread_t thread;
    bool started; /* the thread exists and must be joined */
    atomic_bool retired; /* its private context is ruined: it takes no more work */
    void *backend_state;
    gr_arena_block block; /* the iteration's placement, from alloc to free */
    gr_tensor view;       /* the host side of the current unit, as the backend sees it */
    /* Staging (pinned host memory for units that are gathered and scattered), grown on
     * first use; and the worker's per-unit scratch: which parts are live, the copy list. */
    float *staging;
    uint64_t staging_floats; /* what it holds */
    uint64_t staging_elems;  /* per port, for the current unit: ports lie this far apart */
    bool staging_pageable;   /* pinned memory could not be had: malloc'd (worker.c) */
    uint8_t *live;           /* GR_UNIT_MAX_TENSORS */
    struct gr_copy *copies;  /* GR_UNIT_MAX_TENSORS * GR_MAX_PORTS */
    uint64_t *copy_ends;     /* as many: gr_copier_copy's scratch */
} gr_worker;

typedef struct gr_backend_ops {
    gr_backend kind;
    const char *name;
    /* Device regions are a multiple of this (the device allocator's page): the budget is
     * rounded down to it, so the memory really allocated never exceeds the budget. */
    uint64_t region_granule;
    /* Devices usable on this machine (without reserving anything). GR_ERR_UNAVAILABLE with
     * a reason when there are none. */
    gr_status (*probe)(const gr_config *cfg, uint32_t *count, gr_error_info *err);
    /* Reserve dev->region_size bytes for the arena (dev->ordinal set). */
    gr_status (*device_open)(gr_device *dev, const gr_config *cfg, gr_error_info *err);
    void (*device_close)(gr_device *dev);
    /* On the worker's own thread, before its first iteration, and after its last. */
    gr_status (*worker_open)(gr_worker *w, gr_error_info *err);
    void (*worker_close)(gr_worker *w);
    /* Run one iteration to completion: inputs copied in, kernels run, outputs copied out.
     * On failure fills err (node and reason). */
    gr_status (*run)(gr_worker *w, const gr_iteration *it, gr_error_info *err);
    /* Whether host memory at p can be copied to the device as it is, at full speed (it is
     * page-locked). Any thread. */
    bool (*dma_ready)(const void *p);
} gr_backend_ops;

extern const gr_backend_ops gr_backend_host;

/* The CUDA backend, or NULL when this build has none. */
const gr_backend_ops *gr_backend_cuda_ops(void);

#endif /* GR_BACKEND_H */
