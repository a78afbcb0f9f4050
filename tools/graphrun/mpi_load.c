/*
 * mpi_load.c - find and load libgraphrun_mpi.so (mpi_ops.h) for `graphrun run --mpi`.
 *
 * The plugin lives in PREFIX/lib/graphrun/ for an installed PREFIX/bin/graphrun
 * (tools/install), or beside the graphrun binary (Bazel builds it there; tools/gpu_suite
 * copies both): the first of the two that exists is loaded, and when neither does the
 * message names the one beside the binary. The binary's directory comes from
 * /proc/self/exe, so that the binary may be started through a symbolic link (Bazel's
 * runfiles). dlopen resolves the plugin's own needs, libmpi and the rest of Open MPI, from
 * the system's library path; when they are missing, dlerror names the library, and the
 * message says which package brings it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tools/graphrun/mpi_ops.h"

const gr_mpi_ops *gr_mpi_load(char *why, size_t why_len)
{
    static const char *const where[] = {"/../lib/graphrun", ""};
    char exe[PATH_MAX], path[PATH_MAX + sizeof("/../lib/graphrun/" GR_MPI_PLUGIN)];
    const gr_mpi_ops *ops;
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    char *slash;
    void *h;

    if (n <= 0) {
        snprintf(why, why_len, "cannot find the graphrun binary's directory (/proc/self/exe)");
        return NULL;
    }
    exe[n] = '\0';
    slash = strrchr(exe, '/');
    for (size_t i = 0; i < sizeof(where) / sizeof(where[0]); i++) {
        snprintf(path, sizeof(path), "%.*s%s/%s", slash ? (int)(slash - exe) : 1,
                 slash ? exe : ".", where[i], GR_MPI_PLUGIN);
        if (access(path, F_OK) == 0 || i + 1 == sizeof(where) / sizeof(where[0]))
            break;
    }
    /* RTLD_GLOBAL: Open MPI loads its own components (mca_*.so) with dlopen, and they look
     * for libmpi's symbols in the global scope. */
    h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (h == NULL) {
        snprintf(why, why_len,
                 "--mpi needs %s and Open MPI's libraries (Debian: apt-get install openmpi-bin "
                 "libopenmpi3): %s",
                 path, dlerror());
        return NULL;
    }
    ops = dlsym(h, GR_MPI_ENTRY);
    if (ops == NULL || ops->abi != GR_MPI_ABI) {
        snprintf(why, why_len, "%s is not the MPI plugin of this graphrun (%s)", path,
                 ops == NULL ? "no " GR_MPI_ENTRY : "another version");
        return NULL;
    }
    return ops; /* never unloaded: MPI stays initialized until the process ends */
}
