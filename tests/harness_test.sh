#!/usr/bin/env bash
# harness_test.sh - the test runner (tests/testing.c) keeps its promises: run against
# tests/harness_cases, whose cases pass, fail, crash, skip, exit and hang on purpose, it
# prints exactly one PASS/FAIL/SKIP line per case with the right reason and goes on after
# each failure, ends with the summary, exits 1; a hung case is killed with the processes it
# forked when its time limit (the binary's, the environment's or --timeout) passes;
# --only, --no-fork and bad options do what they say; SIGTERM to the runner ends the case.
# The binary's own lines are shown indented: tools/test must count only this script's.
set -u
bin="${TEST_SRCDIR}/graphrun/tests/harness_cases"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
out="$tmp/out" err="$tmp/err" pidfile="$tmp/pid"
export GR_HARNESS_PIDFILE="$pidfile"
unset GR_TEST_TIMEOUT
# A plain SIGSEGV for `crashes` under any sanitizer (the case also resets the handler).
for v in ASAN_OPTIONS TSAN_OPTIONS UBSAN_OPTIONS; do
  export "$v=${!v:+${!v}:}handle_segv=0"
done

# run EXPECTED_RC ARGS...: runs the binary, captures stdout and stderr, checks the status.
run() {
  local want=$1 rc
  shift
  rm -f "$pidfile"
  "$bin" "$@" >"$out" 2>"$err"
  rc=$?
  if [[ $rc != "$want" ]]; then
    echo "    harness_cases $*: exit $rc, expected $want"; show
    return 1
  fi
}
show() { sed 's/^/    | /' "$out" "$err"; }
# line REGEX: exactly one line of the output matches the (extended, whole-line) pattern.
line() {
  local n
  n=$(grep -cxE -- "$1" "$out")
  [[ $n == 1 ]] || { echo "    $n lines match '$1' in:"; show; return 1; }
}
# counted N: N lines start with PASS, FAIL or SKIP (what tools/test counts).
counted() {
  local n
  n=$(grep -cE '^(PASS|FAIL|SKIP) ' "$out")
  [[ $n == "$1" ]] || { echo "    $n PASS/FAIL/SKIP lines, expected $1, in:"; show; return 1; }
}
# last TEXT: the output's last line is TEXT.
last() {
  [[ $(tail -n 1 "$out") == "$1" ]] || { echo "    the last line is not '$1':"; show; return 1; }
}
# after FIRST SECOND: the line after the line FIRST is SECOND.
after() {
  [[ $(grep -x -A1 -F -- "$1" "$out" | tail -n 1) == "$2" ]] ||
    { echo "    '$2' does not come right after '$1':"; show; return 1; }
}
# gone: the process `hangs` forked (its pid in $pidfile) is dead (or a zombie) within 5 s.
gone() {
  local pid state
  [[ -s $pidfile ]] || { echo "    hangs wrote no pid"; return 1; }
  pid=$(cat "$pidfile")
  for _ in $(seq 50); do
    state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || return 0
    [[ $state == Z ]] && return 0
    sleep 0.1
  done
  echo "    process $pid, forked by hangs, still runs (state $state)"
  kill -9 "$pid" 2>/dev/null
  return 1
}
failed=0
case_() {
  local name=$1; shift
  if "$@"; then echo "PASS $name"; else echo "FAIL $name"; failed=1; fi
}

f='tests/harness_cases\.c:[0-9]+'
bits='got 0 \(0x00000000\) vs -0 \(0x80000000\)'
near='got 1 vs 1\.5 \(difference 0\.5, tolerance 0\.25\)'
every_case_one_line_and_the_run_goes_on() {
  run 1 &&
    counted 17 &&
    line 'PASS passes' &&
    line "FAIL fails_an_assertion: $f: expected two \+ 1 == 4, got 3 vs 4" &&
    line "FAIL fails_float_bits: $f: expected zero == -zero bit for bit, $bits" &&
    line 'PASS assertions_that_hold' &&
    line "FAIL fails_double_near: $f: expected 1\.0 within 0\.25 of 1\.5, $near" &&
    line "FAIL fails_str_eq: $f: expected s == \"abd\", got \"abc\" vs \"abd\"" &&
    line "FAIL fails_with_lines: $f: expected log to contain \"third\", got \"first" &&
    line '    PASS not a case' &&
    line 'FAIL crashes: killed by signal 11 \(Segmentation fault\)' &&
    line 'SKIP skips: nothing to do here' &&
    line 'FAIL exits: exited with status 3 without reporting' &&
    line 'FAIL hangs: timed out after 2 s' &&
    line 'FAIL fails_after_passing: exited with status 7 after the case passed .*' &&
    line 'PASS own_alarm' &&
    line 'FAIL fails_from_signal: hung \(alarm\)' &&
    line 'PASS forked_process_fails' &&
    line "    in a process forked by the case: $f: expected 1 \+ 1 == 3, got 2 vs 3" &&
    line 'PASS sets_state' &&
    line 'PASS sees_fresh_state' &&
    last '# 6 passed, 10 failed, 1 skipped'
}
# The lines come in the order of the cases, each right after what its case printed (also
# when the case crashed).
lines_in_case_order() {
  run 1 &&
    grep -E '^(PASS|FAIL|SKIP) ' "$out" | awk '{print $2}' | tr -d : >"$tmp/order" &&
    printf '%s\n' passes fails_an_assertion fails_float_bits assertions_that_hold \
      fails_double_near fails_str_eq fails_with_lines crashes skips exits hangs \
      fails_after_passing own_alarm fails_from_signal forked_process_fails sets_state \
      sees_fresh_state >"$tmp/want" &&
    { diff "$tmp/want" "$tmp/order" >/dev/null || { echo "    order differs:"; show; false; }; } &&
    after '    output of passes' 'PASS passes' &&
    after '    output of crashes' 'FAIL crashes: killed by signal 11 (Segmentation fault)'
}
hung_case_killed_with_what_it_forked() {
  run 1 --only hangs && counted 1 && line 'FAIL hangs: timed out after 2 s' && gone
}
timeout_from_the_environment() {
  GR_TEST_TIMEOUT=1 run 1 --only hangs && line 'FAIL hangs: timed out after 1 s' && gone
}
timeout_option_wins_over_the_environment() {
  GR_TEST_TIMEOUT=100 run 1 --only hangs --timeout 0.5 &&
    line 'FAIL hangs: timed out after 0.5 s' && gone
}
only_runs_one_case() {
  run 0 --only skips && counted 1 && line 'SKIP skips: nothing to do here' &&
    last '# 0 passed, 0 failed, 1 skipped' &&
    run 0 --only=passes && counted 1 && line 'PASS passes'
}
no_fork_stops_at_the_first_failure() {
  run 1 --no-fork && counted 2 && line 'PASS passes' &&
    line "FAIL fails_an_assertion: $f: expected two \+ 1 == 4, got 3 vs 4" &&
    { [[ $(tail -n 1 "$out") == "FAIL fails_an_assertion: "* ]] ||
      { echo "    the failure is not the last line:"; show; false; }; }
}
no_fork_runs_a_passing_case_in_process() {
  run 0 --no-fork --only forked_process_fails && counted 1 &&
    line 'PASS forked_process_fails' && last '# 1 passed, 0 failed, 0 skipped'
}
bad_options_refused() {
  run 2 --only no_such_case && grep -q "no case named 'no_such_case'" "$err" &&
    run 2 --timeout 0 && run 2 --timeout abc && run 2 --bogus &&
    GR_TEST_TIMEOUT=-1 run 2 && counted 0
}
sigterm_ends_the_running_case() {
  local runner rc t0
  rm -f "$pidfile"
  t0=$SECONDS
  "$bin" --only hangs --timeout 60 >"$out" 2>"$err" &
  runner=$!
  for _ in $(seq 100); do [[ -s $pidfile ]] && break; sleep 0.05; done
  kill -TERM "$runner"
  wait "$runner"
  rc=$?
  [[ $rc == 143 ]] || { echo "    exit $rc, expected 143 (SIGTERM)"; show; return 1; }
  ((SECONDS - t0 < 30)) || { echo "    took $((SECONDS - t0)) s"; return 1; }
  gone
}

case_ every_case_one_line_and_the_run_goes_on every_case_one_line_and_the_run_goes_on
case_ lines_in_case_order lines_in_case_order
case_ hung_case_killed_with_what_it_forked hung_case_killed_with_what_it_forked
case_ timeout_from_the_environment timeout_from_the_environment
case_ timeout_option_wins_over_the_environment timeout_option_wins_over_the_environment
case_ only_runs_one_case only_runs_one_case
case_ no_fork_stops_at_the_first_failure no_fork_stops_at_the_first_failure
case_ no_fork_runs_a_passing_case_in_process no_fork_runs_a_passing_case_in_process
case_ bad_options_refused bad_options_refused
case_ sigterm_ends_the_running_case sigterm_ends_the_running_case
exit $failed
