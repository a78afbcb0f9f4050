#!/usr/bin/env bash
# demo_test.sh - the graphrun binary end to end on the host backend: `graphrun demo` verifies
# its outputs and reports the budget; bad flags, a budget too small for one iteration and a
# missing GPU each get their exit status and a clear message.
set -u
bin="${TEST_SRCDIR}/graphrun/tools/graphrun/graphrun"
out="${TEST_TMPDIR}/out" err="${TEST_TMPDIR}/err"

# run EXPECTED_RC ARGS...: runs the binary, captures stdout and stderr, checks the status.
run() {
  local want=$1 rc
  shift
  "$bin" "$@" >"$out" 2>"$err"
  rc=$?
  if [[ $rc != "$want" ]]; then
    echo "    graphrun $*: exit $rc, expected $want"; sed 's/^/    | /' "$out" "$err"
    return 1
  fi
}
has() { grep -qF -- "$2" "$1" || { echo "    missing \"$2\" in:"; sed 's/^/    | /' "$1"; return 1; }; }
failed=0
case_() {
  local name=$1; shift
  if "$@"; then echo "PASS $name"; else echo "FAIL $name"; failed=1; fi
}

demo_verifies_every_output() {
  run 0 demo --backend host --count 13 --elems 1001 --workers 4 &&
    has "$out" "13 tensors x 1001 float32" &&
    has "$out" "backend: host" &&
    has "$out" "verified: 13 of 13 tensors equal the C reference bit for bit"
}
demo_budget_of_exactly_one_iteration() {
  # 1000 floats = 4000 bytes, one 4096-byte block; one worker takes it whole.
  run 0 demo --backend host --count 7 --elems 1000 --budget 4096 --workers 1 &&
    has "$out" "peak budget in use 4.00 KiB of 4.00 KiB, 0 B in use now" &&
    has "$out" "verified: 7 of 7"
}
demo_auto_says_which_backend() {
  run 0 demo --count 2 --elems 10 && has "$out" "backend: "
}
demo_refuses_bad_flags() {
  run 2 demo --count abc && has "$err" "invalid value 'abc' for --count" &&
    run 2 demo --budget 12XB && has "$err" "invalid value '12XB' for --budget" &&
    run 2 demo --backend tpu && has "$err" "invalid value 'tpu' for --backend" &&
    run 2 demo --bogus && run 2 demo extra-argument && has "$err" "unexpected argument"
}
demo_runs_tensors_larger_than_budget_in_chunks() {
  # 40000-byte tensors under a 4096-byte budget: the seed graph is elementwise, so each
  # tensor runs in chunks (a graph that cannot be split is refused: runtime_test).
  run 0 demo --backend host --count 5 --elems 10000 --budget 4096 &&
    has "$out" "verified: 5 of 5 tensors equal the C reference bit for bit" &&
    has "$out" "of 4.00 KiB, 0 B in use now"
}
driver_version_help_unknown() {
  run 0 --version && has "$out" "graphrun 0." && run 0 --help && has "$out" "demo" &&
    run 0 demo --help && has "$out" "--budget SIZE" && run 2 frobnicate &&
    has "$err" "unknown command 'frobnicate'" && run 2
}

demo_falls_back_when_memory_cannot_be_pinned() {
  # GR_FAULT fails every pinned allocation (as a tiny RLIMIT_MEMLOCK would on a GPU
  # machine): the tensors and the staging buffers fall back to pageable memory, with one
  # warning, and every output is still right.
  GR_FAULT=pin:1+ run 0 demo --backend host --memory pinned --count 40 --elems 700 &&
    has "$out" "verified: 40 of 40" &&
    has "$err" "using pageable memory instead" &&
    [[ $(grep -c "warning" "$err") == 1 ]] || { echo "    expected exactly one warning"; return 1; }
}
demo_refuses_a_bad_fault_plan() {
  GR_FAULT=nonsense:1 run 3 demo --backend host --count 2 --elems 10 &&
    has "$err" "fault plan 'nonsense:1': unknown site"
}

case_ demo_verifies_every_output demo_verifies_every_output
case_ demo_budget_of_exactly_one_iteration demo_budget_of_exactly_one_iteration
case_ demo_auto_says_which_backend demo_auto_says_which_backend
case_ demo_refuses_bad_flags demo_refuses_bad_flags
case_ demo_runs_tensors_larger_than_budget_in_chunks demo_runs_tensors_larger_than_budget_in_chunks
case_ driver_version_help_unknown driver_version_help_unknown
case_ demo_falls_back_when_memory_cannot_be_pinned demo_falls_back_when_memory_cannot_be_pinned
case_ demo_refuses_a_bad_fault_plan demo_refuses_a_bad_fault_plan
demo_without_gpu_fails_clearly() {
  run 3 demo --backend cuda --count 1 --elems 1 && has "$err" "graphrun demo: backend cuda"
}
if "$bin" demo --backend cuda --count 1 --elems 1 >/dev/null 2>&1; then
  echo "SKIP demo_without_gpu_fails_clearly: a CUDA device is present"
else
  case_ demo_without_gpu_fails_clearly demo_without_gpu_fails_clearly
fi
exit $failed
