# bench_stand_in.sh - sourced by tests/sizes_test.sh and tests/targets_test.sh, which test
# tools that run `graphrun bench --json` (tools/bench/sizes_bench, targets_bench) without a
# GPU: the case runner and output checks they share, and $work/graphrun, a stand-in for
# graphrun that runs tests/sizes_fake_graphrun.py. Set `work` (an empty folder) first; the
# caller is in the runfiles root.
py=/usr/bin/python3
out="$work/out"
failed=0
case_() {
  local name=$1; shift
  if "$@"; then echo "PASS $name"; else echo "FAIL $name"; failed=1; fi
}
show() { sed 's/^/    | /' "$out"; }
status() { # WANT CMD...: exits WANT
  local want=$1; shift
  "$@" >"$out" 2>&1
  local rc=$?
  [[ $rc == "$want" ]] || { echo "    $*: exit $rc, expected $want"; show; return 1; }
}
# has ERE: the output matches it
has() { grep -Eq -- "$1" "$out" || { echo "    no '$1' in:"; show; return 1; }; }

printf '#!/bin/sh\nexec %s %s/tests/sizes_fake_graphrun.py "$@"\n' "$py" "$PWD" >"$work/graphrun"
chmod +x "$work/graphrun"
