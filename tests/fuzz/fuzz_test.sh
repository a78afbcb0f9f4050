#!/usr/bin/env bash
# fuzz_test.sh NAME SECONDS CORPUS_DIR... - a short libFuzzer run as a test.
#
# Runs the fuzzer NAME (tests/fuzz/NAME, built by clang_fuzz_binary) for SECONDS over a
# writable copy of the corpus directories (paths in the runfiles), with NAME.dict when
# there is one. Prints "PASS NAME" when the run ends without a crash, leak, timeout or
# out-of-memory, else "FAIL NAME: ..." with the report's tail; the input that failed is kept
# in $TEST_UNDECLARED_OUTPUTS_DIR (bazel-testlogs/.../test.outputs/) for replaying with
#   bazel-bin/tests/fuzz/NAME CRASH_FILE
set -u
name=$1 seconds=$2
shift 2
here="${TEST_SRCDIR}/graphrun"
bin="$here/tests/fuzz/$name"
work="${TEST_TMPDIR}/$name"
mkdir -p "$work/corpus" "$work/artifacts"
for dir in "$@"; do
  cp "$here/$dir"/* "$work/corpus/"
done
dict=()
[[ -f "$here/tests/fuzz/$name.dict" ]] && dict=("-dict=$here/tests/fuzz/$name.dict")

# The fuzzer's own sanitizer settings, whatever the --config (asan sets ASAN_OPTIONS for
# gcc-built tests, which would otherwise apply here too).
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
unset TSAN_OPTIONS
log="$work/log"
"$bin" -max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 -max_len=4096 \
  -print_final_stats=1 "${dict[@]+"${dict[@]}"}" -artifact_prefix="$work/artifacts/" \
  "$work/corpus" >"$log" 2>&1
rc=$?
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
crashes=$(find "$work/artifacts" -type f | wc -l)
if ((rc == 0 && crashes == 0)); then
  echo "    ${execs:-?} inputs in ${seconds}s, corpus of $(ls "$work/corpus" | wc -l) entries"
  echo "PASS $name"
  exit 0
fi
# The report's first line, and the report itself (else the log's tail).
pattern='==[0-9]+==ERROR|runtime error|deadly signal|broken (contract|invariant)|ALARM|out-of-memory'
reason=$(grep -m1 -E "$pattern" "$log")
echo "FAIL $name: exit $rc, ${crashes} failing input(s): ${reason:-see below}"
report=$(awk -v re="$pattern" 'found || $0 ~ re { found = 1; print }' "$log")
[[ -n $report ]] || report=$(tail -40 "$log")
head -60 <<<"$report" | sed 's/^/    | /'
if [[ -n "${TEST_UNDECLARED_OUTPUTS_DIR:-}" ]]; then
  cp "$work/artifacts"/* "$TEST_UNDECLARED_OUTPUTS_DIR/" 2>/dev/null
fi
exit 1
