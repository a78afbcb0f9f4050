# dist_archive: one static archive of a C library's own code, for installing
# (tools/install), and the link information that goes with it.
#
# Why a rule: Bazel 4.2.3 gives every cc_library an archive of its own, and no
# rule that merges them; and cc_binary(linkshared = 1) links its deps as
# archives, so without alwayslink it would drop every object nothing in the
# shared library itself references (all of them: a library has no main).  This
# rule reads the objects straight from the deps' CcInfo (the PIC ones, so the
# archive also goes into consumers' shared libraries and PIE executables) and
# archives those of this workspace with the toolchain's `ar`.  Prebuilt
# libraries of other repositories (@ck's libck.a, @local_cuda's static cudart)
# are not copied into it: they are the library's private dependencies.
#
# Outputs:
#   lib<stem>.a        this workspace's objects, one member each
#   lib<stem>.private  one line per private dependency, in link order:
#                        `archive <execroot-relative path>` for prebuilt
#                        libraries, `flag <linker flag>` for linkopts
#                      tools/install turns it into the pkg-config file's
#                      Libs.private.
#
# Providers: CcInfo with the archive as an alwayslink library plus the private
# dependencies and flags, so a cc_binary(linkshared = 1) depending on it links
# the whole archive into the shared library, with cudart and libck inside.
# Generated libraries of other repositories must be listed in `drop` (they are
# build helpers, such as @ck's TSan suppressions hook, not part of the
# library); any other one is an error, so nothing goes missing silently.

load("@bazel_tools//tools/cpp:toolchain_utils.bzl", "find_cpp_toolchain")

def _dist_archive_impl(ctx):
    cc_toolchain = find_cpp_toolchain(ctx)
    feature_configuration = cc_common.configure_features(
        ctx = ctx,
        cc_toolchain = cc_toolchain,
        requested_features = ctx.features,
        unsupported_features = ctx.disabled_features,
    )
    drop = [Label(d) for d in ctx.attr.drop]

    objects = []
    private_libs = []  # LibraryToLink of prebuilt libraries from other repositories
    flags = []
    seen = {}
    for dep in ctx.attr.deps:
        for li in dep[CcInfo].linking_context.linker_inputs.to_list():
            if li.owner in drop:
                continue
            for f in li.user_link_flags:
                if f not in flags:
                    flags.append(f)
            for lib in li.libraries:
                if li.owner.workspace_name == "":
                    for o in (lib.pic_objects or lib.objects):
                        if o.basename in seen:
                            fail("dist_archive: two objects named %s (%s, %s): ar would keep one" %
                                 (o.basename, seen[o.basename], o.path))
                        seen[o.basename] = o.path
                        objects.append(o)
                elif lib.static_library != None and lib.static_library.is_source:
                    private_libs.append(lib)
                else:
                    fail(("dist_archive: %s is a library built from another repository; " +
                          "list it in `drop` if it is not part of the library") % li.owner)
    if not objects:
        fail("dist_archive: no objects found in %s" % ctx.attr.deps)

    archive = ctx.actions.declare_file("lib%s.a" % ctx.attr.stem)
    args = ctx.actions.args()
    args.add("rcsD")  # D: no timestamps or uids, so the same build gives the same bytes
    args.add(archive)
    args.add_all(objects)
    ctx.actions.run(
        executable = cc_toolchain.ar_executable,
        arguments = [args],
        inputs = depset(objects, transitive = [cc_toolchain.all_files]),
        outputs = [archive],
        mnemonic = "DistArchive",
        progress_message = "Archiving %s" % archive.short_path,
    )

    private = ctx.actions.declare_file("lib%s.private" % ctx.attr.stem)
    lines = ["archive " + lib.static_library.path for lib in private_libs]
    lines += ["flag " + f for f in flags]
    ctx.actions.write(private, "\n".join(lines) + "\n")

    own = cc_common.create_library_to_link(
        actions = ctx.actions,
        feature_configuration = feature_configuration,
        cc_toolchain = cc_toolchain,
        static_library = archive,
        alwayslink = True,
    )
    linking_context = cc_common.create_linking_context(
        linker_inputs = depset([cc_common.create_linker_input(
            owner = ctx.label,
            libraries = depset([own] + private_libs),
            user_link_flags = depset(flags),
        )]),
    )
    return [
        DefaultInfo(files = depset([archive, private])),
        CcInfo(linking_context = linking_context),
    ]

dist_archive = rule(
    implementation = _dist_archive_impl,
    attrs = {
        "deps": attr.label_list(providers = [CcInfo], mandatory = True),
        # Labels as strings: a target of another repository need not be visible here.
        "drop": attr.string_list(),
        "stem": attr.string(mandatory = True),
        "_cc_toolchain": attr.label(default = "@bazel_tools//tools/cpp:current_cc_toolchain"),
    },
    fragments = ["cpp"],
)
