#!/usr/bin/env bash
# io_ab_test.sh - tools/bench/io_ab (`graphrun bench --io` under two or more settings,
# interleaved) with the real graphrun on the host backend and a dataset of a few MiB: each
# variant's environment reaches its runs (the window grown by its own thread, or by the
# stream's with GR_TEST_WINDOW_GROWTH=owner), the runs interleave round by round, every run
# is in the JSON Lines with its labels and checked outputs, a failing run fails the tool
# while the others still run, and a bad command line is refused (exit 2).
set -u
cd "${TEST_SRCDIR}/graphrun" || exit 1
work="${TEST_TMPDIR}/io_ab"
rm -rf "$work" && mkdir -p "$work/bio"
. tests/bench_stand_in.sh
ab=($py tools/bench/io_ab --bin "$PWD/tools/graphrun/graphrun" --dir "$work/bio")
bench=(-- --backend host --count 4 --elems 262144 --host-memory 8MiB)

variants_interleave_with_their_environment() {
  status 0 "${ab[@]}" --rounds 2 --variant thread= --variant owner=GR_TEST_WINDOW_GROWTH=owner \
    --json "$work/ab.jsonl" --commit abc1234 "${bench[@]}" || return 1
  has "^ +thread round 1: ratio " && has "^ +owner round 2: ratio " &&
    has "^ +thread \(2 runs\): ratio " && has "^ +owner \(2 runs\): ratio " || return 1
  [[ -z $(ls -A "$work/bio") ]] || { echo "    bench left files in its directory"; return 1; }
  $py - "$work/ab.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
head, runs = lines[0], lines[1:]
assert head["tool"] == "io_ab" and head["commit"] == "abc1234", head
assert head["variants"] == {"thread": {}, "owner": {"GR_TEST_WINDOW_GROWTH": "owner"}}, head
assert [(r["variant"], r["round"]) for r in runs] == \
    [("thread", 1), ("owner", 1), ("thread", 2), ("owner", 2)], runs
for r in runs:
    assert r["exit"] == 0 and r["verified"] == r["tensors"] == 4 and r["wrong"] == 0, r
    assert "failed" not in r and r["commit"] == "abc1234", r
    grown = r["run"]["host_memory_segments_grown"]
    assert r["run"]["host_memory_segments"] >= 2, r["run"]
    assert (grown == 0) == (r["variant"] == "owner"), (r["variant"], r["run"])
PY
}
a_failed_run_fails_the_tool() { # the failing variant's runs, and the others still run
  status 1 "${ab[@]}" --rounds 1 --variant good= --variant bad=GR_FAULT=arena:2 \
    --json "$work/bad.jsonl" "${bench[@]}" || return 1
  has "^ +bad round 1: FAILED \(exit 1, " && has "^ +good round 1: ratio " &&
    has "^ +bad \(0 runs\)|^ +bad: no run succeeded" || return 1
  $py - "$work/bad.jsonl" <<'PY'
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1])][1:]
assert [r["variant"] for r in runs] == ["good", "bad"], runs
assert "failed" not in runs[0] and "failed" in runs[1], runs
PY
}
bad_command_lines_refused() {
  status 2 "${ab[@]}" --variant only= "${bench[@]}" && has "twice at least" &&
    status 2 "${ab[@]}" --variant a= --variant a=X=1 "${bench[@]}" && has "each name once" &&
    status 2 "${ab[@]}" --variant a= --variant b=X "${bench[@]}" && has "VAR=VALUE" &&
    status 2 "${ab[@]}" --variant a= --variant b= -- --json && has "this tool's to give"
}

case_ variants_interleave_with_their_environment variants_interleave_with_their_environment
case_ a_failed_run_fails_the_tool a_failed_run_fails_the_tool
case_ bad_command_lines_refused bad_command_lines_refused
exit $failed
