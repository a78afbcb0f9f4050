/*
 * nvrtc_test.c - kernels given as CUDA C source: NVRTC's compilation at registration (which
 * needs no GPU, so it runs here), its error messages, the kernel files and their
 * declarations, the spec's `cuda` statement, and the layout graphrun_kernel.h gives the
 * sources, field by field against graphrun.h. Cases that need NVRTC say SKIP where it
 * cannot be loaded; CI machines have the CUDA toolkit, so they run there.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graph/graph.h"
#include "kernels/kernels.h"
#include "kernels/nvrtc.h"
#include "runtime/runtime.h"
#include "tests/fixtures.h"
#include "tests/testing.h"

/* graphrun_kernel.h's types under other names, to compare them with graphrun.h's. */
#define gr_scalar dev_scalar
#define gr_kernel_args dev_kernel_args
#undef GR_MAX_KERNEL_INPUTS
#undef GR_MAX_SCALARS
#undef GR_MAX_DIMS
#include "kernels/graphrun_kernel.h"
#undef gr_scalar
#undef gr_kernel_args

#define SAME_FIELD(f)                                                                       \
    ASSERT_EQ_U64(offsetof(dev_kernel_args, f), offsetof(gr_kernel_args, f));               \
    ASSERT_EQ_U64(sizeof(((dev_kernel_args *)0)->f), sizeof(((gr_kernel_args *)0)->f))

static void header_matches_the_api(void)
{
    ASSERT_EQ_U64(sizeof(dev_kernel_args), sizeof(gr_kernel_args));
    ASSERT_EQ_U64(sizeof(dev_scalar), sizeof(gr_scalar));
    SAME_FIELD(out);
    SAME_FIELD(in);
    SAME_FIELD(n);
    SAME_FIELD(in_n);
    SAME_FIELD(s);
    SAME_FIELD(shape);
    SAME_FIELD(rank);
    SAME_FIELD(reserved_);
    ASSERT_TRUE(strstr(gr__nvrtc_kernel_header, "GR_FOR_EACH") != NULL);
}

#define REQUIRE_NVRTC()                                                                     \
    do {                                                                                    \
        static char why_[256];                                                              \
        if (!gr__nvrtc_available(why_, sizeof(why_)))                                       \
            SKIP(why_);                                                                     \
    } while (0)

static const char scale_src[] =
    "#include \"graphrun_kernel.h\"\n"
    "extern \"C\" __global__ void scale(gr_kernel_args a)\n"
    "{\n"
    "    GR_FOR_EACH(i, a) GR_OUT(a, float)[i] = GR_IN(a, 0, float)[i] * a.s[0].f32;\n"
    "}\n";

/* Source compiles at registration, to PTX holding the entry; one text compiles once. */
static void source_kernel_compiles(void)
{
    gr_kernel_def d = gr_test_source_def("scale_src", "scale", scale_src);
    const gr_kernel *a, *b;
    gr_error_info err;

    REQUIRE_NVRTC();
    if (gr_kernel_register(&d, &err) != GR_OK)
        GR_TEST_FAIL("register: %s", err.message);
    a = gr__kernel_find("scale_src");
    ASSERT_TRUE(a != NULL && a->ptx != NULL);
    ASSERT_STR_CONTAINS(a->ptx, ".entry scale(");
    ASSERT_TRUE(a->def.cuda == a->source && a->source != scale_src); /* a copy */
    ASSERT_STR_EQ(a->def.cuda_name, "scale");
    d.name = "scale_src2";
    ASSERT_STATUS(gr_kernel_register(&d, &err), GR_OK);
    b = gr__kernel_find("scale_src2");
    ASSERT_PTR_EQ(a->ptx, b->ptx); /* the same text: compiled once, cached */
}

/* Source NVRTC refuses is refused at registration, with the first lines of its log; so is
 * a definition without an entry name. Nothing is registered. */
static void compile_errors_refused_with_the_log(void)
{
    gr_kernel_def d = gr_test_source_def("broken", "broken",
                                 "extern \"C\" __global__ void broken(int a)\n"
                                 "{\n"
                                 "    undefined_thing(a);\n"
                                 "}\n");
    uint32_t before = gr_kernel_count();
    gr_error_info err;

    REQUIRE_NVRTC();
    ASSERT_STATUS(gr_kernel_register(&d, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "kernel 'broken': NVRTC: broken(3): error: identifier "
                                     "\"undefined_thing\" is undefined");
    d = gr_test_source_def("no_entry", NULL, scale_src);
    ASSERT_STATUS(gr_kernel_register(&d, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "cuda_name must name the source's extern \"C\" "
                                     "__global__ function");
    d = gr_test_source_def("bad_entry", "not-an-identifier", scale_src);
    ASSERT_STATUS(gr_kernel_register(&d, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_EQ(gr_kernel_count(), before);
}

static char tmpdir[64];

static const char *temp_dir(void)
{
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";

    snprintf(tmpdir, sizeof(tmpdir), "%s/nvrtcXXXXXX", base);
    ASSERT_TRUE(mkdtemp(tmpdir) != NULL);
    return tmpdir;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    ASSERT_TRUE(f != NULL);
    ASSERT_EQ(fputs(text, f) >= 0, 1);
    ASSERT_EQ(fclose(f), 0);
}

static const char two_kernels[] =
    "#include \"graphrun_kernel.h\"\n"
    "// graphrun: kernel f_twice elementwise\n"
    "extern \"C\" __global__ void f_twice(gr_kernel_args a)\n"
    "{\n"
    "    GR_FOR_EACH(i, a) GR_OUT(a, float)[i] = 2.0f * GR_IN(a, 0, float)[i];\n"
    "}\n"
    "  // graphrun: kernel f_axpy inputs=2 scalars=1 elementwise block=128\n"
    "extern \"C\" __global__ void f_axpy(gr_kernel_args a)\n"
    "{\n"
    "    GR_FOR_EACH(i, a) GR_OUT(a, float)[i] = a.s[0].f32 * GR_IN(a, 0, float)[i]\n"
    "                                              + GR_IN(a, 1, float)[i];\n"
    "}\n";

/* A file's declarations register its kernels, with their signatures; loading it again
 * changes nothing; another file's kernel of a taken name is refused. */
static void kernel_file_declares_kernels(void)
{
    char path[128], other[128];
    const gr_kernel *k;
    gr_error_info err;
    uint32_t before;

    REQUIRE_NVRTC();
    temp_dir();
    snprintf(path, sizeof(path), "%s/two.cu", tmpdir);
    write_file(path, two_kernels);
    before = gr_kernel_count();
    if (gr_kernel_load_file(path, &err) != GR_OK)
        GR_TEST_FAIL("load: %s", err.message);
    ASSERT_EQ(gr_kernel_count(), before + 2);
    k = gr__kernel_find("f_axpy");
    ASSERT_TRUE(k != NULL);
    ASSERT_EQ(k->def.n_inputs, 2);
    ASSERT_EQ(k->def.n_scalars, 1);
    ASSERT_TRUE(k->def.elementwise);
    ASSERT_EQ(k->def.cuda_block, 128);
    ASSERT_TRUE(k->def.cpu == NULL);
    ASSERT_EQ(gr__kernel_find("f_twice")->def.n_inputs, 1);
    ASSERT_EQ(gr__kernel_find("f_twice")->def.n_scalars, 0);
    ASSERT_STATUS(gr_kernel_load_file(path, &err), GR_OK); /* the same again: nothing new */
    ASSERT_EQ(gr_kernel_count(), before + 2);
    snprintf(other, sizeof(other), "%s/other.cu", tmpdir);
    write_file(other, "// graphrun: kernel f_twice\n"
                      "extern \"C\" __global__ void f_twice(int) {}\n");
    ASSERT_STATUS(gr_kernel_load_file(other, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "other.cu:1:1: kernel 'f_twice' is already registered");
    unlink(path);
    unlink(other);
    rmdir(tmpdir);
}

/* Malformed files: each refusal says where. */
static void kernel_file_errors(void)
{
    char path[128];
    gr_error_info err;

    REQUIRE_NVRTC();
    temp_dir();
    snprintf(path, sizeof(path), "%s/bad.cu", tmpdir);
    write_file(path, "// graphrun: kernel k inputs=9\n__global__ void k() {}\n");
    ASSERT_STATUS(gr_kernel_load_file(path, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "bad.cu:1:23: unknown or bad 'inputs=9'");
    write_file(path, "\n\n   // graphrun: kernel\n");
    ASSERT_STATUS(gr_kernel_load_file(path, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "bad.cu:3:");
    ASSERT_STR_CONTAINS(err.message, "expected the kernel's name");
    write_file(path, "__global__ void k() {}\n");
    ASSERT_STATUS(gr_kernel_load_file(path, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "bad.cu: declares no kernel");
    /* Not a kernel file at all: refused before any compiler sees (and echoes) it. */
    write_file(path, "root:x:0:0:root:/root:/bin/bash\n");
    ASSERT_STATUS(gr_kernel_load_file(path, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "bad.cu: declares no kernel");
    ASSERT_TRUE(strstr(err.message, "root:x") == NULL);
    /* Only regular files: a device or a directory is refused without being read. */
    ASSERT_STATUS(gr_kernel_load_file("/dev/null", &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "/dev/null: not a regular file");
    ASSERT_STATUS(gr_kernel_load_file(tmpdir, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "not a regular file");
    write_file(path, "// graphrun: kernel k\nextern \"C\" __global__ void k(gr_kernel_args a) "
                     "{ nope; }\n");
    ASSERT_STATUS(gr_kernel_load_file(path, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "NVRTC: ");
    ASSERT_STR_CONTAINS(err.message, "bad.cu(2): error: identifier \"gr_kernel_args\" is "
                                     "undefined");
    unlink(path);
    ASSERT_STATUS(gr_kernel_load_file(path, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "bad.cu: cannot open: No such file or directory");
    rmdir(tmpdir);
}

/* A spec's `cuda` statement loads the file (relative to the spec), so its kernels can be
 * named anywhere in the spec; a missing file is refused at the statement. */
static void spec_cuda_statement(void)
{
    char cu[128], spec[128];
    const char *text = "buffer x\n"
                       "h2d load: in0 -> x\n"
                       "kernel k: f_twice(x) -> x     # from the file below\n"
                       "d2h store: x -> out0\n"
                       "load -> k -> store\n"
                       "cuda \"two.cu\"\n";
    gr_error_info err;
    gr_graph *g;

    REQUIRE_NVRTC();
    temp_dir();
    snprintf(cu, sizeof(cu), "%s/two.cu", tmpdir);
    snprintf(spec, sizeof(spec), "%s/t.graph", tmpdir);
    write_file(cu, two_kernels);
    write_file(spec, text);
    if (gr_graph_load(spec, &g, &err) != GR_OK)
        GR_TEST_FAIL("load: %s", err.message);
    ASSERT_STR_EQ(g->nodes[1].kernel->name, "f_twice");
    ASSERT_TRUE(g->splittable);
    gr_graph_destroy(g);
    /* Text in memory (a server's client's, say) may not make the process read files. */
    ASSERT_STATUS(gr_graph_parse(text, strlen(text), spec, &g, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, ":6:6: a 'cuda' statement reads a file, which only a spec "
                                     "loaded from a file may do");
    /* A file that is not there, named by a spec file. */
    write_file(spec, "cuda \"missing.cu\"\nbuffer x\nh2d l: in0 -> x\nd2h s: x -> out0\n"
                     "l -> s\n");
    ASSERT_STATUS(gr_graph_load(spec, &g, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "t.graph:1:6: ");
    ASSERT_STR_CONTAINS(err.message, "missing.cu: cannot open: No such file or directory");
    ASSERT_STATUS(gr_graph_parse("cuda two.cu\n", 12, "m", &g, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "m:1:6: expected a file name in double quotes after "
                                     "'cuda', found 'two.cu'");
    ASSERT_STATUS(gr_graph_parse("cuda \"two.cu\n", 12, "m", &g, &err), GR_ERR_INVALID_ARGUMENT);
    ASSERT_STR_CONTAINS(err.message, "m:1:6: a string that the line does not close");
    unlink(cu);
    unlink(spec);
    rmdir(tmpdir);
}

/* A source kernel has no CPU implementation: the host backend refuses a graph using it at
 * submit, naming the kernel, and nothing runs. */
static void host_backend_refuses_source_kernels(void)
{
    gr_kernel_def d = gr_test_source_def("host_src", "scale", scale_src);
    const char *x = "x";
    float data[16] = {1};
    gr_tensor t = {{data}, {data}, 16, 0, {0}};
    gr_runtime *rt;
    gr_error_info err;
    gr_graph *g;
    gr_job *job;
    float two = 2.0f;

    REQUIRE_NVRTC();
    ASSERT_STATUS(gr_kernel_register(&d, &err), GR_OK);
    ASSERT_STATUS(gr_graph_create(&g), GR_OK);
    ASSERT_STATUS(gr_graph_add_buffer(g, "x", 1, 1), GR_OK);
    ASSERT_STATUS(gr_graph_add_h2d(g, "load", 0, "x"), GR_OK);
    ASSERT_STATUS(gr_graph_add_kernel(g, "k", "host_src", &x, 1, "x", &two, 1), GR_OK);
    ASSERT_STATUS(gr_graph_add_d2h(g, "store", "x", 0), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "load", "k"), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "k", "store"), GR_OK);
    ASSERT_STATUS(gr_graph_finalize(g), GR_OK);
    rt = gr_test_runtime((gr_test_shape){.workers = 1, .budget = 1 << 20});
    ASSERT_STATUS(gr_job_submit(rt, g, &t, 1, NULL, &job, &err), GR_ERR_UNAVAILABLE);
    ASSERT_STR_CONTAINS(err.message, "kernel 'host_src' has no CPU implementation, which the "
                                     "host backend needs");
    ASSERT_FLOAT_BITS_EQ(data[0], 1.0f);
    gr_graph_destroy(g);
    gr_runtime_destroy(rt);
}

/* The CPU version of scale_src: out = x * s0. */
static void scale_cpu(const gr_kernel_args *a, void *user)
{
    (void)user;
    for (uint64_t i = 0; i < a->n; i++)
        ((float *)a->out)[i] = ((const float *)a->in[0])[i] * a->s[0].f32;
}

/* A machine without NVRTC (GR_NVRTC_LIBRARY naming no library, set before this case's
 * process first looks for it: the runner forks each case): a source kernel with no CPU
 * version is refused saying what to install; one with a CPU version registers, runs on
 * the host backend, and is refused by the CUDA backend at submit with the same reason; a
 * kernel file and a spec's `cuda` statement are refused too. */
static void without_nvrtc(void)
{
    gr_kernel_def d = gr_test_source_def("no_nvrtc_src", "scale", scale_src);
    const char *path = "/tmp/graphrun_nvrtc_test_none.cu", *x = "x";
    float data[16], two = 2.0f;
    gr_tensor t = {{data}, {data}, 16, 0, {0}};
    gr_status result = GR_ERR_INTERNAL;
    gr_runtime *rt;
    gr_error_info err;
    gr_graph *g;
    gr_job *job;

    setenv("GR_NVRTC_LIBRARY", "/nonexistent/libnvrtc.so.13", 1);
    ASSERT_STATUS(gr_kernel_register(&d, &err), GR_ERR_UNAVAILABLE);
    ASSERT_STR_CONTAINS(err.message, "kernel 'no_nvrtc_src': NVRTC is not available "
                                     "(GR_NVRTC_LIBRARY=/nonexistent/libnvrtc.so.13 cannot be "
                                     "loaded): install the CUDA toolkit's NVRTC");
    ASSERT_TRUE(gr__kernel_find("no_nvrtc_src") == NULL);

    d = gr_test_source_def("no_nvrtc_cpu", "scale", scale_src);
    d.cpu = scale_cpu;
    ASSERT_STATUS(gr_kernel_register(&d, &err), GR_OK);
    ASSERT_TRUE(gr__kernel_find("no_nvrtc_cpu")->ptx == NULL);
    ASSERT_STATUS(gr_graph_create(&g), GR_OK);
    ASSERT_STATUS(gr_graph_add_buffer(g, "x", 1, 1), GR_OK);
    ASSERT_STATUS(gr_graph_add_h2d(g, "load", 0, "x"), GR_OK);
    ASSERT_STATUS(gr_graph_add_kernel(g, "k", "no_nvrtc_cpu", &x, 1, "x", &two, 1), GR_OK);
    ASSERT_STATUS(gr_graph_add_d2h(g, "store", "x", 0), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "load", "k"), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "k", "store"), GR_OK);
    ASSERT_STATUS(gr_graph_finalize(g), GR_OK);
    for (int i = 0; i < 16; i++)
        data[i] = (float)i;
    rt = gr_test_runtime((gr_test_shape){.workers = 1, .budget = 1 << 20});
    ASSERT_STATUS(gr_job_submit(rt, g, &t, 1, NULL, &job, &err), GR_OK);
    ASSERT_STATUS(gr_job_wait(job, GR_WAIT_FOREVER, &result), GR_OK);
    ASSERT_STATUS(result, GR_OK);
    for (int i = 0; i < 16; i++)
        ASSERT_FLOAT_BITS_EQ(data[i], 2.0f * (float)i);
    gr_job_destroy(job);
    gr_runtime_destroy(rt);
    if (gr_test_no_gpu() == NULL) { /* the CUDA backend: refused, saying why */
        rt = gr_test_runtime((gr_test_shape){.backend = GR_BACKEND_CUDA, .budget = 4 << 20});
        ASSERT_STATUS(gr_job_submit(rt, g, &t, 1, NULL, &job, &err), GR_ERR_UNAVAILABLE);
        ASSERT_STR_CONTAINS(err.message, "kernel 'no_nvrtc_cpu' NVRTC is not available");
        gr_runtime_destroy(rt);
    }
    gr_graph_destroy(g);

    write_file(path, "// graphrun: kernel none_k\nextern \"C\" __global__ void none_k("
                     "gr_kernel_args a) {}\n");
    ASSERT_STATUS(gr_kernel_load_file(path, &err), GR_ERR_UNAVAILABLE);
    ASSERT_STR_CONTAINS(err.message, "NVRTC is not available");
    write_file("/tmp/graphrun_nvrtc_test_none.graph",
               "cuda \"graphrun_nvrtc_test_none.cu\"\nbuffer x\nh2d l: in0 -> x\n"
               "kernel k: none_k(x) -> x\nd2h s: x -> out0\nl -> k -> s\n");
    ASSERT_TRUE(gr_graph_load("/tmp/graphrun_nvrtc_test_none.graph", &g, &err) != GR_OK);
    ASSERT_STR_CONTAINS(err.message, "graphrun_nvrtc_test_none.graph:1:6: ");
    ASSERT_STR_CONTAINS(err.message, "NVRTC is not available");
    unlink("/tmp/graphrun_nvrtc_test_none.graph");
    unlink(path);
}

enum { LOADERS = 8, LOADS = 20 };
static char shared_path[128];
static pthread_barrier_t loaders_start;

static void *load_again_and_again(void *arg)
{
    gr_error_info err;
    intptr_t failed = 0;

    (void)arg;
    pthread_barrier_wait(&loaders_start);
    for (int i = 0; i < LOADS; i++)
        failed += gr_kernel_load_file(shared_path, &err) != GR_OK;
    return (void *)failed;
}

/* Many threads loading one file at once (specs parsed in parallel that name it): every
 * load succeeds, each kernel is registered once. */
static void concurrent_loads_of_one_file(void)
{
    pthread_t th[LOADERS];
    uint32_t before;

    REQUIRE_NVRTC();
    temp_dir();
    snprintf(shared_path, sizeof(shared_path), "%s/shared.cu", tmpdir);
    write_file(shared_path, two_kernels);
    /* Compiled once beforehand, so that the threads meet at the registry, not in NVRTC. */
    {
        gr_kernel_def d = gr_test_source_def("warm_shared", "f_twice", two_kernels);

        d.n_scalars = 0;
        ASSERT_STATUS(gr_kernel_register(&d, NULL), GR_OK);
    }
    before = gr_kernel_count();
    ASSERT_EQ(pthread_barrier_init(&loaders_start, NULL, LOADERS), 0);
    for (intptr_t t = 0; t < LOADERS; t++)
        ASSERT_EQ(pthread_create(&th[t], NULL, load_again_and_again, NULL), 0);
    for (int t = 0; t < LOADERS; t++) {
        void *failed;

        ASSERT_EQ(pthread_join(th[t], &failed), 0);
        ASSERT_EQ((intptr_t)failed, 0);
    }
    ASSERT_EQ(gr_kernel_count(), before + 2);
    ASSERT_EQ(pthread_barrier_destroy(&loaders_start), 0);
    unlink(shared_path);
    rmdir(tmpdir);
}

GR_TEST_MAIN(GR_TEST(header_matches_the_api), GR_TEST(source_kernel_compiles),
             GR_TEST(compile_errors_refused_with_the_log), GR_TEST(kernel_file_declares_kernels),
             GR_TEST(kernel_file_errors), GR_TEST(spec_cuda_statement),
             GR_TEST(host_backend_refuses_source_kernels), GR_TEST(without_nvrtc),
             GR_TEST(concurrent_loads_of_one_file))
