/*
 * fixtures.c - shared test helpers (see fixtures.h).
 */
#include "tests/fixtures.h"

#include "tests/testing.h"

gr_runtime *gr_test_runtime(gr_test_shape shape)
{
    gr_config cfg = GR_CONFIG_INIT;
    gr_error_info err;
    gr_runtime *rt;

    cfg.backend = shape.backend == GR_BACKEND_AUTO ? GR_BACKEND_HOST : shape.backend;
    cfg.host_devices = shape.devices ? shape.devices : 1;
    cfg.workers_per_device = shape.workers ? shape.workers : 3;
    cfg.budget_bytes = shape.budget;
    if (shape.ring)
        cfg.ring_capacity = shape.ring;
    cfg.context_mode = shape.contexts;
    if (shape.whole_tensors)
        cfg.split_tensors = 0;
    if (gr_runtime_create(&cfg, &rt, &err) != GR_OK)
        GR_TEST_FAIL("runtime create: %s: %s", gr_status_str(err.status), err.message);
    return rt;
}

gr_status gr_test_wait(gr_job *job, int64_t timeout_ns)
{
    gr_status result = GR_ERR_INTERNAL;

    ASSERT_STATUS(gr_job_wait(job, timeout_ns, &result), GR_OK);
    return result;
}
