/*
 * initializers_test.c - the header's *_INIT macros: designated in C, positional in C++
 * (graphrun.h says why), the same values either way, field by field. The C++ side is
 * initializers_cxx.cc. A field appended to a struct without its C++ initializer updated
 * shows here as a difference (or, for a nonzero default, as a C++ zero).
 */
#include <string.h>

#include <graphrun.h>

#include "tests/testing.h"

gr_config gr_test_cxx_config(void);
gr_job_options gr_test_cxx_job_options(void);
gr_buffer_desc gr_test_cxx_buffer_desc(void);
gr_stats gr_test_cxx_stats(void);
gr_kernel_def gr_test_cxx_kernel_def(void);
gr_expr_def gr_test_cxx_expr_def(void);
gr_runtime_info gr_test_cxx_runtime_info(void);
gr_job_progress gr_test_cxx_job_progress(void);
gr_kernel_info gr_test_cxx_kernel_info(void);

static void config_init(void)
{
    gr_config c = GR_CONFIG_INIT, x = gr_test_cxx_config();

    ASSERT_EQ(c.struct_size, sizeof(gr_config));
    ASSERT_EQ(c.magic, GR_CONFIG_MAGIC);
    ASSERT_EQ(x.struct_size, c.struct_size);
    ASSERT_EQ(x.magic, c.magic);
    ASSERT_EQ(x.backend, c.backend);
    ASSERT_EQ_U64(x.budget_bytes, c.budget_bytes);
    ASSERT_EQ(x.workers_per_device, c.workers_per_device);
    ASSERT_EQ(x.ring_capacity, c.ring_capacity);
    ASSERT_EQ(x.host_devices, c.host_devices);
    ASSERT_EQ(x.context_mode, c.context_mode);
    ASSERT_EQ(x.copy_threads, c.copy_threads);
    ASSERT_EQ_U64(x.staging_bytes, c.staging_bytes);
    ASSERT_EQ_U64(x.batch_below_bytes, c.batch_below_bytes);
    ASSERT_EQ(x.split_tensors, c.split_tensors);
    ASSERT_PTR_EQ(x.testing_, c.testing_);
    ASSERT_TRUE(x.log_callback == c.log_callback);
    ASSERT_PTR_EQ(x.log_user, c.log_user);
    ASSERT_EQ(x.log_level, c.log_level);
    ASSERT_PTR_EQ(x.devices, c.devices);
    ASSERT_EQ(x.device_count, c.device_count);
    ASSERT_EQ_U64(x.pipeline_bytes, c.pipeline_bytes);
    ASSERT_EQ_U64(x.host_cache_bytes, c.host_cache_bytes);
    /* The defaults graphrun.h documents (gr_config). */
    ASSERT_EQ(c.workers_per_device, 3);
    ASSERT_EQ(c.ring_capacity, 4096);
    ASSERT_EQ_U64(c.staging_bytes, 64ull << 20);
    ASSERT_EQ_U64(c.pipeline_bytes, 128ull << 20);
}

static void job_options_init(void)
{
    gr_job_options c = GR_JOB_OPTIONS_INIT, x = gr_test_cxx_job_options();

    ASSERT_EQ(x.struct_size, sizeof(gr_job_options));
    ASSERT_EQ(x.struct_size, c.struct_size);
    ASSERT_EQ(x.magic, c.magic);
    ASSERT_EQ(x.deadline_ns, c.deadline_ns);
    ASSERT_TRUE(x.on_complete == c.on_complete);
    ASSERT_PTR_EQ(x.user, c.user);
    ASSERT_PTR_EQ(x.constants, c.constants);
    ASSERT_EQ(x.n_constants, c.n_constants);
    ASSERT_EQ(x.notify, c.notify);
}

static void buffer_desc_init(void)
{
    gr_buffer_desc c = GR_BUFFER_DESC_INIT, x = gr_test_cxx_buffer_desc();

    ASSERT_EQ(x.struct_size, sizeof(gr_buffer_desc));
    ASSERT_EQ(x.struct_size, c.struct_size);
    ASSERT_EQ(x.magic, c.magic);
    ASSERT_EQ(x.dtype, c.dtype);
    ASSERT_EQ(x.num, c.num);
    ASSERT_EQ(x.den, c.den);
    ASSERT_EQ_U64(x.fixed_elems, c.fixed_elems);
    ASSERT_EQ(c.num, 1);
    ASSERT_EQ(c.den, 1);
}

/* The rest of these structs is zero in both languages: only the header is set. */
static void header_only_inits(void)
{
    gr_stats s = GR_STATS_INIT, sx = gr_test_cxx_stats();
    gr_kernel_def k = GR_KERNEL_DEF_INIT, kx = gr_test_cxx_kernel_def();
    gr_expr_def e = GR_EXPR_DEF_INIT, ex = gr_test_cxx_expr_def();
    gr_runtime_info i = GR_RUNTIME_INFO_INIT, ix = gr_test_cxx_runtime_info();
    gr_job_progress p = GR_JOB_PROGRESS_INIT, px = gr_test_cxx_job_progress();
    gr_kernel_info k2 = GR_KERNEL_INFO_INIT, k2x = gr_test_cxx_kernel_info();

    ASSERT_EQ(sx.struct_size, sizeof(gr_stats));
    ASSERT_EQ(sx.struct_size, s.struct_size);
    ASSERT_EQ(sx.magic, s.magic);
    ASSERT_EQ(kx.struct_size, sizeof(gr_kernel_def));
    ASSERT_EQ(kx.struct_size, k.struct_size);
    ASSERT_EQ(kx.magic, k.magic);
    ASSERT_EQ(ex.struct_size, sizeof(gr_expr_def));
    ASSERT_EQ(ex.struct_size, e.struct_size);
    ASSERT_EQ(ex.magic, e.magic);
    ASSERT_EQ(ix.struct_size, sizeof(gr_runtime_info));
    ASSERT_EQ(ix.struct_size, i.struct_size);
    ASSERT_EQ(ix.magic, i.magic);
    ASSERT_EQ(px.struct_size, sizeof(gr_job_progress));
    ASSERT_EQ(px.struct_size, p.struct_size);
    ASSERT_EQ(px.magic, p.magic);
    ASSERT_EQ(k2x.struct_size, sizeof(gr_kernel_info));
    ASSERT_EQ(k2x.struct_size, k2.struct_size);
    ASSERT_EQ(k2x.magic, k2.magic);
}

GR_TEST_MAIN(GR_TEST(config_init), GR_TEST(job_options_init), GR_TEST(buffer_desc_init),
             GR_TEST(header_only_inits))
