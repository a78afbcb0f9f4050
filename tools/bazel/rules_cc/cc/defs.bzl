# Offline stand-in for @rules_cc: Debian's Bazel 4.2.3 (bazel-bootstrap) wants
# this repository but cannot download it.  The native rules are all we need.
cc_binary = native.cc_binary
cc_library = native.cc_library
cc_test = native.cc_test
cc_import = native.cc_import
cc_toolchain = native.cc_toolchain
cc_toolchain_suite = native.cc_toolchain_suite
objc_library = native.objc_library
cc_proto_library = native.cc_proto_library
