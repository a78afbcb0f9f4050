# cuda_library: compile CUDA (.cu) files with the local nvcc into a static
# library that C targets can depend on like any cc_library.
#
# Why: offline Debian Bazel 4.2.3 has no rules_cuda, so this small rule runs
# nvcc (found by @local_cuda, see cuda_configure.bzl) once per .cu file and
# hands the objects to a cc_library (linkstatic) together with the static CUDA
# runtime.  Whole-program (non-relocatable) device code, sm_90 SASS + PTX.
#
#   load("//tools/bazel:cuda.bzl", "cuda_library")
#   cuda_library(name = "k", srcs = ["k.cu"], hdrs = ["k.h"], deps = [...])
#
# nvcc sees: the workspace root (and bin dir) as include paths, so
# `#include "kernels/foo.h"` works; the `hdrs`; and the headers, include paths
# and defines of `deps` (their CcInfo compilation context).

load("@local_cuda//:defs.bzl", "NVCC")

NVCC_FLAGS = [
    "-O3",
    "-std=c++17",
    "-Xcompiler",
    "-fPIC",
    "-gencode",
    "arch=compute_90,code=sm_90",
    "-gencode",
    "arch=compute_90,code=compute_90",
]

def _nvcc_compile_impl(ctx):
    cc_infos = [d[CcInfo] for d in ctx.attr.deps]
    comp = cc_common.merge_cc_infos(cc_infos = cc_infos).compilation_context
    root = ctx.label.workspace_root
    inc_args = ["-I" + (root or "."), "-I" + ctx.bin_dir.path + ("/" + root if root else "")]
    for p in comp.quote_includes.to_list() + comp.includes.to_list():
        if "-I" + p not in inc_args:
            inc_args.append("-I" + p)
    for p in comp.system_includes.to_list():
        inc_args += ["-isystem", p]  # nvcc wants it as two arguments
    inc_args += ["-D" + d for d in comp.defines.to_list()]
    inputs = depset(ctx.files.hdrs + ctx.files._cuda_version, transitive = [comp.headers])

    pkg = ctx.label.package
    objs = []
    for src in ctx.files.srcs:
        rel = src.short_path
        if pkg and rel.startswith(pkg + "/"):
            rel = rel[len(pkg) + 1:]
        obj = ctx.actions.declare_file("_nvcc/%s/%s.o" % (ctx.label.name, rel[:-len(".cu")]))

        # nvcc names its temporary files in $TMPDIR after its process id, and in Bazel's
        # sandbox every action's nvcc may be process 2 of its own namespace, beside the same
        # shared /tmp: two at once then overwrite each other's files ("ptxas fatal: Input
        # file '/tmp/tmpxft_00000002_...ptx' could not be opened"). Each action gets a
        # temporary directory of its own, beside its output.
        ctx.actions.run_shell(
            command = 'tmp="$1.tmp"; shift; rm -rf "$tmp" && mkdir -p "$tmp" && ' +
                      'TMPDIR="$tmp" "$@"; rc=$?; rm -rf "$tmp"; exit $rc',
            arguments = [obj.path, NVCC] + NVCC_FLAGS + inc_args + ctx.attr.copts +
                        ["-c", src.path, "-o", obj.path],
            inputs = depset([src], transitive = [inputs]),
            outputs = [obj],
            mnemonic = "Nvcc",
            progress_message = "nvcc %s" % src.short_path,
            # nvcc needs PATH to find the host compiler (gcc/g++).
            use_default_shell_env = True,
        )
        objs.append(obj)
    return [DefaultInfo(files = depset(objs))]

_nvcc_compile = rule(
    implementation = _nvcc_compile_impl,
    attrs = {
        "srcs": attr.label_list(allow_files = [".cu"], mandatory = True),
        "hdrs": attr.label_list(allow_files = True),
        "deps": attr.label_list(providers = [CcInfo]),
        "copts": attr.string_list(),
        "_cuda_version": attr.label(default = "@local_cuda//:version.txt", allow_single_file = True),
    },
)

def cuda_library(name, srcs, hdrs = [], deps = [], copts = [], visibility = None, **kwargs):
    """A cc_library named `name` holding the nvcc-compiled `srcs`.

    kwargs (tags, testonly, linkopts, ...) are passed to the cc_library;
    tags and testonly also to the nvcc step.
    """
    _nvcc_compile(
        name = name + "_nvcc",
        srcs = srcs,
        hdrs = hdrs,
        deps = deps,
        copts = copts,
        tags = kwargs.get("tags"),
        testonly = kwargs.get("testonly"),
        visibility = ["//visibility:private"],
    )
    native.cc_library(
        name = name,
        srcs = [":" + name + "_nvcc"],
        hdrs = hdrs,
        deps = deps + ["@local_cuda//:cudart_static"],
        # nvcc's host code needs the C++ runtime (__gxx_personality_v0,
        # __cxa_guard_*); say so rather than rely on the toolchain's default.
        linkopts = ["-lstdc++"] + kwargs.pop("linkopts", []),
        linkstatic = 1,
        visibility = visibility,
        **kwargs
    )
