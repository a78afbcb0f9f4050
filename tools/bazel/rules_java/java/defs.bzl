# Offline stand-in for @rules_java: Debian's Bazel 4.2.3 (bazel-bootstrap)
# references it from its built-in tools; the native rules are enough.
java_import = native.java_import
java_runtime = native.java_runtime
java_toolchain = native.java_toolchain
java_library = native.java_library
java_binary = native.java_binary
