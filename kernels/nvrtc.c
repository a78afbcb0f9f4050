/*
 * nvrtc.c - CUDA C source to PTX through NVRTC, loaded with dlopen (see nvrtc.h).
 *
 * Nothing links libnvrtc: it is looked up at first use (libnvrtc.so.13, the toolkit's
 * lib64 directory, older sonames; only $GR_NVRTC_LIBRARY when that is set), so a binary
 * built here runs on machines without it, and only kernels given as source are refused
 * there. The few declarations below stand in for
 * <nvrtc.h>, whose ABI (an int result, an opaque program handle) NVIDIA keeps stable.
 *
 * The cache: one entry per distinct text that compiled, never evicted, so a file declaring
 * several kernels, or a spec loaded again, compiles once. Its size is that of the distinct
 * sources a process compiles, which is the program's to bound (every registration or file
 * load is one). Compilation runs outside the lock; two threads
 * compiling the same new text both compile, and the first to finish is kept.
 */
#include "kernels/nvrtc.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/sync.h"

typedef int nvrtc_result;
typedef struct nvrtc_program_ *nvrtc_program;
#define NVRTC_OK 0

typedef struct nvrtc_api {
    nvrtc_result (*create)(nvrtc_program *, const char *, const char *, int,
                           const char *const *, const char *const *);
    nvrtc_result (*compile)(nvrtc_program, int, const char *const *);
    nvrtc_result (*log_size)(nvrtc_program, size_t *);
    nvrtc_result (*log)(nvrtc_program, char *);
    nvrtc_result (*ptx_size)(nvrtc_program, size_t *);
    nvrtc_result (*ptx)(nvrtc_program, char *);
    nvrtc_result (*destroy)(nvrtc_program *);
    const char *(*error_string)(nvrtc_result);
} nvrtc_api;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static nvrtc_api api;
static bool loaded;
static char load_error[256];

static void load(void)
{
    /* GR_NVRTC_LIBRARY names the one library to load (a particular version; and how the
     * tests see a machine without NVRTC). */
    const char *cuda = getenv("CUDA_PATH"), *only = getenv("GR_NVRTC_LIBRARY");
    char in_toolkit[256];
    const char *names[] = {"libnvrtc.so.13", in_toolkit, "libnvrtc.so.12", "libnvrtc.so"};
    void *h = NULL;

    snprintf(in_toolkit, sizeof(in_toolkit), "%s/lib64/libnvrtc.so.13",
             cuda && cuda[0] ? cuda : "/usr/local/cuda");
    if (only != NULL && only[0] != '\0')
        h = dlopen(only, RTLD_NOW | RTLD_LOCAL);
    for (size_t i = 0; only == NULL && i < sizeof(names) / sizeof(names[0]) && h == NULL; i++)
        h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (h == NULL && only != NULL) {
        snprintf(load_error, sizeof(load_error),
                 "NVRTC is not available (GR_NVRTC_LIBRARY=%.100s cannot be loaded): install "
                 "the CUDA toolkit's NVRTC (cuda-nvrtc-13-0) or fix the path",
                 only);
        return;
    }
    if (h == NULL) {
        snprintf(load_error, sizeof(load_error),
                 "NVRTC is not available (libnvrtc.so.13 not found, nor %.100s): install the "
                 "CUDA toolkit's NVRTC (Debian/Ubuntu: cuda-nvrtc-13-0)",
                 in_toolkit);
        return;
    }
#define SYM(field, name)                                                                    \
    if ((*(void **)&api.field = dlsym(h, name)) == NULL) {                                  \
        snprintf(load_error, sizeof(load_error), "NVRTC has no %s: too old a version", name); \
        return;                                                                             \
    }
    SYM(create, "nvrtcCreateProgram")
    SYM(compile, "nvrtcCompileProgram")
    SYM(log_size, "nvrtcGetProgramLogSize")
    SYM(log, "nvrtcGetProgramLog")
    SYM(ptx_size, "nvrtcGetPTXSize")
    SYM(ptx, "nvrtcGetPTX")
    SYM(destroy, "nvrtcDestroyProgram")
    SYM(error_string, "nvrtcGetErrorString")
#undef SYM
    loaded = true;
}

bool gr__nvrtc_available(char *why, size_t size)
{
    pthread_once(&load_once, load);
    if (!loaded && why != NULL && size > 0)
        gr__strlcpy(why, load_error, size);
    return loaded;
}

typedef struct entry {
    struct entry *next;
    uint64_t hash;
    char *source;
    char *ptx;
} entry;

static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static entry *cache;

/* FNV-1a: a key to skip most comparisons; the text itself decides. */
static uint64_t hash_text(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;

    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

static const char *cached(uint64_t hash, const char *source)
{
    for (const entry *e = cache; e != NULL; e = e->next)
        if (e->hash == hash && strcmp(e->source, source) == 0)
            return e->ptx;
    return NULL;
}

/* The log's first lines, folded into one, for a message of `size` bytes. */
static void log_summary(nvrtc_program prog, char *out, size_t size)
{
    size_t n = 0;
    char *log;

    out[0] = '\0';
    if (api.log_size(prog, &n) != NVRTC_OK || n == 0 || (log = malloc(n)) == NULL)
        return;
    if (api.log(prog, log) == NVRTC_OK) {
        size_t used = 0;

        for (const char *p = log; *p && used + 1 < size; p++) {
            if (*p == '\n') {
                if (p[1] == '\0' || used + 3 >= size)
                    break;
                out[used++] = ';';
                out[used++] = ' ';
            } else if (*p != '\r') {
                out[used++] = *p;
            }
        }
        out[used] = '\0';
    }
    free(log);
}

gr_status gr__nvrtc_compile(const char *source, const char *name, const char **ptx,
                            gr_error_info *err)
{
    static const char *const options[] = {"--gpu-architecture=compute_90", "--std=c++17",
                                          "-lineinfo"};
    static const char *const include_names[] = {"graphrun_kernel.h"};
    const char *headers[] = {gr__nvrtc_kernel_header};
    uint64_t hash = hash_text(source);
    nvrtc_program prog = NULL;
    char why[256];
    size_t size = 0;
    nvrtc_result r;
    entry *e;

    if (!gr__nvrtc_available(why, sizeof(why)))
        return gr__error_set(err, GR_ERR_UNAVAILABLE, GR_NO_INDEX, NULL, "%s", why);
    pthread_mutex_lock(&cache_mu);
    *ptx = cached(hash, source);
    pthread_mutex_unlock(&cache_mu);
    if (*ptx != NULL)
        return GR_OK;

    r = api.create(&prog, source, name, 1, headers, include_names);
    if (r != NVRTC_OK)
        return gr__error_set(err, r == 1 ? GR_ERR_OUT_OF_MEMORY : GR_ERR_INVALID_ARGUMENT,
                             GR_NO_INDEX, NULL, "NVRTC cannot take %s: %s", name,
                             api.error_string(r));
    r = api.compile(prog, (int)(sizeof(options) / sizeof(options[0])), options);
    if (r != NVRTC_OK) {
        log_summary(prog, why, sizeof(why));
        api.destroy(&prog);
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL, "NVRTC: %s",
                             why[0] ? why : "compilation failed, with no log");
    }
    e = calloc(1, sizeof(*e));
    if (e == NULL || api.ptx_size(prog, &size) != NVRTC_OK || (e->ptx = malloc(size + 1)) == NULL ||
        (e->source = strdup(source)) == NULL || api.ptx(prog, e->ptx) != NVRTC_OK) {
        if (e) {
            free(e->ptx);
            free(e->source);
        }
        free(e);
        api.destroy(&prog);
        return gr__error_set(err, GR_ERR_OUT_OF_MEMORY, GR_NO_INDEX, NULL,
                             "no memory for the PTX of %s", name);
    }
    api.destroy(&prog);
    e->ptx[size] = '\0';
    e->hash = hash;
    pthread_mutex_lock(&cache_mu);
    *ptx = cached(hash, source);
    if (*ptx == NULL) {
        e->next = cache;
        cache = e;
        *ptx = e->ptx;
        e = NULL;
    }
    pthread_mutex_unlock(&cache_mu);
    if (e != NULL) { /* another thread compiled the same text first */
        free(e->ptx);
        free(e->source);
        free(e);
    }
    return GR_OK;
}
