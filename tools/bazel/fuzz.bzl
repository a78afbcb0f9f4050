# clang_fuzz_binary: a libFuzzer binary built with the local clang, whatever the C
# toolchain Bazel uses (gcc) and whatever --config is in effect.
#
# Why: libFuzzer ships with clang only (libclang-rt-14-dev), and gcc cannot instrument for
# it, so the fuzzer cannot be a cc_binary. This rule compiles the fuzz target together with
# every C source of the cc_library targets in `deps` (collected through their own `srcs`,
# transitively, by an aspect: nothing is listed twice) in one clang command, and links the
# objects and static libraries those targets hold ready-made (the nvcc-built kernels, the
# static CUDA runtime: uninstrumented, as in the sanitizer configs):
#
#   clang -g -O1 -fsanitize=fuzzer,address,undefined -I<workspace root>
#         -I<workspace root>/runtime/include SOURCES OBJECTS -o NAME
#
# --copt and the sanitizer configs are ignored on purpose: the fuzzer always has ASan and
# UBSan, never TSan, so `bazel test --config=tsan //...` builds it the same way.
#
#   load("//tools/bazel:fuzz.bzl", "clang_fuzz_binary")
#   clang_fuzz_binary(name = "spec_fuzz", srcs = ["spec_fuzz.c"], deps = ["//graph"])
#
# clang is looked up on PATH (clang-14, then clang); tools/ensure_deps installs it.

FUZZ_FLAGS = [
    "-g",
    "-O1",
    "-std=gnu11",
    "-fsanitize=fuzzer,address,undefined",
    "-fno-sanitize-recover=undefined",
    "-fno-omit-frame-pointer",
    # The runtime's code has no floating-point contraction either (kernels/BUILD).
    "-ffp-contract=off",
]

_CSources = provider(
    doc = "C sources, headers and ready-made objects of a cc_library and its dependencies.",
    fields = ["srcs", "hdrs", "objs", "linkopts"],
)

def _collect_impl(target, ctx):
    srcs, hdrs, objs = [], [], []
    if hasattr(ctx.rule.files, "srcs"):
        for f in ctx.rule.files.srcs:
            if f.extension == "c":
                srcs.append(f)
            elif f.extension == "h":
                hdrs.append(f)
            elif f.extension in ("o", "a"):
                objs.append(f)
    if hasattr(ctx.rule.files, "hdrs"):
        hdrs += ctx.rule.files.hdrs
    linkopts = getattr(ctx.rule.attr, "linkopts", [])
    deps = [d[_CSources] for d in getattr(ctx.rule.attr, "deps", []) if _CSources in d]
    return [_CSources(
        srcs = depset(srcs, transitive = [d.srcs for d in deps]),
        hdrs = depset(hdrs, transitive = [d.hdrs for d in deps]),
        objs = depset(objs, transitive = [d.objs for d in deps]),
        linkopts = depset(linkopts, transitive = [d.linkopts for d in deps]),
    )]

_collect = aspect(implementation = _collect_impl, attr_aspects = ["deps"])

def _clang_fuzz_binary_impl(ctx):
    infos = [d[_CSources] for d in ctx.attr.deps]
    srcs = depset(ctx.files.srcs, transitive = [i.srcs for i in infos])
    hdrs = depset(ctx.files.hdrs, transitive = [i.hdrs for i in infos])
    objs = depset(transitive = [i.objs for i in infos])
    linkopts = depset(transitive = [i.linkopts for i in infos]).to_list()
    out = ctx.actions.declare_file(ctx.label.name)
    root = ctx.label.workspace_root or "."
    ctx.actions.run_shell(
        inputs = depset(transitive = [srcs, hdrs, objs]),
        outputs = [out],
        command = """
clang=$(command -v clang-14 || command -v clang) || {
  echo "clang_fuzz_binary: clang not found on PATH: run tools/ensure_deps" >&2; exit 1; }
exec "$clang" -fdebug-prefix-map="$PWD"=. "$@"
""",
        arguments = FUZZ_FLAGS + ctx.attr.copts + ["-I" + root, "-I" + root + "/runtime/include"] +
                    [f.path for f in srcs.to_list()] + [f.path for f in objs.to_list() if f.extension == "o"] +
                    [f.path for f in objs.to_list() if f.extension == "a"] +
                    ["-o", out.path] + linkopts,
        mnemonic = "ClangFuzz",
        progress_message = "clang (libFuzzer) %s" % ctx.label,
        # PATH, to find clang.
        use_default_shell_env = True,
    )
    return [DefaultInfo(files = depset([out]), executable = out)]

clang_fuzz_binary = rule(
    implementation = _clang_fuzz_binary_impl,
    doc = "A libFuzzer binary: `srcs` (defining LLVMFuzzerTestOneInput) and the C sources " +
          "of `deps`, built by clang with ASan and UBSan.",
    attrs = {
        "srcs": attr.label_list(allow_files = [".c"], mandatory = True),
        "hdrs": attr.label_list(allow_files = [".h"]),
        "deps": attr.label_list(aspects = [_collect]),
        "copts": attr.string_list(),
    },
    executable = True,
)
