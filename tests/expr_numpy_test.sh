#!/usr/bin/env bash
# expr_numpy_test.sh - expression kernels against NumPy (tests/expr_numpy.py, which prints
# one PASS or FAIL line per case): each expression through the spec parser, the registry and
# the host backend (tests/expr_eval_tool), its output checked by NumPy, not by graphrun's
# own code.
set -u
tool="${TEST_SRCDIR}/graphrun/tests/expr_eval_tool"
script="${TEST_SRCDIR}/graphrun/tests/expr_numpy.py"
work="${TEST_TMPDIR}/expr_numpy"
rm -rf "$work" && mkdir -p "$work"
exec /usr/bin/python3 "$script" "$tool" "$work"
