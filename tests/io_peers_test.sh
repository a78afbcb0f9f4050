#!/usr/bin/env bash
# io_peers_test.sh - tools/bench/io_peers (`graphrun run` beside its peers on one dataset)
# with the real graphrun on the host backend as both the new and the old driver and a
# dataset of a few MiB: the head line, the runs interleaved round by round, every output
# right with each run's own peak resident set, the directory left empty; outputs wrong in
# their first or last element or missing are caught whatever the driver's exit; a failing
# peer fails the tool while the others still run; a stopped tool stops its peer and removes
# the dataset; a bad command line is refused (exit 2).
set -u
cd "${TEST_SRCDIR}/graphrun" || exit 1
work="${TEST_TMPDIR}/io_peers"
rm -rf "$work" && mkdir -p "$work/bio"
. tests/bench_stand_in.sh
gr="$PWD/tools/graphrun/graphrun"
peers=($py tools/bench/io_peers --bin "$gr" --dir "$work/bio" --backend host --count 4
  --elems 262144 --budget 16MiB --no-torch)

# Drivers standing in for an old one: one that exits 3; one whose outputs are wrong (the
# first file's last element and the second's first one bit off, the third missing).
printf '#!/bin/sh\necho "old driver: cannot start" >&2\nexit 3\n' >"$work/exits3"
cat >"$work/wrong" <<EOF
#!/bin/sh
"$gr" "\$@" || exit
while [ "\$1" != --output ]; do shift; done
exec $py - "\$2" <<'PY'
import numpy as np, os, sys
for n, at in (("t00000.npy", -1), ("t00001.npy", 0)):
    y = np.load(os.path.join(sys.argv[1], n), mmap_mode="r+")
    y.view(np.uint32)[at] ^= 1
    y.flush()
os.remove(os.path.join(sys.argv[1], "t00002.npy"))
PY
EOF
# One whose outputs are right but whose exit is not.
printf '#!/bin/sh\n"%s" "$@"\nexit 1\n' "$gr" >"$work/exits1"
# One that says it started (its pid: exec keeps it) and then waits, to be stopped.
printf '#!/bin/sh\necho $$ >%s/started\nexec sleep 60\n' "$work" >"$work/waits"
chmod +x "$work/exits3" "$work/wrong" "$work/exits1" "$work/waits"

empty() { # the tool left nothing under --dir
  [[ -z $(ls -A "$work/bio") ]] || { echo "    left in $work/bio: $(ls -A "$work/bio")"; return 1; }
}

peers_interleave_and_are_checked() {
  status 0 "${peers[@]}" --old-bin "$gr" --big-window 64MiB --rounds 2 \
    --json "$work/peers.jsonl" --commit abc1234 || return 1
  has "^  streaming round 1: [0-9.]+ s, peak RSS [0-9,]+ MB, 4 of 4 right$" &&
    has "^  streaming_big_window round 2: [0-9.]+ s, peak RSS [0-9,]+ MB, 4 of 4 right$" &&
    has "^  old round 2: [0-9.]+ s, peak RSS [0-9,]+ MB, 4 of 4 right$" &&
    has "^  streaming: median [0-9.]+ s over 2 runs, peak RSS [0-9,]+ MB at most$" || return 1
  empty || return 1
  $py - "$work/peers.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
head, runs, sums = lines[0], lines[1:7], lines[7:]
names = ["streaming", "streaming_big_window", "old"]
assert head["tool"] == "io_peers" and head["commit"] == "abc1234", head
assert head["count"] == 4 and head["elems"] == 262144 and head["backend"] == "host", head
assert head["budget"] == "16MiB" and head["peers"] == names, head
assert head["bytes_in"] == 4 * (262144 * 4 + 128), head
assert [(r["peer"], r["round"]) for r in runs] == [(n, k) for k in (1, 2) for n in names], runs
for r in runs:
    assert r["exit"] == 0 and r["right"] == 4 and r["wrong"] == 0, r
    assert "failed" not in r and r["commit"] == "abc1234", r
    assert 0 < r["peak_rss_bytes"] < 1 << 30 and r["seconds"] > 0, r
assert [s["peer"] for s in sums] == names and all(s["summary"] for s in sums), sums
for s in sums:
    assert s["runs"] == 2 and s["failed"] == 0 and s["median_seconds"] > 0, s
    assert s["max_peak_rss_bytes"] == max(r["peak_rss_bytes"] for r in runs
                                          if r["peer"] == s["peer"]), s
PY
}
wrong_outputs_are_caught() { # a driver that exits 0 with outputs wrong by one bit, or none
  # Files longer than the head and the tail checked: the last element is the tail's alone.
  status 1 "${peers[@]}" --elems 1200000 --old-bin "$work/wrong" --rounds 1 \
    --json "$work/wrong.jsonl" || return 1
  has "^  old round 1: .* 1 of 4 right: FAILED \(exit 0, 3 wrong: " &&
    has "^  streaming round 1: .* 4 of 4 right$" && empty || return 1
  $py - "$work/wrong.jsonl" <<'PY'
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1])][1:3]
assert [(r["peer"], r["right"], r["wrong"]) for r in runs] == [("streaming", 4, 0),
                                                               ("old", 1, 3)], runs
PY
}
a_failed_run_fails_the_tool() { # the failing peer's runs, and the others still run
  status 1 "${peers[@]}" --old-bin "$work/exits3" --rounds 2 --json "$work/failed.jsonl" ||
    return 1
  has "^  old round 1: .*0 of 4 right: FAILED \(exit 3, 4 wrong: old driver: cannot start\)" &&
    has "^  old round 2: .*FAILED" && has "^  streaming round 2: .* 4 of 4 right$" &&
    has "^  old: no run succeeded$" && empty || return 1
  # The stand-in shell's peak is the launcher's ~8 MB (its own is less), not the tool's,
  # which NumPy alone puts above 16 MiB.
  $py - "$work/failed.jsonl" <<'PY' || return 1
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1])][1:5]
assert [(r["peer"], "failed" in r) for r in runs] == [("streaming", False), ("old", True)] * 2
for r in runs[1::2]:
    assert r["exit"] == 3 and 0 < r["peak_rss_bytes"] < 16 << 20, r
PY
  status 1 "${peers[@]}" --old-bin false --rounds 1 &&
    has "^  old round 1: .*FAILED \(exit 1, " &&
    status 1 "${peers[@]}" --old-bin "$work/exits1" --rounds 1 &&
    has "^  old round 1: .* 4 of 4 right: FAILED \(exit 1, 0 wrong: " && empty
}
a_stopped_tool_removes_the_dataset() { # SIGTERM while a peer runs: the peer stopped too
  rm -f "$work/started"
  "${peers[@]}" --old-bin "$work/waits" --rounds 1 >"$out" 2>&1 &
  local tool=$! k
  for ((k = 0; k < 300; k++)); do [[ -s $work/started ]] && break; sleep 0.1; done
  [[ -s $work/started ]] || { echo "    the old peer never started"; kill "$tool"; show; return 1; }
  kill -TERM "$tool"
  wait "$tool"
  local rc=$? pid st=""
  ((rc == 143)) || { echo "    exit $rc after SIGTERM, expected 143"; show; return 1; }
  pid=$(cat "$work/started")
  for ((k = 0; k < 50; k++)); do
    st=$(cut -d' ' -f3 "/proc/$pid/stat" 2>/dev/null)
    [[ -z $st || $st == Z ]] && break
    sleep 0.1
  done
  [[ -z $st || $st == Z ]] ||
    { echo "    the peer ($pid) outlived the tool"; kill "$pid"; return 1; }
  empty
}
bad_command_lines_refused() {
  status 2 $py tools/bench/io_peers --bin "$gr" --dir "$work/bio" --elems 4 && has "--count" &&
    status 2 "${peers[@]}" --rounds 0 && has "1 or more" &&
    status 2 "${peers[@]}" --backend tpu && has "invalid choice" &&
    status 2 "${peers[@]}" --budget lots && has "a size is digits and a unit" &&
    status 2 "${peers[@]}" --old-bin "$work/none" && has "not an executable" && empty
}

case_ peers_interleave_and_are_checked peers_interleave_and_are_checked
case_ wrong_outputs_are_caught wrong_outputs_are_caught
case_ a_failed_run_fails_the_tool a_failed_run_fails_the_tool
case_ a_stopped_tool_removes_the_dataset a_stopped_tool_removes_the_dataset
case_ bad_command_lines_refused bad_command_lines_refused
exit $failed
