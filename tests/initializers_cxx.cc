// initializers_cxx.cc - every *_INIT macro of graphrun.h as C++ compiles it (positional),
// for initializers_test.c to compare with C's (designated). Compiled as C++11, pedantic,
// warnings as errors: the oldest C++ the header promises.
#include <graphrun.h>

extern "C" {

gr_config gr_test_cxx_config(void)
{
    gr_config v = GR_CONFIG_INIT;
    return v;
}

gr_job_options gr_test_cxx_job_options(void)
{
    gr_job_options v = GR_JOB_OPTIONS_INIT;
    return v;
}

gr_buffer_desc gr_test_cxx_buffer_desc(void)
{
    gr_buffer_desc v = GR_BUFFER_DESC_INIT;
    return v;
}

gr_stats gr_test_cxx_stats(void)
{
    gr_stats v = GR_STATS_INIT;
    return v;
}

gr_kernel_def gr_test_cxx_kernel_def(void)
{
    gr_kernel_def v = GR_KERNEL_DEF_INIT;
    return v;
}

gr_expr_def gr_test_cxx_expr_def(void)
{
    gr_expr_def v = GR_EXPR_DEF_INIT;
    return v;
}

gr_runtime_info gr_test_cxx_runtime_info(void)
{
    gr_runtime_info v = GR_RUNTIME_INFO_INIT;
    return v;
}

gr_job_progress gr_test_cxx_job_progress(void)
{
    gr_job_progress v = GR_JOB_PROGRESS_INIT;
    return v;
}

gr_kernel_info gr_test_cxx_kernel_info(void)
{
    gr_kernel_info v = GR_KERNEL_INFO_INIT;
    return v;
}

}
