#!/usr/bin/env bash
# bench_smoke_test.sh - the two host-side benchmarks (tools/bench/copier_bench, scale_bench)
# still build, run and verify what they measure, in small sizes: timing is not judged here
# (docs/PERFORMANCE.md has the figures), only that every output they check is right and
# that bad arguments are refused.
set -u
dir="${TEST_SRCDIR}/graphrun/tools/bench"
out="${TEST_TMPDIR}/out"
failed=0
case_() {
  local name=$1; shift
  if "$@"; then echo "PASS $name"; else echo "FAIL $name"; failed=1; fi
}
# ok CMD...: exits 0 and says every output was verified.
ok() {
  "$@" >"$out" 2>&1 || { echo "    $*: exit $?"; sed 's/^/    | /' "$out"; return 1; }
  grep -q "verified" "$out" || { echo "    no 'verified' in:"; sed 's/^/    | /' "$out"; return 1; }
  ! grep -q "^FAIL" "$out"
}
refused() {
  "$@" >"$out" 2>&1
  [[ $? == 2 ]] || { echo "    $*: expected exit 2"; sed 's/^/    | /' "$out"; return 1; }
}

case_ copier_bench_small_ops ok "$dir/copier_bench" --ops 300 --bytes 5000 --rounds 2 --threads 2
case_ copier_bench_large_ops ok "$dir/copier_bench" --ops 5 --bytes 3000000 --rounds 2 --threads 2
case_ copier_bench_refuses_zero refused "$dir/copier_bench" --ops 0
case_ scale_bench_host ok "$dir/scale_bench" --count 300 --small 30 --elems 64 --trials 1 --ring 64
in_flight_json() { # one JSON object a trial, every one verified, both modes
  ok "$dir/scale_bench" --count 300 --small 30 --elems 64 --trials 2 --ring 64 --in-flight \
    --json && python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 2 and all(r["verified"] and r["in_flight"] for r in rows), rows
assert all(r["small_over_one"] > 0 and r["count"] == 300 and r["small"] == 30 for r in rows), rows
PY
}
case_ scale_bench_in_flight_json in_flight_json
case_ scale_bench_refuses_bad_slices refused "$dir/scale_bench" --count 100 --small 30
exit $failed
